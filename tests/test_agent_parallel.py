"""Parallel tool rounds: concurrency, exclusive tools, row order, the round hook, and how a
stopped batch still answers every call."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import pytest
from tests.support import EventLog, WallClock

from prism_tools import (
    GuardrailContext,
    GuardrailDecision,
    Guardrails,
    GuardrailTripwire,
    MiddlewareRegistry,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    guardrail,
)
from prism_tools.agent import (
    NOT_DISPATCHED,
    AgentRunError,
    RunCancelledError,
    Session,
    ToolAbortedError,
    create_agent,
)
from prism_tools.messages import Message, ProviderResponse
from prism_tools.providers import ScriptedProvider


class Meter:
    """Tool bodies that sleep, recording peak concurrency, start order and completion order."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.started: list[str] = []
        self.finished: list[str] = []

    def tool(self, name: str, delay: float = 0.02, *, exclusive: bool = False) -> ToolDefinition:
        async def execute(args: dict[str, Any], context: ToolExecutionContext) -> Any:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.started.append(context.tool_call_id)
            try:
                await asyncio.sleep(args.get("delay", delay))
            finally:
                self.active -= 1
            self.finished.append(context.tool_call_id)
            return f"{name}:{context.tool_call_id}"

        return ToolDefinition(name=name, execute=execute, exclusive=exclusive)


def answer(text: str = "done") -> ProviderResponse:
    return ProviderResponse(text=text, finish_reason="stop")


def calling(*calls: ToolCall) -> ProviderResponse:
    return ProviderResponse(tool_calls=calls, finish_reason="tool_calls")


def batch(count: int, name: str = "slow", prefix: str = "call", **arguments: Any) -> list[ToolCall]:
    return [
        ToolCall(id=f"{prefix}_{i}", name=name, arguments=dict(arguments)) for i in range(count)
    ]


def make_session(
    script: list[Any], tools: Sequence[ToolDefinition], **options: Any
) -> tuple[Session, ScriptedProvider, EventLog]:
    provider = ScriptedProvider(script)
    session = create_agent(model="m", provider=provider, tools=tools, **options).session()
    log = EventLog()
    session.subscribe(log)
    return session, provider, log


def tool_rows(messages: Sequence[Message]) -> list[Message]:
    return [message for message in messages if message.role == "tool"]


def row_ids(messages: Sequence[Message]) -> list[str | None]:
    return [row.tool_call_id for row in tool_rows(messages)]


# --- concurrency -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("concurrency", "calls", "peak"), [(1, 4, 1), (2, 4, 2), (3, 5, 3), (8, 2, 2), (4, 4, 4)]
)
async def test_peak_concurrency_is_the_smaller_of_the_setting_and_the_batch(
    concurrency: int, calls: int, peak: int
) -> None:
    meter = Meter()
    session, _, _ = make_session(
        [calling(*batch(calls)), answer()],
        [meter.tool("slow")],
        loop={"strategy": "single-shot", "tool_concurrency": concurrency},
    )
    result = await session.run("go")
    assert meter.peak == peak
    assert sorted(meter.started) == sorted(f"call_{i}" for i in range(calls))
    assert row_ids(result.messages) == [f"call_{i}" for i in range(calls)]


@pytest.mark.parametrize("concurrency", [0, -3, 0.5, math.nan, math.inf, -math.inf])
async def test_concurrency_below_one_or_not_a_number_is_sequential(concurrency: float) -> None:
    meter = Meter()
    session, _, _ = make_session(
        [calling(*batch(3)), answer()], [meter.tool("slow")], loop={"tool_concurrency": concurrency}
    )
    await session.run("go")
    assert meter.peak == 1
    assert meter.started == ["call_0", "call_1", "call_2"]


async def test_fractional_concurrency_rounds_down() -> None:
    meter = Meter()
    session, _, _ = make_session(
        [calling(*batch(4)), answer()], [meter.tool("slow")], loop={"tool_concurrency": 2.9}
    )
    await session.run("go")
    assert meter.peak == 2


