"""Tool search: query and build cost of ``ToolSearchIndex`` next to two Python BM25 libraries.

Peers: ``bm25s`` (numpy backend, no numba, no progress bars) and ``rank_bm25`` (``BM25Okapi``),
both with ours' k1=1.2 and b=0.75, both fed the tokens of the reference analyzer
(``tests.reference.search.analyze``), computed once before timing. Ours takes raw text and pays
for its own tokenising, stop words and stemming inside every timed call; the peers do not.

Catalogs are synthetic and seeded (``SEED``): 64, 256, 1,024 and 8,192 tools. A tool name is a
verb and one or two content words, in snake_case or camelCase; a description is 10-40 words
drawn from a Zipf distribution (s=1) over 20 English function words followed by about 4,000
generated words, so a few terms sit in most tools and most terms in very few, as in real
catalogs. Each catalog has 64 queries of 5-15 words: about half the words come from one tool's
name and description, the rest from the same Zipf draw.

Groups (``--benchmark-group-by=group`` puts each group's rows side by side):

* ``search/N tools``: one query, top 16. Rows: ours ``index.search(q, 16)``; bm25s
  ``retrieve([tokens], k=16)``; bm25s ``get_scores(tokens)`` + top 16 of the non-zero scores
  (``numpy_top_k``: the same scoring without ``retrieve``'s wrapper and without its
  ``argpartition`` over every score, which numpy makes slow on mostly-zero arrays); rank_bm25
  ``get_scores(tokens)`` + ``numpy_top_k``. Targets at 1,024 tools: ours at most 0.3x bm25s
  ``retrieve`` and 0.02x rank_bm25.
* ``build/N tools``: ours ``ToolSearchIndex(tools, max_indexed=...)`` (from ``ToolDefinition``\\ s,
  tokenising included); bm25s ``BM25(...).index(corpus_tokens)``; rank_bm25
  ``BM25Okapi(corpus_tokens)``. Target at 1,024 tools: ours at most 0.2x bm25s.
* ``search pieces/1024 tools``: where ours spends its time (k=1 against k=16, 5-word against
  15-word queries, a query of stop words only, a query of unknown words, a bare method call) and
  what the reference analyzer costs per query in Python (what the peers skip here).

Every search row runs ``QUERIES`` (64) queries per call, each query once, so every round does the
same work; the build rows build once per call. Each row fixes its calls per round from a quick
measurement (see ``time_it``). Reported times are per call: divide search rows by 64 for one
query. ``extra_info`` records ``engine``, ``size``, ``op`` and ``queries_per_call``.

Ratios: run with ``--benchmark-json=FILE`` and then ``python benches/bench_search.py FILE
[FILE ...]``: it prints microseconds per query and per build for each engine and size, the ratios
ours/bm25s and ours/rank_bm25 with the targets, and how ours grows with the catalog. Given several
files it takes each row's lowest median (the least disturbed run).

Peer rows skip, with the reason, when the peer is not installed. Nothing asserts on timing; the
asserts before each timed call check that the row does the work it claims (at most 16 results a
query and 16 for some, the index holds every tool, a no-hit query finds nothing). Ours, like the
peer rows through ``numpy_top_k``, returns only tools that share a term with the query, so on the
small catalogs some queries get fewer than 16 (``extra_info["mean_hits"]`` on ours' rows).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from prism_tools import ToolDefinition, ToolSearchIndex
from timing import time_calibrated

try:
    import bm25s
except ImportError:  # pragma: no cover - depends on the bench venv
    bm25s = None
try:
    import rank_bm25
except ImportError:  # pragma: no cover
    rank_bm25 = None
try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

ROOT = Path(__file__).resolve().parents[1]

SEED = 20_250_611
SIZES = (64, 256, 1_024, 8_192)
PIECES_SIZE = 1_024
TOP_K = 16
QUERIES = 64
CONTENT_WORDS = 4_000
ZIPF_S = 1.0
DESCRIPTION_WORDS = (10, 40)
QUERY_WORDS = (5, 15)
PEER_K1 = 1.2
PEER_B = 0.75

TARGETS = {
    ("search", "bm25s"): 0.3,
    ("search", "rank_bm25"): 0.02,
    ("build", "bm25s"): 0.2,
}
"""Highest ours/peer ratio at ``TARGET_SIZE`` tools."""
TARGET_SIZE = 1_024

ROUND_SECONDS = 2e-3
"""Target length of one timed round (a search call already runs 64 queries)."""
ROW_SECONDS = 1.0
MIN_ROUNDS = 10
CALIBRATION_SECONDS = 5e-3

FUNCTION_WORDS = (
    "the", "a", "of", "to", "and", "for", "in", "with", "on", "by",
    "from", "or", "an", "is", "this", "that", "as", "at", "it", "your",
)  # fmt: skip
VERBS = (
    "get", "list", "create", "update", "delete", "search", "find", "send", "fetch", "run",
    "check", "read", "write", "open", "close", "add", "remove", "set", "start", "stop",
    "query", "upload", "download", "convert", "translate", "summarize", "book", "schedule",
    "track", "compute", "generate", "validate",
)  # fmt: skip
ONSETS = (
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
    "br", "st", "tr", "pl", "sh", "ch",
)  # fmt: skip
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "i", "o", "ea", "ou")
CODAS = ("", "", "", "", "n", "r", "s", "l", "t", "m", "nd", "st", "ng")


# ----------------------------------------------------------------------------------------- data


def reference_analyze() -> Callable[[str], list[str]]:
    """The token stream the peers get: ``tests.reference.search.analyze``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.reference.search import analyze

    return analyze


