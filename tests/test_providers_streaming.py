"""ToolCallAssembler: streamed pieces to one complete turn, its limits, and hostile input."""

from __future__ import annotations

import pickle
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tests.support import any_text

from prism_tools import (
    ErrorInfo,
    Message,
    PrismError,
    ProviderDelta,
    ProviderResponse,
    ToolCall,
    Usage,
)
from prism_tools._json import replace_lone_surrogates
from prism_tools.providers.streaming import (
    DEFAULT_MAX_ARGUMENT_BYTES,
    DEFAULT_MAX_TOOL_CALLS,
    ProviderStreamError,
    ToolCallAssembler,
    assemble_response,
    assemble_stream,
    tool_result_text,
)

D = ProviderDelta


def chunks(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def test_text_pieces_join_in_order_and_empty_pieces_change_nothing() -> None:
    response = assemble_response([D(text="Hel"), D(text=""), D(text=None), D(text="lo")])
    assert response.text == "Hello"
    assert response.tool_calls == ()
    assert response.usage == Usage(0, 0)
    assert response.finish_reason is None


def test_arguments_split_into_one_character_pieces_are_joined() -> None:
    text = '{"city": "Zürich", "days": [1, 2, 3], "note": "a \\"quoted\\" word"}'
    deltas = [D(tool_call_index=0, tool_call_id="call_a", tool_name="forecast")]
    deltas += [D(tool_call_index=0, arguments_text=piece) for piece in chunks(text, 1)]
    response = assemble_response(deltas)
    assert response.tool_calls == (
        ToolCall(
            "call_a",
            "forecast",
            {"city": "Zürich", "days": [1, 2, 3], "note": 'a "quoted" word'},
        ),
    )


def test_interleaved_calls_are_joined_per_index_in_first_appearance_order() -> None:
    deltas = [
        D(tool_call_index=3, tool_call_id="call_b", tool_name="second", arguments_text='{"b"'),
        D(tool_call_index=0, tool_call_id="call_a", tool_name="first", arguments_text="{"),
        D(tool_call_index=3, arguments_text=": 2}"),
        D(tool_call_index=0, arguments_text='"a": 1}'),
    ]
    calls = assemble_response(deltas).tool_calls
    assert [(call.id, call.name, call.arguments) for call in calls] == [
        ("call_b", "second", {"b": 2}),
        ("call_a", "first", {"a": 1}),
    ]


def test_pieces_without_index_are_joined_by_id() -> None:
    deltas = [
        D(tool_call_id="x", tool_name="one", arguments_text='{"n":'),
        D(tool_call_id="y", tool_name="two", arguments_text="{}"),
        D(tool_call_id="x", arguments_text="1}"),
    ]
    calls = assemble_response(deltas).tool_calls
    assert [(call.id, call.arguments) for call in calls] == [("x", {"n": 1}), ("y", {})]


def test_an_index_given_later_joins_the_call_already_known_by_id() -> None:
    deltas = [
        D(tool_call_id="x", tool_name="one", arguments_text='{"n":'),
        D(tool_call_index=4, tool_call_id="x", arguments_text="2"),
        D(tool_call_index=4, arguments_text="}"),
    ]
    assert assemble_response(deltas).tool_calls == (ToolCall("x", "one", {"n": 2}),)


def test_a_piece_with_neither_index_nor_id_continues_the_last_call() -> None:
    deltas = [
        D(tool_call_id="x", tool_name="one"),
        D(arguments_text='{"n":'),
        D(arguments_text=" 3}"),
    ]
    assert assemble_response(deltas).tool_calls == (ToolCall("x", "one", {"n": 3}),)


def test_a_piece_with_neither_index_nor_id_before_any_call_fails_the_turn() -> None:
    with pytest.raises(ProviderStreamError) as caught:
        assemble_response([D(text="hi"), D(arguments_text="{}")])
    assert caught.value.reason == "orphan_delta"


def test_an_empty_piece_with_neither_index_nor_id_is_ignored() -> None:
    assert assemble_response([D(text="hi"), D(arguments_text="")]) == assemble_response(
        [D(text="hi")]
    )


def test_bad_json_keeps_the_raw_text_and_sets_arguments_error() -> None:
    deltas = [
        D(tool_call_index=0, tool_call_id="c1", tool_name="lookup", arguments_text='{"q": '),
        D(tool_call_index=0, arguments_text='"paris"'),
    ]
    (call,) = assemble_response(deltas).tool_calls
    assert call.arguments == '{"q": "paris"'
    assert call.arguments_error is not None
    assert call.arguments_error.code == "invalid_json_arguments"
    assert call.arguments_error.name == "ArgumentsError"
    assert call.arguments_error.message.startswith("Tool arguments are not valid JSON")
    assert call.arguments_error.details == {"reason": "invalid_json"}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[1, 2]", "not_an_object"),
        ('"text"', "not_an_object"),
        ("[" * 70 + "]" * 70, "arguments_too_deep"),
        ('{"a": 1} trailing', "invalid_json"),
        ('{"a": "\ud800"}', "invalid_json"),
    ],
)
def test_argument_text_that_is_not_one_object_is_refused_on_the_call(
    text: str, reason: str
) -> None:
    deltas = [D(tool_call_index=0, tool_call_id="c", tool_name="t", arguments_text=text)]
    (call,) = assemble_response(deltas).tool_calls
    assert call.arguments == text
    assert call.arguments_error is not None
    assert call.arguments_error.code == "invalid_json_arguments"
    assert call.arguments_error.details == {"reason": reason}


