"""What validation may spend on hostile input: listing issues, and matching patterns.

Listing every issue makes the ``jsonschema`` crate hold every error at once (an ``anyOf`` error
holds its branches' errors too): a 39 KB schema whose array items each ``require`` 5,000
properties, against 800 empty objects (2.4 KB of arguments), took 1.4 GiB. Past a budget the core
now finds only the first issue, and says so; the verdict never changes. A pattern whose compiled
program passes the pattern size limit is refused when the schema is compiled.
"""

from __future__ import annotations

import json
import pathlib
import random
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from prism_tools import (
    SchemaGuardError,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    check_schema,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools.types import ErrorInfo

NAMES = [f"r{index}" for index in range(5000)]
# Each item of `a` must hold 5,000 properties: every empty object is 5,000 issues.
REQUIRED_ITEMS: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "array", "items": {"type": "object", "required": NAMES}}},
}
# The same items behind an `anyOf`, as an optional list is written: its one error would hold
# the errors of every item.
OPTIONAL_ITEMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {
            "anyOf": [
                {"type": "array", "items": {"type": "object", "required": NAMES}},
                {"type": "null"},
            ]
        }
    },
}
FIRST_ONLY = (
    "(only the first problem is listed: the arguments are too large to list every problem "
    "against this schema)"
)
UNLOCATED = "(the arguments are too large to locate their problems against this schema)"


def empty_objects(count: int) -> str:
    return '{"a":[' + ",".join(["{}"] * count) + "]}"


def tool(schema: dict[str, Any], ran: list[object] | None = None) -> ToolDefinition:
    async def execute(args: dict[str, Any], context: ToolExecutionContext) -> str:
        if ran is not None:
            ran.append(args)
        return "ran"

    return ToolDefinition(name="t", description="d", parameters=schema, execute=execute)


def report(schema: dict[str, Any], arguments: Any) -> ErrorInfo:
    validator = create_json_schema_tool_argument_validator()
    problem = validator(tool(schema), arguments)
    assert isinstance(problem, ErrorInfo)
    return problem


def details(problem: ErrorInfo) -> dict[str, Any]:
    assert isinstance(problem.details, dict)
    return problem.details


# --- listing issues ------------------------------------------------------------------------


def test_arguments_too_large_to_list_get_their_first_issue_and_say_so() -> None:
    problem = report(REQUIRED_ITEMS, json.loads(empty_objects(800)))
    assert problem.code == "invalid_tool_arguments"
    assert details(problem) == {
        "issues": [
            {"path": "/a/0", "keyword": "required", "message": '"r0" is a required property'}
        ],
        "count": 1,
        "complete": False,
    }
    assert problem.message == (
        f'Invalid arguments for tool t: /a/0: "r0" is a required property {FIRST_ONLY}'
    )


def test_every_path_to_the_issues_is_bounded() -> None:
    adapter = create_json_schema_adapter()
    text = empty_objects(800)
    arguments, found = adapter.parse_and_find(REQUIRED_ITEMS, text)
    assert found == ([("/a/0", "required", '"r0" is a required property')], 1)
    assert adapter.found(REQUIRED_ITEMS, arguments) == found
    assert [issue.to_dict() for issue in adapter.validate(REQUIRED_ITEMS, arguments)] == [
        {"path": "/a/0", "keyword": "required", "message": '"r0" is a required property'}
    ]
    assert adapter.parse_and_validate(REQUIRED_ITEMS, text)[1] == adapter.validate(
        REQUIRED_ITEMS, arguments
    )
    assert not adapter.is_valid(REQUIRED_ITEMS, arguments)
    compiled = adapter.compiled(REQUIRED_ITEMS)
    assert compiled.validate(arguments) == found
    assert compiled.parse_and_validate(text)[1] == found
    reported = compiled.report(arguments, "t")
    assert reported is not None
    assert reported[0].endswith(FIRST_ONLY)
    assert reported[2] == 1
    validator = create_json_schema_tool_argument_validator()
    checked = validator.parse_checked(tool(REQUIRED_ITEMS), text)
    assert checked is not None
    problem = checked[1]
    assert isinstance(problem, ErrorInfo)
    assert details(problem)["complete"] is False


