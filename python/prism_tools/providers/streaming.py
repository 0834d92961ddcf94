"""Turning streamed provider pieces into one complete turn, and what both adapters share.

A provider streams a turn as ``ProviderDelta`` pieces. ``ToolCallAssembler`` joins them into a
``ProviderResponse`` the runtime can act on: text in order, tool calls complete, arguments parsed.
The rules are strict where a wrong guess could run the wrong tool (a call without a name, two
names for one call, two calls with one id) and lenient where the model can fix its own mistake
(argument text that is not a JSON object stays on the call as ``arguments_error``).

The non-streaming parsers of both adapters feed their tool calls through the same assembler, so
a whole response and a stream of the same turn give the same ``ProviderResponse``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prism_tools import _json
from prism_tools._json import LONE_SURROGATE, replace_lone_surrogates, without_lone_surrogates
from prism_tools.errors import ArgumentsError, PrismError
from prism_tools.messages import (
    Message,
    ProviderDelta,
    ProviderResponse,
    Usage,
    fallback_call_id,
)
from prism_tools.types import ErrorInfo, JSONValue, ToolCall, to_plain
from prism_tools.validation import LIMITS, parse_tool_arguments

DEFAULT_MAX_TOOL_CALLS = 128
DEFAULT_MAX_ARGUMENT_BYTES, MAX_ARGUMENT_BYTES_CEILING = LIMITS["max_argument_bytes"]
DEFAULT_MAX_ARGUMENT_DEPTH, MAX_ARGUMENT_DEPTH_CEILING = LIMITS["max_argument_depth"]
DEFAULT_MAX_TEXT_BYTES = 8 * 1024 * 1024
MAX_TOOL_CALLS_CEILING = 1024
MAX_TEXT_BYTES_CEILING = 64 * 1024 * 1024


class ProviderStreamError(PrismError):
    """A provider turn that cannot be acted on safely; nothing of that turn may run.

    ``reason`` names the rule that failed, e.g. ``missing_name``, ``conflicting_id``,
    ``too_many_tool_calls``, ``arguments_too_large``, ``malformed_payload``.
    """

    code = "incomplete_delta"

    def __init__(self, message: str, reason: str = "incomplete_delta") -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.reason))


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _check_limit(name: str, value: int, ceiling: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer")
    if not 1 <= value <= ceiling:
        raise ValueError(f"{name} must be from 1 to {ceiling}, got {value}")
    return value


def _bad(field_name: str, value: object) -> ProviderStreamError:
    return ProviderStreamError(
        f"provider delta field {field_name} has the wrong type ({type(value).__name__})",
        "invalid_delta",
    )


def _opt_str(delta: ProviderDelta, field_name: str) -> str | None:
    value = getattr(delta, field_name)
    if value is None or isinstance(value, str):
        return value
    raise _bad(field_name, value)


@dataclass(slots=True)
class _Slot:
    index: int | None
    id: str | None
    name: str | None = None
    pieces: list[str] = field(default_factory=list)
    size: int = 0

    def label(self) -> str:
        where = [f"index {self.index}"] if self.index is not None else []
        if self.id is not None:
            where.append(f"id {self.id!r}")
        return ", ".join(where) or "without index or id"


class ToolCallAssembler:
    """Joins the deltas of one turn; ``add`` each piece, then take ``response()``.

    Tool-call pieces are joined per ``tool_call_index``; a piece without an index is joined by
    ``tool_call_id``; a piece with neither continues the call started last. Calls keep the order
    in which they first appeared. Usage is the largest value seen per field (both supported
    formats report running totals); the finish reason is the last one seen.
    """

    __slots__ = (
        "_by_id",
        "_by_index",
        "_finish_reason",
        "_input_tokens",
        "_output_tokens",
        "_slots",
        "_text",
        "_text_size",
        "max_argument_bytes",
        "max_argument_depth",
        "max_text_bytes",
        "max_tool_calls",
    )

    def __init__(
        self,
        *,
        max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS,
        max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
        max_argument_depth: int = DEFAULT_MAX_ARGUMENT_DEPTH,
        max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
    ) -> None:
        self.max_tool_calls = _check_limit("max_tool_calls", max_tool_calls, MAX_TOOL_CALLS_CEILING)
        self.max_argument_bytes = _check_limit(
            "max_argument_bytes", max_argument_bytes, MAX_ARGUMENT_BYTES_CEILING
        )
        self.max_argument_depth = _check_limit(
            "max_argument_depth", max_argument_depth, MAX_ARGUMENT_DEPTH_CEILING
        )
        self.max_text_bytes = _check_limit("max_text_bytes", max_text_bytes, MAX_TEXT_BYTES_CEILING)
        self._text: list[str] = []
        self._text_size = 0
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}
        self._by_id: dict[str, _Slot] = {}
        self._input_tokens = 0
        self._output_tokens = 0
        self._finish_reason: str | None = None

    def add(self, delta: ProviderDelta) -> None:
        """Take one piece; raises ``ProviderStreamError`` as soon as the turn cannot succeed."""
        if not isinstance(delta, ProviderDelta):
            raise ProviderStreamError(
                f"expected a ProviderDelta, got {type(delta).__name__}", "invalid_delta"
            )
        text = _opt_str(delta, "text")
        if text:
            self._text_size += _utf8_len(text)
            if self._text_size > self.max_text_bytes:
                raise ProviderStreamError(
                    f"assistant text exceeded max_text_bytes={self.max_text_bytes}",
                    "text_too_large",
                )
            self._text.append(text)
        index = delta.tool_call_index
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise _bad("tool_call_index", index)
        call_id = _opt_str(delta, "tool_call_id") or None
        name = _opt_str(delta, "tool_name") or None
        arguments = _opt_str(delta, "arguments_text")
        if index is not None or call_id is not None or name is not None or arguments:
            self._add_piece(index, call_id, name, arguments)
        if delta.usage is not None:
            self._add_usage(delta.usage)
        finish_reason = _opt_str(delta, "finish_reason")
        if finish_reason is not None:
            self._finish_reason = finish_reason

    def extend(self, deltas: Iterable[ProviderDelta]) -> None:
        for delta in deltas:
            self.add(delta)

    def _slot(self, index: int | None, call_id: str | None) -> _Slot:
        if index is not None:
            slot = self._by_index.get(index)
            if slot is not None:
                return slot
            known = self._by_id.get(call_id) if call_id is not None else None
            if known is not None and known.index is None:
                known.index = index
                self._by_index[index] = known
                return known
        elif call_id is not None:
            slot = self._by_id.get(call_id)
            if slot is not None:
                return slot
        elif self._slots:
            return self._slots[-1]
        else:
            raise ProviderStreamError(
                "a tool-call piece arrived with neither an index nor an id, before any call",
                "orphan_delta",
            )
        if len(self._slots) >= self.max_tool_calls:
            raise ProviderStreamError(
                f"the turn asked for more than max_tool_calls={self.max_tool_calls} tool calls",
                "too_many_tool_calls",
            )
        slot = _Slot(index, None)
        self._slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        return slot

    def _add_piece(
        self, index: int | None, call_id: str | None, name: str | None, arguments: str | None
    ) -> None:
        slot = self._slot(index, call_id)
        if call_id is not None and slot.id != call_id:
            if slot.id is not None:
                raise ProviderStreamError(
                    f"tool call {slot.label()} received a second id {call_id!r}", "conflicting_id"
                )
            if call_id in self._by_id:
                raise ProviderStreamError(
                    f"two tool calls in one turn share the id {call_id!r}", "duplicate_id"
                )
            slot.id = call_id
            self._by_id[call_id] = slot
        if name is not None and slot.name != name:
            if slot.name is not None:
                raise ProviderStreamError(
                    f"tool call {slot.label()} received a second name {name!r} after {slot.name!r}",
                    "conflicting_name",
                )
            slot.name = name
        if arguments:
            slot.size += _utf8_len(arguments)
            if slot.size > self.max_argument_bytes:
                raise ProviderStreamError(
                    f"argument text of tool call {slot.label()} exceeded "
                    f"max_argument_bytes={self.max_argument_bytes}",
                    "arguments_too_large",
                )
            slot.pieces.append(arguments)

    def _add_usage(self, usage: Usage) -> None:
        if not isinstance(usage, Usage):
            raise _bad("usage", usage)
        for value in (usage.input_tokens, usage.output_tokens):
            if isinstance(value, bool) or not isinstance(value, int):
                raise _bad("usage", value)
        self._input_tokens = max(self._input_tokens, usage.input_tokens)
        self._output_tokens = max(self._output_tokens, usage.output_tokens)

    def response(self) -> ProviderResponse:
        """The assembled turn. Raises ``ProviderStreamError`` when a call never got its name."""
        named: list[tuple[_Slot, str]] = []
        for slot in self._slots:
            if slot.name is None:
                raise ProviderStreamError(
                    f"tool call {slot.label()} never received a name; no call of this turn runs",
                    "missing_name",
                )
            named.append((slot, slot.name))
        taken = set(self._by_id)
        calls: list[ToolCall] = []
        for position, (slot, name) in enumerate(named):
            call_id = slot.id
            if call_id is None:
                call_id = fallback_call_id(position, taken)
                taken.add(call_id)
            calls.append(self._finish(call_id, name, "".join(slot.pieces)))
        return ProviderResponse(
            text="".join(self._text),
            tool_calls=tuple(calls),
            usage=Usage(self._input_tokens, self._output_tokens),
            finish_reason=self._finish_reason,
        )

    def _finish(self, call_id: str, name: str, text: str) -> ToolCall:
        limits = {"max_bytes": self.max_argument_bytes, "max_depth": self.max_argument_depth}
        try:
            try:
                return ToolCall(call_id, name, parse_tool_arguments(text, **limits))
            except UnicodeEncodeError:
                # A lone surrogate cannot cross into the core as str; as bytes the parser
                # refuses it with its usual message.
                return ToolCall(
                    call_id,
                    name,
                    parse_tool_arguments(text.encode("utf-8", "surrogatepass"), **limits),
                )
        except ArgumentsError as err:
            return ToolCall(call_id, name, text, arguments_error(err))


def arguments_error(err: ArgumentsError) -> ErrorInfo:
    """The ``arguments_error`` a call carries when its argument text was refused; the message is
    the parser's, the same one dispatch gives for raw text it cannot parse."""
    details: JSONValue = {"reason": err.reason} if err.reason else None
    return ErrorInfo(
        message=str(err), code=ArgumentsError.code, name="ArgumentsError", details=details
    )