def generated_words(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct pronounceable lowercase words of 1-3 syllables, none a function word."""
    words: dict[str, None] = {}
    banned = set(FUNCTION_WORDS) | set(VERBS)
    while len(words) < count:
        syllables = rng.choice((1, 2, 2, 2, 2, 3))
        word = "".join(
            rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables)
        )
        if len(word) >= 3 and word not in banned:
            words[word] = None
    return list(words)


@dataclass(frozen=True)
class Catalog:
    size: int
    names: list[str]
    descriptions: list[str]
    queries: list[str]
    """``QUERIES`` queries of 5-15 words."""
    short_queries: list[str]
    """``QUERIES`` queries of 5 words (pieces only)."""
    long_queries: list[str]
    """``QUERIES`` queries of 15 words (pieces only)."""

    def texts(self) -> list[str]:
        return [f"{name} {text}" for name, text in zip(self.names, self.descriptions, strict=True)]


@functools.cache
def catalog(size: int) -> Catalog:
    """The seeded synthetic catalog of ``size`` tools and its queries."""
    rng = random.Random(f"{SEED}/{size}")
    content = generated_words(random.Random(SEED), CONTENT_WORDS)
    vocabulary = [*FUNCTION_WORDS, *content]
    zipf = list(itertools.accumulate(1.0 / rank**ZIPF_S for rank in range(1, len(vocabulary) + 1)))
    content_zipf = list(
        itertools.accumulate(1.0 / rank**ZIPF_S for rank in range(1, len(content) + 1))
    )

    def draw(n: int) -> list[str]:
        return rng.choices(vocabulary, cum_weights=zipf, k=n)

    names: list[str] = []
    seen: set[str] = set()
    descriptions: list[str] = []
    words_of: list[list[str]] = []
    for position in range(size):
        parts = [rng.choice(VERBS)]
        parts += rng.choices(content, cum_weights=content_zipf, k=rng.randint(1, 2))
        if position % 2:
            name = parts[0] + "".join(part.capitalize() for part in parts[1:])
        else:
            name = "_".join(parts)
        base, n = name, 2
        while name in seen:
            name = f"{base}_v{n}" if position % 2 == 0 else f"{base}V{n}"
            n += 1
        seen.add(name)
        names.append(name)
        words = draw(rng.randint(*DESCRIPTION_WORDS))
        descriptions.append(" ".join(words).capitalize() + ".")
        words_of.append(parts + words)

    def query(length: int) -> str:
        """About half the words from one tool (name parts and description), half drawn."""
        own = words_of[rng.randrange(size)]
        words = rng.sample(own, length // 2) + draw(length - length // 2)
        rng.shuffle(words)
        return " ".join(words)

    return Catalog(
        size=size,
        names=names,
        descriptions=descriptions,
        queries=[query(rng.randint(*QUERY_WORDS)) for _ in range(QUERIES)],
        short_queries=[query(QUERY_WORDS[0]) for _ in range(QUERIES)],
        long_queries=[query(QUERY_WORDS[1]) for _ in range(QUERIES)],
    )


@functools.cache
def tokens(size: int) -> tuple[list[list[str]], list[list[str]]]:
    """Reference-analyzer tokens of the catalog's tools and of its queries."""
    analyze = reference_analyze()
    data = catalog(size)
    return [analyze(text) for text in data.texts()], [analyze(query) for query in data.queries]


def definitions(size: int) -> list[Any]:
    data = catalog(size)
    return [
        ToolDefinition(name, description=text)
        for name, text in zip(data.names, data.descriptions, strict=True)
    ]


def cap(size: int) -> int:
    """``max_indexed`` for ``size`` tools: the default unless the catalog is bigger."""
    return max(1_024, size)


# ------------------------------------------------------------------------------------- ratios


Key = tuple[str, str, int]
"""(op, engine, size) of a row: op is ``search``, ``build`` or ``piece``."""


def best_micros(reports: Sequence[dict[str, Any]]) -> dict[Key, float]:
    """Microseconds per query (search and piece rows) or per build, each row's lowest median
    over the loaded ``--benchmark-json`` documents."""
    best: dict[Key, float] = {}
    for report in reports:
        for bench in report["benchmarks"]:
            info = bench.get("extra_info", {})
            if "engine" not in info:
                continue
            key = (info["op"], info["engine"], int(info["size"]))
            micros = bench["stats"]["median"] * 1e6 / info.get("queries_per_call", 1)
            best[key] = min(micros, best.get(key, float("inf")))
    return best


def target_ratios(best: dict[Key, float]) -> dict[tuple[str, str], float | None]:
    """Ours / peer at ``TARGET_SIZE`` tools for each entry of ``TARGETS`` (None: not measured)."""
    ratios: dict[tuple[str, str], float | None] = {}
    for op, peer in TARGETS:
        ours, other = best.get((op, "ours", TARGET_SIZE)), best.get((op, peer, TARGET_SIZE))
        ratios[op, peer] = ours / other if ours is not None and other else None
    return ratios


def ratio_report(paths: Sequence[str]) -> str:
    """Markdown tables of per-query and per-build microseconds and ratios from benchmark JSON."""
    reports = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            reports.append(json.load(handle))
    best = best_micros(reports)
    lines = [f"Median per operation, lowest over {len(paths)} run(s); microseconds.", ""]
    for op, unit, peers in (
        ("search", "us per query", ("bm25s", "bm25s get_scores", "rank_bm25")),
        ("build", "us per build", ("bm25s", "rank_bm25")),
    ):
        sizes = sorted({size for (o, _, size) in best if o == op})
        header = ["tools", f"ours ({unit})", "ours vs 64", *peers]
        header += [f"ours/{peer}" for peer in peers]
        lines += [f"### {op}", "", "| " + " | ".join(header) + " |"]
        lines.append("| " + " | ".join("---:" for _ in header) + " |")
        base = best.get((op, "ours", sizes[0])) if sizes else None
        for size in sizes:
            ours = best.get((op, "ours", size))
            cells = [f"{size:,}", fmt(ours), f"{ours / base:.2f}x" if ours and base else "-"]
            cells += [fmt(best.get((op, peer, size))) for peer in peers]
            for peer in peers:
                other = best.get((op, peer, size))
                cells.append(f"{ours / other:.4f}" if ours and other else "-")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"### targets at {TARGET_SIZE:,} tools", ""]
    for (op, peer), ratio in target_ratios(best).items():
        target = TARGETS[op, peer]
        if ratio is None:
            lines.append(f"- {op}: ours/{peer} <= {target}: not measured")
            continue
        state = "met" if ratio <= target else "NOT met"
        lines.append(f"- {op}: ours/{peer} = {ratio:.4f}, target <= {target}: **{state}**")
    pieces = sorted(
        ((engine, micros) for (op, engine, _), micros in best.items() if op == "piece"),
        key=lambda item: item[1],
    )
    if pieces:
        lines += ["", f"### search pieces at {PIECES_SIZE:,} tools (us per query or call)", ""]
        lines += [f"- {engine}: {fmt(micros)}" for engine, micros in pieces]
    return "\n".join(lines)


