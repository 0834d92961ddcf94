"""Guardrails at the tool_input and tool_output stages of dispatch, and evaluate_guardrails."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import support

from prism_tools import (
    GuardrailContext,
    GuardrailDecision,
    GuardrailRecord,
    Guardrails,
    GuardrailTripwire,
    InMemoryRunLedger,
    MiddlewareRegistry,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    _json,
    create_tool_registry,
    dispatch_tool_call,
    guardrail,
)
from prism_tools.guardrails import GuardrailRulePack, evaluate_guardrails

GuardFn = Callable[[GuardrailContext], Any]


def make_call(name: str = "echo", arguments: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(
        id="call_1", name=name, arguments={"text": "hi"} if arguments is None else arguments
    )


def make_context(**extra: Any) -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id="call_1", **extra)


def decide(action: str, reason: str | None = None, metadata: Any = None) -> GuardFn:
    """A guard body that always returns the same decision."""
    return lambda context: GuardrailDecision(action, reason, metadata)  # type: ignore[arg-type]


class CountingTool:
    """A tool body that counts its calls and returns a fixed value."""

    def __init__(self, value: Any = "ok") -> None:
        self.calls = 0
        self.value = value

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.calls += 1
        return self.value


class GuardSpy:
    """A guard body that records every context it is called with."""

    def __init__(self, action: str = "allow") -> None:
        self.contexts: list[GuardrailContext] = []
        self.action = action

    def __call__(self, context: GuardrailContext) -> GuardrailDecision:
        self.contexts.append(context)
        return GuardrailDecision(self.action)  # type: ignore[arg-type]


class EventLog(support.EventLog):
    @property
    def decisions(self) -> list[GuardrailRecord]:
        return [event.record for event in self.events if event.type == "guardrail_decision"]


@dataclasses.dataclass
class Outcome:
    result: ToolResult
    tool: CountingTool
    log: EventLog
    ledger: InMemoryRunLedger

    @property
    def statuses(self) -> list[str]:
        return [row.status for row in self.ledger.records]


async def dispatch_guarded(
    guardrails: Guardrails,
    *,
    call: ToolCall | None = None,
    tool: CountingTool | None = None,
    **options: Any,
) -> Outcome:
    """Dispatch one call to a registered ``echo`` tool with events and a ledger attached."""
    tool = CountingTool() if tool is None else tool
    log, ledger = EventLog(), InMemoryRunLedger()
    result = await dispatch_tool_call(
        make_call() if call is None else call,
        registry=create_tool_registry([ToolDefinition(name="echo", execute=tool)]),
        context=make_context(),
        guardrails=guardrails,
        emit=log,
        ledger=ledger,
        **options,
    )
    return Outcome(result, tool, log, ledger)


async def dispatch_expecting_tripwire(
    guardrails: Guardrails, **options: Any
) -> tuple[GuardrailTripwire, CountingTool, EventLog, InMemoryRunLedger]:
    tool, log, ledger = CountingTool(), EventLog(), InMemoryRunLedger()
    with pytest.raises(GuardrailTripwire) as caught:
        await dispatch_tool_call(
            make_call(),
            registry=create_tool_registry([ToolDefinition(name="echo", execute=tool)]),
            context=make_context(),
            guardrails=guardrails,
            emit=log,
            ledger=ledger,
            **options,
        )
    return caught.value, tool, log, ledger


def everything_emitted(outcome: Outcome) -> str:
    """Every event, ledger row and the result, as one JSON text."""
    parts: list[Any] = [*outcome.log.events, *outcome.ledger.records, outcome.result]
    return _json.dumps_lenient([part.to_dict() for part in parts]).decode()


# --- tool_input --------------------------------------------------------------------------------


async def test_tool_input_block_returns_guardrail_blocked_and_never_runs_the_tool() -> None:
    outcome = await dispatch_guarded(
        Guardrails(tool_input=[guardrail("no-echo", "tool_input", decide("block", "not today"))])
    )

    assert outcome.tool.calls == 0
    assert outcome.result.error is not None
    assert outcome.result.error.message == "Tool call blocked by guardrail"
    assert outcome.result.tool_call_id == "call_1"
    assert outcome.log.types == ["guardrail_decision", "tool_execution_blocked"]
    decision, blocked = outcome.log.events
    assert decision.record == GuardrailRecord(
        guardrail="no-echo", stage="tool_input", action="block", reason="not today"
    )
    assert decision.tool_call_id == "call_1"
    assert decision.tool_name == "echo"
    assert blocked.reason == "guardrail_blocked"
    assert outcome.statuses == ["blocked"]
    assert outcome.ledger.records[0].reason == "guardrail_blocked"


async def test_allowing_tool_input_guards_let_the_call_run_after_their_decisions() -> None:
    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[
                guardrail("first", "tool_input", decide("allow")),
                guardrail("second", "tool_input", decide("allow", "fine")),
            ]
        )
    )
    assert outcome.tool.calls == 1
    assert outcome.result.value == "ok"
    assert outcome.log.types == [
        "guardrail_decision",
        "guardrail_decision",
        "tool_execution_started",
        "tool_execution_finished",
    ]
    assert [(r.guardrail, r.action) for r in outcome.log.decisions] == [
        ("first", "allow"),
        ("second", "allow"),
    ]


async def test_tool_input_guards_see_calls_to_unknown_tools() -> None:
    spy = GuardSpy()
    ghost_call = make_call("ghost", {"x": 1})
    outcome = await dispatch_guarded(
        Guardrails(tool_input=[guardrail("watch", "tool_input", spy)]), call=ghost_call
    )

    [seen] = spy.contexts
    assert seen.value == ghost_call
    assert seen.stage == "tool_input"
    assert seen.tool_name == "ghost"
    assert seen.tool_call_id == "call_1"
    assert (seen.session_id, seen.run_id) == ("s1", "r1")
    assert seen.metadata == {}
    assert outcome.result.error is not None
    assert outcome.result.error.message == "Unknown tool: ghost"
    assert outcome.tool.calls == 0


async def test_tool_input_guards_see_the_call_after_tool_call_middleware() -> None:
    spy = GuardSpy()
    middleware = MiddlewareRegistry().use(
        "tool_call", lambda call, next_: dataclasses.replace(call, arguments={"rewritten": True})
    )
    await dispatch_guarded(
        Guardrails(tool_input=[guardrail("watch", "tool_input", spy)]), middleware=middleware
    )
    assert spy.contexts[0].value.arguments == {"rewritten": True}


async def test_tool_input_guard_context_carries_the_caller_metadata() -> None:
    spy = GuardSpy()
    await dispatch_tool_call(
        make_call(),
        registry=create_tool_registry([ToolDefinition(name="echo", execute=CountingTool())]),
        context=make_context(metadata={"tenant": "acme"}),
        guardrails=Guardrails(tool_input=[guardrail("watch", "tool_input", spy)]),
    )
    assert spy.contexts[0].metadata == {"tenant": "acme"}


async def test_tool_input_tripwire_raises_and_the_tool_does_not_run() -> None:
    error, tool, log, ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_input=[guardrail("trip", "tool_input", decide("tripwire", "danger"))])
    )

    assert tool.calls == 0
    assert error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert str(error) == "Guardrail blocked run"
    assert error.record == GuardrailRecord(
        guardrail="trip", stage="tool_input", action="tripwire", reason="danger"
    )
    assert log.types == ["guardrail_decision"]
    assert ledger.records == []


async def test_tool_input_interrupt_raises_interrupt_unavailable() -> None:
    error, tool, _log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_input=[guardrail("ask", "tool_input", decide("interrupt"))])
    )
    assert tool.calls == 0
    assert error.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert 'stage "tool_input"' in str(error)
    assert error.record.action == "interrupt"


async def test_async_guards_work_at_both_stages() -> None:
    async def allow_later(context: GuardrailContext) -> GuardrailDecision:
        await asyncio.sleep(0)
        return GuardrailDecision("allow")

    async def block_later(context: GuardrailContext) -> GuardrailDecision:
        await asyncio.sleep(0)
        return GuardrailDecision("block", "async says no")

    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[guardrail("in", "tool_input", allow_later)],
            tool_output=[guardrail("out", "tool_output", block_later)],
        )
    )
    assert outcome.tool.calls == 1
    assert outcome.result.error is not None
    assert outcome.result.error.message == "Tool result blocked by guardrail"
    assert [(r.guardrail, r.action) for r in outcome.log.decisions] == [
        ("in", "allow"),
        ("out", "block"),
    ]


# --- tool_output -------------------------------------------------------------------------------

RAW_OUTPUT = "raw-output-7f3a91"


async def test_tool_output_block_hides_the_raw_output_after_the_tool_ran() -> None:
    spy = GuardSpy("block")
    outcome = await dispatch_guarded(
        Guardrails(tool_output=[guardrail("scan", "tool_output", spy)]),
        tool=CountingTool(value={"payload": RAW_OUTPUT}),
    )

    assert outcome.tool.calls == 1, "the tool DID run"
    assert spy.contexts[0].stage == "tool_output"
    assert spy.contexts[0].value.value == {"payload": RAW_OUTPUT}, "the guard sees the raw result"
    assert outcome.result.error is not None
    assert outcome.result.error.message == "Tool result blocked by guardrail"
    assert outcome.result.value is None
    assert outcome.log.types == [
        "tool_execution_started",
        "guardrail_decision",
        "tool_execution_blocked",
    ]
    assert outcome.log.events[-1].reason == "guardrail_blocked"
    assert outcome.statuses == ["started", "blocked"]
    assert RAW_OUTPUT not in everything_emitted(outcome)


async def test_tool_output_guard_sees_the_unredacted_result() -> None:
    spy = GuardSpy()
    outcome = await dispatch_guarded(
        Guardrails(tool_output=[guardrail("scan", "tool_output", spy)]),
        tool=CountingTool(value="token sk-live-1"),
        secrets=["sk-live-1"],
    )
    assert spy.contexts[0].value.value == "token sk-live-1"
    assert outcome.result.value == "token [REDACTED]"


async def test_tool_output_tripwire_raises_after_the_tool_ran() -> None:
    error, tool, log, ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_output=[guardrail("scan", "tool_output", decide("tripwire"))])
    )
    assert tool.calls == 1
    assert error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert error.record.stage == "tool_output"
    assert "tool_execution_finished" not in log.types
    # The tool ran, so its started row is closed before the tripwire fails the caller.
    assert [row.status for row in ledger.records] == ["started", "error"]
    closing = ledger.records[-1].result
    assert closing is not None
    assert closing.error is not None
    assert closing.error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert log.types[-1] == "tool_execution_error"


async def test_tool_output_interrupt_raises_interrupt_unavailable() -> None:
    error, tool, _log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_output=[guardrail("ask", "tool_output", decide("interrupt"))])
    )
    assert tool.calls == 1
    assert error.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert 'stage "tool_output"' in str(error)


# --- fail-closed conversions -------------------------------------------------------------------


async def test_a_raising_guard_becomes_a_tripwire_with_its_redacted_error() -> None:
    def explode(context: GuardrailContext) -> GuardrailDecision:
        raise RuntimeError("boom sk-guard-secret")

    error, tool, log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_input=[guardrail("fragile", "tool_input", explode)]),
        secrets=["sk-guard-secret"],
    )

    assert tool.calls == 0
    assert error.record.guardrail == "fragile"
    assert error.record.action == "tripwire"
    assert error.record.reason == "guardrail_failed"
    assert error.record.metadata == {"error": "boom [REDACTED]"}
    assert log.decisions[0].metadata == {"error": "boom [REDACTED]"}
    assert "sk-guard-secret" not in _json.dumps_lenient([e.to_dict() for e in log.events]).decode()


async def test_a_guard_raising_an_error_that_cannot_be_printed_is_a_tripwire() -> None:
    def explode(context: GuardrailContext) -> GuardrailDecision:
        raise support.UnprintableError("sk-guard-secret")

    error, tool, _log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_input=[guardrail("fragile", "tool_input", explode)])
    )
    assert tool.calls == 0
    assert error.record.reason == "guardrail_failed"
    assert error.record.metadata == {"error": "[Unprintable UnprintableError]"}


async def test_a_raising_guard_error_text_is_cut_to_4096_bytes() -> None:
    def explode(context: GuardrailContext) -> GuardrailDecision:
        raise RuntimeError("é" * 5000)

    error, _tool, _log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_input=[guardrail("fragile", "tool_input", explode)])
    )
    text = error.record.metadata["error"]
    assert len(text.encode()) <= 4096
    assert text == "é" * len(text)


class GuardWithoutEvaluate:
    name = "lazy"
    stage = "tool_input"


@pytest.mark.parametrize(
    "guard",
    [
        pytest.param(guardrail("", "tool_input", decide("allow")), id="empty-name"),
        pytest.param(guardrail("late", "tool_output", decide("allow")), id="wrong-stage"),
        pytest.param(GuardWithoutEvaluate(), id="no-evaluate"),
        pytest.param(guardrail("x" * 129, "tool_input", decide("allow")), id="name-over-128"),
    ],
)
async def test_a_malformed_guard_becomes_a_guardrail_invalid_tripwire(guard: Any) -> None:
    error, tool, log, _ledger = await dispatch_expecting_tripwire(Guardrails(tool_input=[guard]))
    assert tool.calls == 0
    assert error.record.action == "tripwire"
    assert error.record.reason == "guardrail_invalid"
    assert error.record.guardrail
    assert len(error.record.guardrail.encode()) <= 128
    assert log.decisions == [error.record]


async def test_an_empty_guard_name_is_recorded_as_invalid() -> None:
    error, _tool, _log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_input=[guardrail("", "tool_input", decide("allow"))])
    )
    assert error.record.guardrail == "invalid"


@pytest.mark.parametrize(
    "returned",
    [
        pytest.param(None, id="none"),
        pytest.param(GuardrailDecision("explode"), id="unknown-action"),  # type: ignore[arg-type]
        pytest.param("allow", id="bare-string"),
        pytest.param({"action": "allow"}, id="dict"),
    ],
)
async def test_a_bad_decision_becomes_a_guardrail_invalid_decision_tripwire(
    returned: Any,
) -> None:
    error, tool, _log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(tool_input=[guardrail("odd", "tool_input", lambda context: returned)])
    )
    assert tool.calls == 0
    assert error.record == GuardrailRecord(
        guardrail="odd", stage="tool_input", action="tripwire", reason="guardrail_invalid_decision"
    )


# --- evaluation order and concurrency ----------------------------------------------------------


async def test_sequential_evaluation_stops_at_the_first_non_allow() -> None:
    never = GuardSpy()
    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[
                guardrail("a", "tool_input", decide("allow")),
                guardrail("b", "tool_input", decide("block", "stop here")),
                guardrail("c", "tool_input", never),
            ]
        )
    )
    assert never.contexts == []
    assert outcome.tool.calls == 0
    assert [(r.guardrail, r.action) for r in outcome.log.decisions] == [
        ("a", "allow"),
        ("b", "block"),
    ]


async def test_parallel_guards_overlap_and_decisions_come_in_declaration_order() -> None:
    """Guard i can only finish after guard i+1 has: they must all run at once, and they finish
    in reverse declaration order."""
    names = ["g0", "g1", "g2", "g3"]
    done = {name: asyncio.Event() for name in names}
    finished: list[str] = []
    running = 0
    peak = 0

    def wait_for_successor(index: int) -> GuardFn:
        async def body(context: GuardrailContext) -> GuardrailDecision:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            if index + 1 < len(names):
                await asyncio.wait_for(done[names[index + 1]].wait(), timeout=5)
            running -= 1
            finished.append(names[index])
            done[names[index]].set()
            return GuardrailDecision("allow")

        return body

    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[
                guardrail(name, "tool_input", wait_for_successor(index))
                for index, name in enumerate(names)
            ],
            max_concurrency=4,
        )
    )

    assert peak == 4
    assert finished == list(reversed(names))
    assert [record.guardrail for record in outcome.log.decisions] == names
    assert outcome.tool.calls == 1


async def test_parallel_evaluation_keeps_exactly_one_non_allow_record() -> None:
    release = asyncio.Event()

    async def slow_block(context: GuardrailContext) -> GuardrailDecision:
        await release.wait()
        return GuardrailDecision("block", "slow")

    async def fast_trip(context: GuardrailContext) -> GuardrailDecision:
        release.set()
        return GuardrailDecision("tripwire", "fast")

    error, tool, log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(
            tool_input=[
                guardrail("slow", "tool_input", slow_block),
                guardrail("fast", "tool_input", fast_trip),
            ],
            max_concurrency=2,
        )
    )
    assert tool.calls == 0
    assert [record.action for record in log.decisions] == ["tripwire"]
    assert error.record.guardrail == "fast"


@pytest.mark.parametrize("max_concurrency", [0, 17, -1])
async def test_max_concurrency_outside_1_to_16_is_a_value_error(max_concurrency: int) -> None:
    tool = CountingTool()
    with pytest.raises(ValueError, match="max_concurrency"):
        await dispatch_guarded(
            Guardrails(
                tool_input=[guardrail("a", "tool_input", decide("allow"))],
                max_concurrency=max_concurrency,
            ),
            tool=tool,
        )
    assert tool.calls == 0


@pytest.mark.parametrize("max_concurrency", [1, 16])
async def test_max_concurrency_bounds_are_accepted(max_concurrency: int) -> None:
    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[guardrail("a", "tool_input", decide("allow"))],
            max_concurrency=max_concurrency,
        )
    )
    assert outcome.tool.calls == 1


# --- bounds on what a record carries -----------------------------------------------------------


async def test_reason_is_cut_to_4096_utf8_bytes() -> None:
    long_reason = "€" * 2000  # 6000 bytes; 4096 is not on a character boundary
    outcome = await dispatch_guarded(
        Guardrails(tool_input=[guardrail("wordy", "tool_input", decide("block", long_reason))])
    )
    reason = outcome.log.decisions[0].reason
    assert reason is not None
    assert len(reason.encode()) <= 4096
    assert len(reason.encode()) > 4096 - 3
    assert long_reason.startswith(reason)


async def test_name_is_cut_to_128_utf8_bytes() -> None:
    name = "é" * 100  # 100 characters, 200 bytes
    outcome = await dispatch_guarded(
        Guardrails(tool_input=[guardrail(name, "tool_input", decide("allow"))])
    )
    recorded = outcome.log.decisions[0].guardrail
    assert len(recorded.encode()) <= 128
    assert recorded == "é" * 64
    assert outcome.tool.calls == 1


async def test_metadata_over_16384_json_bytes_becomes_truncated() -> None:
    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[
                guardrail("big", "tool_input", decide("allow", metadata={"blob": "x" * 20_000}))
            ]
        )
    )
    assert outcome.log.decisions[0].metadata == {"truncated": True}


async def test_small_metadata_is_kept_as_plain_json() -> None:
    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[
                guardrail("small", "tool_input", decide("allow", metadata={"score": 0.5, "n": [1]}))
            ]
        )
    )
    assert outcome.log.decisions[0].metadata == {"score": 0.5, "n": [1]}


async def test_guard_reason_and_metadata_are_redacted_when_secrets_are_given() -> None:
    outcome = await dispatch_guarded(
        Guardrails(
            tool_input=[
                guardrail(
                    "leaky",
                    "tool_input",
                    decide("block", "found sk-abc", metadata={"hit": "sk-abc"}),
                )
            ]
        ),
        secrets=["sk-abc"],
    )
    record = outcome.log.decisions[0]
    assert record.reason == "found [REDACTED]"
    assert record.metadata == {"hit": "[REDACTED]"}
    assert "sk-abc" not in everything_emitted(outcome)


# --- evaluate_guardrails directly --------------------------------------------------------------


def guard_context(stage: str = "tool_input", value: Any = None) -> GuardrailContext:
    return GuardrailContext(stage=stage, value=value, session_id="s1", run_id="r1")  # type: ignore[arg-type]


async def test_evaluate_guardrails_with_no_guards_returns_nothing() -> None:
    assert await evaluate_guardrails("tool_input", [], guard_context()) == ([], None)


async def test_evaluate_guardrails_with_no_guards_ignores_a_bad_max_concurrency() -> None:
    assert await evaluate_guardrails("tool_input", [], guard_context(), max_concurrency=0) == (
        [],
        None,
    )


async def test_evaluate_guardrails_returns_records_and_the_terminal_one() -> None:
    records, terminal = await evaluate_guardrails(
        "tool_input",
        [
            guardrail("a", "tool_input", decide("allow")),
            guardrail("b", "tool_input", decide("block", "no")),
            guardrail("c", "tool_input", decide("allow")),
        ],
        guard_context(),
    )
    assert [record.guardrail for record in records] == ["a", "b"]
    assert terminal == GuardrailRecord(
        guardrail="b", stage="tool_input", action="block", reason="no"
    )


async def test_evaluate_guardrails_all_allow_has_no_terminal_record() -> None:
    records, terminal = await evaluate_guardrails(
        "output",
        [guardrail("a", "output", decide("allow")), guardrail("b", "output", decide("allow"))],
        guard_context("output"),
        max_concurrency=2,
    )
    assert [record.action for record in records] == ["allow", "allow"]
    assert terminal is None


async def test_evaluate_guardrails_applies_the_scrub_to_reasons() -> None:
    records, _terminal = await evaluate_guardrails(
        "tool_input",
        [guardrail("a", "tool_input", decide("block", "secret words"))],
        guard_context(),
        scrub=lambda value: value.replace("secret", "***") if isinstance(value, str) else value,
    )
    assert records[0].reason == "*** words"


@pytest.mark.parametrize("max_concurrency", [0, 17, True, 2.0])
async def test_evaluate_guardrails_rejects_bad_max_concurrency(max_concurrency: Any) -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        await evaluate_guardrails(
            "tool_input",
            [guardrail("a", "tool_input", decide("allow"))],
            guard_context(),
            max_concurrency=max_concurrency,
        )


async def test_evaluate_guardrails_passes_the_context_through() -> None:
    spy = GuardSpy()
    context = guard_context("tool_output", value="payload")
    await evaluate_guardrails("tool_output", [guardrail("a", "tool_output", spy)], context)
    assert spy.contexts == [context]


async def test_a_blocking_guardrail_is_named_in_the_error_details() -> None:
    from prism_tools import (
        GuardrailDecision,
        Guardrails,
        ToolCall,
        ToolDefinition,
        ToolExecutionContext,
        create_tool_registry,
        dispatch_tool_call,
        guardrail,
    )

    ran: list[str] = []
    registry = create_tool_registry(
        [ToolDefinition(name="rm", execute=lambda args, ctx: ran.append("rm"))]
    )
    hold = guardrail(
        "legal_hold", "tool_input", lambda ctx: GuardrailDecision("block", reason="path on hold")
    )
    result = await dispatch_tool_call(
        ToolCall(id="c", name="rm", arguments={}),
        registry=registry,
        context=ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c"),
        guardrails=Guardrails(tool_input=[hold]),
    )
    assert ran == []
    assert result.error is not None
    assert result.error.message == "Tool call blocked by guardrail"
    assert result.error.details == {"guardrail": "legal_hold", "reason": "path on hold"}


# -- rule packs ---------------------------------------------------------------------------------


async def test_a_rule_pack_block_names_the_pack_and_rule_and_the_tool_does_not_run() -> None:
    tool = CountingTool()
    registry = create_tool_registry([ToolDefinition("echo", execute=tool)])
    pack = GuardrailRulePack(
        "pii", [guardrail("no-ssn", "tool_input", decide("block", "argument holds an SSN"))]
    )
    events = support.EventLog()
    result = await dispatch_tool_call(
        make_call(),
        registry,
        make_context(),
        guardrails=Guardrails(packs=[pack]),
        emit=events,
    )
    assert tool.calls == 0
    assert result.metadata == {"blocked_reason": "guardrail_blocked"}
    assert result.error is not None
    assert (
        result.error.message == "Blocked by guardrail rule pack:pii/no-ssn: argument holds an SSN"
    )
    decisions = [event.record for event in events.events if event.type == "guardrail_decision"]
    assert [(record.guardrail, record.pack) for record in decisions] == [("pii/no-ssn", "pii")]


async def test_rule_pack_messages_are_redacted_and_bounded() -> None:
    secret = "sk-live-0123456789"
    long_reason = f"found {secret} " + "é" * 300
    pack = GuardrailRulePack(
        "keys", [guardrail("no-keys", "tool_output", decide("block", long_reason))]
    )
    registry = create_tool_registry([ToolDefinition("echo", execute=CountingTool(secret))])
    result = await dispatch_tool_call(
        make_call(),
        registry,
        make_context(),
        guardrails=Guardrails(packs=[pack]),
        secrets=[secret],
    )
    assert result.error is not None
    message = result.error.message
    assert message.startswith("Blocked by guardrail rule pack:keys/no-keys: found ")
    assert secret not in message
    assert len(message.encode("utf-8")) <= 200
    assert "\ufffd" not in message


async def test_stage_guardrails_run_before_pack_rules_and_keep_the_plain_text() -> None:
    tool = CountingTool()
    order: list[str] = []

    def note(name: str, action: str) -> GuardFn:
        def evaluate(context: GuardrailContext) -> GuardrailDecision:
            order.append(name)
            return GuardrailDecision(action)  # type: ignore[arg-type]

        return evaluate

    pack = GuardrailRulePack("policy", [guardrail("late", "tool_input", note("late", "block"))])
    own = guardrail("own", "tool_input", note("own", "block"))
    registry = create_tool_registry([ToolDefinition("echo", execute=tool)])
    result = await dispatch_tool_call(
        make_call(),
        registry,
        make_context(),
        guardrails=Guardrails(tool_input=[own], packs=[pack]),
    )
    assert order == ["own"]
    assert result.error is not None
    assert result.error.message == "Tool call blocked by guardrail"
    assert tool.calls == 0


def test_rule_pack_names_are_checked() -> None:
    with pytest.raises(ValueError, match=r"GuardrailRulePack\.name"):
        GuardrailRulePack("", [])
    with pytest.raises(ValueError, match=r"GuardrailRulePack\.name"):
        GuardrailRulePack("a/b", [])


# --- decisions of any shape -------------------------------------------------------------------


class RaisingDecision:
    """A decision-like object whose every attribute raises: the host's code, failing."""

    @property
    def action(self) -> str:
        raise RuntimeError("no action here")

    @property
    def reason(self) -> str:
        raise RuntimeError("no reason here")