def test_bad_loop_options_are_refused_when_the_agent_is_built() -> None:
    provider = ScriptedProvider([])
    with pytest.raises(TypeError, match="tool_concurrency must be a number"):
        create_agent(model="m", provider=provider, tools=[], loop={"tool_concurrency": True})
    with pytest.raises(TypeError, match="tool_concurrency must be a number"):
        create_agent(model="m", provider=provider, tools=[], loop={"tool_concurrency": "4"})
    with pytest.raises(TypeError, match="unknown loop options: workers"):
        create_agent(model="m", provider=provider, tools=[], loop={"workers": 2})
    with pytest.raises(ValueError, match="not available"):
        create_agent(model="m", provider=provider, tools=[], loop={"strategy": "react"})
    with pytest.raises(TypeError, match="before_tool_round must be callable"):
        create_agent(model="m", provider=provider, tools=[], loop={"before_tool_round": 3})


async def test_the_default_is_sequential_and_a_run_loop_overrides_the_agent_loop() -> None:
    meter = Meter()
    session, _, _ = make_session(
        [calling(*batch(3)), answer(), calling(*batch(3, prefix="again")), answer()],
        [meter.tool("slow")],
    )
    await session.run("go")
    assert meter.peak == 1
    await session.run("again", loop={"tool_concurrency": 3})
    assert meter.peak == 3

    meter = Meter()
    session, _, _ = make_session(
        [calling(*batch(3)), answer()], [meter.tool("slow")], loop={"tool_concurrency": 3}
    )
    await session.run("go", loop={"tool_concurrency": 1})
    assert meter.peak == 1


async def test_an_exclusive_tool_makes_only_its_batch_sequential() -> None:
    meter = Meter()
    peaks: list[int] = []

    def next_batch(calls: Sequence[ToolCall]) -> None:
        peaks.append(meter.peak)  # the previous batch's peak
        meter.peak = 0

    first = [*batch(2), ToolCall(id="lock_0", name="locked", arguments={}), *batch(1, prefix="x")]
    second = batch(3, prefix="second")
    third = [ToolCall(id="lock_1", name="locked", arguments={}), *batch(2, prefix="third")]
    session, _, _ = make_session(
        [calling(*first), calling(*second), calling(*third), answer()],
        [meter.tool("slow"), meter.tool("locked", exclusive=True)],
        loop={"tool_concurrency": 4, "before_tool_round": next_batch},
    )
    result = await session.run("go")
    peaks.append(meter.peak)

    assert peaks[1:] == [1, 3, 1]
    assert meter.started[:4] == ["call_0", "call_1", "lock_0", "x_0"]
    assert meter.finished[:4] == ["call_0", "call_1", "lock_0", "x_0"]
    assert row_ids(result.messages) == [c.id for c in (*first, *second, *third)]


async def test_an_exclusive_batch_alone_has_peak_one() -> None:
    meter = Meter()
    session, _, _ = make_session(
        [calling(*batch(2), ToolCall(id="lock_0", name="locked", arguments={})), answer()],
        [meter.tool("slow"), meter.tool("locked", exclusive=True)],
        loop={"tool_concurrency": 4},
    )
    await session.run("go")
    assert meter.peak == 1


async def test_rows_follow_call_order_whatever_the_completion_order() -> None:
    # Each call ends only after the next one has (staggered sleeps would not do: a call that
    # starts late on a loaded machine can end out of turn).
    finished: list[str] = []
    ended = {f"call_{i}": asyncio.Event() for i in range(4)}

    async def slow(args: dict[str, Any], context: ToolExecutionContext) -> str:
        after = args.get("after")
        if after is not None:
            await ended[after].wait()
        finished.append(context.tool_call_id)
        ended[context.tool_call_id].set()
        return f"slow:{context.tool_call_id}"

    calls = [
        ToolCall(id=f"call_{i}", name="slow", arguments={"after": f"call_{i + 1}"} if i < 3 else {})
        for i in range(4)
    ]
    session, provider, _ = make_session(
        [calling(*calls), answer()],
        [ToolDefinition(name="slow", execute=slow)],
        loop={"tool_concurrency": 4},
    )
    result = await session.run("go")

    assert finished == ["call_3", "call_2", "call_1", "call_0"]
    rows = tool_rows(result.messages)
    assert [row.tool_call_id for row in rows] == ["call_0", "call_1", "call_2", "call_3"]
    assert [row.content for row in rows] == [f"slow:call_{i}" for i in range(4)]
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant"] + ["tool"] * 4


