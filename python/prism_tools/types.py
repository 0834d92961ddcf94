"""The values that cross the harness: tools, calls, results, errors, contexts, records, events.

All are frozen, slotted dataclasses. Anything that goes into an event or a ledger row turns into
plain JSON-ready data with ``to_dict()``; fields left ``None`` are omitted there, as the wire
format has no use for them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from prism_tools import _json
from prism_tools._frozen import fast_init
from prism_tools._json import (
    CIRCULAR_MARKER,
    MAX_DEPTH_MARKER,
    UNPRINTABLE_MARKER,
    WRITER_MAX_DEPTH,
    text_of,
)

if TYPE_CHECKING:
    import asyncio

    from prism_tools.identity import AgentIdentity

JSONValue: TypeAlias = Any
"""Any value that serializes to JSON (dicts with string keys, lists, strings, numbers, ...)."""

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
TOOL_KINDS: frozenset[str] = frozenset(
    (
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    )
)

BlockedReason = Literal[
    "unknown_tool",
    "tool_denied",
    "invalid_arguments",
    "permission_denied",
    "validation_failed",
    "execution_denied",
    "guardrail_blocked",
]
BLOCKED_REASONS: tuple[BlockedReason, ...] = (
    "unknown_tool",
    "tool_denied",
    "invalid_arguments",
    "permission_denied",
    "validation_failed",
    "execution_denied",
    "guardrail_blocked",
)

LedgerStatus = Literal["started", "finished", "error", "blocked"]


# A walk that runs out of stack also gives the depth marker: only a chain of ``to_dict`` calls
# can, since each starts a walk (and a depth count) of its own.
# Values of exactly these types come back as they are; an exact type check is much cheaper than
# the ``to_dict`` lookup and ``Mapping`` check every other value needs.
_PLAIN_SCALARS: frozenset[type] = frozenset((str, int, float, bool, type(None)))
_SEQUENCES = (list, tuple, set, frozenset)


class _TooDeep(Exception):
    """The fast walk reached the depth limit: the value is deep or holds a cycle."""


def to_plain(value: Any) -> JSONValue:
    """Turn harness values into plain JSON-ready data (dicts, lists, strings, numbers).

    Never raises on deep or cyclic values: a container nested past 254 levels (more than JSON
    can be written with) becomes ``"[MaxDepth]"`` and one that contains itself
    ``"[Circular]"``, the markers of the lenient JSON writer.
    """
    if type(value) in _PLAIN_SCALARS:
        return value
    try:
        try:
            return _plain_fast(value, 0)
        except _TooDeep:
            # Start over with cycle tracking: shallow values, the usual case, never pay for it.
            return _plain_guarded(value, 0, set())
    except RecursionError:
        return MAX_DEPTH_MARKER


def _plain_fast(value: Any, depth: int) -> JSONValue:
    kind = type(value)
    if kind is dict:  # exact dicts and lists cannot have a to_dict: skip the lookup
        is_mapping = True
    elif kind is list:
        is_mapping = False
    else:
        to_dict = getattr(value, "to_dict", None)
        if to_dict is not None and not isinstance(value, type):
            if depth >= WRITER_MAX_DEPTH:
                raise _TooDeep
            return _converted(value, to_dict)
        is_mapping = isinstance(value, Mapping)
        if not is_mapping and not isinstance(value, _SEQUENCES):
            return value
    if depth >= WRITER_MAX_DEPTH:
        raise _TooDeep
    depth += 1
    # Loops, not comprehensions (frames of their own before Python 3.12): one frame a level and
    # faster on small containers. Scalars skip the call.
    if is_mapping:
        out = {}
        for key, item in value.items():
            out[key if isinstance(key, str) else text_of(key)] = (
                item if type(item) in _PLAIN_SCALARS else _plain_fast(item, depth)
            )
        return out
    items = []
    for item in value:
        items.append(item if type(item) in _PLAIN_SCALARS else _plain_fast(item, depth))  # noqa: PERF401
    return items


def _converted(value: Any, to_dict: Callable[[], Any]) -> Any:
    # A host object's to_dict may raise; its error is not shown (it may quote what it holds).
    try:
        return to_dict()
    except RecursionError:
        raise  # a to_dict that reaches itself: cut where the walk is, as any deep value is
    except Exception:
        return UNPRINTABLE_MARKER.format(type(value).__name__)


def _plain_guarded(value: Any, depth: int, ancestors: set[int]) -> JSONValue:
    """``_plain_fast`` with the lenient writer's bounds: markers instead of raising."""
    if type(value) in _PLAIN_SCALARS:
        return value
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None and not isinstance(value, type):
        return MAX_DEPTH_MARKER if depth >= WRITER_MAX_DEPTH else _converted(value, to_dict)
    is_mapping = isinstance(value, Mapping)
    if not is_mapping and not isinstance(value, _SEQUENCES):
        return value
    if depth >= WRITER_MAX_DEPTH:
        return MAX_DEPTH_MARKER
    marker = id(value)
    if marker in ancestors:
        return CIRCULAR_MARKER
    ancestors.add(marker)
    depth += 1
    plain: JSONValue
    if is_mapping:
        plain = {}
        for key, item in value.items():
            plain[key if isinstance(key, str) else text_of(key)] = _plain_guarded(
                item, depth, ancestors
            )
    else:
        plain = []
        for item in value:
            plain.append(_plain_guarded(item, depth, ancestors))
    ancestors.discard(marker)
    return plain


