"""MiddlewareRegistry: chain semantics on its own, and through dispatch_tool_call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from tests.support import EventLog

from prism_tools import (
    ErrorInfo,
    InMemoryRunLedger,
    MiddlewareError,
    MiddlewareRegistry,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_middleware_registry,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools.middleware import MiddlewareDiagnostic

Next = Callable[[Any], Any]


def make_call(name: str = "echo", arguments: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments={} if arguments is None else arguments)


def make_context() -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id="call_1")


def with_args(call: ToolCall, **arguments: Any) -> ToolCall:
    """A copy of ``call`` whose arguments gain ``arguments``."""
    return dataclasses.replace(call, arguments={**call.arguments, **arguments})


class CountingTool:
    """A tool body that records the arguments of every call and echoes them back."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.calls.append(args)
        return dict(args)


class DiagnosticLog:
    """An ``on_error`` sink that keeps every diagnostic."""

    def __init__(self) -> None:
        self.diagnostics: list[MiddlewareDiagnostic] = []

    def __call__(self, diagnostic: MiddlewareDiagnostic) -> None:
        self.diagnostics.append(diagnostic)

    @property
    def messages(self) -> list[str]:
        return [diagnostic.message for diagnostic in self.diagnostics]


# --- registration ------------------------------------------------------------------------------


async def test_middlewares_run_in_registration_order() -> None:
    seen: list[str] = []

    def tag(label: str) -> Callable[[ToolCall, Next], ToolCall]:
        def middleware(call: ToolCall, next_: Next) -> ToolCall:
            seen.append(label)
            return with_args(call, order=[*call.arguments.get("order", []), label])

        return middleware

    registry = MiddlewareRegistry()
    for label in ("first", "second", "third"):
        registry.use("tool_call", tag(label))

    out = await registry.run("tool_call", make_call())

    assert seen == ["first", "second", "third"]
    assert out.arguments == {"order": ["first", "second", "third"]}


def test_use_returns_the_registry_and_counts_per_hook() -> None:
    registry = create_middleware_registry()
    assert not registry.has("tool_call")
    assert registry.use("tool_call", lambda value, next_: None) is registry
    registry.use("tool_result", lambda value, next_: None).use(
        "tool_result", lambda value, next_: None
    )
    assert registry.has("tool_call")
    assert registry.has("tool_result")
    assert len(registry) == 3


def test_unknown_hook_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown middleware hook"):
        MiddlewareRegistry().use("tool_start", lambda value, next_: None)  # type: ignore[arg-type]


def test_non_callable_middleware_is_rejected() -> None:
    with pytest.raises(TypeError, match="callable"):
        MiddlewareRegistry().use("tool_call", "not a function")  # type: ignore[arg-type]


def test_unknown_error_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="error_policy"):
        MiddlewareRegistry(error_policy="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_error must be a function, got list"):
        MiddlewareRegistry(on_error=[])  # type: ignore[arg-type]


# --- (value, next) chaining --------------------------------------------------------------------


async def test_next_with_a_value_makes_it_the_chain_value() -> None:
    replacement = make_call(arguments={"via": "next"})
    seen_by_second: list[ToolCall] = []

    def hand_on(call: ToolCall, next_: Next) -> Any:
        return next_(replacement)

    def observe(call: ToolCall, next_: Next) -> None:
        seen_by_second.append(call)

    registry = MiddlewareRegistry().use("tool_call", hand_on).use("tool_call", observe)
    out = await registry.run("tool_call", make_call())

    assert out is replacement
    assert seen_by_second == [replacement]


async def test_next_return_value_is_ignored_when_the_middleware_returns_nothing() -> None:
    replacement = make_call(arguments={"via": "next"})

    def hand_on_and_return_none(call: ToolCall, next_: Next) -> None:
        next_(replacement)

    registry = MiddlewareRegistry().use("tool_call", hand_on_and_return_none)
    assert await registry.run("tool_call", make_call()) is replacement


async def test_next_without_an_argument_keeps_the_current_value() -> None:
    original = make_call()
    # next() with no argument hands on the current value; the published Middleware type only
    # describes next(value), hence the ignore.
    registry = MiddlewareRegistry().use("tool_call", lambda call, next_: next_())  # type: ignore[call-arg]
    assert await registry.run("tool_call", original) is original


