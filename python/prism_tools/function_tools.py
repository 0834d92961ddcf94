"""Tools from plain Python functions: ``@tool`` and ``tool_from_function``.

``@tool`` reads a function's signature, type hints and docstring once, at decoration time, and
builds a ``ToolDefinition``: the name, the description (the docstring's first paragraph), a JSON
Schema (draft 2020-12) for the arguments object, and an ``execute(args, context)`` that converts
the JSON arguments back to the annotated Python types and calls the function. A type the schema
cannot express is a ``TypeError`` at decoration time that names the function and the parameter.

Sync functions run in a worker thread (``asyncio.to_thread``, context variables copied) unless
``inline=True``; async functions are awaited on the loop. A parameter annotated with
``ToolExecutionContext`` receives the call's context and is left out of the schema.

The decorator returns the ``ToolDefinition`` (not the function); ``original_function(tool)``
gives the function back. See ``docs/function-tools.md`` for the full type table.
"""

from __future__ import annotations

import asyncio
import collections.abc as cabc
import contextlib
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import inspect
import math
import re
import sys
import threading
import types
import typing
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import PurePath
from typing import Annotated, Any, Literal, NotRequired, Required, TypeAlias, overload

from prism_tools import _json
from prism_tools.errors import PrismError, SchemaGuardError
from prism_tools.types import JSONValue, ToolDefinition, ToolExecutionContext, ToolKind
from prism_tools.validation import check_schema

__all__ = [
    "ArgumentConversionError",
    "original_function",
    "tool",
    "tool_from_function",
]

Schema: TypeAlias = dict[str, JSONValue]
Convert: TypeAlias = Callable[[object], object]
ToolFunction: TypeAlias = Callable[..., Any]


class ArgumentConversionError(PrismError, ValueError):
    """Arguments that do not fit the function's parameters (wrong shape, unknown or missing
    names). Raised inside ``execute``, so dispatch reports it as the call's error; with a schema
    validator at dispatch, such calls are blocked before they get here."""

    code = "invalid_tool_arguments"

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class _Mismatch(Exception):
    """A value that does not fit its type; containers add their key on the way out."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.parts: list[str] = []  # innermost first


class _Unsupported(Exception):
    """A type the schema cannot express; ``where`` names the enclosing fields, innermost first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.where: list[str] = []


def _json_pointer(parts: list[str]) -> str:
    return "/" + "/".join(_json.pointer_token(part) for part in reversed(parts))


def _type_name(tp: object) -> str:
    if isinstance(tp, type):
        if tp.__module__ == "builtins":
            return tp.__qualname__
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)


# ---------------------------------------------------------------------------------------------
# Docstrings: the first paragraph, and per-parameter text in Google, NumPy or reST style.

_SECTION_NAMES = frozenset(
    (
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "other parameters",
        "attributes",
        "fields",
    )
)
_GOOGLE_HEADER = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(?:\s+(.*))?$")
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")
_REST_PARAM = re.compile(
    r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:\s*(.*)$"
)
# Headers that end the summary paragraph when no blank line comes first.
_SUMMARY_ENDS = _SECTION_NAMES | {
    "returns",
    "return",
    "raises",
    "yields",
    "examples",
    "example",
    "note",
    "notes",
    "see also",
    "warning",
    "warnings",
}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _numpy_header(lines: list[str], index: int) -> bool:
    return (
        index + 1 < len(lines)
        and bool(_NUMPY_RULE.match(lines[index + 1]))
        and bool(lines[index].strip())
    )


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(first paragraph, {parameter: description})`` of a docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if (
            not stripped
            or _numpy_header(lines, index)
            or (stripped.endswith(":") and stripped[:-1].strip().lower() in _SUMMARY_ENDS)
            or stripped.startswith((":param", ":arg", ":key", ":return", ":raise", ":type"))
        ):
            break
        summary.append(stripped)
    params: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if _numpy_header(lines, index):
            index += 2
            if stripped.lower() in _SECTION_NAMES:
                index = _numpy_section(lines, index, _indent(line), params)
            continue
        header = _GOOGLE_HEADER.match(line)
        if header and header.group(1).lower() in _SECTION_NAMES:
            index = _google_section(lines, index + 1, _indent(line), params)
            continue
        rest = _REST_PARAM.match(stripped)
        if rest:
            text = [rest.group(2).strip()]
            index += 1
            while index < len(lines) and lines[index].strip() and _indent(lines[index]) > 0:
                if lines[index].strip().startswith(":"):
                    break
                text.append(lines[index].strip())
                index += 1
            params.setdefault(rest.group(1), " ".join(t for t in text if t))
            continue
        index += 1
    return " ".join(summary), params


def _google_section(lines: list[str], index: int, header: int, params: dict[str, str]) -> int:
    entry_indent: int | None = None
    current: str | None = None
    text: list[str] = []

    def flush() -> None:
        if current is not None:
            params.setdefault(current, " ".join(t for t in text if t))

    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        indent = _indent(line)
        if indent <= header:
            break
        if entry_indent is None:
            entry_indent = indent
        entry = _GOOGLE_ENTRY.match(line.strip()) if indent == entry_indent else None
        if entry:
            flush()
            current, text = entry.group(1), [entry.group(2) or ""]
        elif current is not None:
            text.append(line.strip())
        index += 1
    flush()
    return index


def _numpy_section(lines: list[str], index: int, header: int, params: dict[str, str]) -> int:
    names: list[str] = []
    text: list[str] = []

    def flush() -> None:
        for name in names:
            params.setdefault(name, " ".join(text))

    while index < len(lines):
        line = lines[index]
        if _numpy_header(lines, index):
            break
        if not line.strip():
            index += 1
            continue
        if _indent(line) <= header:
            entry = _NUMPY_ENTRY.match(line.strip())
            if entry is None:
                break
            flush()
            names = [name.strip().lstrip("*") for name in entry.group(1).split(",")]
            text = []
        elif names:
            text.append(line.strip())
        index += 1
    flush()
    return index


def _class_doc(cls: type) -> str | None:
    doc = cls.__doc__
    # Dataclasses and named tuples without a docstring get their signature as __doc__.
    if not doc or doc.startswith(f"{cls.__name__}("):
        return None
    return doc


# ---------------------------------------------------------------------------------------------
# Values: JSON defaults and the converters from JSON back to the annotated types.


_NOT_A_SCHEMA_NUMBER = "is infinite, NaN or beyond the float range, which no schema can hold"


