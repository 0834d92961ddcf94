"""The agent runtime: whole scripted runs of ``session.run`` next to two peer agent loops, and a
64-call parallel round next to a bare ``asyncio.gather``.

Groups (``--benchmark-group-by=group`` puts each group's rows side by side):

* ``runtime/3 turns, 4 tool calls``: one run of a scripted conversation. Turn 1 asks for two tool
  calls (``lookup`` and ``convert``, two small arguments each), turn 2 for two more, turn 3
  answers ``"done"``. The tools are no-op async functions that count their calls. Rows:

  - ours ``fresh agent``: every run builds ``create_agent(...)`` (tools as a list of
    ``ToolDefinition``), a ``ScriptedProvider`` (it is consumed by a run) and ``agent.session()``,
    then awaits ``session.run(...)``. This is the headline row: it pays for more than the peers do
    (they reuse one agent).
  - ours ``one agent``: one agent built once with a stateless provider that picks its response
    from the transcript (as the peers' fake models do); a fresh ``agent.session()`` per run.
  - ours ``fresh agent, tool_concurrency=2``: as the headline row, the two calls of a turn run
    in parallel (both peers run a turn's calls concurrently).
  - ours ``fresh agent, JSON text + schema``: the arguments arrive as JSON text and every call is
    parsed and checked against the tool's JSON Schema
    (``create_json_schema_tool_argument_validator``), the work both peers do with pydantic.
  - pydantic-ai: ``Agent(FunctionModel(fn), tools=[Tool(...), Tool(...)])`` built once,
    ``await agent.run(...)`` per run. ``fn`` is async (a sync one runs in a thread) and returns a
    fresh ``ModelResponse`` (``FunctionModel`` mutates it) with usage set, so no token estimate
    runs. Arguments are dicts.
  - openai-agents: ``Agent(model=FakeModel(), tools=[function_tool, function_tool])`` built once,
    ``await Runner.run(agent, input, run_config=RunConfig(tracing_disabled=True))`` per run, with
    ``set_tracing_disabled(True)`` as well. ``FakeModel`` implements ``Model.get_response`` and
    returns prebuilt ``ModelResponse``\\ s of ``ResponseFunctionToolCall`` and
    ``ResponseOutputMessage`` items (the SDK's own tests build their fake model the same way).
    Arguments are JSON text, as the SDK requires.

  Both fake models pick the turn from the transcript they are given (how many tool calls it
  holds). Target: ours at least 20x faster per run than each peer.

* ``runtime/64 calls, tool_concurrency=8``: one tool round of 64 calls of ``tick``, a no-op async
  tool that does ``await asyncio.sleep(0)``, with ``loop={"tool_concurrency": 8}``. Rows: ours
  ``session.run`` (fresh agent, provider and session; 2 provider turns: the 64 calls, then
  ``"done"``); the same run with one call instead of 64 (the fixed cost of the two turns, so the
  difference is what the 63 extra calls cost); ours ``dispatch only``: 8 workers claiming the 64
  calls and awaiting ``dispatch_tool_call`` with a per-call context and the runtime's event sink
  (``event sink``) or none (``no sink``), no provider, no transcript; the bare ``asyncio.gather``
  over the 64 tool coroutines, and the same with one coroutine; and 8 bare workers claiming the 64
  tool coroutines (the runtime's worker pattern without dispatch). Target: ours at most 2x the
  ``asyncio.gather`` over 64. The report gives the whole-run ratio, the per-call ratio from the
  marginal costs ``(T(64) - T(1)) / 63`` of ours and of ``gather`` (which leaves out the two
  provider turns and the run set-up that ``gather`` does not do), and where one call's time goes
  (differences between the rows).

Timing: every benchmark round awaits ``RUNS`` (100) whole runs, ``RUNS_64`` (10) in the 64-call
group, in one ``loop.run_until_complete`` on an event loop created once per row, so loop start-up
is not measured. Reported times are per round: in the first group multiply milliseconds by 10 for
microseconds per run, in the second divide microseconds by 10. ``extra_info`` records
``runs_per_round``, ``engine`` and ``case``. Rounds are fixed from one timed round (about
``ROW_SECONDS`` per row, at least ``MIN_ROUNDS``), so ``--benchmark-min-rounds`` does not apply.

Ratios: run with ``--benchmark-json=FILE`` and then ``python benches/bench_runtime.py FILE [FILE
...]``: it prints microseconds per run, the ratios and the verdicts, on each row's lowest median
over the files and again on its lowest minimum (on a busy machine the two can differ by 1.5x).

Peer rows skip, with the reason, when the peer is not installed. Nothing asserts on timing; the
asserts before each timed row check that a run really executes its tool calls (the counters move
by 4, or 64, per run) and ends with the final text.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

import pytest

from prism_tools import (
    AgentEvent,
    ScriptedProvider,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolRegistry,
    create_agent,
    dispatch_tool_call,
)
from prism_tools.messages import ProviderRequest, ProviderResponse
from prism_tools.validation import create_json_schema_tool_argument_validator

MODEL = "scripted"
INPUT = "What is the weather in Paris, in Fahrenheit?"
FINAL = "done"

RUNS = 100
"""Whole runs per benchmark round in the 3-turn group."""
RUNS_64 = 10
"""Whole runs per benchmark round in the 64-call group."""
ROW_SECONDS = 1.0
MIN_ROUNDS = 10

TURNS = "runtime/3 turns, 4 tool calls"
WIDE = "runtime/64 calls, tool_concurrency=8"
WIDE_CALLS = 64
CONCURRENCY = 8

PEER_TARGET = 20.0
"""Peer time / ours per 3-turn run, at least."""
GATHER_TARGET = 2.0
"""Ours / ``asyncio.gather`` over 64 calls, at most."""

# The scripted conversation: (tool name, arguments) per call, per turn; then the final text.
SCRIPT: tuple[tuple[tuple[str, dict[str, Any]], ...], ...] = (
    (
        ("lookup", {"city": "Paris", "units": "metric"}),
        ("convert", {"value": 21, "unit": "celsius"}),
    ),
    (
        ("lookup", {"city": "Lyon", "units": "metric"}),
        ("convert", {"value": 70, "unit": "fahrenheit"}),
    ),
)
CALLS_PER_RUN = sum(len(turn) for turn in SCRIPT)
TURN_BY_CALLS_SO_FAR = {0: 0, 2: 1, 4: 2}
"""Which turn a fake model is on, from the tool calls already in its transcript."""

SCHEMAS: dict[str, dict[str, Any]] = {
    "lookup": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
        "required": ["city", "units"],
        "additionalProperties": False,
    },
    "convert": {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "unit": {"type": "string"}},
        "required": ["value", "unit"],
        "additionalProperties": False,
    },
}


class Counter:
    """Tool calls seen by one row's tools."""

    def __init__(self) -> None:
        self.calls = 0