def to_json(value: Any) -> bytes:
    """Compact JSON bytes for any harness value (``to_dict`` first, then orjson)."""
    return _json.dumps_lenient(to_plain(value))


def _compact(instance: Any, skip: frozenset[str] = frozenset()) -> dict[str, JSONValue]:
    out: dict[str, JSONValue] = {}
    for field in fields(instance):
        if field.name in skip:
            continue
        item = getattr(instance, field.name)
        if item is not None:
            out[field.name] = to_plain(item)
    return out


@fast_init
@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What went wrong, in words a model can act on. ``code`` is stable; ``message`` is prose."""

    message: str
    code: str | int | None = None
    name: str | None = None
    details: JSONValue = None

    def to_dict(self) -> dict[str, JSONValue]:
        return _compact(self)

    @classmethod
    def from_dict(cls, data: Any) -> ErrorInfo:
        """The inverse of ``to_dict``; anything without a string ``message``, with a ``code``
        that is not a string or an integer (an HTTP status, say), or a ``name`` that is not a
        string, is a ``ValueError``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("message"), str):
            raise ValueError("a stored error needs a string 'message'")
        code, name = data.get("code"), data.get("name")
        code_read = code is None or type(code) is str or type(code) is int
        if not code_read or not isinstance(name, str | None):
            raise ValueError(
                "a stored error's 'code' must be a string, an integer or null, "
                "and its 'name' a string or null"
            )
        return cls(data["message"], code, name, data.get("details"))


@fast_init
@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call requested by a model (or a host).

    ``arguments`` should be a JSON object (a ``dict``); anything else is blocked with
    ``invalid_arguments``. ``arguments_error`` is set by provider adapters when the model's
    argument text was not valid JSON; dispatch then blocks with that error verbatim.
    """

    id: str
    name: str
    arguments: JSONValue
    arguments_error: ErrorInfo | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return _compact(self)


@fast_init
@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call: a ``value`` on success, an ``error`` when blocked or failed."""

    tool_call_id: str
    name: str
    value: JSONValue = None
    content: JSONValue = None
    error: ErrorInfo | None = None
    metadata: Mapping[str, JSONValue] | None = None

    @property
    def ok(self) -> bool:
        """True when the call ran and returned without an error."""
        return self.error is None

    def to_dict(self) -> dict[str, JSONValue]:
        return _compact(self)

    @classmethod
    def from_dict(cls, data: Any) -> ToolResult:
        """The inverse of ``to_dict`` (for stored results); malformed data is a ``ValueError``."""
        if not isinstance(data, Mapping):
            raise ValueError("a stored tool result must be an object")
        call_id, name, error = data.get("tool_call_id"), data.get("name"), data.get("error")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise ValueError("a stored tool result needs string 'tool_call_id' and 'name'")
        if not isinstance(data.get("metadata"), Mapping | None):
            raise ValueError("a stored tool result's 'metadata' must be an object or null")
        return cls(
            call_id,
            name,
            data.get("value"),
            data.get("content"),
            None if error is None else ErrorInfo.from_dict(error),
            data.get("metadata"),
        )


