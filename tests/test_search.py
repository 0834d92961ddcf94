from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import pytest
from tests.reference.search import ReferenceIndex, cut_query

from prism_tools import (
    PrismError,
    SearchHit,
    ToolDefinition,
    ToolSearchCapacityError,
    ToolSearchIndex,
    create_tool_registry,
)
from prism_tools import search as search_module


class Named(NamedTuple):
    """A tool-like object: the index reads only ``name`` and ``description``."""

    name: str
    description: str


def tools(*pairs: tuple[str, str]) -> list[ToolDefinition]:
    return [ToolDefinition(name, description=description) for name, description in pairs]


def index_of(*pairs: tuple[str, str], **options: int) -> ToolSearchIndex:
    return ToolSearchIndex(tools(*pairs), **options)


def names(hits: Sequence[SearchHit]) -> list[str]:
    return [hit.name for hit in hits]


CATALOG = (
    ("getWeatherNow", "Current conditions for a city."),
    ("HTTPServer", "Start a local web listener."),
    ("fs.read_file-v2/all", "Return the contents."),
    ("send_email", "Deliver a message to a mailbox."),
    ("get_forecast", "Forecast for the next days; not an email tool."),
    ("summarize_text", "Summarization of long documents."),
    ("translate", "Translation between languages."),
)
INDEX = index_of(*CATALOG)


# --- text to terms ---------------------------------------------------------------------------


def test_camel_case_names_are_split_into_words() -> None:
    hits = INDEX.search("weather now")
    assert names(hits) == ["getWeatherNow"]
    # "now" is a stop word: only "weather" is a query word.
    assert hits[0].matched == ("weather",)
    assert names(INDEX.search("GET")) == ["getWeatherNow", "get_forecast"]


def test_acronyms_split_before_their_last_capital() -> None:
    hits = INDEX.search("http server")
    assert names(hits) == ["HTTPServer"]
    assert hits[0].matched == ("http", "server")
    assert names(INDEX.search("HTTPServer")) == ["HTTPServer"]
    # The run is split only at case changes: the lowercase run is one unknown word.
    assert INDEX.search("httpserver") == []
    acronyms = index_of(("parseJSONResponse", ""), ("oauth2Token", ""), ("ABC", ""))
    assert acronyms.search("json response")[0].matched == ("json", "response")
    assert acronyms.search("oauth2 token")[0].matched == ("oauth2", "token")
    assert names(acronyms.search("abc")) == ["ABC"]


@pytest.mark.parametrize("word", ["fs", "read", "file", "v2", "all_missing"])
def test_underscore_dash_dot_and_slash_separate_words(word: str) -> None:
    hits = INDEX.search(word)
    if word == "all_missing":
        # "all" is a stop word, "missing" is not in the index.
        assert hits == []
    else:
        assert names(hits) == ["fs.read_file-v2/all"]
        assert hits[0].matched == (word,)


def test_name_matches_outrank_description_only_matches() -> None:
    # The description-only match comes first in index order and repeats the word, yet a name
    # occurrence weighs three description occurrences.
    index = index_of(
        ("mailer", "Sends email; email delivery for users."),
        ("email", "Deliver messages to a mailbox."),
    )
    hits = index.search("email")
    assert names(hits) == ["email", "mailer"]
    assert hits[0].score > hits[1].score > 0.0
    assert names(INDEX.search("email")) == ["send_email", "get_forecast"]


def test_stemming_joins_word_forms() -> None:
    hits = INDEX.search("forecasts")
    assert names(hits) == ["get_forecast"]
    assert hits[0].matched == ("forecasts",)
    assert names(INDEX.search("translations")) == ["translate"]
    assert names(INDEX.search("Delivering MESSAGES")) == ["send_email"]