def fmt(micros: float | None) -> str:
    if micros is None:
        return "-"
    return f"{micros:,.2f}" if micros < 1_000 else f"{micros:,.0f}"


# --------------------------------------------------------------------------------- benchmarks


def need(module: Any, name: str) -> Any:
    """The peer module, or a skip that says which package is missing."""
    if module is None:
        pytest.skip(f"peer {name} is not installed (pip install {name})")
    return module


def peer_tokens(size: int) -> tuple[list[list[str]], list[list[str]]]:
    try:
        return tokens(size)
    except ImportError as err:
        pytest.skip(f"reference analyzer tests/reference/search.py unavailable: {err}")


def time_it(benchmark: Any, group: str, function: Callable[[], Any], **info: Any) -> None:
    """Time ``function`` in calibrated rounds (see ``timing.py``) under this file's constants;
    reported times are per call of ``function``."""
    benchmark.group = group
    benchmark.extra_info.update(info)
    time_calibrated(
        benchmark,
        function,
        round_seconds=ROUND_SECONDS,
        row_seconds=ROW_SECONDS,
        min_rounds=MIN_ROUNDS,
        calibration_seconds=CALIBRATION_SECONDS,
    )


def search_group(size: int) -> str:
    return f"search/{size} tools"


def build_group(size: int) -> str:
    return f"build/{size} tools"