async def test_returned_value_replaces_the_chain_value_when_next_is_not_called() -> None:
    replacement = make_call(arguments={"via": "return"})
    registry = MiddlewareRegistry().use("tool_call", lambda call, next_: replacement)
    assert await registry.run("tool_call", make_call()) is replacement


async def test_returning_none_keeps_the_chain_value() -> None:
    original = make_call()
    log = DiagnosticLog()
    registry = MiddlewareRegistry(on_error=log).use("tool_call", lambda call, next_: None)
    assert await registry.run("tool_call", original) is original
    assert log.diagnostics == []


async def test_calling_next_twice_raises_naming_hook_and_index() -> None:
    def twice(call: ToolCall, next_: Next) -> Any:
        next_(call)
        return next_(call)

    registry = MiddlewareRegistry().use("tool_call", twice)
    with pytest.raises(MiddlewareError) as caught:
        await registry.run("tool_call", make_call())
    assert str(caught.value) == 'Middleware hook "tool_call" #0: next() called more than once'
    assert caught.value.code == "ERR_PRISM_MIDDLEWARE"


async def test_calling_next_twice_names_the_position_of_the_offending_middleware() -> None:
    def twice(result: ToolResult, next_: Next) -> Any:
        next_(result)
        return next_(result)

    registry = (
        MiddlewareRegistry(error_policy="event")
        .use("tool_result", lambda result, next_: None)
        .use("tool_result", twice)
    )
    with pytest.raises(
        MiddlewareError, match=r'^Middleware hook "tool_result" #1: next\(\) called more than once$'
    ):
        await registry.run("tool_result", ToolResult(tool_call_id="call_1", name="echo"))


async def test_sync_and_async_middlewares_chain_together() -> None:
    def sync_step(call: ToolCall, next_: Next) -> ToolCall:
        return with_args(call, sync=True)

    async def async_step(call: ToolCall, next_: Next) -> ToolCall:
        return with_args(call, async_=True)

    async def async_next_step(call: ToolCall, next_: Next) -> Any:
        return next_(with_args(call, async_next=True))

    registry = (
        MiddlewareRegistry()
        .use("tool_call", sync_step)
        .use("tool_call", async_step)
        .use("tool_call", async_next_step)
    )
    out = await registry.run("tool_call", make_call())
    assert out.arguments == {"sync": True, "async_": True, "async_next": True}


# --- problems: raising, wrong type, different return after next ---------------------------------


async def test_raising_middleware_is_reported_and_skipped_under_the_default_policy() -> None:
    log = DiagnosticLog()
    failure = ValueError("middleware exploded")
    later_saw: list[ToolCall] = []

    def add_step(call: ToolCall, next_: Next) -> ToolCall:
        return with_args(call, step=1)

    def explode(call: ToolCall, next_: Next) -> ToolCall:
        raise failure

    def observe(call: ToolCall, next_: Next) -> None:
        later_saw.append(call)

    registry = (
        MiddlewareRegistry(on_error=log)
        .use("tool_call", add_step)
        .use("tool_call", explode)
        .use("tool_call", observe)
    )
    out = await registry.run("tool_call", make_call())

    assert out.arguments == {"step": 1}, "the chain keeps the value from before the failure"
    assert later_saw == [out], "middlewares after the failing one still run"
    [diagnostic] = log.diagnostics
    assert diagnostic.hook == "tool_call"
    assert diagnostic.index == 1
    assert diagnostic.error is failure
    assert diagnostic.message.startswith('Middleware hook "tool_call" #1: ')
    assert "ValueError" in diagnostic.message


async def test_raising_middleware_after_next_is_skipped_entirely() -> None:
    """A middleware that handed a value on and then raised does not get its value adopted."""
    log = DiagnosticLog()
    original = make_call()

    def hand_on_then_raise(call: ToolCall, next_: Next) -> None:
        next_(with_args(call, adopted=True))
        raise RuntimeError("late failure")

    registry = MiddlewareRegistry(on_error=log).use("tool_call", hand_on_then_raise)
    assert await registry.run("tool_call", original) is original
    assert len(log.diagnostics) == 1


