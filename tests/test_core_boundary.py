"""Values crossing into the Rust core that run, or would run, Python code of their own.

Each test stands for a bug found at the boundary: an `int` or `str` subclass whose own methods
the core must not call, a garbage collection that changes a dict while the core iterates it,
a schema of shared dicts that must not be written out once per path, keys that repeat a text,
and text that is not Unicode in messages and options.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest

from prism_tools import (
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolSearchIndex,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools.errors import SchemaGuardError
from prism_tools.redaction import create_secret_redactor
from prism_tools.validation import (
    ArgumentIssue,
    check_schema,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
    create_tool_parameter_validator,
    format_issues,
)

AT_MOST_TEN = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 10}}}


async def dispatched(tool: ToolDefinition, arguments: Any) -> Any:
    """The result of one validated call of `tool`."""
    return await dispatch_tool_call(
        ToolCall("c1", tool.name, arguments),
        create_tool_registry([tool]),
        ToolExecutionContext("s", "r", "c1"),
        validate=create_json_schema_tool_argument_validator(),
    )


def recording_tool(ran: list[Any], parameters: dict[str, Any]) -> ToolDefinition:
    def execute(args: Any, ctx: Any) -> str:
        ran.append(args)
        return "ran"

    return ToolDefinition("t", execute, parameters=parameters)


class FinalizerBomb:
    """A cycle whose finalizer adds a key to `target`, run by the next garbage collection."""

    target: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        FinalizerBomb.target[f"added{id(self)}"] = {}


@contextmanager
def collections_armed(target: dict[str, Any], after: int) -> Iterator[None]:
    """Makes the `after`-th allocation of a tracked object from now start a collection that
    runs a `FinalizerBomb` changing `target`."""
    thresholds = gc.get_threshold()
    FinalizerBomb.target = target
    gc.collect()
    gc.disable()
    FinalizerBomb()
    gc.set_threshold(gc.get_count()[0] + after, 1_000_000, 1_000_000)
    gc.enable()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.collect()


# --- 1. wide ints in arguments are read by int's own conversion ------------------------------


class Lying(int):
    """An int subclass whose own ``__float__`` understates it."""

    calls = 0

    def __float__(self) -> float:
        Lying.calls += 1
        return 1.0


def test_a_wide_int_subclass_is_read_without_its_own_float() -> None:
    adapter = create_json_schema_adapter()
    Lying.calls = 0
    issues = adapter.validate(AT_MOST_TEN, {"n": Lying(10**30)})
    assert [(issue.path, issue.keyword) for issue in issues] == [("/n", "maximum")]
    assert Lying.calls == 0
    assert adapter.validate(AT_MOST_TEN, {"n": Lying(-(10**30))}) == []
    assert adapter.validate(AT_MOST_TEN, {"n": Lying(2**64 - 1)})[0].keyword == "maximum"


async def test_a_wide_int_subclass_cannot_pass_maximum_in_dispatch() -> None:
    ran: list[Any] = []
    result = await dispatched(recording_tool(ran, AT_MOST_TEN), {"n": Lying(10**30)})
    assert not result.ok
    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"
    assert ran == []


def test_a_wide_int_subclass_whose_float_changes_the_dict_is_not_run() -> None:
    arguments: dict[str, Any] = {"m": 1}

    class Changing(int):
        def __float__(self) -> float:
            arguments["added"] = 1
            return 1.0

    class InterruptingInt(int):
        def __float__(self) -> float:
            raise KeyboardInterrupt

    arguments["n"] = Changing(10**30)
    adapter = create_json_schema_adapter()
    assert [issue.keyword for issue in adapter.validate(AT_MOST_TEN, arguments)] == ["maximum"]
    assert "added" not in arguments
    issues = adapter.validate(AT_MOST_TEN, {"n": InterruptingInt(10**30)})
    assert [issue.keyword for issue in issues] == ["maximum"]


@pytest.mark.parametrize("after", [1, 2])
def test_a_collection_while_wide_int_arguments_are_read_does_not_panic(after: int) -> None:
    adapter = create_json_schema_adapter()
    schema = {"type": "object", "additionalProperties": {"minimum": 0}}
    arguments: dict[str, Any] = {f"p{i}": 2**70 + i for i in range(30)}
    arguments.update({f"q{i}": 2**63 + i for i in range(30)})
    with collections_armed(arguments, after):
        assert adapter.validate(schema, arguments) == []
    assert [i.keyword for i in adapter.validate(schema, {"p": -(2**70)})] == ["minimum"]


# --- 2. the redactor reads a str subclass by str's own encode ---------------------------------


class Hiding(str):
    """A str subclass whose own ``encode`` hides its text."""

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"nothing to see"


def test_a_str_subclass_cannot_hide_a_secret_with_its_own_encode() -> None:
    redactor = create_secret_redactor(["sk-live-SECRET"])
    text = Hiding("token=sk-live-SECRET \ud800")
    assert redactor.contains_secret(text)
    assert redactor.redact_text(text) == "token=[REDACTED] \ud800"
    assert redactor.redact({"k": text}) == {"k": "token=[REDACTED] \ud800"}
    by_subclass = create_secret_redactor([Hiding("pw\udc80X")])
    assert by_subclass.redact_text("the pw\udc80X here") == "the [REDACTED] here"


# --- 3. a schema of shared dicts is refused before it is written out --------------------------


def shared_chain(levels: int, leaf: Any) -> dict[str, Any]:
    """`levels` dicts, each naming the one below twice: tiny in memory, 2**levels paths."""
    node: dict[str, Any] = {"type": "object", "properties": {"a": leaf, "b": leaf}}
    for _ in range(levels - 1):
        node = {"type": "object", "properties": {"a": node, "b": node}}
    return node


def test_a_schema_of_shared_dicts_is_refused_at_the_byte_limit() -> None:
    with pytest.raises(SchemaGuardError) as error:
        check_schema(shared_chain(16, {"type": "string"}))
    assert error.value.reason == "schema_too_large"
    assert "at least" in str(error.value)
    assert "max_schema_bytes=262144" in str(error.value)
    huge = shared_chain(64, {"type": "string"})
    with pytest.raises(SchemaGuardError) as error:
        check_schema(huge, max_schema_bytes=4 * 1024 * 1024)
    assert error.value.reason == "schema_too_large"


class CountedMapping(Mapping[str, Any]):
    """A read-only mapping that counts how often the core lists its items."""

    listed = 0

    def __init__(self, items: dict[str, Any]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> Any:
        CountedMapping.listed += 1
        return self._items.items()


def test_a_schema_of_shared_dicts_stops_being_written_out_at_the_budget() -> None:
    CountedMapping.listed = 0
    schema = shared_chain(14, CountedMapping({"type": "string"}))
    with pytest.raises(SchemaGuardError) as error:
        check_schema(schema, max_schema_bytes=1000)
    assert error.value.reason == "schema_too_large"
    assert CountedMapping.listed < 200  # 2**14 paths lead to it


def test_shared_dicts_that_fit_the_byte_limit_pass() -> None:
    schema = shared_chain(6, {"type": "string"})
    size = len(json.dumps(schema, separators=(",", ":")).encode())
    check_schema(schema, max_schema_bytes=size)
    with pytest.raises(SchemaGuardError) as error:
        check_schema(schema, max_schema_bytes=size - 1)
    assert f"schema is {size} bytes" in str(error.value)


class SameText(str):
    """A str subclass key that never equals a plain str of the same text."""

    def __hash__(self) -> int:
        return 12345

    def __eq__(self, other: object) -> bool:
        return type(other) is SameText and str.__eq__(self, other)


def test_schema_values_repeated_keys_replace_do_not_count_toward_the_limit() -> None:
    def described() -> dict[str, Any]:
        return {"description": "x" * 60, SameText("description"): "s"}

    schema = {"properties": {name: described() for name in "abc"}}
    written = {"properties": {name: {"description": "s"} for name in "abc"}}
    size = len(json.dumps(written, separators=(",", ":")).encode())
    check_schema(schema, max_schema_bytes=size)
    with pytest.raises(SchemaGuardError) as error:
        check_schema(schema, max_schema_bytes=size - 1)
    assert f"schema is {size} bytes" in str(error.value)


# --- 4. wide ints in schemas are read over copies --------------------------------------------


@pytest.mark.parametrize("after", [1, 2])
def test_a_collection_while_a_schema_with_wide_ints_is_read_does_not_panic(after: int) -> None:
    properties = {f"p{i}": {"maximum": 2**70 + i} for i in range(60)}
    properties.update({f"q{i}": {"maximum": 2**63 + i} for i in range(10)})
    adapter = create_json_schema_adapter()
    with collections_armed(properties, after):
        adapter.check_schema({"properties": properties})
    issues = adapter.validate({"properties": properties}, {"p0": 2**71})
    assert [issue.keyword for issue in issues] == ["maximum"]


# --- 5. keys that repeat a text are not JSON -------------------------------------------------

NESTED = {
    "type": "object",
    "properties": {"o": {"type": "object", "properties": {"b": {"type": "integer"}}}},
}


@pytest.mark.parametrize(
    "inner",
    [
        {"b": "not an integer", SameText("b"): 1},
        {SameText("b"): 1, "b": "not an integer"},
        {"b": 1, SameText("b"): "not an integer"},
    ],
)
def test_keys_that_repeat_a_text_are_not_json(inner: dict[str, Any]) -> None:
    issues = create_json_schema_adapter().validate(NESTED, {"o": inner})
    assert [(issue.path, issue.keyword) for issue in issues] == [("", "json")]
    assert "/o" in issues[0].message


def test_a_str_subclass_key_alone_is_validated() -> None:
    adapter = create_json_schema_adapter()
    issues = adapter.validate(NESTED, {"o": {SameText("b"): "x"}})
    assert [(issue.path, issue.keyword) for issue in issues] == [("/o/b", "type")]
    assert adapter.validate(NESTED, {"o": {SameText("b"): 1, "c": "x"}}) == []


async def test_keys_that_repeat_a_text_do_not_reach_the_tool() -> None:
    ran: list[Any] = []
    arguments = {"o": {"b": "not an integer", SameText("b"): 1}}
    result = await dispatched(recording_tool(ran, NESTED), arguments)
    assert not result.ok
    assert ran == []


# --- 6. text that is not Unicode in messages and options --------------------------------------


def test_issue_texts_with_lone_surrogates_are_escaped_in_the_report() -> None:
    info = format_issues("t\ud800", [("/a\udc80", "type", "bad \udc80")])
    assert info.code == "invalid_tool_arguments"
    assert "t\\ud800" in info.message
    assert "bad \\udc80" in info.message
    assert info.details["issues"][0]["message"] == "bad \\udc80"
    assert info.details["issues"][0]["path"] == "/a\\udc80"


class QuotingAdapter:
    """An adapter whose issue message quotes the model's value."""

    def validate(self, schema: Any, value: Any) -> list[ArgumentIssue]:
        city = value.get("city")
        return [ArgumentIssue("/city", "type", f"{city!s} is not of type 'integer'")]