PIECES = f"search pieces/{PIECES_SIZE} tools"


def time_queries(
    benchmark: Any,
    group: str,
    search: Callable[[Any], Any],
    queries: Sequence[Any],
    **info: Any,
) -> None:
    """Time ``search`` over every query of ``queries`` per call."""

    def batch() -> None:
        for query in queries:
            search(query)

    time_it(benchmark, group, batch, queries_per_call=len(queries), **info)


def ours_index(size: int) -> Any:
    index = ToolSearchIndex(definitions(size), max_indexed=cap(size))
    assert len(index) == size
    return index


def bm25s_index(size: int) -> Any:
    corpus, _ = peer_tokens(size)
    retriever = need(bm25s, "bm25s").BM25(k1=PEER_K1, b=PEER_B, method="lucene", backend="numpy")
    retriever.index(corpus, show_progress=False)
    return retriever


def rank_bm25_index(size: int) -> Any:
    corpus, _ = peer_tokens(size)
    return need(rank_bm25, "rank-bm25").BM25Okapi(corpus, k1=PEER_K1, b=PEER_B)


def numpy_top_k(scores: Any) -> Any:
    """Indices of the ``TOP_K`` best non-zero scores, best first, ties in catalog order.

    Selecting among the non-zero scores first is not only what ours does (a tool sharing no term
    with the query is never a hit): ``np.argpartition`` over a whole score array that is mostly
    zeros, which a sparse query makes, takes a slow path in numpy (85 us for 1,024 scores with 5%
    non-zero, against 10 us when all are non-zero; numpy 2.4). ``bm25s``'s ``retrieve`` pays it.
    """
    candidates = np.flatnonzero(scores)
    if len(candidates) > TOP_K:
        candidates = candidates[np.argpartition(scores[candidates], -TOP_K)[-TOP_K:]]
        candidates.sort()
    return candidates[np.argsort(-scores[candidates], kind="stable")]


def check_top_k(search: Callable[[Any], Any], queries: Sequence[Any]) -> None:
    """At most 16 results a query, and 16 for some (small catalogs match fewer for some)."""
    found = [len(search(query)) for query in queries]
    assert max(found) == TOP_K
    assert min(found) >= 0


# ------------------------------------------------------------------------------------- search


@pytest.mark.parametrize("size", SIZES)
def test_search_ours(benchmark: Any, size: int) -> None:
    """ours: ``index.search(query, 16)``, raw query text to a list of ``SearchHit``."""
    index = ours_index(size)
    queries = catalog(size).queries
    # A query only finds tools that share a term with it: on small catalogs some find fewer.
    hits = [len(index.search(query, TOP_K)) for query in queries]
    assert max(hits) == TOP_K
    benchmark.extra_info["mean_hits"] = sum(hits) / len(hits)
    search = index.search
    time_queries(
        benchmark, search_group(size), lambda q: search(q, TOP_K), queries,
        engine="ours", op="search", size=size,
    )  # fmt: skip