def assemble_response(deltas: Iterable[ProviderDelta], **limits: int) -> ProviderResponse:
    """One turn from its deltas; ``limits`` are the ``ToolCallAssembler`` keywords."""
    assembler = ToolCallAssembler(**limits)
    assembler.extend(deltas)
    return assembler.response()


async def assemble_stream(deltas: AsyncIterable[ProviderDelta], **limits: int) -> ProviderResponse:
    """``assemble_response`` for an async stream. The stream is closed (``aclose``) when this
    returns or raises, so a refused turn stops reading from the provider at once."""
    assembler = ToolCallAssembler(**limits)
    iterator = aiter(deltas)
    try:
        async for delta in iterator:
            assembler.add(delta)
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
    return assembler.response()


def _malformed(what: str, expected: str, value: object) -> ProviderStreamError:
    return ProviderStreamError(
        f"{what} should be {expected}, got {type(value).__name__}", "malformed_payload"
    )


def as_mapping(value: object, what: str) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    raise _malformed(what, "an object", value)


def mapping_field(payload: Mapping[str, Any], key: str, what: str) -> Mapping[str, Any]:
    """``payload[key]`` as a mapping; empty when absent or null."""
    value = payload.get(key)
    return {} if value is None else as_mapping(value, f"{what}.{key}")