@pytest.mark.parametrize("pieces", [[], [""], ["  ", "\n"]])
def test_empty_argument_text_is_an_empty_object(pieces: list[str]) -> None:
    deltas = [D(tool_call_index=0, tool_call_id="c", tool_name="now")]
    deltas += [D(tool_call_index=0, arguments_text=piece) for piece in pieces]
    assert assemble_response(deltas).tool_calls == (ToolCall("c", "now", {}),)


def test_a_call_without_a_name_fails_the_whole_turn() -> None:
    deltas = [
        D(tool_call_index=0, tool_call_id="ok", tool_name="fine", arguments_text="{}"),
        D(tool_call_index=1, tool_call_id="bad", arguments_text='{"a": 1}'),
    ]
    with pytest.raises(ProviderStreamError) as caught:
        assemble_response(deltas)
    assert caught.value.code == "incomplete_delta"
    assert caught.value.reason == "missing_name"
    assert "index 1" in str(caught.value)
    assert "'bad'" in str(caught.value)


def test_empty_strings_for_name_and_id_count_as_absent() -> None:
    with pytest.raises(ProviderStreamError, match="never received a name"):
        assemble_response([D(tool_call_index=0, tool_call_id="", tool_name="")])
    response = assemble_response([D(tool_call_index=0, tool_call_id="", tool_name="t")])
    assert response.tool_calls[0].id == "call_0"


def test_missing_ids_get_stable_ids_that_avoid_the_provider_ones() -> None:
    deltas = [
        D(tool_call_index=0, tool_name="a"),
        D(tool_call_index=1, tool_call_id="call_1", tool_name="b"),
        D(tool_call_index=2, tool_name="c"),
        D(tool_call_index=3, tool_call_id="call_3_1", tool_name="d"),
        D(tool_call_index=5, tool_name="e"),
    ]
    ids = [call.id for call in assemble_response(deltas).tool_calls]
    assert ids == ["call_0", "call_1", "call_2", "call_3_1", "call_4"]
    assert [call.id for call in assemble_response(deltas).tool_calls] == ids


def test_repeated_name_and_id_on_later_pieces_are_accepted() -> None:
    deltas = [
        D(tool_call_index=0, tool_call_id="c", tool_name="echo", arguments_text='{"a"'),
        D(tool_call_index=0, tool_call_id="c", tool_name="echo", arguments_text=":1}"),
    ]
    assert assemble_response(deltas).tool_calls == (ToolCall("c", "echo", {"a": 1}),)


