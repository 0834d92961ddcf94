"""dispatch_tool_call: every outcome, in the documented order, with exact texts."""

from __future__ import annotations

import asyncio
import enum
import json
import re
from collections.abc import Callable
from typing import Any, cast

import pytest
from tests.support import EventLog, Unprintable, UnprintableError

from prism_tools import (
    AgentEvent,
    ErrorInfo,
    GuardrailTripwire,
    InMemoryRunLedger,
    LedgerWriteError,
    MiddlewareRegistry,
    Ownership,
    RunLimitError,
    ToolCall,
    ToolCallRecord,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolResult,
    create_contribution_registries,
    create_json_schema_tool_argument_validator,
    create_static_permission_policy,
    create_static_trust_policy,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools._json import dumps_lenient
from prism_tools.types import ignore_progress


class Spy:
    """A tool body that records every call it receives."""

    def __init__(self, value: Any = "ok", error: BaseException | None = None) -> None:
        self.calls: list[tuple[dict[str, Any], ToolExecutionContext]] = []
        self.value = value
        self.error = error

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.calls.append((args, context))
        if self.error is not None:
            raise self.error
        return self.value


def context(call_id: str = "call_1", **extra: Any) -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=call_id, **extra)


def call(
    name: str = "echo", arguments: Any = None, call_id: str = "call_1", **extra: Any
) -> ToolCall:
    return ToolCall(
        id=call_id, name=name, arguments={} if arguments is None else arguments, **extra
    )


async def run(
    spy: Spy, the_call: ToolCall, *, name: str = "echo", **options: Any
) -> tuple[ToolResult, EventLog, InMemoryRunLedger]:
    registry = create_tool_registry([ToolDefinition(name=name, execute=spy)])
    recorder, ledger = EventLog(), InMemoryRunLedger()
    result = await dispatch_tool_call(
        the_call,
        registry=registry,
        context=context(the_call.id if isinstance(the_call.id, str) else "call_1"),
        emit=recorder,
        ledger=ledger,
        **options,
    )
    return result, recorder, ledger


def assert_blocked_once(
    spy: Spy, recorder: EventLog, ledger: InMemoryRunLedger, reason: str
) -> None:
    assert spy.calls == [], "a blocked call must never reach execute"
    assert recorder.types == ["tool_execution_blocked"]
    assert recorder.events[0].reason == reason
    assert recorder.events[0].metadata is not None
    assert recorder.events[0].metadata["status"] == "blocked"
    assert [row.status for row in ledger.records] == ["blocked"]
    assert ledger.records[0].reason == reason


async def test_success_returns_value_and_emits_started_then_finished() -> None:
    spy = Spy(value={"text": "hi"})
    result, recorder, ledger = await run(spy, call(arguments={"text": "hi"}))
    assert result == ToolResult(tool_call_id="call_1", name="echo", value={"text": "hi"})
    assert spy.calls[0][0] == {"text": "hi"}
    assert recorder.types == ["tool_execution_started", "tool_execution_finished"]
    finished = recorder.events[1]
    assert finished.result == result
    assert finished.metadata is not None
    assert finished.metadata["status"] == "finished"
    assert isinstance(finished.metadata["duration_ms"], int)
    assert finished.metadata["duration_ms"] >= 0
    rows = ledger.records
    assert [row.status for row in rows] == ["started", "finished"]
    assert rows[1].result == result
    assert rows[0].arguments == {"text": "hi"}
    assert rows[0].started_at == rows[1].started_at
    assert rows[1].finished_at is not None
    assert rows[0].started_at.endswith("Z")
    assert rows[0].id != rows[1].id
    assert all(row.redacted is False for row in rows)


ISO_MILLIS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
ROW_ID = re.compile(r"toolcall_[0-9a-f]{16}_[0-9a-f]+")


async def test_success_events_rows_and_tool_context_carry_exactly_these_fields() -> None:
    # Dispatch builds these in place on its hot path: pin every field against the constructors.
    spy = Spy(value={"text": "hi"})
    owner = Ownership(tenant_id="t1", account_id="a1", user_id="u1")
    the_call = call(arguments={"text": "hi"})
    result, recorder, ledger = await run(spy, the_call, ownership=owner)
    assert result == ToolResult(tool_call_id="call_1", name="echo", value={"text": "hi"})
    started, finished = recorder.events
    assert started == AgentEvent(
        type="tool_execution_started", session_id="s1", run_id="r1", call=the_call
    )
    assert finished.metadata is not None
    assert finished == AgentEvent(
        type="tool_execution_finished",
        session_id="s1",
        run_id="r1",
        result=result,
        metadata={"duration_ms": finished.metadata["duration_ms"], "status": "finished"},
    )
    first, last = ledger.records
    same: dict[str, Any] = {
        "session_id": "s1",
        "run_id": "r1",
        "tool_call_id": "call_1",
        "name": "echo",
        "arguments": {"text": "hi"},
        "started_at": first.started_at,
        "tenant_id": "t1",
        "account_id": "a1",
        "user_id": "u1",
    }
    assert first == ToolCallRecord(id=first.id, status="started", **same)
    assert last == ToolCallRecord(
        id=last.id, status="finished", finished_at=last.finished_at, result=result, **same
    )
    assert ISO_MILLIS.fullmatch(first.started_at)
    assert last.finished_at is not None
    assert ISO_MILLIS.fullmatch(last.finished_at)
    assert ROW_ID.fullmatch(first.id)
    assert ROW_ID.fullmatch(last.id)
    assert first.id != last.id
    tool_context = spy.calls[0][1]
    assert type(tool_context) is ToolExecutionContext
    assert tool_context == ToolExecutionContext(
        session_id="s1", run_id="r1", tool_call_id="call_1", progress=tool_context.progress
    )
    assert tool_context.progress is not ignore_progress


