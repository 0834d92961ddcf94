"""Retrieval quality of ``ToolSearchIndex`` on public tool-retrieval data, next to two BM25 peers.

Usage (from the repository root, in a venv with the release build and the peers installed)::

    python benches/search_quality.py                      # every dataset
    python benches/search_quality.py --dataset metatool   # one of them

For each dataset under ``shared/data/retrieval/`` (``tools.jsonl``: ``name``, ``description``;
``queries.jsonl``: ``query``, ``relevant``; provenance in each folder's ``SOURCE.md``), every
engine indexes the whole catalog and answers every query with its top 16. Printed, per dataset, a
Markdown table with Recall@1, Recall@5, Recall@16 (mean over queries of
|relevant in top-k| / |relevant|) and MRR (mean reciprocal rank of the first relevant tool in the
top 16, 0 when none), a row per engine, then the targets and a verdict for ours.

Engines:

* ``ours``: ``ToolSearchIndex(tools, max_indexed=...)`` (cap raised to the catalog size when
  needed), ``index.search(query, 16)``. It tokenises the raw text itself, and uses what the
  peers do not have: name/description field weights, prefix terms, query-term saturation.
* ``rank_bm25``: ``BM25Okapi(corpus_tokens, k1=1.2, b=0.75)``; ``get_scores(query_tokens)``.
* ``bm25s``: ``BM25(k1=1.2, b=0.75, method="lucene")``; ``index(corpus_tokens)``;
  ``get_scores(query_tokens)``.

Both peers get the same tokens, from the reference analyzer ``tests.reference.search.analyze``
(lowercased, stop-worded, Snowball-stemmed words; no prefix terms): ``analyze(name + " " +
description)`` per tool, ``analyze(query)`` per query; k1 and b are set to ours. Each peer ranks
from its full score array with a stable sort, so ties keep catalog order, as ours do, and tools
that match no query token (score 0) are left out, as ours never returns them. (``bm25s``'s
``retrieve`` would pick ties in ``argpartition`` order and pad with zero-score tools.)

Missing data: the script says so and exits 0, or exits 1 under ``CI=true``. A peer that is not
installed gets a row saying so. ``PRISM_SHARED_DATA`` overrides the data folder, as in
``tests/conftest.py``.

Importable: ``metrics(rankings, relevant)`` computes the same numbers for any ranking.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(
    os.environ.get("PRISM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
RETRIEVAL = SHARED_DATA / "retrieval"

TOP_K = 16
CUTOFFS = (1, 5, 16)
PEER_K1 = 1.2
"""Ours (``rust/search.rs`` ``K1``); the peers' defaults are 1.5."""
PEER_B = 0.75


@dataclass(frozen=True)
class Dataset:
    key: str
    title: str
    targets: dict[int, float]
    """Recall@k targets for ours."""


DATASETS = {
    "metatool": Dataset("metatool", "MetaTool (ToolE)", {5: 0.62, 16: 0.75}),
    "apibench-hf": Dataset("apibench-hf", "APIBench, Hugging Face subset", {5: 0.30, 16: 0.45}),
}


# --------------------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Metrics:
    """Recall at each cutoff and MRR, averaged over ``queries`` queries."""

    recall: dict[int, float]
    mrr: float
    queries: int


def metrics(
    rankings: Iterable[Sequence[str]],
    relevant: Iterable[Collection[str]],
    cutoffs: Sequence[int] = CUTOFFS,
) -> Metrics:
    """Recall@k for each ``k`` in ``cutoffs`` and MRR over paired rankings and relevant sets.

    Recall@k of one query is |relevant in ranking[:k]| / |relevant|; MRR takes 1/rank of the first
    relevant name in the ranking (as long as it is: cut it to the deepest cutoff for MRR@k), 0 when
    there is none. Queries with no relevant name are refused: their recall is undefined.
    """
    sums = dict.fromkeys(cutoffs, 0.0)
    reciprocal = 0.0
    count = 0
    for ranking, wanted in zip(rankings, relevant, strict=True):
        wanted = set(wanted)
        if not wanted:
            raise ValueError(f"query {count} has no relevant tool")
        for k in cutoffs:
            sums[k] += len(wanted.intersection(ranking[:k])) / len(wanted)
        for rank, name in enumerate(ranking, 1):
            if name in wanted:
                reciprocal += 1.0 / rank
                break
        count += 1
    if count == 0:
        return Metrics(dict.fromkeys(cutoffs, 0.0), 0.0, 0)
    return Metrics({k: total / count for k, total in sums.items()}, reciprocal / count, count)