def test_prefix_terms_catch_forms_the_stemmer_keeps_apart() -> None:
    hits = INDEX.search("summaries")
    assert names(hits) == ["summarize_text"]
    assert hits[0].matched == ("summaries",)
    # Words of four characters or fewer have no prefix term: "summ" is not "summaries".
    assert INDEX.search("summ") == []
    # A prefix-only match scores below a full-term match: "summaries" stems to "summari",
    # "summarize" to "summar"; only their prefix "#summ" is shared.
    index = index_of(("a", "summaries"), ("b", "summarize"))
    hits = index.search("summarize")
    assert names(hits) == ["b", "a"]
    assert hits[1].matched == ("summarize",)
    assert hits[0].score > 4 * hits[1].score


def test_non_ascii_words_are_lowercased_but_not_stemmed() -> None:
    index = index_of(("café_finder", "Cafés über STRASSE"), ("天气", "天气预报"))
    assert index.search("CAFÉ")[0].matched == ("café",)
    assert names(index.search("ÜBER")) == ["café_finder"]
    assert names(index.search("天气")) == ["天气"]
    # "cafés" is not ASCII, so it is not stemmed to "café"; the prefix "#café" still joins them.
    hits = index.search("cafés")
    assert names(hits) == ["café_finder"]
    assert hits[0].score < index.search("café")[0].score


def test_matched_lists_distinct_lowercased_query_words_in_query_order() -> None:
    index = index_of(("get_weather", "Weather forecast for a city."), ("city_info", "A city."))
    hits = index.search("City WEATHER the weather forecasting unknownword city")
    assert names(hits) == ["get_weather", "city_info"]
    assert hits[0].matched == ("city", "weather", "forecasting")
    assert hits[1].matched == ("city",)
    assert all(isinstance(word, str) for word in hits[0].matched)


@pytest.mark.parametrize("query", ["", "   ", "the of and", "THE, Of; aNd!", "--- ... !!", "\x00"])
def test_empty_and_stop_word_queries_find_nothing(query: str) -> None:
    index = index_of(("the_tool", "the weather and the of"))
    assert index.search(query) == []
    assert INDEX.search(query) == []


def test_unknown_words_find_nothing() -> None:
    assert INDEX.search("zzzz qqqq") == []


# --- ranking ---------------------------------------------------------------------------------


def test_ties_keep_index_order() -> None:
    index = index_of(("zeta", "rain wind"), ("beta", "rain wind"), ("iota", "wind rain"))
    hits = index.search("rain wind")
    assert names(hits) == ["zeta", "beta", "iota"]
    assert hits[0].score == hits[1].score == hits[2].score


def test_k_cuts_the_ranking_and_defaults_to_sixteen() -> None:
    index = index_of(*((f"tool_{i}", "shared word") for i in range(40)))
    assert names(index.search("shared", k=5)) == [f"tool_{i}" for i in range(5)]
    assert names(index.search("shared")) == [f"tool_{i}" for i in range(16)]
    assert len(index.search("shared", k=None)) == search_module.DEFAULT_TOP_K
    assert len(index.search("shared", k=64)) == 40


def test_repeated_query_words_weigh_more_but_saturate() -> None:
    index = index_of(("a", "rain wind"), ("b", "wind wind"))
    # b matches only "wind": its score is that word's weight, (K3 + 1) * qtf / (K3 + qtf).
    scores = [index.search("rain" + " wind" * times)[1].score for times in (1, 2, 3, 50)]
    assert scores[1] == pytest.approx(scores[0] * 4 / 3, rel=1e-12)
    assert scores[2] == pytest.approx(scores[0] * 3 / 2, rel=1e-12)
    assert scores[2] < scores[3] < 2 * scores[0]


def test_scores_match_the_reference_on_the_catalog() -> None:
    reference = ReferenceIndex(CATALOG)
    for query in ["weather email", "summaries of documents", "get forecast", "translate http"]:
        expected = reference.search(query)
        found = INDEX.search(query)
        assert [(hit.name, hit.score, hit.matched) for hit in found] == expected