async def test_progress_blocked_and_error_rows_carry_exactly_these_fields() -> None:
    # These rows take a different builder from the two lifecycle rows: pin each field the same way.
    owner = Ownership(tenant_id="t1", account_id="a1", user_id="u1")

    async def reporting(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        await ctx.progress(0.5, {"step": 1})
        return "done"

    failing = Spy(error=RuntimeError("boom"))
    registry = create_tool_registry(
        [ToolDefinition(name="report", execute=reporting), ToolDefinition("fail", failing)]
    )
    ledger = InMemoryRunLedger()
    for name, call_id in (("report", "c1"), ("missing", "c2"), ("fail", "c3")):
        await dispatch_tool_call(
            call(name, call_id=call_id),
            registry=registry,
            context=context(call_id),
            ledger=ledger,
            ownership=owner,
        )
    progress_row = ledger.records[1]
    blocked_row = ledger.records[3]
    error_row = ledger.records[5]
    assert [row.status for row in ledger.records] == [
        "started",
        "started",
        "finished",
        "blocked",
        "started",
        "error",
    ]
    same: dict[str, Any] = {
        "session_id": "s1",
        "run_id": "r1",
        "arguments": {},
        "tenant_id": "t1",
        "account_id": "a1",
        "user_id": "u1",
    }
    assert progress_row.progress_at is not None
    assert progress_row == ToolCallRecord(
        id=progress_row.id,
        tool_call_id="c1",
        name="report",
        status="started",
        started_at=ledger.records[0].started_at,
        progress=0.5,
        progress_metadata={"step": 1},
        progress_at=progress_row.progress_at,
        **same,
    )
    assert blocked_row.result is not None
    assert blocked_row.finished_at is not None
    assert blocked_row == ToolCallRecord(
        id=blocked_row.id,
        tool_call_id="c2",
        name="missing",
        status="blocked",
        started_at=blocked_row.started_at,
        finished_at=blocked_row.finished_at,
        result=blocked_row.result,
        reason="unknown_tool",
        **same,
    )
    assert blocked_row.result.error == ErrorInfo(message="Unknown tool: missing")
    assert error_row.result is not None
    assert error_row.finished_at is not None
    assert error_row == ToolCallRecord(
        id=error_row.id,
        tool_call_id="c3",
        name="fail",
        status="error",
        started_at=ledger.records[4].started_at,
        finished_at=error_row.finished_at,
        result=error_row.result,
        **same,
    )
    assert error_row.result.error is not None
    assert error_row.result.error.message == "boom"
    assert failing.calls != []
    for row in (progress_row, blocked_row, error_row):
        assert type(row) is ToolCallRecord
        assert ROW_ID.fullmatch(row.id)
        assert ISO_MILLIS.fullmatch(row.started_at)
    assert len({row.id for row in ledger.records}) == 6


async def test_redacted_success_events_and_rows_are_scrubbed_and_marked() -> None:
    the_call = call(arguments={"key": "tok-123"})
    result, recorder, ledger = await run(Spy(value="tok-123"), the_call, secrets=["tok-123"])
    assert result == ToolResult(tool_call_id="call_1", name="echo", value="[REDACTED]")
    started, finished = recorder.events
    assert started.call == ToolCall(id="call_1", name="echo", arguments={"key": "[REDACTED]"})
    assert finished.result == result
    assert [row.redacted for row in ledger.records] == [True, True]
    assert [row.arguments for row in ledger.records] == [{"key": "[REDACTED]"}] * 2
    assert ledger.records[1].result == result


async def test_progress_under_audit_gives_these_event_and_row_fields() -> None:
    async def tool_body(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        await ctx.progress(0.5, {"step": 1})
        return "done"

    registry = create_tool_registry([ToolDefinition(name="t", execute=tool_body)])
    recorder, ledger = EventLog(), InMemoryRunLedger()
    await dispatch_tool_call(
        call("t"), registry=registry, context=context(), emit=recorder, ledger=ledger
    )
    assert recorder.types == [
        "tool_execution_started",
        "tool_execution_progress",
        "tool_execution_finished",
    ]
    assert recorder.events[1] == AgentEvent(
        type="tool_execution_progress",
        session_id="s1",
        run_id="r1",
        tool_call_id="call_1",
        name="t",
        progress=0.5,
        metadata={"step": 1},
    )
    row = ledger.records[1]
    assert row.progress_at is not None
    assert ISO_MILLIS.fullmatch(row.progress_at)
    assert row == ToolCallRecord(
        id=row.id,
        session_id="s1",
        run_id="r1",
        tool_call_id="call_1",
        name="t",
        arguments={},
        status="started",
        started_at=ledger.records[0].started_at,
        progress=0.5,
        progress_metadata={"step": 1},
        progress_at=row.progress_at,
    )
    assert len({record.id for record in ledger.records}) == 3


async def test_a_returned_tool_result_is_used_as_is() -> None:
    own = ToolResult(tool_call_id="call_1", name="echo", value=1, content=["c"], metadata={"m": 1})

    async def execute(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        return own

    registry = create_tool_registry([ToolDefinition(name="echo", execute=execute)])
    assert await dispatch_tool_call(call(), registry=registry, context=context()) is own


async def test_an_exception_that_cannot_be_printed_still_gives_an_error_result() -> None:
    spy = Spy(error=UnprintableError("sk-secret-1"))
    result, recorder, ledger = await run(spy, call(), secrets=["sk-secret-1"])
    assert len(spy.calls) == 1
    assert result.error == ErrorInfo(
        message="[Unprintable UnprintableError]", code=None, name="UnprintableError"
    )
    assert recorder.types == ["tool_execution_started", "tool_execution_error"]
    assert [row.status for row in ledger.records] == ["started", "error"]
    assert ledger.records[1].result == result


@pytest.mark.parametrize("source", ["tool", "middleware"])
async def test_a_tool_result_whose_error_is_not_an_error_info_is_a_tool_failure(
    source: str,
) -> None:
    # Whatever reads a result after dispatch (guardrails, stores, provider messages) reads
    # error.message and error.code: a result that has neither never leaves dispatch.
    bad = ToolResult("call_1", "echo", error="it failed")  # type: ignore[arg-type]
    spy = Spy(value=bad if source == "tool" else "fine")
    middleware = MiddlewareRegistry()
    if source == "middleware":
        middleware.use("tool_result", lambda value, next: next(bad))
    result, recorder, ledger = await run(spy, call(), middleware=middleware)
    assert len(spy.calls) == 1
    assert result.error == ErrorInfo(
        message="Tool echo returned a ToolResult whose error is a str, not an ErrorInfo",
        code="invalid_tool_result",
        name="TypeError",
    )
    assert recorder.types == ["tool_execution_started", "tool_execution_error"]
    assert [row.status for row in ledger.records] == ["started", "error"]
    # Without events and a ledger too.
    registry = create_tool_registry([ToolDefinition(name="echo", execute=Spy(value=bad))])
    plain = await dispatch_tool_call(call(), registry=registry, context=context())
    assert plain.error == result.error


async def test_a_result_that_cannot_be_printed_reaches_events_and_rows_unchanged() -> None:
    odd = Unprintable("sk-secret-1")
    value = {"item": odd, odd: "keyed by it"}
    result, recorder, ledger = await run(Spy(value=value), call(), secrets=["sk-secret-1"])
    assert result.value is value
    assert recorder.events[1].result == result
    assert ledger.records[1].result == result
    # Plain data keeps the object for the writer to stand in for; a key must become text.
    as_plain = {"item": odd, "[Unprintable Unprintable]": "keyed by it"}
    assert ledger.records[1].to_dict()["result"]["value"] == as_plain


async def test_sync_execute_is_supported() -> None:
    registry = create_tool_registry(
        [ToolDefinition(name="add", execute=lambda args, ctx: args["a"] + args["b"])]
    )
    result = await dispatch_tool_call(
        call("add", {"a": 2, "b": 3}), registry=registry, context=context()
    )
    assert result.value == 5


async def test_unknown_tool_is_blocked_first() -> None:
    spy = Spy()
    result, recorder, ledger = await run(spy, call("missing"))
    assert result.error == ErrorInfo(message="Unknown tool: missing")
    assert result.tool_call_id == "call_1"
    assert result.name == "missing"
    assert_blocked_once(spy, recorder, ledger, "unknown_tool")


async def test_denied_tool_is_blocked() -> None:
    spy = Spy()
    result, recorder, ledger = await run(spy, call(), filter={"deny": ["echo"]})
    assert result.error == ErrorInfo(message="Tool denied: echo")
    assert_blocked_once(spy, recorder, ledger, "tool_denied")


class ToolName(enum.StrEnum):
    ECHO = "echo"


class OwnStr(str):
    """A str subclass whose own methods would name another tool, or raise."""

    def __str__(self) -> str:
        raise RuntimeError("a subclass's __str__ must not be asked")

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


@pytest.mark.parametrize("name", [ToolName.ECHO, OwnStr("echo")], ids=["StrEnum", "str_subclass"])
async def test_a_name_of_a_str_subclass_runs_the_tool_its_characters_spell(name: str) -> None:
    spy = Spy()
    result, recorder, ledger = await run(spy, call(name))
    assert result.error is None
    assert result.value == "ok"
    assert len(spy.calls) == 1
    assert type(result.name) is str
    assert result.name == "echo"
    assert recorder.types == ["tool_execution_started", "tool_execution_finished"]
    assert [(row.status, type(row.name)) for row in ledger.records] == [
        ("started", str),
        ("finished", str),
    ]


@pytest.mark.parametrize("name", [ToolName.ECHO, OwnStr("echo")], ids=["StrEnum", "str_subclass"])
async def test_a_name_of_a_str_subclass_is_filtered_by_its_characters(name: str) -> None:
    spy = Spy()
    result, recorder, ledger = await run(spy, call(name), filter={"deny": ["echo"]})
    assert result.error == ErrorInfo(message="Tool denied: echo")
    assert_blocked_once(spy, recorder, ledger, "tool_denied")
    result, _, _ = await run(spy, call(name), filter=[ToolFilter(allow=["other"])])
    assert result.metadata == {"blocked_reason": "tool_denied"}
    assert spy.calls == []


async def test_a_name_that_cannot_be_printed_is_an_unknown_tool_and_never_quoted() -> None:
    secret = "sk-name-5Rt8Wq2Zx7Lp"
    spy = Spy()
    result, recorder, ledger = await run(spy, call(cast(str, Unprintable(secret))))
    assert result.error == ErrorInfo(message="Unknown tool: [Unprintable Unprintable]")
    assert result.metadata == {"blocked_reason": "unknown_tool"}
    assert_blocked_once(spy, recorder, ledger, "unknown_tool")
    assert secret not in dumps_lenient([result, recorder.events, ledger.records]).decode()


async def test_allow_list_without_the_tool_denies_it() -> None:
    spy = Spy()
    result, _, _ = await run(spy, call(), filter=[ToolFilter(allow=["other"])])
    assert result.error == ErrorInfo(message="Tool denied: echo")
    assert spy.calls == []


async def test_arguments_error_passes_through_verbatim() -> None:
    problem = ErrorInfo(
        message="Invalid tool arguments JSON for tool echo",
        code="invalid_json_arguments",
        name="ProviderTransportError",
    )
    spy = Spy()
    result, recorder, ledger = await run(spy, call(arguments={}, arguments_error=problem))
    assert result.error == problem
    assert_blocked_once(spy, recorder, ledger, "invalid_arguments")


@pytest.mark.parametrize(
    ("problem", "message"),
    [
        ("the arguments were cut off", "the arguments were cut off"),
        (42, "Tool arguments could not be read"),
        ({"message": "cut off"}, "Tool arguments could not be read"),
    ],
)
async def test_an_arguments_error_that_is_not_an_error_info_still_blocks(
    problem: Any, message: str
) -> None:
    # A host that builds its own ToolCall may put text (or worse) there: the call is blocked
    # all the same, with the text as its message when it is text.
    spy = Spy()
    result, recorder, ledger = await run(spy, call(arguments={}, arguments_error=problem))
    assert result.error == ErrorInfo(message=message, code="invalid_arguments")
    assert_blocked_once(spy, recorder, ledger, "invalid_arguments")


@pytest.mark.parametrize("arguments", [None, [], [1], 3, 2.5, True, {1: "a"}, ("a",), {"a"}])
async def test_non_object_arguments_are_blocked_before_policy_and_validation(
    arguments: Any,
) -> None:
    spy = Spy()
    consulted: list[str] = []

    def validate(tool: ToolDefinition, args: Any, ctx: ToolExecutionContext) -> None:
        consulted.append("validate")

    class Policy:
        def check(self, request: Any) -> Any:
            consulted.append("permission")
            return create_static_permission_policy().check(request)

    the_call = ToolCall(id="call_1", name="echo", arguments=arguments)
    result, recorder, ledger = await run(spy, the_call, validate=validate, permission=Policy())
    assert result.error == ErrorInfo(message="Tool arguments must be a JSON object")
    assert consulted == []
    assert_blocked_once(spy, recorder, ledger, "invalid_arguments")
    assert ledger.records[0].arguments == arguments


async def test_untrusted_tool_is_blocked_with_code() -> None:
    spy = Spy()
    result, recorder, ledger = await run(spy, call(), trust=create_static_trust_policy(False))
    assert result.error is not None
    assert result.error.message == "Untrusted tool: echo"
    assert result.error.code == "ERR_PRISM_UNTRUSTED"
    assert_blocked_once(spy, recorder, ledger, "permission_denied")


async def test_permission_denied_is_blocked_before_validation() -> None:
    spy = Spy()
    validated: list[str] = []
    result, recorder, ledger = await run(
        spy,
        call(),
        permission=create_static_permission_policy(False),
        validate=lambda tool, args, ctx: validated.append("v"),
    )
    assert result.error is not None
    assert result.error.code == "ERR_PRISM_PERMISSION_DENIED"
    assert result.error.message == "Permission denied: tool:echo:execute"
    assert validated == []
    assert_blocked_once(spy, recorder, ledger, "permission_denied")


async def test_validator_message_blocks_and_becomes_the_error() -> None:
    spy = Spy()
    result, recorder, ledger = await run(
        spy, call(), validate=lambda tool, args, ctx: "text is required"
    )
    assert result.error == ErrorInfo(message="text is required")
    assert_blocked_once(spy, recorder, ledger, "validation_failed")
    assert ledger.records[0].result is not None
    assert ledger.records[0].result.error == ErrorInfo(message="text is required")


async def test_validator_error_info_and_async_validator() -> None:
    spy = Spy()
    problem = ErrorInfo(message="/text: required", code="schema")

    async def validate(tool: ToolDefinition, args: Any, ctx: ToolExecutionContext) -> ErrorInfo:
        return problem

    result, _, _ = await run(spy, call(), validate=validate)
    assert result.error == problem
    assert spy.calls == []


@pytest.mark.parametrize("verdict", [None, ""])
async def test_validator_none_or_empty_passes(verdict: str | None) -> None:
    spy = Spy()
    result, _, _ = await run(spy, call(), validate=lambda tool, args, ctx: verdict)
    assert result.error is None
    assert len(spy.calls) == 1


class EqualsRaises:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("== raised")

    __hash__ = object.__hash__


class TruthRaises:
    def __eq__(self, other: object) -> Any:
        return self

    def __bool__(self) -> bool:
        raise RuntimeError("bool() raised")


class TextPosingAsEmpty(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize("verdict", [EqualsRaises(), TruthRaises(), 0, [], True])
async def test_a_validator_verdict_of_another_kind_blocks_without_asking_it_anything(
    verdict: object,
) -> None:
    spy = Spy()
    result, recorder, ledger = await run(spy, call(), validate=lambda tool, args, ctx: verdict)
    assert result.error == ErrorInfo(message="Tool arguments failed validation")
    assert_blocked_once(spy, recorder, ledger, "validation_failed")


async def test_a_text_verdict_counts_by_its_characters_not_its_own_equality() -> None:
    spy = Spy()
    verdict = TextPosingAsEmpty("city is required")
    result, recorder, ledger = await run(spy, call(), validate=lambda tool, args, ctx: verdict)
    assert result.error == ErrorInfo(message="city is required")
    assert type(result.error.message) is str
    assert_blocked_once(spy, recorder, ledger, "validation_failed")


async def test_raising_validator_blocks_instead_of_crashing() -> None:
    spy = Spy()

    def validate(tool: ToolDefinition, args: Any, ctx: ToolExecutionContext) -> None:
        raise RuntimeError("validator broke")

    result, recorder, ledger = await run(spy, call(), validate=validate)
    assert result.error is not None
    assert result.error.message == "validator broke"
    assert result.error.name == "RuntimeError"
    assert_blocked_once(spy, recorder, ledger, "validation_failed")


async def test_before_execute_raising_blocks_with_execution_denied() -> None:
    spy = Spy()
    seen: list[tuple[str, str]] = []

    def before_execute(the_call: ToolCall, tool: ToolDefinition, ctx: ToolExecutionContext) -> None:
        seen.append((the_call.name, tool.name))
        raise PermissionError("outside business hours")

    result, recorder, ledger = await run(spy, call(), before_execute=before_execute)
    assert seen == [("echo", "echo")]
    assert result.error is not None
    assert result.error.message == "outside business hours"
    assert_blocked_once(spy, recorder, ledger, "execution_denied")


async def test_unbound_tool_is_blocked_not_crashed() -> None:
    registry = create_tool_registry([ToolDefinition(name="imported")])
    recorder = EventLog()
    result = await dispatch_tool_call(
        call("imported"), registry=registry, context=context(), emit=recorder
    )
    assert result.error is not None
    assert result.error.code == "tool_not_bound"
    assert recorder.types == ["tool_execution_blocked"]
    assert recorder.events[0].reason == "execution_denied"


async def test_raising_tool_gives_error_event_row_and_redacted_message() -> None:
    spy = Spy(error=ValueError("bad sk-secret-1"))
    result, recorder, ledger = await run(spy, call(), secrets=["sk-secret-1"])
    assert result.error is not None
    assert result.error.message == "bad [REDACTED]"
    assert result.error.name == "ValueError"
    assert recorder.types == ["tool_execution_started", "tool_execution_error"]
    assert recorder.events[1].metadata is not None
    assert recorder.events[1].metadata["status"] == "error"
    assert [row.status for row in ledger.records] == ["started", "error"]
    assert ledger.records[1].result == result
    assert all(row.redacted for row in ledger.records)


async def test_error_codes_are_carried_from_exceptions() -> None:
    class CodedError(Exception):
        code = "E_RATE"

    spy = Spy(error=CodedError("slow down"))
    result, _, _ = await run(spy, call())
    assert result.error == ErrorInfo(message="slow down", code="E_RATE", name="CodedError")


async def test_event_sequence_across_success_error_and_unknown() -> None:
    async def progressing(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        await ctx.progress({"step": 1}, {"phase": "load"})
        return "done"

    async def failing(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        raise RuntimeError("bad sk-1")

    registry = create_tool_registry(
        [
            ToolDefinition(name="slow", execute=progressing),
            ToolDefinition(name="fail", execute=failing),
        ]
    )
    recorder, ledger = EventLog(), InMemoryRunLedger()
    options: dict[str, Any] = {"registry": registry, "emit": recorder, "ledger": ledger}
    await dispatch_tool_call(call("slow", call_id="a"), context=context("a"), **options)
    failed = await dispatch_tool_call(
        call("fail", call_id="b"), context=context("b"), secrets=["sk-1"], **options
    )
    await dispatch_tool_call(call("echo", call_id="c"), context=context("c"), **options)
    assert recorder.types == [
        "tool_execution_started",
        "tool_execution_progress",
        "tool_execution_finished",
        "tool_execution_started",
        "tool_execution_error",
        "tool_execution_blocked",
    ]
    assert failed.error is not None
    assert failed.error.message == "bad [REDACTED]"
    progress = recorder.events[1]
    assert (progress.tool_call_id, progress.name, progress.progress) == ("a", "slow", {"step": 1})
    assert progress.metadata == {"phase": "load"}
    snapshot = ledger.rows(tool_call_id="a")[1]
    assert snapshot.status == "started"
    assert snapshot.progress == {"step": 1}
    assert snapshot.progress_metadata == {"phase": "load"}
    assert snapshot.progress_at is not None


async def test_progress_awaits_the_host_callback_first() -> None:
    order: list[str] = []

    async def host_progress(value: Any, metadata: Any) -> None:
        order.append(f"host:{value}")

    async def tool_body(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        await ctx.progress(1)
        await ctx.progress(2, {"k": "v"})

    def emit(event: AgentEvent) -> None:
        if event.type == "tool_execution_progress":
            order.append(f"event:{event.progress}")

    registry = create_tool_registry([ToolDefinition(name="t", execute=tool_body)])
    ledger = InMemoryRunLedger()
    await dispatch_tool_call(
        call("t"),
        registry=registry,
        context=context(progress=host_progress),
        emit=emit,
        ledger=ledger,
    )
    assert order == ["host:1", "event:1", "host:2", "event:2"]
    assert [row.progress for row in ledger.records] == [None, 1, 2, None]


async def test_progress_without_any_sink_is_harmless() -> None:
    async def tool_body(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        await ctx.progress(0.5)
        return "done"

    registry = create_tool_registry([ToolDefinition(name="t", execute=tool_body)])
    result = await dispatch_tool_call(call("t"), registry=registry, context=context())
    assert result.value == "done"


async def test_the_tool_context_carries_the_mediated_call_id() -> None:
    spy = Spy()
    middleware = MiddlewareRegistry().use(
        "tool_call", lambda value, next_: ToolCall(id="renumbered", name=value.name, arguments={})
    )
    result, _, ledger = await run(spy, call(), middleware=middleware)
    assert result.tool_call_id == "renumbered"
    assert spy.calls[0][1].tool_call_id == "renumbered"
    assert spy.calls[0][1].session_id == "s1"
    assert {row.tool_call_id for row in ledger.records} == {"renumbered"}


async def test_filter_is_checked_after_middleware_renames() -> None:
    allowed_spy, denied_spy = Spy(), Spy()
    registry = create_tool_registry(
        [
            ToolDefinition(name="safe", execute=allowed_spy),
            ToolDefinition(name="denied", execute=denied_spy),
        ]
    )
    middleware = MiddlewareRegistry().use(
        "tool_call", lambda value, next_: next_(ToolCall(id=value.id, name="denied", arguments={}))
    )
    result = await dispatch_tool_call(
        call("safe"),
        registry=registry,
        context=context(),
        filter={"deny": ["denied"]},
        middleware=middleware,
    )
    assert result.error == ErrorInfo(message="Tool denied: denied")
    assert allowed_spy.calls == []
    assert denied_spy.calls == []


async def test_rows_carry_ownership() -> None:
    spy = Spy()
    _, _, ledger = await run(
        spy, call(), ownership=Ownership(tenant_id="t1", account_id="a1", user_id="u1")
    )
    assert {(row.tenant_id, row.account_id, row.user_id) for row in ledger.records} == {
        ("t1", "a1", "u1")
    }


async def test_limit_tracker_is_charged_for_blocked_calls_and_can_stop_dispatch() -> None:
    class Tracker:
        def __init__(self, maximum: int) -> None:
            self.maximum = maximum
            self.used = 0

        def charge(self, limit: str) -> None:
            assert limit == "max_tool_calls"
            self.used += 1
            if self.used > self.maximum:
                raise RunLimitError(limit, maximum=self.maximum, observed=self.used)

    spy = Spy()
    tracker = Tracker(maximum=1)
    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    blocked = await dispatch_tool_call(
        call("missing"), registry=registry, context=context(), limit_tracker=tracker
    )
    assert blocked.error is not None
    assert tracker.used == 1
    with pytest.raises(RunLimitError, match="Run limit exceeded: max_tool_calls"):
        await dispatch_tool_call(
            call(), registry=registry, context=context(), limit_tracker=tracker
        )
    assert spy.calls == []


async def test_cancellation_propagates_and_is_recorded() -> None:
    started = asyncio.Event()

    async def hang(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        started.set()
        await asyncio.sleep(60)

    registry = create_tool_registry([ToolDefinition(name="hang", execute=hang)])
    recorder, ledger = EventLog(), InMemoryRunLedger()
    task = asyncio.create_task(
        dispatch_tool_call(
            call("hang"), registry=registry, context=context(), emit=recorder, ledger=ledger
        )
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [row.status for row in ledger.records] == ["started", "error"]
    final = ledger.records[1].result
    assert final is not None
    assert final.error is not None
    assert final.error.code == "cancelled"
    assert recorder.types[-1] == "tool_execution_error"


@pytest.mark.parametrize(("fails", "closing"), [(False, "finished"), (True, "error")])
async def test_a_call_cancelled_while_its_closing_row_is_written_is_still_closed(
    fails: bool, closing: str
) -> None:
    # An asynchronous ledger (one writing over the network) is appending the row that closes
    # the call when the call is cancelled: the row still lands, then the cancellation goes on.
    writing = asyncio.Event()

    class SlowLedger:
        def __init__(self) -> None:
            self.rows: list[ToolCallRecord] = []

        async def append_tool_call(self, record: ToolCallRecord) -> None:
            if record.status != "started":
                writing.set()
                await asyncio.sleep(0.05)
            self.rows.append(record)

    def tool(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        if fails:
            raise ValueError("tool failed")
        return "done"

    ledger = SlowLedger()
    registry = create_tool_registry([ToolDefinition(name="t", execute=tool)])
    task = asyncio.create_task(
        dispatch_tool_call(call("t"), registry=registry, context=context(), ledger=ledger)
    )
    await writing.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [row.status for row in ledger.rows] == ["started", closing]


async def test_a_failing_event_sink_does_not_change_the_outcome() -> None:
    spy = Spy(value=7)

    def broken_sink(event: AgentEvent) -> None:
        raise RuntimeError("sink down")

    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    result = await dispatch_tool_call(
        call(), registry=registry, context=context(), emit=broken_sink
    )
    assert result.value == 7


@pytest.mark.parametrize(("refused", "runs"), [("started", 0), ("finished", 1)])
async def test_a_ledger_write_error_says_which_row_was_refused(refused: str, runs: int) -> None:
    # A host deciding whether a retry would run the tool again reads the refused row's status.
    spy = Spy()

    class RefusingLedger:
        def append_tool_call(self, record: ToolCallRecord) -> None:
            if record.status == refused:
                raise OSError("disk full")

    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    with pytest.raises(LedgerWriteError, match=f"{refused} row") as caught:
        await dispatch_tool_call(call(), registry, context(), ledger=RefusingLedger())
    assert caught.value.status == refused
    assert len(spy.calls) == runs


async def test_a_ledger_that_refuses_the_started_row_stops_the_call() -> None:
    spy = Spy()

    class RefusingLedger:
        def append_tool_call(self, record: ToolCallRecord) -> None:
            raise OSError("disk full")

    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    with pytest.raises(LedgerWriteError):
        await dispatch_tool_call(
            call(), registry=registry, context=context(), ledger=RefusingLedger()
        )
    assert spy.calls == []


async def test_async_ledger_is_awaited_in_order() -> None:
    statuses: list[str] = []

    class SlowLedger:
        async def append_tool_call(self, record: ToolCallRecord) -> None:
            await asyncio.sleep(0)
            statuses.append(record.status)

    spy = Spy()
    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    await dispatch_tool_call(call(), registry=registry, context=context(), ledger=SlowLedger())
    assert statuses == ["started", "finished"]


async def test_contributed_tools_are_inert_until_registered() -> None:
    spy = Spy(value="from extension")
    contributions = create_contribution_registries()
    contributions.tools.register("echo", ToolDefinition(name="echo", execute=spy))
    host = create_tool_registry()
    blocked = await dispatch_tool_call(call(), registry=host, context=context())
    assert blocked.error == ErrorInfo(message="Unknown tool: echo")
    assert spy.calls == []
    host.register(contributions.tools.resolve("echo"))
    result = await dispatch_tool_call(call(), registry=host, context=context())
    assert result.value == "from extension"
    assert [tool.name for tool in contributions.tools.list()] == ["echo"]


@pytest.mark.parametrize(
    "probe",
    [
        lambda: (call("missing"), {}),
        lambda: (call(), {"filter": {"deny": ["echo"]}}),
        lambda: (call(arguments=[1]), {}),
        lambda: (call(), {"permission": create_static_permission_policy(False)}),
        lambda: (call(), {"validate": lambda tool, args, ctx: "no"}),
    ],
)
async def test_conformance_matrix_blocked_probes_never_start(
    probe: Callable[[], tuple[ToolCall, dict[str, Any]]],
) -> None:
    the_call, options = probe()
    spy = Spy()
    result, recorder, _ = await run(spy, the_call, **options)
    assert result.error is not None
    assert "tool_execution_started" not in recorder.types
    assert spy.calls == []


async def test_redactor_scrubs_results_events_and_rows_on_success() -> None:
    spy = Spy(value={"token": "tok-123", "nested": ["tok-123 again"]})
    result, recorder, ledger = await run(
        spy, call(arguments={"key": "tok-123"}), secrets=["tok-123"]
    )
    assert result.value == {"token": "[REDACTED]", "nested": ["[REDACTED] again"]}
    blob = repr(recorder.events) + repr(ledger.records) + repr(result)
    assert "tok-123" not in blob
    assert spy.calls[0][0] == {"key": "tok-123"}, "the tool itself receives the real arguments"


async def test_a_failing_async_sink_and_an_async_ledger_refusal() -> None:
    spy = Spy(value=1)

    async def broken_async_sink(event: AgentEvent) -> None:
        raise RuntimeError("async sink down")

    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    result = await dispatch_tool_call(
        call(), registry=registry, context=context(), emit=broken_async_sink
    )
    assert result.value == 1

    class AsyncRefusingLedger:
        async def append_tool_call(self, record: ToolCallRecord) -> None:
            raise OSError("replica lag")

    with pytest.raises(LedgerWriteError, match="started row"):
        await dispatch_tool_call(
            call(), registry=registry, context=context(), ledger=AsyncRefusingLedger()
        )
    assert len(spy.calls) == 1, "the refused started row stopped the second call"


async def test_a_sync_host_progress_sink_works_without_events_or_ledger() -> None:
    reports: list[Any] = []

    async def tool_body(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        await ctx.progress("half", {"pct": 50})
        return "done"

    registry = create_tool_registry([ToolDefinition(name="t", execute=tool_body)])
    result = await dispatch_tool_call(
        call("t"),
        registry=registry,
        context=context(progress=lambda value, metadata: reports.append((value, metadata))),
    )
    assert result.value == "done"
    assert reports == [("half", {"pct": 50})]


@pytest.mark.parametrize("with_audit", [False, True])
async def test_blocked_results_say_why_in_metadata(with_audit: bool) -> None:
    spy = Spy()
    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    options: dict[str, Any] = {"emit": EventLog()} if with_audit else {}
    result = await dispatch_tool_call(
        call("missing"), registry=registry, context=context(), **options
    )
    assert result.metadata == {"blocked_reason": "unknown_tool"}
    ok = await dispatch_tool_call(call(), registry=registry, context=context(), **options)
    assert ok.metadata is None


async def test_event_subject_helpers_find_the_call_on_every_event_type() -> None:
    async def tool_body(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        await ctx.progress(1)
        raise RuntimeError("boom")

    registry = create_tool_registry([ToolDefinition(name="t", execute=tool_body)])
    recorder = EventLog()
    for the_call in (call("t", call_id="a"), call("ghost", call_id="b")):
        await dispatch_tool_call(the_call, registry=registry, context=context(), emit=recorder)
    assert [(e.type, e.subject_call_id, e.subject_name) for e in recorder.events] == [
        ("tool_execution_started", "a", "t"),
        ("tool_execution_progress", "a", "t"),
        ("tool_execution_error", "a", "t"),
        ("tool_execution_blocked", "b", "ghost"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"city": "Paris"', "Tool arguments are not valid JSON"),
        ("[1, 2]", "Tool arguments must be a JSON object"),
        ("[" * 100_000, "max_argument_depth=64"),
        (b"\xff\xfe", "Tool arguments are not valid JSON"),
        ('{"a": 1} trailing', "Tool arguments are not valid JSON"),
    ],
)
async def test_raw_argument_text_that_is_not_an_object_is_blocked(
    text: str | bytes, message: str
) -> None:
    spy = Spy()
    result, recorder, ledger = await run(spy, ToolCall(id="call_1", name="echo", arguments=text))
    assert result.error is not None
    assert message in result.error.message
    assert result.error.code == "invalid_json_arguments"
    assert_blocked_once(spy, recorder, ledger, "invalid_arguments")


@pytest.mark.parametrize(
    "text", ['{"city": "Paris", "n": [1, 2.5, null]}', b'{"city": "Paris", "n": [1, 2.5, null]}']
)
async def test_raw_argument_text_is_parsed_before_the_tool_runs(text: str | bytes) -> None:
    spy = Spy()
    result, _, ledger = await run(spy, ToolCall(id="call_1", name="echo", arguments=text))
    assert result.error is None
    assert spy.calls[0][0] == {"city": "Paris", "n": [1, 2.5, None]}
    assert ledger.records[0].arguments == {"city": "Paris", "n": [1, 2.5, None]}


@pytest.mark.parametrize("text", ["", "   \n"])
async def test_empty_argument_text_is_an_empty_object(text: str) -> None:
    spy = Spy()
    result, _, _ = await run(spy, ToolCall(id="call_1", name="echo", arguments=text))
    assert result.error is None
    assert spy.calls[0][0] == {}


def test_core_row_ids_count_in_hex_from_the_first_number() -> None:
    from prism_tools._core import row_ids

    assert row_ids("p_", 254, 3) == ["p_fe", "p_ff", "p_100"]
    assert row_ids("p_", 1, 0) == []


def test_core_row_ids_refuse_huge_blocks_and_counter_overflow() -> None:
    from prism_tools._core import row_ids

    with pytest.raises(ValueError, match="at most 65536 row ids"):
        row_ids("p_", 1, 65_537)
    with pytest.raises(OverflowError, match="row id counter overflow"):
        row_ids("p_", 2**64 - 2, 3)
    with pytest.raises(OverflowError):
        row_ids("p_", -1, 1)


def test_dispatch_row_ids_are_fresh_across_a_block_boundary() -> None:
    from prism_tools.dispatch import new_row_id

    drawn = [new_row_id() for _ in range(600)]  # more than one block of 256
    assert len(set(drawn)) == 600
    assert all(ROW_ID.fullmatch(row_id) for row_id in drawn)
    counters = [int(row_id.rsplit("_", 1)[1], 16) for row_id in drawn]
    assert counters == sorted(counters)


def test_row_stamps_follow_the_clock_across_millisecond_boundaries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stamp is cached per millisecond: the same millisecond reuses it, the next one and a
    # clock set backwards both get a fresh one.
    import prism_tools.dispatch as dispatch_module

    monkeypatch.setattr(dispatch_module, "_clock_cache", [0, 0, ""])
    now = [1_700_000_000_123_456_789]
    monkeypatch.setattr(dispatch_module, "_time_ns", lambda: now[0])
    assert dispatch_module.now_iso() == "2023-11-14T22:13:20.123Z"
    now[0] = 1_700_000_000_123_999_999
    assert dispatch_module.now_iso() == "2023-11-14T22:13:20.123Z"
    now[0] = 1_700_000_000_124_000_000
    assert dispatch_module.now_iso() == "2023-11-14T22:13:20.124Z"
    now[0] = 1_700_000_000_122_999_999
    assert dispatch_module.now_iso() == "2023-11-14T22:13:20.122Z"
    now[0] = 1_700_000_061_000_000_000
    assert dispatch_module.now_iso() == "2023-11-14T22:14:21.000Z"


# ------------------------------------------------------------------ arguments of the wrong kind


class HasNothing:
    """A host object with none of the methods any dispatch option needs."""


WRONG_ARGUMENTS: list[tuple[str, Any, str]] = [
    ("call", None, "call must be a ToolCall, got NoneType"),
    ("call", {"id": "call_1", "name": "echo", "arguments": {}}, "call must be a ToolCall"),
    ("registry", None, "registry must be a ToolRegistry, got NoneType"),
    ("registry", [ToolDefinition(name="echo")], "registry must be a ToolRegistry, got list"),
    ("context", None, "context must be a ToolExecutionContext, got NoneType"),
    ("context", {"session_id": "s1"}, "context must be a ToolExecutionContext, got dict"),
    ("middleware", HasNothing(), "middleware must be a MiddlewareRegistry"),
    ("guardrails", [], "guardrails must be a Guardrails"),
    ("limit_tracker", HasNothing(), "limit_tracker must be a limit tracker with a charge"),
    ("validate", 5, "validate must be a function"),
    ("before_execute", "yes", "before_execute must be a function"),
    ("trust", HasNothing(), "trust must be a policy with a check"),
    ("permission", True, "permission must be a policy with a check"),
    ("identity", "agent-1", "identity must be an AgentIdentity, got str"),
    ("emit", 5, "emit must be a function that takes an AgentEvent"),
    ("redactor", HasNothing(), "redactor must be a redactor with a redact"),
    ("ledger", HasNothing(), "ledger must be a ledger with an append_tool_call"),
    ("ownership", "tenant-1", "ownership must be an Ownership, got str"),
    ("secrets", 5, "secrets must be a collection of strings, got int"),
    ("secrets", ["fine", 7], "secrets must be strings, got int"),
]


@pytest.mark.parametrize(("option", "wrong", "expected"), WRONG_ARGUMENTS)
async def test_an_argument_of_the_wrong_kind_is_a_type_error_naming_it_before_the_tool_runs(
    option: str, wrong: Any, expected: str
) -> None:
    spy = Spy()
    recorder, ledger = EventLog(), InMemoryRunLedger()
    arguments: dict[str, Any] = {
        "call": call(),
        "registry": create_tool_registry([ToolDefinition(name="echo", execute=spy)]),
        "context": context(),
        # The sinks stay on where they are not the wrong argument: nothing may reach them.
        "emit": recorder,
        "ledger": ledger,
        option: wrong,
    }
    if option == "ownership":
        arguments.pop("emit")  # ownership is read for ledger rows; the sink would run first
    with pytest.raises(TypeError, match=re.escape(expected)):
        await dispatch_tool_call(**arguments)
    assert spy.calls == [], "a call with a wrong argument must never reach execute"
    assert recorder.events == []
    assert ledger.records == []


@pytest.mark.parametrize("wrong", [5, {"tenant_id": "t1"}])
async def test_a_wrong_ownership_with_an_identity_is_a_type_error_not_a_refusal(
    wrong: Any,
) -> None:
    # Without a sink or ledger ownership is first read by the identity check: a host mistake
    # must still raise, never come back as a permission_denied result.
    from prism_tools import AgentIdentity

    spy = Spy()
    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    with pytest.raises(TypeError, match="ownership must be an Ownership"):
        await dispatch_tool_call(
            call(),
            registry,
            context(),
            identity=AgentIdentity(principal_id="agent-1", tenant_id="t1"),
            ownership=wrong,
        )
    assert spy.calls == []


def _raises(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
    raise ValueError("tool failed")


@pytest.mark.parametrize(
    ("name", "arguments", "tools"),
    [
        ("get_sk-live-123", {}, []),  # unknown tool
        ("echo", "{not json", [ToolDefinition(name="echo", execute=Spy())]),  # invalid arguments
        ("echo", {}, [ToolDefinition(name="echo", execute=_raises)]),  # the tool raised
    ],
)
async def test_a_refused_or_failed_result_carries_no_secret_in_its_id_or_name(
    name: str, arguments: Any, tools: list[ToolDefinition]
) -> None:
    recorder, ledger = EventLog(), InMemoryRunLedger()
    result = await dispatch_tool_call(
        call(name, arguments, call_id="id-sk-live-123"),
        create_tool_registry(tools),
        context("id-sk-live-123"),
        secrets=["sk-live-123"],
        emit=recorder,
        ledger=ledger,
    )
    assert result.error is not None
    leaving = [result, *recorder.events, *ledger.records]
    assert b"sk-live-123" not in dumps_lenient([item.to_dict() for item in leaving])
    assert result.tool_call_id == "id-[REDACTED]"


async def test_the_redactor_is_checked_even_with_no_sink_or_ledger_to_scrub_for() -> None:
    # Without events or rows the redactor is first used on the tool's result: too late.
    spy = Spy()
    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    with pytest.raises(TypeError, match="redactor must be a redactor with a redact"):
        await dispatch_tool_call(call(), registry, context(), redactor=HasNothing())  # type: ignore[arg-type]
    assert spy.calls == []


async def test_a_wrong_effect_store_is_a_type_error_for_a_tool_with_an_effect() -> None:
    from prism_tools import AgentIdentity, ToolEffect

    spy = Spy()
    tool = ToolDefinition(
        name="echo", execute=spy, effect=ToolEffect("external_mutation", "required")
    )
    with pytest.raises(TypeError, match="effect_store must be a ToolEffectStore, got object"):
        await dispatch_tool_call(
            call(),
            create_tool_registry([tool]),
            context(),
            identity=AgentIdentity(principal_id="agent-1", tenant_id="t1"),
            effect_store=object(),  # type: ignore[arg-type]
        )
    assert spy.calls == []


async def test_errors_raised_by_well_formed_host_code_are_not_renamed() -> None:
    # Only an argument of the wrong kind turns into the TypeError: an AttributeError raised by
    # a validator is its refusal, and one raised by a well-formed limit tracker comes out as is.
    def validator(tool: ToolDefinition, args: dict[str, Any], ctx: Any) -> None:
        raise AttributeError("no such field: city")

    spy = Spy()
    result, recorder, ledger = await run(spy, call(), validate=validator)
    assert result.error is not None
    assert result.error.message == "no such field: city"
    assert_blocked_once(spy, recorder, ledger, "validation_failed")

    class BrokenTracker:
        def charge(self, limit: str) -> None:
            raise AttributeError("tracker bug")

    with pytest.raises(AttributeError, match="tracker bug"):
        await run(spy, call(), limit_tracker=BrokenTracker())
    assert spy.calls == []


# --- secrets a model or a tool spells its own way ---------------------------------------------


@pytest.mark.parametrize("name", ["echo", "missing"], ids=["denied", "unknown-tool"])
async def test_raw_argument_text_kept_on_a_blocked_row_holds_no_escaped_secret(name: str) -> None:
    secret = 'pä"ss-2024/x'
    # The model escapes as it likes: a \u escape for "-", an escaped "/", an escaped quote.
    text = '{"password": "p\\u00e4\\"ss\\u002d2024\\/x", "other": "kept"}'
    assert json.loads(text)["password"] == secret
    spy = Spy()
    result, _recorder, ledger = await run(
        spy,
        call(name, text),
        secrets=[secret],
        filter=ToolFilter(deny=["echo"]),
    )
    assert spy.calls == []
    assert result.error is not None
    [row] = ledger.records
    assert row.status == "blocked"
    assert row.redacted is True
    kept = json.loads(cast(str, row.arguments))
    assert kept == {"password": "[REDACTED]", "other": "kept"}


async def test_a_tripwire_the_tool_raises_closes_its_call_and_leaves_redacted() -> None:
    spy = Spy(
        error=GuardrailTripwire("nested run refused sk-nested-1", record={"k": "sk-nested-1"})
    )
    with pytest.raises(GuardrailTripwire) as caught:
        await run(spy, call(), secrets=["sk-nested-1"])
    assert len(spy.calls) == 1
    assert "sk-nested-1" not in str(caught.value)
    assert caught.value.record == {"k": "[REDACTED]"}
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


async def test_a_tripwire_the_tool_raises_gets_an_error_row_and_event() -> None:
    spy = Spy(error=GuardrailTripwire("nested run refused sk-nested-1"))
    registry = create_tool_registry([ToolDefinition(name="echo", execute=spy)])
    recorder, ledger = EventLog(), InMemoryRunLedger()
    with pytest.raises(GuardrailTripwire):
        await dispatch_tool_call(
            call(),
            registry=registry,
            context=context(),
            emit=recorder,
            ledger=ledger,
            secrets=["sk-nested-1"],
        )
    assert [row.status for row in ledger.records] == ["started", "error"]
    closing = ledger.records[-1].result
    assert closing is not None
    assert closing.error is not None
    assert closing.error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert closing.error.message == "nested run refused [REDACTED]"
    assert recorder.types == ["tool_execution_started", "tool_execution_error"]


async def test_a_validation_message_never_shows_part_of_a_secret_the_model_sent_as_a_key() -> None:
    secret = "ghp_R4nd0mT0k3nV4lu3ABCDEFGHIJKLMNOPQRST"
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "additionalProperties": False,
    }
    spy = Spy()
    registry = create_tool_registry([ToolDefinition("search", execute=spy, parameters=schema)])
    for filler in range(60, 120, 3):  # moves the message's cut across the secret
        arguments = {"q": "x", "f" * filler: 1, secret: 1}
        recorder, ledger = EventLog(), InMemoryRunLedger()
        result = await dispatch_tool_call(
            call("search", arguments),
            registry=registry,
            context=context(),
            emit=recorder,
            ledger=ledger,
            secrets=[secret],
            validate=create_json_schema_tool_argument_validator(),
        )
        assert result.error is not None
        shown = " ".join(
            [result.error.message, repr(result.error.details), repr(ledger.records[-1])]
        )
        assert not any(secret[:size] in shown for size in range(8, len(secret) + 1))
    assert spy.calls == []
