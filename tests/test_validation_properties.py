"""Property tests for JSON Schema validation: no crash on any JSON, agreement with the Python
``jsonschema`` package, and the same answers from many threads as from one."""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from prism_tools import (
    ArgumentIssue,
    ArgumentsError,
    SchemaGuardError,
    ToolDefinition,
    check_schema,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
    parse_tool_arguments,
)

# --- arbitrary JSON ---------------------------------------------------------------------------

KEYWORDS = [
    "type", "properties", "items", "prefixItems", "required", "enum", "const", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
    "pattern", "patternProperties", "additionalProperties", "allOf", "anyOf", "oneOf", "not",
    "if", "then", "else", "$ref", "$defs", "$anchor", "$dynamicAnchor", "$dynamicRef", "$id",
    "$schema", "contains", "minContains", "maxContains", "uniqueItems", "minItems", "maxItems",
    "propertyNames", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
    "unevaluatedItems", "format", "minProperties", "maxProperties", "dependencies",
    "definitions", "additionalItems", "contentSchema", "__proto__", "constructor",
]  # fmt: skip
SCHEMA_WORDS = [
    "#", "#/$defs/a", "#/properties/a", "#a", "object", "string", "integer", "number", "array",
    "boolean", "null", "^a+$", "(", "a", "https://example.com/s", "other.json",
    "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema",
]  # fmt: skip

keys = st.sampled_from(KEYWORDS) | st.text(max_size=8)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.integers()  # beyond 64 bits and beyond the float range
    | st.floats()  # nan and infinities included
    | st.text(max_size=12)
    | st.sampled_from(SCHEMA_WORDS)
)
json_documents = st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)

ADAPTER = create_json_schema_adapter(max_compiled_schemas=32)


def assert_issue_list(found: Any) -> None:
    assert isinstance(found, list)
    for issue in found:
        assert isinstance(issue, ArgumentIssue)
        assert isinstance(issue.path, str)
        assert issue.path == "" or issue.path.startswith("/")
        assert isinstance(issue.keyword, str)
        assert issue.keyword
        assert isinstance(issue.message, str)


@given(json_documents, json_documents)
@example({"$ref": "#"}, 1)
@example({"$defs": {"a": {"$ref": "#/$defs/a"}}, "items": {"$ref": "#/$defs/a"}}, [1])
@example({"minimum": float("nan")}, 1)
@example({"type": "integer"}, 10**400)
@example({"enum": [10**30]}, 10**30)
@example({"pattern": "("}, "x")
@example({"items": {"$ref": "#"}}, [[[[[[]]]]]])
def test_any_json_as_schema_and_instance_never_crashes(schema: Any, instance: Any) -> None:
    refusal: SchemaGuardError | None = None
    try:
        check_schema(schema)
    except SchemaGuardError as err:
        refusal = err
    if refusal is not None:
        assert refusal.code == "ERR_PRISM_SCHEMA_GUARD"
        assert isinstance(refusal.reason, str)
        assert refusal.reason.startswith("schema_")
        assert len(str(refusal)) < 1000
        with pytest.raises(SchemaGuardError):
            ADAPTER.validate(schema, instance)
        return
    # A schema that passed the guards never raises while validating anything.
    assert_issue_list(ADAPTER.validate(schema, instance))
    assert_issue_list(ADAPTER.validate(schema, schema))
    assert ADAPTER.is_valid(schema, instance) == (ADAPTER.validate(schema, instance) == [])


@given(json_documents)
def test_schema_text_and_schema_dict_agree(schema: Any) -> None:
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, OverflowError):  # pragma: no cover - json.dumps accepts all of these
        return
    outcomes = []
    for form in (schema, text, text.encode()):
        try:
            check_schema(form)
            outcomes.append(True)
        except SchemaGuardError:
            outcomes.append(False)
    assert outcomes[0] == outcomes[1] == outcomes[2]