# ------------------------------------------------------------------------------------------ data


@dataclass
class Data:
    tools: list[tuple[str, str]]
    queries: list[str]
    relevant: list[list[str]]
    extra: dict[str, Any] = field(default_factory=dict)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load(dataset: Dataset) -> Data:
    folder = RETRIEVAL / dataset.key
    tools = [(row["name"], row["description"]) for row in read_jsonl(folder / "tools.jsonl")]
    rows = read_jsonl(folder / "queries.jsonl")
    return Data(tools, [row["query"] for row in rows], [list(row["relevant"]) for row in rows])


def missing_data(datasets: Iterable[Dataset]) -> list[Path]:
    paths = [
        RETRIEVAL / d.key / name for d in datasets for name in ("tools.jsonl", "queries.jsonl")
    ]
    return [path for path in paths if not path.exists()]


# --------------------------------------------------------------------------------------- engines

Search = Callable[[str], list[str]]
"""A built engine: query text to tool names, best first, at most ``TOP_K``."""


class Skip(Exception):
    """An engine that cannot run here; the message says why."""


def reference_analyze() -> Callable[[str], list[str]]:
    """``tests.reference.search.analyze``: the token stream both peers get."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        from tests.reference.search import analyze
    except ImportError as err:
        raise Skip(f"reference analyzer tests/reference/search.py unavailable ({err})") from err
    return analyze


def build_ours(tools: Sequence[tuple[str, str]]) -> Search:
    from prism_tools import ToolDefinition, ToolSearchIndex
    from prism_tools.search import DEFAULT_MAX_INDEXED

    index = ToolSearchIndex(
        [ToolDefinition(name, description=description) for name, description in tools],
        max_indexed=max(DEFAULT_MAX_INDEXED, len(tools)),
    )

    def search(query: str) -> list[str]:
        return [hit.name for hit in index.search(query, TOP_K)]

    return search


def ranked_names(scores: Any, names: Sequence[str]) -> list[str]:
    """The top ``TOP_K`` names by score, ties in catalog order, zero scores left out."""
    import numpy as np

    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:TOP_K]
    return [names[i] for i in order.tolist() if scores[i] > 0]


def build_rank_bm25(tools: Sequence[tuple[str, str]]) -> Search:
    try:
        from rank_bm25 import BM25Okapi
    except ImportError as err:
        raise Skip("rank_bm25 is not installed (pip install rank-bm25)") from err
    analyze = reference_analyze()
    names = [name for name, _ in tools]
    engine = BM25Okapi([analyze(f"{name} {text}") for name, text in tools], k1=PEER_K1, b=PEER_B)

    def search(query: str) -> list[str]:
        tokens = analyze(query)
        return ranked_names(engine.get_scores(tokens), names) if tokens else []

    return search


def build_bm25s(tools: Sequence[tuple[str, str]]) -> Search:
    try:
        import bm25s
    except ImportError as err:
        raise Skip("bm25s is not installed (pip install bm25s)") from err
    analyze = reference_analyze()
    names = [name for name, _ in tools]
    engine = bm25s.BM25(k1=PEER_K1, b=PEER_B, method="lucene")
    engine.index([analyze(f"{name} {text}") for name, text in tools], show_progress=False)

    def search(query: str) -> list[str]:
        # get_scores drops tokens outside the vocabulary; it refuses an empty list.
        tokens = analyze(query)
        return ranked_names(engine.get_scores(tokens), names) if tokens else []

    return search


ENGINES: dict[str, Callable[[Sequence[tuple[str, str]]], Search]] = {
    "ours": build_ours,
    "rank_bm25": build_rank_bm25,
    "bm25s": build_bm25s,
}


# ------------------------------------------------------------------------------------------- run


@dataclass
class Row:
    engine: str
    result: Metrics | None
    note: str = ""
    seconds: float = 0.0


def evaluate(data: Data, engines: Sequence[str] = tuple(ENGINES)) -> list[Row]:
    rows = []
    for engine in engines:
        started = time.perf_counter()
        try:
            search = ENGINES[engine](data.tools)
        except Skip as skip:
            rows.append(Row(engine, None, f"skipped: {skip}"))
            continue
        rankings = [search(query) for query in data.queries]
        rows.append(
            Row(engine, metrics(rankings, data.relevant), seconds=time.perf_counter() - started)
        )
    return rows


def verdict(dataset: Dataset, ours: Metrics | None) -> list[str]:
    lines = []
    for k, target in sorted(dataset.targets.items()):
        if ours is None:
            lines.append(f"- ours Recall@{k} >= {target:.2f}: not measured")
            continue
        got = ours.recall[k]
        state = "met" if got >= target else "NOT met"
        lines.append(f"- ours Recall@{k} = {got:.4f}, target >= {target:.2f}: **{state}**")
    return lines


def table(dataset: Dataset, data: Data, rows: Sequence[Row]) -> str:
    header = ["engine", *(f"Recall@{k}" for k in CUTOFFS), f"MRR@{TOP_K}", "s (build + queries)"]
    lines = [
        f"### {dataset.title} ({len(data.tools)} tools, {len(data.queries)} queries)",
        "",
        "| " + " | ".join(header) + " |",
        "| --- | " + " | ".join("---:" for _ in header[1:]) + " |",
    ]
    for row in rows:
        if row.result is None:
            lines.append(f"| {row.engine} | {row.note} |" + " |" * (len(header) - 2))
            continue
        cells = [f"{row.result.recall[k]:.4f}" for k in CUTOFFS]
        cells += [f"{row.result.mrr:.4f}", f"{row.seconds:.1f}"]
        lines.append(f"| {row.engine} | " + " | ".join(cells) + " |")
    ours = next((row.result for row in rows if row.engine == "ours"), None)
    targets = ", ".join(f"Recall@{k} >= {t:.2f}" for k, t in sorted(dataset.targets.items()))
    lines += ["", f"Targets for ours: {targets}.", *verdict(dataset, ours)]
    return "\n".join(lines)


def as_json(dataset: Dataset, data: Data, rows: Sequence[Row]) -> dict[str, Any]:
    """One dataset's results as plain JSON (``--json``): the same numbers as ``table``."""
    engines: dict[str, Any] = {}
    for row in rows:
        if row.result is None:
            engines[row.engine] = {"note": row.note}
            continue
        engines[row.engine] = {
            "recall": {str(k): value for k, value in row.result.recall.items()},
            "mrr": row.result.mrr,
            "seconds": row.seconds,
        }
    return {
        "title": dataset.title,
        "tools": len(data.tools),
        "queries": len(data.queries),
        "targets": {str(k): target for k, target in dataset.targets.items()},
        "engines": engines,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dataset",
        choices=[*DATASETS, "all"],
        default="all",
        help="which dataset to evaluate (default: all)",
    )
    parser.add_argument(
        "--engine",
        action="append",
        choices=list(ENGINES),
        help="engine to run (repeatable; default: all)",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the numbers as JSON to PATH (benches/report.py reads it)",
    )
    args = parser.parse_args(argv)
    chosen = list(DATASETS.values()) if args.dataset == "all" else [DATASETS[args.dataset]]
    missing = missing_data(chosen)
    if missing:
        reason = "retrieval data not present: " + ", ".join(str(path) for path in missing)
        if args.json:
            write_json(args.json, {"skipped": reason, "datasets": {}})
        if os.environ.get("CI") == "true":
            print(f"search_quality: FAILED under CI: {reason}", file=sys.stderr)
            return 1
        print(f"search_quality: skipped, {reason} (set PRISM_SHARED_DATA)", file=sys.stderr)
        return 0

    import prism_tools

    print(f"prism_tools {prism_tools.__version__} from {Path(prism_tools.__file__).parent}")
    print(f"top {TOP_K}; peers: k1={PEER_K1}, b={PEER_B}, reference-analyzer tokens\n")
    found: dict[str, Any] = {}
    for dataset in chosen:
        data = load(dataset)
        rows = evaluate(data, args.engine or tuple(ENGINES))
        found[dataset.key] = as_json(dataset, data, rows)
        print(table(dataset, data, rows))
        print()
    if args.json:
        write_json(args.json, {"top_k": TOP_K, "k1": PEER_K1, "b": PEER_B, "datasets": found})
    return 0


def write_json(path: str, document: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
