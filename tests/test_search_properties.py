"""Property tests for tool search: the Rust BM25 index against the Python reference on tie-heavy
catalogs, the tokeniser through ``matched``, no crash on any query text, and the query byte cut."""

from __future__ import annotations

import math
import string

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tests.reference.search import STOP_WORDS, ReferenceIndex, cut_query, words

from prism_tools import SearchHit, ToolDefinition, ToolSearchIndex, create_tool_registry
from prism_tools.search import MAX_TOP_K

Catalog = list[tuple[str, str]]

# A small vocabulary, so that tools share terms: stem families (forecast/forecasts/forecasting),
# prefix families (summary/summaries/summarize/summarization), words of exactly PREFIX_CHARS
# characters (no prefix term), digits, and non-ASCII words (not stemmed; Greek final sigma).
VOCABULARY = [
    "weather", "weathers", "forecast", "forecasts", "forecasting", "summary", "summaries",
    "summarize", "summarization", "file", "files", "read", "reader", "reading", "send",
    "sending", "email", "emails", "mail", "mailbox", "http", "server", "servers", "user",
    "users", "token", "oauth2", "v2", "get", "list", "lists", "café", "über", "straße", "ärger",
    "天气", "一二", "λόγος", "ab", "x", "42",
]  # fmt: skip
QUERY_STOP_WORDS = ["the", "of", "and", "to", "now", "it", "a", "for", "with", "your", "IS"]
assert all(word.lower() in STOP_WORDS for word in QUERY_STOP_WORDS)

# Characters on which Python's str predicates and Rust's char predicates agree (see the
# reference module docstring): ASCII, a few Latin-1 letters, Greek (with both sigmas), CJK.
SAFE_CHARACTERS = (
    string.ascii_letters + string.digits + string.punctuation + " \t\n\x00"
    + "éüßÄÉÜẞ²" + "λόγοςΣΛΌ" + "天气一二"
)  # fmt: skip
# The same, weighted towards case changes and digits inside runs, for the tokeniser property.
CASE_HEAVY_CHARACTERS = "aAbBzZ09_ .-/éÉßẞÄΣσλΛ天一²"

SEPARATORS = [" ", " ", ", ", ". ", "; ", "-", "/", "  ", "\n", "_"]


def cased(word: str, style: int) -> str:
    return (word, word.capitalize(), word.upper())[style]


def join_name(parts: list[str], style: str) -> str:
    if style == "camel":
        return parts[0] + "".join(part.capitalize() for part in parts[1:])
    if style == "pascal":
        return "".join(part.capitalize() for part in parts)
    if style == "acronym":  # HTTPServer: an upper-case word, then capitalised ones
        return parts[0].upper() + "".join(part.capitalize() for part in parts[1:])
    return style.join(parts)


NAME_STYLES = ["_", "-", ".", "/", " ", "camel", "pascal", "acronym", ""]

vocabulary_words = st.sampled_from(VOCABULARY)
any_word = vocabulary_words | st.sampled_from(QUERY_STOP_WORDS)
noise = st.text(alphabet=SAFE_CHARACTERS, min_size=1, max_size=6)


@st.composite
def text_of(
    draw: st.DrawFn, tokens: st.SearchStrategy[str], max_words: int, min_words: int = 0
) -> str:
    count = draw(st.integers(min_value=min_words, max_value=max_words))
    pieces: list[str] = []
    for position in range(count):
        if position:
            pieces.append(draw(st.sampled_from(SEPARATORS)))
        pieces.append(cased(draw(tokens), draw(st.integers(min_value=0, max_value=2))))
    return "".join(pieces)


@st.composite
def tool_names(draw: st.DrawFn, parts: list[str] | None = None) -> str:
    if parts is None:
        parts = draw(st.lists(any_word, min_size=1, max_size=3))
    return join_name(parts, draw(st.sampled_from(NAME_STYLES)))


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    """Tools with many ties: twins (the same words in another name style, same description),
    copied and shuffled descriptions, empty descriptions, names made of vocabulary words."""
    size = draw(st.integers(min_value=1, max_value=20))
    tools: Catalog = []
    name_parts: list[list[str]] = []
    for _ in range(size):
        mode = draw(st.sampled_from(["fresh", "fresh", "twin", "copy", "shuffle", "empty"]))
        if not tools:
            mode = "fresh"
        parts = draw(st.lists(any_word, min_size=1, max_size=3))
        if mode == "twin":
            source = draw(st.integers(min_value=0, max_value=len(tools) - 1))
            parts = name_parts[source]
            description = tools[source][1]
        elif mode in ("copy", "shuffle"):
            source = draw(st.integers(min_value=0, max_value=len(tools) - 1))
            description = tools[source][1]
            if mode == "shuffle":
                pieces = description.split(" ")
                description = " ".join(draw(st.permutations(pieces)))
        elif mode == "empty":
            description = ""
        else:
            description = draw(text_of(any_word, 10))
        name = draw(tool_names(parts))
        if not name or any(name == known for known, _ in tools):
            continue
        tools.append((name, description))
        name_parts.append(parts)
    return tools