def _fits_json_number(value: object) -> bool:
    """Whether a number may stand in a schema: JSON has no infinity or NaN, and the schema
    guard reads an integer beyond 64 bits as a float, so one past the float range is refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _non_json_number_at(schema: JSONValue) -> str | None:
    """The JSON Pointer of the first number in ``schema`` that cannot be in a schema, or None."""
    for path, leaf, is_key in _json.json_leaf_paths(schema):
        if not is_key and not _fits_json_number(leaf):
            return _json.pointer_of(path) or "/"
    return None


class _NotJSON(Exception):
    pass


# Nesting a default may have and still be shown: well within the schema guard's depth limit.
_MAX_DEFAULT_DEPTH = 16


def _to_json(value: object, depth: int = 0) -> JSONValue:
    """``value`` as plain JSON for a schema ``default``; ``_NotJSON`` when it has no such form,
    or none a schema guard takes (a lone surrogate, deep nesting)."""
    if depth > _MAX_DEFAULT_DEPTH:
        raise _NotJSON
    if isinstance(value, enum.Enum):
        return _to_json(value.value, depth)
    if isinstance(value, str):
        if _json.holds_lone_surrogate(value):
            raise _NotJSON
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if not _fits_json_number(value):
            raise _NotJSON
        return value
    if isinstance(value, list | tuple):
        return [_to_json(item, depth + 1) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(key, str) and not _json.holds_lone_surrogate(key) for key in value):
            raise _NotJSON
        return {key: _to_json(item, depth + 1) for key, item in value.items()}
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | PurePath):
        return str(value)
    raise _NotJSON


def _identity(value: object) -> object:
    return value


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _convert_str(value: object) -> object:
    if isinstance(value, str):
        return value
    raise _Mismatch("expected a string")


def _convert_int(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)  # JSON Schema counts 3.0 as an integer
    raise _Mismatch("expected an integer")


def _convert_float(value: object) -> object:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise _Mismatch("number too large for a float") from None
    raise _Mismatch("expected a number")


def _convert_bool(value: object) -> object:
    if isinstance(value, bool):
        return value
    raise _Mismatch("expected a boolean")


def _convert_none(value: object) -> object:
    if value is None:
        return None
    raise _Mismatch("expected null")


def _string_parser(tp: type, parse: Callable[[str], object], expected: str) -> Convert:
    def convert(value: object) -> object:
        if isinstance(value, tp):
            return value
        if isinstance(value, str):
            try:
                return parse(value)
            except (ValueError, TypeError, ArithmeticError):
                pass
        raise _Mismatch(f"expected {expected}")

    return convert


def _parse_datetime(text: str) -> object:
    return dt.datetime.fromisoformat(text)


def _parse_date(text: str) -> object:
    return dt.date.fromisoformat(text)


def _parse_time(text: str) -> object:
    return dt.time.fromisoformat(text)


def _convert_decimal(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        # Exact, and no str() round trip: that refuses ints past Python's digit limit.
        number = decimal.Decimal(value)
    elif isinstance(value, float):
        # str() first: Decimal(0.1) would carry the binary float's full expansion.
        number = decimal.Decimal(str(value))
    elif isinstance(value, str):
        try:
            number = decimal.Decimal(value.strip())
        except decimal.InvalidOperation:
            raise _Mismatch("expected a decimal number") from None
    else:
        raise _Mismatch("expected a decimal number")
    if not number.is_finite():
        raise _Mismatch("expected a finite decimal number")
    return number


def _numeric(kind: str) -> str:
    return "number" if kind == "integer" else kind


def _choices(pairs: list[tuple[JSONValue, object]], expected: str) -> Convert:
    """A converter from one of the JSON values in ``pairs`` to its Python value."""
    python_values = [python for _, python in pairs]

    def convert(value: object) -> object:
        for python in python_values:
            if value is python:
                return python
        kind = _numeric(_json_kind(value))
        for json_value, python in pairs:
            # Kind first: True == 1 in Python, not in JSON Schema's enum (1 == 1.0 in both).
            if kind == _numeric(_json_kind(json_value)) and value == json_value:
                return python
        raise _Mismatch(f"expected {expected}")

    return convert


def _enum_schema(values: list[JSONValue]) -> Schema:
    kinds: list[str] = []
    for value in values:
        kind = _json_kind(value)
        kind = "number" if kind == "integer" and "number" in kinds else kind
        if kind not in kinds:
            kinds.append(kind)
    if len(kinds) == 1:
        return {"type": kinds[0], "enum": values}
    return {"enum": values}


def _items(item: Convert, value: object) -> list[object]:
    """The converted items of a JSON array."""
    if not isinstance(value, list | tuple):
        raise _Mismatch("expected an array")
    if item is _identity:
        return list(value)
    out: list[object] = []
    for position, element in enumerate(value):
        try:
            out.append(item(element))
        except _Mismatch as err:
            err.parts.append(str(position))
            raise
    return out


def _sequence(item: Convert, build: Callable[[list[object]], object]) -> Convert:
    def convert(value: object) -> object:
        return build(_items(item, value))

    return convert


def _unique_set(item: Convert, build: Callable[[Mapping[object, int]], object]) -> Convert:
    """A converter to a set that loses nothing: JSON Schema's ``uniqueItems`` lets ``1`` and
    ``true`` (or ``"1.0"`` and ``"1.00"`` as decimals) through, but Python counts them equal
    and a set would silently keep only one."""

    def convert(value: object) -> object:
        items = _items(item, value)
        first_at: dict[object, int] = {}
        for position, element in enumerate(items):
            try:
                first = first_at.setdefault(element, position)
            except Exception:  # unhashable, or a __hash__ / __eq__ of the item's own that fails
                err = _Mismatch(
                    f"a set cannot hold this item ({_json_kind(element)}: not hashable in Python)"
                )
                err.parts.append(str(position))
                raise err from None
            if first != position:
                raise _Mismatch(
                    f"items {first} and {position} are equal in Python, "
                    f"so a set would keep only one of them"
                )
        return build(first_at)

    return convert


def _fixed_tuple(items: list[Convert]) -> Convert:
    count = len(items)

    def convert(value: object) -> object:
        if not isinstance(value, list | tuple):
            raise _Mismatch("expected an array")
        if len(value) != count:
            raise _Mismatch(f"expected an array of exactly {count} items")
        out: list[object] = []
        for position, (element, item) in enumerate(zip(value, items, strict=True)):
            try:
                out.append(item(element))
            except _Mismatch as err:
                err.parts.append(str(position))
                raise
        return tuple(out)

    return convert


def _mapping(key: Convert, item: Convert) -> Convert:
    def convert(value: object) -> object:
        if not isinstance(value, Mapping):
            raise _Mismatch("expected an object")
        out: dict[object, object] = {}
        for name, element in value.items():
            if not isinstance(name, str):
                raise _Mismatch("object keys must be strings")
            try:
                out[key(name)] = item(element)
            except _Mismatch as err:
                err.parts.append(name)
                raise
        return out

    return convert


class _Failure:
    """A ``_Mismatch`` as it left one converter, to raise again (a fresh copy each time: the
    containers above add their keys to the one raised)."""

    __slots__ = ("cause", "message", "parts", "value")

    def __init__(self, value: object, err: _Mismatch) -> None:
        self.value = value  # held, so its id is not reused while the conversion runs
        self.message = err.message
        self.parts = tuple(err.parts)
        self.cause = err.__cause__

    def again(self) -> _Mismatch:
        err = _Mismatch(self.message)
        err.parts.extend(self.parts)
        err.__cause__ = self.cause
        return err


_Made: TypeAlias = list[tuple[tuple[int, Convert], tuple[object, object]]]


class _Work:
    """The work of one call's conversion, so a union's tries do not repeat it.

    A union tries its members in turn, and a member that fails deep inside (a dataclass whose
    discriminating ``Literal`` field comes after its subtrees) has converted those subtrees
    already; the next member, or the same type reached again through an outer union's next
    member, would convert them all again, doubling the work at every level of a recursive type.
    So inside a union's try every object conversion is recorded by the value's identity: its
    failure is kept and raised again, never worked out twice, and the results a failed try made
    (the outermost ones, each whole) are kept for the next try that converts the same value to
    the same type. A kept result is taken once: it never ends up in two places of the
    arguments, even when one dict object is passed in two places. Results are what a fresh
    conversion gives; failures raise the same message at the same path.
    """

    __slots__ = ("failed", "frames", "spare")

    def __init__(self) -> None:
        self.failed: dict[tuple[int, Convert], _Failure] = {}
        # Results of failed tries, now in no result: (value, result) by (id(value), converter).
        self.spare: dict[tuple[int, Convert], tuple[object, object]] = {}
        # The results made so far by each try and recorded conversion under way, innermost last.
        self.frames: list[_Made] = []

    def taken(self, key: tuple[int, Convert]) -> tuple[object, object] | None:
        """The result kept for ``key`` (no longer kept), or None; raises its failure again."""
        failure = self.failed.get(key)
        if failure is not None:
            raise failure.again()
        return self.spare.pop(key, None)


# The conversion under way on this thread (set by a tool's argument binder for one call).
_CONVERTING = threading.local()


@dataclasses.dataclass(slots=True)
class _Field:
    name: str
    convert: Convert
    required: bool


def _object(
    fields: list[_Field], build: Callable[[dict[str, object]], object], label: str
) -> Convert:
    """A converter for a JSON object with a fixed set of properties (no others allowed)."""
    known = {field.name for field in fields}

    def convert(value: object) -> object:
        if not isinstance(value, Mapping):
            raise _Mismatch(f"expected an object ({label})")
        work: _Work | None = getattr(_CONVERTING, "work", None)
        # Recorded inside a union's try (see _Work); outside one, nothing tries it again.
        memo = work if work is not None and work.frames else None
        if memo is not None:
            key = (id(value), convert)
            kept = memo.taken(key)
            if kept is not None:
                memo.frames[-1].append((key, kept))
                return kept[1]
            made: _Made = []
            memo.frames.append(made)
        # One frame a level (no helper call around the body): deep arguments stay in reach.
        try:
            for name in value:
                if name not in known:
                    raise _Mismatch(f"unexpected property {name!r} for {label}")
            out: dict[str, object] = {}
            for field in fields:
                if field.name in value:
                    try:
                        out[field.name] = field.convert(value[field.name])
                    except _Mismatch as err:
                        err.parts.append(field.name)
                        raise
                elif field.required:
                    raise _Mismatch(f"missing required property {field.name!r} for {label}")
            result = build(out)
        except _Mismatch as err:
            if memo is not None:
                memo.spare.update(made)
                memo.failed[key] = _Failure(value, err)
            raise
        finally:
            if memo is not None:
                memo.frames.pop()
        if memo is not None:
            memo.frames[-1].append((key, (value, result)))  # ``made`` is inside ``result``
        return result

    return convert


def _constructor(cls: Callable[..., object], label: str) -> Callable[[dict[str, object]], object]:
    def build(values: dict[str, object]) -> object:
        try:
            return cls(**values)
        except Exception as err:  # a refusing __post_init__ may assert or raise anything
            reason = _json.text_of(err) or type(err).__name__
            raise _Mismatch(f"could not build {label}: {reason}") from err

    return build


# ---------------------------------------------------------------------------------------------
# Types to schemas.

_LIST_ORIGINS: frozenset[object] = frozenset(
    (
        list,
        cabc.Sequence,
        cabc.MutableSequence,
        cabc.Collection,
        cabc.Iterable,
    )
)
_SET_ORIGINS: frozenset[object] = frozenset((set, frozenset, cabc.Set, cabc.MutableSet))
_MAP_ORIGINS: frozenset[object] = frozenset((dict, cabc.Mapping, cabc.MutableMapping))
_UNSAFE_DEF_NAME = re.compile(r"[^A-Za-z0-9_.-]")  # what a $defs name keeps (pydantic's set)
_DECIMAL_STRING = r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$"
# annotated-types style constraints: attribute -> JSON Schema keyword (numbers).
_NUMBER_BOUNDS = (
    ("gt", "exclusiveMinimum"),
    ("ge", "minimum"),
    ("lt", "exclusiveMaximum"),
    ("le", "maximum"),
    ("multiple_of", "multipleOf"),
)
_LENGTH_KEYWORDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}


def _is_typeddict(tp: object) -> bool:
    if typing.is_typeddict(tp):
        return True
    extensions = sys.modules.get("typing_extensions")
    return extensions is not None and bool(extensions.is_typeddict(tp))


def _pydantic_model(tp: type) -> bool:
    # No import: if pydantic was never imported, no class can derive from its BaseModel.
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None)
    return isinstance(base, type) and issubclass(tp, base)


def _strip_required(hint: object) -> tuple[object, bool | None]:
    """A TypedDict item's type without ``Required``/``NotRequired``, and which one it had."""
    required: bool | None = None
    while True:
        origin = typing.get_origin(hint)
        if origin is Required or origin is NotRequired:
            required = origin is Required
            hint = typing.get_args(hint)[0]
        elif origin is Annotated:
            inner, found = _strip_required(typing.get_args(hint)[0])
            if found is None:
                return hint, required
            return Annotated[(inner, *hint.__metadata__)], found  # type: ignore[attr-defined]
        else:
            return hint, required