# --- before_tool_round -----------------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True])
async def test_before_tool_round_runs_once_per_batch_before_any_tool(is_async: bool) -> None:
    meter = Meter()
    seen: list[tuple[list[str], int, int]] = []

    def record(calls: Sequence[ToolCall]) -> None:
        seen.append(([call.id for call in calls], meter.active, len(meter.started)))

    async def async_hook(calls: Sequence[ToolCall]) -> None:
        await asyncio.sleep(0)
        record(calls)

    session, _, _ = make_session(
        [calling(*batch(3)), calling(*batch(2, prefix="next")), answer()],
        [meter.tool("slow")],
        loop={"tool_concurrency": 3, "before_tool_round": async_hook if is_async else record},
    )
    await session.run("go")

    assert seen == [
        (["call_0", "call_1", "call_2"], 0, 0),
        (["next_0", "next_1"], 0, 3),
    ]


async def test_a_raising_before_tool_round_fails_the_run_and_nothing_runs() -> None:
    meter = Meter()
    refusal = PermissionError("round not approved")

    def refuse(calls: Sequence[ToolCall]) -> None:
        raise refusal

    session, provider, _ = make_session(
        [calling(*batch(2)), answer()],
        [meter.tool("slow")],
        loop={"tool_concurrency": 2, "before_tool_round": refuse},
    )
    with pytest.raises(AgentRunError) as caught:
        await session.run("go")
    assert caught.value.__cause__ is refusal
    assert meter.started == []
    assert len(provider.requests) == 1


# --- failure semantics -----------------------------------------------------------------------


def trip_on(call_id: str) -> Guardrails:
    def decide(context: GuardrailContext) -> GuardrailDecision:
        if context.tool_call_id == call_id:
            return GuardrailDecision("tripwire", "stop right there")
        return GuardrailDecision("allow")

    return Guardrails(tool_input=[guardrail("trip", "tool_input", decide)])


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_a_tripwire_mid_batch_answers_every_call_then_fails_the_run(concurrency: int) -> None:
    meter = Meter()
    calls = [
        ToolCall(id="call_0", name="slow", arguments={"delay": 0.05}),
        ToolCall(id="call_1", name="slow", arguments={}),
        ToolCall(id="call_2", name="slow", arguments={}),
        ToolCall(id="call_3", name="slow", arguments={}),
    ]
    session, provider, _ = make_session(
        [calling(*calls), answer()],
        [meter.tool("slow")],
        guardrails=trip_on("call_1"),
        loop={"tool_concurrency": concurrency},
    )
    with pytest.raises(AgentRunError) as caught:
        await session.run("go")

    cause = caught.value.__cause__
    assert isinstance(cause, GuardrailTripwire)
    assert cause.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert cause.record.guardrail == "trip"
    # The already-claimed call finished and kept its result; nothing was claimed after the trip.
    assert meter.started == ["call_0"]
    assert meter.finished == ["call_0"]
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["call_0", "call_1", "call_2", "call_3"]
    assert rows[0].error is None
    assert rows[0].content == "slow:call_0"
    assert rows[1].error is not None
    assert rows[1].error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert rows[1].error.name == "GuardrailTripwire"
    for row in rows[2:]:
        assert row.error is not None
        assert row.error.code == NOT_DISPATCHED
        assert row.content is None
    assert len(provider.requests) == 1
    result = caught.value.result
    assert result.status == "failed"
    assert result.messages == tuple(session.messages)