query_tokens = st.one_of(
    vocabulary_words, vocabulary_words, vocabulary_words, st.sampled_from(QUERY_STOP_WORDS), noise
)
queries = text_of(query_tokens, 8)
# Small k often, so that ties fall across the cut.
top_k = st.integers(min_value=1, max_value=3) | st.integers(min_value=1, max_value=MAX_TOP_K)
max_query_limits = st.just(4096) | st.integers(min_value=1, max_value=48)


def definitions(catalog: Catalog) -> list[ToolDefinition]:
    return [ToolDefinition(name, description=description) for name, description in catalog]


def assert_same_hits(
    found: list[SearchHit], expected: list[tuple[str, float, tuple[str, ...]]]
) -> None:
    assert [hit.name for hit in found] == [name for name, _, _ in expected]
    for hit, (name, score, matched) in zip(found, expected, strict=True):
        assert math.isclose(hit.score, score, rel_tol=1e-9), (name, hit.score, score)
        assert hit.matched == matched, name


def catalog_queries(catalog: Catalog) -> st.SearchStrategy[str]:
    """Queries made mostly of words the catalog holds, so that most searches hit something."""
    held = sorted(
        {
            word
            for name, description in catalog
            for word in words(f"{name} {description}")
            if word not in STOP_WORDS
        }
    )
    if not held:
        return queries
    held_words = st.sampled_from(held)
    from_catalog = text_of(st.one_of(held_words, held_words, query_tokens), 6, min_words=1)
    return st.one_of(from_catalog, from_catalog, queries)


@given(catalogs(), top_k, st.data())
def test_rust_index_matches_the_reference(catalog: Catalog, k: int, data: st.DataObject) -> None:
    reference = ReferenceIndex(catalog)
    index = ToolSearchIndex(definitions(catalog))
    for query in data.draw(st.lists(catalog_queries(catalog), min_size=1, max_size=4)):
        assert_same_hits(index.search(query, k), reference.search(query, k))


@pytest.mark.parametrize(
    ("catalog", "query", "k"),
    [
        ([("getWeather", "forecast"), ("get_weather", "forecast"), ("w", "")], "weather", 1),
        ([("a", "summarization"), ("b", "summaries"), ("c", "")], "summarize summary", 2),
        ([("ΟΔΟΣ", "ΣΣ λόγοσ"), ("t", "λόγος")], "οδος λόγος σς ΛΌΓΟΣ", 3),
        ([("HTTPServer", ""), ("http_server", "HTTP")], "HTTPServer httpServer", 64),
        ([("b", "x y"), ("a", "y x"), ("c", "x"), ("d", "y y")], "x y x", 64),
        ([("forecasts", ""), ("forecasting", "forecast")], "Forecasts forecasting", 2),
        ([("x", "")], "", 1),
    ],
)
def test_tie_and_word_form_cases_match_the_reference(catalog: Catalog, query: str, k: int) -> None:
    expected = ReferenceIndex(catalog).search(query, k)
    assert expected or not query
    assert_same_hits(ToolSearchIndex(definitions(catalog)).search(query, k), expected)


@given(catalogs(), top_k, max_query_limits, st.data())
def test_query_limit_and_registry_source_match_the_reference(
    catalog: Catalog, k: int, max_query_bytes: int, data: st.DataObject
) -> None:
    query = data.draw(catalog_queries(catalog))
    reference = ReferenceIndex(catalog)
    index = ToolSearchIndex(
        create_tool_registry(definitions(catalog)), max_query_bytes=max_query_bytes
    )
    assert index.names == tuple(name for name, _ in catalog)
    expected = reference.search(query, k, max_query_bytes=max_query_bytes)
    assert_same_hits(index.search(query, k=k), expected)


