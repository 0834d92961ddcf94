"""Per-call cost of dispatch, lookup and filtering, next to hand-written floors and peer harnesses.

Groups (``--benchmark-group-by=group`` puts each group's rows side by side):

* ``dispatch/no-op tool``: one awaited call of a no-op async tool through ``dispatch_tool_call``,
  a hand-written floor, and the dispatch entry points of openai-agents, pydantic-ai and
  langchain-core.
* ``dispatch/events+ledger``: ``dispatch_tool_call`` with a discarding event sink and ledger
  against the same call without them.
* ``registry.get/1024 tools``: ``ToolRegistry.get`` against ``dict.get``.
* ``filter_tools/1024 tools``: ``filter_tools`` on a registry and on a list against a list
  comprehension over Python sets.

The async and lookup rows run ``CALLS`` (1,000) calls per benchmark round, inside one
``loop.run_until_complete`` on an event loop created once per benchmark, so event-loop start-up is
not measured. Their reported times are per 1,000 calls: read milliseconds as microseconds per
call. The ``filter_tools`` rows time one call per round. ``extra_info["calls_per_round"]`` records
the divisor in ``--benchmark-json`` output.

Peer rows skip, with the reason, when the peer package is not installed. Nothing here asserts on
timing; the few asserts check that every row does the work it claims to (the tool ran, the filter
picked the same tools).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any

import orjson
import pytest

from prism_tools import (
    AgentEvent,
    ToolCall,
    ToolCallRecord,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolRegistry,
    dispatch_tool_call,
    filter_tools,
)

CALLS = 1_000
"""Awaited calls (or lookups) per benchmark round; reported times are per ``CALLS`` calls."""

ARGS: dict[str, Any] = {"city": "Paris", "units": "metric"}
ARGS_JSON = json.dumps(ARGS)
TOOL_NAME = "noop"
CALL_ID = "call_1"

DISPATCH = "dispatch/no-op tool"
AUDIT = "dispatch/events+ledger"
GET = "registry.get/1024 tools"
FILTER = "filter_tools/1024 tools"
N_TOOLS = 1_024


async def noop(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
    return None


# --------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop per benchmark, reused by every round."""
    event_loop = asyncio.new_event_loop()
    try:
        yield event_loop
    finally:
        event_loop.close()


def run_batches(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    group: str,
    batch: Callable[[], Coroutine[Any, Any, None]],
) -> None:
    """Time ``batch()`` (``CALLS`` awaited calls) per round on ``loop``, after a warm-up batch."""
    benchmark.group = group
    benchmark.extra_info["calls_per_round"] = CALLS
    loop.run_until_complete(batch())
    benchmark(lambda: loop.run_until_complete(batch()))


def one_tool_registry() -> ToolRegistry:
    return ToolRegistry([ToolDefinition(name=TOOL_NAME, execute=noop, description="no-op")])


def call_context() -> ToolExecutionContext:
    # tool_call_id matches the call, so dispatch hands the tool this context as is.
    return ToolExecutionContext(session_id="session_1", run_id="run_1", tool_call_id=CALL_ID)


DISPATCH_FILTER = ToolFilter(allow=[TOOL_NAME, "search", "fetch"])


class DiscardingLedger:
    """A ledger whose ``append_tool_call`` keeps nothing."""

    def append_tool_call(self, record: ToolCallRecord) -> None:
        return None


class AsyncDiscardingLedger:
    async def append_tool_call(self, record: ToolCallRecord) -> None:
        return None


def discard_event(event: AgentEvent) -> None:
    return None


async def discard_event_async(event: AgentEvent) -> None:
    return None


def ours_batch(
    emit: Callable[[AgentEvent], Any] | None = None, ledger: Any = None, calls: int = CALLS
) -> Callable[[], Coroutine[Any, Any, None]]:
    """A batch of ``calls`` dispatches of one prebuilt call. The keywords are written out in
    each loop (no ``**options``), so the call costs what it costs in a host's code."""
    registry = one_tool_registry()
    context = call_context()
    call = ToolCall(id=CALL_ID, name=TOOL_NAME, arguments=dict(ARGS))
    tool_filter = DISPATCH_FILTER

    async def plain() -> None:
        for _ in range(calls):
            await dispatch_tool_call(call, registry=registry, context=context, filter=tool_filter)

    async def audited() -> None:
        for _ in range(calls):
            await dispatch_tool_call(
                call,
                registry=registry,
                context=context,
                filter=tool_filter,
                emit=emit,
                ledger=ledger,
            )

    return plain if emit is None and ledger is None else audited


