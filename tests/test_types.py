from __future__ import annotations

import dataclasses
import json
import pickle
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from tests.support import (
    TOO_LONG_FOR_DECIMAL,
    BrokenToDict,
    Unprintable,
    odd_result,
    odd_result_as_stored,
    small_json,
)

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
from prism_tools._json import dumps_lenient, loads
from prism_tools.approval import PendingDecision, Suspension
from prism_tools.effects import ToolEffectRecord
from prism_tools.ledger import record_from_dict
from prism_tools.messages import message_from_dict
from prism_tools.types import ignore_progress, to_json, to_plain


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


def nested_lists(levels: int, innermost: object = None) -> object:
    """``levels`` lists, each holding the next; the innermost holds ``innermost`` (or nothing)."""
    value: object = [] if innermost is None else [innermost]
    for _ in range(levels - 1):
        value = [value]
    return value


def test_to_plain_cuts_nesting_past_what_json_can_be_written_with() -> None:
    # orjson writes 254 levels and no more: anything it can write comes through whole.
    assert to_plain(nested_lists(254)) == nested_lists(254)
    assert to_plain(nested_lists(255)) == nested_lists(254, "[MaxDepth]")
    assert to_plain({"k": nested_lists(400)}) == {"k": nested_lists(253, "[MaxDepth]")}
    # Python's own decoder takes about 990 levels: a tool can return this.
    deep = json.loads("[" * 600 + "]" * 600)
    assert to_plain(deep) == nested_lists(254, "[MaxDepth]")
    result = ToolResult("c", "fetch", deep)
    assert result.to_dict()["value"] == nested_lists(254, "[MaxDepth]")
    # Written leniently (as the ledgers write rows), it is cut where the lenient writer cuts.
    assert loads(to_json(result))["value"] == nested_lists(199, "[MaxDepth]")
    event = AgentEvent("tool_execution_finished", result=result, data={"extra": deep})
    assert event.to_dict()["extra"] == nested_lists(254, "[MaxDepth]")


def test_to_plain_marks_a_container_that_holds_itself() -> None:
    looped: dict[str, object] = {"a": 1}
    looped["self"] = looped
    assert to_plain(looped) == loads(dumps_lenient(looped)) == {"a": 1, "self": "[Circular]"}
    ring: list[object] = [1]
    ring.append(ring)
    assert to_plain(ring) == [1, "[Circular]"]
    # Two branches back to the top: marked at once, not walked 254 levels down each branch.
    forked: dict[str, object] = {}
    forked["left"] = forked["right"] = forked
    assert to_plain(forked) == {"left": "[Circular]", "right": "[Circular]"}
    # A value reached twice without a cycle is kept both times.
    shared = [1]
    assert to_plain([shared, shared, looped]) == [[1], [1], {"a": 1, "self": "[Circular]"}]
    record = ToolCallRecord(
        "r", "s", "u", "c", "n", looped, "finished", "t", result=ToolResult("c", "n", ring)
    )
    plain = record.to_dict()
    assert plain["arguments"] == {"a": 1, "self": "[Circular]"}
    assert plain["result"]["value"] == [1, "[Circular]"]


def test_to_plain_never_raises_on_a_cycle_through_to_dict() -> None:
    # Each to_dict starts a walk of its own, so neither depth nor cycles carry across it.
    holder: list[object] = []
    result = ToolResult("c", "n", holder)
    holder.append(result)
    assert b"[MaxDepth]" in to_json(result)
    assert "[MaxDepth]" in str(result.to_dict())


def test_values_that_cannot_be_printed_get_stand_ins_and_nothing_raises() -> None:
    secret = "sk-odd-1"
    value = odd_result(secret)
    assert loads(dumps_lenient(value)) == odd_result_as_stored()
    written = to_json(ToolResult("c", "n", value)).decode()
    assert loads(written)["value"] == odd_result_as_stored()
    assert secret not in written
    # Plain data: keys become text and a raising to_dict its stand-in; other values are kept
    # for the writer, which may have a better reading of them.
    plain = to_plain([value])
    assert isinstance(plain, list)
    assert plain[0]["[Unprintable Unprintable]"] == "keyed by an unprintable object"
    assert plain[0]["broken"] == "[Unprintable BrokenToDict]"
    assert plain[0]["big"] == TOO_LONG_FOR_DECIMAL
    assert isinstance(plain[0]["odd"], Unprintable)
    # The same on the walk that tracks cycles, which a branch too deep to write starts.
    guarded = to_plain(
        {"deep": nested_lists(300), "odd": {Unprintable(secret): BrokenToDict(secret)}}
    )
    assert isinstance(guarded, dict)
    assert guarded["odd"] == {"[Unprintable Unprintable]": "[Unprintable BrokenToDict]"}