async def test_dispatch_blocks_the_call_and_the_tool_never_runs() -> None:
    ran: list[object] = []
    registry = create_tool_registry([tool(REQUIRED_ITEMS, ran)], check_schemas=True)
    validate = create_json_schema_tool_argument_validator(missing_schema="reject")
    context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1")
    for arguments in (empty_objects(800), json.loads(empty_objects(800))):
        result = await dispatch_tool_call(
            ToolCall("c1", "t", arguments), registry=registry, context=context, validate=validate
        )
        assert result.error is not None
        assert result.error.code == "invalid_tool_arguments"
        assert details(result.error)["complete"] is False
        assert details(result.error)["count"] == 1
    assert ran == []


def test_an_anyof_that_would_hold_every_item_locates_nothing() -> None:
    problem = report(OPTIONAL_ITEMS, json.loads(empty_objects(800)))
    assert details(problem) == {
        "issues": [
            {"path": "", "keyword": "schema", "message": "the arguments do not match the schema"}
        ],
        "count": 1,
        "complete": False,
    }
    assert problem.message == (
        f"Invalid arguments for tool t: /: the arguments do not match the schema {UNLOCATED}"
    )


def test_an_anyof_of_few_branches_still_gives_its_first_issue() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"anyOf": [{"const": i} for i in range(50)]}}
        },
    }
    problem = report(schema, {"a": [-1] * 20_000})
    assert details(problem)["complete"] is False
    assert [(issue["path"], issue["keyword"]) for issue in details(problem)["issues"]] == [
        ("/a/0", "anyOf")
    ]


@pytest.mark.parametrize("schema", [REQUIRED_ITEMS, OPTIONAL_ITEMS])
@pytest.mark.parametrize("count", [0, 1, 2, 800])
def test_the_verdict_never_depends_on_the_listing(schema: dict[str, Any], count: int) -> None:
    adapter = create_json_schema_adapter()
    validator = create_json_schema_tool_argument_validator()
    invalid = json.loads(empty_objects(count))
    valid = {"a": [dict.fromkeys(NAMES, 1)] * min(count, 2)}
    assert adapter.is_valid(schema, invalid) is (count == 0)
    assert (validator(tool(schema), invalid) is None) is (count == 0)
    assert adapter.is_valid(schema, valid)
    assert validator(tool(schema), valid) is None


def test_ordinary_reports_keep_every_issue_and_the_exact_count() -> None:
    schema = {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                    "required": ["id", "name", "when"],
                },
            }
        },
    }
    problem = report(schema, {"rows": [{"id": "x"}] * 100})
    assert "complete" not in details(problem)
    assert details(problem)["count"] == 300
    assert len(details(problem)["issues"]) == 256
    assert problem.message.endswith(" more)")
    assert "too large" not in problem.message
    # Two items of the hostile schema are still listed in full.
    two = report(REQUIRED_ITEMS, json.loads(empty_objects(2)))
    assert (details(two)["count"], "complete" in details(two)) == (10_000, False)