@pytest.mark.parametrize(
    ("deltas", "reason"),
    [
        (
            [D(tool_call_index=0, tool_name="a"), D(tool_call_index=0, tool_name="b")],
            "conflicting_name",
        ),
        (
            [
                D(tool_call_index=0, tool_call_id="x", tool_name="a"),
                D(tool_call_index=0, tool_call_id="y"),
            ],
            "conflicting_id",
        ),
        (
            [
                D(tool_call_index=0, tool_call_id="x", tool_name="a"),
                D(tool_call_index=1, tool_call_id="x", tool_name="b"),
            ],
            "duplicate_id",
        ),
    ],
)
def test_ambiguous_calls_fail_the_turn(deltas: list[ProviderDelta], reason: str) -> None:
    with pytest.raises(ProviderStreamError) as caught:
        assemble_response(deltas)
    assert caught.value.reason == reason
    assert caught.value.code == "incomplete_delta"


def test_usage_is_the_largest_value_seen_per_field_and_finish_reason_the_last() -> None:
    deltas = [
        D(usage=Usage(120, 1)),
        D(text="x", finish_reason="length"),
        D(usage=Usage(0, 40), finish_reason="tool_calls"),
        D(usage=Usage(-3, 7)),
    ]
    response = assemble_response(deltas)
    assert response.usage == Usage(120, 40)
    assert response.finish_reason == "tool_calls"


def test_the_tool_call_cap_fails_on_the_first_call_past_it() -> None:
    assembler = ToolCallAssembler()
    for index in range(DEFAULT_MAX_TOOL_CALLS):
        assembler.add(D(tool_call_index=index, tool_name="t"))
    assembler.add(D(tool_call_index=0, arguments_text="{}"))
    with pytest.raises(ProviderStreamError) as caught:
        assembler.add(D(tool_call_index=DEFAULT_MAX_TOOL_CALLS, tool_name="t"))
    assert caught.value.reason == "too_many_tool_calls"
    assert str(DEFAULT_MAX_TOOL_CALLS) in str(caught.value)


def test_the_argument_cap_counts_utf8_bytes_and_fails_while_streaming() -> None:
    assembler = ToolCallAssembler(max_argument_bytes=9)
    assembler.add(D(tool_call_index=0, tool_call_id="c", tool_name="t", arguments_text='{"a":'))
    assembler.add(D(tool_call_index=0, arguments_text='"é"'))
    with pytest.raises(ProviderStreamError) as caught:
        assembler.add(D(tool_call_index=0, arguments_text="}"))
    assert caught.value.reason == "arguments_too_large"
    assert "max_argument_bytes=9" in str(caught.value)


def test_the_default_argument_cap_is_the_validation_limit() -> None:
    assert DEFAULT_MAX_ARGUMENT_BYTES == 1024 * 1024
    piece = "x" * 65536
    assembler = ToolCallAssembler()
    assembler.add(D(tool_call_index=0, tool_name="t", arguments_text='{"a":"'))
    for _ in range(15):
        assembler.add(D(tool_call_index=0, arguments_text=piece))
    with pytest.raises(ProviderStreamError, match="max_argument_bytes=1048576"):
        assembler.add(D(tool_call_index=0, arguments_text=piece))


def test_the_text_cap() -> None:
    assembler = ToolCallAssembler(max_text_bytes=4)
    assembler.add(D(text="abcd"))
    with pytest.raises(ProviderStreamError) as caught:
        assembler.add(D(text="e"))
    assert caught.value.reason == "text_too_large"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_tool_calls": 0}, ValueError),
        ({"max_tool_calls": 5000}, ValueError),
        ({"max_argument_bytes": 64 * 1024 * 1024 + 1}, ValueError),
        ({"max_argument_depth": 257}, ValueError),
        ({"max_text_bytes": True}, TypeError),
        ({"max_tool_calls": 2.0}, TypeError),
        ({"max_calls": 2}, TypeError),
    ],
)
def test_limits_out_of_range_are_refused_at_construction(
    options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        ToolCallAssembler(**options)


@pytest.mark.parametrize(
    "delta",
    [
        D(text=b"bytes"),  # type: ignore[arg-type]
        D(tool_call_index="0"),  # type: ignore[arg-type]
        D(tool_call_index=True),
        D(tool_call_index=0, tool_name=3),  # type: ignore[arg-type]
        D(usage={"input_tokens": 1}),  # type: ignore[arg-type]
        D(usage=Usage(1.5, 2)),  # type: ignore[arg-type]
        D(finish_reason=1),  # type: ignore[arg-type]
        "not a delta",
    ],
)
def test_wrongly_typed_deltas_fail_with_provider_stream_error(delta: Any) -> None:
    with pytest.raises(ProviderStreamError) as caught:
        ToolCallAssembler().add(delta)
    assert caught.value.reason == "invalid_delta"


def test_provider_stream_error_is_a_prism_error_and_pickles() -> None:
    err = ProviderStreamError("tool call index 0 never received a name", "missing_name")
    assert isinstance(err, PrismError)
    assert err.code == "incomplete_delta"
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), str(copy), copy.reason) == (ProviderStreamError, str(err), "missing_name")