# ------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop per benchmark, reused by every round."""
    event_loop = asyncio.new_event_loop()
    try:
        yield event_loop
    finally:
        event_loop.close()


def time_runs(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    group: str,
    batch: Callable[[], Coroutine[Any, Any, None]],
    runs: int,
    **info: Any,
) -> None:
    """Time ``batch()`` (``runs`` whole runs) per round on ``loop``: rounds fixed from one timed
    batch after a warm-up batch, about ``ROW_SECONDS`` in all and at least ``MIN_ROUNDS``."""
    benchmark.group = group
    benchmark.extra_info.update(info, runs_per_round=runs)

    def round_() -> None:
        loop.run_until_complete(batch())

    if getattr(benchmark, "disabled", False):
        benchmark(round_)
        return
    round_()
    started = time.perf_counter()
    round_()
    per_round = time.perf_counter() - started
    rounds = max(MIN_ROUNDS, int(ROW_SECONDS / per_round))
    benchmark.pedantic(round_, iterations=1, rounds=rounds, warmup_rounds=1)


def check_counts(
    loop: asyncio.AbstractEventLoop,
    counter: Counter,
    run_once: Callable[[], Coroutine[Any, Any, str]],
    calls: int,
) -> None:
    """Two runs each execute ``calls`` tool calls and end with the final text."""
    for _ in range(2):
        before = counter.calls
        assert loop.run_until_complete(run_once()) == FINAL
        assert counter.calls - before == calls, (counter.calls - before, calls)


