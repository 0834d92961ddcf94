"""JSON Schema validation of tool arguments (issue 3): adapters, guards, parsing, dispatch."""

from __future__ import annotations

import gc
import json
import select
import socket
import sys
import threading
import types
from collections.abc import ItemsView, Iterator, Mapping
from typing import Any

import pytest

from prism_tools import (
    ArgumentIssue,
    ArgumentsError,
    ErrorInfo,
    InMemoryRunLedger,
    JsonSchemaAdapter,
    PrismError,
    SchemaGuardError,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolParameterValidator,
    ToolResult,
    check_schema,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
    create_tool_parameter_validator,
    create_tool_registry,
    dispatch_tool_call,
    parse_tool_arguments,
)
from prism_tools._core import SchemaValidator
from prism_tools.validation import LIMITS, CacheInfo

DRAFT_7 = "http://json-schema.org/draft-07/schema#"
DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"

DEFAULTS = {
    "max_schema_bytes": 262_144,
    "max_schema_depth": 64,
    "max_schema_keywords": 10_000,
    "max_refs": 128,
    "max_compiled_schemas": 256,
    "max_argument_bytes": 1_048_576,
    "max_argument_depth": 64,
}
CEILINGS = {
    "max_schema_bytes": 4 * 1024 * 1024,
    "max_schema_depth": 256,
    "max_schema_keywords": 100_000,
    "max_refs": 1024,
    "max_compiled_schemas": 65_536,
    "max_argument_bytes": 64 * 1024 * 1024,
    "max_argument_depth": 256,
}

# Looks like a live API key; it must never come back in a message a model sees.
SECRET = "sk-live-7Hq2Zp9Lw4Xc8Vb1Nm6Ks3Jd5Fg0Rt2Yu"

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "units": {"enum": ["c", "f"]},
    },
    "required": ["city"],
    "additionalProperties": False,
}


class Spy:
    """A tool body that records every call it receives."""

    def __init__(self, value: Any = "ok") -> None:
        self.calls: list[dict[str, Any]] = []
        self.value = value

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.calls.append(args)
        return self.value


def context(call_id: str = "call_1") -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=call_id)


async def run(
    arguments: Any,
    *,
    parameters: Any = None,
    validate: Any = None,
    name: str = "weather",
    **options: Any,
) -> tuple[ToolResult, Spy, InMemoryRunLedger]:
    spy = Spy()
    registry = create_tool_registry([ToolDefinition(name=name, execute=spy, parameters=parameters)])
    ledger = InMemoryRunLedger()
    result = await dispatch_tool_call(
        ToolCall(id="call_1", name=name, arguments=arguments),
        registry=registry,
        context=context(),
        validate=validate,
        ledger=ledger,
        **options,
    )
    return result, spy, ledger


def blocked_reason(result: ToolResult) -> str | None:
    assert result.metadata is not None
    reason = result.metadata["blocked_reason"]
    assert isinstance(reason, str)
    return reason


def guard_error(schema: Any, **limits: int) -> SchemaGuardError:
    with pytest.raises(SchemaGuardError) as caught:
        check_schema(schema, **limits)
    return caught.value