async def test_assemble_stream_joins_an_async_stream() -> None:
    async def deltas() -> AsyncIterator[ProviderDelta]:
        yield D(text="ok")
        yield D(tool_call_index=0, tool_call_id="c", tool_name="t", arguments_text='{"a"')
        yield D(tool_call_index=0, arguments_text=": [1]}", usage=Usage(2, 3))

    response = await assemble_stream(deltas())
    assert response.text == "ok"
    assert response.tool_calls == (ToolCall("c", "t", {"a": [1]}),)
    assert response.usage == Usage(2, 3)


async def test_assemble_stream_stops_reading_and_closes_the_stream_on_a_refusal() -> None:
    seen: list[int] = []
    closed: list[bool] = []

    async def deltas() -> AsyncIterator[ProviderDelta]:
        try:
            for index in range(10):
                seen.append(index)
                yield D(tool_call_index=index, tool_name="t")
        finally:
            closed.append(True)

    with pytest.raises(ProviderStreamError, match="max_tool_calls=2"):
        await assemble_stream(deltas(), max_tool_calls=2)
    assert seen == [0, 1, 2]
    assert closed == [True]


def test_tool_result_text() -> None:
    assert tool_result_text(Message("tool", "plain", tool_call_id="c")) == "plain"
    value = {"temp": 21, "city": "Paris"}
    assert tool_result_text(Message("tool", value, tool_call_id="c")) == (
        '{"temp":21,"city":"Paris"}'
    )
    assert tool_result_text(Message("tool", None, tool_call_id="c")) == "null"
    error = ErrorInfo(message="Unknown tool: nope", code="unknown_tool")
    assert tool_result_text(Message("tool", None, tool_call_id="c", error=error)) == (
        "Error (unknown_tool): Unknown tool: nope"
    )
    bare = ErrorInfo(message="boom")
    assert tool_result_text(Message("tool", None, tool_call_id="c", error=bare)) == "Error: boom"


@example(content="a\ud800", message="Unknown tool: b\udfff", code="c\udc00")
@given(content=any_text(max_size=6), message=any_text(max_size=6), code=any_text(max_size=6))
def test_tool_result_text_replaces_lone_surrogates_so_a_request_can_carry_it(
    content: str, message: str, code: str
) -> None:
    # The text goes into the next request, which the SDK encodes as UTF-8.
    fixed = replace_lone_surrogates
    assert tool_result_text(Message("tool", content, tool_call_id="c")) == fixed(content)
    value = {content: [content]}
    assert tool_result_text(Message("tool", value, tool_call_id="c")) == (
        orjson.dumps({fixed(content): [fixed(content)]}).decode()
    )
    error = ErrorInfo(message=message, code=code)
    text = tool_result_text(Message("tool", None, tool_call_id="c", error=error))
    assert text == (f"Error ({fixed(code)}): " if code else "Error: ") + fixed(message)


# Hostile and random input.

JUNK = st.sampled_from([1.5, b"x", ["a"], {"a": 1}, True, object()])
PIECES = st.sampled_from(
    ["{", "}", '"a"', ":", "1", ",", "[", "]", '"', "\\", " ", "null", "\ud800", "é", ""]
) | any_text(max_size=6)


