"""Search quality on public tool-retrieval data nobody here wrote (``shared/data/retrieval``).

The floors are the issue's targets for the visible queries; ``benches/search_quality.py`` prints
the full table beside rank_bm25 and bm25s. A change to the tokeniser or the constants that costs
recall fails here, not silently in production.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import shared_data

from prism_tools import ToolDefinition, ToolSearchIndex

FLOORS = {
    # dataset: (Recall@5, Recall@16)
    "metatool": (0.62, 0.75),
    "apibench-hf": (0.30, 0.45),
}


def read_jsonl(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def recall(dataset: str) -> tuple[float, float, int]:
    folder = shared_data("retrieval", dataset)
    tools = read_jsonl(folder / "tools.jsonl")
    queries = read_jsonl(folder / "queries.jsonl")
    index = ToolSearchIndex(
        [ToolDefinition(str(row["name"]), description=str(row["description"])) for row in tools]
    )
    at5 = at16 = 0.0
    for row in queries:
        relevant = set(row["relevant"])  # type: ignore[call-overload]
        ranked = [hit.name for hit in index.search(str(row["query"]), 16)]
        at5 += len(relevant.intersection(ranked[:5])) / len(relevant)
        at16 += len(relevant.intersection(ranked)) / len(relevant)
    return at5 / len(queries), at16 / len(queries), len(queries)


@pytest.mark.parametrize("dataset", sorted(FLOORS))
def test_recall_meets_the_floor(dataset: str) -> None:
    at5, at16, count = recall(dataset)
    floor5, floor16 = FLOORS[dataset]
    assert count > 500
    assert at5 >= floor5, f"{dataset} Recall@5 {at5:.4f} below {floor5}"
    assert at16 >= floor16, f"{dataset} Recall@16 {at16:.4f} below {floor16}"
