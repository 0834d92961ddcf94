"""The Anthropic Messages adapter: exact shapes, tool-result merging, parsing, stream events, and
the real SDK client over an in-process HTTP transport (no network)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
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
    Usage,
    create_agent,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools._json import replace_lone_surrogates
from prism_tools.providers.anthropic import (
    AnthropicMessagesProvider,
    AnthropicStreamMapper,
    anthropic_messages,
    anthropic_stream_deltas,
    anthropic_tools,
    parse_anthropic_response,
    tool_input,
)
from prism_tools.providers.streaming import ProviderStreamError, assemble_response

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}


def weather_tool(execute: Any = None) -> ToolDefinition:
    return ToolDefinition(
        name="get_weather",
        description="Current weather for a city.",
        parameters=WEATHER_SCHEMA,
        execute=execute,
    )


# Tools.


def test_tools_have_the_exact_shape() -> None:
    assert anthropic_tools([weather_tool(), ToolDefinition(name="now")]) == [
        {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "input_schema": WEATHER_SCHEMA,
        },
        {"name": "now", "input_schema": {"type": "object", "properties": {}}},
    ]


def test_tool_schemas_are_byte_stable() -> None:
    tools = [weather_tool(), ToolDefinition(name="now", description="The time.")]
    first = orjson.dumps(anthropic_tools(tools))
    assert orjson.dumps(anthropic_tools(tools)) == first
    assert first.index(b'"name"') < first.index(b'"description"') < first.index(b'"input_schema"')
    assert list(anthropic_tools(tools)[0]["input_schema"]) == ["type", "properties", "required"]


@pytest.mark.parametrize(
    ("parameters", "pointer", "problem"),
    [
        (
            {"properties": {"q": {"description": "\udc00"}}},
            "/input_schema/properties/q/description",
            "holds a lone surrogate U+DC00 at character 0, which UTF-8 cannot carry",
        ),
        ({"minimum": float("inf")}, "/input_schema/minimum", "is inf, which JSON lacks"),
    ],
)
def test_a_tool_that_is_not_json_is_refused_with_one_error_naming_it(
    parameters: dict[str, Any], pointer: str, problem: str
) -> None:
    from prism_tools.providers import ToolPayloadError
    from prism_tools.providers.anthropic import anthropic_tools_json

    tool = ToolDefinition("search", parameters=parameters)
    for build in (anthropic_tools, anthropic_tools_json):
        with pytest.raises(ToolPayloadError) as caught:
            build([tool])
        assert (caught.value.tool_name, caught.value.pointer, caught.value.problem) == (
            "search",
            pointer,
            problem,
        )
    assert (
        str(caught.value)
        == f"tool 'search' cannot be sent to a provider: the value at {pointer} {problem}"
    )


# Transcript.

BAD_TEXT = '{"city": "Ly'
BAD_ERROR = ErrorInfo(
    message="Tool arguments are not valid JSON: EOF while parsing a string at line 1 column 12. "
    "Send one complete JSON object.",
    code="invalid_json_arguments",
    name="ArgumentsError",
)


def transcript() -> list[Message]:
    ok_call = ToolCall("toolu_ok", "get_weather", {"city": "Paris"})
    text_call = ToolCall("toolu_text", "get_weather", '{"city": "Nice", "days": 2}')
    bad_call = ToolCall("toolu_bad", "get_weather", BAD_TEXT, BAD_ERROR)
    return [
        Message("user", "Weather in Paris, Nice and Lyon?"),
        Message("assistant", "Checking.", tool_calls=(ok_call, text_call, bad_call)),
        Message("tool", {"celsius": 21}, tool_call_id="toolu_ok", name="get_weather"),
        Message("tool", "sunny", tool_call_id="toolu_text", name="get_weather"),
        Message("tool", None, tool_call_id="toolu_bad", name="get_weather", error=BAD_ERROR),
        Message("assistant", "Paris 21 °C, Nice sunny; retrying Lyon."),
        Message("user", "Thanks."),
    ]


def test_a_transcript_maps_to_the_exact_messages_with_results_merged() -> None:
    assert anthropic_messages(transcript()) == [
        {"role": "user", "content": "Weather in Paris, Nice and Lyon?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_ok",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_text",
                    "name": "get_weather",
                    "input": {"city": "Nice", "days": 2},
                },
                {"type": "tool_use", "id": "toolu_bad", "name": "get_weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_ok", "content": '{"celsius":21}'},
                {"type": "tool_result", "tool_use_id": "toolu_text", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_bad",
                    "content": f"Error (invalid_json_arguments): {BAD_ERROR.message}\n"
                    f"Argument text received: {BAD_TEXT}",
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Paris 21 °C, Nice sunny; retrying Lyon."}],
        },
        {"role": "user", "content": "Thanks."},
    ]


def test_a_user_message_right_after_results_joins_them_after_the_results() -> None:
    messages = [
        Message("assistant", "", tool_calls=(ToolCall("t1", "now", {}),)),
        Message("tool", "12:00", tool_call_id="t1"),
        Message("user", "And tomorrow?"),
        Message("user", [{"type": "text", "text": "Separate."}]),
    ]
    assert anthropic_messages(messages) == [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "now", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "12:00"},
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "Separate."}]},
    ]


def test_results_of_separate_assistant_turns_are_not_merged() -> None:
    messages = [
        Message("assistant", "", tool_calls=(ToolCall("t1", "now", {}),)),
        Message("tool", "1", tool_call_id="t1"),
        Message("assistant", "", tool_calls=(ToolCall("t2", "now", {}),)),
        Message("tool", "2", tool_call_id="t2"),
    ]
    roles = [message["role"] for message in anthropic_messages(messages)]
    assert roles == ["assistant", "user", "assistant", "user"]


def test_an_empty_assistant_message_is_left_out() -> None:
    messages = [Message("user", "hi"), Message("assistant", ""), Message("user", "again")]
    assert anthropic_messages(messages) == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "again"},
    ]


@example(text=SURROGATE_IN_EVERY_PIECE)
@given(text=transcript_text())
def test_every_string_of_the_transcript_is_sent_with_lone_surrogates_replaced(
    text: dict[str, str],
) -> None:
    user, said, call_id, name, key, raw, result, part = (
        text[field] for field in ("user", "said", "call_id", "name", "key", "raw", "result", "part")
    )
    # A JSON decoder makes lone surrogates from a model's "\ud800"; the SDK encodes the request
    # as UTF-8, which cannot carry them, so each must arrive as U+FFFD instead.
    fixed = replace_lone_surrogates
    calls = (ToolCall(call_id, name, {key: [key]}), ToolCall("other", name, raw, BAD_ERROR))
    messages = [
        Message("user", user),
        Message("assistant", said, tool_calls=calls),
        Message("tool", result, tool_call_id=call_id),
        Message("tool", None, tool_call_id="other", error=BAD_ERROR),
        Message("user", [{"type": "text", part: part}]),
    ]
    sent = anthropic_messages(messages)
    raw_input, raw_text = tool_input(raw)
    assert sent == [
        {"role": "user", "content": fixed(user)},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": fixed(said)},
                {
                    "type": "tool_use",
                    "id": fixed(call_id),
                    "name": fixed(name),
                    "input": {fixed(key): [fixed(key)]},
                },
                {"type": "tool_use", "id": "other", "name": fixed(name), "input": raw_input},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": fixed(call_id), "content": fixed(result)},
                {
                    "type": "tool_result",
                    "tool_use_id": "other",
                    "content": f"Error (invalid_json_arguments): {BAD_ERROR.message}"
                    + ("" if raw_text is None else f"\nArgument text received: {fixed(raw_text)}"),
                    "is_error": True,
                },
                {"type": "text", fixed(part): fixed(part)},
            ],
        },
    ]
    json.dumps(sent, ensure_ascii=False).encode()  # what the SDK does; raises on a surrogate
    assert messages[1].tool_calls == calls


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"a": 1}, ({"a": 1}, None)),
        ('{"a": 1}', ({"a": 1}, None)),
        ("", ({}, None)),
        ("[1, 2]", ({}, "[1, 2]")),
        ('{"a": ', ({}, '{"a": ')),
        ('{"a": "\ud800"}', ({}, '{"a": "\ud800"}')),
        ([1, 2], ({}, "[1,2]")),
        (None, ({}, "null")),
    ],
)
def test_tool_input_keeps_objects_and_sets_aside_everything_else(
    arguments: Any, expected: tuple[dict[str, Any], str | None]
) -> None:
    assert tool_input(arguments) == expected


# Responses.


def message(content: list[dict[str, Any]], stop_reason: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 310, "output_tokens": 42},
    }


def tool_use(block_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": block_id, "name": name, "input": arguments}


def test_a_response_parses_text_calls_usage_and_stop_reason() -> None:
    payload = message(
        [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Checking "},
            tool_use("toolu_1", "get_weather", {"city": "Paris"}),
            {"type": "text", "text": "both."},
            tool_use("toolu_2", "now", {}),
        ]
    )
    assert parse_anthropic_response(payload) == ProviderResponse(
        text="Checking both.",
        tool_calls=(
            ToolCall("toolu_1", "get_weather", {"city": "Paris"}),
            ToolCall("toolu_2", "now", {}),
        ),
        usage=Usage(310, 42),
        finish_reason="tool_calls",
    )


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
def test_stop_reasons_are_mapped(stop_reason: str, finish_reason: str) -> None:
    response = parse_anthropic_response(message([{"type": "text", "text": "x"}], stop_reason))
    assert response.finish_reason == finish_reason


def test_cached_prompt_tokens_count_as_input() -> None:
    payload = message([{"type": "text", "text": "x"}], "end_turn")
    payload["usage"] = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 3000,
        "output_tokens": 5,
    }
    assert parse_anthropic_response(payload).usage == Usage(3210, 5)


def test_a_parsed_response_maps_back_to_the_same_blocks() -> None:
    blocks = [
        {"type": "text", "text": "Checking."},
        tool_use("toolu_1", "get_weather", {"city": "Paris", "days": 2}),
    ]
    response = parse_anthropic_response(message(blocks))
    back = anthropic_messages([Message("assistant", response.text, tool_calls=response.tool_calls)])
    assert back == [{"role": "assistant", "content": blocks}]


def test_response_inputs_that_are_not_objects_become_arguments_errors() -> None:
    payload = message([tool_use("toolu_1", "t", [1, 2]), tool_use("toolu_2", "t", "{")])
    first, second = parse_anthropic_response(payload).tool_calls
    assert (first.arguments, second.arguments) == ("[1,2]", "{")
    assert first.arguments_error is not None
    assert first.arguments_error.code == "invalid_json_arguments"
    assert second.arguments_error is not None


def input_json_events(partial_json: str) -> list[dict[str, Any]]:
    """The stream events of one ``tool_use`` block whose input arrives as ``partial_json``."""
    return [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": tool_use("toolu_1", "t", {}),
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": partial_json},
        },
    ]


@pytest.mark.parametrize(
    ("arguments", "text"),
    [
        ({"text": "x\ud800"}, '{"text":"x\\ud800"}'),
        # Two keys that differ only in their surrogate (ruff takes them for one).
        (dict(zip(["a\ud800", "a\ud801"], [1, 2], strict=True)), '{"a\\ud800":1,"a\\ud801":2}'),
        ({"n": float("nan")}, '{"n":NaN}'),
        ({"n": [float("-inf")]}, '{"n":[-Infinity]}'),
    ],
)
def test_a_response_input_that_a_stream_could_not_carry_is_refused_like_the_stream(
    arguments: dict[str, Any], text: str
) -> None:
    # The SDK decodes the wire text into ``arguments``; the same text streamed is refused, so
    # the call must be blocked here too, never run with its keys merged or values altered.
    whole = parse_anthropic_response(message([tool_use("toolu_1", "t", arguments)]))
    call = whole.tool_calls[0]
    assert call.arguments == text
    assert call.arguments_error is not None
    assert call.arguments_error.code == "invalid_json_arguments"
    streamed = assemble_response(anthropic_stream_deltas(input_json_events(text)))
    assert streamed.tool_calls == whole.tool_calls


def test_a_response_input_with_a_large_integer_reads_as_the_stream_reads_it() -> None:
    # Every digit is kept, both ways (a float would make it 2**70).
    wide = 2**70 + 1
    whole = parse_anthropic_response(message([tool_use("toolu_1", "t", {"n": wide})]))
    streamed = assemble_response(anthropic_stream_deltas(input_json_events(f'{{"n":{wide}}}')))
    assert whole.tool_calls == streamed.tool_calls
    (value,) = whole.tool_calls[0].arguments.values()  # type: ignore[union-attr]
    assert type(value) is int
    assert value == wide


# Values a JSON decoder can give: text with lone surrogates, NaN and the infinities (Python's
# decoder reads them), integers past 64 bits.
DECODED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(any_text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


@example({"text": "x\ud800"})
@example({"pair": "\udbff\udc00", "n": 2**64})
@example({"deep": [{"n": float("nan")}]})
@given(st.dictionaries(any_text(max_size=4), DECODED, max_size=3))
def test_a_whole_response_and_a_stream_of_the_same_input_agree(arguments: dict[str, Any]) -> None:
    wire = json.dumps(arguments)  # escapes lone surrogates, writes NaN as the literal
    streamed = assemble_response(anthropic_stream_deltas(input_json_events(wire))).tool_calls[0]
    decoded = json.loads(wire)
    whole = parse_anthropic_response(message([tool_use("toolu_1", "t", decoded)])).tool_calls[0]
    if streamed.arguments_error is None:
        assert whole == streamed
    else:
        # The refusal is the same; only a column in its message may differ with the spacing.
        assert whole.arguments_error is not None
        assert whole.arguments_error.details == streamed.arguments_error.details


def test_a_response_input_no_json_can_spell_is_a_malformed_payload() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    for arguments in (cyclic, {"when": object()}):
        with pytest.raises(ProviderStreamError) as caught:
            parse_anthropic_response(message([tool_use("toolu_1", "t", arguments)]))
        assert caught.value.reason == "malformed_payload"
        assert "tool_use block.input cannot be read as JSON" in str(caught.value)


def test_a_response_tool_use_without_a_name_fails_the_turn() -> None:
    payload = message(
        [tool_use("toolu_1", "now", {}), {"type": "tool_use", "id": "x", "input": {}}]
    )
    with pytest.raises(ProviderStreamError) as caught:
        parse_anthropic_response(payload)
    assert (caught.value.code, caught.value.reason) == ("incomplete_delta", "missing_name")


@pytest.mark.parametrize(
    "payload",
    [
        {"content": {"type": "text"}},
        {"content": ["text"]},
        {"content": [{"type": 3}]},
        {"content": [{"type": "tool_use", "id": 1, "name": "x"}]},
        {"content": [], "usage": {"input_tokens": "lots"}},
        {"content": [], "stop_reason": 1},
    ],
)
def test_malformed_responses_raise_provider_stream_error(payload: dict[str, Any]) -> None:
    with pytest.raises(ProviderStreamError) as caught:
        parse_anthropic_response(payload)
    assert caught.value.reason == "malformed_payload"


# Stream events.


def stream_events() -> list[tuple[str, dict[str, Any]]]:
    start_message = message([], "end_turn") | {"stop_reason": None}
    start_message["usage"] = {"input_tokens": 472, "output_tokens": 2}

    def json_delta(index: int, text: str) -> dict[str, Any]:
        return {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": text},
        }

    return [
        ("message_start", {"type": "message_start", "message": start_message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Let me check."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": tool_use("toolu_a", "get_weather", {}),
            },
        ),
        ("content_block_delta", json_delta(1, "")),
        ("content_block_delta", json_delta(1, '{"city": "Pa')),
        ("content_block_delta", json_delta(1, 'ris", "days": 3}')),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": tool_use("toolu_b", "get_weather", {}),
            },
        ),
        ("content_block_delta", json_delta(2, '{"city": ')),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 89},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def test_events_map_to_the_exact_deltas() -> None:
    mapper = AnthropicStreamMapper()
    mapped = [mapper.deltas(event) for _, event in stream_events()]
    assert mapped == [
        [ProviderDelta(usage=Usage(472, 2))],
        [],
        [],
        [ProviderDelta(text="Let me check.")],
        [],
        [
            ProviderDelta(
                tool_call_index=1,
                tool_call_id="toolu_a",
                tool_name="get_weather",
                arguments_text="",
            )
        ],
        [ProviderDelta(tool_call_index=1, arguments_text="")],
        [ProviderDelta(tool_call_index=1, arguments_text='{"city": "Pa')],
        [ProviderDelta(tool_call_index=1, arguments_text='ris", "days": 3}')],
        [],
        [
            ProviderDelta(
                tool_call_index=2,
                tool_call_id="toolu_b",
                tool_name="get_weather",
                arguments_text="",
            )
        ],
        [ProviderDelta(tool_call_index=2, arguments_text='{"city": ')],
        [],
        [ProviderDelta(usage=Usage(0, 89), finish_reason="tool_calls")],
        [],
    ]


def test_a_stream_assembles_into_the_turn() -> None:
    response = assemble_response(anthropic_stream_deltas([event for _, event in stream_events()]))
    assert response.text == "Let me check."
    assert response.usage == Usage(472, 89)
    assert response.finish_reason == "tool_calls"
    first, second = response.tool_calls
    assert first == ToolCall("toolu_a", "get_weather", {"city": "Paris", "days": 3})
    assert (second.id, second.arguments) == ("toolu_b", '{"city": ')
    assert second.arguments_error is not None
    assert second.arguments_error.code == "invalid_json_arguments"


def test_input_json_of_blocks_that_are_not_tool_use_is_ignored() -> None:
    events = [
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "x"}'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "thinking_delta", "thinking": "hmm"},
        },
    ]
    assert anthropic_stream_deltas(events) == []


def test_a_whole_input_on_the_block_start_is_used() -> None:
    event = {
        "type": "content_block_start",
        "index": 0,
        "content_block": tool_use("toolu_1", "t", {"a": 1}),
    }
    assert assemble_response(anthropic_stream_deltas([event])).tool_calls == (
        ToolCall("toolu_1", "t", {"a": 1}),
    )


def test_an_error_event_fails_the_turn() -> None:
    event = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ProviderStreamError, match="overloaded_error: Overloaded") as caught:
        AnthropicStreamMapper().deltas(event)
    assert caught.value.reason == "provider_error"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["type", "index", "delta", "content_block", "message", "usage", "input"]
            )
            | st.sampled_from(["partial_json", "text", "id", "name", "stop_reason", "content"])
            | any_text(max_size=3),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)
EVENT_TYPES = st.sampled_from(
    ["message_start", "content_block_start", "content_block_delta", "message_delta", "error"]
)


@given(st.lists(st.tuples(EVENT_TYPES, JSON), max_size=8), JSON)
def test_any_events_and_payloads_map_or_raise_provider_stream_error(
    events: list[tuple[str, Any]], payload: Any
) -> None:
    mapper = AnthropicStreamMapper()
    deltas: list[ProviderDelta] = []
    refusals: list[ProviderStreamError] = []
    for kind, body in events:
        event = dict(body) if isinstance(body, dict) else {"body": body}
        event["type"] = kind
        try:
            deltas.extend(mapper.deltas(event))
        except ProviderStreamError as err:
            refusals.append(err)
    assert all(err.reason in {"malformed_payload", "provider_error"} for err in refusals)
    with contextlib.suppress(ProviderStreamError):
        assemble_response(deltas)
    with contextlib.suppress(ProviderStreamError):
        parse_anthropic_response(payload)


# The real SDK client over an in-process transport.

Handler = Callable[[httpx2.Request], httpx2.Response]


def sdk_client(handler: Handler) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="test",
        base_url="http://test",
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


def sse(events: list[tuple[str, dict[str, Any]]]) -> httpx2.Response:
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, content=body.encode()
    )


def request(**extra: Any) -> ProviderRequest:
    return ProviderRequest(
        model="claude-test",
        messages=tuple(transcript()),
        tools=(weather_tool(),),
        instructions="Answer briefly.",
        **extra,
    )


async def test_the_sdk_client_sends_the_mapped_request_and_the_response_is_parsed() -> None:
    payload = message(
        [{"type": "text", "text": "On it."}, tool_use("toolu_9", "get_weather", {"city": "Lyon"})]
    )
    recorder = Recorder(httpx2.Response(200, json=payload))
    provider = AnthropicMessagesProvider(
        sdk_client(recorder), max_tokens=256, tool_choice={"type": "auto"}, stop_sequences=["END"]
    )
    response = await provider.generate(request())
    assert recorder.paths == ["/v1/messages"]
    body = recorder.bodies[0]
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 256
    assert body["system"] == "Answer briefly."
    assert body["messages"] == anthropic_messages(transcript())
    assert body["tools"] == anthropic_tools([weather_tool()])
    assert body["tool_choice"] == {"type": "auto"}
    assert body["stop_sequences"] == ["END"]
    assert "stream" not in body
    assert response == ProviderResponse(
        text="On it.",
        tool_calls=(ToolCall("toolu_9", "get_weather", {"city": "Lyon"}),),
        usage=Usage(310, 42),
        finish_reason="tool_calls",
    )


async def test_without_tools_or_instructions_those_keys_are_left_out() -> None:
    recorder = Recorder(
        httpx2.Response(200, json=message([{"type": "text", "text": "Hi"}], "end_turn"))
    )
    provider = AnthropicMessagesProvider(sdk_client(recorder))
    response = await provider.generate(
        ProviderRequest(model="claude-test", messages=(Message("user", "Hi"),), tools=())
    )
    assert recorder.bodies == [
        {
            "model": "claude-test",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": "Hi"}],
        }
    ]
    assert (response.text, response.finish_reason) == ("Hi", "stop")


async def test_a_system_default_from_create_kwargs_yields_to_request_instructions() -> None:
    reply = message([{"type": "text", "text": "ok"}], "end_turn")
    recorder = Recorder(httpx2.Response(200, json=reply), httpx2.Response(200, json=reply))
    provider = AnthropicMessagesProvider(sdk_client(recorder), system="Default.")
    plain = ProviderRequest(model="claude-test", messages=(Message("user", "Hi"),), tools=())
    await provider.generate(plain)
    await provider.generate(request())
    assert [body["system"] for body in recorder.bodies] == ["Default.", "Answer briefly."]


async def test_the_sdk_stream_is_assembled() -> None:
    recorder = Recorder(sse(stream_events()))
    provider = AnthropicMessagesProvider(sdk_client(recorder), stream=True)
    response = await provider.generate(request())
    assert recorder.bodies[0]["stream"] is True
    assert response.text == "Let me check."
    assert response.usage == Usage(472, 89)
    assert response.tool_calls[0] == ToolCall(
        "toolu_a", "get_weather", {"city": "Paris", "days": 3}
    )
    assert response.tool_calls[1].arguments_error is not None


async def test_the_sdk_stream_yields_deltas() -> None:
    provider = AnthropicMessagesProvider(sdk_client(Recorder(sse(stream_events()))))
    deltas = [delta async for delta in provider.stream(request())]
    assert deltas[0] == ProviderDelta(usage=Usage(472, 2))
    assert deltas[1] == ProviderDelta(text="Let me check.")


async def test_a_stream_with_a_nameless_call_fails_the_turn() -> None:
    events = [
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "", "input": {}},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    provider = AnthropicMessagesProvider(sdk_client(Recorder(sse(events))), stream=True)
    with pytest.raises(ProviderStreamError) as caught:
        await provider.generate(request())
    assert (caught.value.code, caught.value.reason) == ("incomplete_delta", "missing_name")


async def test_lone_surrogates_from_the_model_do_not_break_the_next_request() -> None:
    # "\ud800" on the wire is a lone surrogate once decoded; the transcript keeps it, and the
    # next request, which carries the transcript back, must still encode.
    turn = message(
        [
            {"type": "text", "text": "Looking \ud800"},
            tool_use("toolu_\ud800", "get_weather", {"city": "Par\ud800is"}),
            tool_use("toolu_2", "get_\udc00weather", {}),
        ]
    )
    recorder = Recorder(
        httpx2.Response(200, content=json.dumps(turn).encode()),
        httpx2.Response(200, json=message([{"type": "text", "text": "Done."}], "end_turn")),
    )
    agent = create_agent(
        model="claude-test",
        provider=AnthropicMessagesProvider(sdk_client(recorder)),
        tools=[weather_tool(lambda args, context: {"celsius": 20})],
        instructions="Answer \udfff briefly.",
    )
    result = await agent.session().run("Weather in Paris?")
    assert result.output_text == "Done."
    said = result.messages[1]
    assert said.content == "Looking \ud800"
    # The loop keeps the id as the provider is sent it (a lone surrogate as U+FFFD).
    assert [call.id for call in said.tool_calls] == ["toolu_\ufffd", "toolu_2"]
    body = recorder.bodies[1]
    assert body["system"] == "Answer \ufffd briefly."
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking \ufffd"},
            tool_use("toolu_\ufffd", "get_weather", {}),
            tool_use("toolu_2", "get_\ufffdweather", {}),
        ],
    }
    results = body["messages"][2]["content"]
    assert [block["tool_use_id"] for block in results] == ["toolu_\ufffd", "toolu_2"]
    assert results[0]["content"].endswith('Argument text received: {"city":"Par\\ud800is"}')
    assert "get_\ufffdweather" in results[1]["content"]


def test_the_provider_meets_the_runtime_protocols() -> None:
    provider = AnthropicMessagesProvider(object())
    assert isinstance(provider, Provider)
    assert callable(provider.stream)


@pytest.mark.parametrize("key", ["model", "messages", "tools", "stream"])
def test_arguments_the_provider_sets_are_refused(key: str) -> None:
    with pytest.raises(TypeError, match=key):
        AnthropicMessagesProvider(object(), **{key: "x"})


@pytest.mark.parametrize("max_tokens", [0, -1, True, 1.5])
def test_bad_max_tokens_are_refused(max_tokens: Any) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicMessagesProvider(object(), max_tokens=max_tokens)


# End to end: a parsed response dispatched to a real tool.


async def test_parsed_calls_run_through_dispatch_and_bad_input_never_runs() -> None:
    ran: list[dict[str, Any]] = []

    async def get_weather(args: dict[str, Any], context: ToolExecutionContext) -> dict[str, Any]:
        ran.append(args)
        return {"city": args["city"], "celsius": 19}

    registry = create_tool_registry([weather_tool(get_weather)])
    events = stream_events()
    response = assemble_response(anthropic_stream_deltas([event for _, event in events]))
    results = []
    for call in response.tool_calls:
        context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id=call.id)
        results.append(await dispatch_tool_call(call, registry=registry, context=context))
    assert ran == [{"city": "Paris", "days": 3}]
    assert results[0].value == {"city": "Paris", "celsius": 19}
    assert results[1].error is not None
    assert results[1].error.code == "invalid_json_arguments"
    follow_up = anthropic_messages(
        [
            Message("assistant", response.text, tool_calls=response.tool_calls),
            *(
                Message("tool", result.value, tool_call_id=result.tool_call_id, error=result.error)
                for result in results
            ),
        ]
    )
    assert follow_up[0]["content"][2] == {
        "type": "tool_use",
        "id": "toolu_b",
        "name": "get_weather",
        "input": {},
    }
    blocks = follow_up[1]["content"]
    assert blocks[0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_a",
        "content": '{"city":"Paris","celsius":19}',
    }
    assert blocks[1]["is_error"] is True
    assert blocks[1]["content"].endswith('Argument text received: {"city": ')


# Turns that reuse ids and indexes.


def test_a_result_quotes_only_the_argument_text_of_the_call_it_answers() -> None:
    # A server that sends no ids: every turn's call gets the fallback id call_0.
    bad_error = ErrorInfo("not an object", code="invalid_json_arguments")
    messages = [
        Message("user", "go"),
        Message("assistant", "", tool_calls=(ToolCall("call_0", "lookup", "city=Paris"),)),
        Message("tool", None, tool_call_id="call_0", name="lookup", error=bad_error),
        Message("assistant", "", tool_calls=(ToolCall("call_0", "lookup", {"city": "Lisbon"}),)),
        Message("tool", "found Lisbon", tool_call_id="call_0", name="lookup"),
    ]
    sent = anthropic_messages(messages)
    first, second = sent[2]["content"][0], sent[4]["content"][0]  # type: ignore[index]
    assert first["content"].endswith("Argument text received: city=Paris")
    assert second["content"] == "found Lisbon"


@pytest.mark.parametrize("index", [1, None], ids=["reused-index", "no-index"])
def test_a_server_tool_block_never_feeds_its_input_to_a_call(index: int | None) -> None:
    def start(block: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_start", "index": index, "content_block": block}

    def piece(text: str) -> dict[str, Any]:
        delta = {"type": "input_json_delta", "partial_json": text}
        return {"type": "content_block_delta", "index": index, "delta": delta}

    server_tool = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
    events = [
        start(tool_use("toolu_1", "send_email", {})),
        piece('{"to": "me"}'),
        {"type": "content_block_stop", "index": index},
        start(server_tool),
        piece('{"to": "attacker"}'),
    ]
    [call] = assemble_response(anthropic_stream_deltas(events)).tool_calls
    assert call == ToolCall("toolu_1", "send_email", {"to": "me"})


@pytest.mark.parametrize("start", [[], 0, False, [1]])
def test_a_start_input_that_is_not_an_object_is_refused_as_the_whole_response_refuses_it(
    start: Any,
) -> None:
    event = {"type": "content_block_start", "index": 0, "content_block": tool_use("t1", "t", start)}
    [streamed] = assemble_response(anthropic_stream_deltas([event])).tool_calls
    [whole] = parse_anthropic_response(message([tool_use("t1", "t", start)])).tool_calls
    assert streamed.arguments_error is not None
    assert whole.arguments_error is not None
    assert streamed.arguments_error.details == whole.arguments_error.details
    assert streamed.arguments_error.details == {"reason": "not_an_object"}


def test_parsed_input_is_sent_back_exactly_however_deep_or_wide() -> None:
    deep: Any = {"n": 2**70 + 1}
    for _ in range(255):
        deep = {"a": deep}
    call = ToolCall("toolu_1", "t", deep)
    [_, assistant] = anthropic_messages([Message("user", "go"), Message("assistant", "", (call,))])
    [block] = assistant["content"]  # type: ignore[misc]
    assert block["input"] == deep
    assert "[MaxDepth]" not in json.dumps(block["input"])