async def test_a_tripwire_lets_calls_already_running_in_parallel_finish() -> None:
    meter = Meter()
    calls = [
        ToolCall(id="call_0", name="slow", arguments={"delay": 0.05}),
        ToolCall(id="call_1", name="slow", arguments={"delay": 0.05}),
        ToolCall(id="call_2", name="slow", arguments={}),
        ToolCall(id="call_3", name="slow", arguments={}),
        ToolCall(id="call_4", name="slow", arguments={}),
    ]
    session, _, _ = make_session(
        [calling(*calls), answer()],
        [meter.tool("slow")],
        guardrails=trip_on("call_2"),
        loop={"tool_concurrency": 3},
    )
    with pytest.raises(AgentRunError):
        await session.run("go")
    assert sorted(meter.finished) == ["call_0", "call_1"]
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == [c.id for c in calls]
    assert [row.error is None for row in rows] == [True, True, False, False, False]
    assert [row.error.code for row in rows[2:] if row.error] == [
        "ERR_PRISM_GUARDRAIL_BLOCKED",
        NOT_DISPATCHED,
        NOT_DISPATCHED,
    ]


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_cancelling_through_the_signal_stops_claiming_and_fails_the_run(
    concurrency: int,
) -> None:
    signal = asyncio.Event()
    ran: list[str] = []

    async def cancel(args: dict[str, Any], context: ToolExecutionContext) -> str:
        ran.append(context.tool_call_id)
        await asyncio.sleep(0.01)  # let a parallel worker claim the next call first
        signal.set()
        return "cancelled the run"

    async def work(args: dict[str, Any], context: ToolExecutionContext) -> str:
        ran.append(context.tool_call_id)
        await asyncio.sleep(0.03)
        return "worked"

    calls = [
        ToolCall(id="call_0", name="cancel", arguments={}),
        ToolCall(id="call_1", name="work", arguments={}),
        ToolCall(id="call_2", name="work", arguments={}),
        ToolCall(id="call_3", name="work", arguments={}),
    ]
    session, provider, log = make_session(
        [calling(*calls), answer()],
        [ToolDefinition(name="cancel", execute=cancel), ToolDefinition(name="work", execute=work)],
        loop={"tool_concurrency": concurrency},
    )
    with pytest.raises(AgentRunError) as caught:
        await session.run("go", signal=signal)

    assert isinstance(caught.value.__cause__, RunCancelledError)
    assert caught.value.__cause__.code == "ERR_PRISM_RUN_CANCELLED"
    expected_ran = ["call_0"] if concurrency == 1 else ["call_0", "call_1"]
    assert ran == expected_ran
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == [c.id for c in calls]
    for row in rows:
        if row.tool_call_id in ran:
            assert row.error is None
        else:
            assert row.error is not None
            assert row.error.code == NOT_DISPATCHED
    assert len(provider.requests) == 1
    assert caught.value.result.status == "failed"
    assert log.types[-1] == "agent_finished"


async def test_a_signal_set_before_the_run_stops_it_before_the_provider() -> None:
    signal = asyncio.Event()
    signal.set()
    session, provider, _ = make_session([answer()], [])
    with pytest.raises(AgentRunError) as caught:
        await session.run("go", signal=signal)
    assert isinstance(caught.value.__cause__, RunCancelledError)
    assert provider.requests == []


async def test_tool_events_follow_completion_order_but_rows_follow_call_order() -> None:
    meter = Meter()
    calls = [
        ToolCall(id="call_0", name="slow", arguments={"delay": 0.03}),
        ToolCall(id="call_1", name="slow", arguments={"delay": 0.0}),
    ]
    session, _, log = make_session(
        [calling(*calls), answer()], [meter.tool("slow")], loop={"tool_concurrency": 2}
    )
    result = await session.run("go")
    finished = [e.subject_call_id for e in log.events if e.type == "tool_execution_finished"]
    assert finished == ["call_1", "call_0"]
    assert row_ids(result.messages) == ["call_0", "call_1"]


# --- a round ends whole: nothing of it runs on after run() ----------------------------------------


