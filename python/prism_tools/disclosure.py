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
from typing import Final, Literal, NamedTuple

from prism_tools import _json
from prism_tools._core import (
    SEARCH_DEFAULT_TOP_K,
    SEARCH_MAX_INDEXED_CEILING,
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


def _one_line(text: str, limit: int) -> str:
    """The first line of ``text``, whitespace and control characters collapsed, cut to
    ``limit``."""
    text = text.strip().split("\n", 1)[0]
    cleaned = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    if len(cleaned) <= limit:
        return cleaned
    return cleaned[: limit - 1].rstrip() + "…"


def _json_escape(ch: str) -> str:
    """``ch`` as a JSON ``\\uXXXX`` escape (a surrogate pair beyond the BMP)."""
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _listed_name(name: str) -> str:
    """``name`` as ``search_tools`` prints it: whole, never cut, and never like another name.

    A name with no whitespace, no ``"`` or ``\\`` and no invisible character is printed as it
    is; any other is printed as a JSON string with every invisible character escaped, so the
    model reads back the exact name to call (``"report\\tweekly"``, not ``report weekly``).
    """
    if name.isprintable() and not any(ch.isspace() or ch in '"\\' for ch in name):
        return name
    quoted = json.dumps(name, ensure_ascii=False)
    return "".join(ch if ch.isprintable() else _json_escape(ch) for ch in quoted)


def format_search_hits(hits: Sequence[SearchHit], descriptions: Mapping[str, str]) -> str:
    """The inert text ``search_tools`` returns: ``name: description [matched: words]`` lines."""
    lines = []
    for hit in hits:
        description = _one_line(descriptions.get(hit.name, ""), DESCRIPTION_LINE_CHARS)
        matched = ", ".join(hit.matched)
        lines.append(f"{_listed_name(hit.name)}: {description} [matched: {matched}]")
    return "\n".join(lines)


class _Described(NamedTuple):
    """What an index reads of a tool."""

    name: str
    description: str


class _ListedSearch:
    """Searches ``index`` for the tools of one input list only.

    An index over exactly the list answers with one search, as it always did. A prebuilt index
    over a wider list may rank tools outside the list first; those must neither show nor use up
    ``k``. So it is asked for its best ``SEARCH_MAX_TOP_K`` and the first ``k`` in the list are
    kept; when those do not hold ``k`` of the list's tools while more may rank lower, the search
    runs over an index of the list alone, built on first need and kept.
    """

    __slots__ = ("_index", "_listed", "_own", "_permitted", "_texts")

    def __init__(
        self, index: ToolSearchIndex, listed: Iterable[str] | None, texts: Mapping[str, str]
    ) -> None:
        self._index = index
        self._listed = None if listed is None else tuple(listed)
        self._permitted = None if self._listed is None else frozenset(self._listed)
        self._texts = texts
        self._own: ToolSearchIndex | None = None

    def search(self, query: str, k: int) -> list[SearchHit]:
        """The best ``k`` hits for ``query`` among the listed tools, best first."""
        hits = self._index.search(query, k)
        permitted = self._permitted
        if permitted is None or all(hit.name in permitted for hit in hits):
            return hits
        if len(hits) == k < SEARCH_MAX_TOP_K:  # fewer than k hits would mean no more matches
            hits = self._index.search(query, SEARCH_MAX_TOP_K)
        kept = [hit for hit in hits if hit.name in permitted]
        if len(kept) >= k or len(hits) < SEARCH_MAX_TOP_K:
            return kept[:k]  # the window held k of the list's tools, or every match there is
        return self._own_index().search(query, k)

    def _own_index(self) -> ToolSearchIndex:
        if self._own is None:
            listed = tuple(dict.fromkeys(self._listed or ()))
            self._own = ToolSearchIndex(
                [_Described(name, self._texts.get(name, "")) for name in listed],
                max_indexed=max(1, min(len(listed), SEARCH_MAX_INDEXED_CEILING)),
                max_query_bytes=self._index.max_query_bytes,
            )
        return self._own


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
    ``allowed``, when given, is the only names it ever returns (an index shared with a wider
    list): hits outside them are dropped before ``k`` is counted, never after.
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
    return _search_tools_tool(_ListedSearch(index, allowed, texts), state, texts, default_k)


def _search_tools_tool(
    searcher: _ListedSearch,
    state: ToolActivationState,
    texts: Mapping[str, str],
    default_k: int,
) -> ToolDefinition:
    def search_tools(args: dict[str, JSONValue], context: ToolExecutionContext) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("search_tools needs a non-empty string 'query'")
        k = args.get("k", default_k)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= SEARCH_MAX_TOP_K:
            raise ValueError(f"search_tools 'k' must be an integer from 1 to {SEARCH_MAX_TOP_K}")
        hits = searcher.search(query, k)
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
    texts = {tool.name: tool.description for tool in listed}
    # Only the input list's tools, ranked before top_k is taken: a prebuilt index over a wider
    # list can neither show nor crowd out anything (the search_tools below shares it).
    searcher = _ListedSearch(index, texts.keys(), texts)
    try:
        hits = tuple(searcher.search(query, top_k))
    except Exception as err:  # fail closed: any search failure shows every tool
        return ToolDisclosure(everything, "search_error", detail=str(err))

    active = state if state is not None else ToolActivationState()
    wanted = {hit.name for hit in hits}
    wanted.update(name for name in activated if isinstance(name, str))
    if state is not None:
        wanted.update(state.names)
    # Input order, never a name outside the input: the index and the state cannot widen the list.
    chosen = [tool for tool in listed if tool.name in wanted]
    search_tool = _search_tools_tool(searcher, active, texts, SEARCH_DEFAULT_TOP_K)
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
