"""Per-turn tool preparation: grant, narrowing, search disclosure and the OpenAI tool payload.

The scenario (issue 6): 1,024 registered tools with JSON Schemas, a 200-tool grant, a narrowing
callback that keeps 100 of them, search disclosure with top 16, and the ready-to-send OpenAI
``tools`` payload as JSON bytes. One row prepares one turn:

* ours: ``RunScope.for_turn`` (the narrowing callback, the clamp to the grant, the search over
  the visible tools in Rust, the activated tools, ``search_tools``, the dispatch filter) and
  ``openai_tools_json`` of the tools it sends (payloads built once per definition, reused);
* plain: the same preparation written directly in Python: list comprehensions for the grant and
  the narrowing, ``rank_bm25.BM25Okapi`` over the visible tools (cached per visible subset, as ours
  is) with the reference tokeniser, the top 16 by score, the activated tools, and
  ``json.dumps`` of the OpenAI-format entries every turn.

Both get the same turn text each round (cycled from a fixed list) and the same activated names.
Target: ours at least 10x faster. Run ``pytest benches/bench_turn_prep.py --benchmark-only
--benchmark-json=FILE`` then ``python benches/bench_turn_prep.py FILE`` for the ratio.
"""

from __future__ import annotations

import heapq
import json
import random
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest

from prism_tools import ToolActivationState, ToolDefinition
from prism_tools.messages import Message
from prism_tools.providers.openai import openai_tool, openai_tools_json
from prism_tools.scoping import NarrowingContext, RunScope

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import rank_bm25
except ImportError:  # pragma: no cover - peers are optional
    rank_bm25 = None

try:
    from tests.reference.search import analyze
except ImportError:  # pragma: no cover - needs snowballstemmer
    analyze = None  # type: ignore[assignment]

REGISTERED = 1024
GRANTED = 200
VISIBLE = 100
TOP_K = 16
GROUP = "turn preparation/1024 tools, grant 200, narrowed 100, top 16"
TARGET = 10.0
"""Plain / ours per turn, at least."""

WORDS = [
    "weather",
    "forecast",
    "city",
    "email",
    "send",
    "message",
    "calendar",
    "event",
    "meeting",
    "invoice",
    "payment",
    "refund",
    "order",
    "customer",
    "ticket",
    "support",
    "file",
    "upload",
    "download",
    "search",
    "index",
    "report",
    "chart",
    "metric",
    "deploy",
    "service",
    "container",
    "database",
    "query",
    "table",
    "user",
    "account",
    "password",
    "reset",
    "translate",
    "text",
    "summary",
    "image",
    "resize",
    "convert",
    "currency",
    "rate",
    "stock",
    "price",
    "news",
    "article",
    "map",
    "route",
]


def catalog(seed: int = 7) -> list[ToolDefinition]:
    rng = random.Random(seed)
    tools = []
    for number in range(REGISTERED):
        name = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{number}"
        description = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 30)))
        properties = {
            f"{rng.choice(WORDS)}_{field}": {"type": "string", "description": rng.choice(WORDS)}
            for field in range(rng.randint(1, 5))
        }
        parameters = {"type": "object", "properties": properties, "required": list(properties)[:1]}
        tools.append(ToolDefinition(name, description=description, parameters=parameters))
    return tools


TOOLS = catalog()
GRANT = tuple(TOOLS[::5][:GRANTED])
KEEP = frozenset(tool.name for tool in GRANT[::2][:VISIBLE])
QUERIES = [
    "send the monthly invoice report by email",
    "what is the weather forecast for the city",
    "refund the customer order and reset the password",
    "convert the currency rate and chart the stock price",
]
ACTIVATED = (GRANT[3].name, GRANT[11].name)


def narrow(context: NarrowingContext) -> list[str]:
    return [name for name in context.tool_ids if name in KEEP]


def our_scope() -> RunScope:
    return RunScope(
        TOOLS,
        GRANT,
        granted_everything=False,
        narrowing=narrow,
        disclosure="search",
        top_k=TOP_K,
        allow_hidden=False,
        activation=ToolActivationState(ACTIVATED),
    )