def _hints(
    owner: object, label: str, localns: Mapping[str, object] | None = None
) -> dict[str, object]:
    try:
        return dict(typing.get_type_hints(owner, include_extras=True))
    except NameError:
        if not localns:
            raise _Unsupported(f"cannot resolve the type hints of {label}") from None
    except Exception as err:
        raise _Unsupported(f"cannot resolve the type hints of {label}: {err}") from None
    # String annotations (``from __future__ import annotations``) that name things local to
    # the function where the tool was made: retry with that function's local names.
    try:
        return dict(typing.get_type_hints(owner, localns=dict(localns), include_extras=True))
    except Exception as err:
        raise _Unsupported(f"cannot resolve the type hints of {label}: {err}") from None


# Keywords whose value maps names (not keywords) to schemas.
_NAMED_SCHEMAS = frozenset(("properties", "patternProperties", "$defs", "definitions"))


def _schema_patterns(schema: JSONValue, named: bool = False) -> Iterator[str]:
    """Every ``pattern`` keyword's text in a schema (not a property that is called pattern)."""
    if isinstance(schema, dict):
        for key, item in schema.items():
            if key == "pattern" and not named and isinstance(item, str):
                yield item
            else:
                yield from _schema_patterns(item, key in _NAMED_SCHEMAS and not named)
    elif isinstance(schema, list):
        for item in schema:
            yield from _schema_patterns(item)


_INLINE_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))