# --- sources ---------------------------------------------------------------------------------


def test_a_registry_is_indexed_in_registry_order() -> None:
    registry = create_tool_registry(tools(("zeta", "rain wind"), ("beta", "rain wind")))
    registry.register(ToolDefinition("iota", description="rain wind"))
    # Replacing a tool keeps its slot, and the index sees the new description.
    registry.register(ToolDefinition("zeta", description="rain wind, and also weather"))
    index = ToolSearchIndex(registry)
    assert index.names == ("zeta", "beta", "iota")
    assert names(index.search("rain")) == ["beta", "iota", "zeta"]  # zeta is longer now
    assert names(index.search("weather")) == ["zeta"]


def test_any_objects_with_name_and_description_are_tools() -> None:
    colours = ["red", "green", "blue"]
    index = ToolSearchIndex(Named(f"t{i}", colour) for i, colour in enumerate(colours))
    assert index.names == ("t0", "t1", "t2")
    assert names(index.search("blue")) == ["t2"]


def test_an_empty_index_searches_cleanly() -> None:
    for index in (ToolSearchIndex(), ToolSearchIndex(None), ToolSearchIndex([])):
        assert len(index) == 0
        assert index.names == ()
        assert index.search("anything") == []


def test_names_len_contains_and_limits() -> None:
    assert len(INDEX) == len(CATALOG)
    assert INDEX.names == tuple(name for name, _ in CATALOG)
    assert "send_email" in INDEX
    assert "send" not in INDEX
    assert 3 not in INDEX
    replaced = index_of(("get\ufffd\ufffd\ufffd", "weather"))
    assert "get\ufffd\ufffd\ufffd" in replaced
    assert "get\ud800" not in replaced  # compared exactly, not after a lossy conversion
    assert INDEX.max_indexed == search_module.DEFAULT_MAX_INDEXED == 1024
    assert INDEX.max_query_bytes == search_module.DEFAULT_MAX_QUERY_BYTES == 4096
    custom = index_of(("a", ""), max_indexed=7, max_query_bytes=9)
    assert (custom.max_indexed, custom.max_query_bytes) == (7, 9)
    assert repr(custom).startswith("ToolSearchIndex(tools=1, ")


def test_constants() -> None:
    assert search_module.DEFAULT_TOP_K == 16
    assert search_module.MAX_TOP_K == 64
    assert search_module.MAX_INDEXED_CEILING == 65536
    assert search_module.MAX_QUERY_BYTES_CEILING == 65536


def test_hit_names_are_the_tools_own_strings() -> None:
    name = "".join(["get", "_", "weather"])
    index = ToolSearchIndex([ToolDefinition(name, description="forecast")])
    assert index.search("weather")[0].name is name


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 65, -1, 1000])
def test_k_outside_one_to_sixty_four_is_a_value_error(k: int) -> None:
    with pytest.raises(ValueError, match="k must be between 1 and 64"):
        INDEX.search("weather", k=k)


@pytest.mark.parametrize("k", [True, False, 3.0, "3", [3]])
def test_k_that_is_not_an_int_is_a_type_error(k: object) -> None:
    with pytest.raises(TypeError, match="k must be an int"):
        INDEX.search("weather", k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [2**64, -3])
def test_out_of_range_ints_are_value_errors_naming_the_value(k: int) -> None:
    with pytest.raises(ValueError, match=f"k must be between 1 and 64, got {k}"):
        INDEX.search("weather", k=k)


@pytest.mark.parametrize("query", [None, b"weather", 3, ["weather"]])
def test_a_query_that_is_not_a_string_is_a_type_error(query: object) -> None:
    with pytest.raises(TypeError, match="search query must be a string"):
        INDEX.search(query)  # type: ignore[arg-type]


