"""Tool payloads built once per tool definition and reused on every turn.

A provider request carries every visible tool's schema on every turn. Converting each schema to
plain data (and to JSON) again each turn costs time proportional to the catalog; a definition
never changes (``ToolDefinition`` is frozen), so its payload is built the first time it is sent
and kept, keyed by the definition object itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from prism_tools import _json
from prism_tools.types import JSONValue, ToolDefinition

DEFAULT_CACHE_SIZE: Final = 8192


class ToolPayloadCache:
    """Per-definition payloads for one provider format; past ``maxsize`` the oldest is dropped.

    ``entries(tools)`` returns the cached dicts (shared between turns: treat them as read-only);
    ``json(tools)`` the request's ``tools`` array as JSON bytes, joined from cached fragments.
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
        # id -> (the definition, its payload, its JSON); holding the definition keeps the id valid.
        self._entries: OrderedDict[int, tuple[ToolDefinition, dict[str, JSONValue], bytes]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def _entry(self, tool: ToolDefinition) -> tuple[ToolDefinition, dict[str, JSONValue], bytes]:
        # The hit path is one dict lookup: no lock, no reordering (a dict read is atomic).
        found = self._entries.get(id(tool))
        if found is not None and found[0] is tool:
            return found
        payload = self._build(tool)
        entry = (tool, payload, _json.dumps(payload))
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


__all__ = ["DEFAULT_CACHE_SIZE", "ToolPayloadCache"]