class SlowLedger:
    """A ledger whose closing rows take a moment to write, as a networked ledger's do."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []

    async def append_tool_call(self, record: Any) -> None:
        if record.status != "started":
            await asyncio.sleep(0.02)
        self.rows.append((record.tool_call_id, record.status))


def hanging_tool(log: list[str], started: asyncio.Event | None = None) -> ToolDefinition:
    """A tool that waits until it is cancelled; with ``cleanup`` it then awaits a clean-up (as
    closing a connection does) before it lets the cancellation go on."""
    running: list[str] = []

    async def execute(args: dict[str, Any], context: ToolExecutionContext) -> None:
        running.append(context.tool_call_id)
        if started is not None and len(running) == 2:
            started.set()
        try:
            await asyncio.get_running_loop().create_future()  # never set
        except asyncio.CancelledError:
            log.append(f"{context.tool_call_id} cancelled")
            if args.get("cleanup"):
                await asyncio.sleep(0.03)
                log.append(f"{context.tool_call_id} cleaned up")
            raise

    return ToolDefinition(name="hang", execute=execute)


async def test_a_round_cut_by_the_wall_time_waits_for_every_call_before_the_run_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = WallClock().install(monkeypatch)
    log: list[str] = []
    started = asyncio.Event()
    ledger = SlowLedger()
    calls = [
        ToolCall(id="call_0", name="hang", arguments={"cleanup": True}),
        ToolCall(id="call_1", name="hang", arguments={}),
    ]
    session, _, events = make_session(
        [calling(*calls), answer()],
        [hanging_tool(log, started)],
        ledger=ledger,
        limits={"max_wall_time_ms": WallClock.LIMIT_MS},
        loop={"tool_concurrency": 2},
    )
    run = asyncio.create_task(session.run("go"))
    await started.wait()
    clock.use_up()  # the wall time runs out once both calls are running, not before
    with pytest.raises(AgentRunError) as caught:
        await run
    log.append("run returned")
    at_return = (list(events.types), list(ledger.rows), list(session.messages))
    await asyncio.sleep(0.2)  # longer than any clean-up: whatever ran on would show by now

    assert caught.value.result.limit is not None
    assert caught.value.result.limit["limit"] == "max_wall_time_ms"
    assert sorted(log[:-1]) == ["call_0 cancelled", "call_0 cleaned up", "call_1 cancelled"]
    assert log[-1] == "run returned"
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["call_0", "call_1"]
    # Both calls started: each is answered as cut off, none as never dispatched.
    assert [row.error.code for row in rows if row.error] == ["cancelled", "cancelled"]
    assert sorted(ledger.rows) == [
        ("call_0", "error"),
        ("call_0", "started"),
        ("call_1", "error"),
        ("call_1", "started"),
    ]
    assert events.types.count("tool_execution_error") == 2
    assert events.types[-1] == "agent_finished"
    assert (events.types, ledger.rows, session.messages) == at_return


async def test_cancelling_the_task_of_a_run_waits_for_its_round_then_propagates() -> None:
    log: list[str] = []
    started = asyncio.Event()
    calls = [
        ToolCall(id="call_0", name="hang", arguments={}),
        ToolCall(id="call_1", name="hang", arguments={"cleanup": True}),
    ]
    session, _, events = make_session(
        [calling(*calls), answer("next run")],
        [hanging_tool(log, started)],
        loop={"tool_concurrency": 2},
    )
    task = asyncio.create_task(session.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    log.append("run returned")
    at_return = (list(events.types), list(session.messages))
    await asyncio.sleep(0.2)

    assert sorted(log[:-1]) == ["call_0 cancelled", "call_1 cancelled", "call_1 cleaned up"]
    assert log[-1] == "run returned"
    rows = tool_rows(session.messages)
    assert [(row.tool_call_id, row.error.code if row.error else None) for row in rows] == [
        ("call_0", "cancelled"),
        ("call_1", "cancelled"),
    ]
    assert (events.types, session.messages) == at_return
    assert (await session.run("again")).output_text == "next run"


class OwnBaseException(BaseException):
    """A tool's own ``BaseException`` subclass."""