def list_field(payload: Mapping[str, Any], key: str, what: str) -> list[Any]:
    """``payload[key]`` as a list; empty when absent or null."""
    value = payload.get(key)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    raise _malformed(f"{what}.{key}", "an array", value)


def str_field(payload: Mapping[str, Any], key: str, what: str) -> str | None:
    value = payload.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _malformed(f"{what}.{key}", "a string", value)


def int_field(payload: Mapping[str, Any], key: str, what: str) -> int | None:
    value = payload.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _malformed(f"{what}.{key}", "an integer", value)


async def close_stream(stream: object) -> None:
    """Close an SDK stream (its ``close``, sync or async) so the HTTP response is released."""
    close = getattr(stream, "close", None)
    if callable(close):
        outcome = close()
        if inspect.isawaitable(outcome):
            await outcome


def plain_payload(value: object, what: str) -> Mapping[str, JSONValue]:
    """An SDK object or a dict as a mapping: SDK models go through ``model_dump()``."""
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    raise ProviderStreamError(
        f"expected the {what} as a mapping or an SDK model, got {type(value).__name__}",
        "malformed_payload",
    )


def json_text(value: JSONValue) -> str:
    """Compact JSON text of ``value`` (never raises; odd values are written as text, and each
    lone surrogate as U+FFFD)."""
    return _json.dumps_lenient(value).decode()