def nested_lists(depth: int) -> list[Any]:
    """``depth`` nested lists, built without recursion."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


# --- create_json_schema_adapter: limits -------------------------------------------------------


def test_limit_table_matches_the_design() -> None:
    assert {name: pair[0] for name, pair in LIMITS.items()} == DEFAULTS
    assert {name: pair[1] for name, pair in LIMITS.items()} == CEILINGS


def test_adapter_defaults() -> None:
    adapter = create_json_schema_adapter()
    assert isinstance(adapter, JsonSchemaAdapter)
    assert adapter.limits == DEFAULTS
    assert adapter.cache_info() == CacheInfo(hits=0, misses=0, maxsize=256, currsize=0)


@pytest.mark.parametrize("name", sorted(CEILINGS))
def test_every_limit_accepts_one_and_its_ceiling(name: str) -> None:
    assert create_json_schema_adapter(**{name: 1}).limits[name] == 1
    assert create_json_schema_adapter(**{name: CEILINGS[name]}).limits[name] == CEILINGS[name]


@pytest.mark.parametrize("name", sorted(CEILINGS))
@pytest.mark.parametrize("kind", ["zero", "negative", "above_ceiling", "far_above"])
def test_every_limit_refuses_out_of_range_values(name: str, kind: str) -> None:
    value = {
        "zero": 0,
        "negative": -1,
        "above_ceiling": CEILINGS[name] + 1,
        "far_above": 2**70,
    }[kind]
    with pytest.raises(ValueError, match=name):
        create_json_schema_adapter(**{name: value})
    with pytest.raises(ValueError, match=name):
        create_json_schema_tool_argument_validator(**{name: value})
    with pytest.raises(ValueError, match=name):
        check_schema({}, **{name: value})


def test_unknown_limit_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="max_nothing"):
        create_json_schema_adapter(max_nothing=1)
    with pytest.raises(TypeError):
        create_json_schema_tool_argument_validator(max_schema_byte=1)
    with pytest.raises(TypeError):
        check_schema({}, depth=3)


@pytest.mark.parametrize("value", ["10", 10.0, True, False, None, [10]])
def test_non_integer_limit_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="max_refs"):
        create_json_schema_adapter(max_refs=value)


@pytest.mark.parametrize(
    ("max_bytes", "max_depth"), [(0, 64), (-5, 64), (CEILINGS["max_argument_bytes"] + 1, 64)]
)
def test_parse_tool_arguments_checks_its_limits(max_bytes: int, max_depth: int) -> None:
    with pytest.raises(ValueError, match="max_argument_bytes"):
        parse_tool_arguments("{}", max_bytes=max_bytes, max_depth=max_depth)
    with pytest.raises(ValueError, match="max_argument_depth"):
        parse_tool_arguments("{}", max_depth=257)


# --- validate(): issues and drafts -------------------------------------------------------------


def test_validate_returns_an_empty_list_for_valid_values() -> None:
    adapter = create_json_schema_adapter()
    assert adapter.validate(WEATHER, {"city": "Paris"}) == []
    assert adapter.validate(WEATHER, {"city": "Oslo", "days": 3, "units": "c"}) == []
    assert adapter.is_valid(WEATHER, {"city": "Oslo"})


def test_validate_returns_argument_issues() -> None:
    adapter = create_json_schema_adapter()
    issues = adapter.validate(WEATHER, {"days": "three", "units": "kelvin"})
    assert all(isinstance(issue, ArgumentIssue) for issue in issues)
    found = {(issue.path, issue.keyword) for issue in issues}
    assert found == {("", "required"), ("/days", "type"), ("/units", "enum")}
    required = next(issue for issue in issues if issue.keyword == "required")
    assert "city" in required.message
    assert required.to_dict() == {"path": "", "keyword": "required", "message": required.message}
    assert not adapter.is_valid(WEATHER, {"days": 2})


def test_issue_paths_are_json_pointers() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a/b": {"type": "array", "items": {"type": "object", "properties": {"x~y": {}}}},
        },
        "additionalProperties": {"type": "integer"},
    }
    schema["properties"]["a/b"]["items"]["properties"]["x~y"] = {"type": "string"}
    adapter = create_json_schema_adapter()
    issues = adapter.validate(schema, {"a/b": [{"x~y": "ok"}, {"x~y": 5}], "extra": "no"})
    assert {issue.path for issue in issues} == {"/a~1b/1/x~0y", "/extra"}


def test_boolean_schemas() -> None:
    adapter = create_json_schema_adapter()
    assert adapter.validate(True, {"anything": [1, 2]}) == []
    issues = adapter.validate(False, {})
    assert len(issues) == 1
    assert issues[0].path == ""


def test_default_draft_is_2020_12() -> None:
    adapter = create_json_schema_adapter()
    tuple_2020 = {"prefixItems": [{"type": "string"}], "items": False}
    assert adapter.is_valid(tuple_2020, ["a"])
    assert not adapter.is_valid(tuple_2020, [1])
    assert not adapter.is_valid(tuple_2020, ["a", "b"])
    # Under 2020-12 `items` must be one schema: an array there is refused as an invalid schema.
    error = guard_error({"items": [{"type": "string"}]})
    assert error.reason == "schema_invalid"
    # An explicit 2020-12 `$schema` means the same.
    assert not adapter.is_valid({"$schema": DRAFT_2020, **tuple_2020}, [1])


def test_draft_7_items_array_is_tuple_validation() -> None:
    adapter = create_json_schema_adapter()
    schema = {"$schema": DRAFT_7, "items": [{"type": "string"}, {"type": "integer"}]}
    assert adapter.is_valid(schema, ["a", 1])
    assert adapter.is_valid(schema, ["a", 1, None])
    issues = adapter.validate(schema, [1, "a"])
    assert {issue.path for issue in issues} == {"/0", "/1"}
    closed = {**schema, "additionalItems": False}
    assert not adapter.is_valid(closed, ["a", 1, None])
    # prefixItems does not exist in draft 7: it is ignored there.
    assert adapter.is_valid({"$schema": DRAFT_7, "prefixItems": [{"type": "string"}]}, [1])


def test_draft_7_dependencies() -> None:
    adapter = create_json_schema_adapter()
    names = {"$schema": DRAFT_7, "dependencies": {"card": ["billing"]}}
    assert adapter.is_valid(names, {"card": 1, "billing": 2})
    assert not adapter.is_valid(names, {"card": 1})
    assert adapter.is_valid(names, {"billing": 2})
    schemas = {"$schema": DRAFT_7, "dependencies": {"card": {"required": ["cvv"]}}}
    assert not adapter.is_valid(schemas, {"card": 1})
    assert adapter.is_valid(schemas, {"card": 1, "cvv": 2})


def test_draft_7_ignores_siblings_of_ref_and_2020_12_does_not() -> None:
    adapter = create_json_schema_adapter()
    body = {
        "definitions": {"s": {"type": "string"}},
        "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 2}},
    }
    assert adapter.is_valid({"$schema": DRAFT_7, **body}, {"a": "abcdef"})
    assert not adapter.is_valid(body, {"a": "abcdef"})
    assert not adapter.is_valid({"$schema": DRAFT_7, **body}, {"a": 5})


def test_draft_2019_09_is_honoured() -> None:
    adapter = create_json_schema_adapter()
    schema = {"$schema": DRAFT_2019, "items": [{"type": "string"}]}
    assert not adapter.is_valid(schema, [1])
    assert adapter.is_valid(schema, ["a", 2])
    dependent = {"$schema": DRAFT_2019, "dependentRequired": {"a": ["b"]}}
    assert not adapter.is_valid(dependent, {"a": 1})


@pytest.mark.parametrize(
    "declared",
    [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "https://example.com/my-meta-schema",
        "",
        5,
        None,
    ],
)
def test_unknown_schema_dialect_is_refused(declared: Any) -> None:
    error = guard_error({"$schema": declared, "type": "string"})
    # The reason names the refusal (an unsupported draft, or a malformed $schema); it is never
    # mistaken for a reference or size guard.
    assert error.reason in {"schema_unsupported_draft", "schema_invalid"}
    assert "$schema" in str(error)
    with pytest.raises(SchemaGuardError):
        create_json_schema_adapter().validate({"$schema": declared}, "x")


# --- check_schema: the guards -----------------------------------------------------------------


def test_schema_guard_error_shape() -> None:
    error = guard_error({"$ref": "https://example.com/schema.json"})
    assert isinstance(error, PrismError)
    assert error.code == "ERR_PRISM_SCHEMA_GUARD"
    assert error.reason == "schema_ref_not_allowed"
    message = str(error)
    assert "https://example.com/schema.json" in message
    assert "/$ref" in message
    assert "not local" in message
    assert len(message) < 300


def test_check_schema_returns_none_for_good_schemas() -> None:
    assert check_schema(WEATHER) is None
    assert check_schema(True) is None
    assert check_schema({}) is None


@pytest.mark.parametrize(
    "reference",
    [
        "http://127.0.0.1:1/x",
        "https://example.com/schema.json",
        "https://example.com/schema.json#/$defs/a",
        "file:///etc/passwd",
        "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
        "other.json",
        "other.json#/definitions/a",
        "./../schemas/a.json",
        "//example.com/a",
        "",
    ],
)
@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
def test_non_local_references_are_refused(reference: str, keyword: str) -> None:
    schema = {"type": "object", "properties": {"a": {"items": {keyword: reference}}}}
    error = guard_error(schema)
    assert error.reason == "schema_ref_not_allowed"
    assert f"/properties/a/items/{keyword}" in str(error)
    assert "not local" in str(error)


def test_non_local_references_are_refused_in_every_subschema_position() -> None:
    remote = {"$ref": "https://example.com/x"}
    for schema in [
        {"$defs": {"a": remote}},
        {"definitions": {"a": remote}},
        {"allOf": [{}, remote]},
        {"anyOf": [remote]},
        {"oneOf": [remote]},
        {"not": remote},
        {"if": remote, "then": {}},
        {"then": remote},
        {"else": remote},
        {"prefixItems": [remote]},
        {"contains": remote},
        {"additionalProperties": remote},
        {"patternProperties": {"^a": remote}},
        {"dependentSchemas": {"a": remote}},
        {"propertyNames": remote},
        {"unevaluatedProperties": remote},
        {"unevaluatedItems": remote},
        {"$schema": DRAFT_7, "dependencies": {"a": remote}},
        {"$schema": DRAFT_7, "additionalItems": remote},
    ]:
        assert guard_error(schema).reason == "schema_ref_not_allowed", schema


def test_ref_shaped_data_outside_schema_positions_is_not_a_reference() -> None:
    # A property called "$ref" and a "$ref" inside enum/const data are values, not references.
    check_schema({"properties": {"$ref": {"type": "string"}}})
    check_schema({"enum": [{"$ref": "https://example.com/x"}]})
    check_schema({"const": {"$dynamicRef": "file:///etc/passwd"}})
    adapter = create_json_schema_adapter()
    assert adapter.is_valid(
        {"enum": [{"$ref": "https://example.com/x"}]}, {"$ref": "https://example.com/x"}
    )


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    try:
        yield server, server.getsockname()[1]
    finally:
        server.close()


def assert_no_connection(server: socket.socket) -> None:
    readable, _, _ = select.select([server], [], [], 0.3)
    assert readable == [], "a schema made the harness connect to the network"


def test_remote_references_never_touch_the_network(listener: tuple[socket.socket, int]) -> None:
    server, port = listener
    base = f"http://127.0.0.1:{port}"
    refused_by_guard = [
        {"$ref": f"{base}/schema.json"},
        {"properties": {"a": {"$ref": f"{base}/a.json#/x"}}},
        {"$dynamicRef": f"{base}/meta#node"},
        {"$defs": {"a": {"$ref": f"{base}/defs.json"}}, "$ref": "#/$defs/a"},
        {"$id": f"{base}/root.json", "$ref": f"{base}/root.json"},
        {"$schema": DRAFT_7, "definitions": {"a": {"$ref": f"{base}/d7.json"}}},
    ]
    adapter = create_json_schema_adapter()
    validator = create_tool_parameter_validator(adapter)
    for schema in refused_by_guard:
        assert guard_error(schema).reason == "schema_ref_not_allowed"
        with pytest.raises(SchemaGuardError):
            adapter.validate(schema, {})
        outcome = validator(ToolDefinition(name="t", parameters=schema), {})
        assert isinstance(outcome, ErrorInfo)
        with pytest.raises(SchemaGuardError):
            create_tool_registry([ToolDefinition(name="t", parameters=schema)], check_schemas=True)
    # A local reference that misses, in a document whose base URI is the listener: the crate
    # would have to look the base up; its retriever refuses instead of fetching.
    missing = {"$id": f"{base}/root.json", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    assert guard_error(missing).reason == "schema_invalid"
    embedded = {"properties": {"a": {"$id": f"{base}/sub.json", "$ref": "#/nope"}}}
    assert guard_error(embedded).reason == "schema_invalid"
    # A metaschema URI at the listener is refused as an unknown dialect, not fetched.
    assert guard_error({"$schema": f"{base}/meta"}).reason in {
        "schema_unsupported_draft",
        "schema_invalid",
    }
    assert_no_connection(server)


@pytest.mark.parametrize(
    "reference", ["file:///etc/passwd", "file:///etc/hostname", "file:../../secrets.json"]
)
def test_file_references_are_refused_by_the_guard_before_compiling(reference: str) -> None:
    # The reason is the guard's own, not a compile error from a failed lookup: the reference
    # was refused before any resolver could see it.
    for schema in ({"$ref": reference}, {"$defs": {"a": {"$dynamicRef": reference}}}):
        error = guard_error(schema)
        assert error.reason == "schema_ref_not_allowed"
        assert "not local" in str(error)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$ref": "#", "title": "self", "description": "only an alias"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {
            "$defs": {
                "a": {"$ref": "#/$defs/b"},
                "b": {"$ref": "#/$defs/c"},
                "c": {"$ref": "#/$defs/a"},
            }
        },
        {"$defs": {"a": {"$anchor": "A", "$ref": "#B"}, "b": {"$anchor": "B", "$ref": "#A"}}},
        {"$defs": {"a/b": {"$ref": "#/$defs/a~1b"}}},
        {"$defs": {"a": {"$ref": "#/%24defs/a"}}},
        {"properties": {"x": {"$ref": "#/properties/x"}}},
        {"$schema": DRAFT_7, "definitions": {"a": {"$ref": "#/definitions/a"}}},
    ],
)
def test_alias_reference_cycles_are_refused(schema: dict[str, Any]) -> None:
    error = guard_error(schema)
    assert error.reason == "schema_ref_cycle"
    assert "cycle" in str(error)


@pytest.mark.parametrize(
    "schema",
    [
        # `$id` only names the resource; "#" still points at this very schema.
        {"$id": "https://example.com/root.json", "$ref": "#"},
        # `readOnly` is an annotation like `title`: the pair still only alias each other.
        {
            "$defs": {"a": {"$ref": "#/$defs/b", "readOnly": True}, "b": {"$ref": "#/$defs/a"}},
            "$ref": "#/$defs/a",
        },
    ],
)
def test_alias_cycles_decorated_with_identifiers_or_annotations_are_refused(
    schema: dict[str, Any],
) -> None:
    error = guard_error(schema)
    assert error.reason == "schema_ref_cycle"


def test_recursion_through_subschemas_is_not_an_alias_cycle() -> None:
    check_schema(
        {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer"}}}
    )
    check_schema({"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#"}}]})


@pytest.mark.parametrize("key", ["__proto__", "constructor", "prototype"])
@pytest.mark.parametrize(
    "where",
    ["root", "property_name", "nested_schema", "enum_value", "default_value", "defs_name"],
)
def test_forbidden_keys_are_refused_anywhere(key: str, where: str) -> None:
    schema, path = {
        "root": ({key: {}}, f"/{key}"),
        "property_name": ({"properties": {key: {"type": "string"}}}, f"/properties/{key}"),
        "nested_schema": ({"items": {"not": {key: 1}}}, f"/items/not/{key}"),
        "enum_value": ({"enum": [1, {"a": {key: 1}}]}, f"/enum/1/a/{key}"),
        "default_value": ({"default": [{key: None}]}, f"/default/0/{key}"),
        "defs_name": ({"$defs": {key: {}}}, f"/$defs/{key}"),
    }[where]
    error = guard_error(schema)
    assert error.reason == "schema_forbidden_key"
    assert key in str(error)
    assert path in str(error)
    # A JSON text schema is checked the same way.
    assert guard_error(json.dumps(schema)).reason == "schema_forbidden_key"


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_in_a_schema_are_refused(number: float) -> None:
    for schema, path in [
        ({"minimum": number}, "/minimum"),
        ({"properties": {"a": {"maximum": number}}}, "/properties/a/maximum"),
        ({"enum": [1, [2, number]]}, "/enum/1/1"),
        ({"default": {"x": number}}, "/default/x"),
    ]:
        error = guard_error(schema)
        assert error.reason == "schema_non_finite_number"
        assert path in str(error)


@pytest.mark.parametrize(
    "text", ['{"minimum": NaN}', '{"minimum": Infinity}', '{"maximum": 1e400}']
)
def test_non_finite_numbers_in_schema_text_are_refused(text: str) -> None:
    assert guard_error(text).reason == "schema_invalid"


@pytest.mark.parametrize(
    "schema",
    [
        {"enum": {1, 2}},
        {1: {"type": "string"}},
        {"properties": {"a": object()}},
        {"default": b"bytes"},
        [{"type": "string"}],
        "[1, 2]",
        '"a string"',
        42,
        None,
    ],
)
def test_schemas_that_are_not_json_objects_or_booleans_are_refused(schema: Any) -> None:
    error = guard_error(schema)
    assert error.reason == "schema_invalid"


def test_invalid_schema_keywords_are_refused_at_compile() -> None:
    for schema in [
        {"type": "nothing"},
        {"minLength": -1},
        {"pattern": "("},
        {"required": "city"},
        {"$ref": "#/$defs/missing"},
    ]:
        assert guard_error(schema).reason == "schema_invalid", schema


def test_recursive_schemas_are_accepted_and_validate() -> None:
    tree = {
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
        "required": ["value"],
    }
    check_schema(tree)
    adapter = create_json_schema_adapter()
    node: dict[str, Any] = {"value": 0}
    for level in range(1, 20):
        node = {"value": level, "children": [node]}
    assert adapter.is_valid(tree, node)
    node["children"][0]["children"][0]["value"] = "bad"
    issues = adapter.validate(tree, node)
    assert [issue.path for issue in issues] == ["/children/0/children/0/value"]

    linked = {
        "$defs": {"item": {"type": "object", "properties": {"next": {"$ref": "#/$defs/item"}}}},
        "$ref": "#/$defs/item",
    }
    check_schema(linked)
    assert adapter.is_valid(linked, {"next": {"next": {"next": {}}}})
    assert not adapter.is_valid(linked, {"next": {"next": 3}})


@pytest.mark.parametrize("depth", [65, 300, 100_000])
def test_deep_instances_of_recursive_schemas_are_bounded(depth: int) -> None:
    adapter = create_json_schema_adapter()
    schema = RECURSIVE_LISTS
    issues = adapter.validate(schema, nested_lists(depth))
    assert len(issues) == 1
    assert issues[0].keyword == "max_argument_depth"
    assert "max_argument_depth=64" in issues[0].message
    assert adapter.validate(schema, nested_lists(64)) == []


RECURSIVE_LISTS = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}


def test_argument_depth_limit_is_per_adapter() -> None:
    adapter = create_json_schema_adapter(max_argument_depth=3)
    assert adapter.validate(RECURSIVE_LISTS, [[[]]]) == []
    issues = adapter.validate(RECURSIVE_LISTS, [[[[]]]])
    assert [issue.keyword for issue in issues] == ["max_argument_depth"]
    assert "max_argument_depth=3" in issues[0].message


def test_schemas_given_as_json_text() -> None:
    adapter = create_json_schema_adapter()
    text = json.dumps(WEATHER)
    check_schema(text)
    check_schema(text.encode())
    assert adapter.is_valid(text, {"city": "Rome"})
    assert not adapter.is_valid(text.encode(), {"city": 1})
    assert adapter.is_valid("true", 1)
    assert not adapter.is_valid(b"false", 1)
    assert guard_error("{not json").reason == "schema_invalid"
    assert guard_error(b'{"$ref": "https://example.com/x"}').reason == "schema_ref_not_allowed"


@pytest.mark.parametrize("text", ["[" * 100_000, "{" * 100_000, '{"a":' * 50_000])
def test_a_100000_deep_schema_text_is_refused_cleanly(text: str) -> None:
    error = guard_error(text)
    assert error.reason == "schema_too_deep"
    assert "max_schema_depth=64" in str(error)
    # Raising the depth limit to its ceiling still refuses it.
    error = guard_error(text.encode(), max_schema_depth=256)
    assert error.reason == "schema_too_deep"


def test_a_deep_schema_dict_is_refused_cleanly() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"not": schema}
    error = guard_error(schema)
    assert error.reason == "schema_too_deep"
    assert "max_schema_depth=64" in str(error)


def test_size_keyword_and_ref_guards_name_their_limit() -> None:
    big = {"description": "x" * 300_000}
    error = guard_error(big)
    assert error.reason == "schema_too_large"
    assert "max_schema_bytes=262144" in str(error)

    many = {"properties": {f"p{index}": {} for index in range(10_001)}}
    error = guard_error(many)
    assert error.reason == "schema_too_many_keywords"
    assert "max_schema_keywords=10000" in str(error)

    refs = {
        "$defs": {"s": {"type": "string"}},
        "properties": {f"p{index}": {"$ref": "#/$defs/s"} for index in range(129)},
    }
    error = guard_error(refs)
    assert error.reason == "schema_too_many_refs"
    assert "max_refs=128" in str(error)

    deep: dict[str, Any] = {}
    for _ in range(70):
        deep = {"items": deep}
    error = guard_error(deep)
    assert error.reason == "schema_too_deep"
    assert "max_schema_depth=64" in str(error)


def test_schema_depth_error_says_where() -> None:
    # The other path-bearing guards name a JSON Pointer; a schema dict that nests too deep
    # should too, not a placeholder.
    deep: dict[str, Any] = {}
    for _ in range(70):
        deep = {"items": deep}
    error = guard_error({"properties": {"tree": deep}})
    assert error.reason == "schema_too_deep"
    assert "/properties/tree/items/items" in str(error)


def test_check_schema_limits_are_keyword_arguments() -> None:
    schema = {
        "$defs": {"s": {}},
        "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}},
    }
    check_schema(schema)
    assert guard_error(schema, max_refs=1).reason == "schema_too_many_refs"
    check_schema(schema, max_refs=2)


# --- regular expressions ----------------------------------------------------------------------


@pytest.mark.timeout(10)
def test_catastrophic_pattern_finishes() -> None:
    adapter = create_json_schema_adapter()
    schema = {"type": "string", "pattern": "^(a+)+$"}
    issues = adapter.validate(schema, "a" * 50_000 + "!")
    assert [issue.keyword for issue in issues] == ["pattern"]
    assert adapter.is_valid(schema, "a" * 50_000)


@pytest.mark.timeout(10)
def test_catastrophic_pattern_properties_finish() -> None:
    adapter = create_json_schema_adapter()
    schema = {
        "type": "object",
        "patternProperties": {"^(a|aa)+$": {"type": "integer"}, "^(x+x+)+y$": {"type": "string"}},
    }
    hostile = {"a" * 30_000 + "!": "not checked", "x" * 30_000: 1, "aaaa": "wrong"}
    issues = adapter.validate(schema, hostile)
    assert [issue.path for issue in issues] == ["/aaaa"]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("pattern", ["(a{1000}){1000}", "^x+(b{2000}){800}$"])
def test_a_pattern_past_the_regex_size_limits_is_refused_when_compiled(pattern: str) -> None:
    for schema in (
        {"type": "string", "pattern": pattern},
        {"type": "object", "patternProperties": {pattern: {}}},
    ):
        assert guard_error(schema).reason == "schema_invalid"


def test_patterns_shared_between_schemas_keep_their_own_meaning() -> None:
    adapter = create_json_schema_adapter()
    date = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
    again = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "maxLength": 10}
    other = {"type": "string", "pattern": "^[a-z]+$"}
    assert adapter.is_valid(date, "2024-05-01")
    assert adapter.is_valid(again, "2024-05-01")
    assert not adapter.is_valid(again, "2024-05-1x")
    assert adapter.is_valid(other, "abc")
    assert not adapter.is_valid(other, "2024-05-01")


# --- parse_tool_arguments ---------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", b"", "   ", " \n\t\r ", b"\n"])
def test_empty_or_blank_argument_text_is_an_empty_object(text: str | bytes) -> None:
    assert parse_tool_arguments(text) == {}


def test_parse_tool_arguments_str_and_bytes() -> None:
    text = '{"city": "Z\\u00fcrich", "days": 3, "tags": ["a", null, true], "nested": {"x": 1.5}}'
    expected = {"city": "Zürich", "days": 3, "tags": ["a", None, True], "nested": {"x": 1.5}}
    assert parse_tool_arguments(text) == expected
    assert parse_tool_arguments(text.encode()) == expected
    assert parse_tool_arguments(f"  {text}\n") == expected


def test_parse_tool_arguments_unicode() -> None:
    value = {"text": "snow ☃, smile 😀, ü, 中文", "ключ": "значение"}
    assert parse_tool_arguments(json.dumps(value, ensure_ascii=False)) == value
    assert parse_tool_arguments(json.dumps(value)) == value
    assert parse_tool_arguments(json.dumps(value, ensure_ascii=False).encode()) == value


def test_parse_tool_arguments_numbers() -> None:
    parsed = parse_tool_arguments(
        '{"u64": 18446744073709551615, "i64": -9223372036854775808, "zero": 0,'
        ' "f": 0.1, "tiny": 5e-324, "big": 1.7976931348623157e308, "neg": -0.0, "e": 1E3}'
    )
    assert parsed["u64"] == 2**64 - 1
    assert type(parsed["u64"]) is int
    assert parsed["i64"] == -(2**63)
    assert type(parsed["zero"]) is int
    assert parsed["f"] == 0.1
    assert parsed["tiny"] == 5e-324
    assert parsed["big"] == 1.7976931348623157e308
    assert parsed["e"] == 1000.0
    assert type(parsed["e"]) is float

    # Integers keep every digit beyond 64 bits, and -0 is the integer 0, as json.loads reads them
    # (an account number must not come back rounded to the nearest float).
    wide = parse_tool_arguments(
        '{"n": 123456789012345678901234567890, "low": -9223372036854775809,'
        ' "just_over": 18446744073709551616, "minus_zero": -0}'
    )
    assert wide == {
        "n": 123456789012345678901234567890,
        "low": -(2**63) - 1,
        "just_over": 2**64,
        "minus_zero": 0,
    }
    assert all(type(value) is int for value in wide.values())
    # Up to what a float can hold (309 digits); beyond, as 1e400, it is out of range.
    widest = int("1" + "0" * 308)
    assert parse_tool_arguments(f'{{"n": {widest}}}') == {"n": widest}
    with pytest.raises(ArgumentsError, match="number out of range"):
        parse_tool_arguments(f'{{"n": {widest * 2}}}')


async def test_raw_argument_text_with_a_wide_integer_reaches_the_tool_exactly() -> None:
    # Validated by magnitude, as JSON Schema compares numbers; handed over with every digit.
    schema = {
        "type": "object",
        "properties": {"account": {"type": "integer", "minimum": 0}},
        "required": ["account"],
    }
    validator = create_json_schema_tool_argument_validator()
    result, spy, _ = await run(
        '{"account": 98765432109876543210987}', parameters=schema, validate=validator
    )
    assert result.error is None
    assert spy.calls == [{"account": 98765432109876543210987}]
    result, spy, _ = await run(
        '{"account": -98765432109876543210987}', parameters=schema, validate=validator
    )
    assert spy.calls == []  # the tool did not run
    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{", "invalid_json"),
        ('{"a": 1', "invalid_json"),
        ("{'a': 1}", "invalid_json"),
        ('{"a": [1, 2,]}', "invalid_json"),
        ('{"a": 1} trailing', "invalid_json"),
        ('{"a": 1}{"b": 2}', "invalid_json"),
        ('{"a": NaN}', "invalid_json"),
        ('{"a": 1e400}', "invalid_json"),
        ("\ufeff{}", "invalid_json"),
        (b'{"a": "\xff"}', "invalid_json"),
        ('{"a": "\ud800"}', "invalid_json"),
        ('{"\udfff": 1}', "invalid_json"),
        ("[]", "not_an_object"),
        ("[1, 2]", "not_an_object"),
        ("1", "not_an_object"),
        ('"x"', "not_an_object"),
        ("null", "not_an_object"),
        ("true", "not_an_object"),
    ],
)
def test_bad_argument_text_raises_arguments_error(text: str | bytes, reason: str) -> None:
    with pytest.raises(ArgumentsError) as caught:
        parse_tool_arguments(text)
    error = caught.value
    assert isinstance(error, PrismError)
    assert error.code == "invalid_json_arguments"
    assert error.reason == reason
    assert len(str(error)) < 300
    if reason == "not_an_object":
        assert str(error) == "Tool arguments must be a JSON object"
    else:
        assert str(error).startswith("Tool arguments are not valid JSON")


def test_argument_text_holding_a_lone_surrogate_says_where() -> None:
    # A JSON decoder turns a model's "\ud800" into a lone surrogate, which UTF-8 cannot carry.
    text = '{"a": "xy\udc80"}'
    with pytest.raises(ArgumentsError) as caught:
        parse_tool_arguments(text)
    assert str(caught.value) == (
        "Tool arguments are not valid JSON: a lone surrogate (half of a UTF-16 pair) at"
        f" character {text.index(chr(0xDC80))}. Send one complete JSON object."
    )


def test_schema_text_holding_a_lone_surrogate_is_refused_as_not_json() -> None:
    text = '{"type": "string", "pattern": "^\ud800"}'
    with pytest.raises(SchemaGuardError) as caught:
        check_schema(text)
    assert caught.value.reason == "schema_invalid"
    where = f"at character {text.index(chr(0xD800))}"
    assert str(caught.value).endswith(f"not JSON: a lone surrogate (half of a UTF-16 pair) {where}")
    assert guard_error({"enum": ["\ud800"]}).reason == "schema_invalid"
    assert guard_error({"properties": {"\udc80": {}}}).reason == "schema_invalid"


def test_too_large_argument_text() -> None:
    with pytest.raises(ArgumentsError) as caught:
        parse_tool_arguments('{"a": "0123456789"}', max_bytes=10)
    assert caught.value.reason == "arguments_too_large"
    assert "max_argument_bytes=10" in str(caught.value)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("text", ["[" * 100_000, "{" * 100_000, '{"a":' * 100_000, b"[" * 100_000])
def test_a_100000_deep_argument_text_is_refused_cleanly(text: str | bytes) -> None:
    with pytest.raises(ArgumentsError) as caught:
        parse_tool_arguments(text)
    assert caught.value.reason == "arguments_too_deep"
    assert "max_argument_depth=64" in str(caught.value)
    with pytest.raises(ArgumentsError):
        parse_tool_arguments(text, max_depth=256)


def test_parse_errors_do_not_echo_the_input() -> None:
    long_secret = SECRET * 20
    for text in [
        '{"token": "' + long_secret + '", oops}',
        '{"token": ' + long_secret + "}",
        long_secret,
        '["' + long_secret + '"]',
        '{"token": "' + long_secret,
    ]:
        with pytest.raises(ArgumentsError) as caught:
            parse_tool_arguments(text)
        message = str(caught.value)
        assert len(message) < 300
        assert SECRET not in message
        assert SECRET[:12] not in message


def test_parse_rejects_non_text() -> None:
    with pytest.raises(TypeError):
        parse_tool_arguments(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parse_tool_arguments({"a": 1})  # type: ignore[arg-type]


# --- the dispatch validator -------------------------------------------------------------------


async def test_valid_arguments_run_the_tool() -> None:
    validator = create_json_schema_tool_argument_validator()
    result, spy, _ = await run({"city": "Lima", "days": 2}, parameters=WEATHER, validate=validator)
    assert result.error is None
    assert result.value == "ok"
    assert spy.calls == [{"city": "Lima", "days": 2}]


async def test_invalid_arguments_are_blocked_before_the_tool_runs() -> None:
    validator = create_json_schema_tool_argument_validator()
    result, spy, ledger = await run({"days": 99, "x": 1}, parameters=WEATHER, validate=validator)
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"
    assert [row.status for row in ledger.records] == ["blocked"]
    error = result.error
    assert error is not None
    assert error.code == "invalid_tool_arguments"
    assert error.message.startswith("Invalid arguments for tool weather: ")
    assert isinstance(error.details, dict)
    issues = error.details["issues"]
    assert isinstance(issues, list)
    assert error.details["count"] == len(issues)
    assert {(issue["path"], issue["keyword"]) for issue in issues} >= {("/days", "maximum")}
    for issue in issues:
        assert f"{issue['path'] or '/'}: {issue['message']}" in error.message


async def test_validator_built_from_an_adapter() -> None:
    adapter = create_json_schema_adapter()
    validator = create_tool_parameter_validator(adapter)
    assert isinstance(validator, ToolParameterValidator)
    assert validator.adapter is adapter
    result, spy, _ = await run({"city": 5}, parameters=WEATHER, validate=validator)
    assert blocked_reason(result) == "validation_failed"
    assert result.error is not None
    assert "/city: " in result.error.message
    assert spy.calls == []
    result, spy, _ = await run({"city": "Quito"}, parameters=WEATHER, validate=validator)
    assert spy.calls == [{"city": "Quito"}]


def test_validator_arguments_are_checked() -> None:
    with pytest.raises(TypeError):
        create_tool_parameter_validator(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="missing_schema"):
        create_tool_parameter_validator(create_json_schema_adapter(), missing_schema="deny")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="missing_schema"):
        create_json_schema_tool_argument_validator(missing_schema="maybe")  # type: ignore[arg-type]


def test_validator_answers_none_for_valid_arguments() -> None:
    validator = create_json_schema_tool_argument_validator()
    tool = ToolDefinition(name="weather", parameters=WEATHER)
    assert validator(tool, {"city": "Lima"}, context()) is None
    assert validator(tool, {"city": "Lima"}) is None


def test_root_issues_are_shown_at_slash() -> None:
    validator = create_json_schema_tool_argument_validator()
    outcome = validator(ToolDefinition(name="weather", parameters=WEATHER), {})
    assert isinstance(outcome, ErrorInfo)
    assert outcome.message == 'Invalid arguments for tool weather: /: "city" is a required property'


def many_required(count: int, name_length: int = 4) -> dict[str, Any]:
    names = [f"p{index:03d}".ljust(name_length, "x") for index in range(count)]
    return {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "required": names,
    }


def test_at_most_eight_parts_and_a_count_of_the_rest() -> None:
    validator = create_json_schema_tool_argument_validator()
    outcome = validator(ToolDefinition(name="bulk", parameters=many_required(12)), {})
    assert isinstance(outcome, ErrorInfo)
    body = outcome.message.removeprefix("Invalid arguments for tool bulk: ")
    assert body.endswith(" (and 4 more)")
    parts = body.removesuffix(" (and 4 more)").split("; ")
    assert len(parts) == 8
    assert all(part.startswith("/: ") for part in parts)
    assert isinstance(outcome.details, dict)
    assert outcome.details["count"] == 12
    assert len(outcome.details["issues"]) == 12  # type: ignore[arg-type]


def test_exactly_eight_issues_have_no_suffix() -> None:
    validator = create_json_schema_tool_argument_validator()
    outcome = validator(ToolDefinition(name="bulk", parameters=many_required(8)), {})
    assert isinstance(outcome, ErrorInfo)
    assert "more)" not in outcome.message
    assert outcome.message.count("; ") == 7


def test_details_hold_every_issue_and_the_suffix_counts_them() -> None:
    # 100 missing properties: the message shows 8 and must say how many more there are; the
    # contract puts the full structured issues in details.
    validator = create_json_schema_tool_argument_validator()
    outcome = validator(ToolDefinition(name="bulk", parameters=many_required(100)), {})
    assert isinstance(outcome, ErrorInfo)
    assert isinstance(outcome.details, dict)
    assert outcome.details["count"] == 100
    assert len(outcome.details["issues"]) == 100  # type: ignore[arg-type]
    assert outcome.message.endswith(" (and 92 more)")


def test_the_report_is_a_complete_frozen_error_info_on_both_paths() -> None:
    # The core builds this ErrorInfo in place; it must be the real frozen class with every
    # field set, the same from dict and from text arguments, and its paths must be right for
    # nested and top-level issues alike (top-level ones come from a shared table).
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "stay": {"type": "object", "properties": {"nights": {"maximum": 3}}},
        },
        "additionalProperties": False,
    }
    tool = ToolDefinition(name="book", parameters=schema)
    validator = create_json_schema_tool_argument_validator()
    arguments = {"city": 1, "stay": {"nights": 9}, "extra": True}
    from_dict = validator(tool, arguments)
    parsed = validator.parse_checked(tool, json.dumps(arguments))
    assert parsed is not None
    assert parsed[0] == arguments
    with pytest.raises(TypeError, match="parse_checked expects a ToolDefinition, got dict"):
        validator.parse_checked(tool.to_dict(), json.dumps(arguments))  # type: ignore[arg-type]
    for problem in (from_dict, parsed[1]):
        assert type(problem) is ErrorInfo
        assert problem.code == "invalid_tool_arguments"
        assert problem.name == "ArgumentValidationError"
        with pytest.raises(AttributeError):
            problem.code = "changed"  # type: ignore[misc]
        assert isinstance(problem.details, dict)
        assert problem.details["count"] == 3
        issues = problem.details["issues"]
        assert isinstance(issues, list)
        assert sorted((issue["path"], issue["keyword"]) for issue in issues) == [
            ("", "additionalProperties"),
            ("/city", "type"),
            ("/stay/nights", "maximum"),
        ]
        assert problem == ErrorInfo(
            message=problem.message, code=problem.code, name=problem.name, details=problem.details
        )
    assert from_dict == parsed[1]


def test_message_is_bounded_even_for_huge_schemas() -> None:
    validator = create_json_schema_tool_argument_validator()
    schema = many_required(2000, name_length=40)
    outcome = validator(ToolDefinition(name="huge", parameters=schema), {"p000": "not an int"})
    assert isinstance(outcome, ErrorInfo)
    assert len(outcome.message.encode()) <= 1024
    assert outcome.message.startswith("Invalid arguments for tool huge: ")
    long_keys = {"k" * 400 + str(index): "s" for index in range(20)}
    open_schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    outcome = validator(ToolDefinition(name="keys", parameters=open_schema), long_keys)
    assert isinstance(outcome, ErrorInfo)
    assert len(outcome.message.encode()) <= 1024


def test_bounded_message_keeps_the_count_of_hidden_issues() -> None:
    # Twenty long issue texts: the 1 KiB cap must not cut away the "(and N more)" suffix that
    # tells the model how much it has not been shown.
    validator = create_json_schema_tool_argument_validator()
    outcome = validator(ToolDefinition(name="long", parameters=many_required(20, 150)), {})
    assert isinstance(outcome, ErrorInfo)
    assert len(outcome.message.encode()) <= 1024
    shown = outcome.message.count('; /: "p') + 1
    assert 1 <= shown <= 8
    # Every issue not named in the message is counted in the suffix, none twice.
    assert outcome.message.endswith(f" (and {20 - shown} more)")


async def test_missing_schema_policy() -> None:
    allow = create_json_schema_tool_argument_validator()
    result, spy, _ = await run({"free": "form"}, parameters=None, validate=allow)
    assert spy.calls == [{"free": "form"}]

    reject = create_json_schema_tool_argument_validator(missing_schema="reject")
    result, spy, _ = await run({"free": "form"}, parameters=None, validate=reject)
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"
    assert result.error is not None
    assert result.error.code == "missing_parameter_schema"
    assert "weather" in result.error.message

    adapter_reject = create_tool_parameter_validator(
        create_json_schema_adapter(), missing_schema="reject"
    )
    result, spy, _ = await run({}, parameters=None, validate=adapter_reject)
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"
    # A tool that has a schema is still validated normally under "reject".
    result, spy, _ = await run({"city": "Bern"}, parameters=WEATHER, validate=reject)
    assert spy.calls == [{"city": "Bern"}]


@pytest.mark.parametrize(
    ("schema", "limits", "named"),
    [
        ({"$ref": "https://example.com/s.json"}, {}, "not local"),
        ({"properties": {"__proto__": {}}}, {}, "__proto__"),
        ({"minimum": float("nan")}, {}, "not finite"),
        ({"description": "x" * 500}, {"max_schema_bytes": 100}, "max_schema_bytes=100"),
        ({"not": {"not": {"not": {}}}}, {"max_schema_depth": 2}, "max_schema_depth=2"),
        ({"properties": {"a": {}, "b": {}}}, {"max_schema_keywords": 2}, "max_schema_keywords=2"),
        (
            {
                "$defs": {"s": {}},
                "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}},
            },
            {"max_refs": 1},
            "max_refs=1",
        ),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}}, {}, "cycle"),
    ],
)
async def test_a_schema_that_fails_the_guards_blocks_the_call(
    schema: dict[str, Any], limits: dict[str, int], named: str
) -> None:
    validator = create_json_schema_tool_argument_validator(**limits)
    result, spy, ledger = await run({}, parameters=schema, validate=validator)
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"
    assert [row.reason for row in ledger.records] == ["validation_failed"]
    assert result.error is not None
    assert named in result.error.message
    assert "weather" in result.error.message
    assert result.error.name == "SchemaGuardError"


async def test_deep_arguments_are_blocked_by_the_validator() -> None:
    validator = create_json_schema_tool_argument_validator(max_argument_depth=4)
    schema = {"type": "object", "additionalProperties": {"$ref": "#"}}
    result, spy, _ = await run({"a": {"b": {"c": {}}}}, parameters=schema, validate=validator)
    assert spy.calls == [{"a": {"b": {"c": {}}}}]
    result, spy, _ = await run(
        {"a": {"b": {"c": {"d": {}}}}}, parameters=schema, validate=validator
    )
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"
    assert result.error is not None
    assert "max_argument_depth=4" in result.error.message


async def test_arguments_that_are_not_json_are_blocked_by_the_validator() -> None:
    validator = create_json_schema_tool_argument_validator()
    schema = {"type": "object", "properties": {"a": {"type": "array"}}}
    result, spy, _ = await run({"a": {1, 2}}, parameters=schema, validate=validator)
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"


def test_cache_info_is_a_named_tuple_counting_hits() -> None:
    validator = create_json_schema_tool_argument_validator(max_compiled_schemas=8)
    info = validator.cache_info()
    assert isinstance(info, tuple)
    assert info._fields == ("hits", "misses", "maxsize", "currsize")
    assert info == (0, 0, 8, 0)
    tool = ToolDefinition(name="weather", parameters=WEATHER)
    validator(tool, {"city": "Oslo"})
    first = validator.cache_info()
    assert first.misses == 1
    assert first.currsize == 1
    for _ in range(10):
        validator(tool, {"city": "Oslo"})
        validator(tool, {"city": 3})
    again = validator.cache_info()
    assert again.misses == 1
    assert again.currsize == 1
    assert again.hits >= first.hits + 20
    # An equal schema in a new dict shares the compiled validator.
    validator(ToolDefinition(name="w2", parameters=json.loads(json.dumps(WEATHER))), {"city": "x"})
    assert validator.cache_info().misses == 1
    assert validator.cache_info().currsize == 1


def test_lru_eviction_keeps_size_bounded_and_answers_right() -> None:
    adapter = create_json_schema_adapter(max_compiled_schemas=2)
    schemas = [{"type": "integer", "maximum": bound} for bound in range(5)]
    for _ in range(3):
        for bound, schema in enumerate(schemas):
            assert adapter.is_valid(schema, bound)
            assert not adapter.is_valid(schema, bound + 1)
            assert [issue.keyword for issue in adapter.validate(schema, bound + 1)] == ["maximum"]
            info = adapter.cache_info()
            assert info.currsize <= 2
            assert info.maxsize == 2
    assert adapter.cache_info().misses > 5  # evicted schemas were compiled again


def large_schema(tag: int) -> dict[str, Any]:
    """An 80-property schema, new to every cache for each ``tag``."""
    properties = {f"property_{n}": {"type": "string", "maxLength": n} for n in range(80)}
    return {"type": "object", "description": f"large {tag}", "properties": properties}


def test_evicting_large_schemas_leaves_a_held_compiled_schema_working() -> None:
    # Through the adapter (identity memo and LRU) and the bare core (LRU only), each compile
    # evicts the one before; the compiled schema a host keeps still validates.
    adapter = create_json_schema_adapter(max_compiled_schemas=1)
    core = SchemaValidator(max_compiled_schemas=1)
    kept = core.compile(large_schema(-1))
    for tag in range(40):
        schema = large_schema(tag)
        assert adapter.is_valid(schema, {"property_2": "ab"})
        assert not adapter.is_valid(schema, {"property_2": "abc"})
        core.compile(schema)
    assert kept.validate({"property_3": "abc"}, 1) is None
    assert kept.validate({"property_3": "abcd"}, 1) is not None
    assert adapter.cache_info().currsize == 1
    assert core.cache_info()[3] == 1


def test_validator_lru_eviction_through_dispatch_callback() -> None:
    validator = create_json_schema_tool_argument_validator(max_compiled_schemas=2)
    tools = [
        ToolDefinition(name=f"t{index}", parameters={"type": "object", "required": [f"k{index}"]})
        for index in range(5)
    ]
    for _ in range(2):
        for index, tool in enumerate(tools):
            assert validator(tool, {f"k{index}": 1}) is None
            outcome = validator(tool, {})
            assert isinstance(outcome, ErrorInfo)
            assert f'"k{index}" is a required property' in outcome.message
            assert validator.cache_info().currsize <= 2


def test_a_repeated_schema_counts_as_a_hit_every_time() -> None:
    core = SchemaValidator()
    schema = {"type": "integer"}
    assert core.validate_with(schema, 1) is None
    hits, misses, _, _ = core.cache_info()
    for _ in range(5):
        assert core.validate_with(schema, 1) is None
        assert core.validate_with(schema, "one") is not None
    assert core.cache_info()[:2] == (hits + 10, misses)


def test_a_schema_the_guards_refuse_counts_as_neither_hit_nor_miss() -> None:
    # Refused before the cache (NaN, too large) or after it (a remote $ref, a forbidden key, an
    # invalid keyword): never a hit, never a miss, never kept.
    adapter = create_json_schema_adapter(max_schema_bytes=64)
    refused: list[Any] = [
        {"$ref": "http://example.com/schema.json"},
        {"properties": {"__proto__": {}}},
        {"type": 5},
        {"minimum": float("nan")},
        {"description": "x" * 100},
    ]
    for schema in refused:
        before = adapter.cache_info()
        for _ in range(3):
            with pytest.raises(SchemaGuardError):
                adapter.validate(schema, {})
        assert adapter.cache_info() == before, schema
    assert adapter.cache_info() == (0, 0, 256, 0)
    good = {"type": "object"}
    for _ in range(3):
        assert adapter.validate(good, {}) == []
    assert adapter.cache_info() == (2, 1, 256, 1)


def test_two_validators_never_answer_with_each_others_compiled_schema() -> None:
    # One schema object, one thread, two validators with different limits taking turns: each
    # call must use its own validator's compiled schema (and so its own argument limits).
    shallow, deep = SchemaValidator(max_argument_depth=2), SchemaValidator()
    schema = {"type": "object"}
    nested = {"a": {"b": {"c": {}}}}
    for _ in range(3):
        assert deep.validate_with(schema, nested) is None
        refused = shallow.validate_with(schema, nested)
        assert refused is not None
        assert [keyword for _, keyword, _ in refused[0]] == ["max_argument_depth"]


def test_a_schema_evicted_by_another_thread_is_read_again() -> None:
    # This thread found `schema` last; another thread's compile then makes the memo forget it.
    # The host changes the dict afterwards: the next validation must read it anew, not answer
    # from what this thread found before the eviction.
    core = SchemaValidator(max_compiled_schemas=1)
    schema: dict[str, Any] = {"type": "integer"}
    assert core.validate_with(schema, 1) is None
    worker = threading.Thread(target=core.compiled, args=({"type": "boolean"},))
    worker.start()
    worker.join()
    schema["type"] = "string"
    assert core.validate_with(schema, 1) is not None
    assert core.validate_with(schema, "one") is None


def test_a_validation_run_by_the_collector_inside_another_answers_right() -> None:
    # A collection can start in the middle of a validation (the core allocates the argument
    # dict), and a gc callback can validate again on the same thread and validator while the
    # outer one still holds this thread's last schema. Both must answer from their own schemas.
    core = SchemaValidator()
    outer = {"type": "object", "properties": {"n": {"type": "integer"}}}
    inner = {"type": "string"}
    text = '{"n": 2, "rows": [{"a": [1]}, {"b": [2]}, {"c": [3]}]}'

    def validate_outer() -> tuple[Any, Any]:
        return core.parse_and_validate_with(outer, text)

    inside: list[tuple[Any, ...]] = []

    def during_collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and sys._getframe(1).f_code is validate_outer.__code__:
            inside.append(
                (
                    core.validate_with(inner, "text"),
                    core.validate_with(inner, 1),
                    core.validate_with(outer, {"n": "two"}),
                    core.validate_with(outer, {"n": 2}),
                )
            )

    assert validate_outer()[1] is None  # `outer` is this thread's last schema from here on
    threshold = gc.get_threshold()
    gc.callbacks.append(during_collection)
    gc.set_threshold(1)
    try:
        answers = [validate_outer() for _ in range(50)]
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(during_collection)
    assert inside, "no collection started inside a validation"
    for text_ok, number_refused, outer_refused, outer_ok in inside:
        assert text_ok is None
        assert number_refused is not None
        assert [keyword for _, keyword, _ in number_refused[0]] == ["type"]
        assert outer_refused is not None
        assert [path for path, _, _ in outer_refused[0]] == ["/n"]
        assert outer_ok is None
    for arguments, found in answers:
        assert found is None
        assert arguments == json.loads(text)
    assert core.validate_with(outer, {"n": "two"}) is not None
    assert core.validate_with(inner, 1) is not None


# --- create_tool_registry(check_schemas=True) -------------------------------------------------


def test_registry_refuses_a_bad_schema_at_register() -> None:
    registry = create_tool_registry(check_schemas=True)
    registry.register(ToolDefinition(name="good", parameters=WEATHER))
    registry.register(ToolDefinition(name="free"))
    bad = ToolDefinition(name="bad", parameters={"$ref": "https://example.com/x.json"})
    with pytest.raises(SchemaGuardError) as caught:
        registry.register(bad)
    assert caught.value.reason == "schema_ref_not_allowed"
    assert "bad" not in registry
    assert registry.get("bad") is None
    assert registry.names() == ["good", "free"]


def test_registry_refuses_a_bad_schema_at_construction() -> None:
    tools = [
        ToolDefinition(name="good", parameters=WEATHER),
        ToolDefinition(name="bad", parameters={"properties": {"constructor": {}}}),
    ]
    with pytest.raises(SchemaGuardError) as caught:
        create_tool_registry(tools, check_schemas=True)
    assert caught.value.reason == "schema_forbidden_key"


def test_registry_replacing_a_tool_with_a_bad_schema_keeps_the_old_one() -> None:
    registry = create_tool_registry(check_schemas=True)
    good = registry.register(ToolDefinition(name="t", parameters=WEATHER))
    with pytest.raises(SchemaGuardError):
        registry.register(ToolDefinition(name="t", parameters={"minimum": float("inf")}))
    assert registry.get("t") is good
    assert len(registry) == 1


def test_registry_checks_with_a_given_adapter() -> None:
    adapter = create_json_schema_adapter(max_refs=1)
    registry = create_tool_registry(check_schemas=adapter)
    two_refs = {
        "$defs": {"s": {}},
        "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}},
    }
    with pytest.raises(SchemaGuardError) as caught:
        registry.register(ToolDefinition(name="t", parameters=two_refs))
    assert caught.value.reason == "schema_too_many_refs"
    assert len(registry) == 0
    # The default registry does not check.
    create_tool_registry([ToolDefinition(name="t", parameters=two_refs)]).register(
        ToolDefinition(name="u", parameters={"$ref": "https://example.com"})
    )


def test_registry_refuses_a_non_checker() -> None:
    with pytest.raises(TypeError):
        create_tool_registry(check_schemas="yes")  # type: ignore[arg-type]


# --- dispatch with raw JSON argument text ----------------------------------------------------


@pytest.mark.parametrize("text", ['{"city": "Lima", "days": 2}', b'{"city": "Lima", "days": 2}'])
async def test_raw_argument_text_is_parsed_validated_and_run(text: str | bytes) -> None:
    validator = create_json_schema_tool_argument_validator()
    result, spy, _ = await run(text, parameters=WEATHER, validate=validator)
    assert result.error is None
    assert spy.calls == [{"city": "Lima", "days": 2}]


async def test_raw_argument_text_without_a_validator() -> None:
    result, spy, _ = await run('{"anything": [1, {"x": null}]}')
    assert result.error is None
    assert spy.calls == [{"anything": [1, {"x": None}]}]
    result, spy, _ = await run("   ")
    assert spy.calls == [{}]


async def test_raw_argument_text_that_parses_but_fails_validation() -> None:
    validator = create_json_schema_tool_argument_validator()
    result, spy, _ = await run('{"city": 7}', parameters=WEATHER, validate=validator)
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"
    assert result.error is not None
    assert "/city: " in result.error.message


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"city": ', "invalid_json"),
        ("not json at all", "invalid_json"),
        ("[]", "not_an_object"),
        ("null", "not_an_object"),
        ('"Lima"', "not_an_object"),
        ("[" * 100_000, "arguments_too_deep"),
        (b"{" * 100_000, "arguments_too_deep"),
    ],
)
async def test_bad_raw_argument_text_is_blocked(text: str | bytes, reason: str) -> None:
    validator = create_json_schema_tool_argument_validator()
    result, spy, ledger = await run(text, parameters=WEATHER, validate=validator)
    assert spy.calls == []
    assert blocked_reason(result) == "invalid_arguments"
    assert [row.reason for row in ledger.records] == ["invalid_arguments"]
    error = result.error
    assert error is not None
    assert error.code == "invalid_json_arguments"
    assert len(error.message) < 300
    with pytest.raises(ArgumentsError) as caught:
        parse_tool_arguments(text)
    assert caught.value.reason == reason
    assert error.message == str(caught.value)


async def test_raw_argument_text_over_a_mebibyte_is_blocked() -> None:
    text = '{"blob": "' + "x" * (1024 * 1024) + '"}'
    result, spy, _ = await run(text)
    assert spy.calls == []
    assert blocked_reason(result) == "invalid_arguments"
    assert result.error is not None
    assert "max_argument_bytes" in result.error.message


async def test_bad_raw_argument_text_does_not_echo_secrets() -> None:
    result, spy, _ = await run('{"api_key": "' + SECRET + '", }')
    assert spy.calls == []
    assert result.error is not None
    assert SECRET not in result.error.message


# --- secrets in argument values ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [
        ({"type": "object", "properties": {"count": {"type": "integer"}}}, {"count": SECRET}),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
            {"a": 1, "token": SECRET},
        ),
        ({"type": "object", "additionalProperties": False}, {"token": SECRET}),
        ({"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}}}, {"mode": SECRET}),
        ({"type": "object", "properties": {"mode": {"const": "fast"}}}, {"mode": SECRET}),
        ({"type": "object", "properties": {"k": {"maxLength": 5}}}, {"k": SECRET}),
        ({"type": "object", "properties": {"k": {"pattern": "^[0-9]+$"}}}, {"k": SECRET}),
        ({"type": "object", "properties": {"k": {"not": {"type": "string"}}}}, {"k": SECRET}),
        (
            {
                "type": "object",
                "properties": {"k": {"oneOf": [{"type": "integer"}, {"type": "null"}]}},
            },
            {"k": SECRET},
        ),
        (
            {"type": "object", "properties": {"k": {"type": "array", "uniqueItems": True}}},
            {"k": [SECRET, SECRET]},
        ),
        (
            {
                "type": "object",
                "properties": {"k": {"type": "array", "items": {"type": "integer"}}},
            },
            {"k": [1, {"nested": SECRET}]},
        ),
        ({"type": "object", "unevaluatedProperties": False}, {"token": SECRET}),
    ],
)
async def test_secrets_in_argument_values_never_reach_the_message(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    validator = create_json_schema_tool_argument_validator()
    result, spy, _ = await run(arguments, parameters=schema, validate=validator)
    assert spy.calls == []
    assert blocked_reason(result) == "validation_failed"
    error = result.error
    assert error is not None
    assert SECRET not in error.message
    assert SECRET[:16] not in error.message
    # The structured issues are masked the same way.
    assert SECRET not in json.dumps(error.details)
    # Raw text arguments take the same path.
    result, spy, _ = await run(json.dumps(arguments), parameters=schema, validate=validator)
    assert spy.calls == []
    assert result.error is not None
    assert SECRET not in result.error.message


def test_messages_a_keyword_alone_decides_are_shared_and_the_rest_are_not() -> None:
    # A type or bound message reads the same for every instance, so the core keeps one string
    # of it per schema; a message naming the instance's properties must follow each instance.
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"maximum": 3}},
        "additionalProperties": False,
    }
    tool = ToolDefinition(name="book", parameters=schema)
    validator = create_json_schema_tool_argument_validator()

    def messages(arguments: dict[str, object]) -> dict[str, str]:
        outcome = validator(tool, arguments)
        assert isinstance(outcome, ErrorInfo)
        assert isinstance(outcome.details, dict)
        issues = outcome.details["issues"]
        assert isinstance(issues, list)
        return {issue["keyword"]: issue["message"] for issue in issues}

    first = messages({"city": 1, "days": 9, "extra": True})
    second = messages({"city": [2], "days": 99.5, "other": None})
    assert first["type"] == 'value is not of type "string"'
    assert first["type"] is second["type"]
    assert first["maximum"] is second["maximum"]
    assert "'extra'" in first["additionalProperties"]
    assert "'other'" in second["additionalProperties"]
    assert "'extra'" not in second["additionalProperties"]


def test_the_core_answer_and_the_python_check_agree_on_every_kind_of_call() -> None:
    # With the JSON Schema adapter the core base class answers calls for tools with a schema;
    # `_check` is the whole check in Python. Both must give the same answer for valid and
    # invalid arguments, a missing schema and a schema the guards refuse.
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    refused = {"$ref": "https://example.com/schema.json"}
    for missing_schema in ("allow", "reject"):
        validator = create_json_schema_tool_argument_validator(missing_schema=missing_schema)
        cases = [
            (ToolDefinition(name="count", parameters=schema), {"n": 1}),
            (ToolDefinition(name="count", parameters=schema), {"n": "x", "m": 2}),
            (ToolDefinition(name="bare"), {"n": 1}),
            (ToolDefinition(name="remote", parameters=refused), {"n": 1}),
        ]
        for tool, arguments in cases:
            assert validator(tool, arguments) == validator._check(tool, arguments)
        answers = [validator(tool, arguments) for tool, arguments in cases]
        assert answers[0] is None
        assert isinstance(answers[1], ErrorInfo)
        assert answers[1].code == "invalid_tool_arguments"
        assert (answers[2] is None) == (missing_schema == "allow")
        assert isinstance(answers[3], ErrorInfo)
        assert "schema_ref_not_allowed" in str(answers[3].details)


def test_validator_settings_are_read_only_and_bound_once() -> None:
    # The core keeps its own copy of the adapter and the message limit, so changing them
    # afterwards must be refused rather than silently ignored.
    validator = create_json_schema_tool_argument_validator()
    with pytest.raises(AttributeError):
        validator.max_message_bytes = 10  # type: ignore[misc]
    with pytest.raises(AttributeError):
        validator.adapter = create_json_schema_adapter()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        validator.missing_schema = "reject"  # type: ignore[misc]
    with pytest.raises(ValueError, match="bound to a core already"):
        validator._use_core(create_json_schema_adapter()._core, 10, 10)


def test_a_schema_held_in_another_kind_of_mapping_validates_as_a_dict_would() -> None:
    schema = types.MappingProxyType(
        {"type": "object", "properties": {"x": types.MappingProxyType({"type": "integer"})}}
    )
    tool = ToolDefinition(name="t", parameters=schema)
    validator = create_json_schema_tool_argument_validator()
    assert validator(tool, {"x": 1}) is None
    refused = validator(tool, {"x": "one"})
    assert isinstance(refused, ErrorInfo)
    assert refused.code == "invalid_tool_arguments"
    create_tool_registry([tool], check_schemas=True)  # passes the guards at registration
    check_schema(schema)


class HostMapping(Mapping[str, Any]):
    """A host's own read-only mapping (not a dict) over ``content``."""

    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content

    def __getitem__(self, key: str) -> Any:
        return self.content[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.content)

    def __len__(self) -> int:
        return len(self.content)


