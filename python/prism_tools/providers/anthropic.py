"""The Anthropic Messages tool format: tools, transcript, responses and stream events.

Everything here is data mapping between plain dicts and the runtime's types; no SDK is imported.
``AnthropicMessagesProvider`` wraps an ``anthropic.AsyncAnthropic`` client the host built.

Two rules differ from the OpenAI format because the API requires them: tool results travel in a
``user`` message (consecutive results share one), and a ``tool_use`` block's ``input`` must be an
object, so a call whose argument text was not a JSON object is sent with ``{}`` and the text it
came with is quoted in the result that answers it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from prism_tools import _json
from prism_tools.errors import ArgumentsError
from prism_tools.messages import Message, ProviderDelta, ProviderRequest, ProviderResponse, Usage
from prism_tools.providers.openai import EMPTY_PARAMETERS, arguments_text
from prism_tools.providers.payloads import ToolPayloadCache
from prism_tools.providers.streaming import (
    ProviderStreamError,
    ToolCallAssembler,
    as_mapping,
    assemble_stream,
    close_stream,
    decoded_json_text,
    int_field,
    json_text,
    list_field,
    mapping_field,
    plain_payload,
    sendable_plain,
    sendable_text,
    str_field,
    tool_result_text,
)
from prism_tools.types import JSONValue, ToolDefinition, to_plain
from prism_tools.validation import parse_tool_arguments

STOP_REASONS: Mapping[str, str] = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""Anthropic ``stop_reason`` to the runtime's finish reason; other values pass through."""

RESERVED_CREATE_ARGUMENTS = frozenset(("model", "messages", "tools", "stream"))
RECEIVED_TEXT_LABEL = "Argument text received: "


def anthropic_tool(tool: ToolDefinition) -> dict[str, JSONValue]:
    """One tool definition as a Messages ``tools`` entry."""
    entry: dict[str, JSONValue] = {"name": tool.name}
    if tool.description:
        entry["description"] = tool.description
    entry["input_schema"] = to_plain(
        EMPTY_PARAMETERS if tool.parameters is None else tool.parameters
    )
    return entry


ANTHROPIC_TOOL_PAYLOADS = ToolPayloadCache(anthropic_tool)
"""Messages tool entries, built once per definition and reused every turn."""


def anthropic_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, JSONValue]]:
    """Tool definitions as Messages ``tools``, in a fixed key order so the same tools give the
    same request bytes every turn. Entries are cached per definition and shared between turns:
    do not mutate them."""
    return ANTHROPIC_TOOL_PAYLOADS.entries(tools)


def anthropic_tools_json(tools: Sequence[ToolDefinition]) -> bytes:
    """The ``tools`` array as JSON bytes, joined from per-definition cached fragments."""
    return ANTHROPIC_TOOL_PAYLOADS.json(tools)


def _blocks(content: JSONValue) -> list[JSONValue]:
    if isinstance(content, str):
        return [{"type": "text", "text": sendable_text(content)}] if content else []
    if content is None:
        return []
    if isinstance(content, list | tuple):
        return cast(list[JSONValue], sendable_plain(content))
    return [{"type": "text", "text": json_text(content)}]


def _user_content(content: JSONValue) -> JSONValue:
    if isinstance(content, str):
        return sendable_text(content)
    return _blocks(content)


def tool_input(arguments: JSONValue) -> tuple[dict[str, JSONValue], str | None]:
    """A call's ``input`` object as a request carries it (``sendable_plain``), and the argument
    text, as it came, when it was not a JSON object (then the input is ``{}``)."""
    if isinstance(arguments, Mapping):
        try:
            _json.dumps_exact(arguments)
        except ValueError:
            # Values JSON cannot hold as they are (a host's objects, a lone surrogate).
            return cast(dict[str, JSONValue], sendable_plain(arguments)), None
        # Plain JSON already, as parsed arguments are: sent as they are, however deep the
        # parser let them be (the copy would cut them at the writer's depth).
        return cast(dict[str, JSONValue], arguments), None
    text = arguments_text(arguments)
    try:
        return parse_tool_arguments(text), None
    except (ArgumentsError, UnicodeEncodeError):
        return {}, text


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, JSONValue]]:
    """The transcript as Messages ``messages`` (instructions go in the ``system`` parameter).

    Assistant turns become content blocks: the text (when not empty), then one ``tool_use`` per
    call. Tool results become ``tool_result`` blocks in a ``user`` message; consecutive results
    share one message, and a user message right after them joins it, after the results. An
    assistant message with neither text nor calls is left out, as the API refuses empty content.
    Every string is made sendable on the way (``sendable_text``); the transcript itself is left
    as it is.
    """
    out: list[dict[str, JSONValue]] = []
    received: dict[str, str] = {}
    open_results: list[JSONValue] | None = None
    for message in messages:
        if message.role == "tool":
            block: dict[str, JSONValue] = {
                "type": "tool_result",
                "tool_use_id": sendable_text(message.tool_call_id or ""),
                "content": tool_result_text(message),
            }
            text = received.get(message.tool_call_id or "")
            if text is not None:
                block["content"] = f"{block['content']}\n{RECEIVED_TEXT_LABEL}{sendable_text(text)}"
            if message.error is not None:
                block["is_error"] = True
            if open_results is None:
                open_results = []
                out.append({"role": "user", "content": open_results})
            open_results.append(block)
        elif message.role == "user":
            if open_results is not None:
                open_results.extend(_blocks(message.content))
                open_results = None
            else:
                out.append({"role": "user", "content": _user_content(message.content)})
        else:
            open_results = None
            blocks = _blocks(message.content)
            for call in message.tool_calls:
                arguments, text = tool_input(call.arguments)
                # Keyed by id, which a fallback id makes unique within one turn only: each call
                # replaces what an earlier one with its id left, so a result never quotes the
                # text of another turn's call.
                if text is None:
                    received.pop(call.id, None)
                else:
                    received[call.id] = text
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": sendable_text(call.id),
                        "name": sendable_text(call.name),
                        "input": arguments,
                    }
                )
            if blocks:
                out.append({"role": "assistant", "content": blocks})
    return out


