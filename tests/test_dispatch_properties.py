"""Hostile and random input: dispatch never raises, never runs a call it blocks, never leaks."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.support import any_text

from prism_tools import (
    AgentEvent,
    ErrorInfo,
    InMemoryRunLedger,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools._json import dumps_lenient

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | any_text(max_size=40)
any_keys = any_text(max_size=8) | st.integers() | st.none() | st.tuples(st.integers())
json_like = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(any_text(max_size=8), children, max_size=4)
        | st.dictionaries(any_keys, children, max_size=3)
    ),
    max_leaves=25,
)


def deep(levels: int) -> Any:
    value: Any = "leaf"
    for index in range(levels):
        value = {"k": value} if index % 2 else [value]
    return value


hostile_arguments = (
    json_like
    | st.sampled_from(["{}", '{"a": 1}', " ", "[1]", '{"a":', "null", '{"a": NaN}'])
    | st.builds(lambda size: {"blob": "x" * size}, st.integers(0, 2_000_000))
    | st.builds(deep, st.integers(1, 3000))
    | st.builds(lambda levels: {"deep": deep(levels)}, st.integers(1, 3000))
)
names = (
    st.sampled_from(["echo", "denied", "missing", "", "ECHO", "echo\ud800"])
    | any_text(max_size=20)
    | (st.integers() | st.none())
)


def parsed_text(text: str) -> Any:
    """What raw argument text should become: the JSON it holds, {} when blank, None if bad
    (a lone surrogate included: UTF-8 cannot carry it)."""
    if not text.strip(" \t\n\r"):
        return {}
    try:
        text.encode()
    except UnicodeEncodeError:
        return None

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except ValueError:
        return None


class Counter:
    def __init__(self) -> None:
        self.runs: list[Any] = []

    async def __call__(self, args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        self.runs.append(args)
        return "ran"


@given(
    name=names,
    call_id=any_text(max_size=10) | st.integers(),
    arguments=hostile_arguments | any_text(max_size=30).map(lambda text: '{"a": "' + text + '"}'),
    arguments_error=st.none()
    | st.just(ErrorInfo(message="bad json", code="invalid_json_arguments")),
)
async def test_dispatch_never_raises_and_never_runs_a_blocked_call(
    name: Any, call_id: Any, arguments: Any, arguments_error: ErrorInfo | None
) -> None:
    echo, denied = Counter(), Counter()
    registry = create_tool_registry(
        [ToolDefinition(name="echo", execute=echo), ToolDefinition(name="denied", execute=denied)]
    )
    events: list[AgentEvent] = []
    ledger = InMemoryRunLedger()
    result = await dispatch_tool_call(
        ToolCall(id=call_id, name=name, arguments=arguments, arguments_error=arguments_error),
        registry=registry,
        context=ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c"),
        filter=ToolFilter(deny=["denied"]),
        emit=events.append,
        ledger=ledger,
        secrets=["qjz-secret"],  # every row passes through the redactor
    )
    assert denied.runs == []
    parsed = parsed_text(arguments) if isinstance(arguments, str) else arguments
    should_run = (
        name == "echo"
        and arguments_error is None
        and type(parsed) is dict
        and all(type(key) is str for key in parsed)
    )
    if should_run:
        assert echo.runs == [parsed]
        assert result.error is None
        assert [row.status for row in ledger.records] == ["started", "finished"]
    else:
        assert echo.runs == []
        assert result.error is not None
        assert [event.type for event in events] == ["tool_execution_blocked"]
        assert [row.status for row in ledger.records] == ["blocked"]


secret_text = st.text(
    alphabet='abcdefghijklmnopqrstuvwxyz0123456789-_"\\\n é', min_size=4, max_size=16
)


def distinctive(secret: str) -> bool:
    # A secret must be recognisable text: one that only occurs inside the digits of a number or
    # inside the harness's own field names is not something a host could call a secret.
    return any(char in secret for char in "qjz")


@given(
    secret=secret_text.filter(distinctive),
    where=st.sampled_from(["arguments", "result", "error", "validator", "key"]),
    noise=json_like,
)
async def test_secrets_never_leave_dispatch(secret: str, where: str, noise: Any) -> None:
    arguments: dict[str, Any] = {"noise": noise, "payload": f"x{secret}y"}
    if where == "key":
        arguments = {f"k-{secret}": noise}

    async def body(args: dict[str, Any], ctx: ToolExecutionContext) -> Any:
        if where == "error":
            raise RuntimeError(f"failed with {secret}")
        if where == "result":
            return {"echo": [secret, {secret: "value"}], "noise": noise}
        return "done"

    def validate(tool: ToolDefinition, args: Any, ctx: ToolExecutionContext) -> str | None:
        return f"rejected {secret}" if where == "validator" else None

    registry = create_tool_registry([ToolDefinition(name="echo", execute=body)])
    events: list[AgentEvent] = []
    ledger = InMemoryRunLedger()
    result = await dispatch_tool_call(
        ToolCall(id="c", name="echo", arguments=arguments),
        registry=registry,
        context=ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c"),
        validate=validate,
        secrets=[secret],
        emit=events.append,
        ledger=ledger,
    )
    assert events
    assert ledger.records
    for item in [result, *events, *ledger.records]:
        blob = dumps_lenient(item.to_dict()).decode()
        assert secret not in blob
        assert secret not in repr(item)