def escape_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its JSON escape (``\\ud800``)."""
    if text.isascii():
        return text
    return LONE_SURROGATE.sub(lambda found: f"\\u{ord(found[0]):04x}", text)


def decoded_json_text(value: object, what: str) -> str:
    """The JSON text of a value a provider sent already decoded (an Anthropic ``input``
    object, OpenAI arguments sent as an object), for the assembler to parse.

    It is written so that the parser judges it as it would the same value arriving as text in
    a stream: integers of any size as digits, NaN and the infinities as the literals the parser
    refuses, each lone surrogate as its escape. orjson cannot write those (it refuses the first
    and the last, and writes NaN as ``null``), hence the standard library's writer. A value no
    JSON text can spell (a cycle, an object of another type) is a malformed payload.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as err:
        raise ProviderStreamError(
            f"{what} cannot be read as JSON ({err})", "malformed_payload"
        ) from None
    return escape_lone_surrogates(text)


def sendable_text(text: str) -> str:
    """``text`` as a request can carry it: each lone surrogate becomes U+FFFD, since the SDK
    encodes the request as UTF-8 and would fail on the whole of it. Hosts build transcripts by
    hand, so a value that is not a string is left for the SDK to judge."""
    if isinstance(text, str) and not text.isascii():  # the usual ASCII text: no call, no scan
        return replace_lone_surrogates(text)
    return text


def sendable_plain(value: object) -> JSONValue:
    """``to_plain(value)`` with each lone surrogate in its strings and keys replaced by U+FFFD
    (see ``sendable_text``)."""
    return without_lone_surrogates(to_plain(value))


def tool_result_text(message: Message) -> str:
    """The text a model reads for one tool result: the value (JSON text unless already a
    string), or for an error its message with the code in front, so the model can correct
    the call. Lone surrogates become U+FFFD (see ``sendable_text``)."""
    error = message.error
    if error is None:
        content = message.content
        return sendable_text(content) if isinstance(content, str) else json_text(content)
    if error.code is None or error.code == "":
        return sendable_text(f"Error: {error.message}")
    return sendable_text(f"Error ({error.code}): {error.message}")


__all__ = [
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "DEFAULT_MAX_TEXT_BYTES",
    "DEFAULT_MAX_TOOL_CALLS",
    "ProviderStreamError",
    "ToolCallAssembler",
    "arguments_error",
    "assemble_response",
    "assemble_stream",
    "tool_result_text",
]