def test_more_tools_than_the_cap_is_a_capacity_error() -> None:
    catalog = [ToolDefinition(f"t{i}") for i in range(1025)]
    with pytest.raises(ToolSearchCapacityError, match="at most 1024 tools, got 1025") as info:
        ToolSearchIndex(catalog)
    assert isinstance(info.value, PrismError)
    assert info.value.code == "ERR_PRISM_SEARCH_CAPACITY"
    assert "max_indexed" in str(info.value)
    with pytest.raises(ToolSearchCapacityError, match="at most 2 tools, got 3"):
        ToolSearchIndex(catalog[:3], max_indexed=2)
    assert len(ToolSearchIndex(catalog[:2], max_indexed=2)) == 2


def test_max_indexed_can_be_raised_to_the_ceiling() -> None:
    catalog = [ToolDefinition(f"tool_{i}", description="handles shared work") for i in range(2000)]
    index = ToolSearchIndex(catalog, max_indexed=4096)
    assert len(index) == 2000
    assert index.max_indexed == 4096
    hits = index.search("1999")
    assert names(hits) == ["tool_1999"]
    assert hits[0].matched == ("1999",)
    assert names(index.search("shared", k=3)) == ["tool_0", "tool_1", "tool_2"]
    assert ToolSearchIndex(catalog[:1], max_indexed=65536).max_indexed == 65536


@pytest.mark.parametrize("option", ["max_indexed", "max_query_bytes"])
@pytest.mark.parametrize("value", [0, -1, 65537])
def test_limits_outside_their_range_are_value_errors(option: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"{option} must be between 1 and 65536"):
        ToolSearchIndex(None, **{option: value})


def test_an_invalid_cap_is_a_value_error_even_with_tools() -> None:
    with pytest.raises(ValueError, match="max_indexed must be between 1 and 65536"):
        ToolSearchIndex(tools(("a", "")), max_indexed=0)


@pytest.mark.parametrize("option", ["max_indexed", "max_query_bytes"])
@pytest.mark.parametrize("value", [True, 2.0, "8"])
def test_limits_that_are_not_ints_are_type_errors(option: str, value: object) -> None:
    with pytest.raises(TypeError, match=f"{option} must be an int"):
        ToolSearchIndex(None, **{option: value})  # type: ignore[arg-type]


def test_duplicate_names_are_value_errors() -> None:
    with pytest.raises(ValueError, match='tool name "echo" twice'):
        ToolSearchIndex(tools(("echo", "one"), ("other", ""), ("echo", "two")))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("get_weather", "not a string"),
        (5, "got int"),
        ([{"name": "x", "description": ""}], "item 0 is a dict"),
        ([ToolDefinition("a"), object()], "item 1 is a object"),
    ],
)
def test_sources_that_are_not_tools_are_type_errors(source: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        ToolSearchIndex(source)  # type: ignore[arg-type]


def test_tool_attributes_must_be_strings() -> None:
    class Odd(NamedTuple):
        name: object
        description: object

    with pytest.raises(TypeError, match="item 0: name must be a string, got int"):
        ToolSearchIndex([Odd(1, "")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="item 1: description must be a string, got NoneType"):
        ToolSearchIndex([Odd("a", ""), Odd("b", None)])  # type: ignore[list-item]


# --- long and odd queries --------------------------------------------------------------------


def test_a_one_mebibyte_query_is_cut_and_answered() -> None:
    query = "weather " * (1 << 17)
    assert len(query) == 1 << 20
    hits = INDEX.search(query)
    assert names(hits) == ["getWeatherNow"]
    assert hits == INDEX.search(cut_query(query, 4096))
    # The cut counts: fewer repeats of the word weigh less.
    assert hits != INDEX.search("weather")


def test_a_query_of_a_hundred_thousand_words_is_answered() -> None:
    index = index_of(*CATALOG, max_query_bytes=65536)
    query = " ".join(["email"] * 50_000 + ["weather"] * 50_000)
    hits = index.search(query, k=64)
    # Only the first 64 KiB are read, all "email": "weather" is cut off.
    assert names(hits) == ["send_email", "get_forecast"]
    assert all(hit.matched == ("email",) for hit in hits)
    distinct = " ".join(f"w{i}" for i in range(100_000)) + " weather"
    assert index.search(distinct) == []


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 6, 7])
def test_a_cut_inside_a_multibyte_character_drops_the_character(limit: int) -> None:
    index = index_of(("sky", "天"), ("weather_cn", "天气"), max_query_bytes=limit)
    # "天" and "气" are three bytes each; a cut in the middle of one drops it whole.
    hits = index.search("天气天气")
    expected = {3: ["sky"], 4: ["sky"], 5: ["sky"], 6: ["weather_cn"], 7: ["weather_cn"]}
    assert names(hits) == expected.get(limit, [])