def _inline_flags(pattern: re.Pattern[Any]) -> str:
    """A compiled pattern as text a schema can hold: its flags written inline (``(?i)...``),
    since a ``pattern`` keyword has no flags of its own."""
    flags = pattern.flags & ~re.UNICODE  # every str pattern has it: the schema's default
    letters = "".join(letter for flag, letter in _INLINE_FLAGS if flags & flag)
    if flags & ~(re.IGNORECASE | re.MULTILINE | re.DOTALL):
        raise _Unsupported(
            f"pattern {pattern.pattern!r} has flags a schema pattern cannot hold inline"
        )
    text = pattern.pattern
    return f"(?{letters}){text}" if letters else text


def _never_hashable(tp: object) -> bool:
    """Whether every value converted to ``tp`` is unhashable, so no set can hold one."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _never_hashable(typing.get_args(tp)[0])
    if isinstance(tp, typing.NewType):
        return _never_hashable(tp.__supertype__)
    if origin is typing.Union or origin is types.UnionType:
        return all(_never_hashable(member) for member in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        # tuple[T, ...] may be empty, and () is hashable.
        return Ellipsis not in args and any(_never_hashable(arg) for arg in args)
    if origin in _LIST_ORIGINS or origin in _MAP_ORIGINS or origin in (set, cabc.MutableSet):
        return True  # converted to a list, dict or set
    if origin is None and isinstance(tp, type):
        # list, dict, set, TypedDicts (dicts), and eq=True dataclasses that are not frozen.
        return getattr(tp, "__hash__", None) is None
    return False


class _Builder:
    """Builds schemas and converters for one function; named types collect in ``defs``."""

    def __init__(self, localns: Mapping[str, object] | None = None) -> None:
        self.localns = localns
        self.defs: dict[str, Schema] = {}
        self.names: dict[object, str] = {}
        self.converters: dict[object, Convert] = {}
        self.aliases: set[int] = set()
        # The JSON types of each definition, worked out once (see _json_types).
        self.ref_types: dict[str, frozenset[str]] = {}

    # -- helpers

    def _unique(self, name: str, taken: Mapping[str, object] | None = None) -> str:
        # A class name goes into "#/$defs/<name>" as is: "cfg/v2" or "Box 2" would break it.
        name = _UNSAFE_DEF_NAME.sub("_", name) or "Definition"
        candidate, number = name, 1
        while candidate in self.defs or (taken is not None and candidate in taken):
            number += 1
            candidate = f"{name}{number}"
        return candidate

    def _late(self, key: object) -> Convert:
        # Recursive types: the converter is looked up when called, after it is built.
        converters = self.converters

        def convert(value: object) -> object:
            return converters[key](value)

        return convert

    # -- entry point

    def build(self, tp: object) -> tuple[Schema, Convert]:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            args = typing.get_args(tp)
            schema, convert = self.build(args[0])
            return self._annotate(dict(schema), tp.__metadata__), convert  # type: ignore[attr-defined]
        if origin is Required or origin is NotRequired:
            raise _Unsupported(f"{tp!r} is only meaningful inside a TypedDict")
        if tp is Any or tp is object:
            return {}, _identity
        if tp is None or tp is types.NoneType:
            return {"type": "null"}, _convert_none
        if type(tp).__name__ == "TypeAliasType" and hasattr(tp, "__value__"):
            if id(tp) in self.aliases:
                raise _Unsupported(
                    f"{tp!r} is a recursive type alias; use a dataclass or TypedDict for recursion"
                )
            self.aliases.add(id(tp))
            try:
                return self.build(tp.__value__)
            finally:
                self.aliases.discard(id(tp))
        if isinstance(tp, typing.NewType):
            return self.build(tp.__supertype__)
        if origin is typing.Union or origin is types.UnionType:
            return self._union(typing.get_args(tp))
        if origin is Literal:
            return self._literal(typing.get_args(tp))
        if origin is not None:
            return self._generic(tp, origin, typing.get_args(tp))
        if isinstance(tp, type):
            return self._class(tp)
        if isinstance(tp, typing.TypeVar):
            raise _Unsupported(f"type variable {tp!r} has no concrete type")
        if isinstance(tp, str | typing.ForwardRef):
            raise _Unsupported(f"unresolved forward reference {tp!r}")
        raise _Unsupported(f"{_type_name(tp)} is not a supported type")

    # -- metadata

    def _annotate(self, schema: Schema, metadata: tuple[object, ...]) -> Schema:
        for item in metadata:
            if isinstance(item, str):
                schema["description"] = item
                continue
            module = type(item).__module__ or ""
            if module.startswith("annotated_types"):
                self._constraint(schema, item)
            elif type(item).__name__ == "FieldInfo" and module.startswith("pydantic"):
                description = getattr(item, "description", None)
                if isinstance(description, str):
                    schema["description"] = description
                for constraint in getattr(item, "metadata", ()):
                    if (type(constraint).__module__ or "").startswith("annotated_types"):
                        self._constraint(schema, constraint)
                    else:
                        # pydantic keeps pattern= in a general-metadata object of its own.
                        self._pattern(schema, getattr(constraint, "pattern", None))
            # Other metadata is for other consumers; typing says to ignore what we don't know.
        return schema

    @staticmethod
    def _pattern(schema: Schema, pattern: object) -> None:
        if isinstance(pattern, re.Pattern):
            pattern = _inline_flags(pattern)
        if not isinstance(pattern, str):
            return
        # The validator's regex engine is not Python's re: refuse now what it would refuse at
        # every call.
        try:
            check_schema({"type": "string", "pattern": pattern})
        except SchemaGuardError:
            raise _Unsupported(
                f"pattern {pattern!r} is not a regular expression the schema validator accepts"
            ) from None
        schema["pattern"] = pattern

    def _constraint(self, schema: Schema, item: object) -> None:
        for attribute, keyword in _NUMBER_BOUNDS:
            bound = getattr(item, attribute, None)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                if not _fits_json_number(bound):
                    raise _Unsupported(
                        f"the bound {attribute} of {type(item).__name__} {_NOT_A_SCHEMA_NUMBER}"
                    )
                schema[keyword] = bound
        kind = schema.get("type")
        kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
        targets = [k for k in kinds if k in _LENGTH_KEYWORDS] or list(_LENGTH_KEYWORDS)
        for index, attribute in enumerate(("min_length", "max_length")):
            bound = getattr(item, attribute, None)
            if isinstance(bound, int) and not isinstance(bound, bool):
                if not _fits_json_number(bound):
                    raise _Unsupported(
                        f"the bound {attribute} of {type(item).__name__} {_NOT_A_SCHEMA_NUMBER}"
                    )
                for target in targets:
                    schema[_LENGTH_KEYWORDS[target][index]] = bound

    # -- unions and literals

    def _union(self, members: tuple[object, ...]) -> tuple[Schema, Convert]:
        built = [self.build(member) for member in members]
        schemas = [schema for schema, _ in built]
        if all(set(s) == {"type"} and isinstance(s["type"], str) for s in schemas):
            kinds: list[JSONValue] = []
            for s in schemas:
                if s["type"] not in kinds:
                    kinds.append(s["type"])
            schema: Schema = {"type": kinds[0] if len(kinds) == 1 else kinds}
        else:
            schema = {"anyOf": schemas}
        # Try the members whose JSON type is exactly the value's first (an int picks ``int``
        # over ``float``), then the rest in declaration order.
        options = [(self._json_types(s), member_convert) for s, member_convert in built]

        def convert(value: object) -> object:
            kind = _json_kind(value)
            work: _Work | None = getattr(_CONVERTING, "work", None)
            failures: list[_Mismatch] = []
            for exact in (True, False):
                for kinds_of, member in options:
                    if (kind in kinds_of) is not exact:
                        continue
                    if work is None:
                        try:
                            return member(value)
                        except _Mismatch as err:
                            failures.append(err)
                        continue
                    # A try of its own (see _Work): what a failed one made is kept for the next.
                    made: _Made = []
                    work.frames.append(made)
                    try:
                        result = member(value)
                    except _Mismatch as err:
                        work.spare.update(made)
                        failures.append(err)
                        continue
                    finally:
                        work.frames.pop()
                    if work.frames:
                        work.frames[-1].extend(made)
                    return result
            if failures and failures[0].parts:
                raise failures[0]  # the value had the right shape and failed deeper inside
            reasons = list(dict.fromkeys(err.message for err in failures))
            raise _Mismatch(f"matches none of the allowed types ({'; '.join(reasons)})")

        return schema, convert

    def _json_types(self, schema: JSONValue, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        """The JSON types a value of ``schema`` can have, as far as the schema says: its
        ``type``, the types of its ``enum``/``const`` values, a ``$ref``'s definition, or the
        union over ``anyOf``/``oneOf``. Empty when it does not say (``{}`` takes anything)."""
        if not isinstance(schema, dict):
            return frozenset()
        kind = schema.get("type")
        if isinstance(kind, str):
            return frozenset((kind,))
        if isinstance(kind, list):
            return frozenset(k for k in kind if isinstance(k, str))
        if "const" in schema:
            return frozenset((_json_kind(schema["const"]),))
        values = schema.get("enum")
        if isinstance(values, list):
            return frozenset(_json_kind(value) for value in values)
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref not in seen:
            # Each definition once: definitions that share others would otherwise be walked
            # once per path to them, which doubles with every level.
            known = self.ref_types.get(ref)
            if known is None:
                known = self._json_types(self.defs.get(ref[len("#/$defs/") :]), seen | {ref})
                self.ref_types[ref] = known
            return known
        for keyword in ("anyOf", "oneOf"):
            members = schema.get(keyword)
            if isinstance(members, list):
                kinds = [self._json_types(member, seen) for member in members]
                # One member that says nothing takes any value: then neither does the whole.
                return frozenset().union(*kinds) if all(kinds) else frozenset()
        return frozenset()

    def _literal(self, values: tuple[object, ...]) -> tuple[Schema, Convert]:
        pairs: list[tuple[JSONValue, object]] = []
        for value in values:
            json_value = value.value if isinstance(value, enum.Enum) else value
            if json_value is not None and not isinstance(json_value, str | int | float | bool):
                raise _Unsupported(f"Literal value {value!r} is not a JSON scalar")
            if not _fits_json_number(json_value):
                raise _Unsupported(f"a Literal value {_NOT_A_SCHEMA_NUMBER}")
            pairs.append((json_value, value))
        json_values = [json_value for json_value, _ in pairs]
        expected = "one of " + ", ".join(repr(v) for v in json_values)
        return _enum_schema(json_values), _choices(pairs, expected)

    # -- generics: list, set, tuple, dict

    def _generic(
        self, tp: object, origin: object, args: tuple[object, ...]
    ) -> tuple[Schema, Convert]:
        if origin in _LIST_ORIGINS:
            item_schema, item = self.build(args[0] if args else Any)
            schema: Schema = {"type": "array"}
            if item_schema:
                schema["items"] = item_schema
            return schema, _sequence(item, list)
        if origin in _SET_ORIGINS:
            item_type = args[0] if args else Any
            item_schema, item = self.build(item_type)
            if _never_hashable(item_type):
                raise _Unsupported(
                    f"set items must be hashable, and {_type_name(item_type)} never is "
                    f"(take a list instead)"
                )
            schema = {"type": "array", "uniqueItems": True}
            if item_schema:
                schema["items"] = item_schema
            return schema, _unique_set(item, set if origin in (set, cabc.MutableSet) else frozenset)
        if origin is tuple:
            return self._tuple(tp, args)
        if origin in _MAP_ORIGINS:
            return self._dict(args)
        raise _Unsupported(f"{tp!r} is not a supported type")

    def _tuple(self, tp: object, args: tuple[object, ...]) -> tuple[Schema, Convert]:
        if tp is typing.Tuple:  # noqa: UP006 - the bare typing alias means tuple[Any, ...]
            args = (Any, ...)
        if len(args) == 2 and args[1] is Ellipsis:
            item_schema, item = self.build(args[0])
            schema: Schema = {"type": "array"}
            if item_schema:
                schema["items"] = item_schema
            return schema, _sequence(item, tuple)
        if not args:  # tuple[()]
            return {"type": "array", "maxItems": 0}, _fixed_tuple([])
        if Ellipsis in args:
            raise _Unsupported(f"{tp!r}: '...' may only follow a single item type")
        built = [self.build(arg) for arg in args]
        schema = {
            "type": "array",
            "prefixItems": [s for s, _ in built],
            "items": False,
            "minItems": len(args),
            "maxItems": len(args),
        }
        return schema, _fixed_tuple([c for _, c in built])

    def _dict(self, args: tuple[object, ...]) -> tuple[Schema, Convert]:
        key_type, value_type = args if args else (str, Any)
        while isinstance(key_type, typing.NewType):
            key_type = key_type.__supertype__  # NewType("Key", str) keys are plain strings
        schema: Schema = {"type": "object"}
        key: Convert = _identity
        if key_type is not str and key_type is not Any:
            key_schema, key = self.build(key_type)
            if "enum" not in key_schema or not all(isinstance(v, str) for v in key_schema["enum"]):
                raise _Unsupported(
                    f"dict keys must be str, a Literal of strings or a string Enum "
                    f"(JSON object keys are strings), not {_type_name(key_type)}"
                )
            schema["propertyNames"] = {"enum": key_schema["enum"]}
        value_schema, value = self.build(value_type)
        if value_schema:
            schema["additionalProperties"] = value_schema
        return schema, _mapping(key, value)

    # -- classes

    def _class(self, tp: type) -> tuple[Schema, Convert]:
        if tp is bool:
            return {"type": "boolean"}, _convert_bool
        if tp is int:
            return {"type": "integer"}, _convert_int
        if tp is float:
            return {"type": "number"}, _convert_float
        if tp is str:
            return {"type": "string"}, _convert_str
        if issubclass(tp, enum.Enum):
            return self._enum(tp)
        if issubclass(tp, ToolExecutionContext):
            raise _Unsupported(
                "ToolExecutionContext is injected only as a parameter of its own, "
                "not inside another type"
            )
        if issubclass(tp, dt.datetime):
            schema: Schema = {"type": "string", "format": "date-time"}
            return schema, _string_parser(tp, _parse_datetime, "an ISO 8601 date-time string")
        if issubclass(tp, dt.date):
            schema = {"type": "string", "format": "date"}
            return schema, _string_parser(tp, _parse_date, "an ISO 8601 date string")
        if issubclass(tp, dt.time):
            schema = {"type": "string", "format": "time"}
            return schema, _string_parser(tp, _parse_time, "an ISO 8601 time string")
        if issubclass(tp, uuid.UUID):
            return {"type": "string", "format": "uuid"}, _string_parser(tp, tp, "a UUID string")
        if issubclass(tp, PurePath):
            return {"type": "string"}, _string_parser(tp, tp, "a path string")
        if issubclass(tp, decimal.Decimal):
            schema = {"anyOf": [{"type": "number"}, {"type": "string", "pattern": _DECIMAL_STRING}]}
            return schema, _convert_decimal
        if tp is tuple:
            return self._tuple(tp, (Any, ...))
        if tp in (list, set, frozenset, dict):
            return self._generic(tp, tp, ())
        if tp in self.names:
            return {"$ref": f"#/$defs/{self.names[tp]}"}, self._late(tp)
        if _pydantic_model(tp):
            return self._pydantic(tp)
        if _is_typeddict(tp):
            return self._named(tp, self._typeddict)
        if dataclasses.is_dataclass(tp):
            return self._named(tp, self._dataclass)
        if issubclass(tp, tuple) and hasattr(tp, "_fields"):
            return self._named(tp, self._namedtuple)
        raise _Unsupported(f"{_type_name(tp)} is not a supported type")

    def _enum(self, tp: type[enum.Enum]) -> tuple[Schema, Convert]:
        if issubclass(tp, enum.Flag):
            return self._flag(tp)
        pairs: list[tuple[JSONValue, object]] = []
        for member in tp:
            if member.value is not None and not isinstance(member.value, str | int | float):
                raise _Unsupported(
                    f"{_type_name(tp)} has a member whose value is not a string or number "
                    f"({member.name})"
                )
            if not _fits_json_number(member.value):
                raise _Unsupported(
                    f"the value of {_type_name(tp)}.{member.name} {_NOT_A_SCHEMA_NUMBER}"
                )
            pairs.append((member.value, member))
        if not pairs:
            raise _Unsupported(f"{_type_name(tp)} has no members")
        json_values = [json_value for json_value, _ in pairs]
        return _enum_schema(json_values), _choices(pairs, f"a value of {tp.__name__}")

    def _flag(self, tp: type[enum.Flag]) -> tuple[Schema, Convert]:
        # Flags combine: the schema takes every integer up to all bits set (a list of the
        # single bits would refuse R|W), and the conversion refuses bits no member has.
        mask = 0
        for member in tp:  # its canonical bits: aliases such as ALL = -1 are combinations
            if not isinstance(member.value, int) or member.value < 0:
                raise _Unsupported(
                    f"{_type_name(tp)}.{member.name} is not a non-negative integer flag value"
                )
            mask |= member.value
        if not mask:
            raise _Unsupported(f"{_type_name(tp)} has no flag bits")
        if not _fits_json_number(mask):
            raise _Unsupported(f"the combined bits of {_type_name(tp)} {_NOT_A_SCHEMA_NUMBER}")
        expected = f"a combination of {tp.__name__} flags (an integer from 0 to {mask})"

        def convert(value: object) -> object:
            if isinstance(value, tp):
                return value
            try:
                number = _convert_int(value)
            except _Mismatch:
                raise _Mismatch(f"expected {expected}") from None
            if not isinstance(number, int) or number < 0 or number & ~mask:
                raise _Mismatch(f"expected {expected}")
            return tp(number)

        schema: Schema = {"type": "integer", "minimum": 0, "maximum": mask}
        return schema, convert

    def _named(self, tp: type, body: Callable[[type, Schema], Convert]) -> tuple[Schema, Convert]:
        name = self._unique(tp.__name__)
        self.names[tp] = name
        schema: Schema = {"type": "object"}
        self.defs[name] = schema  # reserved first: a recursive field finds the name
        description, _ = _parse_docstring(_class_doc(tp))
        if description:
            schema["description"] = description
        self.converters[tp] = body(tp, schema)
        return {"$ref": f"#/$defs/{name}"}, self._late(tp)

    def _properties(
        self,
        tp: type,
        schema: Schema,
        entries: list[tuple[str, object, bool, object]],
    ) -> list[_Field]:
        """Fill ``properties``/``required`` from ``(name, hint, required, default)`` entries;
        ``default`` is ``dataclasses.MISSING`` when there is none to show."""
        _, docs = _parse_docstring(_class_doc(tp))
        properties: Schema = {}
        required: list[JSONValue] = []
        fields: list[_Field] = []
        for name, hint, is_required, default in entries:
            try:
                prop, convert = self.build(hint)
            except _Unsupported as err:
                err.where.append(f"{tp.__name__}.{name}")
                raise
            prop = self._describe(prop, docs.get(name), default)
            properties[name] = prop
            if is_required:
                required.append(name)
            fields.append(_Field(name, convert, is_required))
        schema["properties"] = properties
        schema["required"] = required
        schema["additionalProperties"] = False
        return fields

    @staticmethod
    def _describe(prop: Schema, doc: str | None, default: object) -> Schema:
        if doc and "description" not in prop:
            prop = {**prop, "description": doc}
        if default is not dataclasses.MISSING:
            # A default with no JSON form goes unshown; it still applies when left out.
            with contextlib.suppress(_NotJSON):
                prop = {**prop, "default": _to_json(default)}
        return prop

    def _typeddict(self, tp: type, schema: Schema) -> Convert:
        hints = _hints(tp, tp.__name__, self.localns)
        required_keys: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
        entries: list[tuple[str, object, bool, object]] = []
        for name, raw in hints.items():
            hint, marked = _strip_required(raw)
            is_required = marked if marked is not None else name in required_keys
            entries.append((name, hint, is_required, dataclasses.MISSING))
        return _object(self._properties(tp, schema, entries), dict, tp.__name__)

    def _dataclass(self, tp: type, schema: Schema) -> Convert:
        hints = _hints(tp, tp.__name__, self.localns)
        regular = {field.name for field in dataclasses.fields(tp)}
        entries: list[tuple[str, object, bool, object]] = []
        # __dataclass_fields__ keeps the declaration order and, unlike fields(), the InitVars:
        # constructor arguments too, which __post_init__ receives.
        all_fields: Mapping[str, dataclasses.Field[Any]]
        all_fields = tp.__dataclass_fields__  # type: ignore[attr-defined]
        for field in all_fields.values():
            hint = hints.get(field.name, field.type)
            if field.name not in regular:
                if hint is dataclasses.InitVar:
                    hint = Any  # a bare InitVar says nothing of its type
                elif isinstance(hint, dataclasses.InitVar):
                    hint = hint.type
                else:
                    continue  # a ClassVar
            if not field.init:
                continue
            has_default = field.default is not dataclasses.MISSING
            no_factory = field.default_factory is dataclasses.MISSING
            entries.append((field.name, hint, not has_default and no_factory, field.default))
        fields = self._properties(tp, schema, entries)
        return _object(fields, _constructor(tp, tp.__name__), tp.__name__)

    def _namedtuple(self, tp: type, schema: Schema) -> Convert:
        hints = _hints(tp, tp.__name__, self.localns)
        defaults: dict[str, object] = getattr(tp, "_field_defaults", {})
        entries: list[tuple[str, object, bool, object]] = [
            (
                name,
                hints.get(name, Any),
                name not in defaults,
                defaults.get(name, dataclasses.MISSING),
            )
            for name in tp._fields  # type: ignore[attr-defined]
        ]
        fields = self._properties(tp, schema, entries)
        return _object(fields, _constructor(tp, tp.__name__), tp.__name__)

    def _pydantic(self, tp: type) -> tuple[Schema, Convert]:
        model: Any = tp
        if not hasattr(model, "model_json_schema"):
            raise _Unsupported(f"{_type_name(tp)} is a pydantic v1 model; pydantic 2 is needed")
        try:
            raw: Schema = model.model_json_schema(ref_template="#/$defs/{model}")
        except Exception as err:  # pydantic's own refusal, e.g. a field of an arbitrary type
            raise _Unsupported(f"pydantic cannot describe {_type_name(tp)}: {err}") from None
        bad_number_at = _non_json_number_at(raw)
        if bad_number_at is not None:
            raise _Unsupported(
                f"the schema pydantic gives {_type_name(tp)} holds a number at {bad_number_at} "
                f"that {_NOT_A_SCHEMA_NUMBER}"
            )
        for pattern in _schema_patterns(raw):
            # pydantic may run a pattern on Python's engine; the validator's may refuse it.
            self._pattern({}, pattern)
        incoming: Schema = raw.pop("$defs", {})
        renamed: dict[str, str] = {}
        for key, definition in incoming.items():
            if self.defs.get(key) == definition:
                continue  # the same definition, already merged from another model
            if key in self.defs:
                renamed[key] = self._unique(key, incoming)
        if renamed:
            raw = _rename_refs(raw, renamed)
            incoming = _rename_refs(incoming, renamed)
        for key, definition in incoming.items():
            self.defs.setdefault(renamed.get(key, key), definition)
        if set(raw) == {"$ref"}:
            ref = raw["$ref"]
        else:
            name = self._unique(tp.__name__)
            self.defs[name] = raw
            ref = f"#/$defs/{name}"
        self.names[tp] = ref.rsplit("/", 1)[-1]
        error_type: Any = getattr(sys.modules.get("pydantic"), "ValidationError", ValueError)

        def convert(value: object) -> object:
            if isinstance(value, tp):
                return value
            try:
                return model.model_validate(value)
            except error_type as err:
                problems = [
                    f"{'.'.join(str(p) for p in e.get('loc', ())) or '(root)'}: {e.get('msg')}"
                    for e in err.errors()[:4]
                ]
                raise _Mismatch(f"invalid {tp.__name__}: " + "; ".join(problems)) from None
            except Exception as err:  # a validator's own error that pydantic lets through
                reason = _json.text_of(err) or type(err).__name__
                raise _Mismatch(f"could not build {tp.__name__}: {reason}") from err

        self.converters[tp] = convert
        return {"$ref": ref}, convert


def _rename_refs(value: Any, renamed: dict[str, str]) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str) and item.startswith("#/$defs/"):
                name = item[len("#/$defs/") :].split("/", 1)
                if name[0] in renamed:
                    item = "/".join(["#/$defs/" + renamed[name[0]], *name[1:]])
                out[key] = item
            else:
                out[key] = _rename_refs(item, renamed)
        return out
    if isinstance(value, list):
        return [_rename_refs(item, renamed) for item in value]
    return value


# ---------------------------------------------------------------------------------------------
# Functions to tools.


@dataclasses.dataclass(slots=True)
class _Param:
    name: str
    convert: Convert
    required: bool
    positional: bool  # positional-only: passed by position, in order
    default: object
    context: bool


_ORIGINALS: weakref.WeakKeyDictionary[Callable[..., Any], ToolFunction] = (
    weakref.WeakKeyDictionary()
)


def original_function(tool: ToolDefinition) -> ToolFunction:
    """The function ``@tool`` or ``tool_from_function`` built ``tool`` from.

    Raises ``TypeError`` for a tool that was not built from a function.
    """
    if not isinstance(tool, ToolDefinition):
        raise TypeError(f"original_function expects a ToolDefinition, got {type(tool).__name__}")
    execute = tool.execute
    function = _ORIGINALS.get(execute) if execute is not None else None
    if function is None:
        raise TypeError(f"tool {tool.name!r} was not built by @tool or tool_from_function")
    return function


def _is_context_hint(hint: object) -> bool:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    if isinstance(hint, type):
        return issubclass(hint, ToolExecutionContext)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(hint) if m is not types.NoneType]
        return len(members) == 1 and _is_context_hint(members[0])
    return False


def _target(fn: ToolFunction) -> tuple[object, object]:
    """The objects that hold ``fn``'s type hints and its docstring."""
    if isinstance(fn, functools.partial):
        return _target(fn.func)
    if inspect.isclass(fn):
        return fn.__init__, fn
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn, fn
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - a callable instance's method
    return (call if call is not None else fn), fn