@pytest.mark.parametrize("concurrency", [1, 2])
@pytest.mark.parametrize("raised", ["CancelledError", "OwnBaseException"])
async def test_a_tool_raising_a_base_exception_fails_its_call_and_then_the_run(
    raised: str, concurrency: int
) -> None:
    log: list[str] = []
    # The worker task that runs the aborting call (in a parallel round each call has its own).
    aborting: asyncio.Future[asyncio.Task[Any]] = asyncio.get_running_loop().create_future()

    async def sibling(args: dict[str, Any], context: ToolExecutionContext) -> str:
        if concurrency > 1:
            # Still running when the failure lands: it ends once the worker of the aborting call
            # has ended. Ending after a sleep, it could end first on a loaded machine (closing a
            # cancelled call takes several turns of the loop), and its worker claim call_2.
            await asyncio.wait([await aborting])
        log.append(f"{context.tool_call_id} finished")
        return "sibling"

    async def abort(args: dict[str, Any], context: ToolExecutionContext) -> None:
        log.append(f"{context.tool_call_id} raised")
        task = asyncio.current_task()
        assert task is not None
        aborting.set_result(task)
        if raised == "CancelledError":
            # A future someone else cancelled: the run itself is not being cancelled.
            future = asyncio.get_running_loop().create_future()
            future.cancel()
            await future
        raise OwnBaseException("its own")

    calls = [
        ToolCall(id="call_0", name="sibling", arguments={}),
        ToolCall(id="call_1", name="abort", arguments={}),
        ToolCall(id="call_2", name="sibling", arguments={}),
    ]
    session, provider, events = make_session(
        [calling(*calls), answer("next run")],
        [
            ToolDefinition(name="sibling", execute=sibling),
            ToolDefinition(name="abort", execute=abort),
        ],
        loop={"tool_concurrency": concurrency},
    )
    with pytest.raises(AgentRunError) as caught:
        await session.run("go")
    log.append("run returned")
    at_return = (list(events.types), list(session.messages))
    await asyncio.sleep(0.1)

    cause = caught.value.__cause__
    assert isinstance(cause, ToolAbortedError)
    assert cause.code == "ERR_PRISM_TOOL_ABORTED"
    expected = asyncio.CancelledError if raised == "CancelledError" else OwnBaseException
    assert isinstance(cause.__cause__, expected)
    assert caught.value.result.error is not None
    assert caught.value.result.error.code == "ERR_PRISM_TOOL_ABORTED"
    # The sibling already running finished before run() returned (one at a time, before the
    # failing call; in parallel, once that call's worker has ended); the call after the failure
    # was never claimed.
    first = ["call_0 finished", "call_1 raised"]
    assert log == (first if concurrency == 1 else first[::-1]) + ["run returned"]
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["call_0", "call_1", "call_2"]
    assert rows[0].error is None
    assert rows[0].content == "sibling"
    assert rows[1].error is not None
    if raised == "CancelledError":
        assert rows[1].error.code == "cancelled"
    else:
        assert (rows[1].error.name, rows[1].error.message) == ("OwnBaseException", "its own")
    assert rows[2].error is not None
    assert rows[2].error.code == NOT_DISPATCHED
    assert events.types[-1] == "agent_finished"
    assert (events.types, session.messages) == at_return
    assert len(provider.requests) == 1
    assert (await session.run("again")).output_text == "next run"


async def test_a_call_a_middleware_renames_to_an_exclusive_tool_runs_alone() -> None:
    timeline: list[str] = []

    def tool(name: str, *, exclusive: bool = False) -> ToolDefinition:
        async def execute(args: dict[str, Any], context: ToolExecutionContext) -> str:
            timeline.append(f"start {context.tool_call_id}")
            await asyncio.sleep(0.02)
            timeline.append(f"end {context.tool_call_id}")
            return name

        return ToolDefinition(name=name, execute=execute, exclusive=exclusive)

    def alias(call: ToolCall, next: Any) -> ToolCall:
        return ToolCall(call.id, "locked", call.arguments) if call.name == "alias" else call

    calls = [
        ToolCall(id="call_0", name="slow", arguments={}),
        ToolCall(id="lock", name="alias", arguments={}),
        ToolCall(id="call_1", name="slow", arguments={}),
        ToolCall(id="call_2", name="slow", arguments={}),
    ]
    session, _, _ = make_session(
        [calling(*calls), answer()],
        [tool("slow"), tool("locked", exclusive=True)],
        middleware=MiddlewareRegistry().use("tool_call", alias),
        loop={"tool_concurrency": 4},
    )
    result = await session.run("go")

    start = timeline.index("start lock")
    assert timeline[start + 1] == "end lock"  # nothing started while it ran
    before = timeline[:start]
    assert sorted(item for item in before if item.startswith("start")) == sorted(
        item.replace("end", "start") for item in before if item.startswith("end")
    )  # and everything started before it had ended
    # The other calls of the round still ran in parallel with each other.
    assert timeline.index("start call_2") < timeline.index("end call_1")
    rows = tool_rows(result.messages)
    assert [row.tool_call_id for row in rows] == [call.id for call in calls]
    assert [row.content for row in rows] == ["slow", "locked", "slow", "slow"]