async def test_a_quoted_lone_surrogate_is_reported_not_raised() -> None:
    ran: list[Any] = []
    tool = recording_tool(ran, {"type": "object"})
    validate = create_tool_parameter_validator(QuotingAdapter())
    arguments = json.loads('{"city": "x\\ud800"}')
    info = validate(tool, arguments)
    assert info is not None
    assert "x\\ud800 is not of type" in info.message
    result = await dispatch_tool_call(
        ToolCall("c1", "t", arguments),
        create_tool_registry([tool]),
        ToolExecutionContext("s", "r", "c1"),
        validate=validate,
    )
    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"
    assert ran == []


def test_a_duplicate_policy_with_a_lone_surrogate_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="duplicate must be"):
        create_tool_registry(duplicate="x\ud800")  # type: ignore[arg-type]
    assert create_tool_registry(duplicate="error").duplicate == "error"


# --- 7. the search index compares names by text ------------------------------------------------


class Interrupting(str):
    def __eq__(self, other: object) -> bool:
        raise KeyboardInterrupt

    __hash__ = str.__hash__


class Exiting(str):
    def __eq__(self, other: object) -> bool:
        raise SystemExit(7)

    __hash__ = str.__hash__


def test_contains_compares_names_without_their_own_equality() -> None:
    index = ToolSearchIndex([ToolDefinition("alpha", description="first")])
    assert Interrupting("alpha") in index
    assert Exiting("alpha") in index
    assert Interrupting("beta") not in index
    indexed_by_subclass = ToolSearchIndex([Named(Exiting("alpha"))])
    assert "alpha" in indexed_by_subclass
    assert "beta" not in indexed_by_subclass


class Named:
    """A tool-like object: the index reads only ``name`` and ``description``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = "weather"


def test_contains_is_exact_for_names_with_lone_surrogates() -> None:
    index = ToolSearchIndex([Named("get\ud800"), Named("get\ufffd")])
    assert "get\ud800" in index
    assert Interrupting("get\ud800") in index
    assert "get\ud801" not in index
    assert "get\ufffd" in index
    assert "get" not in index