@pytest.mark.parametrize("size", SIZES)
def test_search_bm25s(benchmark: Any, size: int) -> None:
    """bm25s: ``retrieve([query_tokens], k=16)``, sorted, single-threaded, no progress bar."""
    retriever = bm25s_index(size)
    _, queries = peer_tokens(size)

    def search(query: list[str]) -> Any:
        return retriever.retrieve(
            [query], k=TOP_K, show_progress=False, n_threads=0, backend_selection="numpy"
        )

    assert all(search(query).documents.shape == (1, TOP_K) for query in queries)
    time_queries(
        benchmark, search_group(size), search, queries, engine="bm25s", op="search", size=size
    )


@pytest.mark.parametrize("size", SIZES)
def test_search_bm25s_scores_piece(benchmark: Any, size: int) -> None:
    """bm25s, the fastest path found: ``get_scores(query_tokens)`` (``retrieve``'s scoring) and
    ``numpy_top_k`` (top 16 among the non-zero scores) instead of ``retrieve``'s wrapper and its
    ``argpartition`` over every score."""
    retriever = bm25s_index(size)
    _, queries = peer_tokens(size)
    get_scores = retriever.get_scores

    def search(query: list[str]) -> Any:
        return numpy_top_k(get_scores(query))

    check_top_k(search, queries)
    time_queries(
        benchmark, search_group(size), search, queries,
        engine="bm25s get_scores", op="search", size=size,
    )  # fmt: skip


@pytest.mark.parametrize("size", SIZES)
def test_search_rank_bm25(benchmark: Any, size: int) -> None:
    """rank_bm25: ``BM25Okapi.get_scores(query_tokens)`` + ``numpy_top_k``."""
    engine = rank_bm25_index(size)
    _, queries = peer_tokens(size)
    get_scores = engine.get_scores

    def search(query: list[str]) -> Any:
        return numpy_top_k(get_scores(query))

    check_top_k(search, queries)
    time_queries(
        benchmark, search_group(size), search, queries, engine="rank_bm25", op="search", size=size
    )


# -------------------------------------------------------------------------------------- build


@pytest.mark.parametrize("size", SIZES)
def test_build_ours(benchmark: Any, size: int) -> None:
    """ours: ``ToolSearchIndex(definitions, max_indexed=...)``, tokenising included."""
    tools = definitions(size)
    limit = cap(size)
    assert len(ToolSearchIndex(tools, max_indexed=limit)) == size
    time_it(
        benchmark, build_group(size), lambda: ToolSearchIndex(tools, max_indexed=limit),
        engine="ours", op="build", size=size,
    )  # fmt: skip


@pytest.mark.parametrize("size", SIZES)
def test_build_bm25s(benchmark: Any, size: int) -> None:
    """bm25s: ``BM25(k1, b).index(corpus_tokens, show_progress=False)`` (numpy CSC backend)."""
    peer = need(bm25s, "bm25s")
    corpus, _ = peer_tokens(size)

    def build() -> Any:
        retriever = peer.BM25(k1=PEER_K1, b=PEER_B, method="lucene", backend="numpy")
        retriever.index(corpus, show_progress=False)
        return retriever

    assert build().scores["num_docs"] == size
    time_it(benchmark, build_group(size), build, engine="bm25s", op="build", size=size)


@pytest.mark.parametrize("size", SIZES)
def test_build_rank_bm25(benchmark: Any, size: int) -> None:
    """rank_bm25: ``BM25Okapi(corpus_tokens, k1, b)``."""
    peer = need(rank_bm25, "rank-bm25")
    corpus, _ = peer_tokens(size)
    assert peer.BM25Okapi(corpus, k1=PEER_K1, b=PEER_B).corpus_size == size
    time_it(
        benchmark, build_group(size), lambda: peer.BM25Okapi(corpus, k1=PEER_K1, b=PEER_B),
        engine="rank_bm25", op="build", size=size,
    )  # fmt: skip


# ------------------------------------------------------------------------------------- pieces


