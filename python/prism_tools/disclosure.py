"""Progressive tool disclosure: show the model the few tools a turn needs, plus ``search_tools``.

A catalog of hundreds of tools does not fit a provider request (OpenAI refuses more than 128) and
every schema costs tokens on every turn. ``disclose_tools`` picks the top-k tools for the turn's
input with the BM25 index of :mod:`prism_tools.search`, keeps the tools the model already
activated, and adds a generated ``search_tools`` tool the model calls to find more.

Disclosure narrows what the model *sees*; it never grants anything. Dispatch still checks the
registry and the filters on every call, and every disclosed tool comes from the input list.
It fails closed: when the index cannot be built (more tools than its cap, bad input) or a search
fails, the whole input list is disclosed and :class:`ToolDisclosure` says why.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from prism_tools import _json
from prism_tools._core import (
    SEARCH_DEFAULT_TOP_K,
    SEARCH_MAX_TOP_K,
    SearchHit,
    ToolSearchCapacityError,
    ToolSearchIndex,
)
from prism_tools.registry import ToolRegistry
from prism_tools.types import JSONValue, ToolDefinition, ToolExecutionContext, tool_definitions

SEARCH_TOOLS_NAME: Final = "search_tools"
"""Name of the generated search tool; disclosure reserves it."""

MAX_ACTIVATED: Final = 128
"""Most tool names an activation state remembers; the oldest activation is dropped first."""

DESCRIPTION_LINE_CHARS: Final = 120
"""Longest description line ``search_tools`` prints per tool."""

FallbackReason = Literal["index_capacity", "index_error", "search_error", "reserved_name"]

_SEARCH_TOOLS_PARAMETERS: Final[Mapping[str, JSONValue]] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "Words describing the task or the tool you need.",
        },
        "k": {
            "type": "integer",
            "minimum": 1,
            "maximum": SEARCH_MAX_TOP_K,
            "description": f"How many tools to return (default {SEARCH_DEFAULT_TOP_K}).",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

_SEARCH_TOOLS_DESCRIPTION: Final = (
    "Search the tools available to you by name and description. Returns one line per tool: "
    "'name: description [matched: words]'. Tools it returns become available on your next turn."
)


class ToolActivationState:
    """Names of the tools the model activated through ``search_tools``, oldest first.

    Names only, never definitions: a name that is not in the current tool list is inert, and an
    activation grants nothing (dispatch checks every call). Re-activating a name makes it the
    newest. At most ``cap`` names are kept (default and ceiling 128). Safe to share between
    threads. ``to_json``/``from_json`` persist it with a run.
    """

    __slots__ = ("_cap", "_lock", "_names")

    def __init__(self, names: Iterable[str] = (), *, cap: int = MAX_ACTIVATED) -> None:
        if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_ACTIVATED:
            raise ValueError(f"activation cap must be an int between 1 and {MAX_ACTIVATED}")
        self._cap = cap
        self._lock = threading.Lock()
        self._names: dict[str, None] = {}
        self.activate(names)

    def activate(self, names: Iterable[str]) -> None:
        """Marks ``names`` active, newest last; drops the oldest past the cap."""
        if isinstance(names, str):
            raise TypeError("activate takes a collection of tool names, not a single string")
        batch = list(names)
        for name in batch:
            if not isinstance(name, str) or not name:
                raise TypeError(f"tool names must be non-empty strings, got {name!r}")
        with self._lock:
            for name in batch:
                self._names.pop(name, None)
                self._names[name] = None
            overflow = len(self._names) - self._cap
            if overflow > 0:
                for name in list(self._names)[:overflow]:
                    del self._names[name]

    @property
    def names(self) -> tuple[str, ...]:
        """Active names, oldest first."""
        with self._lock:
            return tuple(self._names)

    @property
    def cap(self) -> int:
        return self._cap

    def clear(self) -> None:
        """Forgets every activation."""
        with self._lock:
            self._names.clear()

    def to_json(self) -> str:
        """``{"activated": [names, oldest first]}``."""
        return json.dumps({"activated": list(self.names)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, *, cap: int = MAX_ACTIVATED) -> ToolActivationState:
        """Restores a state written by ``to_json``; keeps the newest ``cap`` names."""
        try:
            data = _json.loads_stored(text)
        except (ValueError, TypeError) as err:
            raise ValueError(f"activation state is not valid JSON: {err}") from None
        names = data.get("activated") if isinstance(data, dict) else None
        if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
            raise ValueError(
                'activation state must be {"activated": [tool names]} with non-empty strings'
            )
        return cls(names, cap=cap)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._names

    def __len__(self) -> int:
        with self._lock:
            return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __repr__(self) -> str:
        return f"ToolActivationState({list(self.names)!r})"


def _one_line(text: str, limit: int, *, first_line_only: bool = True) -> str:
    """``text`` as one line: whitespace and control characters collapsed, cut to ``limit``.

    Descriptions keep only their first line; names keep all of it (a name is an identifier).
    """
    if first_line_only:
        text = text.strip().split("\n", 1)[0]
    cleaned = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    if len(cleaned) <= limit:
        return cleaned
    return cleaned[: limit - 1].rstrip() + "…"


def format_search_hits(hits: Sequence[SearchHit], descriptions: Mapping[str, str]) -> str:
    """The inert text ``search_tools`` returns: ``name: description [matched: words]`` lines."""
    lines = []
    for hit in hits:
        name = _one_line(hit.name, DESCRIPTION_LINE_CHARS, first_line_only=False)
        description = _one_line(descriptions.get(hit.name, ""), DESCRIPTION_LINE_CHARS)
        matched = ", ".join(hit.matched)
        lines.append(f"{name}: {description} [matched: {matched}]")
    return "\n".join(lines)


def create_search_tools_tool(
    index: ToolSearchIndex,
    state: ToolActivationState,
    *,
    descriptions: Mapping[str, str] | Sequence[ToolDefinition] | None = None,
    allowed: Iterable[str] | None = None,
    default_k: int = SEARCH_DEFAULT_TOP_K,
) -> ToolDefinition:
    """The ``search_tools`` tool over ``index``; the names it returns are activated in ``state``.

    ``descriptions`` gives the text printed per tool (a name-to-description mapping or the
    indexed ``ToolDefinition``\\ s); without it lines carry the name and matched words only.
    ``allowed``, when given, drops hits outside those names (an index shared with a wider list).
    """
    if (
        isinstance(default_k, bool)
        or not isinstance(default_k, int)
        or not 1 <= default_k <= SEARCH_MAX_TOP_K
    ):
        raise ValueError(f"default_k must be between 1 and {SEARCH_MAX_TOP_K}, got {default_k!r}")
    if descriptions is None:
        texts: Mapping[str, str] = {}
    elif isinstance(descriptions, Mapping):
        texts = dict(descriptions)
    else:
        texts = {tool.name: tool.description for tool in descriptions}
    permitted = None if allowed is None else frozenset(allowed)

    def search_tools(args: dict[str, JSONValue], context: ToolExecutionContext) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("search_tools needs a non-empty string 'query'")
        k = args.get("k", default_k)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= SEARCH_MAX_TOP_K:
            raise ValueError(f"search_tools 'k' must be an integer from 1 to {SEARCH_MAX_TOP_K}")
        hits = index.search(query, k)
        if permitted is not None:
            hits = [hit for hit in hits if hit.name in permitted]
        if not hits:
            return "No tools matched. Try other words for the task."
        state.activate(hit.name for hit in hits)
        return format_search_hits(hits, texts)

    return ToolDefinition(
        name=SEARCH_TOOLS_NAME,
        execute=search_tools,
        description=_SEARCH_TOOLS_DESCRIPTION,
        parameters=_SEARCH_TOOLS_PARAMETERS,
        kind="search",
    )


@dataclass(frozen=True, slots=True)
class ToolDisclosure:
    """What one turn shows the model, and whether disclosure fell back to every tool.

    ``tools``: the disclosed definitions, in input order, then ``search_tools`` when searching.
    ``fallback``: None when the search narrowed the list; otherwise why every tool is shown
    (``index_capacity``: more tools than the index cap; ``index_error``/``search_error``: the
    index could not be built or searched; ``reserved_name``: an input tool is already called
    ``search_tools``). ``hits``: the turn's search hits, best first.
    """

    tools: tuple[ToolDefinition, ...]
    fallback: FallbackReason | None = None
    hits: tuple[SearchHit, ...] = ()
    detail: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)


def plan_tool_disclosure(
    tools: Sequence[ToolDefinition] | ToolRegistry,
    *,
    query: str,
    top_k: int = SEARCH_DEFAULT_TOP_K,
    activated: Iterable[str] = (),
    index: ToolSearchIndex | None = None,
    state: ToolActivationState | None = None,
    max_indexed: int | None = None,
) -> ToolDisclosure:
    """Chooses the tools one turn shows; see :func:`disclose_tools`, plus the fallback reason."""
    listed = tool_definitions(tools)
    if isinstance(activated, str | bytes):
        raise TypeError("activated must be a collection of tool names, not a single string")
    if state is not None and not isinstance(state, ToolActivationState):
        raise TypeError(f"state must be a ToolActivationState, got {type(state).__name__}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= SEARCH_MAX_TOP_K:
        raise ValueError(f"top_k must be an int between 1 and {SEARCH_MAX_TOP_K}, got {top_k!r}")
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    everything = tuple(listed)
    if any(tool.name == SEARCH_TOOLS_NAME for tool in listed):
        return ToolDisclosure(
            everything,
            "reserved_name",
            detail=f"an input tool is named {SEARCH_TOOLS_NAME!r}",
        )
    if index is None:
        try:
            index = ToolSearchIndex(listed, max_indexed=max_indexed)
        except ToolSearchCapacityError as err:
            return ToolDisclosure(everything, "index_capacity", detail=str(err))
        except Exception as err:  # fail closed: any build failure shows every tool
            return ToolDisclosure(everything, "index_error", detail=str(err))
    try:
        hits = tuple(index.search(query, top_k))
    except Exception as err:  # fail closed: any search failure shows every tool
        return ToolDisclosure(everything, "search_error", detail=str(err))

    active = state if state is not None else ToolActivationState()
    wanted = {hit.name for hit in hits}
    wanted.update(name for name in activated if isinstance(name, str))
    if state is not None:
        wanted.update(state.names)
    # Input order, never a name outside the input: the index and the state cannot widen the list.
    chosen = [tool for tool in listed if tool.name in wanted]
    search_tool = create_search_tools_tool(
        index, active, descriptions=listed, allowed=(tool.name for tool in listed)
    )
    return ToolDisclosure((*chosen, search_tool), None, hits)


def disclose_tools(
    tools: Sequence[ToolDefinition] | ToolRegistry,
    *,
    query: str,
    top_k: int = SEARCH_DEFAULT_TOP_K,
    activated: Iterable[str] = (),
    index: ToolSearchIndex | None = None,
    state: ToolActivationState | None = None,
    max_indexed: int | None = None,
) -> list[ToolDefinition]:
    """The tools one turn shows: the ``top_k`` hits for ``query`` and the activated tools, in the
    input list's order, then the generated ``search_tools`` tool.

    ``activated`` and ``state`` name tools activated earlier (``state`` also receives what
    ``search_tools`` finds); names not in ``tools`` are ignored. Pass a prebuilt ``index`` over
    the same tools to skip building one per turn. Identical inputs give identical output. When
    the index cannot be built or searched the full input list is returned;
    :func:`plan_tool_disclosure` says why.
    """
    plan = plan_tool_disclosure(
        tools,
        query=query,
        top_k=top_k,
        activated=activated,
        index=index,
        state=state,
        max_indexed=max_indexed,
    )
    return list(plan.tools)


__all__ = [
    "DESCRIPTION_LINE_CHARS",
    "MAX_ACTIVATED",
    "SEARCH_TOOLS_NAME",
    "FallbackReason",
    "ToolActivationState",
    "ToolDisclosure",
    "create_search_tools_tool",
    "disclose_tools",
    "format_search_hits",
    "plan_tool_disclosure",
]