def _finish_reason(value: str | None) -> str | None:
    return None if value is None else STOP_REASONS.get(value, value)


def _usage(usage: Mapping[str, Any]) -> Usage:
    """Cache reads and writes count as input, so ``input_tokens`` means what OpenAI's
    ``prompt_tokens`` means: every token of the prompt."""
    return Usage(
        (int_field(usage, "input_tokens", "usage") or 0)
        + (int_field(usage, "cache_creation_input_tokens", "usage") or 0)
        + (int_field(usage, "cache_read_input_tokens", "usage") or 0),
        int_field(usage, "output_tokens", "usage") or 0,
    )


def _input_text(block: Mapping[str, Any]) -> str:
    value = block.get("input")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return decoded_json_text(value, "tool_use block.input")


def parse_anthropic_response(payload: object, **limits: int) -> ProviderResponse:
    """A Messages response (a dict, or the SDK object) as a ``ProviderResponse``.

    Text blocks are joined; ``tool_use`` blocks become calls through ``ToolCallAssembler``, so
    the same limits and checks apply as for a stream. Other blocks (thinking, server tools) are
    not part of the runtime's turn and are skipped. ``limits`` are the assembler's keywords.
    """
    data = plain_payload(payload, "message")
    assembler = ToolCallAssembler(**limits)
    for position, item in enumerate(list_field(data, "content", "message")):
        block = as_mapping(item, f"message.content[{position}]")
        kind = str_field(block, "type", "block")
        if kind == "text":
            assembler.add(ProviderDelta(text=str_field(block, "text", "text block")))
        elif kind == "tool_use":
            assembler.add(
                ProviderDelta(
                    tool_call_index=position,
                    tool_call_id=str_field(block, "id", "tool_use block"),
                    tool_name=str_field(block, "name", "tool_use block"),
                    arguments_text=_input_text(block),
                )
            )
    assembler.add(
        ProviderDelta(
            usage=_usage(mapping_field(data, "usage", "message")),
            finish_reason=_finish_reason(str_field(data, "stop_reason", "message")),
        )
    )
    return assembler.response()