def piece(
    benchmark: Any, engine: str, search: Callable[[Any], Any], queries: Sequence[Any]
) -> None:
    time_queries(benchmark, PIECES, search, queries, engine=engine, op="piece", size=PIECES_SIZE)


@pytest.mark.parametrize(("label", "k"), [("k=1", 1), ("k=16", 16), ("k=64", 64)])
def test_piece_ours_k(benchmark: Any, label: str, k: int) -> None:
    """ours with k=1, 16, 64 on the same queries: the cost of each extra ``SearchHit``."""
    index = ours_index(PIECES_SIZE)
    search = index.search
    piece(benchmark, f"ours {label}", lambda q: search(q, k), catalog(PIECES_SIZE).queries)


@pytest.mark.parametrize("length", ["short", "long"])
def test_piece_ours_length(benchmark: Any, length: str) -> None:
    """ours on 5-word and on 15-word queries, k=16."""
    index = ours_index(PIECES_SIZE)
    data = catalog(PIECES_SIZE)
    queries = data.short_queries if length == "short" else data.long_queries
    words = QUERY_WORDS[0] if length == "short" else QUERY_WORDS[1]
    search = index.search
    piece(benchmark, f"ours {words}-word queries", lambda q: search(q, TOP_K), queries)


def test_piece_ours_stop_words(benchmark: Any) -> None:
    """ours on 10 stop words: the call, the tokeniser and the stop-word check, no lookup."""
    index = ours_index(PIECES_SIZE)
    queries = [" ".join(random.Random(n).choices(FUNCTION_WORDS, k=10)) for n in range(QUERIES)]
    assert all(index.search(query, TOP_K) == [] for query in queries)
    search = index.search
    piece(benchmark, "ours 10 stop words (no hits)", lambda q: search(q, TOP_K), queries)


def test_piece_ours_unknown_words(benchmark: Any) -> None:
    """ours on 10 words no tool holds: tokenise, stem and look up terms, no postings."""
    index = ours_index(PIECES_SIZE)
    # Letters and digits: no tool word has digits past its fourth character, so neither the
    # full term nor the prefix term ("#qx01") of these is in the index.
    queries = [" ".join(f"qx{n:02d}{w:02d}zk" for w in range(10)) for n in range(QUERIES)]
    assert all(index.search(query, TOP_K) == [] for query in queries)
    search = index.search
    piece(benchmark, "ours 10 unknown words (no hits)", lambda q: search(q, TOP_K), queries)


def test_piece_method_call_floor(benchmark: Any) -> None:
    """floor: ``len(index)``, a bare call into the extension type."""
    index = ours_index(PIECES_SIZE)
    piece(benchmark, "len(index) call floor", lambda q: len(index), catalog(PIECES_SIZE).queries)


def test_piece_hit_fields(benchmark: Any) -> None:
    """ours k=16 and reading ``name`` of every hit (what a host does next)."""
    index = ours_index(PIECES_SIZE)
    search = index.search
    piece(
        benchmark,
        "ours k=16 + hit.name of each",
        lambda q: [hit.name for hit in search(q, TOP_K)],
        catalog(PIECES_SIZE).queries,
    )


def test_piece_reference_analyze(benchmark: Any) -> None:
    """the reference analyzer in Python on one query: what the peers' timings leave out."""
    try:
        analyze = reference_analyze()
    except ImportError as err:
        pytest.skip(f"reference analyzer unavailable: {err}")
    piece(benchmark, "reference analyze(query), Python", analyze, catalog(PIECES_SIZE).queries)


def test_piece_heapq_top_k(benchmark: Any) -> None:
    """rank_bm25 scores with ``heapq.nlargest`` instead of ``argpartition`` (for information)."""
    engine = rank_bm25_index(PIECES_SIZE)
    _, queries = peer_tokens(PIECES_SIZE)
    get_scores = engine.get_scores

    def search(query: list[str]) -> Any:
        scores = get_scores(query).tolist()
        return heapq.nlargest(TOP_K, range(len(scores)), key=scores.__getitem__)

    assert list(search(queries[0])) == numpy_top_k(get_scores(queries[0])).tolist()

    piece(benchmark, "rank_bm25 get_scores + heapq.nlargest", search, queries)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} BENCHMARK_JSON [BENCHMARK_JSON ...]")
    print(ratio_report(sys.argv[1:]))