class WritesIntoItsSchema(HostMapping):
    """A mapping whose ``items()`` adds a key to the schema holding it, as a lazily resolved view
    that caches into its parent might: the core is reading that schema at the time."""

    def __init__(self, schema: dict[str, Any], content: dict[str, Any]) -> None:
        super().__init__(content)
        self.schema = schema

    def items(self) -> ItemsView[str, Any]:
        self.schema[f"x-resolved-{len(self.schema)}"] = {}
        return super().items()


def schema_written_into_while_read() -> dict[str, Any]:
    """``{"type": "object", "properties": {"a": {"type": "string"}}}``, the inner schema a
    ``WritesIntoItsSchema`` over the outer one."""
    schema: dict[str, Any] = {}
    schema["properties"] = {"a": WritesIntoItsSchema(schema, {"type": "string"})}
    schema["type"] = "object"
    return schema


def test_a_mapping_that_writes_into_its_schema_while_read_is_validated_without_a_panic() -> None:
    # The core used to panic (a pyo3 PanicException, a BaseException) on the enclosing dict
    # changing size under its walk.
    schema = schema_written_into_while_read()
    adapter = create_json_schema_adapter()
    assert adapter.validate(schema, {"a": "text"}) == []
    issues = adapter.validate(schema, {"a": 1})
    assert [(issue.path, issue.keyword) for issue in issues] == [("/a", "type")]
    check_schema(schema_written_into_while_read())  # passes the guards
    registry = create_tool_registry(check_schemas=True)
    registry.register(ToolDefinition(name="t", parameters=schema_written_into_while_read()))
    assert registry.names() == ["t"]