@given(st.text(max_size=200) | st.binary(max_size=200))
@example("")
@example("[" * 1000)
@example('{"a": 1} x')
def test_any_text_parses_to_a_dict_or_raises_arguments_error(text: str | bytes) -> None:
    parsed: Any = None
    refusal: ArgumentsError | None = None
    try:
        parsed = parse_tool_arguments(text)
    except ArgumentsError as err:
        refusal = err
    if refusal is not None:
        assert refusal.code == "invalid_json_arguments"
        assert len(str(refusal)) < 300
    else:
        assert isinstance(parsed, dict)


finite_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
finite_documents = st.recursive(
    finite_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@given(st.dictionaries(st.text(max_size=8), finite_documents, max_size=6))
def test_argument_text_round_trips_like_json_loads(arguments: dict[str, Any]) -> None:
    text = json.dumps(arguments, ensure_ascii=False)
    assert parse_tool_arguments(text) == json.loads(text)
    assert parse_tool_arguments(text.encode()) == json.loads(text)
    # Every non-ASCII character as a \u escape (pairs beyond the basic plane), pretty-printed.
    escaped = json.dumps(arguments, ensure_ascii=True, indent=2)
    assert parse_tool_arguments(escaped) == json.loads(escaped)


class Refused(Exception):
    """What the reference reading below refuses on purpose."""


def refuse(_: str) -> Any:
    raise Refused


def finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise Refused  # beyond a float's range: refused, as 1e400 is
    return value


def float_sized_int(text: str) -> int:
    finite_float(text)  # an integer a float cannot hold is out of range, as 1e400 is
    return int(text)


def holds_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= character <= "\udfff" for character in value)
    if isinstance(value, dict):
        return any(
            holds_lone_surrogate(key) or holds_lone_surrogate(item) for key, item in value.items()
        )
    if isinstance(value, list):
        return any(holds_lone_surrogate(item) for item in value)
    return False


def as_json_loads_reads(text: str) -> Any:
    """``json.loads`` of ``text`` with the refusals the argument parser documents: NaN and the
    infinities, numbers beyond a float's range, and lone surrogate escapes; ``Refused`` for
    those and for text that is not a JSON object. Blank text is an empty object."""
    if not text.strip(" \t\n\r"):
        return {}
    try:
        value = json.loads(
            text, parse_constant=refuse, parse_float=finite_float, parse_int=float_sized_int
        )
    except (ValueError, RecursionError) as err:
        raise Refused from err
    if not isinstance(value, dict) or holds_lone_surrogate(value):
        raise Refused
    return value