def batch_of(
    run_once: Callable[[], Coroutine[Any, Any, str]], runs: int
) -> Callable[[], Coroutine[Any, Any, None]]:
    async def batch() -> None:
        for _ in range(runs):
            await run_once()

    return batch


# ------------------------------------------------------------------------------ ours: 3 turns


def our_tools(counter: Counter, *, schemas: bool = False) -> list[ToolDefinition]:
    async def lookup(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        counter.calls += 1

    async def convert(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        counter.calls += 1

    return [
        ToolDefinition(
            name=function.__name__,
            execute=function,
            description=f"no-op {function.__name__}",
            parameters=SCHEMAS[function.__name__] if schemas else None,
        )
        for function in (lookup, convert)
    ]


def our_script(*, as_text: bool = False) -> tuple[ProviderResponse, ...]:
    """The scripted responses; ``as_text`` gives the arguments as JSON text."""
    responses = []
    number = 0
    for turn in SCRIPT:
        calls = []
        for name, args in turn:
            number += 1
            calls.append(ToolCall(f"call_{number}", name, json.dumps(args) if as_text else args))
        responses.append(ProviderResponse(tool_calls=tuple(calls), finish_reason="tool_calls"))
    responses.append(ProviderResponse(text=FINAL, finish_reason="stop"))
    return tuple(responses)


def ours_fresh_agent(
    counter: Counter, *, as_text: bool = False, **options: Any
) -> Callable[[], Coroutine[Any, Any, str]]:
    """A run with a fresh ``ScriptedProvider``, agent and session."""
    tools = our_tools(counter, schemas=as_text)
    script = our_script(as_text=as_text)

    async def run_once() -> str:
        agent = create_agent(model=MODEL, provider=ScriptedProvider(script), tools=tools, **options)
        result = await agent.session().run(INPUT)
        return result.output_text

    return run_once


class TranscriptProvider:
    """A stateless provider: the response for the turn the transcript is on (like the peers'
    fake models), so one agent serves every run."""

    def __init__(self) -> None:
        self.script = our_script()

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        made = sum(len(message.tool_calls) for message in request.messages)
        return self.script[TURN_BY_CALLS_SO_FAR[made]]


def test_turns_ours_fresh_agent(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    counter = Counter()
    run_once = ours_fresh_agent(counter)
    check_counts(loop, counter, run_once, CALLS_PER_RUN)
    time_runs(
        benchmark, loop, TURNS, batch_of(run_once, RUNS), RUNS, engine="ours", case="fresh agent"
    )


def test_turns_ours_one_agent(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    counter = Counter()
    agent = create_agent(model=MODEL, provider=TranscriptProvider(), tools=our_tools(counter))

    async def run_once() -> str:
        return (await agent.session().run(INPUT)).output_text

    check_counts(loop, counter, run_once, CALLS_PER_RUN)
    time_runs(
        benchmark, loop, TURNS, batch_of(run_once, RUNS), RUNS, engine="ours", case="one agent"
    )


def test_turns_ours_concurrency_2(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    counter = Counter()
    run_once = ours_fresh_agent(counter, loop={"tool_concurrency": 2})
    check_counts(loop, counter, run_once, CALLS_PER_RUN)
    time_runs(
        benchmark,
        loop,
        TURNS,
        batch_of(run_once, RUNS),
        RUNS,
        engine="ours",
        case="fresh agent, tool_concurrency=2",
    )


def test_turns_ours_validated_text(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    counter = Counter()
    run_once = ours_fresh_agent(
        counter, as_text=True, validator=create_json_schema_tool_argument_validator()
    )
    check_counts(loop, counter, run_once, CALLS_PER_RUN)
    # The validator really refuses bad arguments (so the row pays for a real check).
    refused = Counter()
    bad = ProviderResponse(tool_calls=(ToolCall("call_1", "lookup", '{"city": 3}'),))
    agent = create_agent(
        model=MODEL,
        provider=ScriptedProvider([bad, ProviderResponse(text=FINAL)]),
        tools=our_tools(refused, schemas=True),
        validator=create_json_schema_tool_argument_validator(),
    )
    result = loop.run_until_complete(agent.session().run(INPUT))
    assert refused.calls == 0, refused.calls
    assert result.messages[2].error is not None, result.messages
    time_runs(
        benchmark,
        loop,
        TURNS,
        batch_of(run_once, RUNS),
        RUNS,
        engine="ours",
        case="fresh agent, JSON text + schema",
    )


# ------------------------------------------------------------------------------ peers: 3 turns


def test_turns_pydantic_ai(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim is not installed")
    from pydantic_ai import Agent, Tool
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    counter = Counter()

    async def lookup(city: str, units: str) -> None:
        counter.calls += 1

    async def convert(value: int, unit: str) -> None:
        counter.calls += 1

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(
            isinstance(part, ToolCallPart)
            for message in messages
            if isinstance(message, ModelResponse)
            for part in message.parts
        )
        turn = TURN_BY_CALLS_SO_FAR[made]
        usage = RequestUsage(input_tokens=10, output_tokens=5)
        if turn == len(SCRIPT):
            return ModelResponse(parts=[TextPart(FINAL)], usage=usage)
        parts = [
            ToolCallPart(tool_name=name, args=dict(args), tool_call_id=f"call_{made + i + 1}")
            for i, (name, args) in enumerate(SCRIPT[turn])
        ]
        return ModelResponse(parts=parts, usage=usage)

    agent = Agent(
        FunctionModel(model),
        tools=[Tool(lookup, name="lookup"), Tool(convert, name="convert")],
    )

    async def run_once() -> str:
        return (await agent.run(INPUT)).output

    check_counts(loop, counter, run_once, CALLS_PER_RUN)
    time_runs(
        benchmark,
        loop,
        TURNS,
        batch_of(run_once, RUNS),
        RUNS,
        engine="pydantic-ai",
        case="Agent.run, FunctionModel",
    )


def test_turns_openai_agents(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    agents = pytest.importorskip("agents", reason="openai-agents is not installed")
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    agents.set_tracing_disabled(True)
    counter = Counter()

    @agents.function_tool
    async def lookup(city: str, units: str) -> None:
        counter.calls += 1

    @agents.function_tool
    async def convert(value: int, unit: str) -> None:
        counter.calls += 1

    outputs: list[list[Any]] = []
    number = 0
    for turn in SCRIPT:
        items = []
        for name, args in turn:
            number += 1
            items.append(
                ResponseFunctionToolCall(
                    id=f"fc_{number}",
                    call_id=f"call_{number}",
                    type="function_call",
                    name=name,
                    arguments=json.dumps(args),
                )
            )
        outputs.append(items)
    outputs.append(
        [
            ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])],
            )
        ]
    )

    class FakeModel(Model):
        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            output_schema: Any,
            handoffs: Any,
            tracing: Any,
            *,
            previous_response_id: Any = None,
            conversation_id: Any = None,
            prompt: Any = None,
        ) -> ModelResponse:
            made = 0
            if not isinstance(input, str):
                made = sum(
                    1
                    for item in input
                    if (item.get("type") if isinstance(item, dict) else getattr(item, "type", None))
                    == "function_call"
                )
            return ModelResponse(
                output=outputs[TURN_BY_CALLS_SO_FAR[made]],
                usage=Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15),
                response_id=None,
            )

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    agent = agents.Agent(name="bench", model=FakeModel(), tools=[lookup, convert])
    config = agents.RunConfig(tracing_disabled=True)
    runner = agents.Runner

    async def run_once() -> str:
        return (await runner.run(agent, INPUT, run_config=config)).final_output

    check_counts(loop, counter, run_once, CALLS_PER_RUN)
    time_runs(
        benchmark,
        loop,
        TURNS,
        batch_of(run_once, RUNS),
        RUNS,
        engine="openai-agents",
        case="Runner.run, fake Model",
    )


# ------------------------------------------------------------------------------- 64-call round


def wide_tool(counter: Counter) -> Callable[..., Coroutine[Any, Any, None]]:
    async def tick(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        counter.calls += 1
        await asyncio.sleep(0)

    return tick


def wide_calls(count: int) -> tuple[ToolCall, ...]:
    return tuple(ToolCall(f"call_{i}", "tick", {"index": i}) for i in range(count))


def ours_wide(counter: Counter, count: int) -> Callable[[], Coroutine[Any, Any, str]]:
    tools = [ToolDefinition(name="tick", execute=wide_tool(counter), description="no-op")]
    script = (
        ProviderResponse(tool_calls=wide_calls(count), finish_reason="tool_calls"),
        ProviderResponse(text=FINAL, finish_reason="stop"),
    )
    options = {"tool_concurrency": CONCURRENCY}

    async def run_once() -> str:
        agent = create_agent(
            model=MODEL,
            provider=ScriptedProvider(script),
            tools=tools,
            loop=options,
            limits={"max_tool_calls": 256},
        )
        return (await agent.session().run(INPUT)).output_text

    return run_once


@pytest.mark.parametrize("count", [WIDE_CALLS, 1], ids=["64 calls", "1 call"])
def test_wide_ours_run(benchmark: Any, loop: asyncio.AbstractEventLoop, count: int) -> None:
    counter = Counter()
    run_once = ours_wide(counter, count)
    check_counts(loop, counter, run_once, count)
    time_runs(
        benchmark,
        loop,
        WIDE,
        batch_of(run_once, RUNS_64),
        RUNS_64,
        engine="ours",
        case=f"session.run, {count} call{'s' if count > 1 else ''}",
        calls=count,
    )


@pytest.mark.parametrize("sink", [True, False], ids=["event sink", "no sink"])
def test_wide_ours_dispatch_only(
    benchmark: Any, loop: asyncio.AbstractEventLoop, sink: bool
) -> None:
    """The dispatch share of the round: ``CONCURRENCY`` workers claim the calls in order and
    await ``dispatch_tool_call`` with a per-call context and, as the runtime does, an event sink
    (or, to price the events, none); no provider, no transcript, no run events."""
    counter = Counter()
    registry = ToolRegistry([ToolDefinition(name="tick", execute=wide_tool(counter))])
    calls = wide_calls(WIDE_CALLS)

    async def discard(event: AgentEvent) -> None:
        return None

    emit = discard if sink else None

    async def run_once() -> str:
        claimed = 0

        async def worker() -> None:
            nonlocal claimed
            while claimed < len(calls):
                call = calls[claimed]
                claimed += 1
                context = ToolExecutionContext(
                    session_id="session_1", run_id="run_1", tool_call_id=call.id
                )
                await dispatch_tool_call(call, registry, context, emit=emit)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return FINAL

    check_counts(loop, counter, run_once, WIDE_CALLS)
    time_runs(
        benchmark,
        loop,
        WIDE,
        batch_of(run_once, RUNS_64),
        RUNS_64,
        engine="ours dispatch only",
        case=f"8 workers x dispatch_tool_call, {'event sink' if sink else 'no sink'}",
        calls=WIDE_CALLS,
    )


@pytest.mark.parametrize("count", [WIDE_CALLS, 1], ids=["64 calls", "1 call"])
def test_wide_gather(benchmark: Any, loop: asyncio.AbstractEventLoop, count: int) -> None:
    counter = Counter()
    tick = wide_tool(counter)
    calls = wide_calls(count)
    context = ToolExecutionContext(session_id="session_1", run_id="run_1", tool_call_id="")

    async def run_once() -> str:
        await asyncio.gather(*(tick(call.arguments, context) for call in calls))
        return FINAL

    check_counts(loop, counter, run_once, count)
    time_runs(
        benchmark,
        loop,
        WIDE,
        batch_of(run_once, RUNS_64),
        RUNS_64,
        engine="asyncio.gather",
        case=f"gather, {count} call{'s' if count > 1 else ''}",
        calls=count,
    )


def test_wide_bare_workers(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """The runtime's worker pattern without dispatch: 8 workers claim the 64 tool coroutines."""
    counter = Counter()
    tick = wide_tool(counter)
    calls = wide_calls(WIDE_CALLS)
    context = ToolExecutionContext(session_id="session_1", run_id="run_1", tool_call_id="")

    async def run_once() -> str:
        claimed = 0

        async def worker() -> None:
            nonlocal claimed
            while claimed < len(calls):
                call = calls[claimed]
                claimed += 1
                await tick(call.arguments, context)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return FINAL

    check_counts(loop, counter, run_once, WIDE_CALLS)
    time_runs(
        benchmark,
        loop,
        WIDE,
        batch_of(run_once, RUNS_64),
        RUNS_64,
        engine="bare workers",
        case="8 workers x tool coroutine",
        calls=WIDE_CALLS,
    )


# ------------------------------------------------------------------------------------- ratios


Key = tuple[str, str, str]
"""(group, engine, case) of a row."""


def best_per_run(
    reports: Sequence[dict[str, Any]],
) -> tuple[dict[Key, float], dict[Key, float]]:
    """Microseconds per run of every row: the lowest median and the lowest minimum over the
    loaded ``--benchmark-json`` documents."""
    medians: dict[Key, float] = {}
    minimums: dict[Key, float] = {}
    for report in reports:
        for bench in report["benchmarks"]:
            info = bench.get("extra_info", {})
            if "engine" not in info or bench.get("group") not in (TURNS, WIDE):
                continue
            key = (bench["group"], info["engine"], info["case"])
            runs = info["runs_per_round"]
            for best, stat in ((medians, "median"), (minimums, "min")):
                micros = bench["stats"][stat] * 1e6 / runs
                best[key] = min(micros, best.get(key, float("inf")))
    return medians, minimums


def peer_ratios(best: dict[Key, float]) -> dict[str, float]:
    """Peer time / ours (``fresh agent``) per 3-turn run, for every peer measured."""
    ours = best.get((TURNS, "ours", "fresh agent"))
    if ours is None:
        return {}
    return {
        engine: other / ours
        for (group, engine, _), other in best.items()
        if group == TURNS and engine != "ours"
    }


def wide_numbers(best: dict[Key, float]) -> dict[str, float]:
    """The 64-call round: ``whole`` (ours / gather, whole run), and when the one-call rows were
    measured, ``marginal`` and ``gather_call`` (us per call from ``(T64 - T1) / 63``),
    ``per_call`` (their ratio) and ``fixed`` (ours' T1 - gather's T1); missing rows leave keys
    out."""
    run64 = best.get((WIDE, "ours", f"session.run, {WIDE_CALLS} calls"))
    run1 = best.get((WIDE, "ours", "session.run, 1 call"))
    gather64 = best.get((WIDE, "asyncio.gather", f"gather, {WIDE_CALLS} calls"))
    gather1 = best.get((WIDE, "asyncio.gather", "gather, 1 call"))
    if run64 is None or gather64 is None:
        return {}
    numbers = {"run64": run64, "gather64": gather64, "whole": run64 / gather64}
    if run1 is not None and gather1 is not None:
        marginal = (run64 - run1) / (WIDE_CALLS - 1)
        gather_call = (gather64 - gather1) / (WIDE_CALLS - 1)
        numbers |= {
            "marginal": marginal,
            "gather_call": gather_call,
            "per_call": marginal / gather_call,
            "fixed": run1 - gather1,
        }
    return numbers


def ratio_report(paths: Sequence[str]) -> str:
    """Markdown tables of microseconds per run, ratios and verdicts from benchmark JSON: on each
    row's lowest median over the files, then the verdicts again on the lowest minimum."""
    reports = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            reports.append(json.load(handle))
    medians, minimums = best_per_run(reports)
    lines = [f"Median per run, lowest over {len(paths)} run(s); microseconds.", ""]
    lines += [*turns_table(medians), "", *wide_table(medians), ""]
    lines += [f"### {TURNS}: verdicts on medians", "", *turns_verdicts(medians)]
    lines += ["", f"### {WIDE}: verdicts on medians", "", *wide_verdicts(medians)]
    lines += ["", "### the same verdicts on each row's lowest minimum", ""]
    lines += turns_verdicts(minimums) + wide_verdicts(minimums, pieces=False)
    return "\n".join(lines)


def turns_table(best: dict[Key, float]) -> list[str]:
    lines = [f"### {TURNS}", "", "| row | us per run | peer / row |", "| --- | ---: | ---: |"]
    peers = {engine: us for (group, engine, _), us in best.items() if group == TURNS}
    peers.pop("ours", None)
    for (group, engine, case), micros in sorted(best.items(), key=lambda item: item[1]):
        if group != TURNS:
            continue
        versus = ", ".join(f"{peer} {other / micros:.1f}x" for peer, other in peers.items())
        lines.append(
            f"| {engine}: {case} | {fmt(micros)} | {versus if engine == 'ours' else '-'} |"
        )
    return lines


def turns_verdicts(best: dict[Key, float]) -> list[str]:
    ours = best.get((TURNS, "ours", "fresh agent"))
    if ours is None:
        return [f"- {engine}: ours not measured" for (group, engine, _) in best if group == TURNS]
    lines = []
    for engine, ratio in peer_ratios(best).items():
        other = best[next(key for key in best if key[0] == TURNS and key[1] == engine)]
        state = "met" if ratio >= PEER_TARGET else "NOT met"
        lines.append(
            f"- {engine} / ours (fresh agent) = {fmt(other)} / {fmt(ours)} = "
            f"{ratio:.1f}x, target >= {PEER_TARGET:g}x: **{state}**"
        )
    return lines


def wide_table(best: dict[Key, float]) -> list[str]:
    lines = [f"### {WIDE}", "", "| row | us per run | us per call |", "| --- | ---: | ---: |"]
    for (group, engine, case), micros in sorted(best.items(), key=lambda item: item[1]):
        if group == WIDE:
            calls = 1 if case.endswith(" 1 call") else WIDE_CALLS
            lines.append(f"| {engine}: {case} | {fmt(micros)} | {fmt(micros / calls)} |")
    return lines


def wide_verdicts(best: dict[Key, float], *, pieces: bool = True) -> list[str]:
    numbers = wide_numbers(best)
    if not numbers:
        return [f"- ours / gather <= {GATHER_TARGET:g}: not measured"]
    run64, gather64 = numbers["run64"], numbers["gather64"]
    state = "met" if numbers["whole"] <= GATHER_TARGET else "NOT met"
    lines = [
        f"- whole run: ours {fmt(run64)} / gather {fmt(gather64)} = {numbers['whole']:.2f}x, "
        f"target <= {GATHER_TARGET:g}x: **{state}**"
    ]
    if "marginal" not in numbers:
        return lines
    marginal, gather_call = numbers["marginal"], numbers["gather_call"]
    state = "met" if numbers["per_call"] <= GATHER_TARGET else "NOT met"
    lines.append(
        f"- per call (marginal, (T64 - T1) / 63): ours {fmt(marginal)} / gather "
        f"{fmt(gather_call)} = {numbers['per_call']:.2f}x: **{state}**; ours' fixed cost "
        f"(two turns and the run, T1 - gather T1): {fmt(numbers['fixed'])}"
    )
    steps = call_breakdown(best)
    if not pieces or not steps:
        return lines
    lines += ["", "Where one call's time goes (us per call, differences of medians):", ""]
    lines += [f"- {label}: {fmt(micros)}" for label, micros in steps]
    lines.append(f"- = ours per call (marginal): {fmt(marginal)}")
    lines.append(f"- asyncio.gather per call (64 tasks): {fmt(gather64 / WIDE_CALLS)}")
    return lines


def call_breakdown(best: dict[Key, float]) -> list[tuple[str, float]]:
    """Where one call of the 64-call round goes, us per call from differences of rows; empty
    when a row it needs was not measured."""
    numbers = wide_numbers(best)
    dispatch = best.get((WIDE, "ours dispatch only", "8 workers x dispatch_tool_call, event sink"))
    bare = best.get((WIDE, "ours dispatch only", "8 workers x dispatch_tool_call, no sink"))
    workers = best.get((WIDE, "bare workers", "8 workers x tool coroutine"))
    if "marginal" not in numbers or workers is None or bare is None or dispatch is None:
        return []
    return [
        ("8 bare workers: claim, call the tool, sleep(0)", workers / WIDE_CALLS),
        ("+ dispatch_tool_call, no event sink", (bare - workers) / WIDE_CALLS),
        ("+ its two events to a sink", (dispatch - bare) / WIDE_CALLS),
        (
            "+ the runtime around dispatch (context, forward, limits, transcript row)",
            numbers["marginal"] - dispatch / WIDE_CALLS,
        ),
    ]


def fmt(micros: float | None) -> str:
    if micros is None:
        return "-"
    return f"{micros:,.2f}" if micros < 1_000 else f"{micros:,.0f}"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} BENCHMARK_JSON [BENCHMARK_JSON ...]")
    print(ratio_report(sys.argv[1:]))