class AnthropicStreamMapper:
    """Maps Messages stream events to deltas, one event at a time.

    It remembers which content blocks are ``tool_use`` blocks, so the ``input_json_delta``
    pieces of other blocks (server tools) never reach the assembler as a nameless call.
    ``error`` events raise ``ProviderStreamError`` (reason ``provider_error``).
    """

    __slots__ = ("_tool_blocks",)

    def __init__(self) -> None:
        self._tool_blocks: set[int | None] = set()

    def deltas(self, event: object) -> list[ProviderDelta]:
        data = plain_payload(event, "stream event")
        kind = str_field(data, "type", "event")
        if kind == "content_block_delta":
            delta = mapping_field(data, "delta", "event")
            delta_kind = str_field(delta, "type", "delta")
            if delta_kind == "text_delta":
                text = str_field(delta, "text", "text_delta")
                return [ProviderDelta(text=text)] if text else []
            index = int_field(data, "index", "event")
            if delta_kind == "input_json_delta" and index in self._tool_blocks:
                piece = str_field(delta, "partial_json", "input_json_delta")
                return [ProviderDelta(tool_call_index=index, arguments_text=piece or "")]
            return []
        if kind == "content_block_start":
            block = mapping_field(data, "content_block", "event")
            block_kind = str_field(block, "type", "content_block")
            index = int_field(data, "index", "event")
            if block_kind != "tool_use":
                # Another block now holds this index: its pieces (a server tool's input) are
                # never a call's, whatever block held the index before.
                self._tool_blocks.discard(index)
                if block_kind == "text":
                    text = str_field(block, "text", "text block")
                    return [ProviderDelta(text=text)] if text else []
                return []
            self._tool_blocks.add(index)
            start = block.get("input")
            # The start usually carries an empty input and the text follows in pieces; any other
            # input, an object or not, is the call's argument text as it came.
            empty = start is None or (isinstance(start, Mapping) and not start)
            return [
                ProviderDelta(
                    tool_call_index=index,
                    tool_call_id=str_field(block, "id", "tool_use block"),
                    tool_name=str_field(block, "name", "tool_use block"),
                    arguments_text="" if empty else _input_text(block),
                )
            ]
        if kind == "message_start":
            message = mapping_field(data, "message", "event")
            usage = mapping_field(message, "usage", "message")
            return [ProviderDelta(usage=_usage(usage))] if usage else []
        if kind == "message_delta":
            delta = mapping_field(data, "delta", "event")
            usage = mapping_field(data, "usage", "event")
            reason = _finish_reason(str_field(delta, "stop_reason", "delta"))
            if reason is None and not usage:
                return []
            return [ProviderDelta(usage=_usage(usage) if usage else None, finish_reason=reason)]
        if kind == "error":
            error = mapping_field(data, "error", "event")
            raise ProviderStreamError(
                f"the provider ended the stream with an error: "
                f"{str_field(error, 'type', 'error') or 'error'}: "
                f"{str_field(error, 'message', 'error') or 'no message'}",
                "provider_error",
            )
        return []


def anthropic_stream_deltas(events: Sequence[object]) -> list[ProviderDelta]:
    """All deltas of a recorded event sequence (one ``AnthropicStreamMapper`` over them)."""
    mapper = AnthropicStreamMapper()
    return [delta for event in events for delta in mapper.deltas(event)]


class AnthropicMessagesProvider:
    """A ``Provider`` over an ``anthropic.AsyncAnthropic`` client (or any client with the same
    ``messages.create``).

    ``create_kwargs`` go to every ``create`` call (``tool_choice``, ``stop_sequences``, ...). A
    ``system`` given there is used when the request carries no ``instructions``; the request's
    instructions win otherwise. ``limits`` are ``ToolCallAssembler`` keywords.
    """

    def __init__(
        self,
        client: Any,
        *,
        max_tokens: int = 1024,
        stream: bool = False,
        limits: Mapping[str, int] | None = None,
        **create_kwargs: Any,
    ) -> None:
        reserved = sorted(RESERVED_CREATE_ARGUMENTS.intersection(create_kwargs))
        if reserved:
            raise TypeError(
                f"AnthropicMessagesProvider sets {', '.join(reserved)} itself; pass stream= as "
                "the provider option and the rest through the ProviderRequest"
            )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if not isinstance(stream, bool):
            raise TypeError(f"stream must be True or False, got {stream!r}")
        self.limits: dict[str, int] = dict(limits or {})
        ToolCallAssembler(**self.limits)
        self.client = client
        self.max_tokens = max_tokens
        self.streaming = stream
        self.create_kwargs = create_kwargs

    def request_arguments(
        self, request: ProviderRequest, *, stream: bool = False
    ) -> dict[str, Any]:
        """The keyword arguments ``generate`` passes to ``messages.create``."""
        arguments: dict[str, Any] = {
            "model": request.model,
            "max_tokens": self.max_tokens,
            "messages": anthropic_messages(request.messages),
        }
        if request.tools:
            arguments["tools"] = anthropic_tools(request.tools)
        arguments.update(self.create_kwargs)
        if request.instructions:
            arguments["system"] = sendable_text(request.instructions)
        if stream:
            arguments["stream"] = True
        return arguments

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        if self.streaming:
            return await assemble_stream(self.stream(request), **self.limits)
        message = await self.client.messages.create(**self.request_arguments(request, stream=False))
        return parse_anthropic_response(message, **self.limits)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderDelta]:
        """The turn as deltas, event by event; the SDK stream is closed when iteration stops."""
        events = await self.client.messages.create(**self.request_arguments(request, stream=True))
        mapper = AnthropicStreamMapper()
        try:
            async for event in events:
                for delta in mapper.deltas(event):
                    yield delta
        finally:
            await close_stream(events)


__all__ = [
    "STOP_REASONS",
    "AnthropicMessagesProvider",
    "AnthropicStreamMapper",
    "anthropic_messages",
    "anthropic_stream_deltas",
    "anthropic_tools",
    "parse_anthropic_response",
    "tool_input",
]