def _is_async(fn: ToolFunction) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    if isinstance(fn, functools.partial):
        return _is_async(fn.func)
    call = getattr(type(fn), "__call__", None)  # noqa: B004
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


def _default_name(fn: ToolFunction) -> str:
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(target, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"cannot name a tool after {fn!r}; pass name=...")
    return name


def _signature(fn: ToolFunction, label: str) -> inspect.Signature:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise TypeError(f"cannot read the signature of {label}: {err}") from None


def _analyse(
    fn: ToolFunction, label: str, localns: Mapping[str, object] | None
) -> tuple[Schema, list[_Param], str]:
    """The parameters schema, the call plan and the docstring description of ``fn``."""
    signature = _signature(fn, label)
    hints_owner, doc_owner = _target(fn)
    try:
        hints = _hints(hints_owner, label, localns)
    except _Unsupported as err:
        raise TypeError(f"cannot build tool {label}: {err.reason}") from None
    description, docs = _parse_docstring(inspect.getdoc(doc_owner))
    builder = _Builder(localns)
    properties: Schema = {}
    required: list[JSONValue] = []
    params: list[_Param] = []
    has_context = False
    for parameter in signature.parameters.values():
        name = parameter.name
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"cannot build tool {label}: *{name} has no place in a JSON arguments object; "
                f"declare each argument as a named parameter"
            )
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(
                f"cannot build tool {label}: **{name} would let the model send any names; "
                f"declare each argument as a named parameter (or take a dict[str, T] parameter)"
            )
        if name not in hints:
            raise TypeError(
                f"cannot express parameter {name!r} of {label}: it has no type annotation "
                f"(annotate it; Any accepts any JSON value)"
            )
        hint = hints[name]
        positional = parameter.kind is inspect.Parameter.POSITIONAL_ONLY
        has_default = parameter.default is not inspect.Parameter.empty
        if _is_context_hint(hint):
            if has_context:
                raise TypeError(f"cannot build tool {label}: more than one context parameter")
            has_context = True
            params.append(_Param(name, _identity, False, positional, None, True))
            continue
        try:
            schema, convert = builder.build(hint)
        except _Unsupported as err:
            where = " > ".join(reversed(err.where))
            inner = f" (at {where})" if where else ""
            raise TypeError(
                f"cannot express parameter {name!r} of {label}{inner}: {err.reason}"
            ) from None
        schema = _Builder._describe(
            schema, docs.get(name), parameter.default if has_default else dataclasses.MISSING
        )
        properties[name] = schema
        if not has_default:
            required.append(name)
        params.append(
            _Param(
                name,
                convert,
                not has_default,
                positional,
                parameter.default if has_default else None,
                False,
            )
        )
    schema_out: Schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if builder.defs:
        schema_out["$defs"] = builder.defs
    return schema_out, params, description


