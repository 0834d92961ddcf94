"""The OpenAI Chat Completions tool format: tools, transcript, responses and stream chunks.

Everything here is data mapping between plain dicts and the runtime's types; no SDK is imported.
``OpenAIChatProvider`` wraps an ``openai.AsyncOpenAI`` client the host built, so the host keeps
control of keys, base URL, retries and the HTTP client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from prism_tools import _json
from prism_tools.messages import Message, ProviderDelta, ProviderRequest, ProviderResponse, Usage
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

EMPTY_PARAMETERS: Mapping[str, JSONValue] = {"type": "object", "properties": {}}
RESERVED_CREATE_ARGUMENTS = frozenset(("model", "messages", "tools", "stream"))


def openai_tool(tool: ToolDefinition) -> dict[str, JSONValue]:
    """One tool definition as a Chat Completions ``tools`` entry."""
    function: dict[str, JSONValue] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = to_plain(
        EMPTY_PARAMETERS if tool.parameters is None else tool.parameters
    )
    return {"type": "function", "function": function}


OPENAI_TOOL_PAYLOADS = ToolPayloadCache(openai_tool)
"""Chat Completions tool entries, built once per definition and reused every turn."""


def openai_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, JSONValue]]:
    """Tool definitions as Chat Completions ``tools``. Keys come in a fixed order and schemas
    keep their own key order, so the same tools give the same request bytes every turn (which
    keeps the provider's prompt cache warm). Entries are cached per definition and shared
    between turns: do not mutate them."""
    return OPENAI_TOOL_PAYLOADS.entries(tools)


def openai_tools_json(tools: Sequence[ToolDefinition]) -> bytes:
    """The ``tools`` array as JSON bytes, joined from per-definition cached fragments."""
    return OPENAI_TOOL_PAYLOADS.json(tools)


def _content(value: JSONValue) -> JSONValue:
    if isinstance(value, str):
        return sendable_text(value)
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return sendable_plain(value)
    return json_text(value)


def arguments_text(arguments: JSONValue) -> str:
    """A call's arguments as the JSON text the format carries; raw text is returned as it came
    (lone surrogates included: the request builders make it sendable). Parsed arguments are
    written exactly (an integer beyond 64 bits keeps its digits, nesting to the parser's
    ceiling is kept whole); only what JSON cannot hold goes through the lenient writer."""
    if isinstance(arguments, str):
        return arguments
    try:
        return _json.dumps_exact(arguments).decode()
    except ValueError:
        return json_text(arguments)


def openai_messages(
    messages: Sequence[Message], instructions: str | None = None
) -> list[dict[str, JSONValue]]:
    """The transcript as Chat Completions ``messages``, ``instructions`` first as the system
    message.

    Content that is a string goes as is and a list is taken to be content parts already; any
    other value is sent as JSON text. A tool result is its value as text, or for a failed or
    blocked call its error message and code. Every string is made sendable on the way
    (``sendable_text``); the transcript itself is left as it is.
    """
    out: list[dict[str, JSONValue]] = []
    if instructions:
        out.append({"role": "system", "content": sendable_text(instructions)})
    for message in messages:
        if message.role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": sendable_text(message.tool_call_id or ""),
                    "content": tool_result_text(message),
                }
            )
        elif message.role == "user":
            out.append({"role": "user", "content": _content(message.content)})
        elif not message.tool_calls:
            out.append({"role": "assistant", "content": _content(message.content)})
        else:
            text = message.content
            out.append(
                {
                    "role": "assistant",
                    "content": None if text is None or text == "" else _content(text),
                    "tool_calls": [
                        {
                            "id": sendable_text(call.id),
                            "type": "function",
                            "function": {
                                "name": sendable_text(call.name),
                                "arguments": sendable_text(arguments_text(call.arguments)),
                            },
                        }
                        for call in message.tool_calls
                    ],
                }
            )
    return out


def _usage(payload: Mapping[str, Any]) -> Usage:
    usage = mapping_field(payload, "usage", "response")
    return Usage(
        int_field(usage, "prompt_tokens", "usage") or 0,
        int_field(usage, "completion_tokens", "usage") or 0,
    )


def _first_choice(payload: Mapping[str, Any], what: str) -> Mapping[str, Any] | None:
    """The choice with index 0 (or none given), the first such; ``None`` when there is none.
    One choice only, in a whole response and in each chunk of a stream alike: a second choice's
    calls are another answer, never more calls of this one."""
    for position, item in enumerate(list_field(payload, "choices", what)):
        choice = as_mapping(item, f"{what}.choices[{position}]")
        if int_field(choice, "index", "choice") in (None, 0):
            return choice
    return None


def _call_arguments(function: Mapping[str, Any]) -> str | None:
    value = function.get("arguments")
    if value is None or isinstance(value, str):
        return value
    return decoded_json_text(value, "tool_call.function.arguments")


def parse_openai_response(payload: object, **limits: int) -> ProviderResponse:
    """A ``chat.completions`` response (a dict, or the SDK object) as a ``ProviderResponse``.

    Only the first choice is read. Tool calls go through ``ToolCallAssembler``: argument text
    that is not a JSON object stays on the call with ``arguments_error``, a call without a name
    raises ``ProviderStreamError``. ``limits`` are the assembler's keywords.
    """
    data = plain_payload(payload, "chat completion")
    assembler = ToolCallAssembler(**limits)
    choice = _first_choice(data, "response")
    if choice is None and list_field(data, "choices", "response"):
        # Choices, but not the first: reading none of them would pass for an empty answer.
        raise ProviderStreamError(
            "the response has choices but none with index 0", "malformed_payload"
        )
    if choice is not None:
        message = mapping_field(choice, "message", "choice")
        text = str_field(message, "content", "message") or str_field(message, "refusal", "message")
        assembler.add(
            ProviderDelta(text=text, finish_reason=str_field(choice, "finish_reason", "choice"))
        )
        for position, item in enumerate(list_field(message, "tool_calls", "message")):
            call = as_mapping(item, f"message.tool_calls[{position}]")
            function = mapping_field(call, "function", "tool_call")
            assembler.add(
                ProviderDelta(
                    tool_call_index=position,
                    tool_call_id=str_field(call, "id", "tool_call"),
                    tool_name=str_field(function, "name", "tool_call.function"),
                    arguments_text=_call_arguments(function) or "",
                )
            )
    assembler.add(ProviderDelta(usage=_usage(data)))
    return assembler.response()


def openai_stream_deltas(chunk: object) -> list[ProviderDelta]:
    """One ``chat.completion.chunk`` (a dict, or the SDK object) as deltas for the assembler.

    Pieces of the first choice only; tool-call pieces keep the chunk's ``index``, ``id``,
    ``function.name`` and ``function.arguments``. The usage chunk (sent when the request asks
    for ``stream_options={"include_usage": True}``) becomes a usage delta.
    """
    data = plain_payload(chunk, "chat completion chunk")
    out: list[ProviderDelta] = []
    choice = _first_choice(data, "chunk")
    if choice is not None:
        delta = mapping_field(choice, "delta", "choice")
        text = str_field(delta, "content", "delta") or str_field(delta, "refusal", "delta")
        if text:
            out.append(ProviderDelta(text=text))
        for piece_position, piece_item in enumerate(list_field(delta, "tool_calls", "delta")):
            piece = as_mapping(piece_item, f"delta.tool_calls[{piece_position}]")
            function = mapping_field(piece, "function", "tool_call")
            out.append(
                ProviderDelta(
                    tool_call_index=int_field(piece, "index", "tool_call"),
                    tool_call_id=str_field(piece, "id", "tool_call"),
                    tool_name=str_field(function, "name", "tool_call.function"),
                    arguments_text=_call_arguments(function),
                )
            )
        finish_reason = str_field(choice, "finish_reason", "choice")
        if finish_reason is not None:
            out.append(ProviderDelta(finish_reason=finish_reason))
    if data.get("usage") is not None:
        out.append(ProviderDelta(usage=_usage(data)))
    return out


class OpenAIChatProvider:
    """A ``Provider`` over an ``openai.AsyncOpenAI`` client (or any client with the same
    ``chat.completions.create``).

    ``create_kwargs`` go to every ``create`` call (``temperature``, ``tool_choice``,
    ``parallel_tool_calls``, ...). With ``stream=True`` the turn is streamed and assembled, and
    usage is asked for with ``stream_options={"include_usage": True}`` unless ``create_kwargs``
    set ``stream_options``. ``limits`` are ``ToolCallAssembler`` keywords.
    """

    def __init__(
        self,
        client: Any,
        *,
        stream: bool = False,
        limits: Mapping[str, int] | None = None,
        **create_kwargs: Any,
    ) -> None:
        reserved = sorted(RESERVED_CREATE_ARGUMENTS.intersection(create_kwargs))
        if reserved:
            raise TypeError(
                f"OpenAIChatProvider sets {', '.join(reserved)} itself; pass stream= as the "
                "provider option and the rest through the ProviderRequest"
            )
        if not isinstance(stream, bool):
            raise TypeError(f"stream must be True or False, got {stream!r}")
        self.limits: dict[str, int] = dict(limits or {})
        ToolCallAssembler(**self.limits)
        self.client = client
        self.streaming = stream
        self.create_kwargs = create_kwargs

    def request_arguments(
        self, request: ProviderRequest, *, stream: bool = False
    ) -> dict[str, Any]:
        """The keyword arguments ``generate`` passes to ``chat.completions.create``."""
        arguments: dict[str, Any] = {
            "model": request.model,
            "messages": openai_messages(request.messages, request.instructions),
        }
        if request.tools:
            arguments["tools"] = openai_tools(request.tools)
        arguments.update(self.create_kwargs)
        if stream:
            arguments["stream"] = True
            arguments.setdefault("stream_options", {"include_usage": True})
        return arguments

    async def generate(self, request: ProviderRequest) -> ProviderResponse:
        if self.streaming:
            return await assemble_stream(self.stream(request), **self.limits)
        completion = await self.client.chat.completions.create(
            **self.request_arguments(request, stream=False)
        )
        return parse_openai_response(completion, **self.limits)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderDelta]:
        """The turn as deltas, chunk by chunk; the SDK stream is closed when iteration stops."""
        chunks = await self.client.chat.completions.create(
            **self.request_arguments(request, stream=True)
        )
        try:
            async for chunk in chunks:
                for delta in openai_stream_deltas(chunk):
                    yield delta
        finally:
            await close_stream(chunks)


__all__ = [
    "OpenAIChatProvider",
    "arguments_text",
    "openai_messages",
    "openai_stream_deltas",
    "openai_tools",
    "parse_openai_response",
]
