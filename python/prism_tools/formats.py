"""Tool catalogs in the shapes users already have: load them, bind functions, export them.

Pure data mapping, no SDK imported. ``load_catalog`` reads OpenAI Chat Completions, OpenAI
Responses, Anthropic Messages, Gemini, MCP ``tools/list`` and plain ``{name, description,
parameters}`` entries (detected per entry, or forced with ``format=``) into ``ToolDefinition``
values with no ``execute``; ``bind``/``bind_catalog`` attach the functions; the ``to_*``
functions write each shape back. Provider keys that have no ``ToolDefinition`` field are kept
in ``metadata["catalog_extras"][family]`` so that exporting to the same family restores them.
``strict_schema`` rewrites a schema for OpenAI strict mode. See ``docs/formats.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, cast, get_args

from prism_tools import _json
from prism_tools.effects import EFFECT_KINDS, IDEMPOTENCY, ToolEffect, ToolEffectError
from prism_tools.errors import PrismError, UnknownToolError
from prism_tools.providers.anthropic import anthropic_tool
from prism_tools.providers.openai import EMPTY_PARAMETERS, openai_tool
from prism_tools.types import (
    TOOL_KINDS,
    JSONValue,
    ToolDefinition,
    ToolExecute,
    ToolKind,
    to_plain,
    tool_definitions,
)

CatalogFormat: TypeAlias = Literal[
    "openai_chat", "openai_responses", "anthropic", "gemini", "mcp", "plain"
]
CATALOG_FORMATS: Final[tuple[CatalogFormat, ...]] = get_args(CatalogFormat)

EXTRAS_KEY: Final = "catalog_extras"
"""The ``metadata`` key holding provider keys that have no ``ToolDefinition`` field, per family
(``openai``, ``anthropic``, ``gemini``, ``mcp``, ``plain``): ``{family: {key: value}}``."""
MAX_CATALOG_BYTES: Final = 64 * 2**20
"""The largest catalog file ``load_catalog`` reads (tens of thousands of tools fit)."""
MAX_CATALOG_ENTRIES: Final = 100_000
"""The most entries (tools, or declarations of a Gemini tool object) a catalog may hold."""

# Nesting past this is refused while loading, converting or exporting a schema or an extra key:
# what the JSON writer can still write (254 levels) once an exported catalog puts a value at
# most six levels down (the list, the entry, "metadata", "catalog_extras", the family, the key),
# with room to spare, and well clear of Python's recursion limit.
MAX_NESTING: Final = 240
# A strict schema is refused when inlining its references would make more schemas than this:
# a few kilobytes of references that each inline several others would otherwise grow
# exponentially. It is the keyword limit check_schema applies to the result by default.
MAX_STRICT_SCHEMAS: Final = 10_000
_NAME_SHOWN: Final = 60
_KEYS_SHOWN: Final = 6
_GEMINI_DECLARATIONS: Final = ("function_declarations", "functionDeclarations")
_GEMINI_JSON_SCHEMA: Final = ("parameters_json_schema", "parametersJsonSchema")
_JSONL_SUFFIXES: Final = frozenset((".jsonl", ".ndjson"))


class CatalogFormatError(PrismError, ValueError):
    """A catalog that cannot be read or mapped. The message is one line saying where (entry
    index and tool name, when known) and what is wrong; ``index``, ``name`` and ``problem``
    (the message without the location) are kept apart for programs."""

    code = "ERR_PRISM_CATALOG_FORMAT"

    def __init__(self, problem: str, *, index: int | None = None, name: str | None = None) -> None:
        super().__init__(_locate(problem, index, name))
        self.problem = problem
        self.index = index
        self.name = name


class StrictSchemaError(CatalogFormatError):
    """A schema OpenAI strict mode cannot express; ``pointer`` is the JSON pointer of the
    offending spot inside the tool's parameters (``""`` is the root)."""

    code = "ERR_PRISM_STRICT_SCHEMA"

    def __init__(
        self,
        pointer: str,
        reason: str,
        *,
        index: int | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(
            f"cannot make the schema strict at {pointer or '/'}: {reason}", index=index, name=name
        )
        self.pointer = pointer
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CatalogProblem:
    """One thing wrong with a catalog. ``message`` is the whole one-line text (location
    included), the same text ``load_catalog`` would raise; ``index`` is the entry's position
    (``None`` for the document as a whole), ``name`` the tool name when one was readable."""

    index: int | None
    name: str | None
    message: str


@dataclass(frozen=True, slots=True)
class CatalogLoad:
    """What ``load_catalog_report`` found: the tools that loaded, the detected format of each
    (same order), and every problem (entries with a problem are left out of ``tools``)."""

    tools: tuple[ToolDefinition, ...]
    formats: tuple[CatalogFormat, ...]
    problems: tuple[CatalogProblem, ...]
    entries: tuple[int, ...] = ()
    """The catalog entry each tool came from (same order as ``tools``); one Gemini entry can
    hold several tools."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _shown(name: str) -> str:
    text = repr(name)
    return text if len(text) <= _NAME_SHOWN else text[: _NAME_SHOWN - 4] + "...'"


def _locate(problem: str, index: int | None, name: str | None) -> str:
    if index is None:
        where = "catalog" if name is None else f"tool {_shown(name)}"
    else:
        where = f"entry {index}" + ("" if name is None else f" ({_shown(name)})")
    return f"{where}: {problem}"


class _Problem(Exception):
    """Internal: what is wrong with one entry; the caller adds the location."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.name = name


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _copy_json(value: Any) -> JSONValue:
    """A fresh copy of plain JSON data (so loaded tools never alias the caller's document);
    anything JSON cannot hold is a problem naming where it sits."""
    return _copy_at(value, [], 0)


def _pointer(path: list[str | int]) -> str:
    """The JSON Pointer of ``path`` (``/`` for the root): built only for a message, since a
    pointer built for every node would copy a long key once for each node below it."""
    return "".join(f"/{_json.pointer_token(token)}" for token in path) or "/"


def _copy_at(value: Any, path: list[str | int], depth: int) -> JSONValue:
    """``_copy_json`` of ``value`` found at ``path`` (the keys and positions leading to it,
    appended and removed as the copy goes down and back up)."""
    if isinstance(value, str):
        if _json.holds_lone_surrogate(value):
            raise _Problem(f"a string holding a lone surrogate at {_pointer(path)}")
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Problem(f"non-finite number at {_pointer(path)}")
        return value
    if depth >= MAX_NESTING:
        raise _Problem(f"nested deeper than {MAX_NESTING} levels")
    if isinstance(value, Mapping):
        out: dict[str, JSONValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Problem(f"non-string key {key!r} at {_pointer(path)}")
            if _json.holds_lone_surrogate(key):
                raise _Problem(f"a key holding a lone surrogate at {_pointer(path)}")
            path.append(key)
            out[key] = _copy_at(item, path, depth + 1)
            path.pop()
        return out
    if isinstance(value, list | tuple):
        items: list[JSONValue] = []
        for position, item in enumerate(value):  # a loop, not a comprehension: one frame a level
            path.append(position)
            items.append(_copy_at(item, path, depth + 1))
            path.pop()
        return items
    raise _Problem(f"{type(value).__name__} is not JSON data at {_pointer(path)}")


def _field_copy(value: Any, field: str) -> JSONValue:
    try:
        return _copy_json(value)
    except _Problem as err:
        raise _Problem(f"{field!r}: {err.message}") from None


# ---------------------------------------------------------------------------------------------
# Reading a document


@dataclass(slots=True)
class _Entry:
    index: int
    value: Any = None
    problem: str | None = None  # set when the entry itself could not be read (JSONL line)


def _read(
    source: str | os.PathLike[str] | bytes | bytearray,
) -> tuple[list[_Entry] | None, Any]:
    """``(entries, None)`` for a JSON Lines file, ``(None, document)`` for a JSON one."""
    if isinstance(source, bytes | bytearray):
        data = bytes(source)
        suffix = ""
    else:
        if not os.fspath(source):
            raise CatalogFormatError("cannot read '': no file name given")
        path = Path(source)
        try:
            with path.open("rb") as file:
                # One byte past the limit tells a file at the limit from a longer one, without
                # reading an endless one (/dev/zero) to its end.
                data = file.read(MAX_CATALOG_BYTES + 1)
        except (OSError, ValueError) as err:  # ValueError: a NUL byte in the path
            reason = getattr(err, "strerror", None) or _one_line(str(err))
            raise CatalogFormatError(f"cannot read {str(path)!r}: {reason}") from None
        if len(data) > MAX_CATALOG_BYTES:
            raise CatalogFormatError(
                f"cannot read {str(path)!r}: larger than {MAX_CATALOG_BYTES // 2**20} MiB"
            )
        suffix = path.suffix.lower()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if suffix in _JSONL_SUFFIXES:
        return _json_lines(data), None
    try:
        return None, _json.loads_exact(data)
    except _json.JSONDecodeError as err:
        lines = [line for line in data.splitlines() if line.strip()]
        if len(lines) >= 2 and _parses_as_object(lines[0]):
            return _json_lines(data), None  # JSON Lines under another name
        raise CatalogFormatError(f"invalid JSON: {_one_line(str(err))}") from None


def _parses_as_object(line: bytes) -> bool:
    try:
        return isinstance(_json.loads(line), dict)
    except _json.JSONDecodeError:
        return False


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _brief(value: Any, limit: int) -> str:
    """A value from a document, cut short for a message: text as it is, on one line; anything
    else as the lenient JSON writer writes it, which never raises however deep the value."""
    text = value if isinstance(value, str) else _json.dumps_lenient(value).decode("utf-8")
    return _one_line(text)[:limit]


def _json_lines(data: bytes) -> list[_Entry]:
    entries: list[_Entry] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append(_Entry(len(entries), _json.loads_exact(line)))
        except _json.JSONDecodeError as err:
            entries.append(
                _Entry(
                    len(entries),
                    problem=f"line {number} column {err.colno}: invalid JSON: {_one_line(err.msg)}",
                )
            )
    return entries


def _entries(document: Any) -> list[_Entry]:
    """The tool entries of a document: unwraps a JSON-RPC response and ``{"tools": [...]}``;
    any other object is one entry."""
    if isinstance(document, Mapping) and (
        "jsonrpc" in document
        or ("id" in document and ("result" in document or "error" in document))
    ):
        if document.get("error") is not None:
            error = document["error"]
            message = error.get("message") if isinstance(error, Mapping) else error
            raise CatalogFormatError(f"JSON-RPC error response: {_brief(message, 200)}")
        if "result" not in document:
            raise CatalogFormatError("JSON-RPC response without a 'result'")
        document = document["result"]
        if not isinstance(document, Mapping) or "tools" not in document:
            raise CatalogFormatError("JSON-RPC 'result' is not a tools/list result")
    if isinstance(document, Mapping) and "tools" in document:
        document = document["tools"]
        if not isinstance(document, list | tuple):
            raise CatalogFormatError(f"'tools' must be an array, got {_kind(document)}")
    if isinstance(document, Mapping):
        return [_Entry(0, document)]
    if isinstance(document, list | tuple):
        return [_Entry(index, value) for index, value in enumerate(document)]
    raise CatalogFormatError(f"a catalog must be a JSON array or object, got {_kind(document)}")


# ---------------------------------------------------------------------------------------------
# Entries to tools


def _keys(entry: Mapping[str, Any]) -> str:
    # repr without its quotes: plain names read as they are, odd characters are escaped.
    keys = sorted(repr(str(key))[1:-1][:_NAME_SHOWN] for key in entry)
    shown = ", ".join(keys[:_KEYS_SHOWN]) + (", ..." if len(keys) > _KEYS_SHOWN else "")
    return shown or "none"


def detect_format(entry: Any) -> CatalogFormat:
    """The shape of one tool entry; raises ``CatalogFormatError`` when it is none of them or
    could be more than one. A Gemini tool object (``function_declarations``) is ``gemini``.

    Rules, first match wins: ``function_declarations``/``functionDeclarations`` -> gemini;
    ``"type": "function"`` with a ``function`` object -> openai_chat, with a top-level
    ``name`` -> openai_responses; ``input_schema`` -> anthropic; ``inputSchema`` -> mcp; a
    ``name`` with ``parameters`` or no schema key -> plain. An entry with two schema keys, or a
    ``type`` other than ``function`` and no ``input_schema``, is refused.
    """
    try:
        return _detect(entry)
    except _Problem as err:
        raise CatalogFormatError(err.message, name=err.name) from None


def _entry_name(entry: Any) -> str | None:
    if not isinstance(entry, Mapping):
        return None
    name = entry.get("name")
    if isinstance(name, str):
        return name or None
    function = entry.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return cast(str, function["name"]) or None
    return None


def _detect(entry: Any) -> CatalogFormat:
    if not isinstance(entry, Mapping):
        raise _Problem(f"expected a tool object, got {_kind(entry)}")
    if any(key in entry for key in _GEMINI_DECLARATIONS):
        return "gemini"
    name = _entry_name(entry)
    schema_keys = [key for key in ("input_schema", "inputSchema", "parameters") if key in entry]
    kind = entry.get("type")
    if kind == "function":
        if "function" in entry and "name" in entry:
            raise _Problem("ambiguous shape: both 'function' and a top-level 'name'", name)
        if "function" in entry:
            return "openai_chat"
        if "name" in entry:
            return "openai_responses"
        raise _Problem("a 'function' tool needs a 'function' object or a 'name'", name)
    if len(schema_keys) > 1:
        raise _Problem(f"ambiguous shape: both {schema_keys[0]!r} and {schema_keys[1]!r}", name)
    if schema_keys == ["input_schema"]:
        return "anthropic"
    if kind is not None:
        raise _Problem(f"type {_brief(kind, 40)!r} is not a function tool", name)
    if schema_keys == ["inputSchema"]:
        return "mcp"
    if "name" in entry or schema_keys == ["parameters"]:
        return "plain"
    raise _Problem(f"unknown tool shape (keys: {_keys(entry)})", name)


def _name(raw: Mapping[str, Any]) -> str:
    if "name" not in raw:
        raise _Problem("missing 'name'")
    name = raw["name"]
    if not isinstance(name, str):
        raise _Problem(f"'name' must be a string, got {_kind(name)}")
    if not name:
        raise _Problem("'name' must not be empty")
    if _json.holds_lone_surrogate(name):
        raise _Problem("'name' holds a lone surrogate, which is not Unicode text")
    return name


def _description(raw: Mapping[str, Any], name: str) -> str:
    description = raw.get("description")
    if description is None:
        return ""
    if not isinstance(description, str):
        raise _Problem(f"'description' must be a string, got {_kind(description)}", name)
    if _json.holds_lone_surrogate(description):
        raise _Problem("'description' holds a lone surrogate, which is not Unicode text", name)
    return description


def _parameters(raw: Mapping[str, Any], key: str, name: str) -> dict[str, JSONValue] | None:
    schema = raw.get(key)
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise _Problem(f"{key!r} must be an object, got {_kind(schema)}", name)
    try:
        return cast(dict[str, JSONValue], _copy_json(schema))
    except _Problem as err:
        raise _Problem(f"{key!r}: {err.message}", name) from None


def _tool(
    raw: Mapping[str, Any],
    schema_key: str,
    family: str,
    known: frozenset[str],
    *,
    required_schema: bool = False,
) -> ToolDefinition:
    name = _name(raw)
    if required_schema and raw.get(schema_key) is None:
        raise _Problem(f"missing {schema_key!r}", name)
    description = _description(raw, name)
    parameters = _parameters(raw, schema_key, name)
    extras = {key: _field_copy(value, key) for key, value in raw.items() if key not in known}
    metadata = {EXTRAS_KEY: {family: extras}} if extras else None
    return ToolDefinition(
        name=name, description=description, parameters=parameters, metadata=metadata
    )


_OPENAI_KNOWN: Final = frozenset(("name", "description", "parameters"))
_RESPONSES_KNOWN: Final = frozenset(("type", "name", "description", "parameters"))
_ANTHROPIC_KNOWN: Final = frozenset(("name", "description", "input_schema"))
_MCP_KNOWN: Final = frozenset(("name", "description", "inputSchema"))
_GEMINI_KNOWN: Final = frozenset(("name", "description", "parameters", *_GEMINI_JSON_SCHEMA))
_PLAIN_KNOWN: Final = frozenset(
    ("name", "description", "parameters", "kind", "exclusive", "effect", "metadata")
)
_EFFECT_SHAPE: Final = (
    '\'effect\' must be an object {"kind", "idempotency"}: kind one of '
    + ", ".join(EFFECT_KINDS)
    + "; idempotency one of "
    + ", ".join(IDEMPOTENCY)
    + " (none when kind is none)"
)
# Every key any format reads a schema from: never written back from extras, whatever the
# format (a catalog loaded with a forced format keeps another format's schema key as an extra,
# which the check never looked at).
_SCHEMA_KEYS: Final = frozenset(("parameters", "input_schema", "inputSchema", *_GEMINI_JSON_SCHEMA))


def _openai_chat(entry: Mapping[str, Any]) -> ToolDefinition:
    if entry.get("type") != "function":
        raise _Problem('an OpenAI Chat tool needs "type": "function"', _entry_name(entry))
    function = entry.get("function")
    if not isinstance(function, Mapping):
        raise _Problem(f"'function' must be an object, got {_kind(function)}")
    return _tool(function, "parameters", "openai", _OPENAI_KNOWN)


def _openai_responses(entry: Mapping[str, Any]) -> ToolDefinition:
    if entry.get("type") != "function":
        raise _Problem('an OpenAI Responses tool needs "type": "function"', _entry_name(entry))
    return _tool(entry, "parameters", "openai", _RESPONSES_KNOWN)


def _anthropic(entry: Mapping[str, Any]) -> ToolDefinition:
    return _tool(entry, "input_schema", "anthropic", _ANTHROPIC_KNOWN, required_schema=True)


def _mcp(entry: Mapping[str, Any]) -> ToolDefinition:
    return _tool(entry, "inputSchema", "mcp", _MCP_KNOWN, required_schema=True)


def _gemini_declaration(entry: Mapping[str, Any]) -> ToolDefinition:
    keys = [key for key in ("parameters", *_GEMINI_JSON_SCHEMA) if key in entry]
    if len(keys) > 1:
        raise _Problem(f"both {keys[0]!r} and {keys[1]!r}", _entry_name(entry))
    return _tool(entry, keys[0] if keys else "parameters", "gemini", _GEMINI_KNOWN)


def _plain(entry: Mapping[str, Any]) -> ToolDefinition:
    tool = _tool(entry, "parameters", "plain", _PLAIN_KNOWN)
    kind, exclusive, metadata = entry.get("kind"), entry.get("exclusive"), entry.get("metadata")
    if kind is not None and (not isinstance(kind, str) or kind not in TOOL_KINDS):
        raise _Problem(f"'kind' must be one of {', '.join(sorted(TOOL_KINDS))}", tool.name)
    if exclusive is not None and not isinstance(exclusive, bool):
        raise _Problem(f"'exclusive' must be a boolean, got {_kind(exclusive)}", tool.name)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise _Problem(f"'metadata' must be an object, got {_kind(metadata)}", tool.name)
    effect = _plain_effect(entry.get("effect"), tool.name)
    merged: dict[str, JSONValue] = {}
    if metadata is not None:
        merged = cast(dict[str, JSONValue], _field_copy(metadata, "metadata"))
    if tool.metadata is not None:  # unknown top-level keys, restored by to_plain_catalog
        held = merged.get(EXTRAS_KEY)
        merged[EXTRAS_KEY] = {
            **(held if isinstance(held, Mapping) else {}),
            "plain": tool.metadata[EXTRAS_KEY]["plain"],
        }
    return dataclasses.replace(
        tool,
        kind=cast(ToolKind | None, kind),
        exclusive=bool(exclusive),
        effect=effect,
        metadata=merged or None,
    )


def _plain_effect(effect: Any, name: str) -> ToolEffect | None:
    """A plain entry's ``effect``: ``{"kind", "idempotency"}``, as ``ToolEffect.to_dict``
    writes it (``None`` when absent)."""
    if effect is None:
        return None
    if not isinstance(effect, Mapping) or set(effect) != {"kind", "idempotency"}:
        raise _Problem(_EFFECT_SHAPE, name)
    try:
        return ToolEffect(effect["kind"], effect["idempotency"])
    except ToolEffectError:
        raise _Problem(_EFFECT_SHAPE, name) from None


_PARSERS: Final[Mapping[CatalogFormat, Callable[[Mapping[str, Any]], ToolDefinition]]] = {
    "openai_chat": _openai_chat,
    "openai_responses": _openai_responses,
    "anthropic": _anthropic,
    "mcp": _mcp,
    "plain": _plain,
}


def _declarations(entry: Mapping[str, Any]) -> list[Any]:
    keys = [key for key in _GEMINI_DECLARATIONS if key in entry]
    if len(keys) > 1:
        raise _Problem("both 'function_declarations' and 'functionDeclarations'")
    if any(key not in _GEMINI_DECLARATIONS for key in entry):
        # A Gemini tool object may also hold built-in tools (google_search, code_execution...);
        # they are not function tools, and dropping them silently would hide that.
        raise _Problem(
            f"Gemini tool object has keys other than function declarations ({_keys(entry)})"
        )
    declarations = entry[keys[0]]
    if not isinstance(declarations, list | tuple):
        raise _Problem(f"{keys[0]!r} must be an array, got {_kind(declarations)}")
    return list(declarations)


class _Found:
    """Internal: one loaded tool, or one problem, in document order."""

    __slots__ = ("entry", "error", "format", "tool")

    def __init__(
        self,
        tool: ToolDefinition | None = None,
        format: CatalogFormat | None = None,
        error: CatalogFormatError | None = None,
        entry: int = 0,
    ) -> None:
        self.tool = tool
        self.format = format
        self.error = error
        self.entry = entry


def _problem(index: int, problem: _Problem, entry: Any) -> _Found:
    name = problem.name if problem.name is not None else _entry_name(entry)
    return _Found(error=CatalogFormatError(problem.message, index=index, name=name))


def _load_entry(entry: _Entry, forced: CatalogFormat | None) -> Iterator[_Found]:
    """The tools of one entry (a Gemini tool object may hold several), or its problems."""
    if entry.problem is not None:
        yield _Found(error=CatalogFormatError(entry.problem, index=entry.index))
        return
    value = entry.value
    try:
        fmt = forced if forced is not None else _detect(value)
        if not isinstance(value, Mapping):
            raise _Problem(f"expected a tool object, got {_kind(value)}")
        if fmt != "gemini":
            tool = _PARSERS[fmt](value)
        elif any(key in value for key in _GEMINI_DECLARATIONS):
            declarations = _declarations(value)
        else:  # format="gemini" also takes a bare function declaration
            declarations = [value]
    except _Problem as err:
        yield _problem(entry.index, err, value)
        return
    if fmt != "gemini":
        yield _Found(tool, fmt, entry=entry.index)
        return
    for position, declaration in enumerate(declarations):
        try:
            if not isinstance(declaration, Mapping):
                raise _Problem(f"expected a function declaration, got {_kind(declaration)}")
            yield _Found(_gemini_declaration(declaration), "gemini", entry=entry.index)
        except _Problem as err:
            err.message = f"declaration {position}: {err.message}"
            yield _problem(entry.index, err, declaration)


Source: TypeAlias = "str | os.PathLike[str] | bytes | bytearray | Mapping[str, Any] | Sequence[Any]"


def _check_format(format: str | None) -> CatalogFormat | None:
    if format is not None and format not in CATALOG_FORMATS:
        raise ValueError(f"format must be one of {', '.join(CATALOG_FORMATS)}; got {format!r}")
    return format


def _walk(source: Source, forced: CatalogFormat | None) -> Iterator[_Found]:
    if isinstance(source, str | os.PathLike | bytes | bytearray):
        lines, document = _read(source)
    else:
        lines, document = None, source
    entries = lines if lines is not None else _entries(document)
    # Each entry, good or bad, costs a tool or a problem to hold: a file of a million tiny
    # entries would take gigabytes. Refused up front, and again should declarations multiply.
    if len(entries) > MAX_CATALOG_ENTRIES:
        raise CatalogFormatError(_too_many(len(entries)))
    count = 0
    for entry in entries:
        for found in _load_entry(entry, forced):
            count += 1
            if count > MAX_CATALOG_ENTRIES:
                raise CatalogFormatError(_too_many(count))
            yield found


def _too_many(count: int) -> str:
    return f"the catalog holds {count:,} entries or more; at most {MAX_CATALOG_ENTRIES:,} are read"


def load_catalog(source: Source, *, format: CatalogFormat | None = None) -> list[ToolDefinition]:
    """Tool definitions from a catalog: a path (``str`` or ``PathLike``; JSON, or JSON Lines
    for ``.jsonl``/``.ndjson`` or a file of one JSON object per line), raw JSON ``bytes``, or
    an already-parsed ``list``/``dict``.

    Each entry's shape is detected on its own (``detect_format``), so a mixed list loads;
    ``format=`` forces one shape for every entry. Wrappers are unwrapped: ``{"tools": [...]}``
    (an MCP ``tools/list`` result, a request body) and a JSON-RPC response around it. Loaded
    tools have ``execute=None``. The first problem raises ``CatalogFormatError`` with a one-line
    message; ``load_catalog_report`` lists them all instead.
    """
    forced = _check_format(format)
    tools: list[ToolDefinition] = []
    for found in _walk(source, forced):
        if found.error is not None:
            raise found.error
        tools.append(cast(ToolDefinition, found.tool))
    return tools


def load_catalog_report(source: Source, *, format: CatalogFormat | None = None) -> CatalogLoad:
    """Like ``load_catalog``, but never raises for a bad catalog: every problem (one per bad
    entry or declaration, or one for an unreadable document) is listed, and the good entries
    still load. A bad ``format=`` value is still a ``ValueError``."""
    forced = _check_format(format)
    tools: list[ToolDefinition] = []
    formats: list[CatalogFormat] = []
    entries: list[int] = []
    problems: list[CatalogProblem] = []
    try:
        for found in _walk(source, forced):
            if found.error is not None:
                err = found.error
                problems.append(CatalogProblem(err.index, err.name, str(err)))
            else:
                tools.append(cast(ToolDefinition, found.tool))
                formats.append(cast(CatalogFormat, found.format))
                entries.append(found.entry)
    except CatalogFormatError as err:
        problems.append(CatalogProblem(err.index, err.name, str(err)))
    return CatalogLoad(tuple(tools), tuple(formats), tuple(problems), tuple(entries))


# ---------------------------------------------------------------------------------------------
# Binding


def bind(tool: ToolDefinition, fn: ToolExecute) -> ToolDefinition:
    """A copy of ``tool`` whose ``execute`` is ``fn`` (``TypeError`` if it is not callable)."""
    return dataclasses.replace(tool, execute=fn)


def bind_catalog(
    tools: Sequence[ToolDefinition],
    functions: Mapping[str, ToolExecute],
    *,
    unbound: Literal["keep", "drop", "error"] = "keep",
) -> list[ToolDefinition]:
    """Bind ``functions[name]`` to every tool of that name. A name with no tool raises
    ``UnknownToolError`` (a typo would otherwise leave a tool unbound without a word). Tools
    with no function are kept as they are (``unbound="keep"``; dispatch blocks them with
    ``tool_not_bound``), left out (``"drop"``), or refused with a ``ValueError`` (``"error"``).
    """
    if unbound not in ("keep", "drop", "error"):
        raise ValueError(f"unbound must be 'keep', 'drop' or 'error'; got {unbound!r}")
    tools = tool_definitions(tools)
    names = {tool.name for tool in tools}
    for name in functions:
        if name not in names:
            raise UnknownToolError(name)
    out: list[ToolDefinition] = []
    missing: list[str] = []
    for tool in tools:
        fn = functions.get(tool.name)
        if fn is not None:
            out.append(bind(tool, fn))
        elif unbound == "keep":
            out.append(tool)
        elif unbound == "error":
            missing.append(tool.name)
    if missing:
        raise ValueError(f"no function bound for: {', '.join(missing)}")
    return out


# ---------------------------------------------------------------------------------------------
# Export


def _extras(tool: ToolDefinition, family: str) -> Mapping[str, JSONValue]:
    held = (tool.metadata or {}).get(EXTRAS_KEY)
    if not isinstance(held, Mapping):
        return {}
    extras = held.get(family)
    return extras if isinstance(extras, Mapping) else {}


def _exportable(tools: Sequence[ToolDefinition]) -> Iterator[tuple[int, ToolDefinition]]:
    """The tools with their positions, each checked to fit in a catalog: a schema or metadata
    nested past ``MAX_NESTING`` (or holding itself) is a ``CatalogFormatError``, where
    ``to_plain`` would write ``"[MaxDepth]"`` in its place and the catalog would lose it."""
    for index, tool in enumerate(tool_definitions(tools)):
        # Loaded extras sit three levels inside the metadata: {"catalog_extras": {family: {key}}}.
        for field, value, limit in (
            ("parameters", tool.parameters, MAX_NESTING),
            ("metadata", tool.metadata, MAX_NESTING + 3),
        ):
            if _nests_past(value, limit):
                raise CatalogFormatError(
                    f"{field!r}: nested deeper than {limit} levels", index=index, name=tool.name
                )
        yield index, tool


def _nests_past(value: Any, limit: int) -> bool:
    if not isinstance(value, Mapping | list | tuple):
        return False
    if limit == 0:
        return True
    items = value.values() if isinstance(value, Mapping) else value
    return any(_nests_past(item, limit - 1) for item in items)


def _restore(
    entry: dict[str, JSONValue], extras: Mapping[str, JSONValue], known: frozenset[str]
) -> None:
    """Writes the stored extras back into ``entry``, except the fields the format maps from the
    tool itself (``known``): those come from the tool's own description and schema only, the
    ones ``check`` looked at, even when the tool leaves them out (no description, no schema)."""
    for key, value in extras.items():
        # A mapped field always wins over an extra, and a schema comes from the tool only.
        if key not in entry and key not in known and key not in _SCHEMA_KEYS:
            entry[key] = to_plain(value)


def _openai_function(tool: ToolDefinition, strict: bool, index: int) -> dict[str, JSONValue]:
    function = cast(dict[str, JSONValue], openai_tool(tool)["function"])
    if strict:
        function["parameters"] = strict_schema(
            EMPTY_PARAMETERS if tool.parameters is None else tool.parameters,
            name=tool.name,
            index=index,
        )
        function["strict"] = True
    _restore(function, _extras(tool, "openai"), _OPENAI_KNOWN)
    return function


def to_openai_chat(
    tools: Sequence[ToolDefinition], *, strict: bool = False
) -> list[dict[str, JSONValue]]:
    """Chat Completions ``tools`` entries (the same mapping the OpenAI provider sends, plus the
    tool's stored OpenAI extras such as ``strict``). With ``strict=True`` every schema goes
    through ``strict_schema`` and ``"strict": true`` is set; ``StrictSchemaError`` names the
    first tool and spot that cannot be made strict."""
    return [
        {"type": "function", "function": _openai_function(tool, strict, index)}
        for index, tool in _exportable(tools)
    ]


def to_openai_responses(
    tools: Sequence[ToolDefinition], *, strict: bool = False
) -> list[dict[str, JSONValue]]:
    """Responses API ``tools`` entries (``{"type": "function", "name", ...}``). The Responses
    API treats a missing ``strict`` as "make it strict if possible", so a tool with no stored
    ``strict`` is written with ``"strict": false`` unless ``strict=True`` converts it."""
    out: list[dict[str, JSONValue]] = []
    for index, tool in _exportable(tools):
        entry: dict[str, JSONValue] = {"type": "function"}
        entry.update(_openai_function(tool, strict, index))
        # A "type" kept among the Chat function's extras has no place here: the entry's own wins.
        entry["type"] = "function"
        entry.setdefault("strict", False)
        out.append(entry)
    return out


def to_anthropic(tools: Sequence[ToolDefinition]) -> list[dict[str, JSONValue]]:
    """Anthropic Messages ``tools`` entries (the provider's mapping plus stored extras such as
    ``cache_control``)."""
    out: list[dict[str, JSONValue]] = []
    for _, tool in _exportable(tools):
        entry = anthropic_tool(tool)
        _restore(entry, _extras(tool, "anthropic"), _ANTHROPIC_KNOWN)
        out.append(entry)
    return out


def to_gemini(
    tools: Sequence[ToolDefinition], *, json_schema: bool = False
) -> list[dict[str, JSONValue]]:
    """Gemini ``tools``: one tool object ``{"function_declarations": [...]}`` (``[]`` for no
    tools). Schemas pass through unchanged in ``parameters``, which Gemini reads as its
    OpenAPI-subset ``Schema``; ``json_schema=True`` sends them as ``parameters_json_schema``
    (full JSON Schema) instead. A tool without parameters has no schema key."""
    declarations: list[JSONValue] = []
    for _, tool in _exportable(tools):
        declaration: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        if tool.parameters is not None:
            key = "parameters_json_schema" if json_schema else "parameters"
            declaration[key] = to_plain(tool.parameters)
        _restore(declaration, _extras(tool, "gemini"), _GEMINI_KNOWN)
        declarations.append(declaration)
    return [{"function_declarations": declarations}] if declarations else []


def to_mcp(tools: Sequence[ToolDefinition]) -> list[dict[str, JSONValue]]:
    """MCP ``tools/list`` tools (``{"name", "description", "inputSchema"}`` plus stored extras
    such as ``title`` and ``annotations``); wrap as ``{"tools": ...}`` for a result."""
    out: list[dict[str, JSONValue]] = []
    for _, tool in _exportable(tools):
        entry: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            entry["description"] = tool.description
        entry["inputSchema"] = to_plain(
            EMPTY_PARAMETERS if tool.parameters is None else tool.parameters
        )
        _restore(entry, _extras(tool, "mcp"), _MCP_KNOWN)
        out.append(entry)
    return out


def to_plain_catalog(tools: Sequence[ToolDefinition]) -> list[dict[str, JSONValue]]:
    """Plain entries ``{"name", "description", "parameters"}``, plus ``kind``, ``exclusive``,
    ``effect`` (``{"kind", "idempotency"}``) and ``metadata`` when set: the one shape that keeps
    every data field of a definition. An ``effect`` that is a classifier function is code, not
    data: such a tool is refused with a ``CatalogFormatError`` (left out, the reloaded tool
    would run with no effect claim at all)."""
    out: list[dict[str, JSONValue]] = []
    for index, tool in _exportable(tools):
        entry: dict[str, JSONValue] = {"name": tool.name}
        if tool.description:
            entry["description"] = tool.description
        if tool.parameters is not None:
            entry["parameters"] = to_plain(tool.parameters)
        if tool.kind is not None:
            entry["kind"] = tool.kind
        if tool.exclusive:
            entry["exclusive"] = True
        if tool.effect is not None:
            entry["effect"] = _effect_entry(tool, index)
        metadata = dict(tool.metadata or {})
        extras = _extras(tool, "plain")
        if extras:  # written back as top-level keys, so not kept twice
            held = {k: v for k, v in metadata[EXTRAS_KEY].items() if k != "plain"}
            if held:
                metadata[EXTRAS_KEY] = held
            else:
                del metadata[EXTRAS_KEY]
        if metadata:
            entry["metadata"] = to_plain(metadata)
        _restore(entry, extras, _PLAIN_KNOWN)
        out.append(entry)
    return out


def _effect_entry(tool: ToolDefinition, index: int) -> JSONValue:
    """``tool.effect`` as a plain entry holds it; ``CatalogFormatError`` for a classifier
    function or an invalid declaration."""
    effect: Any = tool.effect
    if isinstance(effect, Mapping):  # a declaration may also be {"kind", "idempotency"}
        kind: Any = effect.get("kind")
        idempotency: Any = effect.get("idempotency")
        with contextlib.suppress(ToolEffectError):
            effect = ToolEffect(kind, idempotency)
    if isinstance(effect, ToolEffect):
        return effect.to_dict()
    if callable(effect):
        problem = (
            "'effect' is a classifier function, which a catalog cannot hold; "
            "export the tool with a ToolEffect, or without its effect"
        )
    else:
        problem = "'effect' is not a valid effect declaration (a ToolEffect)"
    raise CatalogFormatError(problem, index=index, name=tool.name)


def export_catalog(
    tools: Sequence[ToolDefinition], format: CatalogFormat, *, strict: bool = False
) -> list[dict[str, JSONValue]]:
    """The ``tools`` list in ``format`` (one of ``CATALOG_FORMATS``). ``strict`` applies to the
    two OpenAI formats only; asking for it elsewhere is a ``ValueError``."""
    checked = _check_format(format)
    if checked is None:
        raise ValueError("format is required")
    if checked == "openai_chat":
        return to_openai_chat(tools, strict=strict)
    if checked == "openai_responses":
        return to_openai_responses(tools, strict=strict)
    if strict:
        raise ValueError(f"strict mode applies to the OpenAI formats, not {checked!r}")
    writers: Mapping[str, Callable[[Sequence[ToolDefinition]], list[dict[str, JSONValue]]]] = {
        "anthropic": to_anthropic,
        "gemini": to_gemini,
        "mcp": to_mcp,
        "plain": to_plain_catalog,
    }
    return writers[checked](tools)


# ---------------------------------------------------------------------------------------------
# OpenAI strict mode

STRICT_UNSUPPORTED: Final = frozenset(
    (
        # composition and conditionals: only anyOf is supported
        "allOf", "oneOf", "not", "if", "then", "else",
        "dependentRequired", "dependentSchemas", "dependencies",
        # objects
        "patternProperties", "unevaluatedProperties", "propertyNames",
        "minProperties", "maxProperties",
        # strings (pattern and format are supported)
        "minLength", "maxLength",
        # arrays (minItems and maxItems are supported); tuple forms
        "unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
        "prefixItems", "additionalItems",
        # dynamic references
        "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
    )
)  # fmt: skip
"""Keywords OpenAI's strict mode does not accept (its Structured Outputs "supported schemas"
list); ``strict_schema`` refuses them rather than dropping a constraint silently."""

_JSON_TYPES: Final = frozenset(
    ("string", "number", "integer", "boolean", "array", "object", "null")
)
_SCHEMA_MAPS: Final = ("$defs", "definitions")


class _At:
    """A spot inside the schema being made strict, written out as its JSON Pointer only for an
    error: a pointer string built for every schema would copy a long property name once for
    each schema below it."""

    __slots__ = ("parent", "token")

    def __init__(self, parent: _At | None = None, token: str = "") -> None:
        self.parent = parent
        self.token = token

    def __truediv__(self, token: str | int) -> _At:
        return _At(self, _json.pointer_token(token))

    def __str__(self) -> str:
        tokens: list[str] = []
        at = self
        while at.parent is not None:
            tokens.append(at.token)
            at = at.parent
        return "".join(f"/{token}" for token in reversed(tokens))


class _StrictFail(Exception):
    def __init__(self, pointer: _At | str, reason: str) -> None:
        super().__init__(reason)
        self.pointer = pointer
        self.reason = reason


def strict_schema(
    schema: Mapping[str, JSONValue], *, name: str | None = None, index: int | None = None
) -> dict[str, JSONValue]:
    """A new schema for OpenAI strict mode (the input is not changed).

    Every object schema (root, nested, in ``items``, ``anyOf`` and ``$defs``) gets every
    property in ``required`` and ``"additionalProperties": false``; a property that was
    optional becomes nullable (``"type": [T, "null"]``, ``null`` added to its ``enum``, or
    ``anyOf`` with ``{"type": "null"}``), so the model sends ``null`` where it would have left
    the property out. A ``$ref`` with sibling keywords is inlined (strict mode refuses the
    siblings). What strict mode cannot express raises ``StrictSchemaError`` with the JSON
    pointer of the spot: a keyword in ``STRICT_UNSUPPORTED``, ``additionalProperties`` other
    than ``false``, an object without ``properties`` (it would accept any keys), a schema with
    no ``type``/``enum``/``const``/``anyOf``/``$ref`` (it would accept any value), a boolean
    schema, the tuple form of ``items``, a root that is not an object schema. The result is
    idempotent: converting it again gives it back unchanged.
    """
    try:
        if not isinstance(schema, Mapping):
            raise _StrictFail("", f"parameters must be an object, got {_kind(schema)}")
        try:
            root = cast(dict[str, JSONValue], _copy_json(schema))
        except _Problem as err:
            raise _StrictFail("", err.message) from None
        if "type" not in root and "properties" in root:
            root = {"type": "object", **root}  # tool arguments are always an object
        if root.get("type") != "object":
            raise _StrictFail("", 'the root must be an object schema ("type": "object")')
        if "anyOf" in root:
            raise _StrictFail("/anyOf", "the root must not be an 'anyOf'")
        return _Strict(root).convert(root, _At(), frozenset(), 0)
    except _StrictFail as err:
        raise StrictSchemaError(str(err.pointer), err.reason, index=index, name=name) from None


class _Strict:
    def __init__(self, root: dict[str, JSONValue]) -> None:
        self.root = root
        self.schemas_left = MAX_STRICT_SCHEMAS

    def resolve(self, ref: str, pointer: _At) -> Mapping[str, JSONValue]:
        if ref != "#" and not ref.startswith("#/"):
            raise _StrictFail(pointer, f"only a local JSON-pointer '$ref' can be inlined: {ref!r}")
        node: Any = self.root
        for token in ref[2:].split("/") if ref != "#" else []:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise _StrictFail(pointer, f"'$ref' {ref!r} does not resolve")
        if not isinstance(node, Mapping):
            raise _StrictFail(pointer, f"'$ref' {ref!r} is not a schema object")
        return node

    def convert(
        self, schema: Any, pointer: _At, inlining: frozenset[str], depth: int
    ) -> dict[str, JSONValue]:
        if depth > MAX_NESTING:
            raise _StrictFail("", f"nested deeper than {MAX_NESTING} levels")
        self.schemas_left -= 1
        if self.schemas_left < 0:
            raise _StrictFail(
                pointer,
                f"inlining its '$ref's would make more than {MAX_STRICT_SCHEMAS} schemas",
            )
        if not isinstance(schema, Mapping):
            raise _StrictFail(pointer, f"a {_kind(schema)} schema cannot be made strict")
        for key in schema:
            if key in STRICT_UNSUPPORTED:
                raise _StrictFail(pointer / key, f"{key!r} is not supported")
        ref = schema.get("$ref")
        if ref is not None:
            if not isinstance(ref, str):
                raise _StrictFail(pointer / "$ref", "'$ref' must be a string")
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            if not siblings:
                return {"$ref": ref}
            if ref in inlining:
                raise _StrictFail(pointer, f"recursive '$ref' {ref!r} with sibling keywords")
            merged = {**self.resolve(ref, pointer), **siblings}
            return self.convert(merged, pointer, inlining | {ref}, depth + 1)
        out: dict[str, JSONValue] = dict(schema)
        types = self.types(schema, pointer)
        for key in _SCHEMA_MAPS:
            if key in schema:
                defs = schema[key]
                if not isinstance(defs, Mapping):
                    raise _StrictFail(pointer / key, f"{key!r} must be an object")
                out[key] = {
                    def_name: self.convert(sub, pointer / key / def_name, inlining, depth + 1)
                    for def_name, sub in defs.items()
                }
        if "anyOf" in schema:
            branches = schema["anyOf"]
            if not isinstance(branches, list) or not branches:
                raise _StrictFail(pointer / "anyOf", "'anyOf' must be a non-empty array")
            out["anyOf"] = [
                self.convert(sub, pointer / "anyOf" / position, inlining, depth + 1)
                for position, sub in enumerate(branches)
            ]
        if "items" in schema:
            if not isinstance(schema["items"], Mapping):
                raise _StrictFail(pointer / "items", "'items' must be one schema object")
            out["items"] = self.convert(schema["items"], pointer / "items", inlining, depth + 1)
        if "additionalProperties" in schema and schema["additionalProperties"] is not False:
            raise _StrictFail(
                pointer / "additionalProperties",
                "only 'additionalProperties': false is supported",
            )
        if "object" in types or (not types and "properties" in schema):
            self.object(schema, out, pointer, inlining, depth)
        elif not types and not any(key in schema for key in ("enum", "const", "anyOf")):
            raise _StrictFail(pointer, "a schema with no 'type' accepts any value")
        return out

    @staticmethod
    def types(schema: Mapping[str, Any], pointer: _At) -> list[str]:
        if "type" not in schema:
            return []
        declared = schema["type"]
        names = declared if isinstance(declared, list) else [declared]
        for name in names:
            if not isinstance(name, str) or name not in _JSON_TYPES:
                raise _StrictFail(pointer / "type", f"{name!r} is not a JSON Schema type")
        return cast(list[str], names)

    def object(
        self,
        schema: Mapping[str, Any],
        out: dict[str, JSONValue],
        pointer: _At,
        inlining: frozenset[str],
        depth: int,
    ) -> None:
        properties = schema.get("properties")
        if properties is None:
            if schema.get("additionalProperties") is not False:
                raise _StrictFail(pointer, "an object without 'properties' accepts any keys")
            properties = {}
        if not isinstance(properties, Mapping):
            raise _StrictFail(pointer / "properties", "'properties' must be an object")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
            raise _StrictFail(pointer / "required", "'required' must be an array of strings")
        for missing in required:
            if missing not in properties:
                raise _StrictFail(
                    pointer / "required",
                    f"required property {missing!r} is not in 'properties'",
                )
        required_names = set(required)  # a hostile catalog may list thousands of names
        converted: dict[str, JSONValue] = {}
        for prop, sub in properties.items():
            where = pointer / "properties" / prop
            strict_sub = self.convert(sub, where, inlining, depth + 1)
            converted[prop] = strict_sub if prop in required_names else _nullable(strict_sub)
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False


def _allows_null(schema: Mapping[str, JSONValue]) -> bool:
    declared = schema.get("type")
    if declared == "null" or (isinstance(declared, list) and "null" in declared):
        return not any(key in schema for key in ("enum", "const", "anyOf", "$ref")) or (
            isinstance(schema.get("enum"), list) and None in cast(list[Any], schema["enum"])
        )
    annotations = {"description", "title"}
    # Without a type, an enum or const that lists null already takes it.
    enum = schema.get("enum")
    if set(schema) <= {"enum", *annotations} and isinstance(enum, list):
        return None in enum
    if set(schema) <= {"const", *annotations} and "const" in schema:
        return schema["const"] is None
    branches = schema.get("anyOf")
    if set(schema) <= {"anyOf", *annotations} and isinstance(branches, list):
        return any(isinstance(b, Mapping) and _allows_null(b) for b in branches)
    return False


def _nullable(schema: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """``schema`` that also accepts ``null`` (an optional property made required)."""
    if _allows_null(schema):
        return schema
    if "type" in schema and not any(key in schema for key in ("const", "anyOf", "$ref")):
        out = dict(schema)
        declared = schema["type"]
        names = list(declared) if isinstance(declared, list) else [declared]
        out["type"] = [*names, "null"] if "null" not in names else names
        enum = schema.get("enum")
        if isinstance(enum, list) and None not in enum:
            out["enum"] = [*enum, None]
        return out
    if set(schema) <= {"anyOf", "description", "title"} and isinstance(schema["anyOf"], list):
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    if set(schema) == {"enum"} and isinstance(schema["enum"], list):
        return {"enum": [*schema["enum"], None]}
    return {"anyOf": [schema, {"type": "null"}]}


__all__ = [
    "CATALOG_FORMATS",
    "EXTRAS_KEY",
    "MAX_CATALOG_BYTES",
    "MAX_CATALOG_ENTRIES",
    "MAX_NESTING",
    "MAX_STRICT_SCHEMAS",
    "STRICT_UNSUPPORTED",
    "CatalogFormat",
    "CatalogFormatError",
    "CatalogLoad",
    "CatalogProblem",
    "StrictSchemaError",
    "bind",
    "bind_catalog",
    "detect_format",
    "export_catalog",
    "load_catalog",
    "load_catalog_report",
    "strict_schema",
    "to_anthropic",
    "to_gemini",
    "to_mcp",
    "to_openai_chat",
    "to_openai_responses",
    "to_plain_catalog",
]