@pytest.mark.parametrize("concurrency", [2, 3])
async def test_a_tool_cancelling_its_own_task_fails_its_call_not_the_whole_run_raw(
    concurrency: int,
) -> None:
    # In a parallel round each call runs in a worker task of its own, so a tool cancelling the
    # task it runs in cancels only its call (sequentially, that task is the run's own).
    async def own_timeout(args: dict[str, Any], context: ToolExecutionContext) -> str:
        # The tool's own deadline, cancelling the task it runs in; nobody cancels the run.
        asyncio.get_running_loop().call_later(0.001, asyncio.current_task().cancel)  # type: ignore[union-attr]
        await asyncio.sleep(60)
        return "never"

    session, _, events = make_session(
        [calling(*batch(3, name="own")), answer("next run")],
        [ToolDefinition(name="own", execute=own_timeout)],
        loop={"tool_concurrency": concurrency},
    )
    with pytest.raises(AgentRunError) as caught:
        await session.run("go")
    assert isinstance(caught.value.__cause__, ToolAbortedError)
    assert events.types[-1] == "agent_finished"
    assert len(tool_rows(session.messages)) == 3


# --- hosts that cancel their own way --------------------------------------------------------


@pytest.mark.timeout(20)
async def test_a_parallel_round_ends_inside_a_cancel_scope_that_cancels_at_every_step() -> None:
    # anyio's cancel scopes (FastAPI, Starlette) cancel the task again at every step until it
    # leaves the scope: the round must still end once its workers have, with a row for each.
    import anyio

    meter = Meter()
    session, _, _ = make_session(
        [calling(*batch(2, delay=5)), answer()],
        [meter.tool("slow")],
        loop={"strategy": "single-shot", "tool_concurrency": 2},
    )
    with anyio.move_on_after(0.05) as scope:
        await session.run("go")
    assert scope.cancelled_caught
    assert meter.finished == []
    assert [
        (row.tool_call_id, row.error and row.error.code) for row in tool_rows(session.messages)
    ] == [
        ("call_0", "cancelled"),
        ("call_1", "cancelled"),
    ]


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_a_call_cancelled_while_its_end_is_recorded_keeps_its_result(
    concurrency: int,
) -> None:
    # The tool ran and returned; the run is cancelled while an asynchronous ledger stores the
    # finished row. The transcript carries what the tool returned: told "cancelled", the model
    # might send the email again.
    from prism_tools import ToolCallRecord

    recording = asyncio.Event()
    sent: list[str] = []

    class SlowLedger:
        def __init__(self) -> None:
            self.rows: list[ToolCallRecord] = []

        async def append_tool_call(self, record: ToolCallRecord) -> None:
            if record.status == "finished":
                recording.set()
                await asyncio.sleep(0.05)
            self.rows.append(record)

    def send(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        sent.append(context.tool_call_id)
        return {"message_id": "m-1"}

    ledger = SlowLedger()
    session, _, _ = make_session(
        [calling(ToolCall("a", "send", {})), answer()],
        [ToolDefinition("send", execute=send)],
        ledger=ledger,
        loop={"strategy": "single-shot", "tool_concurrency": concurrency},
    )
    run = asyncio.ensure_future(session.run("go"))
    await recording.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert sent == ["a"]
    assert [row.status for row in ledger.rows] == ["started", "finished"]
    rows = tool_rows(session.messages)
    assert [(row.tool_call_id, row.content, row.error) for row in rows] == [
        ("a", {"message_id": "m-1"}, None)
    ]