def test_listing_stays_within_tens_of_mebibytes() -> None:
    """Peak memory in a fresh interpreter (the core's allocations are not Python's); before the
    budget these 2.4 KB of arguments took 1.4 GiB."""
    script = textwrap.dedent(
        f"""
        import json, resource
        from prism_tools import create_json_schema_adapter
        adapter = create_json_schema_adapter()
        schema = {json.dumps(REQUIRED_ITEMS)}
        adapter.check_schema(schema)
        adapter.parse_and_find(schema, "{{}}")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for count in (800, 20, 2):
            adapter.parse_and_find(schema, '{{"a":[' + ",".join(["{{}}"] * count) + "]}}")
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
        """
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    grown_kib = int(ran.stdout.split()[-1])
    assert grown_kib < 256 * 1024, f"peak memory grew {grown_kib} KiB"


# --- pattern size ----------------------------------------------------------------------------


LARGE_PATTERNS = [
    r"[^\n]{2000}z",
    r"[^\n]{8000}z",
    "(a|b){4000}!",
    "[a-z]{4000}!",
    ".{4000}z",
    r"\p{L}{4}x",
    "a(a|b){1000}!",
]


def refusal(schema: dict[str, Any]) -> SchemaGuardError:
    with pytest.raises(SchemaGuardError) as caught:
        check_schema(schema)
    return caught.value


@pytest.mark.parametrize("pattern", LARGE_PATTERNS)
def test_patterns_past_the_size_limit_are_refused_when_compiled(pattern: str) -> None:
    for schema, where in [
        ({"type": "object", "properties": {"s": {"pattern": pattern}}}, "/properties/s/pattern"),
        ({"type": "object", "propertyNames": {"pattern": pattern}}, "/propertyNames/pattern"),
        ({"type": "object", "patternProperties": {pattern: {}}}, "/patternProperties"),
    ]:
        error = refusal(schema)
        assert error.reason == "schema_pattern_too_large"
        assert "pattern size limit" in str(error)
        assert f"schema pattern at {where}" in str(error)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a|b){4000}!"}}},
        # Each near the limit for one pattern, twenty over the limit for one schema.
        {"type": "object", "patternProperties": {f"a(a|b){{900}}!{n}": {} for n in range(20)}},
    ],
    ids=["one pattern", "the schema's patterns"],
)
async def test_dispatch_answers_large_patterns_with_the_guard_reason(
    schema: dict[str, Any],
) -> None:
    ran: list[object] = []
    registry = create_tool_registry([tool(schema, ran)])
    validate = create_json_schema_tool_argument_validator()
    context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1")
    result = await dispatch_tool_call(
        ToolCall("c1", "t", '{"s": "ab!"}'), registry=registry, context=context, validate=validate
    )
    assert result.error is not None
    assert result.error.code == "schema_guard"
    assert result.error.details == {"reason": "schema_pattern_too_large"}
    assert ran == []


@pytest.mark.parametrize("pattern", ["(", "(?<=a)b", r"\p{NotAClass}"])
def test_patterns_that_are_not_regexes_stay_invalid(pattern: str) -> None:
    assert refusal({"pattern": pattern}).reason == "schema_invalid"


