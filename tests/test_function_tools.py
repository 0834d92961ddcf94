"""@tool and tool_from_function: schemas from type hints, conversion back, threads, errors."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import inspect
import math
import re
import threading
import types
import typing
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, NamedTuple, NewType, NotRequired, Required, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism_tools import (
    ProviderResponse,
    ScriptedProvider,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_agent,
    create_json_schema_tool_argument_validator,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools.function_tools import (
    ArgumentConversionError,
    original_function,
    tool,
    tool_from_function,
)
from prism_tools.types import AgentEvent
from prism_tools.validation import check_schema

ROOT = Path(__file__).resolve().parents[1]
VALIDATE = create_json_schema_tool_argument_validator()


# --- types used across the tests (module level, so string annotations resolve) ---------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    """A point on the plane.

    Attributes:
        x: Distance from the left edge.
        y: Distance from the top edge.
    """

    x: float
    y: float = 0.0


@dataclasses.dataclass(frozen=True)
class Tree:
    label: str
    children: list[Tree] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Route:
    name: Annotated[str, "What the route is called."]
    stops: list[Point]
    color: Color | None = None


class Movie(TypedDict):
    """A film."""

    title: str
    year: NotRequired[int]


class Filters(TypedDict, total=False):
    query: Required[str]
    tags: list[str]


class Pair(NamedTuple):
    left: int
    right: str = "r"


class Circle(TypedDict):
    kind: Literal["circle"]
    radius: float


class Square(TypedDict):
    kind: Literal["square"]
    side: float


UserId = NewType("UserId", int)
Tag = NewType("Tag", str)


class Mode(enum.Enum):
    ONE = 1
    FAST = "fast"


class Perm(enum.IntFlag):
    R = 1
    W = 2
    X = 8


def context(call_id: str = "call_1") -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=call_id)


async def dispatch(
    definition: ToolDefinition, arguments: Any, *, validate: bool = True
) -> tuple[ToolResult, list[AgentEvent]]:
    events: list[AgentEvent] = []
    result = await dispatch_tool_call(
        ToolCall("call_1", definition.name, arguments),
        registry=create_tool_registry([definition]),
        context=context(),
        validate=VALIDATE if validate else None,
        emit=events.append,
    )
    return result, events


def one_parameter(hint: object, received: list[object]) -> ToolDefinition:
    """A tool whose only parameter ``x`` has the annotation ``hint``; records what it gets."""

    def probe(x: Any) -> str:
        received.append(x)
        return "ok"

    probe.__annotations__ = {"x": hint, "return": str}
    return tool_from_function(probe, inline=True)


# --- every supported type: schema, check_schema, conversion through dispatch ------------------

CASES: list[tuple[str, object, dict[str, Any], Any, Any]] = [
    # (id, annotation, property schema, JSON argument, converted value)
    ("str", str, {"type": "string"}, "hi", "hi"),
    ("int", int, {"type": "integer"}, 3, 3),
    ("int-from-integral-float", int, {"type": "integer"}, 3.0, 3),
    ("float", float, {"type": "number"}, 2, 2.0),
    ("bool", bool, {"type": "boolean"}, False, False),
    ("none", None, {"type": "null"}, None, None),
    ("optional", int | None, {"type": ["integer", "null"]}, None, None),
    ("typing-optional", typing.Optional[str], {"type": ["string", "null"]}, "a", "a"),  # noqa: UP045
    ("union-keeps-str", int | str, {"type": ["integer", "string"]}, "5", "5"),
    ("union-int-first", float | int, {"type": ["number", "integer"]}, 4, 4),
    ("union-float", float | int, {"type": ["number", "integer"]}, 4.5, 4.5),
    ("literal", Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}, "b", "b"),
    ("literal-int", Literal[1, 2], {"type": "integer", "enum": [1, 2]}, 2, 2),
    ("literal-mixed", Literal["x", 1], {"enum": ["x", 1]}, 1, 1),
    ("enum", Color, {"type": "string", "enum": ["red", "blue"]}, "blue", Color.BLUE),
    ("int-enum", Priority, {"type": "integer", "enum": [1, 2]}, 2, Priority.HIGH),
    ("literal-enum", Literal[Color.RED], {"type": "string", "enum": ["red"]}, "red", Color.RED),
    ("list", list[int], {"type": "array", "items": {"type": "integer"}}, [1, 2], [1, 2]),
    ("bare-list", list, {"type": "array"}, [1, "a"], [1, "a"]),
    ("sequence", Sequence[str], {"type": "array", "items": {"type": "string"}}, ["a"], ["a"]),
    (
        "set",
        set[int],
        {"type": "array", "uniqueItems": True, "items": {"type": "integer"}},
        [1, 2],
        {1, 2},
    ),
    (
        "frozenset",
        frozenset[str],
        {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
        ["a"],
        frozenset({"a"}),
    ),
    (
        "tuple",
        tuple[int, str],
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
            "minItems": 2,
            "maxItems": 2,
        },
        [1, "a"],
        (1, "a"),
    ),
    (
        "tuple-variadic",
        tuple[float, ...],
        {"type": "array", "items": {"type": "number"}},
        [1, 2.5],
        (1.0, 2.5),
    ),
    ("tuple-empty", tuple[()], {"type": "array", "maxItems": 0}, [], ()),
    ("bare-tuple", tuple, {"type": "array"}, [1, "a"], (1, "a")),
    ("tuple-any", tuple[Any, ...], {"type": "array"}, [[1]], ([1],)),
    (
        "dict",
        dict[str, int],
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"a": 1},
        {"a": 1},
    ),
    (
        "mapping",
        Mapping[str, list[int]],
        {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer"}}},
        {"a": [1]},
        {"a": [1]},
    ),
    (
        "dict-enum-keys",
        dict[Color, int],
        {
            "type": "object",
            "propertyNames": {"enum": ["red", "blue"]},
            "additionalProperties": {"type": "integer"},
        },
        {"red": 1},
        {Color.RED: 1},
    ),
    ("bare-dict", dict, {"type": "object"}, {"a": [1]}, {"a": [1]}),
    (
        "annotated",
        Annotated[int, "How many."],
        {"type": "integer", "description": "How many."},
        5,
        5,
    ),
    ("any", Any, {}, {"a": [1, None]}, {"a": [1, None]}),
    (
        "datetime",
        dt.datetime,
        {"type": "string", "format": "date-time"},
        "2024-05-01T10:30:00Z",
        dt.datetime(2024, 5, 1, 10, 30, tzinfo=dt.UTC),
    ),
    (
        "date",
        dt.date,
        {"type": "string", "format": "date"},
        "2024-05-01",
        dt.date(2024, 5, 1),
    ),
    ("time", dt.time, {"type": "string", "format": "time"}, "10:30:00", dt.time(10, 30)),
    (
        "uuid",
        uuid.UUID,
        {"type": "string", "format": "uuid"},
        "12345678-1234-5678-1234-567812345678",
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
    ),
    ("path", Path, {"type": "string"}, "/tmp/x", Path("/tmp/x")),
    ("pure-path", PurePosixPath, {"type": "string"}, "a/b", PurePosixPath("a/b")),
    (
        "decimal-string",
        decimal.Decimal,
        {
            "anyOf": [
                {"type": "number"},
                {"type": "string", "pattern": r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"},
            ]
        },
        "10.25",
        decimal.Decimal("10.25"),
    ),
    (
        "decimal-number",
        decimal.Decimal,
        {
            "anyOf": [
                {"type": "number"},
                {"type": "string", "pattern": r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"},
            ]
        },
        0.1,
        decimal.Decimal("0.1"),
    ),
    ("newtype", UserId, {"type": "integer"}, 7, 7),
    (
        "dict-newtype-keys",
        dict[Tag, int],
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"a": 1},
        {"a": 1},
    ),
    (
        "int-flag",
        Perm,
        {"type": "integer", "minimum": 0, "maximum": 11},
        3,
        Perm.R | Perm.W,
    ),
]


@pytest.mark.parametrize(
    ("hint", "expected", "argument", "converted"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
async def test_each_type_maps_to_its_schema_and_converts_back(
    hint: object, expected: dict[str, Any], argument: Any, converted: Any
) -> None:
    received: list[object] = []
    definition = one_parameter(hint, received)
    assert definition.parameters == {
        "type": "object",
        "properties": {"x": expected},
        "required": ["x"],
        "additionalProperties": False,
    }
    check_schema(definition.parameters)

    result, _ = await dispatch(definition, {"x": argument})

    assert result.error is None
    assert result.value == "ok"
    assert received == [converted]
    assert type(received[0]) is type(converted)
    if isinstance(converted, list | tuple | set | frozenset):
        assert [type(item) for item in received[0]] == [type(item) for item in converted]  # type: ignore[attr-defined]


BAD_VALUES: list[tuple[str, object, Any]] = [
    ("int-gets-string", int, "3"),
    ("int-gets-bool", int, True),
    ("enum-gets-unknown", Color, "green"),
    ("int-enum-gets-bool", Priority, True),
    ("literal-gets-bool", Literal[1, 2], True),
    ("literal-gets-other", Literal["a", "b"], "c"),
    ("tuple-too-long", tuple[int, str], [1, "a", 2]),
    ("dict-bad-value", dict[str, int], {"a": "b"}),
    ("optional-bad", int | None, "x"),
    ("set-duplicates", set[int], [1, 1]),
    ("int-flag-negative", Perm, -1),
]


@pytest.mark.parametrize(
    ("hint", "argument"), [case[1:] for case in BAD_VALUES], ids=[c[0] for c in BAD_VALUES]
)
async def test_the_validator_blocks_a_bad_value_and_the_function_does_not_run(
    hint: object, argument: Any
) -> None:
    received: list[object] = []
    definition = one_parameter(hint, received)

    result, events = await dispatch(definition, {"x": argument})

    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"
    assert [(event.type, event.reason) for event in events] == [
        ("tool_execution_blocked", "validation_failed")
    ]
    assert received == []


@pytest.mark.parametrize(
    ("hint", "argument"),
    # Date formats and flag bits are checks the validator does not make.
    [case[1:] for case in BAD_VALUES]
    + [(dt.datetime, "next tuesday"), (uuid.UUID, "nope"), (decimal.Decimal, "NaN"), (Perm, 4)],
    ids=[c[0] for c in BAD_VALUES] + ["datetime", "uuid", "decimal", "int-flag-unknown-bit"],
)
async def test_without_a_validator_conversion_fails_as_a_tool_error(
    hint: object, argument: Any
) -> None:
    received: list[object] = []
    definition = one_parameter(hint, received)

    result, events = await dispatch(definition, {"x": argument}, validate=False)

    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"
    assert result.error.name == "ArgumentConversionError"
    assert result.error.message.startswith("Invalid arguments for tool probe: /x")
    assert "tool_execution_error" in [event.type for event in events]
    assert received == []


# --- named object types: TypedDict, dataclass, NamedTuple, recursion ------------------------


async def test_typeddict_total_and_not_required_keys_stay_a_dict() -> None:
    received: list[object] = []

    @tool(inline=True)
    def add_movies(movies: list[Movie], filters: Filters) -> int:
        received.extend([movies, filters])
        return len(movies)

    assert add_movies.parameters == {
        "type": "object",
        "properties": {
            "movies": {"type": "array", "items": {"$ref": "#/$defs/Movie"}},
            "filters": {"$ref": "#/$defs/Filters"},
        },
        "required": ["movies", "filters"],
        "additionalProperties": False,
        "$defs": {
            "Movie": {
                "type": "object",
                "description": "A film.",
                "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
                "required": ["title"],
                "additionalProperties": False,
            },
            "Filters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }
    check_schema(add_movies.parameters)

    result, _ = await dispatch(
        add_movies,
        {
            "movies": [{"title": "Alien", "year": 1979.0}, {"title": "Heat"}],
            "filters": {"query": "q"},
        },
    )

    assert result.value == 2
    assert received == [[{"title": "Alien", "year": 1979}, {"title": "Heat"}], {"query": "q"}]
    assert type(received[0][0]["year"]) is int  # type: ignore[index]

    missing, _ = await dispatch(add_movies, {"movies": [{"year": 1}], "filters": {"query": "q"}})
    assert missing.error is not None
    assert missing.error.code == "invalid_tool_arguments"
    assert len(received) == 2


async def test_dataclasses_nest_in_defs_with_docstring_field_descriptions() -> None:
    received: list[Route] = []

    @tool(inline=True)
    def save_route(route: Route) -> str:
        received.append(route)
        return route.name

    assert save_route.parameters == {
        "type": "object",
        "properties": {"route": {"$ref": "#/$defs/Route"}},
        "required": ["route"],
        "additionalProperties": False,
        "$defs": {
            "Route": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "What the route is called."},
                    "stops": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
                    "color": {
                        "anyOf": [
                            {"type": "string", "enum": ["red", "blue"]},
                            {"type": "null"},
                        ],
                        "default": None,
                    },
                },
                "required": ["name", "stops"],
                "additionalProperties": False,
            },
            "Point": {
                "type": "object",
                "description": "A point on the plane.",
                "properties": {
                    "x": {"type": "number", "description": "Distance from the left edge."},
                    "y": {
                        "type": "number",
                        "description": "Distance from the top edge.",
                        "default": 0.0,
                    },
                },
                "required": ["x"],
                "additionalProperties": False,
            },
        },
    }
    check_schema(save_route.parameters)

    result, _ = await dispatch(
        save_route,
        {"route": {"name": "loop", "stops": [{"x": 1}, {"x": 2.5, "y": 3}], "color": "red"}},
    )

    assert result.value == "loop"
    assert received == [Route("loop", [Point(1.0), Point(2.5, 3.0)], Color.RED)]
    assert type(received[0].stops[0].x) is float

    extra, _ = await dispatch(save_route, {"route": {"name": "a", "stops": [], "speed": 1}})
    assert extra.error is not None
    assert extra.error.code == "invalid_tool_arguments"
    assert len(received) == 1


async def test_recursive_dataclass_refers_to_itself_and_converts_every_level() -> None:
    received: list[Tree] = []

    @tool(inline=True)
    def plant(tree: Tree) -> int:
        received.append(tree)
        return len(tree.children)

    assert plant.parameters is not None
    assert plant.parameters["$defs"] == {
        "Tree": {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
            },
            "required": ["label"],
            "additionalProperties": False,
        }
    }
    check_schema(plant.parameters)

    deep = {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}
    result, _ = await dispatch(plant, {"tree": deep})

    assert result.value == 1
    assert received == [Tree("a", [Tree("b", [Tree("c")])])]


async def test_local_classes_in_string_annotations_resolve_from_the_defining_scope() -> None:
    @dataclasses.dataclass
    class Folder:
        name: str
        subfolders: list[Folder] = dataclasses.field(default_factory=list)

    received: list[Folder] = []

    @tool(inline=True)
    def make_folder(folder: Folder) -> None:
        received.append(folder)

    assert make_folder.parameters is not None
    assert make_folder.parameters["$defs"]["Folder"]["properties"]["subfolders"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Folder"},
    }
    result, _ = await dispatch(
        make_folder, {"folder": {"name": "a", "subfolders": [{"name": "b"}]}}
    )
    assert result.error is None
    assert received == [Folder("a", [Folder("b")])]


async def test_named_tuple_is_an_object_and_converts_to_the_tuple_class() -> None:
    received: list[Pair] = []

    @tool(inline=True)
    def join(pair: Pair) -> str:
        received.append(pair)
        return pair.right * pair.left

    assert join.parameters is not None
    assert join.parameters["$defs"] == {
        "Pair": {
            "type": "object",
            "properties": {
                "left": {"type": "integer"},
                "right": {"type": "string", "default": "r"},
            },
            "required": ["left"],
            "additionalProperties": False,
        }
    }
    result, _ = await dispatch(join, {"pair": {"left": 2}})
    assert result.value == "rr"
    assert received == [Pair(2, "r")]


async def test_a_union_of_object_types_picks_the_member_whose_keys_fit() -> None:
    received: list[object] = []

    @tool(inline=True)
    def area(shape: Circle | Square | Point) -> float:
        received.append(shape)
        return 0.0

    result, _ = await dispatch(area, {"shape": {"kind": "square", "side": 2}})
    assert result.error is None
    result, _ = await dispatch(area, {"shape": {"x": 1, "y": 2}})
    assert result.error is None
    assert received == [{"kind": "square", "side": 2.0}, Point(1.0, 2.0)]


async def test_same_class_name_twice_gets_two_defs() -> None:
    def make(field_type: type) -> type:
        return dataclasses.make_dataclass("Item", [("value", field_type)])

    first, second = make(int), make(str)

    def pick(a: Any, b: Any) -> None:
        return None

    pick.__annotations__ = {"a": first, "b": second}
    definition = tool_from_function(pick)
    assert definition.parameters is not None
    assert definition.parameters["properties"] == {
        "a": {"$ref": "#/$defs/Item"},
        "b": {"$ref": "#/$defs/Item2"},
    }
    assert definition.parameters["$defs"]["Item2"]["properties"] == {"value": {"type": "string"}}
    check_schema(definition.parameters)


# --- defaults, docstrings, names, options -------------------------------------------------


async def test_defaults_are_optional_and_shown_when_they_are_json() -> None:
    sentinel = object()
    received: list[tuple[object, ...]] = []

    @tool(inline=True)
    def search(
        query: str,
        limit: int = 10,
        color: Color = Color.BLUE,
        when: dt.date = dt.date(2024, 1, 2),
        marker: Any = sentinel,
    ) -> None:
        received.append((query, limit, color, when, marker))

    assert search.parameters is not None
    properties = search.parameters["properties"]
    assert search.parameters["required"] == ["query"]
    assert properties["limit"] == {"type": "integer", "default": 10}
    assert properties["color"] == {"type": "string", "enum": ["red", "blue"], "default": "blue"}
    assert properties["when"] == {"type": "string", "format": "date", "default": "2024-01-02"}
    assert properties["marker"] == {}  # no JSON form: not shown, still applied

    result, _ = await dispatch(search, {"query": "q"})
    assert result.error is None
    assert received == [("q", 10, Color.BLUE, dt.date(2024, 1, 2), sentinel)]


async def test_positional_only_parameters_are_passed_by_position() -> None:
    received: list[tuple[int, int, int]] = []

    @tool(inline=True)
    def add(a: int = 1, b: int = 2, /, c: int = 3) -> int:
        received.append((a, b, c))
        return a + b + c

    result, _ = await dispatch(add, {"b": 20})
    assert result.value == 24
    assert received == [(1, 20, 3)]


def test_google_docstring() -> None:
    @tool
    def send_email(to: str, subject: str, cc: list[str] | None = None) -> None:
        """Send an email to one
        recipient.

        Longer text that is not part of the description.

        Args:
            to: The address to send to.
            subject (str): The subject line,
                kept short.
            cc: Copies.
        Returns:
            Nothing.
        """

    assert send_email.description == "Send an email to one recipient."
    assert send_email.parameters is not None
    properties = send_email.parameters["properties"]
    assert properties["to"]["description"] == "The address to send to."
    assert properties["subject"]["description"] == "The subject line, kept short."
    assert properties["cc"]["description"] == "Copies."


def test_numpy_docstring() -> None:
    @tool
    def scale(factor: float, axes: list[int]) -> None:
        """Scale the image.

        Parameters
        ----------
        factor : float
            How much to scale,
            above one enlarges.
        axes : list of int
            Which axes.

        Returns
        -------
        None
        """

    assert scale.description == "Scale the image."
    assert scale.parameters is not None
    properties = scale.parameters["properties"]
    assert properties["factor"]["description"] == "How much to scale, above one enlarges."
    assert properties["axes"]["description"] == "Which axes."


def test_rest_docstring_and_annotated_wins_over_docstring() -> None:
    @tool
    def rename(old: str, new: Annotated[str, "The new name (from Annotated)."]) -> None:
        """Rename a file.

        :param old: The current name.
        :param str new: Ignored, the annotation says it.
        :returns: nothing
        """

    assert rename.description == "Rename a file."
    assert rename.parameters is not None
    properties = rename.parameters["properties"]
    assert properties["old"] == {"type": "string", "description": "The current name."}
    assert properties["new"] == {"type": "string", "description": "The new name (from Annotated)."}


def test_name_description_and_options_pass_through() -> None:
    def helper(x: int) -> int:
        """From the docstring."""
        return x

    definition = tool_from_function(
        helper,
        name="renamed",
        description="Explicit.",
        exclusive=True,
        kind="read",
        metadata={"team": "core"},
        effect="effect-marker",
    )
    assert isinstance(definition, ToolDefinition)
    assert (definition.name, definition.description) == ("renamed", "Explicit.")
    assert definition.exclusive is True
    assert definition.kind == "read"
    assert definition.metadata == {"team": "core"}
    assert definition.effect == "effect-marker"
    assert tool_from_function(helper).description == "From the docstring."
    assert tool_from_function(helper).name == "helper"


def test_no_docstring_gives_an_empty_description() -> None:
    @tool
    def bare(x: int) -> int:
        return x

    assert bare.description == ""


def test_the_original_function_stays_reachable_and_callable() -> None:
    def double(x: int) -> int:
        return 2 * x

    definition = tool(double)
    assert original_function(definition) is double
    assert original_function(definition)(4) == 8
    with pytest.raises(TypeError, match="was not built by @tool"):
        original_function(ToolDefinition("plain", execute=lambda args, ctx: None))
    with pytest.raises(TypeError, match="original_function expects a ToolDefinition, got function"):
        original_function(double)  # type: ignore[arg-type]


def test_annotated_types_constraints_become_schema_keywords() -> None:
    annotated_types = pytest.importorskip("annotated_types")

    @tool
    def pick(
        count: Annotated[int, annotated_types.Gt(0), annotated_types.Le(10)],
        name: Annotated[str, annotated_types.MaxLen(20)],
        tags: Annotated[list[str], annotated_types.MinLen(1)],
    ) -> None:
        return None

    assert pick.parameters is not None
    properties = pick.parameters["properties"]
    assert properties["count"] == {"type": "integer", "exclusiveMinimum": 0, "maximum": 10}
    assert properties["name"] == {"type": "string", "maxLength": 20}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}, "minItems": 1}
    check_schema(pick.parameters)


def test_pydantic_field_in_annotated_gives_description_and_bounds() -> None:
    pydantic = pytest.importorskip("pydantic", reason="pydantic is an optional integration")

    @tool
    def page(
        size: Annotated[int, pydantic.Field(description="Rows per page.", ge=1, le=100)],
    ) -> None:
        return None

    assert page.parameters is not None
    assert page.parameters["properties"]["size"] == {
        "type": "integer",
        "description": "Rows per page.",
        "minimum": 1,
        "maximum": 100,
    }


# --- context injection, threads, async -------------------------------------------------------


@pytest.mark.parametrize("annotation", [ToolExecutionContext, ToolExecutionContext | None])
async def test_context_is_injected_and_left_out_of_the_schema(annotation: object) -> None:
    seen: list[ToolExecutionContext] = []

    def whoami(ctx: Any, name: str) -> str:
        seen.append(ctx)
        return name

    whoami.__annotations__ = {"ctx": annotation, "name": str, "return": str}
    definition = tool_from_function(whoami)
    assert definition.parameters == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }

    result, _ = await dispatch(definition, {"name": "n"})
    assert result.value == "n"
    assert len(seen) == 1
    assert seen[0].tool_call_id == "call_1"


async def test_sync_runs_in_a_worker_thread_with_context_variables() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")
    request_id.set("req-7")
    seen: list[tuple[int, str]] = []

    @tool
    def blocking(x: int) -> int:
        seen.append((threading.get_ident(), request_id.get()))
        return x

    assert blocking.is_async  # execute hands the call to a thread and awaits it
    result, _ = await dispatch(blocking, {"x": 1})
    assert result.value == 1
    assert seen[0][0] != threading.get_ident()
    assert seen[0][1] == "req-7"


async def test_inline_and_async_functions_run_on_the_loop_thread() -> None:
    threads: list[int] = []

    @tool(inline=True)
    def quick(x: int) -> int:
        threads.append(threading.get_ident())
        return x

    @tool
    async def awaited(x: int) -> int:
        await asyncio.sleep(0)
        threads.append(threading.get_ident())
        return x + 1

    assert not quick.is_async
    assert awaited.is_async
    assert (await dispatch(quick, {"x": 1}))[0].value == 1
    assert (await dispatch(awaited, {"x": 1}))[0].value == 2
    assert threads == [threading.get_ident(), threading.get_ident()]


async def test_a_sync_tool_in_a_thread_reports_progress_with_a_plain_call() -> None:
    @tool
    def crunch(n: int, context: ToolExecutionContext) -> int:
        context.progress("half", {"done": n // 2})
        return n

    result, events = await dispatch(crunch, {"n": 4})
    assert result.value == 4
    progress = [event for event in events if event.type == "tool_execution_progress"]
    assert [(event.progress, event.metadata) for event in progress] == [("half", {"done": 2})]
    assert [event.type for event in events][-1] == "tool_execution_finished"


async def test_partials_bound_methods_and_async_callable_objects_work() -> None:
    class Greeter:
        """Greets people."""

        async def __call__(self, name: str) -> str:
            return f"hi {name}"

    def power(base: int, exponent: int) -> int:
        return base**exponent

    greeter = tool_from_function(Greeter(), name="greet")
    assert greeter.is_async
    assert greeter.description == "Greets people."
    assert (await dispatch(greeter, {"name": "Ada"}))[0].value == "hi Ada"

    class Counter:
        def __init__(self) -> None:
            self.total = 0

        def add(self, amount: int) -> int:
            """Add to the running total."""
            self.total += amount
            return self.total

    counter = Counter()
    add = tool_from_function(counter.add)
    assert add.parameters is not None
    assert add.parameters["required"] == ["amount"]
    assert (await dispatch(add, {"amount": 5}))[0].value == 5
    assert counter.total == 5

    square = tool_from_function(functools.partial(power, exponent=2), name="square")
    assert square.parameters is not None
    assert square.parameters["required"] == ["base"]
    assert (await dispatch(square, {"base": 3}))[0].value == 9


# --- argument errors when nothing validated first ----------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"a": 1, "b": 2, "c": 3}, "Invalid arguments for tool needs_a: unexpected argument 'c'"),
        ({"b": 2}, "Invalid arguments for tool needs_a: missing required argument 'a'"),
        ({"a": "1"}, "Invalid arguments for tool needs_a: /a: expected an integer"),
        (
            {"a": 1, "b": "x"},
            "Invalid arguments for tool needs_a: /b: matches none of the allowed types "
            "(expected an array; expected null)",
        ),
        (
            {"a": 1, "b": [{"x": "far"}]},
            "Invalid arguments for tool needs_a: /b/0/x: expected a number",
        ),
        (
            {"a": 1, "b": [{"x": 1, "z": 0}]},
            "Invalid arguments for tool needs_a: /b/0: unexpected property 'z' for Point",
        ),
    ],
)
async def test_conversion_errors_name_the_path_and_never_run_the_function(
    arguments: dict[str, Any], message: str
) -> None:
    ran: list[bool] = []

    @tool(inline=True)
    def needs_a(a: int, b: list[Point] | None = None) -> None:
        ran.append(True)

    result, _ = await dispatch(needs_a, arguments, validate=False)
    assert result.error is not None
    assert result.error.message == message
    assert ran == []

    with pytest.raises(ArgumentConversionError) as raised:
        needs_a.execute(arguments, context())  # type: ignore[misc]
    assert str(raised.value) == message


# --- unsupported signatures and types: TypeError at decoration time ---------------------------


def test_unsupported_types_name_the_function_and_parameter() -> None:
    def send_email(to: str, when: dt.timedelta) -> None:
        return None

    with pytest.raises(
        TypeError,
        match=re.escape(
            "cannot express parameter 'when' of "
            "test_unsupported_types_name_the_function_and_parameter.<locals>.send_email: "
            "datetime.timedelta is not a supported type"
        ),
    ):
        tool(send_email)


@dataclasses.dataclass
class Attachment:
    name: str
    data: bytes


@dataclasses.dataclass
class Mail:
    attachments: list[Attachment]


@pytest.mark.parametrize(
    ("annotation", "reason"),
    [
        (bytes, "bytes is not a supported type"),
        (list[bytes], "bytes is not a supported type"),
        (dict[int, str], "dict keys must be str"),
        (Callable[[int], int], "is not a supported type"),
        (typing.TypeVar("T"), "type variable ~T has no concrete type"),
        (Attachment, "(at Attachment.data): bytes is not a supported type"),
        (Mail, "(at Mail.attachments > Attachment.data): bytes is not a supported type"),
        (list[ToolExecutionContext], "injected only as a parameter of its own"),
        (NotRequired[int], "only meaningful inside a TypedDict"),
    ],
)
def test_each_unsupported_type_is_a_type_error(annotation: object, reason: str) -> None:
    def f(x: Any) -> None:
        return None

    f.__annotations__ = {"x": annotation}
    with pytest.raises(TypeError, match="cannot express parameter 'x' of ") as raised:
        tool_from_function(f)
    assert reason in str(raised.value)


def test_unsupported_signatures_are_type_errors() -> None:
    def star_args(*values: int) -> None:
        return None

    def star_kwargs(**values: int) -> None:
        return None

    def unannotated(x) -> None:  # type: ignore[no-untyped-def]
        return None

    def two_contexts(a: ToolExecutionContext, b: ToolExecutionContext) -> None:
        return None

    def generator(x: int) -> typing.Iterator[int]:
        yield x

    def unresolvable(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    for fn, text in [
        (star_args, "*values has no place in a JSON arguments object"),
        (star_kwargs, "**values would let the model send any names"),
        (unannotated, "cannot express parameter 'x'"),
        (two_contexts, "more than one context parameter"),
        (generator, "a generator function returns no value"),
        (unresolvable, "cannot resolve the type hints"),
    ]:
        with pytest.raises(TypeError, match=re.escape(text)):
            tool_from_function(fn)
    with pytest.raises(TypeError, match="pass name="):
        tool_from_function(lambda x: x)


# --- sets, union order, flags, InitVars, names and numbers the schema cannot hold ------------


@pytest.mark.parametrize(
    ("hint", "argument"),
    [
        (set[int | bool], [1, True]),  # different in JSON Schema, equal in Python
        (frozenset[Any], [0, False, "x"]),
        (set[decimal.Decimal], ["1.0", "1.00"]),
    ],
    ids=["int-and-true", "zero-and-false", "equal-decimals"],
)
async def test_a_set_never_silently_drops_an_item_python_counts_as_equal(
    hint: object, argument: list[Any]
) -> None:
    received: list[object] = []
    definition = one_parameter(hint, received)

    result, _ = await dispatch(definition, {"x": argument})  # the validator lets it through

    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"
    assert re.fullmatch(
        r"Invalid arguments for tool probe: /x: items 0 and 1 are equal in Python, "
        r"so a set would keep only one of them",
        result.error.message,
    )
    assert received == []


@pytest.mark.parametrize("hint", [set, set[Any], frozenset[Any]], ids=["bare", "any", "frozen"])
@pytest.mark.parametrize("item", [[1], {"a": 1}], ids=["array", "object"])
async def test_an_unhashable_set_item_is_an_argument_error(hint: object, item: Any) -> None:
    received: list[object] = []
    definition = one_parameter(hint, received)

    result, _ = await dispatch(definition, {"x": ["ok", item]})

    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"
    assert result.error.message.startswith(
        "Invalid arguments for tool probe: /x/1: a set cannot hold this item"
    )
    assert received == []


async def test_union_members_are_tried_by_the_json_type_of_their_ref_enum_or_any_of() -> None:
    received: list[object] = []

    @tool(inline=True)
    def pick(
        point: Point | dict[str, float],
        amount: decimal.Decimal | str,
        mode: Mode | str,
        movie: Movie | dict[str, Any],
    ) -> None:
        received.extend([point, amount, mode, movie])

    arguments = {
        "point": {"x": 1},
        "amount": "1.50",
        "mode": "fast",
        "movie": {"title": "Alien"},
    }
    result, _ = await dispatch(pick, arguments)
    assert result.error is None
    assert received == [Point(1.0), decimal.Decimal("1.50"), Mode.FAST, {"title": "Alien"}]
    assert [type(value) for value in received] == [Point, decimal.Decimal, Mode, dict]

    received.clear()
    # What the first member refuses still goes to the next one.
    others = {"point": {"z": 2}, "amount": "lots", "mode": "slow", "movie": {"year": 1979}}
    result, _ = await dispatch(pick, others)
    assert result.error is None
    assert received == [{"z": 2.0}, "lots", "slow", {"year": 1979}]


def test_numbers_no_schema_can_hold_are_refused_at_decoration() -> None:
    annotated_types = pytest.importorskip("annotated_types")

    class Limit(enum.Enum):
        NONE = math.inf
        ONE = 1.0

    cases: list[tuple[object, str]] = [
        (Annotated[float, annotated_types.Lt(math.inf)], "the bound lt of Lt"),
        (Annotated[float, annotated_types.Gt(math.nan)], "the bound gt of Gt"),
        (Annotated[int, annotated_types.Le(10**400)], "the bound le of Le"),
        (Annotated[str, annotated_types.MaxLen(10**400)], "the bound max_length of MaxLen"),
        (Limit, "the value of "),
        (Literal[float("inf"), 0.0], "a Literal value"),
        (Literal[10**5000], "a Literal value"),
    ]
    for annotation, reason in cases:

        def f(x: Any) -> None:
            return None

        f.__annotations__ = {"x": annotation}
        with pytest.raises(TypeError, match="cannot express parameter 'x' of ") as raised:
            tool_from_function(f)
        assert f"{reason}" in str(raised.value)
        assert "is infinite, NaN or beyond the float range" in str(raised.value)


async def test_a_default_no_schema_can_hold_is_not_shown_and_still_applies() -> None:
    received: list[object] = []

    @tool(inline=True)
    def scale(
        factor: float = math.inf, big: int = 10**400, both: tuple[int, ...] = (1, 10**400)
    ) -> None:
        received.extend([factor, big, both])

    assert scale.parameters is not None
    check_schema(scale.parameters)
    assert scale.parameters["properties"] == {
        "factor": {"type": "number"},
        "big": {"type": "integer"},
        "both": {"type": "array", "items": {"type": "integer"}},
    }
    result, _ = await dispatch(scale, {})
    assert result.error is None
    assert received == [math.inf, 10**400, (1, 10**400)]


async def test_defs_names_are_made_safe_for_refs_and_stay_unique() -> None:
    received: list[object] = []
    config = TypedDict("cfg/v2", {"a": int})  # type: ignore[misc]  # noqa: UP013 - not a name
    spaced = dataclasses.make_dataclass("Box 2", [("w", int)])
    underscored = dataclasses.make_dataclass("Box_2", [("h", int)])

    def take(c: Any, b: Any, u: Any) -> None:
        received.extend([c, b, u])

    take.__annotations__ = {"c": config, "b": spaced, "u": underscored}
    definition = tool_from_function(take, inline=True)
    assert definition.parameters is not None
    check_schema(definition.parameters)
    assert definition.parameters["properties"] == {
        "c": {"$ref": "#/$defs/cfg_v2"},
        "b": {"$ref": "#/$defs/Box_2"},
        "u": {"$ref": "#/$defs/Box_22"},
    }
    assert list(definition.parameters["$defs"]) == ["cfg_v2", "Box_2", "Box_22"]

    result, _ = await dispatch(definition, {"c": {"a": 1}, "b": {"w": 2}, "u": {"h": 3}})
    assert result.error is None
    assert received == [{"a": 1}, spaced(2), underscored(3)]


@dataclasses.dataclass
class Price:
    cents: int
    currency: dataclasses.InitVar[str]
    rate: dataclasses.InitVar[float] = 1.0
    label: str = dataclasses.field(init=False)

    def __post_init__(self, currency: str, rate: float) -> None:
        self.label = f"{self.cents * rate:g} {currency}"


async def test_dataclass_init_vars_are_properties_passed_to_the_constructor() -> None:
    labels: list[str] = []

    @tool(inline=True)
    def charge(price: Price) -> None:
        labels.append(price.label)

    assert charge.parameters is not None
    assert charge.parameters["$defs"]["Price"] == {
        "type": "object",
        "properties": {
            "cents": {"type": "integer"},
            "currency": {"type": "string"},
            "rate": {"type": "number", "default": 1.0},
        },
        "required": ["cents", "currency"],
        "additionalProperties": False,
    }
    result, _ = await dispatch(charge, {"price": {"cents": 5, "currency": "EUR"}})
    assert result.error is None
    result, _ = await dispatch(charge, {"price": {"cents": 5, "currency": "EUR", "rate": 2}})
    assert result.error is None
    assert labels == ["5 EUR", "10 EUR"]

    blocked, _ = await dispatch(charge, {"price": {"cents": 5}}, validate=False)
    assert blocked.error is not None
    assert blocked.error.message == (
        "Invalid arguments for tool charge: /price: missing required property 'currency' for Price"
    )
    assert labels == ["5 EUR", "10 EUR"]


class Refused(Exception):
    pass


@dataclasses.dataclass
class Span:
    lo: int
    hi: int

    def __post_init__(self) -> None:
        if self.lo == 0:
            raise Refused("lo may not be 0")
        if self.lo == 1:
            raise KeyError("lo")
        assert self.lo <= self.hi, "lo must be <= hi"


@pytest.mark.parametrize(
    ("lo", "reason", "cause"),
    [
        (5, "lo must be <= hi", AssertionError),
        (0, "lo may not be 0", Refused),
        (1, "'lo'", KeyError),
    ],
)
async def test_any_exception_from_post_init_is_an_argument_error(
    lo: int, reason: str, cause: type[Exception]
) -> None:
    ran: list[Span] = []

    @tool(inline=True)
    def width(span: Span) -> int:
        ran.append(span)
        return span.hi - span.lo

    arguments = {"span": {"lo": lo, "hi": 2}}
    with pytest.raises(ArgumentConversionError) as raised:
        width.execute(arguments, context())  # type: ignore[misc]
    # startswith: pytest's assert rewriting appends its own explanation to the assert's text.
    assert str(raised.value).startswith(
        f"Invalid arguments for tool width: /span: could not build Span: {reason}"
    )
    assert isinstance(raised.value.__cause__, cause)

    result, _ = await dispatch(width, arguments)
    assert result.error is not None
    assert result.error.code == "invalid_tool_arguments"
    assert ran == []


async def test_an_int_flag_takes_any_combination_of_its_bits() -> None:
    received: list[object] = []

    @tool(inline=True)
    def chmod(mode: Perm = Perm.R | Perm.W) -> None:
        received.append(mode)

    assert chmod.parameters is not None
    assert chmod.parameters["properties"]["mode"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 11,
        "default": 3,
    }
    for value in (3, 0, 11):
        result, _ = await dispatch(chmod, {"mode": value})
        assert result.error is None
    assert received == [Perm.R | Perm.W, Perm(0), Perm.R | Perm.W | Perm.X]
    assert all(type(mode) is Perm for mode in received)

    refused, _ = await dispatch(chmod, {"mode": 4}, validate=False)  # no member has bit 4
    assert refused.error is not None
    assert refused.error.message == (
        "Invalid arguments for tool chmod: /mode: expected a combination of Perm flags "
        "(an integer from 0 to 11)"
    )
    assert len(received) == 3


@pytest.mark.parametrize(
    ("hint", "reason"),
    [
        (set[list[int]], "set items must be hashable, and list[int] never is"),
        (frozenset[Point], "set items must be hashable, and test_function_tools.Point never is"),
        (set[Movie], "set items must be hashable, and test_function_tools.Movie never is"),
        (set[dict[str, int] | list[int]], "set items must be hashable"),
    ],
    ids=["list", "dataclass", "typeddict", "union"],
)
def test_set_items_that_can_never_be_hashed_are_refused(hint: object, reason: str) -> None:
    def f(x: Any) -> None:
        return None

    f.__annotations__ = {"x": hint}
    with pytest.raises(TypeError, match="cannot express parameter 'x' of ") as raised:
        tool_from_function(f)
    assert reason in str(raised.value)


def test_a_decimal_takes_an_integer_beyond_the_str_digit_limit() -> None:
    received: list[object] = []
    definition = one_parameter(decimal.Decimal, received)
    huge = 10**5000

    assert definition.execute is not None
    assert definition.execute({"x": huge}, context()) == "ok"
    assert received == [decimal.Decimal(huge)]


# --- pydantic ----------------------------------------------------------------------------------


async def test_pydantic_models_bring_their_own_schema_and_validation() -> None:
    pydantic = pytest.importorskip("pydantic", reason="pydantic is an optional integration")

    class Address(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        street: str
        zip_code: str = pydantic.Field(description="Postal code.", min_length=5)

    class Customer(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        name: str
        address: Address

    received: list[object] = []

    @tool(inline=True)
    def register(customer: Customer, home: Point, note: str = "") -> str:
        received.append((customer, home))
        return customer.name  # type: ignore[no-any-return]

    parameters = register.parameters
    assert parameters is not None
    check_schema(parameters)
    assert parameters["properties"]["customer"] == {"$ref": "#/$defs/Customer"}
    assert parameters["properties"]["home"] == {"$ref": "#/$defs/Point"}
    customer_schema = Customer.model_json_schema(ref_template="#/$defs/{model}")
    address_schema = customer_schema.pop("$defs")["Address"]
    assert parameters["$defs"]["Customer"] == customer_schema
    assert parameters["$defs"]["Address"] == address_schema
    assert address_schema["properties"]["zip_code"]["minLength"] == 5

    arguments = {
        "customer": {"name": "Ada", "address": {"street": "Main", "zip_code": "12345"}},
        "home": {"x": 0},
    }
    result, _ = await dispatch(register, arguments)
    assert result.value == "Ada"
    customer, _ = received[0]  # type: ignore[misc]
    assert isinstance(customer, Customer)
    assert isinstance(customer.address, Address)

    short = {
        "customer": {"name": "Ada", "address": {"street": "Main", "zip_code": "1"}},
        "home": {"x": 0},
    }
    blocked, events = await dispatch(register, short)
    assert blocked.error is not None
    assert events[-1].reason == "validation_failed"
    failed, _ = await dispatch(register, short, validate=False)
    assert failed.error is not None
    assert failed.error.message.startswith(
        "Invalid arguments for tool register: /customer: invalid Customer: address.zip_code:"
    )
    assert len(received) == 1


def test_pydantic_definition_named_like_one_of_ours_is_renamed() -> None:
    pydantic = pytest.importorskip("pydantic", reason="pydantic is an optional integration")

    class Inner(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        label: str

    class Outer(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        inner: Inner

    mine = dataclasses.make_dataclass("Inner", [("count", int)])

    def both(a: Any, b: Any) -> None:
        return None

    both.__annotations__ = {"a": mine, "b": Outer}
    parameters = tool_from_function(both).parameters
    assert parameters is not None
    check_schema(parameters)
    defs = parameters["$defs"]
    assert defs["Inner"]["properties"] == {"count": {"type": "integer"}}
    assert defs["Inner2"]["properties"] == {"label": {"title": "Label", "type": "string"}}
    assert defs["Outer"]["properties"]["inner"] == {"$ref": "#/$defs/Inner2"}


async def test_pydantic_field_pattern_reaches_the_schema() -> None:
    pydantic = pytest.importorskip("pydantic", reason="pydantic is an optional integration")
    received: list[object] = []

    @tool(inline=True)
    def lookup(
        sku: Annotated[str, pydantic.Field(pattern=r"^[A-Z]{3}-\d+$", max_length=12)],
    ) -> None:
        received.append(sku)

    assert lookup.parameters is not None
    assert lookup.parameters["properties"]["sku"] == {
        "type": "string",
        "maxLength": 12,
        "pattern": r"^[A-Z]{3}-\d+$",
    }
    blocked, events = await dispatch(lookup, {"sku": "not a sku"})
    assert blocked.error is not None
    assert events[-1].reason == "validation_failed"
    result, _ = await dispatch(lookup, {"sku": "ABC-12"})
    assert result.error is None
    assert received == ["ABC-12"]

    def lookbehind(x: Annotated[str, pydantic.Field(pattern=r"(?<=a)b")]) -> None:
        return None

    with pytest.raises(TypeError, match=re.escape("pattern '(?<=a)b' is not a regular expression")):
        tool_from_function(lookbehind)


# --- works with the rest of the harness -------------------------------------------------------


async def test_a_decorated_tool_runs_in_an_agent() -> None:
    @tool
    def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
        """Current weather for a city."""
        return {"city": city, "unit": unit, "temp": 21}

    provider = ScriptedProvider(
        [
            ProviderResponse(tool_calls=(ToolCall("call_1", "get_weather", {"city": "Paris"}),)),
            ProviderResponse(text="21 degrees."),
        ]
    )
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[get_weather],
        validator=create_json_schema_tool_argument_validator(),
    )
    result = await agent.session().run("Weather in Paris?")
    assert result.output_text == "21 degrees."
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert len(tool_messages) == 1
    assert "Paris" in str(tool_messages[0].content)


def test_the_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / "function-tools.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "asyncio.run(" in b]
    assert len(blocks) == 1, "docs/function-tools.md lost its runnable example"
    exec(compile(blocks[0], "docs/function-tools.md", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "['city', 'days', 'unit']",
        "Forecast for Paris, 3 days, Unit.CELSIUS",
        'Invalid arguments for tool get_forecast: /days: value is not of type "integer"',
    ]


# --- property: random type trees --------------------------------------------------------------

BASE_TYPES: list[object] = [
    str,
    int,
    float,
    bool,
    type(None),
    Any,
    Color,
    Priority,
    Literal["a", "b", 3],
    dt.datetime,
    dt.date,
    uuid.UUID,
    decimal.Decimal,
    int | str,
]


def _dataclass_of(spec: tuple[list[object], int]) -> type:
    members, suffix = spec
    fields = [(f"f{i}", member) for i, member in enumerate(members)]
    # Few distinct names, so one tree often holds two different classes of the same name.
    return dataclasses.make_dataclass(f"Node{suffix}", fields)


def _typeddict_of(spec: tuple[list[object], int, bool]) -> type:
    members, suffix, total = spec
    fields = {f"k{i}": member for i, member in enumerate(members)}
    return TypedDict(f"Record{suffix}", fields, total=total)  # type: ignore[operator]


def _extend(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(
        children.map(lambda t: list[t]),  # type: ignore[valid-type]
        children.map(lambda t: typing.Optional[t]),  # noqa: UP045
        st.tuples(children, children).map(lambda p: tuple[p[0], p[1]]),  # type: ignore[valid-type]
        children.map(lambda t: tuple[t, ...]),  # type: ignore[valid-type]
        children.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        children.map(lambda t: Annotated[t, "described"]),
        st.tuples(st.lists(children, min_size=1, max_size=3), st.integers(0, 2)).map(_dataclass_of),
        st.tuples(st.lists(children, min_size=1, max_size=3), st.integers(0, 2), st.booleans()).map(
            _typeddict_of
        ),
    )


TYPE_TREES = st.recursive(st.sampled_from(BASE_TYPES), _extend, max_leaves=8)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)


def json_values(tp: Any) -> st.SearchStrategy[Any]:
    """JSON values of annotation ``tp``, written independently of the module under test."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return json_values(args[0])
    if origin in (typing.Union, types.UnionType):
        return st.one_of([json_values(arg) for arg in args])
    if origin is Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(json_values(args[0]), max_size=3)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(json_values(args[0]), max_size=3)
        return st.tuples(*[json_values(arg) for arg in args]).map(list)
    if origin is dict:
        return st.dictionaries(st.text(max_size=3), json_values(args[1]), max_size=3)
    simple: dict[object, st.SearchStrategy[Any]] = {
        str: st.text(max_size=5),
        int: st.integers(-(2**40), 2**40),
        float: st.floats(allow_nan=False, allow_infinity=False) | st.integers(-100, 100),
        bool: st.booleans(),
        type(None): st.none(),
        Any: JSON,
        Color: st.sampled_from([c.value for c in Color]),
        Priority: st.sampled_from([p.value for p in Priority]),
        dt.datetime: st.datetimes(timezones=st.none() | st.just(dt.UTC)).map(dt.datetime.isoformat),
        dt.date: st.dates().map(dt.date.isoformat),
        uuid.UUID: st.uuids().map(str),
        decimal.Decimal: st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str)
        | st.integers(-100, 100),
    }
    if tp in simple:
        return simple[tp]
    hints = typing.get_type_hints(tp, include_extras=True)
    if dataclasses.is_dataclass(tp):
        return st.fixed_dictionaries({name: json_values(hint) for name, hint in hints.items()})
    required = tp.__required_keys__
    return st.fixed_dictionaries(
        {name: json_values(hint) for name, hint in hints.items() if name in required},
        optional={name: json_values(hint) for name, hint in hints.items() if name not in required},
    )


