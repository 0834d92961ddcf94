"""Which tools a run may use, and which of them each turn shows the model.

Three layers, each only ever narrowing the one before:

1. The **grant** (``session.run(tool_names=...)``): the registered tools this run may call,
   snapshotted once in registry order. A call to a registered tool outside it is ``tool_denied``.
2. **Narrowing** (``tool_narrowing=``): a callback that picks, before each provider turn, the
   granted tools to show; names outside the grant are dropped (and reported). A call to a granted
   tool hidden this turn is ``tool_denied`` unless ``allow_hidden_tool_calls``.
3. **Disclosure** (``tools_disclosure="search"``): of the visible tools, the top-k for the turn's
   text, the tools the model activated with ``search_tools``, and ``search_tools`` itself.
   Disclosure decides what is *described*; it grants nothing.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from prism_tools._core import (
    SEARCH_MAX_TOP_K,
    ToolFilter,
    ToolSearchCapacityError,
    ToolSearchIndex,
)
from prism_tools.disclosure import (
    SEARCH_TOOLS_NAME,
    ToolActivationState,
    ToolDisclosure,
    plan_tool_disclosure,
)
from prism_tools.errors import ToolScopeError
from prism_tools.messages import Message, Usage
from prism_tools.types import JSONValue, ToolDefinition

ToolsDisclosure = Literal["all", "search"]
DISCLOSURE_MODES: Final = ("all", "search")
DEFAULT_SEARCH_TOP_K: Final = 16
INDEX_CACHE_SIZE: Final = 8
"""Search indexes a run keeps, one per distinct visible set (narrowing may vary it per turn)."""


@dataclass(frozen=True, slots=True)
class NarrowingContext:
    """What a narrowing callback sees before a provider turn."""

    turn: int
    last_assistant_text: str | None
    tool_ids: tuple[str, ...]


Narrowing = Callable[[NarrowingContext], "Iterable[str] | Awaitable[Iterable[str]]"]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One provider turn: the tools sent (count and a hash of their names), what came back."""

    turn: int
    tools: Mapping[str, JSONValue]
    tool_calls: int = 0
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)


def tools_hash(names: Sequence[str]) -> str:
    """Lowercase hex SHA-256 of the tool names in request order, joined with newlines."""
    return hashlib.sha256("\n".join(names).encode("utf-8", "surrogatepass")).hexdigest()


def tools_metadata(names: Sequence[str]) -> dict[str, JSONValue]:
    return {"count": len(names), "ids_hash": tools_hash(names)}


def read_disclosure(value: Any) -> ToolsDisclosure:
    if value not in DISCLOSURE_MODES:
        raise ValueError(f"tools_disclosure must be one of {DISCLOSURE_MODES}, got {value!r}")
    return value  # type: ignore[no-any-return]


def read_search_top_k(value: Mapping[str, Any] | None) -> int:
    """``tools_search={"top_k": n}``; ``n`` is clamped to 1..64."""
    if value is None:
        return DEFAULT_SEARCH_TOP_K
    if not isinstance(value, Mapping):
        raise TypeError("tools_search must be a mapping like {'top_k': 16}")
    unknown = set(value) - {"top_k"}
    if unknown:
        raise TypeError(f"unknown tools_search options: {', '.join(sorted(map(str, unknown)))}")
    top_k = value.get("top_k", DEFAULT_SEARCH_TOP_K)
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise TypeError("tools_search top_k must be an integer")
    return max(1, min(SEARCH_MAX_TOP_K, top_k))


def resolve_grant(
    registered: Sequence[ToolDefinition],
    requested: Iterable[str] | None,
    *,
    strict: bool,
) -> tuple[ToolDefinition, ...]:
    """The granted definitions in registry order. ``strict``: a requested name that is not
    registered fails the run (``ToolScopeError``); otherwise it is dropped (a resumed grant
    shrinks to what is registered now)."""
    if requested is None:
        return tuple(registered)
    if isinstance(requested, str):
        raise TypeError("tool_names must be a collection of tool names, not a single string")
    wanted = list(dict.fromkeys(requested))
    for name in wanted:
        if not isinstance(name, str):
            raise TypeError(f"tool_names must be strings, got {type(name).__name__}")
    known = {tool.name for tool in registered}
    missing = [name for name in wanted if name not in known]
    if missing and strict:
        raise ToolScopeError(f"Tools not registered: {', '.join(missing)}")
    chosen = set(wanted)
    return tuple(tool for tool in registered if tool.name in chosen)


def closed_filter(allowed: Sequence[str], everything: Iterable[str]) -> ToolFilter:
    """A filter that passes exactly ``allowed`` (an empty allow list would pass everything)."""
    if allowed:
        return ToolFilter(allow=list(allowed))
    return ToolFilter(deny=[*everything, SEARCH_TOOLS_NAME])


@dataclass
class TurnTools:
    """What one turn sends and accepts."""

    sent: tuple[ToolDefinition, ...]
    callable_names: tuple[str, ...]
    dispatch_filter: ToolFilter | None
    clamped: tuple[str, ...] = ()
    disclosure: ToolDisclosure | None = None


