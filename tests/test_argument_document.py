"""The core's argument document: what it validates is exactly what the tool receives.

Argument text is parsed into one document in Rust, validated there and then turned into Python
objects; Python arguments are read into the same document. These tests pin the places where
the document could differ from the dict a tool gets: repeated keys, values that are not JSON,
depth, and the report a model sees for invalid arguments.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism_tools import (
    ErrorInfo,
    InMemoryRunLedger,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolParameterValidator,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools.errors import ArgumentsError
from prism_tools.validation import MAX_ISSUES_IN_DETAILS, ArgumentIssue, format_issues

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}},
    "required": ["city"],
}


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ('{"city": 5, "city": "Rome"}', True),
        ('{"city": "Rome", "city": 5}', False),
        ('{"city": "Rome", "city": "a very long name"}', False),
        ('{"x": 1, "city": 1, "y": 2, "city": "Oslo"}', True),
    ],
)
def test_repeated_keys_are_validated_as_the_dict_keeps_them(text: str, valid: bool) -> None:
    adapter = create_json_schema_adapter()
    arguments, issues = adapter.parse_and_validate(CITY, text)
    assert arguments == json.loads(text)
    assert list(arguments) == list(json.loads(text))
    assert (issues == []) is valid


def test_parse_and_validate_lists_the_issues_validate_finds() -> None:
    adapter = create_json_schema_adapter()
    text = '{"city": "a very long name", "extra": [1, 2]}'
    arguments, issues = adapter.parse_and_validate(CITY, text)
    assert arguments == json.loads(text)
    assert issues == adapter.validate(CITY, arguments)
    assert issues
    assert all(type(issue) is ArgumentIssue for issue in issues)
    assert [issue.path for issue in issues] == ["/city"]


def test_parse_and_validate_lists_at_most_the_details_limit() -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "string"}}},
    }
    text = json.dumps({"xs": list(range(MAX_ISSUES_IN_DETAILS + 40))})
    adapter = create_json_schema_adapter()
    _, issues = adapter.parse_and_validate(schema, text)
    assert len(issues) == MAX_ISSUES_IN_DETAILS
    assert issues[0] == ArgumentIssue("/xs/0", "type", issues[0].message)
    assert adapter.found(schema, json.loads(text))[1] == MAX_ISSUES_IN_DETAILS + 40


def test_parse_and_validate_refuses_text_that_is_not_an_object() -> None:
    adapter = create_json_schema_adapter()
    for text in ("[1, 2]", '{"city": ', "\x00"):
        with pytest.raises(ArgumentsError):
            adapter.parse_and_validate(CITY, text)


def test_repeated_keys_in_a_large_object_follow_the_same_rule() -> None:
    members = [f'"k{n}": {n}' for n in range(60)]
    text = "{" + ", ".join([*members, '"city": 1', *members, '"city": "Lima"']) + "}"
    arguments, issues = create_json_schema_adapter().parse_and_validate(CITY, text)
    assert arguments == json.loads(text)
    assert issues == []


async def test_a_repeated_key_cannot_smuggle_a_value_past_the_validator() -> None:
    calls: list[Any] = []

    async def book(args: Any, context: Any) -> str:
        calls.append(args)
        return "booked"

    schema = {
        "type": "object",
        "properties": {"seats": {"type": "integer", "maximum": 4}},
        "required": ["seats"],
    }
    registry = create_tool_registry([ToolDefinition(name="book", execute=book, parameters=schema)])
    validator = create_json_schema_tool_argument_validator()
    blocked = await dispatch_tool_call(
        ToolCall(id="c1", name="book", arguments='{"seats": 2, "seats": 400}'),
        registry=registry,
        context=ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c1"),
        validate=validator,
        ledger=InMemoryRunLedger(),
    )
    assert blocked.error is not None
    assert calls == []
    allowed = await dispatch_tool_call(
        ToolCall(id="c2", name="book", arguments='{"seats": 400, "seats": 2}'),
        registry=registry,
        context=ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c2"),
        validate=validator,
    )
    assert allowed.error is None
    assert calls == [{"seats": 2}]


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": {1, 2}}, "/a"),
        ({"a": [1, object()]}, "/a/1"),
        ({"a": {"b": math.nan}}, "/a/b"),
        ({"a": [{"x/y~z": math.inf}]}, "/a/0/x~1y~0z"),
        ({"a": {1: "one"}}, "/a"),
        ({"a": 10**400}, "/a"),
        ({"a": ["ok", "x\ud800"]}, "/a/1"),
        ({"a": {"k\udc80": 1}}, "/a"),
    ],
)
def test_values_that_are_not_json_are_one_issue_naming_where(value: Any, where: str) -> None:
    issues = create_json_schema_adapter().validate({}, value)
    assert len(issues) == 1
    assert issues[0].keyword == "json"
    assert issues[0].message.endswith(f" at {where}")


def test_deep_python_arguments_are_refused_whatever_the_schema() -> None:
    adapter = create_json_schema_adapter(max_argument_depth=8)
    nested: Any = 1
    for _ in range(8):
        nested = [nested]
    assert adapter.validate({}, nested) == []
    issues = adapter.validate({}, [nested])
    assert [issue.keyword for issue in issues] == ["max_argument_depth"]


def test_tuples_and_subclasses_read_as_json() -> None:
    class Tags(list[str]):
        pass

    class Name(str):
        pass

    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": {"type": "integer"},
    }
    adapter = create_json_schema_adapter()
    assert adapter.validate(schema, {"tags": Tags(["a", "b"]), Name("n"): 1}) == []
    assert adapter.validate(schema, {"tags": ("a", 1)})[0].path == "/tags/1"


class ListAdapter:
    """A ``ToolArgumentValidator`` that is not ours: the generic path formats its issues."""

    def __init__(self) -> None:
        self.inner = create_json_schema_adapter()

    def validate(self, schema: Any, value: Any) -> list[ArgumentIssue]:
        return self.inner.validate(schema, value)


def test_the_report_is_the_same_on_the_fast_path_and_for_any_other_adapter() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "maximum": 14},
            "units": {"enum": ["metric", "imperial"]},
        },
        "additionalProperties": False,
    }
    tool = ToolDefinition(name="weather", parameters=schema)
    arguments = {"city": 1, "days": 30, "units": "kelvin", "extra": True}
    fast = create_json_schema_tool_argument_validator()(tool, arguments)
    generic = ToolParameterValidator(ListAdapter())(tool, arguments)
    assert isinstance(fast, ErrorInfo)
    assert fast == generic
    assert fast.details is not None
    assert fast.details["count"] == 4
    assert fast.message.startswith("Invalid arguments for tool weather: ")
    assert "/days: " in fast.message


@given(
    st.lists(
        st.tuples(st.text(max_size=40), st.text(max_size=8), st.text(max_size=400)), max_size=20
    ),
    st.integers(min_value=40, max_value=2048),
)
def test_any_report_stays_within_its_limits(
    issues: list[tuple[str, str, str]], max_message_bytes: int
) -> None:
    report = format_issues("tool", issues, max_message_bytes=max_message_bytes)
    assert len(report.message.encode("utf-8")) <= max_message_bytes
    assert report.details is not None
    assert report.details["count"] == len(issues)
    for issue, (path, keyword, message) in zip(report.details["issues"], issues, strict=True):
        assert issue["path"] == path
        assert issue["keyword"] == keyword
        assert len(issue["message"].encode("utf-8")) <= 160
        assert message.startswith(issue["message"].removesuffix("..."))
    if not issues:
        return
    shown = report.message.count("; ") + 1
    hidden = len(issues) - min(shown, 8)
    if hidden > 0 and not report.message.endswith("..."):  # the suffix survives unless cut
        assert report.message.endswith(" more)")


def test_schemas_are_remembered_by_identity_and_bounded() -> None:
    adapter = create_json_schema_adapter(max_compiled_schemas=4)
    schemas = [{"maxLength": n} for n in range(10)]
    for schema in schemas:
        assert adapter.is_valid(schema, "")
    before = adapter.cache_info()
    assert adapter.compiled(schemas[-1]) is adapter.compiled(schemas[-1])
    assert adapter.cache_info().hits == before.hits + 2
    assert adapter.cache_info().misses == before.misses
    # The oldest were forgotten: asking again compiles (or finds them in the LRU) once more.
    adapter.compiled(schemas[0])
    after = adapter.cache_info()
    assert after.hits + after.misses == before.hits + before.misses + 3
    assert not adapter.is_valid(schemas[0], "x")


def test_argument_text_is_parsed_and_reported_in_one_lookup_of_the_schema() -> None:
    validator = create_json_schema_tool_argument_validator()
    tool = ToolDefinition(name="weather", parameters=CITY)
    compiled = validator.adapter.compiled(CITY)  # type: ignore[attr-defined]
    before = validator.cache_info()

    checked = validator.parse_checked(tool, '{"city": 7, "city": "a very long name"}')
    assert checked is not None
    arguments, problem = checked
    assert arguments == {"city": "a very long name"}
    expected = compiled.parse_and_report('{"city": "a very long name"}', "weather")
    assert isinstance(problem, ErrorInfo)
    assert (problem.message, problem.details) == (
        expected[1][0],
        {"issues": expected[1][1], "count": expected[1][2]},
    )
    assert validator.parse_checked(tool, b'{"city": "Oslo"}') == ({"city": "Oslo"}, None)
    after = validator.cache_info()
    assert (after.hits, after.misses) == (before.hits + 2, before.misses)


def test_argument_text_for_a_refused_schema_is_still_read_as_text() -> None:
    validator = create_json_schema_tool_argument_validator()
    refused = ToolDefinition(name="remote", parameters={"$ref": "https://example.com/s.json"})
    checked = validator.parse_checked(refused, '{"city": "Oslo"}')
    assert checked is not None
    arguments, problem = checked
    assert arguments == {"city": "Oslo"}
    assert isinstance(problem, ErrorInfo)
    assert problem.code == "schema_guard"
    assert problem.details == {"reason": "schema_ref_not_allowed"}
    with pytest.raises(ArgumentsError):
        validator.parse_checked(refused, '{"city": ')


@given(
    st.lists(
        st.permutations(["city", "units", "days", "lang", "extra", "zone"]).map(
            lambda names: names[: len(names) - 1]
        ),
        min_size=1,
        max_size=6,
    )
)
def test_keys_come_out_right_whatever_order_each_call_sends(orders: list[list[str]]) -> None:
    # The root object's keys are found first by the position they had on the last call: calls
    # in changing orders, with keys the schema does not declare and repeated texts, must still
    # give exactly the dict json.loads gives, in the text's order.
    schema = {
        "type": "object",
        "properties": {name: {} for name in ["city", "units", "days", "lang", "zone"]},
    }
    adapter = create_json_schema_adapter()
    for names in orders:
        text = json.dumps({name: f"{name}-{at}" for at, name in enumerate(names)})
        for _ in range(2):
            arguments, issues = adapter.parse_and_validate(schema, text)
            assert issues == []
            assert arguments == json.loads(text)
            assert list(arguments) == names


NESTED_NAMES = ["city", "units", "days", "lang", "zone"]


@given(
    st.lists(
        st.tuples(
            st.permutations([*NESTED_NAMES, "extra"]).map(lambda names: names[:4]),
            st.permutations([*NESTED_NAMES, "extra"]).map(lambda names: names[:3]),
            st.integers(min_value=0, max_value=3),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_nested_keys_come_out_right_whatever_shape_each_call_sends(
    shapes: list[tuple[list[str], list[str], int]],
) -> None:
    # Every key, nested ones too, is found first by the position in the document it had on the
    # last call: objects inside objects and arrays, in changing orders and counts, must still
    # give exactly the dicts json.loads gives, keys in the text's order.
    place = {"type": "object", "properties": {name: {} for name in NESTED_NAMES}}
    schema = {
        "type": "object",
        "properties": {
            "home": place,
            "stops": {"type": "array", "items": place},
            **{name: {} for name in NESTED_NAMES},
        },
    }
    adapter = create_json_schema_adapter()
    for outer, inner, stops in shapes:
        value = {
            **{name: f"{name}-root" for name in outer},
            "home": {name: f"{name}-home" for name in inner},
            "stops": [dict.fromkeys(inner[stop % len(inner) :], stop) for stop in range(stops)],
        }
        text = json.dumps(value)
        for _ in range(2):
            arguments, issues = adapter.parse_and_validate(schema, text)
            assert issues == []
            assert arguments == value
            assert list(arguments["home"]) == inner
            assert [list(stop) for stop in arguments["stops"]] == [
                list(stop) for stop in value["stops"]
            ]


UNITS = {
    "type": "object",
    "properties": {
        "units": {"enum": ["metric", "imperial", 3, None]},
        "mode": {"const": "fast"},
        "nested": {"type": "array", "items": {"enum": ["low", "high"]}},
        "note": {"type": "string"},
    },
}


def test_enum_and_const_strings_come_out_as_one_shared_object() -> None:
    # A string value equal to one of the schema's enum or const strings is handed over as one
    # shared object, wherever it stands; other strings are made per call as before.
    adapter = create_json_schema_adapter()
    text = '{"units": "metric", "mode": "fast", "nested": ["high", "low"], "note": "metric"}'
    first, issues = adapter.parse_and_validate(UNITS, text)
    second, _ = adapter.parse_and_validate(UNITS, text)
    assert issues == []
    assert first == second == json.loads(text)
    assert first["units"] is second["units"]
    assert first["mode"] is second["mode"]
    assert first["nested"][0] is second["nested"][0]
    # Equal text is the same value wherever it stands: a note that says "metric" shares it too.
    assert first["note"] is first["units"]
    free = adapter.parse_and_validate(UNITS, '{"note": "metrik"}')[0]
    again = adapter.parse_and_validate(UNITS, '{"note": "metrik"}')[0]
    assert free == again == {"note": "metrik"}
    assert free["note"] is not again["note"]


@given(
    st.lists(
        st.one_of(
            st.sampled_from(["metric", "imperial", "fast", "low", "high", "", "metri", "fast!"]),
            st.text(max_size=12),
        ),
        max_size=8,
    )
)
def test_values_near_the_choices_come_out_as_json_loads_gives_them(values: list[str]) -> None:
    # Strings of a choice's length that are not a choice, escapes, and non-ASCII text all go
    # through the lookup; every one must come out exactly as json.loads reads it.
    adapter = create_json_schema_adapter()
    text = json.dumps({"note": "x", "tags": values, "pairs": {value: value for value in values}})
    arguments, issues = adapter.parse_and_validate(UNITS, text)
    assert issues == []
    assert arguments == json.loads(text)