@given(st.text(alphabet=CASE_HEAVY_CHARACTERS, max_size=30) | text_of(any_word | noise, 6))
@example("getWeatherNow HTTPServer oauth2Token fs.read_file-v2/all")
@example("ABCdef aBC AbC A1b 1A a1B Ab1C ẞaB ßA ÄÖ éÉé")
@example("ΣΣ ΣΑΣ λόγοΣ ΛΟΓΟΣλ")
@example("天Weather 一Abc 天气ABc ²A a²B")
@example("THE Of aND")
def test_tokeniser_matches_the_reference(text: str) -> None:
    # A lone tool holding `text` matches every query word of `text`, so `matched` is the Rust
    # tokeniser's list of distinct non-stop words, in order.
    index = ToolSearchIndex([ToolDefinition("_", description=text)])
    expected = tuple(dict.fromkeys(word for word in words(text) if word not in STOP_WORDS))
    hits = index.search(text, k=1)
    if not expected:
        assert hits == []
        return
    assert len(hits) == 1
    assert hits[0].matched == expected
    assert_same_hits(hits, ReferenceIndex([("_", text)]).search(text, 1))


MIXED_CATALOG = [
    ("get_weather", "Current weather and forecast for a city."),
    ("getWeatherNow", "Current weather now."),
    ("HTTPServer", "Start an HTTP server."),
    ("send_email", "Send an email to a user."),
    ("sendEmail", "Send an email to a user."),
    ("read_file", "Read a file."),
    ("天气", "天气 预报 forecast"),
    ("café_finder", "Find a café über straße."),
    ("summarize", "Summarization of long documents."),
    ("empty", ""),
]
MIXED_INDEX = ToolSearchIndex(definitions(MIXED_CATALOG))
MIXED_NAMES = [name for name, _ in MIXED_CATALOG]

repeated_text = st.builds(
    lambda unit, times: unit * times,
    st.text(min_size=1, max_size=8) | st.sampled_from(["weather ", "a\x00", "天", "é"]),
    st.integers(min_value=1, max_value=30_000),
)


@given(st.text() | st.text(alphabet=SAFE_CHARACTERS) | repeated_text, st.integers(1, MAX_TOP_K))
@example("\x00weather\x00", 1)
@example("weather " * 100_000, 2)
@example("\U0010ffff\u0345\u0301\u01c5\U0001d400\u24b6", 3)
def test_any_query_is_answered_sorted_and_cut_at_k(query: str, k: int) -> None:
    hits = MIXED_INDEX.search(query, k)
    assert len(hits) <= k
    positions = [MIXED_NAMES.index(hit.name) for hit in hits]
    assert len(set(positions)) == len(positions)
    for hit in hits:
        assert isinstance(hit, SearchHit)
        assert hit.score > 0.0
        assert math.isfinite(hit.score)
        assert hit.matched
        assert len(set(hit.matched)) == len(hit.matched)
    for (before, at_before), (after, at_after) in zip(
        zip(hits, positions, strict=True), zip(hits[1:], positions[1:], strict=True), strict=False
    ):
        assert before.score > after.score or (before.score == after.score and at_before < at_after)
    # A smaller k is a prefix of the full ranking.
    assert hits == MIXED_INDEX.search(query, MAX_TOP_K)[:k]


@given(
    text_of(st.sampled_from(["weather", "天气", "café", "über", "é", "天", "🙂", "𠀀", "now"]), 12)
    | st.text(max_size=40),
    st.integers(min_value=1, max_value=64),
)
@example("天气天气", 4)
@example("天气天气", 5)
@example("café weather", 4)
@example("🙂weather", 2)
def test_a_long_query_is_cut_at_a_character_boundary(query: str, max_query_bytes: int) -> None:
    catalog = [*MIXED_CATALOG, ("天", "天 天气"), ("caf", "café"), ("w", "weather weat")]
    limited = ToolSearchIndex(definitions(catalog), max_query_bytes=max_query_bytes)
    whole = ToolSearchIndex(definitions(catalog))
    cut = cut_query(query, max_query_bytes)
    assert len(cut.encode()) <= max_query_bytes
    assert query.startswith(cut)
    assert limited.search(query, k=MAX_TOP_K) == whole.search(cut, k=MAX_TOP_K)
