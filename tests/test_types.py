from __future__ import annotations

import dataclasses
import pickle

import pytest

from prism_tools import (
    AgentEvent,
    ErrorInfo,
    ToolCall,
    ToolCallRecord,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)
from prism_tools._frozen import builder, twin
from prism_tools._json import loads
from prism_tools.types import ignore_progress, to_json


def test_value_types_are_frozen() -> None:
    result = ToolResult(tool_call_id="c", name="n", value=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.value = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ErrorInfo(message="m").code = "x"  # type: ignore[misc]
    # CPython 3.11's frozen slotted dataclasses refuse unknown names with TypeError, later
    # versions with AttributeError; either way the write does not happen.
    with pytest.raises((AttributeError, TypeError)):
        result.extra = 1  # type: ignore[attr-defined]
    assert not hasattr(result, "extra")


def test_fast_constructor_keeps_dataclass_behaviour() -> None:
    result = ToolResult("c", "n", value={"a": 1}, metadata={"m": True})
    assert result == ToolResult(tool_call_id="c", name="n", value={"a": 1}, metadata={"m": True})
    assert type(result) is ToolResult
    assert dataclasses.replace(result, value=2).value == 2
    assert result.value == {"a": 1}
    assert [field.name for field in dataclasses.fields(result)] == [
        "tool_call_id",
        "name",
        "value",
        "content",
        "error",
        "metadata",
    ]
    assert hash(ErrorInfo("m", code=1)) == hash(ErrorInfo("m", code=1))
    assert repr(ErrorInfo("m")) == "ErrorInfo(message='m', code=None, name=None, details=None)"
    with pytest.raises(TypeError):
        ToolResult("only one")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ToolResult("c", "n", bogus=1)  # type: ignore[call-arg]
    assert pickle.loads(pickle.dumps(ErrorInfo("m", code="x"))) == ErrorInfo("m", code="x")


def test_an_instance_built_through_the_twin_is_a_plain_frozen_instance() -> None:
    made = twin(ToolResult)()
    made.tool_call_id, made.name, made.value = "c", "n", {"a": 1}
    made.content = made.error = made.metadata = None
    made.__class__ = ToolResult
    assert type(made) is ToolResult
    assert made == ToolResult("c", "n", {"a": 1})
    assert hash(ToolResult("c", "n", 1)) == hash(builder(ToolResult)("c", "n", 1, None, None, None))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.value = 2  # type: ignore[misc]
    # The twin only adds mutability: no slots of its own, the class's fields, and instances of
    # the class itself are never left as twins.
    mutable = twin(ToolCallRecord)
    assert mutable.__slots__ == ()
    assert mutable.__mro__[1] is ToolCallRecord
    assert pickle.loads(pickle.dumps(made)) == made
    assert type(ToolCallRecord("r", "s", "run", "c", "n", {}, "started", "t")) is ToolCallRecord


def test_to_dict_omits_unset_fields_and_nests() -> None:
    result = ToolResult("c", "n", error=ErrorInfo("bad", code="E1"))
    assert result.to_dict() == {
        "tool_call_id": "c",
        "name": "n",
        "error": {"message": "bad", "code": "E1"},
    }
    event = AgentEvent(type="custom", session_id="s", data={"turn": 2, "dropped": ["x"]})
    assert event.to_dict() == {"type": "custom", "session_id": "s", "turn": 2, "dropped": ["x"]}


def test_to_json_handles_records_and_odd_values() -> None:
    record = ToolCallRecord(
        id="r",
        session_id="s",
        run_id="u",
        tool_call_id="c",
        name="n",
        arguments={1: "non-string key", "big": 2**70},
        status="blocked",
        started_at="2026-01-01T00:00:00.000Z",
        result=ToolResult("c", "n", error=ErrorInfo("no")),
        reason="unknown_tool",
    )
    decoded = loads(to_json(record))
    assert decoded["status"] == "blocked"
    assert decoded["result"]["error"]["message"] == "no"
    assert decoded["arguments"] == {"1": "non-string key", "big": str(2**70)}


def test_tool_definition_checks_its_fields() -> None:
    with pytest.raises(TypeError, match="callable"):
        ToolDefinition(name="t", execute="not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="mapping"):
        ToolDefinition(name="t", parameters=[])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        ToolDefinition(name="t", kind="launch")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="description"):
        ToolDefinition(name="t", description=None)  # type: ignore[arg-type]
    described = ToolDefinition(
        name="t", description="d", parameters={"type": "object"}, kind="read"
    )
    assert described.to_dict() == {
        "name": "t",
        "description": "d",
        "parameters": {"type": "object"},
        "exclusive": False,
        "kind": "read",
    }


def test_tool_definitions_compare_by_identity() -> None:
    one, two = ToolDefinition(name="t"), ToolDefinition(name="t")
    assert one != two
    assert len({one, two}) == 2


async def test_default_progress_accepts_reports() -> None:
    context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c")
    assert context.progress is ignore_progress
    assert await context.progress(0.5, {"k": "v"}) is None


def test_tool_call_to_dict() -> None:
    call = ToolCall(
        "c", "n", {"a": 1}, arguments_error=ErrorInfo("bad json", code="invalid_json_arguments")
    )
    assert call.to_dict() == {
        "id": "c",
        "name": "n",
        "arguments": {"a": 1},
        "arguments_error": {"message": "bad json", "code": "invalid_json_arguments"},
    }
