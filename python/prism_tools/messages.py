"""The transcript and the provider contract of the agent runtime.

A ``Provider`` turns one ``ProviderRequest`` (model, transcript, the tools visible this turn) into
one ``ProviderResponse`` (assistant text, complete tool calls, usage, finish reason). Adapters in
:mod:`prism_tools.providers` map these to the OpenAI Chat Completions and Anthropic Messages
formats; ``ScriptedProvider`` replays fixed responses for tests and the demo.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable

from prism_tools._frozen import builder, fast_init
from prism_tools._json import holds_lone_surrogate, replace_lone_surrogates
from prism_tools.types import ErrorInfo, JSONValue, ToolCall, ToolDefinition, items_of

Role = Literal["user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("user", "assistant", "tool"))


@fast_init
@dataclass(frozen=True, slots=True)
class Message:
    """One transcript entry.

    ``user``: ``content`` is the text. ``assistant``: ``content`` is the text (may be empty) and
    ``tool_calls`` the calls it asked for. ``tool``: one per tool call, with ``tool_call_id``,
    ``name``, the result value in ``content`` and the ``ErrorInfo`` in ``error`` when the call
    was blocked or failed.
    """

    role: Role
    content: JSONValue = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    error: ErrorInfo | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Message.role must be one of {sorted(ROLES)}, got {self.role!r}")
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one provider turn consumed (zeros when the provider does not say)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "turn_limit", "error"]


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One turn's request: the transcript so far and the tools visible this turn."""

    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...]
    metadata: Mapping[str, JSONValue] | None = None
    instructions: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderResponse:
    """One turn's answer: text, complete tool calls (in the model's order), usage, finish reason.

    A tool call whose argument text was not valid JSON carries it as ``arguments`` text with
    ``arguments_error`` set; dispatch blocks it with ``invalid_json_arguments`` and the model
    sees the error on its next turn.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def __post_init__(self) -> None:
        # A host's own provider builds these: a field of the wrong kind is refused here, where
        # the provider can be named, rather than dropped or failing later in the loop. None
        # stands for "nothing" in text, tool_calls and usage, as several SDKs write it.
        if self.text is None:
            object.__setattr__(self, "text", "")
        elif not isinstance(self.text, str):
            raise TypeError(_wrong_field("text", "a string", self.text))
        calls = () if self.tool_calls is None else self.tool_calls
        calls = items_of(calls, ToolCall, "ProviderResponse.tool_calls")
        object.__setattr__(self, "tool_calls", _identified_calls(calls))
        if self.usage is None:
            object.__setattr__(self, "usage", Usage())
        elif not isinstance(self.usage, Usage):
            raise TypeError(_wrong_field("usage", "a Usage", self.usage))
        if self.finish_reason is not None and not isinstance(self.finish_reason, str):
            raise TypeError(_wrong_field("finish_reason", "a string or None", self.finish_reason))


def fallback_call_id(position: int, taken: set[str]) -> str:
    """An id for the call at ``position`` of a turn that came without one: ``call_<position>``,
    suffixed until no call of the turn has it."""
    candidate = f"call_{position}"
    suffix = 0
    while candidate in taken:
        suffix += 1
        candidate = f"call_{position}_{suffix}"
    return candidate


def _identified_calls(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """``calls`` with ids unique within the turn. A call with no id (None or empty) gets a
    fallback id, as the provider adapters give one. Rows, approvals and effect claims are keyed
    by call id, so two calls sharing one would be taken for one call."""
    taken: set[str] = set()
    without_id: list[int] = []
    # A str subclass id is kept as its plain text: its own hash and equality (by identity,
    # say) would let two calls share an id here and be refused only when the state is read.
    retyped: dict[int, str] = {}
    for position, call in enumerate(calls):
        call_id = call.id
        if call_id is None or (isinstance(call_id, str) and not call_id):
            without_id.append(position)
        elif not isinstance(call_id, str):
            raise TypeError(
                f"ProviderResponse.tool_calls: item {position} has an id of type "
                f"{type(call_id).__name__}, not a string"
            )
        else:
            if type(call_id) is not str:
                call_id = retyped[position] = str.__str__(call_id)
            if call_id in taken:
                raise ValueError(f"two tool calls in one turn share the id {call_id!r}")
            taken.add(call_id)
        # The rest of a call is kept in the session's state, which must read back: a name is
        # text, an argument error an ErrorInfo.
        if not isinstance(call.name, str):
            raise TypeError(
                f"ProviderResponse.tool_calls: item {position} has a name of type "
                f"{type(call.name).__name__}, not a string"
            )
        if call.arguments_error is not None and not isinstance(call.arguments_error, ErrorInfo):
            raise TypeError(
                f"ProviderResponse.tool_calls: item {position} has an arguments_error of type "
                f"{type(call.arguments_error).__name__}, not an ErrorInfo"
            )
    if not without_id and not retyped:
        return calls
    identified = list(calls)
    for position, call_id in retyped.items():
        identified[position] = replace(calls[position], id=call_id)
    for position in without_id:
        call_id = fallback_call_id(position, taken)
        taken.add(call_id)
        identified[position] = replace(calls[position], id=call_id)
    return tuple(identified)


MAX_CALL_ID_BYTES: Final = 512
"""Longest call id, in UTF-8 bytes, a renamed id is cut to: what an effect key takes."""


def calls_with_unused_ids(calls: tuple[ToolCall, ...], used: set[str]) -> tuple[ToolCall, ...]:
    """``calls`` with each id an earlier message already gave a call renamed ``<id>_<n>`` (the
    first ``n`` free); ``used`` then holds their ids too. Rows, approvals and effect keys go by
    call id: a model that repeats an id of an earlier turn (as the fallback ids of a provider
    that sends none do) would otherwise have its new call taken for the earlier one, and a
    durable effect it asks for again not run.

    An id holding a lone surrogate is first given as the providers send it (U+FFFD in its
    place): ids that differ only there would reach the provider as one."""
    ids = [call.id for call in calls]
    if used.isdisjoint(ids) and all(call_id.isascii() for call_id in ids):
        used.update(ids)
        return calls
    renamed: list[ToolCall] = []
    taken = used.union(ids)
    for call in calls:
        call_id = call.id
        sendable = replace_lone_surrogates(call_id) if holds_lone_surrogate(call_id) else call_id
        if sendable in used or (sendable != call_id and sendable in taken):
            sendable = _free_id(sendable, taken)
        if sendable != call_id:
            call = replace(call, id=sendable)
            taken.add(sendable)
        used.add(sendable)
        renamed.append(call)
    return tuple(renamed)


def _free_id(base: str, taken: set[str]) -> str:
    """``<base>_<n>`` with the first ``n`` not ``taken``, ``base`` cut (at a character) so the
    whole fits ``MAX_CALL_ID_BYTES``."""
    suffix = 1
    while True:
        tail = f"_{suffix}"
        room = MAX_CALL_ID_BYTES - len(tail)
        head = base
        if len(base) * 4 > room and len(base.encode("utf-8")) > room:
            head = base.encode("utf-8")[:room].decode("utf-8", "ignore")
        candidate = head + tail
        if candidate not in taken:
            return candidate
        suffix += 1


def _wrong_field(name: str, expected: str, value: object) -> str:
    return f"ProviderResponse.{name} must be {expected}, got {type(value).__name__}"


@dataclass(frozen=True, slots=True)
class ProviderDelta:
    """One streamed piece of a turn. Tool-call pieces are joined per ``tool_call_index`` (or per
    ``tool_call_id`` when the index is absent): the first piece of a call usually carries its id
    and name, later ones more ``arguments_text``."""

    text: str | None = None
    tool_call_index: int | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    arguments_text: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None


@runtime_checkable
class Provider(Protocol):
    """A model behind the runtime. ``generate`` is required; ``stream`` is optional."""

    async def generate(self, request: ProviderRequest) -> ProviderResponse: ...


class StreamingProvider(Provider, Protocol):
    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderDelta]: ...


def message_to_dict(message: Message) -> dict[str, JSONValue]:
    """A message as plain JSON-ready data (for session state)."""
    out: dict[str, JSONValue] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        # Arguments as they are: the state's writer keeps them exactly, as deep as the adapters
        # take them (a to_dict() would cut them where the event writer does).
        out["tool_calls"] = [_call_data(call) for call in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.error is not None:
        out["error"] = message.error.to_dict()
    return out


def _call_data(call: ToolCall) -> dict[str, JSONValue]:
    data: dict[str, JSONValue] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.arguments_error is not None:
        data["arguments_error"] = call.arguments_error.to_dict()
    return data


def _error_from(data: Any) -> ErrorInfo | None:
    return None if data is None else ErrorInfo.from_dict(data)


def message_from_dict(data: Any) -> Message:
    """The inverse of :func:`message_to_dict`; a malformed entry is a ``ValueError``."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored message must be an object, got {type(data).__name__}")
    stored_calls = data.get("tool_calls")
    if stored_calls is None:
        stored_calls = []
    elif not isinstance(stored_calls, list):
        raise ValueError("a stored message's 'tool_calls' must be a list")
    for key in ("tool_call_id", "name"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            raise ValueError(f"a stored message's {key!r} must be a string")
    calls = []
    ids: set[str] = set()
    for item in stored_calls:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str) or not item["id"]:
            raise ValueError("a stored tool call needs a non-empty string 'id'")
        if item["id"] in ids:
            # As a provider's turn may not: the second call would never get its own row.
            raise ValueError(f"two stored tool calls of one message share the id {item['id']!r}")
        ids.add(item["id"])
        if not isinstance(item.get("name"), str):
            raise ValueError("a stored tool call needs a string 'name'")
        calls.append(
            ToolCall(
                item["id"],
                item["name"],
                item.get("arguments"),
                _error_from(item.get("arguments_error")),
            )
        )
    role = data.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise ValueError(f"a stored message has an unknown role {role!r}")
    return Message(
        cast(Role, role),
        data.get("content", ""),
        tuple(calls),
        data.get("tool_call_id"),
        data.get("name"),
        _error_from(data.get("error")),
    )


