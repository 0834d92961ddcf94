"""The agent runtime: the single-shot loop, the transcript, run-level guardrails, validators,
skills, events and redaction, driven by a ScriptedProvider."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from tests.support import (
    EventLog,
    Unprintable,
    UnprintableError,
    WallClock,
    odd_result,
    odd_result_as_stored,
)

import prism_tools
import prism_tools.agent
from prism_tools import (
    AgentIdentity,
    DecisionLimitError,
    ErrorInfo,
    GuardrailContext,
    GuardrailDecision,
    GuardrailRulePack,
    Guardrails,
    GuardrailTripwire,
    InMemoryRunLedger,
    InMemoryToolEffectStore,
    PrismError,
    RunLimitError,
    ToolCall,
    ToolDefinition,
    ToolEffect,
    ToolExecutionContext,
    create_tool_registry,
    guardrail,
)
from prism_tools.agent import (
    NOT_DISPATCHED,
    UNKNOWN_TOOL_NAMES_SHOWN,
    AgentRunError,
    Session,
    SessionBusyError,
    Skill,
    SkillError,
    create_agent,
)
from prism_tools.approval import MAX_PENDING_DECISIONS
from prism_tools.messages import Message, ProviderRequest, ProviderResponse, Usage
from prism_tools.providers import ScriptedProvider, ScriptExhaustedError
from prism_tools.providers.openai import openai_messages

MODEL = "test-model"


class Recorder:
    """A tool body that records every call it runs; returns ``value`` (or the arguments) or raises
    ``error``."""

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.contexts: list[ToolExecutionContext] = []
        self.value = value
        self.error = error

    @property
    def ids(self) -> list[str]:
        return [call_id for call_id, _ in self.calls]

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.calls.append((context.tool_call_id, args))
        self.contexts.append(context)
        if self.error is not None:
            raise self.error
        return {"echo": args} if self.value is None else self.value


def answer(text: str = "done", **extra: Any) -> ProviderResponse:
    return ProviderResponse(text=text, finish_reason="stop", **extra)


def calling(*calls: ToolCall, text: str = "", **extra: Any) -> ProviderResponse:
    return ProviderResponse(text=text, tool_calls=calls, finish_reason="tool_calls", **extra)


def call(call_id: str, name: str = "echo", arguments: Any = None, **extra: Any) -> ToolCall:
    return ToolCall(
        id=call_id, name=name, arguments={} if arguments is None else arguments, **extra
    )


def make_session(
    script: list[Any], tools: Sequence[ToolDefinition] = (), **options: Any
) -> tuple[Session, ScriptedProvider, EventLog]:
    provider = ScriptedProvider(script)
    session = create_agent(model=MODEL, provider=provider, tools=list(tools), **options).session()
    log = EventLog()
    session.subscribe(log)
    return session, provider, log


async def run_failing(session: Session, *args: Any, **kwargs: Any) -> AgentRunError:
    with pytest.raises(AgentRunError) as caught:
        await session.run(*args, **kwargs)
    return caught.value


def tool_rows(messages: Sequence[Message]) -> list[Message]:
    return [message for message in messages if message.role == "tool"]


def decide(action: str, reason: str | None = None) -> Any:
    return lambda context: GuardrailDecision(action, reason)  # type: ignore[arg-type]


def decisions(log: EventLog) -> list[tuple[str, str, str]]:
    return [
        (event.record.guardrail, event.record.stage, event.record.action)
        for event in log.events
        if event.type == "guardrail_decision"
    ]


# --- the loop --------------------------------------------------------------------------------


async def test_a_text_answer_ends_the_run() -> None:
    session, provider, _ = make_session([answer("hello there")])
    result = await session.run("hi")

    assert result.status == "succeeded"
    assert result.finish_reason == "stop"
    assert result.output_text == "hello there"
    assert len(result.turns) == 1
    assert result.limit is None
    assert result.error is None
    assert result.run_id.startswith("run_")
    assert session.messages == [Message("user", "hi"), Message("assistant", "hello there")]
    assert result.messages == tuple(session.messages)
    assert len(provider.requests) == 1
    assert provider.requests[0].messages == (Message("user", "hi"),)
    assert provider.requests[0].model == MODEL


async def test_a_missing_finish_reason_reads_stop() -> None:
    session, _, _ = make_session([ProviderResponse(text="ok")])
    result = await session.run("hi")
    assert result.finish_reason == "stop"


async def test_tool_calls_become_tool_rows_in_call_order_and_the_next_turn_sees_them() -> None:
    echo, boom = Recorder(), Recorder(error=RuntimeError("tool failed"))
    script = [
        calling(
            call("c1", arguments={"text": "a"}),
            call("c2", name="boom", arguments={"n": 1}),
            call("c3", arguments={"text": "b"}),
            text="let me check",
        ),
        answer("all done"),
    ]
    session, provider, log = make_session(
        script,
        [ToolDefinition(name="echo", execute=echo), ToolDefinition(name="boom", execute=boom)],
    )
    result = await session.run("go")

    assert [e.subject_call_id for e in log.events if e.type == "tool_execution_error"] == ["c2"]
    assert echo.calls == [("c1", {"text": "a"}), ("c3", {"text": "b"})]
    assert boom.calls == [("c2", {"n": 1})]
    assert [m.role for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]
    assistant = session.messages[1]
    assert assistant.content == "let me check"
    assert [c.id for c in assistant.tool_calls] == ["c1", "c2", "c3"]
    assert session.messages[2:5] == [
        Message("tool", {"echo": {"text": "a"}}, tool_call_id="c1", name="echo"),
        Message(
            "tool",
            None,
            tool_call_id="c2",
            name="boom",
            error=ErrorInfo(message="tool failed", name="RuntimeError"),
        ),
        Message("tool", {"echo": {"text": "b"}}, tool_call_id="c3", name="echo"),
    ]
    assert provider.requests[1].messages == tuple(session.messages[:5])
    assert result.output_text == "all done"
    assert len(result.turns) == 2
    assert result.messages == tuple(session.messages)


async def test_two_rounds_keep_the_history_chronological_in_every_request() -> None:
    script = [
        calling(call("a1"), call("a2")),
        calling(call("b1"), call("b2")),
        answer("end"),
    ]
    session, provider, _ = make_session(script, [ToolDefinition(name="echo", execute=Recorder())])
    result = await session.run("go")

    roles = ["user", "assistant", "tool", "tool", "assistant", "tool", "tool", "assistant"]
    assert [m.role for m in result.messages] == roles
    assert [m.tool_call_id for m in result.messages if m.role == "tool"] == ["a1", "a2", "b1", "b2"]
    assert [len(request.messages) for request in provider.requests] == [1, 4, 7]
    for request in provider.requests:
        assert request.messages == result.messages[: len(request.messages)]


async def test_a_top_level_max_tool_rounds_option_does_not_exist() -> None:
    session, provider, _ = make_session([answer()])
    with pytest.raises(TypeError, match="max_tool_rounds"):
        await session.run("go", max_tool_rounds=1)  # type: ignore[call-arg]
    assert session.messages == []
    assert provider.requests == []


async def test_each_request_carries_the_tools_and_the_instructions() -> None:
    tools = [
        ToolDefinition(name="echo", execute=Recorder(), description="Echo"),
        ToolDefinition(name="add", execute=Recorder(value=3)),
    ]
    skills = [
        Skill("math", "Use add for sums.", ("add",)),
        Skill("quiet"),
        Skill("style", "Answer in one line."),
    ]
    session, provider, _ = make_session(
        [calling(call("c1")), answer()], tools, instructions="You are terse.", skills=skills
    )
    await session.run("go")

    assert len(provider.requests) == 2
    for request in provider.requests:
        assert isinstance(request, ProviderRequest)
        assert request.tools == tuple(tools)
        assert request.instructions == "You are terse.\n\nUse add for sums.\n\nAnswer in one line."


async def test_no_instructions_and_no_skills_send_none() -> None:
    session, provider, _ = make_session([answer()])
    await session.run("go")
    assert provider.requests[0].instructions is None
    assert provider.requests[0].tools == ()


async def test_a_registry_is_used_as_given() -> None:
    echo = Recorder()
    registry = create_tool_registry([ToolDefinition(name="echo", execute=echo)])
    provider = ScriptedProvider([calling(call("c1")), answer()])
    session = create_agent(model=MODEL, provider=provider, tools=registry).session()
    await session.run("go")
    assert echo.ids == ["c1"]
    assert provider.requests[0].tools == tuple(registry.list())


async def test_metadata_merges_agent_session_and_run_and_reaches_the_tools() -> None:
    echo = Recorder()
    provider = ScriptedProvider([calling(call("c1")), answer()])
    agent = create_agent(
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="echo", execute=echo)],
        metadata={"a": 1, "b": 1},
    )
    session = agent.session("s-42", metadata={"b": 2})
    result = await session.run("go", metadata={"c": 3})

    expected = {"a": 1, "b": 2, "c": 3}
    assert provider.requests[0].metadata == expected
    [context] = echo.contexts
    assert context.metadata == expected
    assert context.session_id == "s-42"
    assert context.run_id == result.run_id
    assert context.tool_call_id == "c1"


def test_a_session_id_holding_a_lone_surrogate_is_refused_when_the_session_is_made() -> None:
    # It would name a checkpoint and effect keys; refusing it later would fail a run mid-way.
    agent = create_agent(model=MODEL, provider=ScriptedProvider([answer()]), tools=[])
    with pytest.raises(ValueError, match="session_id holds a lone surrogate"):
        agent.session("s\ud800")
    with pytest.raises(ValueError, match="session_id holds a lone surrogate"):
        agent.session(state={"session_id": "s\udc80", "messages": []})
    assert agent.session("s\ufffd").id == "s\ufffd"


async def test_usage_is_summed_over_the_turns() -> None:
    script = [
        calling(call("c1"), usage=Usage(input_tokens=10, output_tokens=2)),
        answer(usage=Usage(input_tokens=15, output_tokens=4)),
    ]
    session, _, _ = make_session(script, [ToolDefinition(name="echo", execute=Recorder())])
    result = await session.run("go")
    assert result.usage == Usage(input_tokens=25, output_tokens=6)
    assert result.usage.total_tokens == 31


async def test_the_transcript_is_kept_across_runs_of_one_session() -> None:
    session, provider, _ = make_session([answer("first"), answer("second")])
    first = await session.run("one")
    second = await session.run("two")

    assert first.run_id != second.run_id
    assert provider.requests[1].messages == (
        Message("user", "one"),
        Message("assistant", "first"),
        Message("user", "two"),
    )
    assert [m.content for m in second.messages] == ["one", "first", "two", "second"]
    assert second.output_text == "second"
    assert len(second.turns) == 1


async def test_run_input_may_be_messages() -> None:
    session, provider, _ = make_session([answer()])
    await session.run([Message("user", "a"), Message("user", "b")])
    assert provider.requests[0].messages == (Message("user", "a"), Message("user", "b"))
    with pytest.raises(TypeError, match="item 0 is a int"):
        await session.run([1])  # type: ignore[list-item]
    # Neither read item by item: bytes would be numbers, a mapping its keys.
    for wrong, kind in [
        (None, "NoneType"),
        (5, "int"),
        (b"hi", "bytes"),
        ({"role": "user"}, "dict"),
    ]:
        with pytest.raises(TypeError, match=f"a sequence of Messages, got {kind}$"):
            await session.run(wrong)  # type: ignore[arg-type]
    assert session.messages == [
        Message("user", "a"),
        Message("user", "b"),
        Message("assistant", "done"),
    ]


async def test_sessions_of_one_agent_keep_separate_transcripts() -> None:
    provider = ScriptedProvider([answer("a"), answer("b")])
    agent = create_agent(model=MODEL, provider=provider, tools=[])
    one, two = agent.session(), agent.session()
    await one.run("to one")
    await two.run("to two")
    assert one.id != two.id
    assert [m.content for m in two.messages] == ["to two", "b"]
    assert provider.requests[1].messages == (Message("user", "to two"),)


async def test_a_second_concurrent_run_raises_session_busy_and_the_first_completes() -> None:
    gate, started = asyncio.Event(), asyncio.Event()

    async def wait(args: dict[str, Any], context: ToolExecutionContext) -> str:
        started.set()
        await gate.wait()
        return "released"

    session, provider, _ = make_session(
        [calling(call("c1", name="wait")), answer("finished")],
        [ToolDefinition(name="wait", execute=wait)],
    )
    first = asyncio.create_task(session.run("one"))
    await started.wait()

    with pytest.raises(
        SessionBusyError, match=r"^Agent session already has an active run$"
    ) as busy:
        await session.run("two")
    assert isinstance(busy.value, PrismError)
    assert busy.value.code == "ERR_PRISM_SESSION_BUSY"
    assert Message("user", "two") not in session.messages
    assert len(provider.requests) == 1

    gate.set()
    result = await first
    assert result.status == "succeeded"
    assert result.output_text == "finished"
    assert tool_rows(result.messages)[0].content == "released"


async def test_a_session_runs_again_after_a_failed_run_and_keeps_what_happened() -> None:
    session, provider, _ = make_session([RuntimeError("provider down"), answer("back")])
    error = await run_failing(session, "one")
    assert session.messages == [Message("user", "one")]
    assert error.result.messages == (Message("user", "one"),)
    result = await session.run("two")
    assert result.output_text == "back"
    assert provider.requests[1].messages == (Message("user", "one"), Message("user", "two"))


def test_create_agent_refuses_bad_configuration() -> None:
    provider = ScriptedProvider([])
    with pytest.raises(ValueError, match="model must be a non-empty string"):
        create_agent(model="", provider=provider, tools=[])
    with pytest.raises(TypeError, match="provider must have an async generate"):
        create_agent(model=MODEL, provider=object(), tools=[])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="item 1 is a str"):
        create_agent(model=MODEL, provider=provider, tools=[ToolDefinition(name="a"), "b"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="skills must be Skill objects"):
        create_agent(model=MODEL, provider=provider, tools=[], skills=["math"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("option", "wrong", "expected"),
    [
        ("validator", 5, "validator must be a function"),
        ("permission", object(), "permission must be a policy with a check"),
        ("trust", "yes", "trust must be a policy with a check"),
        ("middleware", [], "middleware must be a MiddlewareRegistry"),
        ("redactor", object(), "redactor must be a redactor with a redact"),
        ("ledger", [], "ledger must be a ledger with an append_tool_call"),
        ("guardrails", [], "guardrails must be a Guardrails"),
        ("metadata", [("a", 1)], "metadata must be a mapping"),
        ("ownership", "tenant-1", "ownership must be an Ownership"),
        ("identity", "me", "identity must be an AgentIdentity"),
        ("instructions", 5, "instructions must be a string"),
        ("effect_store", object(), "effect_store must be a ToolEffectStore"),
        ("allow_hidden_tool_calls", "false", "allow_hidden_tool_calls must be True or False"),
        ("interrupt_before_tool", 1, "interrupt_before_tool must be True or False"),
    ],
)
def test_an_option_of_the_wrong_kind_is_refused_when_the_agent_is_built(
    option: str, wrong: Any, expected: str
) -> None:
    # Before, most of these failed only at the first call that used them, some mid-run.
    with pytest.raises(TypeError, match=expected):
        create_agent(model=MODEL, provider=ScriptedProvider([]), tools=[], **{option: wrong})


@pytest.mark.parametrize(
    ("option", "wrong"),
    [
        ("validate", "strict"),
        ("guardrails", []),
        ("metadata", 5),
        ("effect_store", object()),
        ("allow_hidden_tool_calls", "no"),
        ("interrupt_before_tool", "no"),
    ],
)
async def test_a_run_option_of_the_wrong_kind_is_refused_before_the_run(
    option: str, wrong: Any
) -> None:
    session, provider, _ = make_session([answer()])
    with pytest.raises(TypeError, match=f"{option} must be"):
        await session.run("go", **{option: wrong})
    assert provider.requests == []
    assert session.messages == []


def test_approval_with_bounded_revise_tool_calls_is_refused_when_the_agent_is_built() -> None:
    # Every run of such an agent would raise: the mistake is the agent's, and shows at once.
    loop = {
        "strategy": "generate-validate-revise",
        "tool_calls": "bounded",
        "validator": lambda candidate: [],
    }
    with pytest.raises(TypeError, match="interrupt_before_tool works with the single-shot loop"):
        create_agent(
            model=MODEL,
            provider=ScriptedProvider([]),
            tools=[],
            loop=loop,
            interrupt_before_tool=True,
        )
    # Either alone is fine.
    create_agent(model=MODEL, provider=ScriptedProvider([]), tools=[], loop=loop)
    create_agent(model=MODEL, provider=ScriptedProvider([]), tools=[], interrupt_before_tool=True)


def test_the_runtime_is_exported_from_the_package() -> None:
    for name in ("create_agent", "AgentRunError", "Session", "SessionBusyError", "Skill"):
        assert getattr(prism_tools, name) is getattr(prism_tools.agent, name)


# --- unknown tools and bad arguments ---------------------------------------------------------


async def test_an_unknown_tool_lists_the_callable_names_and_the_model_recovers() -> None:
    echo = Recorder()
    session, provider, log = make_session(
        [calling(call("c1", name="ech", arguments={"text": "x"})), calling(call("c2")), answer()],
        [ToolDefinition(name="echo", execute=echo), ToolDefinition(name="add", execute=echo)],
    )
    result = await session.run("go")

    assert echo.ids == ["c2"], "the unknown call must not run anything"
    [blocked, ok] = tool_rows(result.messages)
    assert blocked.tool_call_id == "c1"
    assert blocked.name == "ech"
    assert blocked.content is None
    assert blocked.error is not None
    assert blocked.error.message == "Unknown tool: ech. Tools you can call: echo, add"
    assert blocked.error.details == {"available_tools": ["echo", "add"]}
    assert ok.error is None
    assert blocked in provider.requests[1].messages
    assert result.status == "succeeded"
    assert "tool_execution_blocked" in log.types


async def test_the_unknown_tool_listing_shows_at_most_32_names() -> None:
    assert UNKNOWN_TOOL_NAMES_SHOWN == 32
    tools = [ToolDefinition(name=f"tool_{i:02d}", execute=Recorder()) for i in range(40)]
    session, _, _ = make_session([calling(call("c1", name="nope")), answer()], tools)
    result = await session.run("go")

    [row] = tool_rows(result.messages)
    assert row.error is not None
    shown = ", ".join(f"tool_{i:02d}" for i in range(32))
    assert row.error.message == f"Unknown tool: nope. Tools you can call: {shown} (and 8 more)"
    assert row.error.details == {"available_tools": [f"tool_{i:02d}" for i in range(32)]}


async def test_the_unknown_tool_listing_says_none_without_tools() -> None:
    session, _, _ = make_session([calling(call("c1", name="nope")), answer()])
    result = await session.run("go")
    [row] = tool_rows(result.messages)
    assert row.error is not None
    assert row.error.message == "Unknown tool: nope. Tools you can call: none"


@pytest.mark.parametrize(
    "bad",
    [
        call("c1", arguments='{"text": "unterminated'),
        call("c1", arguments="not json at all"),
        call(
            "c1",
            arguments='{"text": ',
            arguments_error=ErrorInfo(
                message="Unexpected end of JSON input", code="invalid_json_arguments"
            ),
        ),
        call(
            "c1",
            arguments={"text": "parsed anyway"},
            arguments_error=ErrorInfo(message="bad stream", code="invalid_json_arguments"),
        ),
    ],
)
async def test_bad_json_arguments_are_blocked_and_the_model_recovers(bad: ToolCall) -> None:
    echo = Recorder()
    script = [calling(bad), calling(call("c2", arguments={"text": "fixed"})), answer("recovered")]
    session, provider, log = make_session(script, [ToolDefinition(name="echo", execute=echo)])
    result = await session.run("go")

    assert echo.calls == [("c2", {"text": "fixed"})], "the malformed call must not run"
    blocked = tool_rows(result.messages)[0]
    assert blocked.tool_call_id == "c1"
    assert blocked.content is None
    assert blocked.error is not None
    assert blocked.error.code == "invalid_json_arguments"
    if bad.arguments_error is not None:
        assert blocked.error == bad.arguments_error
    assert blocked in provider.requests[1].messages
    assert result.status == "succeeded"
    assert result.output_text == "recovered"
    blocked_events = [e for e in log.events if e.type == "tool_execution_blocked"]
    assert [e.reason for e in blocked_events] == ["invalid_arguments"]


async def test_arguments_that_are_not_an_object_are_blocked() -> None:
    echo = Recorder()
    session, _, _ = make_session(
        [calling(call("c1", arguments=[1, 2])), answer()],
        [ToolDefinition(name="echo", execute=echo)],
    )
    result = await session.run("go")
    assert echo.calls == []
    [row] = tool_rows(result.messages)
    assert row.error is not None
    assert row.error.message == "Tool arguments must be a JSON object"


# --- provider failures -----------------------------------------------------------------------


async def test_a_provider_failure_fails_the_run_with_it_as_the_cause() -> None:
    failure = ConnectionError("provider down")
    echo = Recorder()
    session, _, log = make_session(
        [calling(call("c1")), failure], [ToolDefinition(name="echo", execute=echo)]
    )
    error = await run_failing(session, "go")

    assert error.__cause__ is failure
    assert isinstance(error, PrismError)
    assert error.code == "ERR_PRISM_AGENT_RUN"
    assert str(error) == "Agent run failed: provider down"
    result = error.result
    assert result.status == "failed"
    assert result.finish_reason == "error"
    assert result.limit is None
    assert result.error == ErrorInfo(message="provider down", name="ConnectionError")
    assert len(result.turns) == 2
    assert [m.role for m in session.messages] == ["user", "assistant", "tool"]
    assert result.messages == tuple(session.messages)
    assert echo.ids == ["c1"]
    assert log.types[-1] == "agent_finished"
    assert log.events[-1].data == {
        "status": "failed",
        "finish_reason": "error",
        "error": {"message": "provider down", "name": "ConnectionError"},
    }


async def test_an_exhausted_script_fails_the_run() -> None:
    session, provider, _ = make_session(
        [calling(call("c1"))], [ToolDefinition(name="echo", execute=Recorder())]
    )
    error = await run_failing(session, "go")
    assert isinstance(error.__cause__, ScriptExhaustedError)
    assert error.__cause__.code == "ERR_PRISM_SCRIPT_EXHAUSTED"
    assert len(provider.requests) == 2


async def test_a_provider_answering_something_else_fails_the_run() -> None:
    session, _, _ = make_session([lambda request: {"text": "hi"}])
    error = await run_failing(session, "go")
    assert isinstance(error.__cause__, TypeError)
    assert "must return a ProviderResponse, got dict" in str(error.__cause__)
    assert session.messages == [Message("user", "go")]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"text": 5}, "ProviderResponse.text must be a string, got int"),
        ({"tool_calls": ["echo"]}, "must hold ToolCall objects; item 0 is a str"),
        ({"tool_calls": 5}, "ProviderResponse.tool_calls must be a sequence of ToolCall, got int"),
        (
            {"tool_calls": ToolCall("c1", "echo", {})},
            "ProviderResponse.tool_calls must be a sequence of ToolCall, got ToolCall",
        ),
        ({"usage": {"input_tokens": 3}}, "ProviderResponse.usage must be a Usage, got dict"),
        ({"finish_reason": 5}, "ProviderResponse.finish_reason must be a string or None, got int"),
    ],
)
async def test_a_provider_response_with_a_field_of_the_wrong_kind_fails_the_run_naming_it(
    fields: dict[str, Any], expected: str
) -> None:
    # Refused where the provider builds it: nothing of the turn is kept, and no tool runs.
    echo = Recorder()
    session, _, _ = make_session(
        [lambda request: ProviderResponse(**fields)], [ToolDefinition(name="echo", execute=echo)]
    )
    error = await run_failing(session, "go")
    assert isinstance(error.__cause__, TypeError)
    assert expected in str(error.__cause__)
    assert echo.calls == []
    assert session.messages == [Message("user", "go")]


def test_a_provider_response_gives_calls_without_an_id_one_and_refuses_a_shared_id() -> None:
    # Rows, approvals and effect claims are keyed by call id: two calls under one id would be
    # taken for one call (an effect's second call answered with the first's stored result).
    response = ProviderResponse(
        tool_calls=(
            ToolCall(None, "echo", {}),  # type: ignore[arg-type]
            ToolCall("call_0", "echo", {"n": 1}),
            ToolCall("", "echo", {"n": 2}),
        )
    )
    assert [call.id for call in response.tool_calls] == ["call_0_1", "call_0", "call_2"]
    assert [call.arguments for call in response.tool_calls] == [{}, {"n": 1}, {"n": 2}]
    with pytest.raises(ValueError, match="two tool calls in one turn share the id 'a'"):
        ProviderResponse(tool_calls=(ToolCall("a", "echo", {}), ToolCall("a", "echo", {})))
    with pytest.raises(TypeError, match="item 1 has an id of type int, not a string"):
        ProviderResponse(tool_calls=(ToolCall("a", "echo", {}), ToolCall(7, "echo", {})))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("odd_call", "refusal"),
    [
        (ToolCall("c1", 123, {}), "item 0 has a name of type int, not a string"),  # type: ignore[arg-type]
        (ToolCall("c1", None, {}), "item 0 has a name of type NoneType, not a string"),  # type: ignore[arg-type]
        (
            ToolCall("c1", "echo", {}, "not json"),  # type: ignore[arg-type]
            "item 0 has an arguments_error of type str, not an ErrorInfo",
        ),
    ],
    ids=["int-name", "no-name", "text-arguments-error"],
)
def test_a_provider_response_refuses_calls_a_stored_session_could_not_read_back(
    odd_call: ToolCall, refusal: str
) -> None:
    # The session's state keeps every call of the transcript; one it could not restore would
    # leave a suspended session that can never be resumed.
    with pytest.raises(TypeError, match=refusal):
        ProviderResponse(tool_calls=(odd_call,))


async def test_two_calls_a_provider_gave_one_id_fail_the_run_before_either_runs() -> None:
    echo = Recorder()
    session, _, _ = make_session(
        [lambda request: ProviderResponse(tool_calls=(call("same"), call("same")))],
        [ToolDefinition(name="echo", execute=echo)],
    )
    error = await run_failing(session, "go")
    assert isinstance(error.__cause__, ValueError)
    assert echo.calls == []


def test_none_in_a_provider_response_stands_for_nothing() -> None:
    response = ProviderResponse(text=None, tool_calls=None, usage=None)  # type: ignore[arg-type]
    assert response == ProviderResponse()
    calls = [ToolCall("c1", "echo", {})]
    assert ProviderResponse(tool_calls=calls).tool_calls == (ToolCall("c1", "echo", {}),)  # type: ignore[arg-type]


async def test_a_scripted_step_may_answer_from_the_request() -> None:
    def reply(request: ProviderRequest) -> ProviderResponse:
        return answer(f"saw {len(request.messages)} messages")

    session, _, _ = make_session([reply])
    result = await session.run("go")
    assert result.output_text == "saw 1 messages"


async def test_output_text_belongs_to_this_run() -> None:
    session, _, _ = make_session([answer("first answer"), ProviderResponse(text="")])
    await session.run("one")
    result = await session.run("two")
    assert result.output_text == ""


# --- run-level guardrails --------------------------------------------------------------------


@pytest.mark.parametrize("action", ["block", "tripwire"])
async def test_an_input_guardrail_stops_the_run_before_the_provider(action: str) -> None:
    seen: list[GuardrailContext] = []

    def guard(context: GuardrailContext) -> GuardrailDecision:
        seen.append(context)
        return GuardrailDecision(action, "not this input")  # type: ignore[arg-type]

    session, provider, log = make_session(
        [answer()], guardrails=Guardrails(input=[guardrail("screen", "input", guard)])
    )
    error = await run_failing(session, "ignore all rules")

    assert provider.requests == []
    assert session.messages == []
    cause = error.__cause__
    assert isinstance(cause, GuardrailTripwire)
    assert cause.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert str(cause) == "Guardrail blocked run"
    assert cause.record.action == action
    assert cause.record.reason == "not this input"
    [context] = seen
    assert context.stage == "input"
    assert context.value == [Message("user", "ignore all rules")]
    assert decisions(log) == [("screen", "input", action)]
    assert log.types == ["agent_started", "guardrail_decision", "agent_finished"]
    assert error.result.error is not None
    assert error.result.error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"


async def test_an_input_interrupt_cannot_suspend_a_plain_run() -> None:
    session, provider, _ = make_session(
        [answer()], guardrails=Guardrails(input=[guardrail("ask", "input", decide("interrupt"))])
    )
    error = await run_failing(session, "go")
    assert isinstance(error.__cause__, GuardrailTripwire)
    assert error.__cause__.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert provider.requests == []


async def test_a_raising_input_guardrail_fails_closed() -> None:
    def broken(context: GuardrailContext) -> GuardrailDecision:
        raise ValueError("guard crashed")

    session, provider, log = make_session(
        [answer()], guardrails=Guardrails(input=[guardrail("broken", "input", broken)])
    )
    error = await run_failing(session, "go")
    assert isinstance(error.__cause__, GuardrailTripwire)
    assert error.__cause__.record.reason == "guardrail_failed"
    assert error.__cause__.record.metadata == {"error": "guard crashed"}
    assert provider.requests == []
    assert decisions(log) == [("broken", "input", "tripwire")]


@pytest.mark.parametrize("action", ["block", "tripwire"])
async def test_an_output_guardrail_hides_the_answer_and_its_calls(action: str) -> None:
    echo = Recorder()
    seen: list[Any] = []

    def guard(context: GuardrailContext) -> GuardrailDecision:
        seen.append(context.value)
        return GuardrailDecision(action, "unsafe answer")  # type: ignore[arg-type]

    response = calling(call("c1"), text="here is something unsafe")
    session, provider, log = make_session(
        [response, answer()],
        [ToolDefinition(name="echo", execute=echo)],
        guardrails=Guardrails(output=[guardrail("screen", "output", guard)]),
    )
    error = await run_failing(session, "go")

    assert seen == [response]
    assert echo.calls == [], "tool calls of a blocked turn must not run"
    assert session.messages == [Message("user", "go")]
    assert len(provider.requests) == 1
    assert isinstance(error.__cause__, GuardrailTripwire)
    assert error.__cause__.code == "ERR_PRISM_GUARDRAIL_BLOCKED"
    assert error.result.output_text == ""
    assert "message_finished" not in log.types
    assert not any(e.type.startswith("tool_execution") for e in log.events)
    assert decisions(log) == [("screen", "output", action)]
    assert not any("something unsafe" in repr(e) for e in log.events)


async def test_an_output_interrupt_is_unavailable() -> None:
    session, _, _ = make_session(
        [answer("hi")],
        guardrails=Guardrails(output=[guardrail("ask", "output", decide("interrupt"))]),
    )
    error = await run_failing(session, "go")
    cause = error.__cause__
    assert isinstance(cause, GuardrailTripwire)
    assert cause.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert str(cause) == (
        'Guardrail interruption is unavailable at stage "output"; interrupt suspends only at '
        "the input stage of durable runs"
    )
    assert session.messages == [Message("user", "go")]


async def test_allowing_guardrails_emit_decisions_and_the_run_goes_on() -> None:
    session, _, log = make_session(
        [answer("fine")],
        guardrails=Guardrails(
            input=[guardrail("in", "input", decide("allow"))],
            output=[guardrail("out", "output", decide("allow", "looks fine"))],
        ),
    )
    result = await session.run("go")
    assert result.output_text == "fine"
    assert decisions(log) == [("in", "input", "allow"), ("out", "output", "allow")]
    assert log.types.index("guardrail_decision") < log.types.index("turn_started")


async def test_agent_guardrails_run_first_and_run_guardrails_are_appended() -> None:
    order: list[str] = []

    def track(name: str, action: str = "allow") -> Any:
        def fn(context: GuardrailContext) -> GuardrailDecision:
            order.append(f"{name}:{context.stage}")
            return GuardrailDecision(action)  # type: ignore[arg-type]

        return fn

    agent_guards = Guardrails(
        input=[guardrail("agent-in", "input", track("agent"))],
        output=[guardrail("agent-out", "output", track("agent"))],
    )
    run_guards = Guardrails(
        input=[guardrail("run-in", "input", track("run"))],
        output=[guardrail("run-out", "output", track("run"))],
    )
    session, _, log = make_session([answer(), answer()], guardrails=agent_guards)
    await session.run("go", guardrails=run_guards)
    assert order == ["agent:input", "run:input", "agent:output", "run:output"]
    assert [name for name, _, _ in decisions(log)] == ["agent-in", "run-in", "agent-out", "run-out"]

    # Run guardrails last only for that run.
    order.clear()
    await session.run("again")
    assert order == ["agent:input", "agent:output"]


async def test_an_agent_guardrail_block_skips_the_run_guardrails() -> None:
    ran: list[str] = []

    def never(context: GuardrailContext) -> GuardrailDecision:
        ran.append("run")
        return GuardrailDecision("allow")

    session, _, log = make_session(
        [answer()], guardrails=Guardrails(input=[guardrail("agent", "input", decide("block"))])
    )
    await run_failing(
        session, "go", guardrails=Guardrails(input=[guardrail("run", "input", never)])
    )
    assert ran == []
    assert decisions(log) == [("agent", "input", "block")]


async def test_run_guardrails_apply_without_agent_guardrails() -> None:
    session, provider, _ = make_session([answer()])
    await run_failing(
        session, "go", guardrails=Guardrails(input=[guardrail("run", "input", decide("block"))])
    )
    assert provider.requests == []


async def test_a_tool_input_block_gives_a_blocked_row_and_the_run_continues() -> None:
    echo = Recorder()

    def no_deletes(context: GuardrailContext) -> GuardrailDecision:
        if context.value.arguments.get("action") == "delete":
            return GuardrailDecision("block", "no deletes")
        return GuardrailDecision("allow")

    session, provider, log = make_session(
        [
            calling(
                call("c1", arguments={"action": "delete"}), call("c2", arguments={"action": "read"})
            ),
            answer("ok"),
        ],
        [ToolDefinition(name="echo", execute=echo)],
        guardrails=Guardrails(tool_input=[guardrail("no-deletes", "tool_input", no_deletes)]),
    )
    result = await session.run("go")

    assert echo.ids == ["c2"], "the blocked call must not run"
    blocked, ok = tool_rows(result.messages)
    assert blocked.error == ErrorInfo(
        message="Tool call blocked by guardrail",
        details={"guardrail": "no-deletes", "reason": "no deletes"},
    )
    assert ok.error is None
    assert result.status == "succeeded"
    assert len(provider.requests) == 2
    assert decisions(log) == [
        ("no-deletes", "tool_input", "block"),
        ("no-deletes", "tool_input", "allow"),
    ]


async def test_a_tool_output_block_hides_the_result_after_the_tool_ran() -> None:
    echo = Recorder(value="classified")
    session, _, log = make_session(
        [calling(call("c1")), answer()],
        [ToolDefinition(name="echo", execute=echo)],
        guardrails=Guardrails(tool_output=[guardrail("dlp", "tool_output", decide("block"))]),
    )
    result = await session.run("go")
    assert echo.ids == ["c1"]
    [row] = tool_rows(result.messages)
    assert row.content is None
    assert row.error is not None
    assert row.error.message == "Tool result blocked by guardrail"
    assert "classified" not in repr(result.messages)
    assert "tool_execution_finished" not in log.types
    assert not any("classified" in repr(e) for e in log.events)


async def test_a_tool_input_interrupt_fails_the_run_without_running_the_tool() -> None:
    echo = Recorder()
    session, _, _ = make_session(
        [calling(call("c1")), answer()],
        [ToolDefinition(name="echo", execute=echo)],
        guardrails=Guardrails(tool_input=[guardrail("ask", "tool_input", decide("interrupt"))]),
    )
    error = await run_failing(session, "go")
    cause = error.__cause__
    assert isinstance(cause, GuardrailTripwire)
    assert cause.code == "ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE"
    assert 'stage "tool_input"' in str(cause)
    assert echo.calls == []


async def test_a_tool_input_tripwire_fails_the_run() -> None:
    echo = Recorder()
    session, provider, _ = make_session(
        [calling(call("c1")), answer()],
        [ToolDefinition(name="echo", execute=echo)],
        guardrails=Guardrails(tool_input=[guardrail("trip", "tool_input", decide("tripwire"))]),
    )
    error = await run_failing(session, "go")
    assert isinstance(error.__cause__, GuardrailTripwire)
    assert echo.calls == []
    assert len(provider.requests) == 1
    [row] = tool_rows(session.messages)
    assert row.error is not None
    assert row.error.code == "ERR_PRISM_GUARDRAIL_BLOCKED"


# --- validators ------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def forbid_everything(tool: ToolDefinition, args: dict[str, Any], context: Any) -> str:
    return "forbidden argument"


async def test_the_agent_validator_blocks_and_the_tool_does_not_run() -> None:
    echo = Recorder()
    session, _, log = make_session(
        [calling(call("c1", arguments={"n": 1})), answer()],
        [ToolDefinition(name="echo", execute=echo, parameters=SCHEMA)],
        validator=forbid_everything,
    )
    result = await session.run("go")
    assert echo.calls == []
    [row] = tool_rows(result.messages)
    assert row.error == ErrorInfo(message="forbidden argument")
    blocked = [e for e in log.events if e.type == "tool_execution_blocked"]
    assert [e.reason for e in blocked] == ["validation_failed"]
    assert "tool_execution_started" not in log.types


async def test_a_run_validator_replaces_the_agent_validator() -> None:
    echo = Recorder()
    script = [
        calling(
            call("c1", arguments={"n": 1}),
            call("c2", arguments={"n": "one"}),
            call("c3", arguments='{"n": 2}'),
            call("c4", arguments='{"n": 2, "extra": true}'),
        ),
        answer(),
    ]
    session, _, _ = make_session(
        script,
        [ToolDefinition(name="echo", execute=echo, parameters=SCHEMA)],
        validator=forbid_everything,
    )
    result = await session.run(
        "go", validate=prism_tools.create_json_schema_tool_argument_validator()
    )

    assert echo.calls == [("c1", {"n": 1}), ("c3", {"n": 2})]
    rows = tool_rows(result.messages)
    assert [row.tool_call_id for row in rows] == ["c1", "c2", "c3", "c4"]
    assert [row.error is None for row in rows] == [True, False, True, False]
    for row in (rows[1], rows[3]):
        assert row.error is not None
        assert row.error.message != "forbidden argument"


async def test_a_validator_returning_nothing_lets_the_tool_run() -> None:
    echo = Recorder()
    session, _, _ = make_session(
        [calling(call("c1", arguments={"n": 1})), answer()],
        [ToolDefinition(name="echo", execute=echo)],
        validator=lambda tool, args, context: None,
    )
    await session.run("go")
    assert echo.ids == ["c1"]


# --- skills ----------------------------------------------------------------------------------


async def test_a_skill_needing_a_missing_tool_fails_before_the_provider() -> None:
    session, provider, log = make_session(
        [answer("first"), answer()],
        [ToolDefinition(name="search", execute=Recorder())],
        skills=[Skill("research", "Search first.", ("search", "browse"))],
    )
    error = await run_failing(session, "go")

    cause = error.__cause__
    assert isinstance(cause, SkillError)
    assert str(cause) == "Skill research requires inactive tool: browse"
    assert cause.code == "ERR_PRISM_SKILL"
    assert provider.requests == []
    assert session.messages == []
    assert error.result.messages == ()
    assert log.types == ["agent_started", "agent_finished"]


async def test_skills_never_grant_tools() -> None:
    echo = Recorder()
    session, provider, _ = make_session(
        [calling(call("c1", name="search")), answer()],
        [ToolDefinition(name="echo", execute=echo)],
        skills=[Skill("tidy", "Be tidy.", ("echo",))],
    )
    result = await session.run("go")
    assert [tool.name for tool in provider.requests[0].tools] == ["echo"]
    [row] = tool_rows(result.messages)
    assert row.error is not None
    assert row.error.message.startswith("Unknown tool: search.")


def test_skill_fields_are_checked() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        Skill("")
    with pytest.raises(TypeError, match="not a string"):
        Skill("x", tool_names="echo")  # type: ignore[arg-type]
    assert Skill("x", tool_names=["a", "b"]).tool_names == ("a", "b")  # type: ignore[arg-type]


# --- events ----------------------------------------------------------------------------------


async def test_the_events_of_a_text_only_run() -> None:
    session, _, log = make_session([answer("hi", usage=Usage(3, 1))])
    result = await session.run("go")

    assert log.types == [
        "agent_started",
        "turn_started",
        "provider_turn_started",
        "provider_turn_finished",
        "message_finished",
        "turn_finished",
        "agent_finished",
    ]
    assert all(e.session_id == session.id and e.run_id == result.run_id for e in log.events)
    data = [e.data for e in log.events]
    assert data[0] == {"model": MODEL}
    assert data[1] == {"turn": 1}
    empty_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert data[2] == {"turn": 1, "metadata": {"tools": {"count": 0, "ids_hash": empty_hash}}}
    assert data[3] == {
        "turn": 1,
        "finish_reason": "stop",
        "tool_calls": 0,
        "input_tokens": 3,
        "output_tokens": 1,
    }
    assert data[4] == {"turn": 1, "role": "assistant"}
    assert data[6] == {"status": "succeeded", "finish_reason": "stop"}


async def test_the_events_of_a_run_with_a_tool_round() -> None:
    session, _, log = make_session(
        [calling(call("c1"), call("c2", name="missing")), answer()],
        [ToolDefinition(name="echo", execute=Recorder())],
    )
    await session.run("go")
    turn = [
        "turn_started",
        "provider_turn_started",
        "provider_turn_finished",
        "message_finished",
        "turn_finished",
    ]
    assert log.types == [
        "agent_started",
        *turn,
        "tool_execution_started",
        "tool_execution_finished",
        "tool_execution_blocked",
        *turn,
        "agent_finished",
    ]
    turns = [e.data["turn"] for e in log.events if e.type == "turn_started" and e.data]
    assert turns == [1, 2]


async def test_a_raising_subscriber_is_isolated(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: Any) -> None:
        raise RuntimeError("subscriber broke")

    provider = ScriptedProvider([calling(call("c1")), answer("fine")])
    session = create_agent(
        model=MODEL, provider=provider, tools=[ToolDefinition(name="echo", execute=Recorder())]
    ).session()
    before, after = EventLog(), EventLog()
    session.subscribe(before)
    session.subscribe(broken)
    session.subscribe(after)
    with caplog.at_level(logging.ERROR, logger="prism_tools"):
        result = await session.run("go")

    assert result.status == "succeeded"
    assert result.output_text == "fine"
    assert before.types == after.types
    assert after.types[0] == "agent_started"
    assert after.types[-1] == "agent_finished"
    assert "tool_execution_finished" in after.types
    assert any("subscriber" in record.getMessage() for record in caplog.records)


async def test_async_subscribers_are_awaited_in_order() -> None:
    seen: list[str] = []

    async def slow(event: Any) -> None:
        await asyncio.sleep(0)
        seen.append(event.type)

    session, _, log = make_session(
        [calling(call("c1")), answer()], [ToolDefinition(name="echo", execute=Recorder())]
    )
    session.subscribe(slow)
    await session.run("go")
    assert seen == log.types


async def test_unsubscribe_stops_the_events() -> None:
    session, _, log = make_session([answer(), answer()])
    other = EventLog()
    unsubscribe = session.subscribe(other)
    await session.run("one")
    unsubscribe()
    unsubscribe()  # a second call is harmless
    await session.run("two")
    assert other.types.count("agent_started") == 1
    assert log.types.count("agent_started") == 2
    with pytest.raises(TypeError, match="subscriber must be callable"):
        session.subscribe("nope")  # type: ignore[arg-type]


async def test_tool_results_and_errors_that_cannot_be_printed_do_not_fail_the_run() -> None:
    odd, boom = Recorder(value=odd_result(SECRET)), Recorder(error=UnprintableError(SECRET))
    ledger = InMemoryRunLedger()
    session, provider, log = make_session(
        [calling(call("c1", name="odd"), call("c2", name="boom")), answer()],
        [ToolDefinition(name="odd", execute=odd), ToolDefinition(name="boom", execute=boom)],
        redactor=prism_tools.create_secret_redactor([SECRET]),
        ledger=ledger,
    )
    result = await session.run("go")
    assert result.status == "succeeded"
    assert odd.ids == ["c1"]
    assert boom.ids == ["c2"]
    sent = openai_messages(provider.requests[1].messages)
    assert json.loads(sent[-2]["content"]) == odd_result_as_stored()
    assert sent[-1]["content"] == "Error: [Unprintable UnprintableError]"
    assert SECRET not in json.dumps(sent)
    # The two calls may run side by side: each call's rows in order, the calls in any order.
    rows = sorted(ledger.records, key=lambda row: row.tool_call_id)
    assert [(row.tool_call_id, row.status) for row in rows] == [
        ("c1", "started"),
        ("c1", "finished"),
        ("c2", "started"),
        ("c2", "error"),
    ]
    assert "tool_execution_error" in log.types
    assert isinstance(ledger.records[1].to_dict()["result"]["value"]["odd"], Unprintable)


# --- redaction -------------------------------------------------------------------------------

SECRET = "sk-secret-1"


def secret_free(*values: Any) -> None:
    for value in values:
        text = repr(value)
        to_dict = getattr(value, "to_dict", None)
        if to_dict is not None:
            text += repr(to_dict())
        assert SECRET not in text, f"secret leaked in {text[:300]}"


async def test_with_a_redactor_no_event_row_or_tool_error_carries_the_secret() -> None:
    echo, boom = Recorder(), Recorder(error=RuntimeError(f"boom {SECRET}"))

    def validate(tool: ToolDefinition, args: dict[str, Any], context: Any) -> ErrorInfo | None:
        if "block" in args:
            return ErrorInfo(message=f"forbidden {SECRET}", details={"value": SECRET})
        return None

    def noisy(context: GuardrailContext) -> GuardrailDecision:
        return GuardrailDecision("allow", f"saw {SECRET}", {"seen": SECRET})

    script = [
        calling(
            call("c1", arguments={"key": SECRET}),
            call("c2", name="boom", arguments={"key": SECRET}),
            call("c3", arguments=f'{{"key": "{SECRET}"'),
            call(
                "c4",
                arguments=f'{{"key": "{SECRET}',
                arguments_error=ErrorInfo(
                    message=f"bad json near {SECRET}", code="invalid_json_arguments"
                ),
            ),
            call("c5", name=SECRET, arguments={"key": SECRET}),
            call("c6", arguments={"block": SECRET}),
            text=f"calling tools with {SECRET}",
        ),
        answer(f"done with {SECRET}"),
    ]
    ledger = InMemoryRunLedger()
    session, _, log = make_session(
        script,
        [ToolDefinition(name="echo", execute=echo), ToolDefinition(name="boom", execute=boom)],
        redactor=prism_tools.create_secret_redactor([SECRET]),
        ledger=ledger,
        validator=validate,
        guardrails=Guardrails(
            input=[guardrail("in", "input", noisy)],
            output=[guardrail("out", "output", noisy)],
            tool_input=[guardrail("tin", "tool_input", noisy)],
            tool_output=[guardrail("tout", "tool_output", noisy)],
        ),
    )
    result = await session.run(f"please use {SECRET}")

    assert result.status == "succeeded"
    assert echo.calls == [("c1", {"key": SECRET})], "tools still get the real arguments"
    assert boom.ids == ["c2"]
    secret_free(*log.events, *ledger.records)
    assert ledger.records
    assert all(row.redacted for row in ledger.records)
    rows = tool_rows(result.messages)
    assert [row.tool_call_id for row in rows] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    for row in rows:
        secret_free(row.error, row.content)
    assert rows[1].error is not None
    assert rows[1].error.message == "boom [REDACTED]"
    assert "guardrail_decision" in log.types


async def test_with_a_redactor_a_failed_run_does_not_show_the_secret() -> None:
    session, _, log = make_session(
        [RuntimeError(f"provider echoed {SECRET}")],
        redactor=prism_tools.create_secret_redactor([SECRET]),
    )
    error = await run_failing(session, "go")
    assert SECRET not in str(error)
    secret_free(error.result.error, *log.events)
    assert error.result.error is not None
    assert error.result.error.message == "provider echoed [REDACTED]"


async def test_with_a_redactor_failure_rows_of_a_stopped_batch_are_redacted() -> None:
    def trip(context: GuardrailContext) -> GuardrailDecision:
        return GuardrailDecision("tripwire", f"stop {SECRET}")

    session, _, log = make_session(
        [calling(call("c1"), call("c2")), answer()],
        [ToolDefinition(name="echo", execute=Recorder())],
        redactor=prism_tools.create_secret_redactor([SECRET]),
        guardrails=Guardrails(tool_input=[guardrail("trip", "tool_input", trip)]),
    )
    error = await run_failing(session, "go")
    rows = tool_rows(session.messages)
    assert [row.error.code for row in rows if row.error] == [
        "ERR_PRISM_GUARDRAIL_BLOCKED",
        NOT_DISPATCHED,
    ]
    for row in rows:
        secret_free(row.error)
    secret_free(*log.events, error.result.error)


# --- properties ------------------------------------------------------------------------------

CALL_KINDS = ("ok", "boom", "missing", "bad_json", "arguments_error")


def scripted_call(turn: int, index: int, kind: str) -> ToolCall:
    call_id = f"t{turn}c{index}"
    if kind == "ok":
        return call(call_id, name="ok", arguments={"i": index})
    if kind == "boom":
        return call(call_id, name="boom", arguments={"i": index})
    if kind == "missing":
        return call(call_id, name="missing", arguments={"i": index})
    if kind == "bad_json":
        return call(call_id, name="ok", arguments='{"i": ')
    return call(
        call_id,
        name="ok",
        arguments='{"i"',
        arguments_error=ErrorInfo(message="bad json", code="invalid_json_arguments"),
    )


turn_strategy = st.lists(st.sampled_from(CALL_KINDS), max_size=4).map(tuple)
limits_strategy = st.fixed_dictionaries(
    {},
    optional={
        "max_turns": st.integers(1, 6),
        "max_tool_rounds": st.integers(1, 6),
        "max_tool_calls": st.integers(1, 10),
    },
)


@given(
    turns=st.lists(turn_strategy, max_size=8),
    limits=limits_strategy,
    concurrency=st.integers(0, 4),
)
async def test_random_scripts_either_succeed_or_fail_cleanly_and_answer_every_dispatched_call(
    turns: list[tuple[str, ...]], limits: dict[str, int], concurrency: int
) -> None:
    ran: list[str] = []

    async def ok(args: dict[str, Any], context: ToolExecutionContext) -> str:
        ran.append(context.tool_call_id)
        await asyncio.sleep(0)
        return "ok"

    async def boom(args: dict[str, Any], context: ToolExecutionContext) -> str:
        ran.append(context.tool_call_id)
        raise RuntimeError("boom")

    kinds: dict[str, str] = {}
    script: list[ProviderResponse] = []
    for turn, kinds_of_turn in enumerate(turns):
        calls = [scripted_call(turn, index, kind) for index, kind in enumerate(kinds_of_turn)]
        kinds.update({c.id: kind for c, kind in zip(calls, kinds_of_turn, strict=True)})
        script.append(calling(*calls) if calls else answer(f"final {turn}"))
    provider = ScriptedProvider(script)
    session = create_agent(
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="ok", execute=ok), ToolDefinition(name="boom", execute=boom)],
        limits=limits,
        loop={"tool_concurrency": concurrency},
    ).session()

    cause: BaseException | None = None
    try:
        result = await session.run("go")
    except AgentRunError as error:
        result, cause = error.result, error.__cause__
    event(f"outcome: {result.finish_reason if cause is None else type(cause).__name__}")
    if cause is None:
        assert result.status == "succeeded"
        assert result.finish_reason in ("stop", "turn_limit")
    else:
        assert result.status == "failed"
        assert isinstance(cause, RunLimitError | ScriptExhaustedError)

    messages = list(session.messages)
    assert result.messages == tuple(messages)
    assert len(provider.requests) <= limits.get("max_turns", 16)
    assert len(result.turns) == len(provider.requests)

    # Every assistant call is answered by exactly one row, right after it and in call order; only
    # the last calls of a run stopped by max_tool_rounds stay unanswered.
    rows: dict[str, Message] = {}
    position = 0
    while position < len(messages):
        message = messages[position]
        position += 1
        assert message.role != "tool", "a tool row must follow its assistant message"
        if message.role != "assistant" or not message.tool_calls:
            continue
        ids = [c.id for c in message.tool_calls]
        following = messages[position : position + len(ids)]
        if not following or following[0].role != "tool":
            assert position == len(messages)
            assert result.status == "succeeded"
            assert result.finish_reason == "turn_limit"
            continue
        assert [row.tool_call_id for row in following] == ids
        assert all(row.role == "tool" for row in following)
        rows.update(zip(ids, following, strict=True))
        position += len(ids)

    # Tools ran once at most, and only for well-formed calls to known tools that were dispatched.
    assert len(ran) == len(set(ran))
    for call_id in ran:
        assert kinds[call_id] in ("ok", "boom")
        row = rows[call_id]
        if kinds[call_id] == "ok":
            assert row.error is None
            assert row.content == "ok"
        else:
            assert row.error == ErrorInfo(message="boom", name="RuntimeError")
    for call_id, row in rows.items():
        if call_id not in ran:
            assert row.error is not None
            if kinds[call_id] in ("ok", "boom"):
                assert row.error.code in (NOT_DISPATCHED, "ERR_PRISM_RUN_LIMIT")


async def test_rule_packs_survive_merging_agent_and_run_guardrails() -> None:
    pack = GuardrailRulePack(
        "policy",
        [guardrail("no-input", "input", lambda context: GuardrailDecision("block", "nope"))],
    )
    provider = ScriptedProvider([ProviderResponse(text="hi")])
    agent = create_agent(
        model="m", provider=provider, tools=[], guardrails=Guardrails(packs=[pack])
    )
    allow_output = guardrail("ok", "output", lambda context: GuardrailDecision("allow"))
    with pytest.raises(AgentRunError) as info:
        await agent.session().run("x", guardrails=Guardrails(output=[allow_output]))
    assert provider.requests == []
    cause = info.value.__cause__
    assert isinstance(cause, GuardrailTripwire)
    assert str(cause) == "Blocked by guardrail rule pack:policy/no-input: nope"


async def test_calls_left_by_a_turn_limit_are_answered_when_the_next_run_starts() -> None:
    calls: list[str] = []

    async def tool(args: dict[str, Any], context: ToolExecutionContext) -> str:
        calls.append("ran")
        return "ok"

    provider = ScriptedProvider(
        [
            ProviderResponse(tool_calls=(ToolCall("c1", "t", {}),)),
            ProviderResponse(tool_calls=(ToolCall("c2", "t", {}),)),
            ProviderResponse(text="done"),
        ]
    )
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[ToolDefinition("t", execute=tool)],
        limits={"max_tool_rounds": 1},
    )
    session = agent.session()
    first = await session.run("go")
    assert first.finish_reason == "turn_limit"
    assert calls == ["ran"]
    await session.run("again")
    sent = provider.requests[2].messages
    rows = [message for message in sent if message.role == "tool"]
    assert [row.tool_call_id for row in rows] == ["c1", "c2"]
    assert rows[1].error is not None
    assert rows[1].error.code == "tool_call_not_dispatched"
    assert sent[-1] == Message("user", "again")
    assert calls == ["ran"]  # the unanswered call was never run


# --- a failed run answers every call; subscribers within the wall time ---------------------------


async def test_a_run_failing_between_an_answer_and_its_round_answers_every_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = WallClock().install(monkeypatch)
    tool = Recorder()
    session, provider, _ = make_session(
        [calling(call("c1"), call("c2")), answer("after")],
        [ToolDefinition("echo", execute=tool)],
        limits={"max_wall_time_ms": WallClock.LIMIT_MS},
    )

    async def hold(event: Any) -> None:
        if event.type == "message_finished":
            clock.use_up()  # the wall time runs out here
            await asyncio.get_running_loop().create_future()

    unsubscribe = session.subscribe(hold)
    error = await run_failing(session, "go")
    unsubscribe()

    assert isinstance(error.__cause__, RunLimitError)
    assert error.__cause__.limit == "max_wall_time_ms"
    assert error.result.messages == tuple(session.messages)
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["c1", "c2"]
    assert [row.error.code for row in rows if row.error] == [NOT_DISPATCHED, NOT_DISPATCHED]
    assert tool.calls == []  # answered, never run
    await session.run("again")
    assert [message.role for message in provider.requests[1].messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
    ]
    assert tool.calls == []


async def test_a_round_past_the_decision_limit_answers_every_call_and_runs_none() -> None:
    tool = Recorder()
    calls = [call(f"c{index}") for index in range(MAX_PENDING_DECISIONS + 1)]
    session, _, _ = make_session(
        [calling(*calls), answer()],
        [ToolDefinition("echo", execute=tool)],
        interrupt_before_tool=True,
    )
    error = await run_failing(session, "go")

    assert isinstance(error.__cause__, DecisionLimitError)
    assert session.suspension is None
    rows = tool_rows(error.result.messages)
    assert [row.tool_call_id for row in rows] == [item.id for item in calls]
    assert all(row.error is not None and row.error.code == NOT_DISPATCHED for row in rows)
    assert tool.calls == []


async def run_settled(session: Session) -> str:
    try:
        return (await session.run("go")).status
    except AgentRunError as failure:
        error = failure.result.error
        return f"failed: {error.message if error else None}"


@pytest.mark.parametrize(
    ("kind", "outcome"),
    [
        ("agent_started", "failed: Run limit exceeded: max_wall_time_ms"),
        ("agent_finished", "succeeded"),
        ("run_limit_exceeded", "failed: Run limit exceeded: max_turns"),
    ],
)
@pytest.mark.timeout(30)  # only keeps a regression from hanging the suite; nothing is timed
async def test_a_subscriber_that_never_returns_cannot_hold_the_run_past_its_wall_time(
    kind: str, outcome: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prism_tools.agent, "CLOSING_EVENTS_GRACE_MS", 10)
    clock = WallClock().install(monkeypatch)
    cut: list[str] = []

    async def hold(event: Any) -> None:
        if event.type == kind:
            clock.use_up()  # the wall time (and the grace of the closing events) runs out here
            try:
                await asyncio.get_running_loop().create_future()  # never set
            except asyncio.CancelledError:
                cut.append(event.type)
                raise

    if kind == "run_limit_exceeded":
        script, limits = [calling(call("c1")), answer()], {"max_turns": 1}
    else:
        script, limits = [answer()], {}
    session, _, log = make_session(
        script,
        [ToolDefinition("echo", execute=Recorder())],
        limits={"max_wall_time_ms": WallClock.LIMIT_MS, **limits},
    )
    session.subscribe(hold)
    # No wait_for here: it reads the event loop's clock, which use_up moves past its timeout.
    assert await run_settled(session) == outcome
    assert cut == [kind]
    assert log.types[0] == "agent_started"
    assert log.types[-1] == "agent_finished"


async def test_a_subscriber_raising_a_cancellation_of_its_own_does_not_break_the_run() -> None:
    async def cancelled_elsewhere(event: Any) -> None:
        if event.type == "turn_started":
            future = asyncio.get_running_loop().create_future()
            future.cancel()
            await future

    session, _, log = make_session([answer()], [ToolDefinition("echo", execute=Recorder())])
    session.subscribe(cancelled_elsewhere)
    result = await session.run("go")
    assert result.status == "succeeded"
    assert log.types[-1] == "agent_finished"


async def test_a_repeated_call_id_left_unanswered_by_a_turn_limit_is_answered_next_run() -> None:
    # call_0 every turn (a provider that sends no ids): the loop renames the second call_0_1,
    # and that last call must still get its row.
    echo = Recorder()
    session, _, _ = make_session(
        [calling(call("call_0")), calling(call("call_0")), answer("second run")],
        [ToolDefinition("echo", execute=echo)],
        limits={"max_tool_rounds": 1},
    )
    assert (await session.run("go")).finish_reason == "turn_limit"
    await session.run("next")
    roles = [(message.role, message.tool_call_id) for message in session.messages]
    last_call = max(i for i, message in enumerate(session.messages) if message.tool_calls)
    assert session.messages[last_call].tool_calls[0].id == "call_0_1"
    assert roles[last_call + 1] == ("tool", "call_0_1")
    assert len(echo.calls) == 1


@pytest.mark.parametrize("call_id", [None, "call_0"])
async def test_a_durable_call_asked_for_again_in_a_later_turn_runs_again(
    call_id: str | None,
) -> None:
    # Without ids (fallback call_0 each turn), or with a model that numbers its calls from
    # call_0 every turn, the second email is a new call: it is sent and audited, not taken for
    # a redelivery of the first and answered with its stored result.
    sent: list[dict[str, Any]] = []

    async def send_email(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        sent.append(args)
        return {"sent": len(sent)}

    email = {"to": "boss@example.com", "text": "reminder"}
    ledger = InMemoryRunLedger()
    session, _, log = make_session(
        [
            calling(call(call_id, "send_email", email)),  # type: ignore[arg-type]
            calling(call(call_id, "send_email", email)),  # type: ignore[arg-type]
            answer("sent twice"),
        ],
        [
            ToolDefinition(
                "send_email", execute=send_email, effect=ToolEffect("external_mutation", "required")
            )
        ],
        identity=AgentIdentity("agent", "tenant"),
        effect_store=InMemoryToolEffectStore(),
        ledger=ledger,
    )
    result = await session.run("email my boss twice")

    assert sent == [email, email]
    rows = tool_rows(result.messages)
    assert [row.tool_call_id for row in rows] == ["call_0", "call_0_1"]
    assert [row.content for row in rows] == [{"sent": 1}, {"sent": 2}]
    assert [(record.tool_call_id, record.status) for record in ledger.records] == [
        ("call_0", "started"),
        ("call_0", "finished"),
        ("call_0_1", "started"),
        ("call_0_1", "finished"),
    ]
    assert log.types.count("tool_execution_finished") == 2


async def test_a_call_id_renamed_for_an_earlier_turn_avoids_every_id_in_use() -> None:
    # call_0 is taken by the first turn and call_0_1 by a sibling of the second: the repeat of
    # call_0 becomes call_0_2, and no two calls of the session share an id.
    echo = Recorder()
    session, provider, _ = make_session(
        [
            calling(call("call_0")),
            calling(call("call_0_1"), call("call_0")),
            answer(),
        ],
        [ToolDefinition("echo", execute=echo)],
    )
    result = await session.run("go")
    ids = [c.id for message in result.messages for c in message.tool_calls]
    assert ids == ["call_0", "call_0_1", "call_0_2"]
    assert [row.tool_call_id for row in tool_rows(result.messages)] == ids
    assert [context_id for context_id, _ in echo.calls] == ids
    # The model reads its calls back under the ids their results carry.
    sent = provider.requests[-1].messages
    assert [c.id for message in sent for c in message.tool_calls] == ids


async def test_a_renamed_long_id_stays_within_what_an_effect_key_takes() -> None:
    long_id = "c" * 511  # accepted by the effect store, which takes ids of up to 512 bytes
    echo = Recorder()
    session, _, _ = make_session(
        [calling(call(long_id)), calling(call(long_id)), answer()],
        [ToolDefinition("echo", execute=echo)],
    )
    result = await session.run("go")
    ids = [c.id for message in result.messages for c in message.tool_calls]
    assert ids[0] == long_id
    assert ids[1].endswith("_1")
    assert len(ids[1].encode()) <= 512
    assert ids[0] != ids[1]


async def test_ids_differing_only_by_a_lone_surrogate_stay_apart_as_providers_get_them() -> None:
    # Providers are sent U+FFFD for a lone surrogate: the loop gives the ids that way, and
    # renames the second, so the two calls cannot reach a provider as one.
    echo = Recorder()
    session, _, _ = make_session(
        [calling(call("t\ud800"), call("t\ud801")), answer()],
        [ToolDefinition("echo", execute=echo)],
    )
    result = await session.run("go")
    ids = [c.id for message in result.messages for c in message.tool_calls]
    assert ids == ["t\ufffd", "t\ufffd_1"]
    assert [row.tool_call_id for row in tool_rows(result.messages)] == ids


def test_str_subclass_call_ids_are_plain_text_compared_by_their_characters() -> None:
    class Id(str):
        __hash__ = object.__hash__

        def __eq__(self, other: object) -> bool:
            return self is other

    with pytest.raises(ValueError, match="two tool calls in one turn share the id 'call_0'"):
        calling(call(Id("call_0")), call(Id("call_0")))
    response = calling(call(Id("call_0")))
    assert type(response.tool_calls[0].id) is str


async def test_a_hosts_own_history_gets_its_calls_checked_as_a_providers_are() -> None:
    # A host's transcript (say, from its database) joins the session's state, which must read
    # it back: calls without an id get one, and a name that is not text is refused up front.
    history = [
        Message("user", "earlier"),
        Message("assistant", "", (ToolCall(None, "echo", {}), ToolCall("", "echo", {"n": 1}))),  # type: ignore[arg-type]
        Message("user", "and now"),
    ]
    session, _, _ = make_session([answer("ok")], [ToolDefinition(name="echo", execute=Recorder())])
    assert (await session.run(history)).output_text == "ok"
    asked = session.messages[1].tool_calls
    assert [call.id for call in asked] == ["call_0", "call_1"]
    restored = session.agent.session(state=json.dumps(session.state))
    assert [call.id for call in restored.messages[1].tool_calls] == ["call_0", "call_1"]

    bad = [Message("assistant", "", (ToolCall("c1", 5, {}),))]  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="item 0 has a name of type int, not a string"):
        await session.run(bad)