def conforms(tp: Any, raw: Any, value: Any) -> bool:
    """Whether ``value`` is ``raw`` converted to annotation ``tp`` (type and content)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return conforms(args[0], raw, value)
    if origin in (typing.Union, types.UnionType):
        return any(conforms_safely(arg, raw, value) for arg in args)
    if origin is Literal:
        return any(type(value) is type(arg) and value == arg for arg in args) and value == raw
    if origin is list:
        return (
            type(value) is list
            and len(value) == len(raw)
            and all(conforms(args[0], r, v) for r, v in zip(raw, value, strict=True))
        )
    if origin is tuple:
        items = [args[0]] * len(raw) if len(args) == 2 and args[1] is Ellipsis else list(args)
        return (
            type(value) is tuple
            and len(value) == len(raw) == len(items)
            and all(conforms(item, r, v) for item, r, v in zip(items, raw, value, strict=True))
        )
    if origin is dict:
        return (
            type(value) is dict
            and value.keys() == raw.keys()
            and all(conforms(args[1], raw[k], value[k]) for k in raw)
        )
    if tp is Any:
        return value is raw
    if tp is type(None):
        return value is None and raw is None
    if tp in (str, bool, int):
        return type(value) is tp and value == raw and type(raw) is tp
    if tp is float:
        return type(value) is float and not isinstance(raw, bool) and value == raw
    if tp in (Color, Priority):
        return type(value) is tp and value.value == raw
    if tp in (dt.datetime, dt.date):
        return type(value) is tp and isinstance(raw, str) and value.isoformat() == raw
    if tp is uuid.UUID:
        return type(value) is uuid.UUID and str(value) == raw
    if tp is decimal.Decimal:
        return type(value) is decimal.Decimal and value == decimal.Decimal(str(raw))
    hints = typing.get_type_hints(tp, include_extras=True)
    if dataclasses.is_dataclass(tp):
        return type(value) is tp and all(
            conforms(hint, raw[name], getattr(value, name)) for name, hint in hints.items()
        )
    return (
        type(value) is dict
        and value.keys() == raw.keys()
        and all(conforms(hints[name], raw[name], value[name]) for name in raw)
    )


def conforms_safely(tp: Any, raw: Any, value: Any) -> bool:
    """``conforms`` for one member of a union: a value of another shape is simply not it."""
    try:
        return conforms(tp, raw, value)
    except (TypeError, KeyError, AttributeError):
        return False


@given(data=st.data(), hints=st.lists(TYPE_TREES, min_size=1, max_size=3))
def test_random_type_trees_give_valid_schemas_and_values_survive_conversion(
    data: st.DataObject, hints: list[object]
) -> None:
    received: dict[str, Any] = {}

    def probe(**kwargs: Any) -> None:
        received.update(kwargs)

    names = [f"p{i}" for i in range(len(hints))]
    probe.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names]
    )
    probe.__annotations__ = dict(zip(names, hints, strict=True))
    definition = tool_from_function(probe, inline=True)
    assert definition.parameters is not None
    check_schema(definition.parameters)

    arguments = {
        name: data.draw(json_values(hint), label=name)
        for name, hint in zip(names, hints, strict=True)
    }
    assert VALIDATE(definition, arguments) is None
    assert definition.execute is not None
    definition.execute(arguments, context())
    for name, hint in zip(names, hints, strict=True):
        assert conforms(hint, arguments[name], received[name]), (
            hint,
            arguments[name],
            received[name],
        )


# --- second pass over this round's changes -----------------------------------------------------


def test_a_union_over_definitions_that_share_others_is_typed_once_per_definition() -> None:
    from pydantic import RootModel
    from typing_extensions import TypeAliasType

    first: Any = TypeAliasType("A0", int)
    second: Any = TypeAliasType("B0", str)
    for level in range(1, 26):  # every level refers twice to the one below: 2**25 paths
        first, second = (
            TypeAliasType(f"A{level}", first | second),
            TypeAliasType(f"B{level}", first | second | None),
        )

    class Root(RootModel[first]):  # type: ignore[misc,valid-type]
        pass

    def pick(x: Root | float) -> str:
        return repr(x)

    built = tool_from_function(pick)  # built at once (the schema guard refuses such a schema)
    members = built.parameters["properties"]["x"]["anyOf"]  # type: ignore[index]
    assert {"type": "number"} in members


def test_a_pattern_inside_a_pydantic_model_is_checked_when_the_tool_is_built() -> None:
    from pydantic import BaseModel, ConfigDict, Field

    class Order(BaseModel):
        model_config = ConfigDict(regex_engine="python-re")
        code: str = Field(pattern=r"^[A-Z]+\Z")

    def place(order: Order) -> str:
        return order.code

    with pytest.raises(TypeError, match="is not a regular expression the schema validator"):
        tool_from_function(place)


def test_a_compiled_pattern_keeps_its_flags_inline() -> None:
    from pydantic import Field

    def lookup(code: Annotated[str, Field(pattern=re.compile(r"^abc-\d+$", re.IGNORECASE))]) -> str:
        return code

    built = tool_from_function(lookup)
    assert built.parameters["properties"]["code"]["pattern"] == r"(?i)^abc-\d+$"  # type: ignore[index]
    assert create_json_schema_tool_argument_validator()(built, {"code": "ABC-1"}) is None


def test_a_flag_with_an_alias_for_all_bits_builds_on_its_own_bits() -> None:
    class Access(enum.IntFlag):
        R = 1
        W = 2
        ALL = -1

    def chmod(mode: Access) -> int:
        return int(mode)

    schema = tool_from_function(chmod).parameters["properties"]["mode"]  # type: ignore[index]
    assert schema == {"type": "integer", "minimum": 0, "maximum": 3}


def test_a_default_no_schema_guard_takes_is_not_shown() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]

    def f(a: str = "x\ud800", b: Any = deep, c: list[Any] = [[1]]) -> str:  # noqa: B006
        return "ok"

    built = tool_from_function(f)
    properties = built.parameters["properties"]  # type: ignore[index]
    assert "default" not in properties["a"]
    assert "default" not in properties["b"]
    assert properties["c"]["default"] == [[1]]
    check_schema(built.parameters)


def test_an_item_whose_hash_fails_its_own_way_is_an_argument_error() -> None:
    @dataclasses.dataclass(frozen=True)
    class Key:
        name: str

        def __hash__(self) -> int:
            raise ValueError("no hash today")

    ran: list[object] = []

    def f(keys: frozenset[Key]) -> int:
        ran.append(keys)
        return len(keys)

    built = tool_from_function(f)
    with pytest.raises(ArgumentConversionError):
        asyncio.run(built.execute({"keys": [{"name": "a"}]}, None))  # type: ignore[misc,arg-type]
    assert ran == []


# --- recursive unions convert in linear time -----------------------------------------------------

BUILT: collections.Counter[str] = collections.Counter()


@dataclasses.dataclass
class ExprNum:
    value: int

    def __post_init__(self) -> None:
        BUILT[type(self).__name__] += 1


@dataclasses.dataclass
class ExprAdd:
    left: Expr
    right: Expr
    op: Literal["+"]  # the discriminator comes last: each subtree converts before it is read

    def __post_init__(self) -> None:
        BUILT[type(self).__name__] += 1


@dataclasses.dataclass
class ExprMul:
    left: Expr
    right: Expr
    op: Literal["*"]

    def __post_init__(self) -> None:
        BUILT[type(self).__name__] += 1


Expr = ExprNum | ExprAdd | ExprMul


@dataclasses.dataclass
class ChainInt:
    child: ChainInt | ChainStr | None
    x: int


@dataclasses.dataclass
class ChainStr:
    child: ChainInt | ChainStr | None
    x: str


@dataclasses.dataclass
class Pairs:
    pair: tuple[Pairs | None, int] | tuple[Pairs | None, str]


class ReadCounting(dict[str, Any]):
    """A JSON object that counts how often a conversion reads its keys."""

    reads = 0

    def __iter__(self) -> Iterator[str]:
        ReadCounting.reads += 1
        return super().__iter__()


def test_a_recursive_union_with_its_discriminator_last_builds_each_node_once() -> None:
    received: list[object] = []

    @tool(inline=True)
    def evaluate(expr: Expr) -> None:
        received.append(expr)

    value: Any = {"value": 1}
    expected: Any = ExprNum(1)
    for level in range(12):  # every level used to convert its subtree once per member tried
        op = "+" if level % 3 == 0 else "*"
        value = {"left": value, "right": {"value": level}, "op": op}
        expected = (ExprAdd if op == "+" else ExprMul)(expected, ExprNum(level), op)  # type: ignore[arg-type]
    BUILT.clear()
    assert evaluate.execute is not None
    evaluate.execute({"expr": value}, context())
    assert received == [expected]
    assert BUILT == {"ExprNum": 13, "ExprAdd": 4, "ExprMul": 8}  # one per node, none wasted


def test_a_chain_that_fits_only_the_last_member_reads_each_level_twice() -> None:
    @tool(inline=True)
    def walk(node: ChainInt | ChainStr) -> int:
        depth = 0
        current: ChainInt | ChainStr | None = node
        while current is not None:
            depth, current = depth + 1, current.child
        return depth

    def chain(depth: int, innermost: object) -> Any:
        value: Any = ReadCounting(child=None, x=innermost)
        for _ in range(depth - 1):
            value = ReadCounting(child=value, x="s")
        return value

    assert walk.execute is not None
    ReadCounting.reads = 0
    assert walk.execute({"node": chain(16, "s")}, context()) == 16
    assert ReadCounting.reads <= 2 * 16  # each level: tried as ChainInt, then as ChainStr

    # Nothing fits the innermost level: the same error as ever, found as quickly.
    ReadCounting.reads = 0
    with pytest.raises(ArgumentConversionError) as caught:
        walk.execute({"node": chain(16, [])}, context())
    where = "/node" + "/child" * 15 + "/x"
    assert str(caught.value) == f"Invalid arguments for tool walk: {where}: expected an integer"
    assert caught.value.path == where
    assert ReadCounting.reads <= 2 * 16


def test_a_union_of_arrays_that_fails_late_keeps_what_it_converted_for_the_next_member() -> None:
    received: list[Pairs] = []

    @tool(inline=True)
    def take(pairs: Pairs) -> None:
        received.append(pairs)

    value: Any = None
    expected: Any = None
    for _ in range(20):  # each level fits the second tuple type only, after its first item
        value = ReadCounting(pair=[value, "s"])
        expected = Pairs((expected, "s"))
    ReadCounting.reads = 0
    assert take.execute is not None
    take.execute({"pairs": value}, context())
    assert received == [expected]
    assert ReadCounting.reads == 20


def test_one_json_object_in_two_places_still_converts_to_two_objects() -> None:
    received: list[tuple[Any, list[Any]]] = []

    @tool(inline=True)
    def pair(first: Expr, rest: list[Expr]) -> None:
        received.append((first, rest))

    shared = {"left": {"value": 1}, "right": {"value": 2}, "op": "*"}  # tried as ExprAdd first
    assert pair.execute is not None
    pair.execute({"first": shared, "rest": [shared, shared]}, context())
    [(first, rest)] = received
    assert first == rest[0] == rest[1] == ExprMul(ExprNum(1), ExprNum(2), "*")
    built = [first, *rest]
    assert len({id(item) for item in built}) == 3
    assert len({id(item.left) for item in built}) == 3


@dataclasses.dataclass
class ExprOp:
    left: ExprNum | ExprOp
    right: ExprNum | ExprOp
    op: Literal["+", "*"]


def test_a_union_whose_members_each_recurse_is_past_the_schema_guard_one_member_is_not() -> None:
    from prism_tools.errors import SchemaGuardError

    def evaluate(expr: Expr) -> None:
        return None

    def evaluate_op(expr: ExprNum | ExprOp) -> None:
        return None

    # Each anyOf member applies to the same value, so two members that both lead back to the
    # union may double the validator's work at every level: the guard refuses that schema.
    with pytest.raises(SchemaGuardError) as caught:
        check_schema(tool_from_function(evaluate).parameters)
    assert caught.value.reason == "schema_expansion_too_large"
    check_schema(tool_from_function(evaluate_op).parameters)