def _binder(
    tool_name: str, params: list[_Param]
) -> Callable[[object, ToolExecutionContext], tuple[list[object], dict[str, object]]]:
    known = frozenset(p.name for p in params if not p.context)

    def bind(args: object, context: ToolExecutionContext) -> tuple[list[object], dict[str, object]]:
        head = f"Invalid arguments for tool {tool_name}: "
        if not isinstance(args, Mapping):
            raise ArgumentConversionError(head + "arguments must be a JSON object")
        for key in args:
            if key not in known:
                raise ArgumentConversionError(head + f"unexpected argument {key!r}", "/")
        outer = getattr(_CONVERTING, "work", None)
        _CONVERTING.work = _Work()
        try:
            return convert_all(args, context)
        finally:
            _CONVERTING.work = outer

    def convert_all(
        args: Mapping[str, object], context: ToolExecutionContext
    ) -> tuple[list[object], dict[str, object]]:
        head = f"Invalid arguments for tool {tool_name}: "
        positional: list[object] = []
        keywords: dict[str, object] = {}
        for param in params:
            if param.context:
                value: object = context
            elif param.name in args:
                try:
                    value = param.convert(args[param.name])
                except _Mismatch as err:
                    err.parts.append(param.name)
                    path = _json_pointer(err.parts)
                    # Chain what a constructor raised, if anything (None drops the _Mismatch).
                    raise ArgumentConversionError(
                        f"{head}{path}: {err.message}", path
                    ) from err.__cause__
            elif param.required:
                raise ArgumentConversionError(
                    head + f"missing required argument {param.name!r}", "/"
                )
            elif param.positional:
                value = param.default  # a later positional-only argument may follow
            else:
                continue
            if param.positional:
                positional.append(value)
            else:
                keywords[param.name] = value
        return positional, keywords

    return bind