def tool_message(call: ToolCall, value: JSONValue, error: ErrorInfo | None) -> Message:
    """The transcript row answering ``call`` (built without re-checking: the harness made the
    call, so its id and name are valid)."""
    return _build_message("tool", value, (), call.id, call.name, error)


_build_message = builder(Message)


def user_messages(
    value: str | Message | Sequence[Message], what: str = "run input"
) -> tuple[Message, ...]:
    """Messages from ``value``: a string becomes one user message, a ``Message`` stays one, a
    sequence must hold ``Message`` objects. ``what`` names ``value`` in the ``TypeError``."""
    if isinstance(value, str):
        return (Message("user", value),)
    if isinstance(value, Message):
        return (_with_identified_calls(value),)
    # Iterable, but not a sequence of messages: bytes would be read as numbers, a mapping as
    # its keys.
    expected = f"{what} must be a string, a Message or a sequence of Messages"
    if isinstance(value, bytes | bytearray | Mapping):
        raise TypeError(f"{expected}, got {type(value).__name__}")
    try:
        messages = tuple(value)
    except TypeError:
        raise TypeError(f"{expected}, got {type(value).__name__}") from None
    for position, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"{expected}; item {position} is a {type(message).__name__}")
    return tuple(_with_identified_calls(message) for message in messages)


def _with_identified_calls(message: Message) -> Message:
    """A host's own assistant message, its calls checked as a provider's are (ids unique and
    given, names text): the session's state keeps them and must read them back."""
    if not message.tool_calls:
        return message
    calls = _identified_calls(message.tool_calls)
    return message if calls is message.tool_calls else replace(message, tool_calls=calls)


__all__ = [
    "ROLES",
    "FinishReason",
    "Message",
    "Provider",
    "ProviderDelta",
    "ProviderRequest",
    "ProviderResponse",
    "Role",
    "StreamingProvider",
    "Usage",
    "message_from_dict",
    "message_to_dict",
    "tool_message",
    "user_messages",
]