def test_lone_surrogates_do_not_crash_and_separate_words() -> None:
    assert INDEX.search("\ud800") == []
    assert INDEX.search("\udfff\ud800" * 1000) == []
    hits = INDEX.search("email\ud800forecast")
    assert names(hits) == ["get_forecast", "send_email"]
    assert hits[0].matched == ("email", "forecast")
    # The core reads each lone surrogate as three U+FFFD (nine bytes) before cutting the query.
    for limit in range(1, 24):
        query = "\ud800map\udfffweather"
        index = index_of(("map", ""), ("weather", ""), max_query_bytes=limit)
        expected = ReferenceIndex([("map", ""), ("weather", "")]).search(query, 16, limit)
        assert [(hit.name, hit.score, hit.matched) for hit in index.search(query)] == expected
    # A ToolDefinition refuses such a name; a catalog of other objects may still hold one.
    odd = ToolSearchIndex([Named("tool\ud800weather", "")])
    hit = odd.search("weather")[0]
    assert hit.name == "tool\ud800weather"
    assert "tool\ud800weather" in odd


# --- hits ------------------------------------------------------------------------------------


def test_search_hits_compare_by_name_score_and_matched() -> None:
    first = INDEX.search("weather email")
    again = INDEX.search("weather email")
    assert first == again
    assert first[0] is not again[0]
    assert first[0] != first[1]
    assert first[0] != ("getWeatherNow", first[0].score, ("weather",))
    other = index_of(("getWeatherNow", "x"), ("b", "weather")).search("weather")[0]
    assert other.name == first[0].name
    assert other.matched == first[0].matched
    assert other != first[0]  # same name and words, another score
    with pytest.raises(TypeError):
        hash(first[0])


def test_search_hit_repr() -> None:
    hit = INDEX.search("http")[0]
    assert repr(hit) == f"SearchHit(name='HTTPServer', score={hit.score!r}, matched=('http',))"
    assert isinstance(hit.score, float)
    assert isinstance(hit.matched, tuple)


# --- threads ---------------------------------------------------------------------------------


def test_threads_searching_one_index_get_the_sequential_results() -> None:
    catalog = [
        ToolDefinition(f"tool_{i}", description=f"word{i % 37} word{i % 11} shared text{i}")
        for i in range(600)
    ]
    index = ToolSearchIndex(catalog)
    queries = [f"word{i % 37} word{i % 5} shared text{i}" for i in range(200)]
    sequential = [index.search(query, k=20) for query in queries]
    barrier = threading.Barrier(4)

    def run(offset: int) -> list[tuple[int, list[SearchHit]]]:
        barrier.wait()
        found = []
        for round_ in range(5):
            for position in range(len(queries)):
                turn = (position + offset * 50 + round_) % len(queries)
                found.append((turn, index.search(queries[turn], k=20)))
        return found

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, range(4)))
    assert sum(len(result) for result in results) == 4 * 5 * len(queries)
    for result in results:
        for turn, hits in result:
            assert hits == sequential[turn]
    assert all(sequential)
