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
from typing import Any, Final, Literal, cast

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
    create_search_tools_tool,
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
    """What one turn sends and accepts. ``disclosure`` is set in search mode: the hits, or the
    reason every visible tool is sent."""

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
        self._grant_set = frozenset(self.grant_names)
        self._reserved = SEARCH_TOOLS_NAME in self.registered_names
        # The filter of a turn that may call every registered tool. None (no filter, no cost)
        # unless this run generates search_tools: once a turn shows it, it stays in the run's
        # registry, and a turn that does not show it (narrowing showed nothing, or disclosure
        # fell back) must still refuse it.
        self.unscoped_filter: ToolFilter | None = (
            ToolFilter(deny=[SEARCH_TOOLS_NAME])
            if disclosure == "search" and not self._reserved
            else None
        )
        # Everything that depends only on the visible set (its index, its search_tools, its
        # dispatch filter), by visible names. Narrowing usually repeats a subset, so a turn
        # mostly finds its plan here; identical subsets also give identical definitions.
        self._plans: OrderedDict[frozenset[str], _SubsetPlan] = OrderedDict()

    def _visible_names(self, outcome: Any) -> tuple[frozenset[str], tuple[str, ...]]:
        """The names to keep, and those asked for outside the grant (dropped), in order."""
        if isinstance(outcome, str):
            raise TypeError("tool_narrowing must return a collection of tool names, not a string")
        try:
            # Read once: an iterator (a generator) would be empty by the time the dropped names
            # are listed, and the clamped event would silently go missing.
            returned = tuple(outcome)
            asked = frozenset(returned)
        except TypeError as err:
            raise TypeError(
                f"tool_narrowing must return a collection of tool names: {err}"
            ) from None
        outside = asked - self._grant_set
        if not outside:
            return asked, ()
        for name in outside:  # names in the grant are strings already
            if not isinstance(name, str):
                raise TypeError(f"tool_narrowing must return tool names, got {type(name).__name__}")
        dropped = tuple(name for name in dict.fromkeys(returned) if name in outside)
        return asked & self._grant_set, dropped

    def _plan(self, keep: frozenset[str] | None) -> _SubsetPlan:
        key = self._grant_set if keep is None else keep
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        visible = self.grant if keep is None else tuple(t for t in self.grant if t.name in keep)
        plan = _SubsetPlan(self, visible)
        self._plans[key] = plan
        while len(self._plans) > INDEX_CACHE_SIZE:
            self._plans.popitem(last=False)
        return plan

    async def for_turn(self, turn: int, messages: Sequence[Message], query: str) -> TurnTools:
        keep: frozenset[str] | None = None
        dropped: tuple[str, ...] = ()
        if self.narrowing is not None:
            last_assistant = next(
                (
                    message.content
                    for message in reversed(messages)
                    if message.role == "assistant" and isinstance(message.content, str)
                ),
                None,
            )
            outcome = self.narrowing(NarrowingContext(turn, last_assistant, self.grant_names))
            if inspect.isawaitable(outcome):
                outcome = await outcome
            keep, dropped = self._visible_names(outcome)
        plan = self._plan(keep)
        if self.disclosure != "search" or plan.fallback is not None or not plan.visible:
            return TurnTools(
                plan.visible, plan.callable_names, plan.dispatch_filter, dropped, plan.fallback
            )
        try:
            hits = tuple(plan.index.search(query, self.top_k))  # type: ignore[union-attr]
        except Exception as err:  # fail closed: show every visible tool
            failed = ToolDisclosure(plan.visible, "search_error", detail=str(err))
            return TurnTools(
                plan.visible, plan.callable_names, plan.dispatch_filter, dropped, failed
            )
        positions = plan.positions
        chosen = {positions[hit.name] for hit in hits}
        chosen.update(positions[name] for name in self.activation.names if name in positions)
        search_tool = cast(ToolDefinition, plan.search_tool)  # built with every index
        sent = (*(plan.visible[i] for i in sorted(chosen)), search_tool)
        disclosure = ToolDisclosure(sent, None, hits)
        return TurnTools(sent, plan.search_callable, plan.search_filter, dropped, disclosure)


class _SubsetPlan:
    """What one visible set needs, built once: its index and search tool, its filters."""

    def __init__(self, scope: RunScope, visible: tuple[ToolDefinition, ...]) -> None:
        self.visible = visible
        names = tuple(tool.name for tool in visible)
        self.positions = {name: position for position, name in enumerate(names)}
        callable_names = scope.grant_names if scope.allow_hidden else names
        self.callable_names = callable_names
        narrowed = scope.narrowing is not None and not scope.allow_hidden
        self.dispatch_filter: ToolFilter | None = (
            scope.unscoped_filter
            if scope.granted_everything and not narrowed
            else closed_filter(callable_names, scope.registered_names)
        )
        self.fallback: ToolDisclosure | None = None
        self.index: ToolSearchIndex | None = None
        self.search_tool: ToolDefinition | None = None
        self.search_callable: tuple[str, ...] = callable_names
        self.search_filter: ToolFilter | None = self.dispatch_filter
        if scope.disclosure != "search" or not visible:
            return
        if scope._reserved:
            # A host tool owns the name; the generated one would shadow it.
            self.fallback = ToolDisclosure(
                visible, "reserved_name", detail=f"a tool is named {SEARCH_TOOLS_NAME!r}"
            )
            return
        try:
            self.index = ToolSearchIndex(visible)
        except ToolSearchCapacityError as err:
            self.fallback = ToolDisclosure(visible, "index_capacity", detail=str(err))
            return
        except Exception as err:  # fail closed: show every visible tool
            self.fallback = ToolDisclosure(visible, "index_error", detail=str(err))
            return
        self.search_tool = create_search_tools_tool(
            self.index, scope.activation, descriptions=visible, allowed=names
        )
        # The generated search_tools is callable on the turns that show it.
        self.search_callable = (*callable_names, SEARCH_TOOLS_NAME)
        self.search_filter = closed_filter(self.search_callable, scope.registered_names)


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