def _thread_context(
    context: ToolExecutionContext, loop: asyncio.AbstractEventLoop
) -> ToolExecutionContext:
    """The context a sync tool sees in its worker thread: ``progress(...)`` is a plain call that
    hands the report to the loop and returns once it is delivered."""
    report = context.progress

    def progress(
        value: JSONValue = None, metadata: Mapping[str, JSONValue] | None = None
    ) -> object:
        outcome = report(value, metadata)
        if not inspect.isawaitable(outcome):
            return outcome
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return outcome  # called on the loop after all: the caller can await it

        async def deliver() -> object:
            return await outcome

        return asyncio.run_coroutine_threadsafe(deliver(), loop).result()

    return dataclasses.replace(context, progress=progress)


def _build_execute(
    fn: ToolFunction, params: list[_Param], tool_name: str, *, is_async: bool, inline: bool
) -> Callable[..., Any]:
    bind = _binder(tool_name, params)
    wants_context = any(p.context for p in params)

    if is_async:

        async def execute_async(args: Any, context: ToolExecutionContext) -> Any:
            positional, keywords = bind(args, context)
            return await fn(*positional, **keywords)

        return execute_async

    if inline:

        def execute_inline(args: Any, context: ToolExecutionContext) -> Any:
            positional, keywords = bind(args, context)
            return fn(*positional, **keywords)

        return execute_inline

    async def execute_in_thread(args: Any, context: ToolExecutionContext) -> Any:
        if wants_context:
            context = _thread_context(context, asyncio.get_running_loop())
        positional, keywords = bind(args, context)
        # to_thread copies the context variables into the worker thread.
        output = await asyncio.to_thread(fn, *positional, **keywords)
        if inspect.isawaitable(output):
            output = await output
        return output

    return execute_in_thread