class RunScope:
    """The grant of one run and the per-turn narrowing and disclosure over it."""

    def __init__(
        self,
        registered: Sequence[ToolDefinition],
        grant: tuple[ToolDefinition, ...],
        *,
        granted_everything: bool,
        narrowing: Narrowing | None,
        disclosure: ToolsDisclosure,
        top_k: int,
        allow_hidden: bool,
        activation: ToolActivationState,
    ) -> None:
        self.registered_names = tuple(tool.name for tool in registered)
        self.grant = grant
        self.grant_names = tuple(tool.name for tool in grant)
        self.granted_everything = granted_everything
        self.narrowing = narrowing
        self.disclosure = disclosure
        self.top_k = top_k
        self.allow_hidden = allow_hidden
        self.activation = activation
        # Indexes by the visible names they cover: the whole grant, or a narrowed subset (so the
        # top k are the best *visible* tools). Identical consecutive subsets reuse theirs.
        self._indexes: OrderedDict[tuple[str, ...], ToolSearchIndex | ToolDisclosure] = (
            OrderedDict()
        )

    def index_for(self, visible: tuple[ToolDefinition, ...]) -> ToolSearchIndex | ToolDisclosure:
        """The index over ``visible``, or the fallback disclosure when it cannot be built."""
        key = tuple(tool.name for tool in visible)
        found = self._indexes.get(key)
        if found is not None:
            self._indexes.move_to_end(key)
            return found
        built: ToolSearchIndex | ToolDisclosure
        try:
            built = ToolSearchIndex(visible)
        except ToolSearchCapacityError as err:
            built = ToolDisclosure(visible, "index_capacity", detail=str(err))
        except Exception as err:  # fail closed: show every visible tool
            built = ToolDisclosure(visible, "index_error", detail=str(err))
        self._indexes[key] = built
        while len(self._indexes) > INDEX_CACHE_SIZE:
            self._indexes.popitem(last=False)
        return built

    async def visible(
        self, turn: int, last_assistant_text: str | None
    ) -> tuple[tuple[ToolDefinition, ...], tuple[str, ...]]:
        """The granted tools to show this turn, and the names the callback asked for outside
        the grant (dropped)."""
        if self.narrowing is None:
            return self.grant, ()
        outcome = self.narrowing(NarrowingContext(turn, last_assistant_text, self.grant_names))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if isinstance(outcome, str):
            raise TypeError("tool_narrowing must return a collection of tool names, not a string")
        names = list(dict.fromkeys(outcome))
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"tool_narrowing must return tool names, got {type(name).__name__}")
        granted = set(self.grant_names)
        dropped = tuple(name for name in names if name not in granted)
        keep = set(names)
        return tuple(tool for tool in self.grant if tool.name in keep), dropped

    async def for_turn(self, turn: int, messages: Sequence[Message], query: str) -> TurnTools:
        last_assistant = next(
            (
                message.content
                for message in reversed(messages)
                if message.role == "assistant" and isinstance(message.content, str)
            ),
            None,
        )
        visible, dropped = await self.visible(turn, last_assistant)
        visible_names = tuple(tool.name for tool in visible)
        disclosure: ToolDisclosure | None = None
        sent = visible
        if self.disclosure == "search" and visible:
            if SEARCH_TOOLS_NAME in self.registered_names:
                # A host tool owns the name; the generated one would shadow it.
                disclosure = ToolDisclosure(
                    visible, "reserved_name", detail=f"a tool is named {SEARCH_TOOLS_NAME!r}"
                )
            else:
                index = self.index_for(visible)
                if isinstance(index, ToolDisclosure):
                    disclosure = index
                else:
                    disclosure = plan_tool_disclosure(
                        list(visible),
                        query=query,
                        top_k=self.top_k,
                        index=index,
                        state=self.activation,
                    )
            sent = disclosure.tools
        callable_names = self.grant_names if self.allow_hidden else visible_names
        if disclosure is not None and disclosure.fallback is None:
            # The generated search_tools is callable on the turn that shows it.
            callable_names = (*callable_names, SEARCH_TOOLS_NAME)
        narrowed = self.narrowing is not None and not self.allow_hidden
        if self.granted_everything and not narrowed and SEARCH_TOOLS_NAME not in callable_names:
            dispatch_filter = None
        else:
            dispatch_filter = closed_filter(callable_names, self.registered_names)
        return TurnTools(sent, callable_names, dispatch_filter, dropped, disclosure)


__all__ = [
    "DEFAULT_SEARCH_TOP_K",
    "DISCLOSURE_MODES",
    "Narrowing",
    "NarrowingContext",
    "RunScope",
    "ToolsDisclosure",
    "TurnRecord",
    "TurnTools",
    "closed_filter",
    "read_disclosure",
    "read_search_top_k",
    "resolve_grant",
    "tools_hash",
    "tools_metadata",
]