def check_ours(loop: asyncio.AbstractEventLoop, **options: Any) -> None:
    """The dispatch under test runs the tool (it is not blocked on the way)."""
    ran: list[dict[str, Any]] = []

    async def recording(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        ran.append(args)

    registry = ToolRegistry([ToolDefinition(name=TOOL_NAME, execute=recording)])
    call = ToolCall(id=CALL_ID, name=TOOL_NAME, arguments=dict(ARGS))
    result = loop.run_until_complete(
        dispatch_tool_call(
            call, registry=registry, context=call_context(), filter=DISPATCH_FILTER, **options
        )
    )
    assert result.error is None, result.error
    assert ran == [ARGS]


# ------------------------------------------------------------------------ dispatch/no-op tool


def test_noop_ours(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    check_ours(loop)
    run_batches(benchmark, loop, DISPATCH, ours_batch())


def test_noop_ours_shared_run_context(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """One context for the whole run (its tool_call_id is not the call's), as a host loop would
    hold it: dispatch then builds a per-call ``ToolExecutionContext`` for the tool."""
    registry = one_tool_registry()
    context = ToolExecutionContext(session_id="session_1", run_id="run_1", tool_call_id="")
    call = ToolCall(id=CALL_ID, name=TOOL_NAME, arguments=dict(ARGS))
    tool_filter = DISPATCH_FILTER

    async def batch() -> None:
        for _ in range(CALLS):
            await dispatch_tool_call(call, registry=registry, context=context, filter=tool_filter)

    run_batches(benchmark, loop, DISPATCH, batch)


def test_noop_ours_from_json_text(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """What a provider adapter adds in front of dispatch: parse the model's argument text with
    orjson and build the ``ToolCall``. The peers below all start from text or a fresh dict."""
    registry = one_tool_registry()
    context = call_context()
    tool_filter = DISPATCH_FILTER
    loads = orjson.loads

    async def batch() -> None:
        for _ in range(CALLS):
            call = ToolCall(CALL_ID, TOOL_NAME, loads(ARGS_JSON))
            await dispatch_tool_call(call, registry=registry, context=context, filter=tool_filter)

    run_batches(benchmark, loop, DISPATCH, batch)


def test_noop_ours_argument_text(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """The model's argument text handed to dispatch as is (``ToolCall.arguments`` a ``str``),
    parsed by the Rust core under its size and depth limits: the same input the openai-agents
    row gets."""
    registry = one_tool_registry()
    context = call_context()
    tool_filter = DISPATCH_FILTER
    probe = loop.run_until_complete(
        dispatch_tool_call(
            ToolCall(CALL_ID, TOOL_NAME, ARGS_JSON),
            registry=registry,
            context=context,
            filter=tool_filter,
        )
    )
    if probe.error is not None:
        pytest.skip(f"this prism_tools build does not accept argument text: {probe.error.message}")

    async def batch() -> None:
        for _ in range(CALLS):
            call = ToolCall(CALL_ID, TOOL_NAME, ARGS_JSON)
            await dispatch_tool_call(call, registry=registry, context=context, filter=tool_filter)

    run_batches(benchmark, loop, DISPATCH, batch)


def floor_batch(calls: int = CALLS) -> Callable[[], Coroutine[Any, Any, None]]:
    """A batch of ``calls`` awaits of the least a checked dispatch can do in Python: dict
    lookup, set membership, isinstance, await the tool. Shared with ``instructions.py``."""
    tools = {TOOL_NAME: noop}
    allowed = {TOOL_NAME, "search", "fetch"}
    context = call_context()
    call = ToolCall(id=CALL_ID, name=TOOL_NAME, arguments=dict(ARGS))

    async def floor_dispatch(call: ToolCall) -> Any:
        name = call.name
        tool = tools.get(name)
        if tool is None:
            return "unknown"
        if name not in allowed:
            return "denied"
        args = call.arguments
        if not isinstance(args, dict):
            return "invalid"
        return await tool(args, context)

    async def batch() -> None:
        for _ in range(calls):
            await floor_dispatch(call)

    return batch


def test_noop_floor(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """The hand-written floor (``floor_batch``)."""
    run_batches(benchmark, loop, DISPATCH, floor_batch())


def test_noop_openai_agents(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """``FunctionTool.on_invoke_tool(ToolContext, json_text)`` for a ``@function_tool`` no-op."""
    agents = pytest.importorskip("agents", reason="openai-agents is not installed")
    from agents.tool_context import ToolContext

    @agents.function_tool(name_override=TOOL_NAME)
    async def oa_noop(city: str, units: str) -> None:
        return None

    ctx = ToolContext(
        context=None, tool_name=TOOL_NAME, tool_call_id=CALL_ID, tool_arguments=ARGS_JSON
    )
    invoke = oa_noop.on_invoke_tool
    # A failing tool comes back as an error string, not an exception: check it really ran.
    assert loop.run_until_complete(invoke(ctx, ARGS_JSON)) is None

    async def batch() -> None:
        for _ in range(CALLS):
            await invoke(ctx, ARGS_JSON)

    run_batches(benchmark, loop, DISPATCH, batch)


def test_noop_pydantic_ai(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """``ToolManager.handle_call(ToolCallPart)`` on a manager prepared for one run step, holding a
    ``FunctionToolset`` with one no-op tool."""
    pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim is not installed")
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    async def pa_noop(city: str, units: str) -> None:
        return None

    toolset = FunctionToolset([Tool(pa_noop, name=TOOL_NAME)])
    run_context = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = loop.run_until_complete(ToolManager(toolset).for_run_step(run_context))
    part = ToolCallPart(tool_name=TOOL_NAME, args=ARGS_JSON, tool_call_id=CALL_ID)
    handle = manager.handle_call
    assert loop.run_until_complete(handle(part)) is None

    async def batch() -> None:
        for _ in range(CALLS):
            await handle(part)

    run_batches(benchmark, loop, DISPATCH, batch)


def _langchain_tool() -> Any:
    pytest.importorskip("langchain_core", reason="langchain-core is not installed")
    from langchain_core.tools import StructuredTool

    async def lc_noop(city: str, units: str) -> None:
        return None

    return StructuredTool.from_function(coroutine=lc_noop, name=TOOL_NAME, description="no-op")


def test_noop_langchain_core(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """``StructuredTool.ainvoke(args_dict)`` for a ``from_function(coroutine=...)`` no-op."""
    tool = _langchain_tool()
    ainvoke = tool.ainvoke
    args = dict(ARGS)
    assert loop.run_until_complete(ainvoke(args)) is None

    async def batch() -> None:
        for _ in range(CALLS):
            await ainvoke(args)

    run_batches(benchmark, loop, DISPATCH, batch)


def test_noop_langchain_core_tool_call(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    """``StructuredTool.ainvoke`` given a model tool call (id, name, args): returns a
    ``ToolMessage``, the closest match to our ``ToolResult``."""
    tool = _langchain_tool()
    ainvoke = tool.ainvoke
    tool_call = {"type": "tool_call", "id": CALL_ID, "name": TOOL_NAME, "args": dict(ARGS)}
    message = loop.run_until_complete(ainvoke(tool_call))
    assert message.status == "success", message

    async def batch() -> None:
        for _ in range(CALLS):
            await ainvoke(tool_call)

    run_batches(benchmark, loop, DISPATCH, batch)


# --------------------------------------------------------------------- dispatch/events+ledger


def test_audit_off(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    check_ours(loop)
    run_batches(benchmark, loop, AUDIT, ours_batch())


def test_audit_events_and_ledger(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    ledger = DiscardingLedger()
    check_ours(loop, emit=discard_event, ledger=ledger)
    run_batches(benchmark, loop, AUDIT, ours_batch(emit=discard_event, ledger=ledger))


def test_audit_events_and_ledger_async(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    ledger = AsyncDiscardingLedger()
    check_ours(loop, emit=discard_event_async, ledger=ledger)
    run_batches(benchmark, loop, AUDIT, ours_batch(emit=discard_event_async, ledger=ledger))


def test_audit_events_only(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    check_ours(loop, emit=discard_event)
    run_batches(benchmark, loop, AUDIT, ours_batch(emit=discard_event))


def test_audit_ledger_only(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    ledger = DiscardingLedger()
    check_ours(loop, ledger=ledger)
    run_batches(benchmark, loop, AUDIT, ours_batch(ledger=ledger))


# -------------------------------------------------------------------- registry.get/1024 tools


def many_tools() -> list[ToolDefinition]:
    return [ToolDefinition(name=f"tool_{i:04d}", execute=noop) for i in range(N_TOOLS)]


def lookup_names(tools: list[ToolDefinition]) -> list[str]:
    """``CALLS`` names spread over the registry, as fresh string objects (as parsed from a model
    reply), so ``dict.get`` cannot win on identity alone."""
    return ["".join(list(tools[i * N_TOOLS // CALLS].name)) for i in range(CALLS)]


def test_get_registry(benchmark: Any) -> None:
    tools = many_tools()
    registry = ToolRegistry(tools)
    names = lookup_names(tools)
    get = registry.get
    assert [get(name) for name in names] == [tools[i * N_TOOLS // CALLS] for i in range(CALLS)]

    def batch() -> None:
        for name in names:
            get(name)

    benchmark.group = GET
    benchmark.extra_info["calls_per_round"] = CALLS
    benchmark(batch)


def test_get_dict(benchmark: Any) -> None:
    tools = many_tools()
    table = {tool.name: tool for tool in tools}
    names = lookup_names(tools)
    get = table.get

    def batch() -> None:
        for name in names:
            get(name)

    benchmark.group = GET
    benchmark.extra_info["calls_per_round"] = CALLS
    benchmark(batch)


# ------------------------------------------------------------------- filter_tools/1024 tools


def filter_case() -> tuple[list[ToolDefinition], list[str], list[str]]:
    """1,024 tools; allow 512 of them (every other one); deny 16, half of them allowed ones."""
    tools = many_tools()
    allow = [tool.name for tool in tools[::2]]
    deny = [tools[i].name for i in range(0, 16, 2)] + [tools[i].name for i in range(1, 17, 2)]
    return tools, allow, deny


def expected_filtered(tools: list[ToolDefinition], allow: list[str], deny: list[str]) -> list[Any]:
    allowed, denied = set(allow), set(deny)
    return [t for t in tools if t.name in allowed and t.name not in denied]


def test_filter_registry(benchmark: Any) -> None:
    tools, allow, deny = filter_case()
    registry = ToolRegistry(tools)
    tool_filter = ToolFilter(allow=allow, deny=deny)
    assert filter_tools(registry, tool_filter) == expected_filtered(tools, allow, deny)
    benchmark.group = FILTER
    benchmark.extra_info["calls_per_round"] = 1
    benchmark(filter_tools, registry, tool_filter)


def test_filter_list(benchmark: Any) -> None:
    tools, allow, deny = filter_case()
    tool_filter = ToolFilter(allow=allow, deny=deny)
    assert filter_tools(tools, tool_filter) == expected_filtered(tools, allow, deny)
    benchmark.group = FILTER
    benchmark.extra_info["calls_per_round"] = 1
    benchmark(filter_tools, tools, tool_filter)


def test_filter_comprehension(benchmark: Any) -> None:
    tools, allow_list, deny_list = filter_case()
    allow, deny = set(allow_list), set(deny_list)

    def comprehension() -> list[ToolDefinition]:
        return [t for t in tools if t.name in allow and t.name not in deny]

    benchmark.group = FILTER
    benchmark.extra_info["calls_per_round"] = 1
    benchmark(comprehension)


# ------------------------------------------------------------------------------------- ratios

FLOOR_TARGET = 4.0
"""Ours / floor per no-op call, at most."""
PEER_TARGETS = {"test_noop_openai_agents": 8.0, "test_noop_langchain_core": 100.0}
"""Peer time / ours per no-op call, at least."""
AUDIT_TARGET = 3.0
"""Ours with events and a ledger / ours without them, at most."""


def per_call_micros(reports: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Microseconds per call (or lookup) of every row, keyed by test name: each row's lowest
    median over the loaded ``--benchmark-json`` documents, divided by its calls per round."""
    best: dict[str, float] = {}
    for report in reports:
        for bench in report["benchmarks"]:
            if bench.get("group") not in (DISPATCH, AUDIT, GET, FILTER):
                continue
            calls = bench.get("extra_info", {}).get("calls_per_round", 1)
            micros = bench["stats"]["median"] * 1e6 / calls
            best[bench["name"]] = min(micros, best.get(bench["name"], float("inf")))
    return best


def target_ratios(best: dict[str, float]) -> dict[str, float | None]:
    """The ratios the targets speak of (None: a row is missing): ``floor`` (ours / floor),
    each ``PEER_TARGETS`` row (peer / ours) and ``audit`` (events+ledger / without)."""

    def ratio(top: str, bottom: str) -> float | None:
        if top in best and best.get(bottom):
            return best[top] / best[bottom]
        return None

    ratios = {"floor": ratio("test_noop_ours", "test_noop_floor")}
    for peer in PEER_TARGETS:
        ratios[peer] = ratio(peer, "test_noop_ours")
    ratios["audit"] = ratio("test_audit_events_and_ledger", "test_audit_off")
    return ratios
