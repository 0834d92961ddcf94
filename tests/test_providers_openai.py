"""The OpenAI Chat Completions adapter: exact shapes, parsing, streaming, and the real SDK client
over an in-process HTTP transport (no network)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tests.support import SURROGATE_IN_EVERY_PIECE, any_text, transcript_text

from prism_tools import (
    ErrorInfo,
    Message,
    Provider,
    ProviderDelta,
    ProviderRequest,
    ProviderResponse,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    Usage,
    create_agent,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools._json import replace_lone_surrogates
from prism_tools.providers.openai import (
    OpenAIChatProvider,
    openai_messages,
    openai_stream_deltas,
    openai_tools,
    parse_openai_response,
)
from prism_tools.providers.streaming import ProviderStreamError, assemble_response

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}


def weather_tool(execute: Any = None) -> ToolDefinition:
    return ToolDefinition(
        name="get_weather",
        description="Current weather for a city.",
        parameters=WEATHER_SCHEMA,
        execute=execute,
    )


# Tools.


def test_tools_have_the_exact_function_shape() -> None:
    tools = [weather_tool(), ToolDefinition(name="now")]
    assert openai_tools(tools) == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER_SCHEMA,
            },
        },
        {
            "type": "function",
            "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
        },
    ]


def test_tool_schemas_are_byte_stable_and_keep_the_schema_key_order() -> None:
    tools = [weather_tool(), ToolDefinition(name="now", description="The time.")]
    first = orjson.dumps(openai_tools(tools))
    assert orjson.dumps(openai_tools(tools)) == first
    assert json.dumps(openai_tools(tools)).encode() == json.dumps(openai_tools(tools)).encode()
    parameters = openai_tools(tools)[0]["function"]["parameters"]
    assert list(parameters) == ["type", "properties", "required", "additionalProperties"]
    assert first.index(b'"name"') < first.index(b'"description"') < first.index(b'"parameters"')


def test_tool_output_does_not_share_the_definition_schema() -> None:
    tool = weather_tool()
    rendered = openai_tools([tool])
    rendered[0]["function"]["parameters"]["properties"]["city"]["type"] = "number"
    empty = openai_tools([ToolDefinition(name="now")])
    empty[0]["function"]["parameters"]["properties"]["x"] = {}
    assert WEATHER_SCHEMA["properties"]["city"] == {"type": "string"}  # type: ignore[index]
    assert openai_tools([ToolDefinition(name="now")])[0]["function"]["parameters"] == {
        "type": "object",
        "properties": {},
    }


def test_a_schema_integer_beyond_64_bits_is_sent_with_every_digit() -> None:
    from prism_tools.providers.openai import openai_tools_json

    wide = 2**64 + 1
    tool = ToolDefinition("lookup", parameters={"type": "integer", "enum": [1, wide]})
    assert json.loads(openai_tools_json([tool]))[0]["function"]["parameters"]["enum"] == [1, wide]
    assert openai_tools([tool])[0]["function"]["parameters"] == {
        "type": "integer",
        "enum": [1, wide],
    }


@pytest.mark.parametrize(
    ("tool", "pointer", "problem"),
    [
        (
            ToolDefinition("lookup", parameters={"description": "Find \ud800 things."}),
            "/function/parameters/description",
            "holds a lone surrogate U+D800 at character 5, which UTF-8 cannot carry",
        ),
        (
            ToolDefinition("lookup", parameters={"type": "object", "properties": {"a\udfff": {}}}),
            "/function/parameters/properties",
            "has a key with a lone surrogate U+DFFF at character 1, which UTF-8 cannot carry",
        ),
        (
            ToolDefinition(
                "lookup",
                parameters={"properties": {"n/m": {"type": "number", "minimum": float("nan")}}},
            ),
            "/function/parameters/properties/n~1m/minimum",
            "is nan, which JSON lacks",
        ),
        (
            ToolDefinition("lookup", parameters={"maximum": float("-inf")}),
            "/function/parameters/maximum",
            "is -inf, which JSON lacks",
        ),
    ],
)
def test_a_tool_that_is_not_json_is_refused_with_one_error_naming_it(
    tool: ToolDefinition, pointer: str, problem: str
) -> None:
    from prism_tools.providers import ToolPayloadError
    from prism_tools.providers.openai import openai_tools_json

    for build in (openai_tools, openai_tools_json):
        with pytest.raises(ToolPayloadError) as caught:
            build([weather_tool(), tool])
        error = caught.value
        assert isinstance(error, ValueError)
        assert (error.code, error.tool_name, error.pointer, error.problem) == (
            "ERR_PRISM_TOOL_PAYLOAD",
            "lookup",
            pointer,
            problem,
        )
        assert str(error).startswith("tool 'lookup' cannot be sent to a provider: the value at ")
        str(error).encode()  # the message itself can be logged as UTF-8
    provider = OpenAIChatProvider(object())
    with pytest.raises(ToolPayloadError):
        provider.request_arguments(
            ProviderRequest(model="gpt-test", messages=(), tools=(tool,)), stream=False
        )
    assert openai_tools([weather_tool()])[0]["function"]["name"] == "get_weather"


# Transcript.

BAD_TEXT = '{"city": "Par'
BAD_ERROR = ErrorInfo(
    message="Tool arguments are not valid JSON: EOF while parsing a string at line 1 column 13. "
    "Send one complete JSON object.",
    code="invalid_json_arguments",
    name="ArgumentsError",
)


def transcript() -> list[Message]:
    ok_call = ToolCall("call_ok", "get_weather", {"city": "Paris", "days": 2})
    bad_call = ToolCall("call_bad", "get_weather", BAD_TEXT, BAD_ERROR)
    return [
        Message("user", "Weather in Paris and Lyon?"),
        Message("assistant", "Checking both.", tool_calls=(ok_call, bad_call)),
        Message(
            "tool", {"city": "Paris", "celsius": 21}, tool_call_id="call_ok", name="get_weather"
        ),
        Message("tool", None, tool_call_id="call_bad", name="get_weather", error=BAD_ERROR),
        Message("assistant", "Paris is 21 °C; let me retry Lyon."),
    ]


def test_a_transcript_maps_to_the_exact_chat_completions_messages() -> None:
    assert openai_messages(transcript(), "Answer briefly.") == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Weather in Paris and Lyon?"},
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [
                {
                    "id": "call_ok",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris","days":2}'},
                },
                {
                    "id": "call_bad",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": BAD_TEXT},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_ok", "content": '{"city":"Paris","celsius":21}'},
        {
            "role": "tool",
            "tool_call_id": "call_bad",
            "content": f"Error (invalid_json_arguments): {BAD_ERROR.message}",
        },
        {"role": "assistant", "content": "Paris is 21 °C; let me retry Lyon."},
    ]


def test_no_instructions_means_no_system_message_and_empty_text_is_null_with_calls() -> None:
    messages = [
        Message("assistant", "", tool_calls=(ToolCall("c", "now", {}),)),
        Message("tool", "12:00", tool_call_id="c"),
    ]
    assert openai_messages(messages) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "now", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "12:00"},
    ]


def test_content_parts_pass_through_and_other_values_become_json_text() -> None:
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]
    assert openai_messages([Message("user", parts), Message("user", {"a": [1]})]) == [
        {"role": "user", "content": parts},
        {"role": "user", "content": '{"a":[1]}'},
    ]


@example(text=SURROGATE_IN_EVERY_PIECE)
@given(text=transcript_text())
def test_every_string_of_the_transcript_is_sent_with_lone_surrogates_replaced(
    text: dict[str, str],
) -> None:
    instructions, user, said, call_id, name, raw, result, error, part = (
        text[field]
        for field in (
            "instructions",
            "user",
            "said",
            "call_id",
            "name",
            "raw",
            "result",
            "error",
            "part",
        )
    )
    # A JSON decoder makes lone surrogates from a model's "\ud800"; the SDK encodes the request
    # as UTF-8, which cannot carry them, so each must arrive as U+FFFD instead.
    fixed = replace_lone_surrogates
    messages = [
        Message("user", user),
        Message("user", [{"type": "text", part: part}]),
        Message("assistant", said, tool_calls=(ToolCall(call_id, name, raw, BAD_ERROR),)),
        Message("tool", result, tool_call_id=call_id),
        Message("tool", None, tool_call_id=call_id, error=ErrorInfo(message=error, code="c")),
    ]
    sent = openai_messages(messages, instructions)
    assert sent == [
        {"role": "system", "content": fixed(instructions)},
        {"role": "user", "content": fixed(user)},
        {"role": "user", "content": [{"type": "text", fixed(part): fixed(part)}]},
        {
            "role": "assistant",
            "content": fixed(said),
            "tool_calls": [
                {
                    "id": fixed(call_id),
                    "type": "function",
                    "function": {"name": fixed(name), "arguments": fixed(raw)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": fixed(call_id), "content": fixed(result)},
        {"role": "tool", "tool_call_id": fixed(call_id), "content": f"Error (c): {fixed(error)}"},
    ]
    json.dumps(sent, ensure_ascii=False).encode()  # what the SDK does; raises on a surrogate
    assert messages[2].tool_calls[0] == ToolCall(call_id, name, raw, BAD_ERROR)


# Responses.


def completion(message: dict[str, Any], finish_reason: str = "tool_calls") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {"prompt_tokens": 57, "completion_tokens": 23, "total_tokens": 80},
    }


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_response_parses_text_calls_usage_and_finish_reason() -> None:
    payload = completion(
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                tool_call("call_1", "get_weather", '{"city": "Paris"}'),
                tool_call("call_2", "get_weather", '{"city": '),
                tool_call("call_3", "now", ""),
            ],
        }
    )
    response = parse_openai_response(payload)
    assert response.text == "Checking."
    assert response.usage == Usage(57, 23)
    assert response.finish_reason == "tool_calls"
    first, second, third = response.tool_calls
    assert first == ToolCall("call_1", "get_weather", {"city": "Paris"})
    assert second.arguments == '{"city": '
    assert second.arguments_error is not None
    assert second.arguments_error.code == "invalid_json_arguments"
    assert third == ToolCall("call_3", "now", {})


def test_a_parsed_response_maps_back_to_the_same_tool_calls() -> None:
    calls = [
        tool_call("call_1", "get_weather", '{"city":"Paris","days":3}'),
        tool_call("call_2", "get_weather", '{"city": "Ly'),
    ]
    payload = completion({"role": "assistant", "content": None, "tool_calls": calls})
    response = parse_openai_response(payload)
    back = openai_messages([Message("assistant", response.text, tool_calls=response.tool_calls)])
    assert back == [{"role": "assistant", "content": None, "tool_calls": calls}]


def test_a_text_only_response_and_a_refusal() -> None:
    response = parse_openai_response(completion({"role": "assistant", "content": "Hi"}, "stop"))
    assert response == ProviderResponse(text="Hi", usage=Usage(57, 23), finish_reason="stop")
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    assert parse_openai_response(completion(refusal, "stop")).text == "I can't help with that."


def test_a_response_call_without_a_name_fails_the_turn() -> None:
    bad = {"id": "call_1", "type": "function", "function": {"arguments": "{}"}}
    payload = completion(
        {"role": "assistant", "tool_calls": [tool_call("call_0", "now", "{}"), bad]}
    )
    with pytest.raises(ProviderStreamError) as caught:
        parse_openai_response(payload)
    assert caught.value.code == "incomplete_delta"
    assert caught.value.reason == "missing_name"


def test_arguments_sent_as_an_object_are_accepted() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "t", "arguments": {"a": 1}}}
    payload = completion({"role": "assistant", "tool_calls": [call]})
    assert parse_openai_response(payload).tool_calls == (ToolCall("c", "t", {"a": 1}),)


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({"text": "x\ud800"}, '{"text":"x\\ud800"}'),
        # Two keys that differ only in their surrogate (ruff takes them for one).
        (dict(zip(["a\ud800", "a\ud801"], [1, 2], strict=True)), '{"a\\ud800":1,"a\\ud801":2}'),
        ({"n": float("nan")}, '{"n":NaN}'),
    ],
)
def test_an_object_of_arguments_is_judged_as_the_same_text_would_be(
    arguments: dict[str, Any], text: str
) -> None:
    # The object is what a JSON decoder made of the text on the wire; the text itself (as a
    # stream carries it) is refused, so the object must be too, never run with U+FFFD or null.
    call = {"id": "c", "type": "function", "function": {"name": "t", "arguments": arguments}}
    whole = parse_openai_response(completion({"role": "assistant", "tool_calls": [call]}))
    call["function"]["arguments"] = text
    as_text = parse_openai_response(completion({"role": "assistant", "tool_calls": [call]}))
    assert whole == as_text
    assert whole.tool_calls[0].arguments == text
    assert whole.tool_calls[0].arguments_error is not None


@pytest.mark.parametrize(
    "payload",
    [
        {"choices": "nope"},
        {"choices": [{"index": 0, "message": []}]},
        {"choices": [{"index": 0, "message": {"content": 5}}]},
        {"choices": [{"index": 0, "message": {"tool_calls": [7]}}]},
        {"choices": [], "usage": {"prompt_tokens": "many"}},
        ["not", "a", "mapping"],
    ],
)
def test_malformed_responses_raise_provider_stream_error(payload: Any) -> None:
    with pytest.raises(ProviderStreamError) as caught:
        parse_openai_response(payload)
    assert caught.value.reason == "malformed_payload"


def test_a_response_without_choices_is_an_empty_turn() -> None:
    assert parse_openai_response({"choices": []}) == ProviderResponse()


# Stream chunks.


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}],
    }


def piece(
    index: int, arguments: str, call_id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        out["id"] = call_id
        out["type"] = "function"
        out["function"]["name"] = name
    return out


def usage_chunk() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-test",
        "choices": [],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }


def stream_chunks() -> list[dict[str, Any]]:
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk({"tool_calls": [piece(0, "", "call_a", "get_weather")]}),
        chunk({"tool_calls": [piece(1, "", "call_b", "get_weather")]}),
        chunk({"tool_calls": [piece(0, '{"ci')]}),
        chunk({"tool_calls": [piece(1, '{"city": "Ly')]}),
        chunk({"tool_calls": [piece(0, 'ty": "Par')]}),
        chunk({"tool_calls": [piece(0, 'is"}')]}),
        chunk({"tool_calls": [piece(1, "on")]}),
        chunk({}, "tool_calls"),
        usage_chunk(),
    ]


def test_chunks_map_to_the_exact_deltas() -> None:
    assert openai_stream_deltas(chunk({"content": "Hi"})) == [ProviderDelta(text="Hi")]
    assert openai_stream_deltas(chunk({"tool_calls": [piece(2, "{", "call_x", "now")]})) == [
        ProviderDelta(tool_call_index=2, tool_call_id="call_x", tool_name="now", arguments_text="{")
    ]
    assert openai_stream_deltas(chunk({}, "stop")) == [ProviderDelta(finish_reason="stop")]
    assert openai_stream_deltas(usage_chunk()) == [ProviderDelta(usage=Usage(40, 12))]
    other_choice = chunk({"content": "second choice"})
    other_choice["choices"][0]["index"] = 1
    assert openai_stream_deltas(other_choice) == []


def test_a_stream_assembles_interleaved_calls_and_bad_json() -> None:
    deltas = [delta for item in stream_chunks() for delta in openai_stream_deltas(item)]
    response = assemble_response(deltas)
    assert response.text == "Let me check."
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(40, 12)
    first, second = response.tool_calls
    assert first == ToolCall("call_a", "get_weather", {"city": "Paris"})
    assert (second.id, second.name, second.arguments) == ("call_b", "get_weather", '{"city": "Lyon')
    assert second.arguments_error is not None
    assert second.arguments_error.code == "invalid_json_arguments"


def test_a_stream_and_the_whole_response_of_the_same_turn_agree() -> None:
    calls = [
        tool_call("call_a", "get_weather", '{"city": "Paris"}'),
        tool_call("call_b", "get_weather", '{"city": "Lyon'),
    ]
    whole = completion({"role": "assistant", "content": "Let me check.", "tool_calls": calls})
    whole["usage"] = usage_chunk()["usage"]
    streamed = assemble_response(
        [delta for item in stream_chunks() for delta in openai_stream_deltas(item)]
    )
    assert parse_openai_response(whole) == streamed


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["choices", "delta", "index", "tool_calls", "function", "id", "name"])
            | st.sampled_from(["arguments", "content", "usage", "finish_reason", "prompt_tokens"])
            | any_text(max_size=3),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@given(JSON)
def test_any_json_chunk_maps_or_raises_provider_stream_error(payload: Any) -> None:
    try:
        deltas = openai_stream_deltas(payload)
    except ProviderStreamError as err:
        refusal: ProviderStreamError | None = err
    else:
        refusal = None
        assert all(isinstance(delta, ProviderDelta) for delta in deltas)
        with contextlib.suppress(ProviderStreamError):
            assemble_response(deltas)
    assert refusal is None or refusal.reason == "malformed_payload"
    with contextlib.suppress(ProviderStreamError):
        parse_openai_response(payload)


# The real SDK client over an in-process transport.

Handler = Callable[[httpx2.Request], httpx2.Response]


def sdk_client(handler: Handler) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="test",
        base_url="http://test/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )


class Recorder:
    """An HTTP handler that keeps every request body and answers with the next response."""

    def __init__(self, *responses: httpx2.Response) -> None:
        self.responses = list(responses)
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        self.paths.append(request.url.path)
        return self.responses.pop(0)


def sse(chunks: list[dict[str, Any]]) -> httpx2.Response:
    body = "".join(f"data: {json.dumps(item)}\n\n" for item in chunks) + "data: [DONE]\n\n"
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=body.encode()
    )


def request(**extra: Any) -> ProviderRequest:
    return ProviderRequest(
        model="gpt-test",
        messages=tuple(transcript()),
        tools=(weather_tool(),),
        instructions="Answer briefly.",
        **extra,
    )


async def test_the_sdk_client_sends_the_mapped_request_and_the_response_is_parsed() -> None:
    payload = completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("call_9", "get_weather", '{"city": "Lyon"}')],
        }
    )
    recorder = Recorder(httpx2.Response(200, json=payload))
    provider = OpenAIChatProvider(sdk_client(recorder), temperature=0, parallel_tool_calls=True)
    response = await provider.generate(request())
    assert recorder.paths == ["/v1/chat/completions"]
    body = recorder.bodies[0]
    assert body["model"] == "gpt-test"
    assert body["messages"] == openai_messages(transcript(), "Answer briefly.")
    assert body["tools"] == openai_tools([weather_tool()])
    assert body["temperature"] == 0
    assert body["parallel_tool_calls"] is True
    assert "stream" not in body
    assert response == ProviderResponse(
        text="",
        tool_calls=(ToolCall("call_9", "get_weather", {"city": "Lyon"}),),
        usage=Usage(57, 23),
        finish_reason="tool_calls",
    )


async def test_without_tools_the_tools_key_is_left_out() -> None:
    recorder = Recorder(httpx2.Response(200, json=completion({"content": "Hi"}, "stop")))
    provider = OpenAIChatProvider(sdk_client(recorder))
    response = await provider.generate(
        ProviderRequest(model="gpt-test", messages=(Message("user", "Hi"),), tools=())
    )
    assert recorder.bodies == [
        {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}]}
    ]
    assert response.text == "Hi"


async def test_the_sdk_stream_is_assembled_with_usage_requested() -> None:
    recorder = Recorder(sse(stream_chunks()))
    provider = OpenAIChatProvider(sdk_client(recorder), stream=True)
    response = await provider.generate(request())
    body = recorder.bodies[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == openai_tools([weather_tool()])
    assert response.text == "Let me check."
    assert response.usage == Usage(40, 12)
    assert response.tool_calls[0] == ToolCall("call_a", "get_weather", {"city": "Paris"})
    assert response.tool_calls[1].arguments_error is not None


async def test_the_sdk_stream_yields_deltas_and_keeps_given_stream_options() -> None:
    recorder = Recorder(sse(stream_chunks()))
    provider = OpenAIChatProvider(sdk_client(recorder), stream_options={"include_usage": False})
    deltas = [delta async for delta in provider.stream(request())]
    assert recorder.bodies[0]["stream_options"] == {"include_usage": False}
    assert deltas[0] == ProviderDelta(text="Let me ")
    assert assemble_response(deltas).tool_calls[0].arguments == {"city": "Paris"}


async def test_a_stream_with_a_nameless_call_fails_the_turn() -> None:
    chunks = [chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": "{}"}}]})]
    provider = OpenAIChatProvider(sdk_client(Recorder(sse(chunks))), stream=True)
    with pytest.raises(ProviderStreamError) as caught:
        await provider.generate(request())
    assert caught.value.code == "incomplete_delta"


async def test_provider_limits_apply_to_sdk_responses() -> None:
    calls = [tool_call(f"call_{n}", "now", "{}") for n in range(3)]
    recorder = Recorder(httpx2.Response(200, json=completion({"tool_calls": calls})))
    provider = OpenAIChatProvider(sdk_client(recorder), limits={"max_tool_calls": 2})
    with pytest.raises(ProviderStreamError) as caught:
        await provider.generate(request())
    assert caught.value.reason == "too_many_tool_calls"


async def test_lone_surrogates_from_the_model_do_not_break_the_next_request() -> None:
    # "\ud800" on the wire is a lone surrogate once decoded; the transcript keeps it, and the
    # next request, which carries the transcript back, must still encode.
    turn = completion(
        {
            "role": "assistant",
            "content": "Looking \ud800",
            "tool_calls": [
                tool_call("call_\ud800", "get_weather", '{"city": "Par\ud800is"}'),
                tool_call("call_2", "get_\udc00weather", "{}"),
            ],
        }
    )
    recorder = Recorder(
        httpx2.Response(200, content=json.dumps(turn).encode()),
        httpx2.Response(200, json=completion({"content": "Done."}, "stop")),
    )
    tool = weather_tool(lambda args, context: {"celsius": 20})
    agent = create_agent(
        model="gpt-test", provider=OpenAIChatProvider(sdk_client(recorder)), tools=[tool]
    )
    result = await agent.session().run("Weather in Paris?")
    assert result.output_text == "Done."
    said = result.messages[1]
    assert said.content == "Looking \ud800"
    # The loop keeps the id as the provider is sent it (a lone surrogate as U+FFFD).
    assert [call.id for call in said.tool_calls] == ["call_\ufffd", "call_2"]
    assert said.tool_calls[0].arguments == '{"city": "Par\ud800is"}'
    sent = recorder.bodies[1]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "Looking \ufffd",
        "tool_calls": [
            tool_call("call_\ufffd", "get_weather", '{"city": "Par\ufffdis"}'),
            tool_call("call_2", "get_\ufffdweather", "{}"),
        ],
    }
    assert [message["tool_call_id"] for message in sent[2:]] == ["call_\ufffd", "call_2"]
    assert "get_\ufffdweather" in sent[3]["content"]


def test_the_provider_meets_the_runtime_protocols() -> None:
    provider = OpenAIChatProvider(object())
    assert isinstance(provider, Provider)
    assert callable(provider.stream)


@pytest.mark.parametrize("key", ["model", "messages", "tools", "stream"])
def test_arguments_the_provider_sets_are_refused(key: str) -> None:
    with pytest.raises(TypeError, match=key):
        OpenAIChatProvider(object(), **{key: "x"})


def test_bad_limits_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="max_tool_calls"):
        OpenAIChatProvider(object(), limits={"max_tool_calls": 0})


# End to end: a parsed response dispatched to a real tool.


async def test_parsed_calls_run_through_dispatch_and_bad_json_never_runs() -> None:
    ran: list[dict[str, Any]] = []

    def get_weather(args: dict[str, Any], context: ToolExecutionContext) -> dict[str, Any]:
        ran.append(args)
        return {"city": args["city"], "celsius": 21, "days": args.get("days", 1)}

    registry = create_tool_registry([weather_tool(get_weather)])
    payload = completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                tool_call("call_1", "get_weather", '{"city": "Paris", "days": 2}'),
                tool_call("call_2", "get_weather", '{"city": "Lyon"'),
            ],
        }
    )
    response = parse_openai_response(payload)
    results: list[ToolResult] = []
    for call in response.tool_calls:
        context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id=call.id)
        results.append(await dispatch_tool_call(call, registry=registry, context=context))
    assert ran == [{"city": "Paris", "days": 2}]
    assert results[0].value == {"city": "Paris", "celsius": 21, "days": 2}
    assert results[0].error is None
    assert results[1].error == response.tool_calls[1].arguments_error
    assert results[1].error is not None
    assert results[1].error.code == "invalid_json_arguments"
    follow_up = openai_messages(
        [
            Message("assistant", "", tool_calls=response.tool_calls),
            *(
                Message("tool", result.value, tool_call_id=result.tool_call_id, error=result.error)
                for result in results
            ),
        ]
    )
    assert follow_up[1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"city":"Paris","celsius":21,"days":2}',
    }
    assert follow_up[2]["content"].startswith("Error (invalid_json_arguments): Tool arguments")


def test_tool_payloads_are_built_once_per_definition_and_reused() -> None:
    from prism_tools.providers.openai import openai_tools_json
    from prism_tools.providers.payloads import ToolPayloadCache

    tools = [
        ToolDefinition("alpha", description="first", parameters={"type": "object"}),
        ToolDefinition("beta"),
    ]
    first = openai_tools(tools)
    second = openai_tools(tools[::-1])
    assert first[0] is second[1]  # the same entry object, not rebuilt
    assert openai_tools_json(tools) == orjson.dumps(first)

    built: list[str] = []

    def build(tool: ToolDefinition) -> dict[str, Any]:
        built.append(tool.name)
        return {"name": tool.name}

    cache = ToolPayloadCache(build, maxsize=2)
    a, b, c = (ToolDefinition(name) for name in "abc")
    assert cache.json([a, b, a]) == b'[{"name":"a"},{"name":"b"},{"name":"a"}]'
    cache.json([c])  # evicts the oldest entry (a)
    cache.json([b, c])  # both still cached
    cache.json([a])  # rebuilt, evicting b
    assert built == ["a", "b", "c", "a"]
    assert len(cache) == 2
    # A different definition with the same name is a different payload.
    replacement = ToolDefinition("a", description="new")
    assert cache.entries([replacement])[0] is not cache.entries([a])[0]


def test_a_schema_of_shared_dicts_is_refused_before_it_is_written_out() -> None:
    # Forty levels of {"a": d, "b": d}: 40 dicts that write out as 2**40 copies (YAML aliases
    # make such schemas). Refused at once, not after hours of writing.
    from prism_tools.providers.payloads import ToolPayloadError

    shared: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        shared = {"type": "object", "properties": {"a": shared, "b": shared}}
    tool = ToolDefinition("x", parameters=shared)
    with pytest.raises(ToolPayloadError, match="writes out as more than 200,000 values"):
        openai_tools([tool])


def test_request_arguments_build_a_whole_request_unless_asked_for_a_stream() -> None:
    provider = OpenAIChatProvider(object())
    request = ProviderRequest(model="gpt-test", messages=(Message("user", "hi"),), tools=())
    whole = provider.request_arguments(request)
    assert whole["model"] == "gpt-test"
    assert not whole.get("stream")
    assert provider.request_arguments(request, stream=True)["stream"] is True


def test_the_payload_cache_does_not_keep_a_dropped_definition_alive() -> None:
    # A run's generated search_tools (or a tool a host builds per request) is sent once and
    # dropped: the cache must not keep it, with its closure and search index, for thousands
    # of later runs.
    import gc
    import weakref

    from prism_tools.providers.payloads import ToolPayloadCache

    class Heavy:
        pass

    def execute(args: Any, context: Any) -> Any:
        return held

    held = Heavy()
    cache = ToolPayloadCache(lambda tool: {"name": tool.name})
    tool = ToolDefinition("per_run", execute=execute, parameters={"type": "object"})
    sent = cache.json([tool])  # not inside an assert, whose rewriting keeps its operands
    assert sent == b'[{"name":"per_run"}]'
    alive = weakref.ref(tool)
    freed_id = id(tool)
    del tool
    gc.collect()
    assert alive() is None
    # A later definition CPython places at the freed one's address (as it often does) is built
    # afresh, not served the old payload: the entry is moved to the new id to make it certain.
    later = ToolDefinition("later")
    cache._entries[id(later)] = cache._entries.pop(freed_id)
    assert cache.json([later]) == b'[{"name":"later"}]'


async def test_an_agent_over_the_sdk_recovers_from_malformed_streamed_arguments() -> None:
    ran: list[dict[str, Any]] = []

    async def get_weather(args: dict[str, Any], context: ToolExecutionContext) -> dict[str, Any]:
        ran.append(args)
        return {"city": args["city"], "celsius": 18}

    def call_chunks(call_id: str, pieces: list[str]) -> list[dict[str, Any]]:
        first = {"index": 0, "id": call_id, "function": {"name": "get_weather", "arguments": ""}}
        rest = [{"index": 0, "function": {"arguments": piece}} for piece in pieces]
        deltas = [chunk({"tool_calls": [first]})]
        deltas += [chunk({"tool_calls": [piece]}) for piece in rest]
        return deltas

    recorder = Recorder(
        sse(call_chunks("call_1", ['{"city": ', '"Par'])),  # cut off: not JSON
        sse(call_chunks("call_2", ['{"city": ', '"Paris"}'])),
        sse([chunk({"content": "18 °C in Paris."})]),
    )
    tool = ToolDefinition(
        "get_weather",
        execute=get_weather,
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    agent = create_agent(
        model="gpt-test",
        provider=OpenAIChatProvider(sdk_client(recorder), stream=True),
        tools=[tool],
    )
    result = await agent.session().run("Weather in Paris?")
    assert result.output_text == "18 °C in Paris."
    assert ran == [{"city": "Paris"}]  # the malformed call never ran
    rows = [message for message in result.messages if message.role == "tool"]
    assert rows[0].error is not None
    assert rows[0].error.code == "invalid_json_arguments"
    assert rows[1].content == {"city": "Paris", "celsius": 18}
    # The second request carried the error back to the model as a tool message.
    second = recorder.bodies[1]["messages"]
    assert second[-1]["role"] == "tool"
    assert second[-1]["tool_call_id"] == "call_1"
    assert "invalid_json_arguments" in second[-1]["content"]


# One choice only, exact arguments.


def test_a_stream_reads_one_choice_as_the_whole_response_does() -> None:
    first = {
        "index": 0,
        "delta": {"content": "A", "tool_calls": [piece(0, '{"p": 1}', "a", "read")]},
    }
    second = {
        "index": 0,
        "delta": {"content": "B", "tool_calls": [piece(0, '{"p": 2}', "b", "delete")]},
    }
    unindexed = [{**first, "index": None}, {**second, "index": None}]
    for choices in ([first, second], unindexed, [first, {**second, "index": 1}]):
        data = {**chunk(), "choices": choices}
        streamed = assemble_response(openai_stream_deltas(data))
        assert streamed.text == "A"
        assert streamed.tool_calls == (ToolCall("a", "read", {"p": 1}),)
    answer = {"content": "A", "tool_calls": [tool_call("a", "read", '{"p": 1}')]}
    other = {"content": "B"}
    whole = parse_openai_response(
        {"choices": [{"index": 0, "message": answer}, {"index": 1, "message": other}]}
    )
    assert (whole.text, whole.tool_calls) == ("A", (ToolCall("a", "read", {"p": 1}),))


def test_a_response_whose_choices_all_have_another_index_is_malformed() -> None:
    payload = completion({"content": "", "tool_calls": [tool_call("a", "read", "{}")]})
    payload["choices"][0]["index"] = 1
    with pytest.raises(ProviderStreamError) as caught:
        parse_openai_response(payload)
    assert caught.value.reason == "malformed_payload"
    # A chunk of another choice (a request for several) is simply not this answer's.
    other_choice = {**chunk(), "choices": [{"index": 1, "delta": {"content": "x"}}]}
    assert openai_stream_deltas(other_choice) == []


def test_parsed_arguments_are_sent_back_exactly_however_deep_or_wide() -> None:
    deep: Any = {"n": 2**70 + 1}
    for _ in range(255):
        deep = {"a": deep}
    call = ToolCall("call_1", "t", deep)
    sent = openai_messages([Message("user", "go"), Message("assistant", "", (call,))])
    text = sent[1]["tool_calls"][0]["function"]["arguments"]  # type: ignore[index]
    assert json.loads(text) == deep
    assert text == json.dumps(deep, separators=(",", ":"))