def finish(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Runs a coroutine that never suspends (a sync narrowing callback) without an event loop,
    as awaiting it inside a running loop costs: nothing to schedule."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the turn preparation suspended")


def ours_turn(scope: RunScope, turn: int) -> bytes:
    query = QUERIES[turn % len(QUERIES)]
    tools = finish(scope.for_turn(turn, (Message("user", query),), query)).sent
    return openai_tools_json(tools)


class Plain:
    """The same preparation, written directly in Python."""

    def __init__(self) -> None:
        self.grant_names = {tool.name for tool in GRANT}
        self.indexes: dict[tuple[str, ...], Any] = {}

    def turn(self, turn: int) -> bytes:
        query = QUERIES[turn % len(QUERIES)]
        granted = [tool for tool in TOOLS if tool.name in self.grant_names]
        keep = set(narrow(NarrowingContext(turn, None, tuple(t.name for t in granted))))
        visible = [tool for tool in granted if tool.name in keep]
        key = tuple(tool.name for tool in visible)
        index = self.indexes.get(key)
        if index is None:
            corpus = [analyze(f"{tool.name} {tool.description}") for tool in visible]
            index = self.indexes[key] = rank_bm25.BM25Okapi(corpus)
        scores = index.get_scores(analyze(query))
        best = heapq.nlargest(TOP_K, range(len(visible)), key=lambda i: (scores[i], -i))
        chosen = {visible[i].name for i in best if scores[i] > 0} | set(ACTIVATED)
        sent = [tool for tool in visible if tool.name in chosen]
        return json.dumps([openai_tool(tool) for tool in sent]).encode()


def test_turn_prep_ours(benchmark: Any) -> None:
    scope = our_scope()
    payload = json.loads(ours_turn(scope, 0))
    names = [entry["function"]["name"] for entry in payload]
    assert names[-1] == "search_tools"
    assert set(names[:-1]) <= KEEP
    assert set(ACTIVATED) & KEEP <= set(names)
    benchmark.group = GROUP
    benchmark.extra_info["engine"] = "ours"
    counter = iter(range(1 << 30))
    benchmark(lambda: ours_turn(scope, next(counter)))


def test_turn_prep_plain(benchmark: Any) -> None:
    if rank_bm25 is None or analyze is None:
        pytest.skip("rank-bm25 and snowballstemmer (bench extra) are needed for the plain row")
    plain = Plain()
    payload = json.loads(plain.turn(0))
    assert {entry["function"]["name"] for entry in payload} <= KEEP | set(ACTIVATED)
    benchmark.group = GROUP
    benchmark.extra_info["engine"] = "plain"
    counter = iter(range(1 << 30))
    benchmark(lambda: plain.turn(next(counter)))


def best_per_turn(reports: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Microseconds per turn of each engine, its lowest median over the loaded
    ``--benchmark-json`` documents."""
    best: dict[str, float] = {}
    for data in reports:
        for bench in data["benchmarks"]:
            engine = bench.get("extra_info", {}).get("engine")
            if engine is None or bench.get("group") != GROUP:
                continue
            micros = bench["stats"]["median"] * 1e6
            best[engine] = min(best.get(engine, micros), micros)
    return best


def speedup(best: dict[str, float]) -> float | None:
    """Plain / ours per turn (None when either row is missing)."""
    if "ours" in best and "plain" in best:
        return best["plain"] / best["ours"]
    return None


def ratio_report(paths: Sequence[str]) -> str:
    best = best_per_turn([json.loads(Path(path).read_text(encoding="utf-8")) for path in paths])
    lines = [f"{engine}: {micros:.1f} us per turn" for engine, micros in sorted(best.items())]
    ratio = speedup(best)
    if ratio is not None:
        verdict = "met" if ratio >= TARGET else "not met"
        lines.append(f"plain / ours = {ratio:.1f}x faster (target at least {TARGET:g}x): {verdict}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(ratio_report(sys.argv[1:]))