async def test_async_on_error_sink_is_awaited() -> None:
    received: list[MiddlewareDiagnostic] = []

    async def sink(diagnostic: MiddlewareDiagnostic) -> None:
        received.append(diagnostic)

    def explode(call: ToolCall, next_: Next) -> None:
        raise KeyError("x")

    registry = MiddlewareRegistry(on_error=sink).use("tool_call", explode)
    await registry.run("tool_call", make_call())
    assert [diagnostic.index for diagnostic in received] == [0]


async def test_raising_middleware_is_reraised_as_middleware_error_under_throw_policy() -> None:
    log = DiagnosticLog()
    failure = ValueError("middleware exploded")
    later_ran: list[bool] = []

    def explode(call: ToolCall, next_: Next) -> None:
        raise failure

    registry = (
        MiddlewareRegistry(error_policy="throw", on_error=log)
        .use("tool_call", explode)
        .use("tool_call", lambda call, next_: later_ran.append(True))
    )
    with pytest.raises(MiddlewareError) as caught:
        await registry.run("tool_call", make_call())

    assert str(caught.value).startswith('Middleware hook "tool_call" #0: ')
    assert caught.value.__cause__ is failure
    assert later_ran == []
    assert log.diagnostics == [], "a raised problem is not also reported"


async def test_different_return_after_next_keeps_the_handed_value_and_reports() -> None:
    log = DiagnosticLog()
    handed = make_call(arguments={"via": "next"})
    returned = make_call(arguments={"via": "return"})

    def inconsistent(call: ToolCall, next_: Next) -> ToolCall:
        next_(handed)
        return returned

    registry = MiddlewareRegistry(on_error=log).use("tool_call", inconsistent)
    out = await registry.run("tool_call", make_call())

    assert out is handed
    [diagnostic] = log.diagnostics
    assert diagnostic.hook == "tool_call"
    assert diagnostic.index == 0
    assert "different value" in diagnostic.message


async def test_returning_the_handed_value_is_not_a_problem() -> None:
    log = DiagnosticLog()
    handed = make_call(arguments={"via": "next"})
    registry = MiddlewareRegistry(on_error=log).use("tool_call", lambda call, next_: next_(handed))
    assert await registry.run("tool_call", make_call()) is handed
    assert log.diagnostics == []


@pytest.mark.parametrize(
    "wrong",
    [
        pytest.param({"id": "call_1", "name": "echo", "arguments": {}}, id="dict"),
        pytest.param("echo", id="str"),
        pytest.param(ToolResult(tool_call_id="call_1", name="echo"), id="other-hook-type"),
    ],
)
async def test_wrong_type_returned_is_reported_and_skipped(wrong: Any) -> None:
    log = DiagnosticLog()
    original = make_call()
    later_saw: list[ToolCall] = []
    registry = (
        MiddlewareRegistry(on_error=log)
        .use("tool_call", lambda call, next_: wrong)
        .use("tool_call", lambda call, next_: later_saw.append(call))
    )
    out = await registry.run("tool_call", original)

    assert out is original
    assert later_saw == [original]
    [diagnostic] = log.diagnostics
    assert diagnostic.index == 0
    assert f"produced {type(wrong).__name__}, expected ToolCall" in diagnostic.message


async def test_wrong_type_handed_to_next_is_reported_and_skipped() -> None:
    log = DiagnosticLog()
    original = ToolResult(tool_call_id="call_1", name="echo", value=1)
    registry = MiddlewareRegistry(on_error=log).use(
        "tool_result", lambda result, next_: next_({"value": 2})
    )
    assert await registry.run("tool_result", original) is original
    assert "expected ToolResult" in log.messages[0]


async def test_wrong_type_raises_under_throw_policy() -> None:
    registry = MiddlewareRegistry(error_policy="throw").use(
        "tool_call", lambda call, next_: ["not", "a", "call"]
    )
    with pytest.raises(MiddlewareError, match="produced list, expected ToolCall"):
        await registry.run("tool_call", make_call())


# --- through dispatch --------------------------------------------------------------------------


