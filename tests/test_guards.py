"""Guard boundaries: a limit reached exactly passes, one more fails (schemas and arguments)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prism_tools import (
    ArgumentsError,
    SchemaGuardError,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    check_schema,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
    create_tool_registry,
    dispatch_tool_call,
    parse_tool_arguments,
)

MIB = 1024 * 1024


def canonical_size(schema: Any) -> int:
    """Bytes of the compact JSON form, which is what ``max_schema_bytes`` measures."""
    return len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode())


def refused(schema: Any, **limits: int) -> SchemaGuardError:
    with pytest.raises(SchemaGuardError) as caught:
        check_schema(schema, **limits)
    return caught.value


def refused_arguments(text: str | bytes, **limits: int) -> ArgumentsError:
    with pytest.raises(ArgumentsError) as caught:
        parse_tool_arguments(text, **limits)
    assert caught.value.code == "invalid_json_arguments"
    return caught.value


def not_chain(depth: int) -> dict[str, Any]:
    """``depth`` nested schema objects: ``{"not": {"not": ... {}}}``."""
    schema: dict[str, Any] = {}
    for _ in range(depth - 1):
        schema = {"not": schema}
    return schema


def nested_arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- schema bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "description": "plain ascii text"},
        {"description": "é☃😀" * 20, "enum": [1, {"b": None}, [True]]},
        {"properties": {"a": {"type": "integer"}, "b": {"type": "array"}}, "required": ["a"]},
    ],
)
def test_schema_bytes_boundary(schema: dict[str, Any]) -> None:
    size = canonical_size(schema)
    check_schema(schema, max_schema_bytes=size)
    error = refused(schema, max_schema_bytes=size - 1)
    assert error.reason == "schema_too_large"
    assert f"{size} bytes" in str(error)
    assert f"max_schema_bytes={size - 1}" in str(error)


def test_schema_bytes_boundary_for_schema_text() -> None:
    schema = {"type": "object", "description": "ünïcödé", "required": ["a"]}
    text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode())
    check_schema(text, max_schema_bytes=size)
    check_schema(text.encode(), max_schema_bytes=size)
    assert refused(text, max_schema_bytes=size - 1).reason == "schema_too_large"
    assert refused(text.encode(), max_schema_bytes=size - 1).reason == "schema_too_large"


def test_schema_bytes_default_and_ceiling() -> None:
    head = canonical_size({"description": ""})
    at_default = {"description": "x" * (262_144 - head)}
    check_schema(at_default)
    assert refused({"description": "x" * (262_145 - head)}).reason == "schema_too_large"
    at_ceiling = {"description": "x" * (4 * MIB - head)}
    check_schema(at_ceiling, max_schema_bytes=4 * MIB)
    over = {"description": "x" * (4 * MIB + 1 - head)}
    assert refused(over, max_schema_bytes=4 * MIB).reason == "schema_too_large"


# --- schema depth -----------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3, 17, 64, 256])
def test_schema_depth_boundary(limit: int) -> None:
    check_schema(not_chain(limit), max_schema_depth=limit)
    check_schema(json.dumps(not_chain(limit)), max_schema_depth=limit)
    error = refused(not_chain(limit + 1), max_schema_depth=limit)
    assert error.reason == "schema_too_deep"
    assert f"max_schema_depth={limit}" in str(error)
    error = refused(json.dumps(not_chain(limit + 1)).encode(), max_schema_depth=limit)
    assert error.reason == "schema_too_deep"


def test_schema_depth_default() -> None:
    check_schema(not_chain(64))
    assert refused(not_chain(65)).reason == "schema_too_deep"


def test_schema_depth_counts_every_container() -> None:
    # root object, the properties map, the property schema: three levels.
    properties = {"properties": {"a": {}}}
    check_schema(properties, max_schema_depth=3)
    assert refused(properties, max_schema_depth=2).reason == "schema_too_deep"
    # Arrays inside data count too: root, enum array, two inner arrays.
    data = {"enum": [[[1]]]}
    check_schema(data, max_schema_depth=4)
    assert refused(data, max_schema_depth=3).reason == "schema_too_deep"
    # Scalars do not.
    check_schema({"type": "string", "minLength": 1}, max_schema_depth=1)


def test_brackets_inside_schema_strings_do_not_count_as_depth() -> None:
    text = json.dumps({"description": "[[[[{{{{" * 100 + '\\"[[['})
    check_schema(text, max_schema_depth=1)


# --- schema keywords --------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 10, 500])
def test_schema_keyword_boundary(count: int) -> None:
    # One key at the root ("properties") plus one per property name.
    schema = {"properties": {f"p{index}": {} for index in range(count)}}
    check_schema(schema, max_schema_keywords=count + 1)
    error = refused(schema, max_schema_keywords=count)
    assert error.reason == "schema_too_many_keywords"
    assert f"max_schema_keywords={count}" in str(error)


def test_schema_keywords_count_keys_of_every_object() -> None:
    # root: 2, properties map: 1, "a": 2, the object inside enum: 2 -> 7.
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "enum": [{"x": 1, "y": 2}]}},
    }
    check_schema(schema, max_schema_keywords=7)
    assert refused(schema, max_schema_keywords=6).reason == "schema_too_many_keywords"


def test_schema_keyword_default() -> None:
    at_limit = {"properties": {f"p{index}": {} for index in range(9_999)}}
    check_schema(at_limit)
    over = {"properties": {f"p{index}": {} for index in range(10_000)}}
    assert refused(over).reason == "schema_too_many_keywords"


# --- schema refs ------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 5, 128, 1024])
def test_schema_ref_boundary(count: int) -> None:
    schema = {
        "$defs": {"s": {"type": "string"}},
        "properties": {f"p{index}": {"$ref": "#/$defs/s"} for index in range(count)},
    }
    check_schema(schema, max_refs=count)
    error = refused(schema, max_refs=count - 1)
    assert error.reason == "schema_too_many_refs"
    assert f"max_refs={count - 1}" in str(error)


def test_a_single_ref_passes_max_refs_one() -> None:
    schema = {"$defs": {"s": {}}, "properties": {"a": {"$ref": "#/$defs/s"}}}
    check_schema(schema, max_refs=1)
    assert refused({**schema, "items": {"$ref": "#/$defs/s"}}, max_refs=1).reason == (
        "schema_too_many_refs"
    )


def test_schema_refs_count_dynamic_refs_too() -> None:
    schema = {
        "$dynamicAnchor": "node",
        "properties": {"a": {"$dynamicRef": "#node"}, "b": {"$ref": "#"}},
    }
    check_schema(schema, max_refs=2)
    assert refused(schema, max_refs=1).reason == "schema_too_many_refs"


def test_schema_ref_default() -> None:
    def with_refs(count: int) -> dict[str, Any]:
        return {
            "$defs": {"s": {}},
            "properties": {f"p{index}": {"$ref": "#/$defs/s"} for index in range(count)},
        }

    check_schema(with_refs(128))
    assert refused(with_refs(129)).reason == "schema_too_many_refs"


# --- schema expansion -------------------------------------------------------------------------


def chain_definitions(
    levels: int, applicator: str, width: int, leaf: dict[str, Any]
) -> dict[str, Any]:
    """``levels`` definitions, each an ``applicator`` of ``width`` references to the next, then
    ``leaf``: ``width ** levels`` applications of ``leaf`` to one value."""
    defs: dict[str, Any] = {
        f"d{level}": {applicator: [{"$ref": f"#/$defs/d{level + 1}"}] * width}
        for level in range(levels)
    }
    defs[f"d{levels}"] = leaf
    return defs


def branching_chain(levels: int, width: int = 2) -> dict[str, Any]:
    """An ``anyOf`` chain (``chain_definitions``) ending in a string, at the root: a schema of a
    few hundred bytes that applies ``width ** levels`` schemas to one value."""
    defs = chain_definitions(levels, "anyOf", width, {"type": "string"})
    return {"$defs": defs, "$ref": "#/$defs/d0"}


MEMBER_TWICE = {
    "type": "object",
    "properties": {"a": {"$ref": "#"}},
    "patternProperties": {"^a": {"$ref": "#"}},
}


@pytest.mark.parametrize(
    "schema",
    [branching_chain(30), branching_chain(14, width=3), MEMBER_TWICE],
    ids=["anyOf-chain", "wide-chain", "member-twice"],
)
def test_references_that_multiply_validation_are_refused_before_any_validation(
    schema: dict[str, Any],
) -> None:
    # Each passes every other guard (a few hundred bytes, few keywords and references), and
    # validating one value against it would take hours.
    error = refused(schema)
    assert error.reason == "schema_expansion_too_large"
    assert "max_schema_keywords=10000" in str(error)
    assert "max_argument_depth=64" in str(error)
    adapter = create_json_schema_adapter()
    with pytest.raises(SchemaGuardError):
        adapter.validate(schema, {"a": {"a": {"a": 1}}})


def test_the_expansion_bound_is_keywords_times_argument_depth() -> None:
    # 2 ** 12 = 4,096 leaves (a few keywords each) fit 10,000 x 64, and not 60 x 64 or 100 x 2
    # (the schema itself holds about 50 keywords).
    chain = branching_chain(12)
    check_schema(chain)
    assert refused(chain, max_schema_keywords=60).reason == "schema_expansion_too_large"
    assert refused(chain, max_schema_keywords=100, max_argument_depth=2).reason == (
        "schema_expansion_too_large"
    )
    # A member checked twice per level doubles per level: 2 ** 8 fits 64 x 8 levels, not 64.
    check_schema(MEMBER_TWICE, max_argument_depth=8)
    assert refused(MEMBER_TWICE, max_argument_depth=64).reason == "schema_expansion_too_large"


def all_of_chain(levels: int, leaf: dict[str, Any]) -> dict[str, Any]:
    """An ``allOf`` chain of two references a level (``chain_definitions``) ending in ``leaf``,
    applied to the member ``s``: ``2 ** levels`` applications of ``leaf`` to that value."""
    defs = chain_definitions(levels, "allOf", 2, leaf)
    return {"$defs": defs, "type": "object", "properties": {"s": {"$ref": "#/$defs/d0"}}}


async def test_a_schema_that_reads_one_string_too_many_times_is_refused() -> None:
    # 65,536 passes of one pattern over a string: a valid call with 1 MB of text took 24 s,
    # and the keyword count alone (well within the expansion bound) did not show it.
    schema = all_of_chain(16, {"type": "string", "pattern": "^[a-z ]+$"})
    error = refused(schema)
    assert error.reason == "schema_expansion_too_large"
    assert "more than 512 pattern, length and content keywords" in str(error)
    ran: list[object] = []

    async def execute(args: dict[str, Any], context: ToolExecutionContext) -> str:
        ran.append(args)
        return "ran"

    tool = ToolDefinition(name="t", parameters=schema, execute=execute)
    result = await dispatch_tool_call(
        ToolCall(id="c", name="t", arguments={"s": "a" * 1000}),
        registry=create_tool_registry([tool]),
        context=ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c"),
        validate=create_json_schema_tool_argument_validator(),
    )
    assert result.error is not None
    assert result.error.code == "schema_guard"
    assert result.error.details == {"reason": "schema_expansion_too_large"}
    assert ran == []
    # The same checks on a member, reached from every schema of the chain, or from an `allOf`
    # of 600 without any reference, are refused too.
    member = {"properties": {"s": {"pattern": "^[a-z ]+$"}}}
    assert refused(all_of_chain(16, member)).reason == "schema_expansion_too_large"
    assert refused({"allOf": [member] * 600}).reason == "schema_expansion_too_large"
    check_schema({"allOf": [member] * 500})
    # 512 fit, and the call is checked.
    fits = all_of_chain(9, {"type": "string", "pattern": "^[a-z ]+$"})
    check_schema(fits)
    assert create_json_schema_adapter().validate(fits, {"s": "a b"}) == []
    assert create_json_schema_adapter().validate(fits, {"s": "A"})[0].keyword == "pattern"


@pytest.mark.parametrize("keyword", ["unevaluatedProperties", "unevaluatedItems"])
@pytest.mark.parametrize("applicator", ["allOf", "anyOf", "oneOf"])
def test_unevaluated_keywords_nested_deep_in_place_are_refused(
    keyword: str, applicator: str
) -> None:
    # Each works out what the schemas inside it evaluate by checking them again: twenty nested
    # (879 bytes) took 3.6 s to validate {"a": 1}, thirty would take hours.
    def nested(depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"type": ["object", "array"]}
        for _ in range(depth):
            node = {applicator: [node], keyword: False}
        return node

    error = refused(nested(20))
    assert error.reason == "schema_expansion_too_large"
    assert "with unevaluatedProperties or unevaluatedItems one inside another" in str(error)
    # Eight fit, and still check what they evaluate.
    fits = nested(8)
    check_schema(fits)
    adapter = create_json_schema_adapter()
    assert adapter.validate(fits, {}) == []
    assert adapter.validate(fits, []) == []
    stray = {"a": 1} if keyword == "unevaluatedProperties" else [1]
    assert adapter.validate(fits, stray) != []


@pytest.mark.parametrize(
    "schema",
    [
        {
            "anyOf": [
                {"type": ["null", "boolean", "number", "string"]},
                {"type": "array", "items": {"$ref": "#"}},
                {"type": "object", "additionalProperties": {"$ref": "#"}},
            ]
        },
        {
            "$defs": {
                "expr": {
                    "anyOf": [
                        {"properties": {"and": {"items": {"$ref": "#/$defs/expr"}}}},
                        {"properties": {"or": {"items": {"$ref": "#/$defs/expr"}}}},
                        {"properties": {"not": {"$ref": "#/$defs/expr"}}},
                        {"properties": {"field": {"type": "string"}, "equals": {}}},
                    ]
                }
            },
            "$ref": "#/$defs/expr",
        },
        {"properties": {"children": {"items": {"$ref": "#"}}, "name": {"type": "string"}}},
        {"anyOf": [{"$ref": "#"}, {"type": "string"}]},
        branching_chain(64, width=1),
    ],
    ids=["json-value", "expression-tree", "tree", "in-place-loop", "long-alias-chain"],
)
def test_schemas_that_recurse_once_per_level_pass_and_validate(schema: dict[str, Any]) -> None:
    check_schema(schema, max_refs=128)
    deep: Any = "leaf"
    for _ in range(30):
        deep = {"children": [deep], "and": [1, "x"], "not": {"name": "x"}}
    assert isinstance(create_json_schema_adapter().validate(schema, deep), list)


async def test_a_tool_whose_schema_multiplies_validation_never_runs() -> None:
    from prism_tools import (
        ToolCall,
        ToolDefinition,
        ToolExecutionContext,
        create_json_schema_tool_argument_validator,
        create_tool_registry,
        dispatch_tool_call,
    )

    ran: list[Any] = []
    parameters = {
        "type": "object",
        "properties": {"q": {"$ref": "#/$defs/d0"}},
        "$defs": branching_chain(30)["$defs"],
    }
    tool = ToolDefinition(
        "t", execute=lambda args, context: ran.append(args), parameters=parameters
    )
    result = await dispatch_tool_call(
        ToolCall("c1", "t", {"q": "x"}),
        create_tool_registry([tool]),
        ToolExecutionContext("s1", "r1", "c1"),
        validate=create_json_schema_tool_argument_validator(),
    )
    assert ran == []  # the tool did not run
    assert result.error is not None
    assert result.metadata == {"blocked_reason": "validation_failed"}
    assert "max_schema_keywords" in result.error.message
    with pytest.raises(SchemaGuardError):
        create_tool_registry([tool], check_schemas=True)


# --- argument bytes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', '{"city": "Zürich ☃"}', '{"k": "😀"}', '{"nested": {"list": [1, 2, 3]}}'],
)
def test_argument_bytes_boundary(text: str) -> None:
    size = len(text.encode())
    expected = json.loads(text)
    assert parse_tool_arguments(text, max_bytes=size) == expected
    assert parse_tool_arguments(text.encode(), max_bytes=size) == expected
    error = refused_arguments(text, max_bytes=size - 1)
    assert error.reason == "arguments_too_large"
    assert f"tool arguments are {size} bytes, more than max_argument_bytes={size - 1}" in str(error)
    assert refused_arguments(text.encode(), max_bytes=size - 1).reason == "arguments_too_large"


def test_argument_bytes_are_checked_before_anything_else() -> None:
    # Whitespace would be an empty object, bad JSON would be a parse error: size wins first.
    assert refused_arguments(" " * 11, max_bytes=10).reason == "arguments_too_large"
    assert refused_arguments("{" * 11, max_bytes=10).reason == "arguments_too_large"
    assert refused_arguments("[1, 2, 3, 4]", max_bytes=5).reason == "arguments_too_large"


def test_argument_bytes_default() -> None:
    head = len('{"b":""}')
    at_limit = '{"b":"' + "x" * (MIB - head) + '"}'
    assert len(parse_tool_arguments(at_limit)["b"]) == MIB - head  # type: ignore[arg-type]
    over = '{"b":"' + "x" * (MIB + 1 - head) + '"}'
    assert refused_arguments(over).reason == "arguments_too_large"


# --- argument depth ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3, 10, 64, 256])
def test_argument_depth_boundary(limit: int) -> None:
    at_limit = '{"a":' + (nested_arrays(limit - 1) or "1") + "}"
    parsed = parse_tool_arguments(at_limit, max_depth=limit)
    assert isinstance(parsed, dict)
    over = '{"a":' + nested_arrays(limit) + "}"
    error = refused_arguments(over, max_depth=limit)
    assert error.reason == "arguments_too_deep"
    assert f"max_argument_depth={limit}" in str(error)


def test_argument_depth_default() -> None:
    parse_tool_arguments('{"a":' + nested_arrays(63) + "}")
    assert refused_arguments('{"a":' + nested_arrays(64) + "}").reason == "arguments_too_deep"


def test_argument_depth_counts_objects_and_arrays_alike() -> None:
    mixed = '{"a": [{"b": [{}]}]}'  # five containers
    parse_tool_arguments(mixed, max_depth=5)
    assert refused_arguments(mixed, max_depth=4).reason == "arguments_too_deep"


def test_brackets_inside_argument_strings_do_not_count() -> None:
    text = json.dumps({"code": "[[[[{{{{" * 1000, "quoted": 'a \\" [[[ "'})
    assert parse_tool_arguments(text, max_depth=1) == json.loads(text)
    escaped = '{"s": "\\\\"}'  # a string holding one backslash, then the object closes
    assert parse_tool_arguments(escaped, max_depth=1) == {"s": "\\"}


def test_depth_scan_stops_early_on_hostile_input() -> None:
    for text in ("[" * 100_000, "{" * 100_000, '{"a":' * 100_000, "[{" * 50_000):
        error = refused_arguments(text, max_depth=256)
        assert error.reason == "arguments_too_deep"


# --- adapter limits apply to its own parsing and validation -----------------------------------


def test_adapter_parse_uses_its_limits() -> None:
    adapter = create_json_schema_adapter(max_argument_bytes=10, max_argument_depth=2)
    assert adapter.parse('{"a":[]}') == {"a": []}
    with pytest.raises(ArgumentsError) as caught:
        adapter.parse('{"a": [], "b": 1}')
    assert caught.value.reason == "arguments_too_large"
    with pytest.raises(ArgumentsError) as caught:
        adapter.parse('{"a":[[]]}')
    assert caught.value.reason == "arguments_too_deep"


@pytest.mark.parametrize("limit", [1, 2, 5, 64])
def test_validation_depth_boundary_for_recursive_schemas(limit: int) -> None:
    adapter = create_json_schema_adapter(max_argument_depth=limit)
    schema = {"type": "object", "additionalProperties": {"$ref": "#"}}
    value: dict[str, Any] = {}
    for _ in range(limit - 1):
        value = {"k": value}
    assert adapter.validate(schema, value) == []
    issues = adapter.validate(schema, {"k": value})
    assert [issue.keyword for issue in issues] == ["max_argument_depth"]
    assert f"max_argument_depth={limit}" in issues[0].message


@pytest.mark.parametrize(
    ("limits", "fits", "too_much", "reason"),
    [
        ({"max_schema_depth": 2}, {"items": {}}, {"items": {"items": {}}}, "schema_too_deep"),
        (
            {"max_refs": 1},
            {"$defs": {"s": {}}, "items": {"$ref": "#/$defs/s"}},
            {"$defs": {"s": {}}, "items": {"$ref": "#/$defs/s"}, "contains": {"$ref": "#/$defs/s"}},
            "schema_too_many_refs",
        ),
        (
            {"max_schema_keywords": 3},
            {"type": "integer", "minimum": 0, "maximum": 9},
            {"type": "integer", "minimum": 0, "maximum": 9, "title": "n"},
            "schema_too_many_keywords",
        ),
        (
            {"max_schema_bytes": 20},
            {"type": "integer"},
            {"type": "integer", "minimum": 0},
            "schema_too_large",
        ),
    ],
)
def test_adapter_schema_limits_apply_to_validate(
    limits: dict[str, int], fits: dict[str, Any], too_much: dict[str, Any], reason: str
) -> None:
    adapter = create_json_schema_adapter(**limits)
    assert adapter.validate(fits, 1) == []
    with pytest.raises(SchemaGuardError) as caught:
        adapter.validate(too_much, 1)
    assert caught.value.reason == reason