ProgressCallback: TypeAlias = Callable[[JSONValue, "Mapping[str, JSONValue] | None"], Any]
"""Host progress sink: ``(value, metadata)``, sync or async."""


async def ignore_progress(
    value: JSONValue = None, metadata: Mapping[str, JSONValue] | None = None
) -> None:
    """The default progress sink: accepts every report and does nothing with it."""


@fast_init
@dataclass(frozen=True, slots=True)
class ToolExecutionContext:
    """Where a call runs: ids, cancellation, host metadata, a progress sink and an identity.

    A tool reports progress with ``await context.progress(value, metadata)``. Inside dispatch the
    sink is wrapped so every report also becomes an event and a ledger row.
    """

    session_id: str
    run_id: str
    tool_call_id: str
    signal: asyncio.Event | None = None
    metadata: Mapping[str, JSONValue] | None = None
    progress: Callable[..., Any] = ignore_progress
    identity: AgentIdentity | None = None
    idempotency_key: str | None = None


ToolExecute: TypeAlias = Callable[[dict[str, JSONValue], ToolExecutionContext], Any]
"""``execute(args, context)``: sync or async; returns a ``ToolResult`` or any value."""


# weakref_slot: caches keyed by definition (the provider payloads) refer to it weakly, so a
# definition a host (or a run's search disclosure) drops is freed, not kept by the cache.
@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class ToolDefinition:
    """A tool a host offers to an agent.

    ``parameters`` is a JSON Schema for the arguments object, passed through untouched.
    ``exclusive`` tools never run in parallel with others. ``effect`` declares side effects for
    recoverable dispatch. Equality is identity: two definitions are the same tool only if they
    are the same object.
    """

    name: str
    execute: ToolExecute | None = None
    description: str = ""
    parameters: Mapping[str, JSONValue] | None = None
    exclusive: bool = False
    effect: Any = None
    kind: ToolKind | None = None
    metadata: Mapping[str, JSONValue] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"ToolDefinition.name must be a string, got {type(self.name).__name__}")
        if not self.name:
            raise ValueError("ToolDefinition.name must not be empty")
        if _json.holds_lone_surrogate(self.name):
            raise ValueError(
                f"ToolDefinition.name {self.name!r} holds a lone surrogate, "
                "which is not Unicode text"
            )
        if self.execute is not None and not callable(self.execute):
            raise TypeError(f"ToolDefinition.execute for {self.name!r} must be callable")
        if not isinstance(self.description, str):
            raise TypeError(f"ToolDefinition.description for {self.name!r} must be a string")
        if _json.holds_lone_surrogate(self.description):
            raise ValueError(
                f"ToolDefinition.description for {self.name!r} holds a lone surrogate, "
                "which is not Unicode text"
            )
        if self.parameters is not None and not isinstance(self.parameters, Mapping):
            raise TypeError(
                f"ToolDefinition.parameters for {self.name!r} must be a mapping or None"
            )
        if self.kind is not None and self.kind not in TOOL_KINDS:
            raise ValueError(
                f"ToolDefinition.kind for {self.name!r} must be one of {sorted(TOOL_KINDS)}"
            )

    @property
    def is_async(self) -> bool:
        """True when ``execute`` is a coroutine function."""
        return inspect.iscoroutinefunction(self.execute)

    def to_dict(self) -> dict[str, JSONValue]:
        """The tool's public description (no callable)."""
        return _compact(self, frozenset(("execute", "effect")))