def test_to_plain_keeps_its_conversions_past_the_depth_limit() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    value = {
        1: (1, 2),
        "set": frozenset({3}),
        "error": ErrorInfo("m", code="E"),
        "when": when,
        "deep": nested_lists(300),
    }
    plain = to_plain(value)
    assert plain == {
        "1": [1, 2],
        "set": [3],
        "error": {"message": "m", "code": "E"},
        "when": when,
        "deep": nested_lists(253, "[MaxDepth]"),
    }
    assert plain["when"] is when


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


def test_tool_definition_refuses_a_name_or_description_holding_a_lone_surrogate() -> None:
    # A JSON decoder makes a lone surrogate from a model's "\\ud800"; no UTF-8 request can carry it.
    with pytest.raises(ValueError, match=r"name 't\\ud800' holds a lone surrogate"):
        ToolDefinition(name="t\ud800")
    with pytest.raises(ValueError, match="description for 't' holds a lone surrogate"):
        ToolDefinition(name="t", description="forecast \udfff")
    # Python keeps these as two surrogates; only a JSON decoder would join them into one character.
    with pytest.raises(ValueError, match="lone surrogate"):
        ToolDefinition(name="t", description="\ud83d\ude00")
    tool = ToolDefinition(name="天气_météo", description="Prévisions 😀")
    assert (tool.name, tool.description) == ("天气_météo", "Prévisions 😀")


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


_STORED_READERS = {
    "ToolResult": ToolResult.from_dict,
    "ErrorInfo": ErrorInfo.from_dict,
    "message": message_from_dict,
    "ledger row": record_from_dict,
    "effect record": ToolEffectRecord.from_dict,
    "pending decision": PendingDecision.from_dict,
    "suspension": Suspension.from_dict,
}
# Stored objects of each kind name these fields; drawing them makes mappings that get past the
# first check of each reader.
_STORED_FIELDS = sorted(
    {
        *ToolCallRecord.__dataclass_fields__,
        *ToolEffectRecord.__dataclass_fields__,
        *Suspension.__dataclass_fields__,
        *PendingDecision.__dataclass_fields__,
        "message",
        "code",
        "details",
        "value",
        "content",
        "error",
        "role",
        "tool_calls",
    }
)


@given(
    st.sampled_from(sorted(_STORED_READERS)),
    st.one_of(
        small_json(),
        st.dictionaries(st.sampled_from(_STORED_FIELDS), small_json(max_leaves=4), max_size=20),
    ),
)
def test_every_reader_of_stored_data_refuses_what_it_cannot_read_with_a_value_error(
    reader: str, data: Any
) -> None:
    # Stored rows, records and session states can be changed outside the library; reading them
    # gives the object or a ValueError, never an error from inside the reader.
    try:
        _STORED_READERS[reader](data)
    except ValueError:
        event(f"{reader}: refused")
    else:
        event(f"{reader}: read")


class Proxy:
    """An object that claims another's class (``__class__``), as ``Mock(spec=...)``, lazy
    objects and wrapt proxies do, while being none of them."""

    def __init__(self, claimed: type) -> None:
        self.claimed = claimed

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return self.claimed

    def __str__(self) -> str:
        return f"proxy of {self.claimed.__name__}"


@pytest.mark.parametrize("claimed", [float, str, int, dict, list])
def test_the_json_writers_read_a_proxy_by_what_it_really_is(claimed: type) -> None:
    from prism_tools._json import json_ready

    proxy = Proxy(claimed)
    # Beside a wide integer and a lone surrogate, which send both writers down their own walk.
    value = {"odd": proxy, "wide": 2**70, "text": "x\ud800", proxy_key(claimed): 1}
    # Written as text (its str(), or the unprintable marker where it cannot be read as the
    # mapping it claims to be), never a TypeError from a built-in's slot called on it.
    shown = {f"proxy of {claimed.__name__}", "[Unprintable Proxy]"}
    lenient = loads(dumps_lenient(value))
    assert lenient["odd"] in shown
    ready = json_ready(value)
    assert ready["odd"] in shown
    assert ready["wide"] == 2**70
    assert ready["text"] == "x\ud800"


def proxy_key(claimed: type) -> Any:
    return Proxy(claimed) if claimed is str else "plain"


def test_the_json_writers_copy_a_container_before_walking_it() -> None:
    from prism_tools._json import json_ready

    class Stubborn(list[Any]):
        def __iter__(self) -> Any:
            raise RuntimeError("iterated")

    parent: dict[str, Any] = {}

    class Grows:
        def to_dict(self) -> Any:
            parent["grown"] = 1  # changes the dict being walked
            return {"ok": True}

    parent.update({"items": Stubborn([1, 2]), "grows": Grows(), "wide": 2**70, "s": "\ud800"})
    ready = json_ready(parent)
    assert ready["items"] == [1, 2]
    assert ready["grows"] == {"ok": True}
    assert loads(dumps_lenient(parent))["items"] == [1, 2]