async def test_tool_call_then_tool_result_middleware_changes_reach_the_result() -> None:
    order: list[str] = []
    tool = CountingTool()

    def rewrite_call(call: ToolCall, next_: Next) -> ToolCall:
        order.append("tool_call")
        return with_args(call, added_by="tool_call")

    async def rewrite_result(result: ToolResult, next_: Next) -> Any:
        order.append("tool_result")
        return next_(dataclasses.replace(result, value={**result.value, "seen_by": "tool_result"}))

    async def body(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        order.append("execute")
        return await tool(args, context)

    middleware = (
        MiddlewareRegistry().use("tool_call", rewrite_call).use("tool_result", rewrite_result)
    )
    result = await dispatch_tool_call(
        make_call(arguments={"text": "hi"}),
        registry=create_tool_registry([ToolDefinition(name="echo", execute=body)]),
        context=make_context(),
        middleware=middleware,
    )

    assert order == ["tool_call", "execute", "tool_result"]
    assert tool.calls == [{"text": "hi", "added_by": "tool_call"}]
    assert result.error is None
    assert result.value == {"text": "hi", "added_by": "tool_call", "seen_by": "tool_result"}


async def test_renaming_a_call_to_a_denied_tool_is_still_denied() -> None:
    echo, denied = CountingTool(), CountingTool()
    registry = create_tool_registry(
        [ToolDefinition(name="echo", execute=echo), ToolDefinition(name="denied", execute=denied)]
    )
    middleware = MiddlewareRegistry().use(
        "tool_call", lambda call, next_: dataclasses.replace(call, name="denied")
    )
    log = EventLog()

    result = await dispatch_tool_call(
        make_call("echo"),
        registry=registry,
        context=make_context(),
        middleware=middleware,
        filter={"deny": ["denied"]},
        emit=log,
    )

    assert result.error is not None
    assert result.error.message == "Tool denied: denied"
    assert result.name == "denied"
    assert echo.calls == []
    assert denied.calls == []
    assert log.types == ["tool_execution_blocked"]
    assert log.events[0].reason == "tool_denied"


async def test_renaming_a_call_to_an_unknown_tool_gives_unknown_tool() -> None:
    echo = CountingTool()
    middleware = MiddlewareRegistry().use(
        "tool_call", lambda call, next_: next_(dataclasses.replace(call, name="ghost"))
    )
    log = EventLog()

    result = await dispatch_tool_call(
        make_call("echo"),
        registry=create_tool_registry([ToolDefinition(name="echo", execute=echo)]),
        context=make_context(),
        middleware=middleware,
        emit=log,
    )

    assert result.error is not None
    assert result.error.message == "Unknown tool: ghost"
    assert echo.calls == []
    assert log.types == ["tool_execution_blocked"]
    assert log.events[0].reason == "unknown_tool"


async def test_middleware_diagnostic_becomes_an_extension_error_event() -> None:
    echo = CountingTool()
    log = EventLog()

    def explode(call: ToolCall, next_: Next) -> None:
        raise RuntimeError("middleware exploded")

    result = await dispatch_tool_call(
        make_call(arguments={"text": "hi"}),
        registry=create_tool_registry([ToolDefinition(name="echo", execute=echo)]),
        context=make_context(),
        middleware=MiddlewareRegistry().use("tool_call", explode),
        emit=log,
    )

    assert echo.calls == [{"text": "hi"}], "a failing middleware does not block the call"
    assert result.error is None
    assert log.types == [
        "extension_error",
        "tool_execution_started",
        "tool_execution_finished",
    ]
    event = log.events[0]
    assert event.session_id == "s1"
    assert event.run_id == "r1"
    assert event.error is not None
    assert event.error.code == "ERR_PRISM_MIDDLEWARE"
    assert event.error.message.startswith('Middleware hook "tool_call" #0: ')
    assert event.to_dict()["hook"] == "tool_call"
    assert event.to_dict()["index"] == 0


async def test_tool_result_middleware_diagnostic_is_reported_between_start_and_finish() -> None:
    log = EventLog()
    result = await dispatch_tool_call(
        make_call(),
        registry=create_tool_registry([ToolDefinition(name="echo", execute=CountingTool())]),
        context=make_context(),
        middleware=MiddlewareRegistry().use("tool_result", lambda result, next_: 42),
        emit=log,
    )
    assert result.value == {}, "the wrong-typed replacement was skipped"
    assert log.types == [
        "tool_execution_started",
        "extension_error",
        "tool_execution_finished",
    ]
    assert log.events[1].to_dict()["hook"] == "tool_result"


async def test_throw_policy_makes_dispatch_raise_before_the_tool_runs() -> None:
    echo = CountingTool()
    log = EventLog()

    def explode(call: ToolCall, next_: Next) -> None:
        raise RuntimeError("middleware exploded")

    with pytest.raises(MiddlewareError, match='Middleware hook "tool_call" #0'):
        await dispatch_tool_call(
            make_call(),
            registry=create_tool_registry([ToolDefinition(name="echo", execute=echo)]),
            context=make_context(),
            middleware=MiddlewareRegistry(error_policy="throw").use("tool_call", explode),
            emit=log,
        )

    assert echo.calls == []
    assert log.types == []


async def test_double_next_in_dispatch_raises_and_the_tool_does_not_run() -> None:
    echo = CountingTool()

    def twice(call: ToolCall, next_: Next) -> Any:
        next_(call)
        return next_(call)

    with pytest.raises(MiddlewareError, match="next\\(\\) called more than once"):
        await dispatch_tool_call(
            make_call(),
            registry=create_tool_registry([ToolDefinition(name="echo", execute=echo)]),
            context=make_context(),
            middleware=MiddlewareRegistry().use("tool_call", twice),
        )
    assert echo.calls == []


# --- stops after the tool ran, secrets, failing sinks ------------------------------------------


def raising(text: str) -> Callable[[Any, Next], Any]:
    def middleware(value: Any, next: Next) -> Any:
        raise ValueError(text)

    return middleware


@pytest.mark.parametrize("hook", ["tool_call", "tool_result"])
async def test_a_middleware_error_under_a_redactor_leaves_without_the_secret_it_came_from(
    hook: str,
) -> None:
    middleware = create_middleware_registry(error_policy="throw")
    middleware.use(hook, raising("cannot route key sk-mw-secret"))
    tool, ledger = CountingTool(), InMemoryRunLedger()
    with pytest.raises(MiddlewareError) as caught:
        await dispatch_tool_call(
            make_call(),
            registry=create_tool_registry([ToolDefinition(name="echo", execute=tool)]),
            context=make_context(),
            middleware=middleware,
            ledger=ledger,
            secrets=["sk-mw-secret"],
        )
    error = caught.value
    assert error.__cause__ is None
    assert error.__context__ is None  # the middleware's own error is not reachable from it
    assert "sk-mw-secret" not in str(error)
    # After the tool ran, its started row is closed before the error reaches the caller.
    expected = [] if hook == "tool_call" else ["started", "error"]
    assert [row.status for row in ledger.records] == expected
    assert len(tool.calls) == (0 if hook == "tool_call" else 1)


async def test_an_error_sink_that_raises_cannot_stop_or_escape_the_call() -> None:
    def broken_sink(diagnostic: MiddlewareDiagnostic) -> None:
        raise ZeroDivisionError

    middleware = create_middleware_registry(on_error=broken_sink)
    middleware.use("tool_call", raising("skip me"))
    tool = CountingTool()
    result = await dispatch_tool_call(
        make_call(),
        registry=create_tool_registry([ToolDefinition(name="echo", execute=tool)]),
        context=make_context(),
        middleware=middleware,
    )
    assert result.error is None
    assert len(tool.calls) == 1


async def test_a_result_whose_error_fields_are_of_another_kind_is_an_invalid_result() -> None:
    def odd_error(result: ToolResult, next: Next) -> Any:
        return dataclasses.replace(result, error=ErrorInfo(message=None, code=["x"]))  # type: ignore[arg-type]

    middleware = create_middleware_registry()
    middleware.use("tool_result", odd_error)
    result = await dispatch_tool_call(
        make_call(),
        registry=create_tool_registry([ToolDefinition(name="echo", execute=CountingTool())]),
        context=make_context(),
        middleware=middleware,
    )
    assert result.error is not None
    assert result.error.code == "invalid_tool_result"
    assert type(result.error.message) is str