def _make(
    fn: ToolFunction,
    localns: Mapping[str, object] | None,
    name: str | None,
    description: str | None,
    inline: bool,
    exclusive: bool,
    effect: Any,
    kind: ToolKind | None,
    metadata: Mapping[str, JSONValue] | None,
) -> ToolDefinition:
    if not callable(fn):
        raise TypeError(f"a tool needs a function, got {type(fn).__name__}")
    tool_name = name if name is not None else _default_name(fn)
    label = getattr(fn, "__qualname__", None) or tool_name
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"cannot build tool {label}: a generator function returns no value")
    parameters, params, doc_description = _analyse(fn, label, localns)
    execute = _build_execute(fn, params, tool_name, is_async=_is_async(fn), inline=inline)
    _ORIGINALS[execute] = fn
    return ToolDefinition(
        name=tool_name,
        execute=execute,
        description=doc_description if description is None else description,
        parameters=parameters,
        exclusive=exclusive,
        effect=effect,
        kind=kind,
        metadata=metadata,
    )


def _caller_locals() -> Mapping[str, object]:
    # The frame that called the public entry point: where the function was written, whose
    # local names its string annotations may use.
    return sys._getframe(2).f_locals


def tool_from_function(
    fn: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    inline: bool = False,
    exclusive: bool = False,
    effect: Any = None,
    kind: ToolKind | None = None,
    metadata: Mapping[str, JSONValue] | None = None,
) -> ToolDefinition:
    """A ``ToolDefinition`` for ``fn`` (see the module doc); ``fn`` itself is left as it is.

    ``name`` defaults to the function's name, ``description`` to the docstring's first
    paragraph. ``inline=True`` runs a sync function on the event loop instead of a worker
    thread (for quick, non-blocking functions). ``exclusive``, ``effect``, ``kind`` and
    ``metadata`` go to the ``ToolDefinition`` unchanged.
    """
    return _make(fn, _caller_locals(), name, description, inline, exclusive, effect, kind, metadata)


@overload
def tool(fn: ToolFunction, /) -> ToolDefinition: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    inline: bool = False,
    exclusive: bool = False,
    effect: Any = None,
    kind: ToolKind | None = None,
    metadata: Mapping[str, JSONValue] | None = None,
) -> Callable[[ToolFunction], ToolDefinition]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    inline: bool = False,
    exclusive: bool = False,
    effect: Any = None,
    kind: ToolKind | None = None,
    metadata: Mapping[str, JSONValue] | None = None,
) -> ToolDefinition | Callable[[ToolFunction], ToolDefinition]:
    """Decorate a function to make it a ``ToolDefinition``: ``@tool`` or ``@tool(name=...)``.

    The decorated name is bound to the ``ToolDefinition``; ``original_function(tool)`` returns
    the function. Options as for ``tool_from_function``.
    """
    if fn is not None:
        return _make(
            fn, _caller_locals(), name, description, inline, exclusive, effect, kind, metadata
        )

    def decorate(function: ToolFunction) -> ToolDefinition:
        return _make(
            function,
            _caller_locals(),
            name,
            description,
            inline,
            exclusive,
            effect,
            kind,
            metadata,
        )

    return decorate