class ActionEnum(enum.StrEnum):
    ALLOW = "allow"
    BLOCK = "block"


class PosingAsAllow(str):
    """A str subclass that claims to equal, and hash as, ``"allow"``."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return hash("allow")


_VALUE = support.small_json(max_leaves=6)
_ACTION = st.one_of(
    st.sampled_from(["allow", "block", "tripwire", "interrupt", "ALLOW", ""]),
    st.sampled_from([ActionEnum.ALLOW, ActionEnum.BLOCK, PosingAsAllow("zzz")]),
    _VALUE,
)
_ANY_DECISION = st.one_of(
    st.builds(
        GuardrailDecision,
        _ACTION,
        st.one_of(st.none(), st.text(max_size=20), _VALUE, st.just(support.Unprintable("reason"))),
        st.one_of(st.none(), _VALUE, st.just({"x": support.Unprintable("metadata")})),
    ),
    _VALUE,
    st.just(RaisingDecision()),
)


def _allows(decision: object) -> bool:
    return (
        isinstance(decision, GuardrailDecision)
        and isinstance(decision.action, str)
        and str.__str__(decision.action) == "allow"
    )


@given(before=_ANY_DECISION, after=_ANY_DECISION)
async def test_decisions_of_any_shape_fail_closed_and_never_escape_as_another_error(
    before: object, after: object
) -> None:
    # Whatever a guardrail returns, dispatch gives a result or raises GuardrailTripwire; the
    # tool runs only under an allowing tool_input decision, and its result is handed back only
    # under an allowing tool_output decision.
    tool = CountingTool({"text": "hi"})
    guardrails = Guardrails(
        tool_input=[guardrail("before", "tool_input", lambda context: before)],
        tool_output=[guardrail("after", "tool_output", lambda context: after)],
    )
    registry = create_tool_registry([ToolDefinition(name="echo", execute=tool)])
    log, ledger = EventLog(), InMemoryRunLedger()
    try:
        result = await dispatch_tool_call(
            make_call(),
            registry,
            make_context(),
            guardrails=guardrails,
            emit=log,
            ledger=ledger,
        )
    except GuardrailTripwire:
        result = None
    assert tool.calls == (1 if _allows(before) else 0)
    if result is not None and result.error is None:
        assert _allows(before)
        assert _allows(after)
        assert result.value == {"text": "hi"}
    if result is not None and result.error is not None:
        assert result.metadata == {"blocked_reason": "guardrail_blocked"}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {"tool_input": guardrail("g", "tool_input", decide("allow"))},
            "tool_input must be a sequence",
        ),
        ({"input": "no-secrets"}, "Guardrails.input must be a sequence, got str"),
        ({"packs": ["pii"]}, "packs must hold GuardrailRulePack objects; item 0 is a str"),
        ({"max_concurrency": 0}, "max_concurrency must be an integer from 1 to 16, got 0"),
        ({"max_concurrency": True}, "max_concurrency must be an integer from 1 to 16, got True"),
        ({"max_concurrency": 2.0}, "max_concurrency must be an integer from 1 to 16, got 2.0"),
    ],
)
def test_guardrails_of_the_wrong_shape_are_refused_when_built(
    options: dict[str, Any], expected: str
) -> None:
    # Before, a string was read as one guardrail per character and a bad concurrency failed
    # the first dispatch that evaluated the stage.
    with pytest.raises((TypeError, ValueError), match=expected):
        Guardrails(**options)


def test_guardrails_keep_what_they_are_given_as_tuples() -> None:
    guard = guardrail("g", "tool_input", decide("allow"))
    built = Guardrails(tool_input=[guard], packs=iter([GuardrailRulePack("p", [guard])]))
    assert built.tool_input == (guard,)
    assert [pack.name for pack in built.packs] == ["p"]


# --- guards that fail in ways of their own ------------------------------------------------------


@pytest.mark.parametrize("concurrency", [1, 2])
@pytest.mark.parametrize("stage", ["tool_input", "tool_output"])
async def test_a_guard_that_raises_a_cancellation_of_something_else_fails_closed(
    concurrency: int, stage: str
) -> None:
    async def shared_request(context: GuardrailContext) -> GuardrailDecision:
        elsewhere: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        elsewhere.cancel()  # a classifier request another caller cancelled
        await elsewhere
        return GuardrailDecision("allow")

    guards = [guardrail("classifier", stage, shared_request)]  # type: ignore[arg-type]
    error, tool, log, _ledger = await dispatch_expecting_tripwire(
        Guardrails(**{stage: guards}, max_concurrency=concurrency)
    )
    assert error.record.reason == "guardrail_failed"
    assert tool.calls == (1 if stage == "tool_output" else 0)
    if stage == "tool_output":
        assert "tool_execution_finished" not in log.types


def stalling(started: asyncio.Event) -> GuardFn:
    """A guard body that says when it started, then waits until it is cancelled."""

    async def stall(context: GuardrailContext) -> GuardrailDecision:
        started.set()
        await asyncio.sleep(60)
        return GuardrailDecision("allow")

    return stall


async def test_cancelling_the_call_still_cancels_a_guard_that_is_running() -> None:
    started = asyncio.Event()
    slow = stalling(started)
    for concurrency in (1, 2):
        started.clear()
        tool = CountingTool()
        guards = Guardrails(
            tool_input=[guardrail("slow", "tool_input", slow)], max_concurrency=concurrency
        )
        task = asyncio.create_task(dispatch_guarded(guards, tool=tool))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert tool.calls == 0


@pytest.mark.parametrize(
    "rule",
    [
        guardrail("typo", "tool-input", decide("block")),  # type: ignore[arg-type]
        dataclasses.make_dataclass("NoStage", [("name", str)])("x"),
        "not a rule",
        guardrail("", "tool_input", decide("block")),  # type: ignore[arg-type]
    ],
    ids=["misspelled-stage", "no-stage", "not-a-rule", "no-name"],
)
def test_a_rule_pack_refuses_a_rule_that_would_never_run(rule: Any) -> None:
    with pytest.raises(TypeError, match="GuardrailRulePack 'payments' rule 0"):
        GuardrailRulePack("payments", [rule])


def test_a_rule_whose_attributes_raise_is_refused_by_a_pack_and_trips_in_a_list() -> None:
    class Raising:
        name = "raising"

        @property
        def stage(self) -> str:
            raise RuntimeError("no stage")

        def evaluate(self, context: GuardrailContext) -> GuardrailDecision:
            return GuardrailDecision("allow")

    with pytest.raises(TypeError, match="attributes cannot be read"):
        GuardrailRulePack("payments", [Raising()])
    _records, terminal = asyncio.run(
        evaluate_guardrails(
            "tool_input",
            [Raising()],
            GuardrailContext(stage="tool_input", value=None, session_id="s1", run_id="r1"),
        )
    )
    assert terminal is not None
    assert terminal.reason == "guardrail_invalid"


async def test_a_reason_of_a_str_subclass_is_read_as_its_characters_and_redacted() -> None:
    class Loud(str):
        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            raise UnicodeError(f"cannot encode {self}")

    def refuse(context: GuardrailContext) -> GuardrailDecision:
        return GuardrailDecision("block", Loud("holds sk-guard-9"))

    outcome = await dispatch_guarded(
        Guardrails(tool_input=[guardrail("loud", "tool_input", refuse)]), secrets=["sk-guard-9"]
    )
    assert outcome.tool.calls == 0
    assert outcome.result.error is not None
    assert "sk-guard-9" not in outcome.result.error.message
    assert type(outcome.log.decisions[0].reason) is str


async def test_a_call_cancelled_after_its_tool_ran_gets_its_end_row() -> None:
    in_guard = asyncio.Event()
    slow = stalling(in_guard)
    tool = CountingTool()
    guards = Guardrails(tool_output=[guardrail("slow", "tool_output", slow)])
    log, ledger = EventLog(), InMemoryRunLedger()
    task = asyncio.create_task(
        dispatch_tool_call(
            make_call(),
            registry=create_tool_registry([ToolDefinition(name="echo", execute=tool)]),
            context=make_context(),
            guardrails=guards,
            emit=log,
            ledger=ledger,
        )
    )
    await in_guard.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tool.calls == 1
    assert [row.status for row in ledger.records] == ["started", "error"]
    closing = ledger.records[-1].result
    assert closing is not None
    assert closing.error is not None
    assert closing.error.code == "cancelled"