@pytest.mark.parametrize(
    ("pattern", "matching", "other"),
    [
        (r"^\p{Letter}+$", "Größe", "größe1"),
        (r"^\p{digit}+$", "١٢٣", "12a"),
        (r"^\w{1,64}$", "user_name_1", "user name"),
        (r"\p{L}{1,100}", "1é2", "123"),
        (r"^\p{L}{1,100}$", "é" * 100, "é" * 101),
        ("x.{36}y", "x" + "é" * 36 + "y", "x" + "é" * 35 + "y"),
        (r"^\p{Lu}\p{Ll}+$", "Éa", "éa"),
        (r"[\u4e00-\u9fff]{1,50}", "名前", "name"),
        ("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "2024-05-01", "2024-5-01"),
        (r"^(\([0-9]{3}\))?[0-9]{3}-[0-9]{4}$", "(555)123-4567", "555-12-4567"),
        (r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$", " -1.5e3 ", "1.2.3"),
        ("^[^@]+@[^@]+\\.[^@]+$", "a@b.co", "a@b"),
        ("a(a|b){300}!", "a" + "ab" * 150 + "!", "a!"),
    ],
)
def test_ordinary_patterns_still_compile_and_match(pattern: str, matching: str, other: str) -> None:
    adapter = create_json_schema_adapter()
    for schema, good, bad in [
        ({"type": "string", "pattern": pattern}, matching, other),
        (
            {"type": "object", "patternProperties": {pattern: {"type": "integer"}}},
            {matching: 1},
            {matching: "x"},
        ),
    ]:
        check_schema(schema)
        assert adapter.is_valid(schema, good)
        assert not adapter.is_valid(schema, bad)


# --- the patterns of one schema ----------------------------------------------------------------


def near_limit_patterns(count: int) -> dict[str, Any]:
    """``count`` distinct patterns, each close to the size limit for one pattern, each on a
    property of its own (so no one value is checked against many of them)."""
    return {
        "type": "object",
        "properties": {f"p{n}": {"pattern": f"a(a|b){{900}}!{n}"} for n in range(count)},
    }


def test_many_large_patterns_are_refused_together_before_they_are_compiled() -> None:
    # Before the total limit, 3,000 such patterns took 800 MiB to compile and 15 s to match one
    # 1 KB name against; refused, they are never compiled.
    error = refusal(near_limit_patterns(3000))
    assert error.reason == "schema_pattern_too_large"
    assert "the 3000 distinct patterns of the schema compile to more than 524288 bytes" in str(
        error
    )
    # A few fit, and so does one pattern used many times (it is compiled once).
    check_schema(near_limit_patterns(4))
    repeated = {"anyOf": [{"pattern": "a(a|b){900}!"} for _ in range(100)]}
    check_schema(repeated)


def test_hundreds_of_ordinary_patterns_fit() -> None:
    properties = {
        f"p{n}": {"type": "string", "pattern": rf"^[A-Z]{{2}}-[0-9]{{4}}-\w+-{n}$"}
        for n in range(300)
    }
    properties["name"] = {"type": "string", "pattern": r"^\p{Lu}\p{Ll}+$"}
    properties["letters"] = {"type": "string", "pattern": r"^[\p{L} '-]+$"}
    schema = {"type": "object", "properties": properties}
    check_schema(schema)
    adapter = create_json_schema_adapter()
    assert adapter.is_valid(schema, {"p7": "AB-1234-x_y-7", "name": "Éa"})
    assert not adapter.is_valid(schema, {"p7": "AB-1234-x_y-8"})


# --- evaluation paths ----------------------------------------------------------------------------

# Every error carries its evaluation path from the root; an `anyOf` error holds its branches'
# errors. Through a recursive reference under a long `patternProperties` name (a verbose-mode
# comment: it compiles to almost nothing), each level down adds the name to the path again.
LONG_NAME = "(?x)^a$#" + "x" * 10_000
RECURSIVE_LONG_PATHS: dict[str, Any] = {
    "$defs": {
        "R": {
            "type": "object",
            "required": [f"q{n}" for n in range(50)],
            "patternProperties": {LONG_NAME: {"$ref": "#/$defs/R"}},
        }
    },
    "anyOf": [{"$ref": "#/$defs/R"}, {"type": "null"}],
}


def nested(depth: int) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for _ in range(depth):
        arguments = {"a": arguments}
    return arguments


def test_errors_with_long_evaluation_paths_count_against_the_listing_budget() -> None:
    # 62 levels of 50 errors, each holding a path of up to 620 KB: listed in full, they took
    # 1 GiB. Weighed with their paths, the one `anyOf` error is not built.
    problem = report(RECURSIVE_LONG_PATHS, nested(61))
    assert details(problem)["complete"] is False
    assert problem.message.endswith(UNLOCATED)
    # Shallow arguments are still reported in full.
    shallow = report(RECURSIVE_LONG_PATHS, nested(1))
    assert "complete" not in details(shallow)
    assert details(shallow)["issues"][0]["keyword"] == "anyOf"


CHILD_REPORT = textwrap.dedent(
    """
    import json, resource, sys
    from prism_tools import ToolDefinition, create_json_schema_tool_argument_validator
    with open(sys.argv[1]) as schema, open(sys.argv[2]) as arguments:
        tool, text = ToolDefinition(name="t", parameters=json.load(schema)), arguments.read()
    validator = create_json_schema_tool_argument_validator()
    validator.parse_checked(tool, "{}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    problem = validator.parse_checked(tool, text)[1]
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps({"details": problem.details, "grown_kib": grown}))
    """
)


def report_in_child(
    tmp_path: pathlib.Path, schema: dict[str, Any], text: str
) -> tuple[dict[str, Any], int]:
    """The report's details for argument ``text`` against ``schema``, and how far the peak
    memory of a fresh interpreter grew while it was made (the core's allocations are not
    Python's, so only the process's peak shows them)."""
    schema_file, text_file = tmp_path / "schema.json", tmp_path / "arguments.json"
    schema_file.write_text(json.dumps(schema))
    text_file.write_text(text)
    ran = subprocess.run(
        [sys.executable, "-c", CHILD_REPORT, str(schema_file), str(text_file)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found = json.loads(ran.stdout.splitlines()[-1])
    return found["details"], found["grown_kib"]


def test_long_evaluation_paths_stay_within_tens_of_mebibytes(tmp_path: pathlib.Path) -> None:
    text = '{"a":' * 61 + "{}" + "}" * 61
    found, grown_kib = report_in_child(tmp_path, RECURSIVE_LONG_PATHS, text)
    assert found["count"] == 1
    assert grown_kib < 256 * 1024, f"peak memory grew {grown_kib} KiB"


def json_value(leaf: dict[str, Any]) -> dict[str, Any]:
    """A JSON value as pydantic's ``JsonValue`` is written: an array or an object of JSON
    values, or ``leaf``; each arm of the union refers back to it."""
    return {
        "anyOf": [
            {"type": "array", "items": {"$ref": "#/$defs/J"}},
            {"type": "object", "additionalProperties": {"$ref": "#/$defs/J"}},
            leaf,
        ]
    }


JSON_FIELD: dict[str, Any] = {
    "$defs": {"J": json_value({"type": ["string", "number", "boolean", "null"]})},
    "type": "object",
    "properties": {"data": {"$ref": "#/$defs/J"}, "n": {"type": "integer"}},
    "required": ["data", "n"],
}


def alternating(depth: int) -> Any:
    """``depth`` levels of objects and arrays in turn, each holding the next and a sibling."""
    value: Any = "leaf"
    for level in range(depth):
        value = [value, {"k": 1}] if level % 2 else {"a": value, "b": [1]}
    return value


@pytest.mark.parametrize(("depth", "copies"), [(10, 1), (24, 1), (60, 1), (10, 50)])
def test_a_json_value_beside_a_wrong_field_still_lets_it_be_located(
    depth: int, copies: int
) -> None:
    # Weighed as if every value below were both an array and an object, the union doubled at
    # each level: 173 bytes of arguments 10 deep were "too large to locate" their one issue.
    problem = report(JSON_FIELD, {"data": [alternating(depth)] * copies, "n": "seven"})
    assert details(problem) == {
        "issues": [{"path": "/n", "keyword": "type", "message": 'value is not of type "integer"'}],
        "count": 1,
    }


def test_a_hostile_union_listed_in_full_stays_within_tens_of_mebibytes(
    tmp_path: pathlib.Path,
) -> None:
    """Every object below misses 250 required names and every `anyOf` error keeps them all:
    3 KB of arguments raise 85,000 errors, within the budget now that a level below is weighed
    once."""
    schema = {
        "$defs": {"J": json_value({"type": "null"})},
        "type": "object",
        "properties": {"d": {"$ref": "#/$defs/J"}},
    }
    schema["$defs"]["J"]["anyOf"][1]["required"] = [f"r{index}" for index in range(250)]

    def tree(level: int) -> dict[str, Any]:
        return {} if level == 4 else {f"k{index}": tree(level + 1) for index in range(4)}

    found, grown_kib = report_in_child(tmp_path, schema, json.dumps({"d": tree(0)}))
    # Listed in full: the one `anyOf` error at `/d`, with every error below it.
    assert found["issues"][0]["keyword"] == "anyOf"
    assert "complete" not in found
    assert grown_kib < 256 * 1024, f"peak memory grew {grown_kib} KiB"


def layered_branches(options: int) -> dict[str, Any]:
    """Objects of objects, each level under five in-place single-branch ``anyOf``s (inlined
    five levels per definition, so no reference target repeats), or a value of an ``enum`` of
    ``options`` numbers."""
    choice = {"enum": [None, "s", *range(options)]}
    node: dict[str, Any] = {"$ref": "#/$defs/D"}
    for _ in range(5):
        node = {"anyOf": [{"type": "object", "additionalProperties": node}, choice]}
        for _ in range(4):
            node = {"anyOf": [node]}
    return {"$defs": {"D": node}, "$ref": "#/$defs/D"}


def layered_arguments(depth: int, values: int, wrong: bool) -> dict[str, Any]:
    inner: dict[str, Any] = {f"v{index}": 8_999 for index in range(values)}
    if wrong:
        inner["z"] = "bad"
    for _ in range(depth):
        inner = {"a": inner}
    return inner


def test_arguments_failing_branches_would_check_again_and_again_locate_nothing() -> None:
    # A failing `anyOf` checks its whole value again before it lists its errors, so the 453
    # values at the bottom were checked against the 9,002 options once for each of the 310
    # `anyOf`s above them: 3 s for 5.7 KB, listed in full. The valid call takes 10 ms.
    schema = layered_branches(9_000)
    assert create_json_schema_adapter().validate(schema, layered_arguments(62, 453, False)) == []
    problem = report(schema, layered_arguments(62, 453, True))
    assert details(problem)["complete"] is False
    assert problem.message.endswith(UNLOCATED)
    # A few levels and values are still listed in full.
    shallow = report(schema, layered_arguments(2, 3, True))
    assert "complete" not in details(shallow)
    assert details(shallow)["issues"][0]["keyword"] == "anyOf"


def test_a_large_enum_on_one_member_does_not_weigh_on_the_items_of_another() -> None:
    # An optional list of numbers beside an optional choice of 5,000 names, as pydantic writes
    # `Optional[list[int]]` and `Optional[Literal[...]]`: the choice's values are checked again
    # under its `anyOf`, the list's elements never meet it. Charged with the choice, 14 KB of
    # arguments with one wrong element could not be located.
    schema = {
        "type": "object",
        "properties": {
            "values": {
                "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]
            },
            "region": {
                "anyOf": [{"enum": [f"opt{index}" for index in range(5000)]}, {"type": "null"}]
            },
        },
    }
    values: list[Any] = [index % 10 for index in range(7000)]
    values[3500] = "x"
    problem = report(schema, {"values": values, "region": "opt1"})
    assert "complete" not in details(problem)
    assert details(problem)["issues"][0]["path"] == "/values"


def unevaluated_items_levels(levels: int, copies: int) -> dict[str, Any]:
    """``levels`` arrays of objects, each array under ``copies`` in-place
    ``unevaluatedItems: false`` (they do not see the array's own ``items``)."""
    node: dict[str, Any] = {}
    for _ in range(levels):
        node = {
            "items": {"properties": {"a": node}},
            "allOf": [{"unevaluatedItems": False}] * copies,
        }
    return {"type": "object", "properties": {"d": node}}


def test_items_an_error_serialises_count_against_the_listing_budget(
    tmp_path: pathlib.Path,
) -> None:
    """An `unevaluatedItems` error holds every item it refuses as JSON text, where a control
    character takes six bytes: weighed as a copy of the array only, 32 KB of arguments listed
    in full took 332 MiB."""
    schema = unevaluated_items_levels(6, 797)
    text = '{"d":' + '[{"a":' * 6 + '"' + "\\u0001" * 5461 + '"' + "}]" * 6 + "}"
    found, grown_kib = report_in_child(tmp_path, schema, text)
    # Only the first issue: one error of the arrays, each of which holds the long string.
    issue = found["issues"][0]
    assert issue["path"] == "/d/0/a/0/a/0/a/0/a/0/a"
    assert issue["keyword"] == "unevaluatedItems"
    assert found["complete"] is False
    assert grown_kib < 128 * 1024, f"peak memory grew {grown_kib} KiB"
    # A few items are still listed in full.
    problem = report(schema, {"d": [{"a": [{"a": "\u0001" * 10}]}]})
    assert "complete" not in details(problem)
    assert details(problem)["count"] == 2 * 797


# --- integer divisors ----------------------------------------------------------------------------


class LoudInt(int):
    """An int whose own text and equality must never be asked for."""

    def __repr__(self) -> str:
        raise AssertionError("the subclass's __repr__ ran")

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        raise AssertionError("the subclass's __eq__ ran")

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "divisor",
    [2**53 + 1, -(2**53 + 1), 10**17 + 1, 2**64 + 1, -(2**80 + 1), LoudInt(2**64 + 3)],
    ids=["2^53+1", "-(2^53+1)", "10^17+1", "2^64+1", "-(2^80+1)", "int subclass 2^64+3"],
)
def test_an_integer_divisor_a_float_does_not_hold_is_refused(divisor: int) -> None:
    # The validator holds the divisor as a float: 2^53 + 1 would be checked as 2^53, and
    # 2^53 + 1 would not count as a multiple of itself.
    error = refusal({"type": "object", "properties": {"n": {"multipleOf": divisor}}})
    assert error.reason == "schema_invalid"
    assert f"multipleOf {int(divisor)} is an integer above 2^53" in str(error)
    assert "/properties/n/multipleOf" in str(error)


@pytest.mark.parametrize(
    ("divisor", "multiple", "other"),
    [
        (2**53, 2**54, 2**53 + 2**52),
        (2**60, 2**61, 2**60 + 2**59),
        (3, 2**53 + 1, 2**53),
        (2**64, 2**65, 2**64 + 2**63),
        (2**80, 2**81, 2**80 + 2**79),
    ],
)
def test_integer_divisors_a_float_holds_are_exact(divisor: int, multiple: int, other: int) -> None:
    schema = {"multipleOf": divisor}
    check_schema(schema)
    adapter = create_json_schema_adapter()
    assert adapter.is_valid(schema, multiple)
    assert not adapter.is_valid(schema, other)


async def test_a_divisor_beyond_64_bits_never_lets_a_non_multiple_through() -> None:
    # Read as its nearest float, 2^64 + 1 would accept 2^64, which is not a multiple of it.
    ran: list[object] = []
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2**64 + 1}}}
    with pytest.raises(SchemaGuardError):
        create_tool_registry([tool(schema, ran)], check_schemas=True)
    registry = create_tool_registry([tool(schema, ran)])
    validate = create_json_schema_tool_argument_validator()
    context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1")
    for arguments in ({"n": 2**64}, '{"n": 18446744073709551616}'):
        result = await dispatch_tool_call(
            ToolCall("c1", "t", arguments), registry=registry, context=context, validate=validate
        )
        assert result.error is not None
        assert result.error.details == {"reason": "schema_invalid"}
    assert ran == []


# --- lazy DFA caches -----------------------------------------------------------------------------


def test_the_lazy_dfa_caches_of_many_patterns_stay_within_tens_of_mebibytes(
    tmp_path: pathlib.Path,
) -> None:
    """320 small patterns, each built to fill its lazy DFA cache, against one 3 KB string: with a
    2 MiB cache each they took and then kept 790 MiB."""
    odd = "".join(f"\\x{code:02x}" for code in range(0x21, 0x7F, 2))
    patterns = [f"a[ab]{{16}}(?:[{odd}]|c){n}" for n in range(320)]
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "allOf": [{"pattern": p} for p in patterns]}},
    }
    rng = random.Random(1)
    text = json.dumps({"s": "".join(rng.choice("ab") for _ in range(3000))})
    found, grown_kib = report_in_child(tmp_path, schema, text)
    assert found["count"] == 320  # every pattern still matched, and failed
    assert grown_kib < 128 * 1024, f"peak memory grew {grown_kib} KiB"