DELTAS = st.builds(
    ProviderDelta,
    text=st.none() | any_text(max_size=6) | JUNK,
    tool_call_index=st.none() | st.integers(-2, 5) | JUNK,
    tool_call_id=st.none() | st.sampled_from(["", "a", "b", "call_0", "call_1"]) | JUNK,
    tool_name=st.none() | st.sampled_from(["", "x", "y"]) | JUNK,
    arguments_text=st.none() | PIECES | JUNK,
    usage=st.none() | st.builds(Usage, st.integers(-5, 2**70), st.integers(-5, 2**70)) | JUNK,
    finish_reason=st.none() | st.sampled_from(["stop", "tool_calls"]) | JUNK,
)
REASONS = {
    "invalid_delta",
    "orphan_delta",
    "too_many_tool_calls",
    "arguments_too_large",
    "text_too_large",
    "conflicting_id",
    "conflicting_name",
    "duplicate_id",
    "missing_name",
}


def outcome(
    function: Callable[..., ProviderResponse], *args: Any, **kwargs: Any
) -> tuple[ProviderResponse | None, ProviderStreamError | None]:
    """The function's result, or the ``ProviderStreamError`` it raised (nothing else)."""
    try:
        return function(*args, **kwargs), None
    except ProviderStreamError as err:
        return None, err


@given(st.lists(DELTAS | JUNK, max_size=40))
def test_any_delta_sequence_assembles_or_raises_provider_stream_error(deltas: list[Any]) -> None:
    response, refusal = outcome(
        assemble_response, deltas, max_tool_calls=3, max_argument_bytes=24, max_text_bytes=40
    )
    if refusal is not None:
        assert refusal.reason in REASONS
        return
    assert response is not None
    assert len(response.tool_calls) <= 3
    ids = [call.id for call in response.tool_calls]
    assert len(set(ids)) == len(ids)
    for call in response.tool_calls:
        assert isinstance(call.id, str)
        assert call.id
        assert isinstance(call.name, str)
        assert call.name
        if call.arguments_error is None:
            assert isinstance(call.arguments, dict)
        else:
            assert isinstance(call.arguments, str)
            assert call.arguments_error.code == "invalid_json_arguments"
    assert response.text == "".join(delta.text or "" for delta in deltas)
    assert response.usage.input_tokens >= 0


JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
CALLS = st.lists(
    st.tuples(
        st.sampled_from(["search", "get_weather", "send"]),
        st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4),
    ),
    min_size=1,
    max_size=4,
)


@given(CALLS, st.data())
def test_well_formed_calls_split_and_interleaved_come_back_whole(
    calls: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    queues: list[list[ProviderDelta]] = []
    for index, (name, arguments) in enumerate(calls):
        text = orjson.dumps(arguments).decode()
        size = data.draw(st.integers(1, max(1, len(text))))
        pieces = [D(tool_call_index=index, tool_call_id=f"id{index}", tool_name=name)]
        pieces += [D(tool_call_index=index, arguments_text=piece) for piece in chunks(text, size)]
        queues.append(pieces)
    merged: list[ProviderDelta] = []
    first_seen: list[int] = []
    while any(queues):
        choice = data.draw(st.sampled_from([i for i, queue in enumerate(queues) if queue]))
        if choice not in first_seen:
            first_seen.append(choice)
        merged.append(queues[choice].pop(0))
    response = assemble_response(merged)
    assert response.tool_calls == tuple(
        ToolCall(f"id{index}", calls[index][0], calls[index][1]) for index in first_seen
    )


def test_the_docs_example_runs_and_prints_what_the_docs_say(
    capsys: pytest.CaptureFixture[str],
) -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "providers.md").read_text("utf-8")
    blocks = [
        block
        for block in re.findall(r"```python\n(.*?)```", page, re.DOTALL)
        if "assemble_response(" in block
    ]
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/providers.md", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.strip()
    assert printed == "{'city': 'Paris'} tool_calls"
    assert f"It prints `{printed}`." in page