def same_json(left: Any, right: Any) -> bool:
    """Equal values of equal types all the way down (1, 1.0 and True are three values)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(same_json(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same_json, left, right))
    if isinstance(left, float):
        return left == right and str(left) == str(right)  # -0.0 is not 0.0
    return bool(left == right)


TEXT_EDITS = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.sampled_from(
            [
                *'{}[]",:0123456789.eE+- \t\n\\/ubfnrtx\x00\x1f\u2028aé',
                "\ud800",
                "NaN",
                "Infinity",
                "true",
                "null",
                "\\ud800",
                "\\udc00",
                "\\u00e9",
                "01",
                "1.",
                ".5",
                "1e400",
                "-0",
                "\ufeff",
                "9" * 25,
            ]
        ),
        st.sampled_from(["insert", "replace", "delete"]),
    ),
    max_size=3,
)


@given(
    st.dictionaries(st.text(max_size=6), finite_documents, max_size=4), TEXT_EDITS, st.booleans()
)
@example({"n": 1}, [(6, "-0", "replace")], False)
@example({"n": 1}, [(6, "9" * 25, "replace")], False)
def test_argument_text_is_read_as_json_loads_reads_it(
    arguments: dict[str, Any], edits: list[tuple[int, str, str]], ascii_only: bool
) -> None:
    # Text from a model, valid or broken anywhere: the parser takes exactly what Python's json
    # takes (but for the refusals it documents) and reads it to the same values and types.
    text = json.dumps(arguments, ensure_ascii=ascii_only)
    for position, piece, edit in edits:
        at = position % (len(text) + 1)
        if edit == "insert":
            text = text[:at] + piece + text[at:]
        elif edit == "replace":
            text = text[:at] + piece + text[at + 1 :]
        else:
            text = text[:at] + text[at + 1 :]
    try:
        expected = as_json_loads_reads(text)
    except Refused:
        event("refused")
        with pytest.raises(ArgumentsError):
            parse_tool_arguments(text)
        return
    event("read")
    assert same_json(parse_tool_arguments(text), expected)


def container_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((container_depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((container_depth(item) for item in value), default=0)
    return 0


tricky_text = st.text(alphabet='[]{}"\\ab:,', max_size=12)
tricky_documents = st.recursive(
    st.none() | st.integers(-(2**63), 2**63 - 1) | tricky_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(tricky_text, children, max_size=3)
    ),
    max_leaves=25,
)


@given(st.dictionaries(tricky_text, tricky_documents, max_size=4), st.integers(1, 8))
@example({"a": "\\"}, 1)
@example({'"[': [["]\\"]]}, 3)
def test_depth_guard_counts_only_real_containers(arguments: dict[str, Any], limit: int) -> None:
    # Brackets, quotes and backslashes inside strings must not fool the depth scan.
    for text in (json.dumps(arguments), json.dumps(arguments, ensure_ascii=False, indent=1)):
        if container_depth(arguments) <= limit:
            assert parse_tool_arguments(text, max_depth=limit) == arguments
        else:
            with pytest.raises(ArgumentsError) as caught:
                parse_tool_arguments(text, max_depth=limit)
            assert caught.value.reason == "arguments_too_deep"


# --- differential against the Python jsonschema package ---------------------------------------

SCHEMAS: dict[str, dict[str, Any]] = {
    "weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 20},
            "units": {"enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "exclusiveMinimum": 0, "maximum": 100},
            "filters": {
                "type": "array",
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {
                        "field": {"type": "string"},
                        "op": {"enum": ["eq", "ne", "lt", "gt"]},
                        "value": {"type": ["string", "number", "boolean", "null"]},
                    },
                    "required": ["field", "op"],
                },
            },
        },
        "required": ["query"],
    },
    "matrix": {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "uniqueItems": True,
                "items": {
                    "type": "array",
                    "items": {"type": "number"},
                    "minItems": 1,
                    "maxItems": 3,
                },
            }
        },
        "required": ["rows"],
    },
    "shape": {
        "type": "object",
        "properties": {
            "shape": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"const": "circle"},
                            "r": {"type": "number", "minimum": 0},
                        },
                        "required": ["kind", "r"],
                    },
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"const": "rect"},
                            "w": {"type": "number"},
                            "h": {"type": "number"},
                        },
                        "required": ["kind", "w", "h"],
                    },
                ]
            }
        },
        "required": ["shape"],
    },
    "identifier": {
        "type": "object",
        "properties": {
            "id": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 3}]}
        },
        "additionalProperties": {"type": "boolean"},
    },
    "tree": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["value"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "required": ["root"],
    },
    "email": {
        "type": "object",
        "properties": {
            "to": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "uniqueItems": True,
            },
            "cc": {"type": "array", "items": {"type": "string"}},
            "priority": {"type": "integer", "enum": [1, 2, 3]},
        },
        "required": ["to"],
        "dependentRequired": {"cc": ["to"]},
        "minProperties": 1,
        "maxProperties": 3,
    },
    "point": {
        "type": "object",
        "properties": {
            "point": {
                "type": "array",
                "prefixItems": [{"type": "number"}, {"type": "number"}],
                "items": False,
                "minItems": 2,
            }
        },
    },
    "conditional": {
        "type": "object",
        "properties": {"mode": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
        "if": {"properties": {"mode": {"const": "a"}}, "required": ["mode"]},
        "then": {"required": ["x"]},
        "else": {"not": {"required": ["x"]}},
    },
    "tags": {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "contains": {"type": "string", "maxLength": 2},
                "minContains": 1,
                "maxContains": 2,
            },
            "n": {"type": "number", "multipleOf": 5},
        },
        "propertyNames": {"maxLength": 5},
    },
}
REFERENCE = {name: Draft202012Validator(schema) for name, schema in SCHEMAS.items()}

NAMES = sorted(
    {key for schema in SCHEMAS.values() for key in schema.get("properties", {})}
    | {"value", "children", "kind", "r", "w", "h", "field", "op", "mode", "x"}
)
instance_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-10, max_value=200)
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "a", "ab", "abc", "c", "f", "eq", "gt", "circle", "rect", "b", "xyz"])
)
instance_keys = st.sampled_from(NAMES) | st.text(max_size=6)
instance_values = st.recursive(
    instance_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(instance_keys, children, max_size=4)
    ),
    max_leaves=20,
)
instances = st.dictionaries(instance_keys, instance_values, max_size=4)

DIFFERENTIAL = create_json_schema_adapter()


@given(st.sampled_from(sorted(SCHEMAS)), instances)
@example("weather", {"city": "Oslo", "days": 3})
@example("weather", {"city": "Oslo", "days": 3.0})
@example("weather", {"city": "", "days": 15})
@example("search", {"query": "q", "filters": [{"field": "a", "op": "eq", "value": None}]})
@example("search", {"query": "q", "limit": 0})
@example("matrix", {"rows": [[1, 2], [1, 2.0]]})
@example("matrix", {"rows": [[1], [True]]})
@example("shape", {"shape": {"kind": "circle", "r": 1}})
@example("shape", {"shape": {"kind": "circle", "r": 1, "w": 1, "h": 1}})
@example("identifier", {"id": "abc", "flag": True})
@example("identifier", {"id": -1})
@example("tree", {"root": {"value": 1, "children": [{"value": 2, "children": []}]}})
@example("tree", {"root": {"value": 1, "children": [{"value": "2"}]}})
@example("email", {"to": ["a", "a"]})
@example("email", {"to": ["a"], "cc": [], "priority": 2})
@example("point", {"point": [1, 2]})
@example("point", {"point": [1, 2, 3]})
@example("conditional", {"mode": "a"})
@example("conditional", {"mode": "b", "x": 1})
@example("tags", {"tags": ["ab", "long"], "n": 10})
@example("tags", {"tags": ["a", "b", "c"]})
@example("tags", {"toolongname": 1})
def test_agrees_with_python_jsonschema(name: str, instance: dict[str, Any]) -> None:
    expected = REFERENCE[name].is_valid(instance)
    assert DIFFERENTIAL.is_valid(SCHEMAS[name], instance) == expected
    assert (DIFFERENTIAL.validate(SCHEMAS[name], instance) == []) == expected
    # The same arguments arriving as text agree too.
    parsed = parse_tool_arguments(json.dumps(instance))
    assert DIFFERENTIAL.is_valid(SCHEMAS[name], parsed) == REFERENCE[name].is_valid(parsed)


def test_differential_schemas_are_accepted_by_the_guards() -> None:
    for schema in SCHEMAS.values():
        check_schema(schema)
        Draft202012Validator.check_schema(schema)


# --- one adapter, many threads ----------------------------------------------------------------

STRESS_SCHEMAS = [
    SCHEMAS["weather"],
    SCHEMAS["search"],
    SCHEMAS["tree"],
    SCHEMAS["email"],
    {"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["n"]},
    {"type": "object", "properties": {"n": {"type": "integer", "maximum": 7}}, "required": ["n"]},
]
STRESS_VALUES: list[dict[str, Any]] = [
    {"city": "Oslo"},
    {"city": 1},
    {"query": "q", "limit": 5},
    {"query": 5},
    {"root": {"value": 1, "children": [{"value": 2}]}},
    {"root": {"value": "x"}},
    {"to": ["a"]},
    {"to": []},
    {"n": 2},
    {"n": 5},
    {"n": 9},
    {},
]
STRESS_JOBS = [
    (schema_index, value_index)
    for _ in range(160)
    for schema_index in range(len(STRESS_SCHEMAS))
    for value_index in range(len(STRESS_VALUES))
]  # 11,520 validations


def issue_triples(found: list[ArgumentIssue]) -> list[tuple[str, str, str]]:
    return [(issue.path, issue.keyword, issue.message) for issue in found]


@pytest.mark.timeout(120)
def test_one_adapter_many_threads_same_answers() -> None:
    single = create_json_schema_adapter()
    baseline = {
        (s, v): issue_triples(single.validate(STRESS_SCHEMAS[s], STRESS_VALUES[v]))
        for s in range(len(STRESS_SCHEMAS))
        for v in range(len(STRESS_VALUES))
    }
    assert any(baseline.values())
    assert not all(baseline.values())

    # Two compiled schemas for six in use: the threads keep evicting each other's validators.
    shared = create_json_schema_adapter(max_compiled_schemas=2)

    def job(indices: tuple[int, int]) -> list[tuple[str, str, str]]:
        schema_index, value_index = indices
        return issue_triples(
            shared.validate(STRESS_SCHEMAS[schema_index], STRESS_VALUES[value_index])
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(job, STRESS_JOBS))
    wrong = [
        (indices, answer)
        for indices, answer in zip(STRESS_JOBS, answers, strict=True)
        if answer != baseline[indices]
    ]
    assert wrong == [], f"{len(wrong)} of {len(STRESS_JOBS)} answers differ, e.g. {wrong[:3]}"
    info = shared.cache_info()
    assert info.currsize <= 2
    assert info.misses > len(STRESS_SCHEMAS)


@pytest.mark.timeout(120)
def test_one_dispatch_validator_many_threads_never_passes_invalid_arguments() -> None:
    validator = create_json_schema_tool_argument_validator(max_compiled_schemas=2)
    tools = [
        ToolDefinition(name=f"t{index}", parameters=schema)
        for index, schema in enumerate(STRESS_SCHEMAS)
    ]
    reference = [Draft202012Validator(schema) for schema in STRESS_SCHEMAS]

    def job(indices: tuple[int, int]) -> bool:
        schema_index, value_index = indices
        outcome = validator(tools[schema_index], STRESS_VALUES[value_index])
        return outcome is None

    with ThreadPoolExecutor(max_workers=8) as pool:
        accepted = list(pool.map(job, STRESS_JOBS))
    wrong = [
        indices
        for indices, ok in zip(STRESS_JOBS, accepted, strict=True)
        if ok != reference[indices[0]].is_valid(STRESS_VALUES[indices[1]])
    ]
    assert wrong == [], f"{len(wrong)} of {len(STRESS_JOBS)} calls got the wrong verdict"
    assert validator.cache_info().currsize <= 2


@pytest.mark.timeout(60)
def test_one_adapter_many_threads_never_raises_while_schemas_churn() -> None:
    # More schemas in use than the adapter keeps compiled: every call may compile and evict.
    # A very short thread switch interval makes the threads interleave inside that
    # bookkeeping; no call may fail because another thread evicted at the same moment.
    adapter = create_json_schema_adapter(max_compiled_schemas=1)
    schemas = [{"maximum": bound} for bound in range(4)]
    failures: list[str] = []
    wrong: list[tuple[int, int]] = []
    stop = threading.Event()

    def worker(start: int) -> None:
        index = start
        while not stop.is_set():
            bound = index % len(schemas)
            value = index % 6
            try:
                if adapter.is_valid(schemas[bound], value) != (value <= bound):
                    wrong.append((bound, value))
            except Exception as err:
                failures.append(f"{type(err).__name__}: {err}")
                stop.set()
            index += 1

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=worker, args=(start,)) for start in range(8)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not stop.is_set():
            stop.wait(0.05)
        stop.set()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(previous)
    assert failures == []
    assert wrong == []