def items_of(value: Any, kind: type | None, name: str) -> tuple[Any, ...]:
    """``value`` as a tuple, refused with a ``TypeError`` naming ``name`` unless it is a sequence
    (a string, bytes, a mapping or a single ``kind`` is not one) whose items are all ``kind``
    (any items when ``kind`` is None)."""
    expected = "a sequence" if kind is None else f"a sequence of {kind.__name__}"
    if isinstance(value, str | bytes | Mapping) or (kind is not None and isinstance(value, kind)):
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__}")
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__}") from None
    if kind is not None:
        for position, item in enumerate(items):
            if not isinstance(item, kind):
                raise TypeError(
                    f"{name} must hold {kind.__name__} objects; "
                    f"item {position} is a {type(item).__name__}"
                )
    return items


def tool_definitions(tools: Iterable[ToolDefinition], what: str = "tools") -> list[ToolDefinition]:
    """``tools`` as a list; a ``TypeError`` naming ``what`` for anything that is not a collection
    of ``ToolDefinition`` (a single tool, a string, an item of another kind)."""
    if isinstance(tools, ToolDefinition | str | bytes):
        raise TypeError(
            f"{what} must be a collection of ToolDefinition, not a single {type(tools).__name__}"
        )
    try:
        listed = list(tools)
    except TypeError:
        raise TypeError(
            f"{what} must be a collection of ToolDefinition, got {type(tools).__name__}"
        ) from None
    for position, tool in enumerate(listed):
        if not isinstance(tool, ToolDefinition):
            raise TypeError(
                f"{what} must be ToolDefinitions; item {position} is a {type(tool).__name__}"
            )
    return listed


@fast_init
@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One ledger row: a lifecycle transition of one tool call."""

    id: str
    session_id: str
    run_id: str
    tool_call_id: str
    name: str
    arguments: JSONValue
    status: LedgerStatus
    started_at: str
    redacted: bool = False
    entry_id: str | None = None
    tenant_id: str | None = None
    account_id: str | None = None
    user_id: str | None = None
    finished_at: str | None = None
    result: ToolResult | None = None
    reason: str | None = None
    progress: JSONValue = None
    progress_metadata: Mapping[str, JSONValue] | None = None
    progress_at: str | None = None
    metadata: Mapping[str, JSONValue] | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        return _compact(self)


EventType: TypeAlias = str
"""``tool_execution_started|progress|finished|error|blocked``, ``guardrail_decision``,
``extension_error``; later layers add their own."""


@fast_init
@dataclass(frozen=True, slots=True)
class AgentEvent:
    """A lifecycle event. Fields not used by an event type stay ``None``; ``data`` holds the
    fields of event types that have no attribute of their own."""

    type: EventType
    session_id: str | None = None
    run_id: str | None = None
    tool_call_id: str | None = None
    name: str | None = None
    call: ToolCall | None = None
    result: ToolResult | None = None
    error: ErrorInfo | None = None
    reason: str | None = None
    progress: JSONValue = None
    metadata: Mapping[str, JSONValue] | None = None
    tool_name: str | None = None
    record: Any = None
    data: Mapping[str, JSONValue] | None = None

    @property
    def subject_call_id(self) -> str | None:
        """The tool call this event is about, wherever the event type keeps it."""
        for holder in (self.call, self.result):
            if holder is not None:
                return holder.id if isinstance(holder, ToolCall) else holder.tool_call_id
        return self.tool_call_id

    @property
    def subject_name(self) -> str | None:
        """The tool this event is about, wherever the event type keeps it."""
        for holder in (self.call, self.result):
            if holder is not None:
                return holder.name
        return self.name if self.name is not None else self.tool_name

    def to_dict(self) -> dict[str, JSONValue]:
        out = _compact(self, frozenset(("data",)))
        if self.data:
            for key, item in self.data.items():
                out.setdefault(key, to_plain(item))
        return out


EventSink: TypeAlias = Callable[[AgentEvent], "Awaitable[None] | None"]


class SupportsToDict(Protocol):
    def to_dict(self) -> dict[str, JSONValue]: ...
