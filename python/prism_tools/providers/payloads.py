"""Tool payloads built once per tool definition and reused on every turn.

A provider request carries every visible tool's schema on every turn. Converting each schema to
plain data (and to JSON) again each turn costs time proportional to the catalog; a definition
never changes (``ToolDefinition`` is frozen), so its payload is built the first time it is sent
and kept, keyed by the definition object itself (weakly: the cache never keeps a definition
alive).

A definition whose payload is not JSON (a lone surrogate, NaN or an infinity) raises
``ToolPayloadError`` each time it is sent, and is not kept. An integer beyond 64 bits is
written with every digit.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from prism_tools import _json
from prism_tools._json import LONE_SURROGATE
from prism_tools.errors import PrismError
from prism_tools.providers.streaming import escape_lone_surrogates
from prism_tools.types import JSONValue, ToolDefinition

DEFAULT_CACHE_SIZE: Final = 8192

_Ref = weakref.ReferenceType[ToolDefinition]


class ToolPayloadError(PrismError, ValueError):
    """A tool definition that no request can carry, because its payload is not JSON.

    ``tool_name`` is the definition's name, ``pointer`` the JSON pointer of the offending spot
    inside the payload (``""`` is the payload itself) and ``problem`` what is wrong there.
    """

    code = "ERR_PRISM_TOOL_PAYLOAD"

    def __init__(self, tool_name: str, pointer: str, problem: str) -> None:
        where = escape_lone_surrogates(pointer) or "/"
        super().__init__(
            f"tool {tool_name!r} cannot be sent to a provider: the value at {where} {problem}"
        )
        self.tool_name = tool_name
        self.pointer = pointer
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.tool_name, self.pointer, self.problem))


def _surrogate_problem(text: str) -> str | None:
    found = None if text.isascii() else LONE_SURROGATE.search(text)
    if found is None:
        return None
    return (
        f"lone surrogate U+{ord(found[0]):04X} at character {found.start()}, "
        "which UTF-8 cannot carry"
    )


def _not_json(value: object, pointer: str) -> tuple[str, str] | None:
    """The first spot in ``value`` that a JSON request cannot carry, and what is wrong there.

    Only what the writer writes without complaint (NaN, as null) or refuses without saying
    where is looked for; other types are left to the writer's own message.
    """
    # The pointer is built only for the spot found: building one per leaf costs the square of
    # a long key's length over the leaves below it.
    for path, leaf, is_key in _json.json_leaf_paths(value):
        if isinstance(leaf, str):
            problem = _surrogate_problem(leaf)
            if problem is not None:
                at = pointer + _json.pointer_of(path)
                return (at, f"has a key with a {problem}" if is_key else f"holds a {problem}")
        elif isinstance(leaf, float) and not math.isfinite(leaf):
            return (pointer + _json.pointer_of(path), f"is {leaf!r}, which JSON lacks")
    return None


MAX_PAYLOAD_VALUES: Final = 200_000
"""Most values a tool's schema may write out as: twice what the largest schema the validator
takes (256 KiB) can hold."""


def _written_size_problem(schema: object) -> str | None:
    """Why ``schema`` cannot be written out, if it would write more than ``MAX_PAYLOAD_VALUES``
    values: a dict or list shared between places is written once per place (YAML aliases make
    such schemas; twenty levels of two places each are a million copies), and one that holds
    itself without end. Counted without writing anything, so the refusal comes at once."""
    count = 0
    stack = [schema]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_PAYLOAD_VALUES:
            return (
                f"writes out as more than {MAX_PAYLOAD_VALUES:,} values (a dict or list shared "
                "between places is written once per place)"
            )
        if isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return None


def _payload_json(tool: ToolDefinition, payload: dict[str, JSONValue]) -> bytes:
    try:
        # Exact: a schema's integer beyond 64 bits is written with every digit.
        data: bytes | None = _json.dumps_exact(payload)
    except ValueError as err:
        data, refusal = None, str(err)
    # orjson writes NaN and the infinities as null, so only a null can hide one.
    if data is None or b"null" in data:
        found = _not_json(payload, "")
        if found is not None:
            raise ToolPayloadError(tool.name, *found)
        if data is None:
            raise ToolPayloadError(tool.name, "", refusal)
    return data


class ToolPayloadCache:
    """Per-definition payloads for one provider format; past ``maxsize`` the oldest is dropped.

    ``entries(tools)`` returns the cached dicts (shared between turns: treat them as read-only);
    ``json(tools)`` the request's ``tools`` array as JSON bytes, joined from cached fragments.
    Both raise ``ToolPayloadError`` for a definition whose payload is not JSON.
    """

    def __init__(
        self,
        build: Callable[[ToolDefinition], dict[str, JSONValue]],
        maxsize: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self._build = build
        self._maxsize = maxsize
        # id -> (a weak reference to the definition, its payload, its JSON). The entry does not
        # keep the definition alive: a run's generated search_tools, or a tool a host builds
        # per request, is freed when dropped (its entry, now only the payload, ages out); the
        # reference tells a live definition from a later object given the same id.
        self._entries: OrderedDict[int, tuple[_Ref, dict[str, JSONValue], bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, tool: ToolDefinition) -> tuple[_Ref, dict[str, JSONValue], bytes]:
        # The hit path is one dict lookup: no lock, no reordering (a dict read is atomic).
        found = self._entries.get(id(tool))
        if found is not None and found[0]() is tool:
            return found
        data: bytes | None = None
        grown = _written_size_problem(tool.parameters)
        if grown is not None:
            raise ToolPayloadError(tool.name, "", f"has a parameters schema that {grown}")
        try:
            payload = self._build(tool)
            data = _payload_json(tool, payload)
        except RecursionError:
            pass  # raised below, outside this handler, so the error does not chain to it
        if data is None:
            raise ToolPayloadError(
                tool.name, "", "is nested too deeply (or holds itself) to be written as JSON"
            )
        entry = (weakref.ref(tool), payload, data)
        with self._lock:
            self._entries[id(tool)] = entry
            while len(self._entries) > self._maxsize:
                self._entries.popitem(last=False)
        return entry

    def entries(self, tools: Sequence[ToolDefinition]) -> list[dict[str, JSONValue]]:
        return [self._entry(tool)[1] for tool in tools]

    def json(self, tools: Sequence[ToolDefinition]) -> bytes:
        return b"[" + b",".join(self._entry(tool)[2] for tool in tools) + b"]"

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["DEFAULT_CACHE_SIZE", "ToolPayloadCache", "ToolPayloadError"]