async def test_a_mapping_that_writes_into_its_schema_while_read_never_fails_dispatch() -> None:
    validator = create_json_schema_tool_argument_validator()
    parameters = schema_written_into_while_read()
    result, spy, _ = await run({"a": "text"}, parameters=parameters, validate=validator)
    if result.error is None:
        assert spy.calls == [{"a": "text"}]
    else:
        assert blocked_reason(result) == "validation_failed"
        assert spy.calls == []
    result, spy, ledger = await run({"a": 1}, parameters=parameters, validate=validator)
    assert blocked_reason(result) == "validation_failed"
    assert [row.reason for row in ledger.records] == ["validation_failed"]
    assert spy.calls == []


class ItemsRaise(HostMapping):
    """A mapping whose ``items()`` raises ``error``."""

    def __init__(self, content: dict[str, Any], error: BaseException) -> None:
        super().__init__(content)
        self.error = error

    def items(self) -> ItemsView[str, Any]:
        raise self.error


@pytest.mark.parametrize("error", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_raised_while_a_mapping_lists_its_items_propagates(
    error: type[BaseException],
) -> None:
    def schema() -> dict[str, Any]:
        return {"type": "object", "properties": ItemsRaise({"a": {}}, error("stop"))}

    with pytest.raises(error):
        create_json_schema_adapter().validate(schema(), {})
    with pytest.raises(error):
        check_schema(schema())
    with pytest.raises(error):
        create_tool_registry(check_schemas=True).register(
            ToolDefinition(name="t", parameters=schema())
        )


def test_an_error_raised_while_a_mapping_lists_its_items_is_a_guard_error() -> None:
    schema = {"type": "object", "properties": ItemsRaise({"a": {}}, LookupError(SECRET))}
    with pytest.raises(SchemaGuardError) as caught:
        create_json_schema_adapter().validate(schema, {})
    assert caught.value.reason == "schema_invalid"
    assert "ItemsRaise whose items cannot be read at /properties" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_schema_made_of_host_mappings_validates_as_a_dict_would() -> None:
    schema = HostMapping(
        {
            "type": "object",
            "properties": HostMapping({"n": HostMapping({"type": "integer", "minimum": 1})}),
            "required": ["n"],
        }
    )
    adapter = create_json_schema_adapter()
    assert adapter.validate(schema, {"n": 2}) == []
    assert [(issue.path, issue.keyword) for issue in adapter.validate(schema, {"n": "two"})] == [
        ("/n", "type")
    ]
    assert [issue.keyword for issue in adapter.validate(schema, {"n": 0})] == ["minimum"]
    assert [issue.keyword for issue in adapter.validate(schema, {})] == ["required"]


def test_a_wide_integer_subclass_is_read_without_its_own_float_conversion() -> None:
    # Its __float__ would run Python code in the middle of the core's walk over the schema
    # (here: changing the dict being walked, which made the core panic); it is never called.
    schema: dict[str, Any] = {"type": "integer"}
    called: list[bool] = []

    class Wide(int):
        def __float__(self) -> float:
            called.append(True)
            schema["extra"] = 1
            raise KeyboardInterrupt

    schema["maximum"] = Wide(2**70)
    check_schema(schema)
    adapter = create_json_schema_adapter()
    assert adapter.validate(schema, 5) == []
    assert [issue.keyword for issue in adapter.validate(schema, 2**71)] == ["maximum"]
    assert called == []


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_raised_while_the_core_asks_what_a_value_is_propagates(
    interrupt: type[BaseException],
) -> None:
    class Shifty:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            raise interrupt

    schema = {"type": "object", "properties": {"a": Shifty()}}
    with pytest.raises(interrupt):
        check_schema(schema)
