"""create_secure_agent: the requirements and their exact messages, per-run overrides refused,
limits that only narrow, and every tool call suspended for approval before it runs."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from prism_tools import DuplicateToolError, ToolCall, ToolDefinition, ToolExecutionContext
from prism_tools.agent import AgentRunError
from prism_tools.approval import Decision
from prism_tools.checkpoints import InMemoryCheckpointStore
from prism_tools.effects import InMemoryToolEffectStore
from prism_tools.errors import IdentityError
from prism_tools.guardrails import Guardrails
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.messages import ProviderResponse
from prism_tools.policies import create_static_permission_policy, create_static_trust_policy
from prism_tools.providers import ScriptedProvider
from prism_tools.redaction import create_secret_redactor
from prism_tools.registry import create_tool_registry
from prism_tools.secure import PER_RUN_REFUSED, SecureAgent, create_secure_agent
from prism_tools.validation import (
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
)

MODEL = "test-model"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.calls.append(args)
        return "ok"


def echo_tool(recorder: Recorder, name: str = "echo", parameters: Any = SCHEMA) -> ToolDefinition:
    return ToolDefinition(name=name, execute=recorder, parameters=parameters)


def options(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": MODEL,
        "provider": ScriptedProvider([]),
        "tools": [echo_tool(Recorder())],
        "redactor": create_secret_redactor(["s3cret"]),
        "permission": create_static_permission_policy(),
        "trust": create_static_trust_policy(True),
        "validator": create_json_schema_tool_argument_validator(),
        "limits": {"max_turns": 4},
        "ownership": Ownership("tenant-1"),
    }
    base.update(changes)
    return base


def calling(*calls: ToolCall) -> ProviderResponse:
    return ProviderResponse(text="", tool_calls=calls, finish_reason="tool_calls")


def answer(text: str = "done") -> ProviderResponse:
    return ProviderResponse(text=text, finish_reason="stop")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"redactor": None}, "Secure agent requires a redactor"),
        ({"redactor": object()}, "Secure agent requires a redactor"),
        ({"permission": None}, "Secure agent requires a permission policy"),
        ({"trust": None}, "Secure agent requires a trust policy"),
        ({"validator": None}, "Secure agent requires a tool argument validator"),
        ({"validator": lambda *args: None}, "Secure agent requires a tool argument validator"),
        ({"limits": None}, "Secure agent requires explicit limits"),
        ({"limits": {}}, "Secure agent requires explicit limits"),
        ({"ownership": None}, "Secure agent requires non-empty ownership"),
        ({"ownership": Ownership("  ")}, "Secure agent requires non-empty ownership"),
        ({"ownership": {"tenant_id": "t"}}, "Secure agent requires non-empty ownership"),
        (
            {"tools": [echo_tool(Recorder(), parameters=None)]},
            "Secure agent tool echo requires a non-empty parameters schema",
        ),
        (
            {"tools": [echo_tool(Recorder(), parameters={})]},
            "Secure agent tool echo requires a non-empty parameters schema",
        ),
    ],
)
def test_each_requirement_fails_with_its_exact_message(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError) as caught:
        create_secure_agent(**options(**changes))
    assert str(caught.value) == message


def test_tool_names_must_be_non_empty() -> None:
    class Nameless:
        name = " "
        parameters = SCHEMA

    with pytest.raises(TypeError) as caught:
        create_secure_agent(**options(tools=[Nameless()]))
    assert str(caught.value) == "Secure agent tool names must be non-empty"


def test_duplicate_tool_names_are_refused() -> None:
    tools = [echo_tool(Recorder()), echo_tool(Recorder())]
    with pytest.raises(DuplicateToolError, match="Duplicate tool: echo"):
        create_secure_agent(**options(tools=tools))


def test_an_identity_must_be_active_and_match_the_ownership() -> None:
    with pytest.raises(IdentityError, match="revoked"):
        create_secure_agent(**options(identity=AgentIdentity("p", "tenant-1", revoked=True)))
    with pytest.raises(IdentityError, match="ownership"):
        create_secure_agent(**options(identity=AgentIdentity("p", "tenant-2")))
    expired = AgentIdentity("p", "tenant-1", expires_at=datetime(2000, 1, 1, tzinfo=UTC))
    with pytest.raises(IdentityError, match="expired"):
        create_secure_agent(**options(identity=expired))


def test_a_valid_configuration_builds_a_sealed_interrupting_agent() -> None:
    registry = create_tool_registry([echo_tool(Recorder())])
    agent = create_secure_agent(**options(tools=registry, validator=create_json_schema_adapter()))

    assert isinstance(agent, SecureAgent)
    assert agent.interrupt_before_tool is True
    assert agent.tools is not registry  # its own copy
    with pytest.raises(AttributeError, match="cannot be changed"):
        agent.interrupt_before_tool = False
    with pytest.raises(AttributeError, match="cannot be changed"):
        agent.validator = None


async def test_every_tool_call_suspends_for_approval_with_no_execution() -> None:
    echo = Recorder()
    provider = ScriptedProvider([calling(ToolCall("c1", "echo", {"text": "hi"})), answer()])
    agent = create_secure_agent(**options(provider=provider, tools=[echo_tool(echo)]))
    session = agent.session()

    result = await session.run("hi")

    assert result.status == "suspended"
    assert [item.tool_name for item in result.pending] == ["echo"]
    assert echo.calls == []  # the tool did not run


# What the reviewed agent shows the model and lets it call: a run may not widen it.
SCOPE_OVERRIDES: list[dict[str, Any]] = [
    {"tool_narrowing": lambda context: None},
    {"tools_disclosure": "search"},
    {"tools_search": {"top_k": 4}},
    {"allow_hidden_tool_calls": True},
]


@pytest.mark.parametrize(
    "override",
    [
        {"validate": lambda tool, args, context: None},
        {"effect_store": InMemoryToolEffectStore()},
        {"interrupt_before_tool": False},
        {"guardrails": Guardrails()},
        {"loop": {"strategy": "single-shot"}},
        *SCOPE_OVERRIDES,
    ],
)
async def test_per_run_overrides_of_the_defaults_are_refused(override: dict[str, Any]) -> None:
    echo = Recorder()
    provider = ScriptedProvider([calling(ToolCall("c1", "echo", {"text": "hi"})), answer()])
    agent = create_secure_agent(**options(provider=provider, tools=[echo_tool(echo)]))
    session = agent.session()

    with pytest.raises(TypeError) as caught:
        await session.run("hi", **override)

    assert str(caught.value) == PER_RUN_REFUSED
    assert provider.requests == []
    assert echo.calls == []


@pytest.mark.parametrize("override", SCOPE_OVERRIDES)
async def test_resume_cannot_widen_the_reviewed_tool_scope(override: dict[str, Any]) -> None:
    echo, hidden = Recorder(), Recorder()
    provider = ScriptedProvider([calling(ToolCall("c1", "wipe", {"text": "all"})), answer()])
    agent = create_secure_agent(
        **options(
            provider=provider,
            tools=[echo_tool(echo), echo_tool(hidden, name="wipe")],
            tool_narrowing=lambda context: ["echo"],
        )
    )
    session = agent.session()
    await session.run("hi")

    with pytest.raises(TypeError, match=PER_RUN_REFUSED):
        await session.resume({"c1": "approve"}, **override)

    assert hidden.calls == []
    assert len(session.pending) == 1


def test_a_run_may_still_keep_hidden_calls_off() -> None:
    agent = create_secure_agent(**options(provider=ScriptedProvider([]), tools=[]))
    agent.check_run_options(
        validate=None,
        effect_store=None,
        interrupt_before_tool=None,
        scoping={"allow_hidden_tool_calls": False},
    )


async def test_resume_refuses_the_same_overrides() -> None:
    echo = Recorder()
    provider = ScriptedProvider([calling(ToolCall("c1", "echo", {"text": "hi"})), answer()])
    agent = create_secure_agent(**options(provider=provider, tools=[echo_tool(echo)]))
    session = agent.session()
    await session.run("hi")

    with pytest.raises(TypeError, match=PER_RUN_REFUSED):
        await session.resume({"c1": "approve"}, validate=lambda tool, args, context: None)

    assert echo.calls == []
    assert len(session.pending) == 1


async def test_a_narrower_run_limit_applies() -> None:
    echo = Recorder()
    provider = ScriptedProvider(
        [calling(ToolCall("c1", "echo", {"text": "x"})), calling(ToolCall("c2", "echo", {}))]
    )
    agent = create_secure_agent(
        **options(provider=provider, tools=[echo_tool(echo)], limits={"max_turns": 4})
    )
    session = agent.session()
    await session.run("hi", limits={"max_turns": 1})

    # The agent allows 4 turns; this run asked for 1, so its second turn fails.
    with pytest.raises(AgentRunError) as caught:
        await session.resume({"c1": "approve"})

    assert caught.value.result.limit is not None
    assert caught.value.result.limit["maximum"] == 1


async def test_a_run_above_the_agent_limit_still_fails_at_the_agent_limit() -> None:
    echo = Recorder()
    provider = ScriptedProvider(
        [calling(ToolCall("c1", "echo", {"text": "x"})), calling(ToolCall("c2", "echo", {}))]
    )
    agent = create_secure_agent(
        **options(provider=provider, tools=[echo_tool(echo)], limits={"max_turns": 1})
    )
    session = agent.session()
    await session.run("hi", limits={"max_turns": 64})

    with pytest.raises(AgentRunError) as caught:
        await session.resume({"c1": "approve"})

    assert caught.value.result.limit is not None
    assert caught.value.result.limit["limit"] == "max_turns"
    assert echo.calls == [{"text": "x"}]


async def test_approved_calls_are_validated_and_tools_without_schema_are_blocked() -> None:
    echo = Recorder()
    provider = ScriptedProvider([calling(ToolCall("c1", "echo", {"text": 1})), answer()])
    agent = create_secure_agent(**options(provider=provider, tools=[echo_tool(echo)]))
    session = agent.session()
    await session.run("hi")

    await session.resume({"c1": Decision("approve")})

    assert echo.calls == []  # invalid arguments: the tool did not run
    rows = [message for message in session.messages if message.role == "tool"]
    assert rows[0].error is not None


async def test_a_secure_run_resumes_in_a_fresh_process_exactly_once() -> None:
    store = InMemoryCheckpointStore()
    first_echo = Recorder()
    first = create_secure_agent(
        **options(
            provider=ScriptedProvider([calling(ToolCall("c1", "echo", {"text": "go"}))]),
            tools=[echo_tool(first_echo)],
            checkpoints=store,
        )
    )
    session = first.session("s-1")
    suspended = await session.run("hi")
    text = json.dumps(session.state)

    echo = Recorder()
    fresh = create_secure_agent(
        **options(provider=ScriptedProvider([answer()]), tools=[echo_tool(echo)])
    )
    restored = fresh.session(state=text)
    result = await restored.resume({suspended.pending[0].approval_id: "approve"})

    assert result.status == "succeeded"
    assert echo.calls == [{"text": "go"}]
    assert first_echo.calls == []
    assert store.load("s-1") is not None  # the first process's store was not touched


def test_ownership_with_only_an_account_counts() -> None:
    agent = create_secure_agent(**options(ownership=replace(Ownership("  "), account_id="acc")))
    assert agent.ownership is not None
