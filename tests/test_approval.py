"""Approval of tool rounds: suspension before side effects, decisions, resume (in the same or a
fresh process, through plain JSON state), sticky decisions, and the checkpoint stores."""

from __future__ import annotations

import asyncio
import json
import math
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from tests.support import EventLog, OpenedConnections, WallClock, not_a_database, small_json

from prism_tools import ToolCall, ToolDefinition, ToolExecutionContext, create_tool_registry
from prism_tools.agent import APPROVAL_REQUIRED, AgentRunError, Session, create_agent
from prism_tools.approval import (
    APPROVAL_REJECTED,
    MAX_PENDING_DECISIONS,
    MAX_REASON_CHARS,
    ApprovalError,
    Decision,
    DecisionLimitError,
    PendingDecision,
)
from prism_tools.checkpoints import (
    CheckpointStore,
    InMemoryCheckpointStore,
    SqliteCheckpointStore,
)
from prism_tools.effects import arguments_hash
from prism_tools.messages import Message, ProviderResponse
from prism_tools.policies import create_static_permission_policy
from prism_tools.providers import ScriptedProvider
from prism_tools.validation import create_json_schema_tool_argument_validator

MODEL = "test-model"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


class Recorder:
    """A tool body that records the arguments of every call it runs."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.calls.append((context.tool_call_id, args))
        return {"echo": args}


def answer(text: str = "done") -> ProviderResponse:
    return ProviderResponse(text=text, finish_reason="stop")


def calling(*calls: ToolCall) -> ProviderResponse:
    return ProviderResponse(text="", tool_calls=calls, finish_reason="tool_calls")


def call(call_id: str, name: str = "echo", text: str = "hi") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={"text": text})


def tools_for(*recorders: tuple[str, Recorder]) -> list[ToolDefinition]:
    return [
        ToolDefinition(name=name, execute=recorder, parameters=SCHEMA)
        for name, recorder in recorders
    ]


def make(
    script: list[Any], *recorders: tuple[str, Recorder], **options: Any
) -> tuple[Session, ScriptedProvider, EventLog]:
    provider = ScriptedProvider(script)
    options.setdefault("interrupt_before_tool", True)
    agent = create_agent(model=MODEL, provider=provider, tools=tools_for(*recorders), **options)
    session = agent.session()
    log = EventLog()
    session.subscribe(log)
    return session, provider, log


def tool_rows(messages: Sequence[Message]) -> list[Message]:
    return [message for message in messages if message.role == "tool"]


# --- suspension --------------------------------------------------------------------------------


async def test_a_tool_round_suspends_before_any_tool_runs() -> None:
    echo = Recorder()
    session, provider, log = make(
        [calling(call("c1"), call("c2", text="there")), answer()], ("echo", echo)
    )

    result = await session.run("hi")

    assert echo.calls == []  # the tool did not run
    assert result.status == "suspended"
    assert result.finish_reason == APPROVAL_REQUIRED
    assert [item.tool_call_id for item in result.pending] == ["c1", "c2"]
    first = result.pending[0]
    assert first.tool_name == "echo"
    assert first.approval_id.startswith("approval_")
    assert first.arguments_hash == arguments_hash({"text": "hi"})
    assert len(first.arguments_hash) == 64
    assert session.pending == result.pending
    # The assistant message with its calls stays; no call has a row yet.
    assert session.messages[-1].tool_calls == (call("c1"), call("c2", text="there"))
    assert tool_rows(session.messages) == []
    assert len(provider.requests) == 1
    suspended = [event for event in log.events if event.type == "run_suspended"]
    assert len(suspended) == 1
    assert suspended[0].data is not None
    assert suspended[0].data["pending"] == [item.to_dict() for item in result.pending]
    assert log.types[-1] == "agent_finished"
    state = json.loads(json.dumps(session.state))
    assert [item["tool_call_id"] for item in state["suspension"]["pending"]] == ["c1", "c2"]


@pytest.mark.parametrize("odd", [math.nan, 10**400, object()])
async def test_a_host_made_call_whose_arguments_are_not_json_still_suspends(odd: Any) -> None:
    # Only a custom provider can hand over such arguments; they are hashed by their repr.
    echo = Recorder()
    session, _, _ = make([calling(ToolCall("c1", "echo", {"x": odd})), answer()], ("echo", echo))

    result = await session.run("hi")

    assert echo.calls == []
    assert result.status == "suspended"
    assert [item.tool_call_id for item in result.pending] == ["c1"]
    assert len(result.pending[0].arguments_hash) == 64


async def test_approving_all_runs_the_round_in_call_order_and_continues() -> None:
    echo = Recorder()
    session, provider, log = make(
        [calling(call("c1"), call("c2", text="there")), answer("all done")], ("echo", echo)
    )
    suspended = await session.run("hi")

    result = await session.resume(
        {item.approval_id: Decision("approve") for item in suspended.pending}
    )

    assert echo.calls == [("c1", {"text": "hi"}), ("c2", {"text": "there"})]
    assert result.status == "succeeded"
    assert result.output_text == "all done"
    assert result.run_id == suspended.run_id
    assert result.pending == ()
    assert session.suspension is None
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["c1", "c2"]
    assert all(row.error is None for row in rows)
    # The next provider turn saw the results.
    assert len(provider.requests) == 2
    assert [m.tool_call_id for m in provider.requests[1].messages if m.role == "tool"] == [
        "c1",
        "c2",
    ]
    resumed = [event for event in log.events if event.type == "run_resumed"]
    assert len(resumed) == 1
    assert resumed[0].data is not None
    assert set(resumed[0].data["decisions"].values()) == {"approve"}


async def test_decisions_may_be_keyed_by_tool_call_id_and_given_as_action_names() -> None:
    echo = Recorder()
    session, _, _ = make([calling(call("c1")), answer()], ("echo", echo))
    await session.run("hi")

    result = await session.resume({"c1": "approve"})

    assert result.status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"})]


async def test_reject_once_answers_with_approval_rejected_and_never_runs() -> None:
    echo = Recorder()
    session, provider, _ = make([calling(call("c1"), call("c2")), answer("ok")], ("echo", echo))
    suspended = await session.run("hi")
    first, second = suspended.pending

    result = await session.resume(
        {
            first.approval_id: Decision("reject_once"),
            second.approval_id: Decision("reject_once", reason="Not today"),
        }
    )

    assert echo.calls == []  # the tool did not run
    assert result.status == "succeeded"
    rows = tool_rows(session.messages)
    assert [(row.error.code, row.error.message) for row in rows if row.error] == [
        (APPROVAL_REJECTED, "Rejected"),
        (APPROVAL_REJECTED, "Not today"),
    ]
    assert len(provider.requests) == 2


async def test_a_rejected_call_is_audited_as_blocked_in_the_ledger_and_events() -> None:
    # An auditor reading the ledger sees every call the model asked for, the rejected one
    # included, with the reason (redacted) and the tool never started.
    from prism_tools import InMemoryRunLedger, create_secret_redactor

    echo, wipe = Recorder(), Recorder()
    ledger = InMemoryRunLedger()
    session, _, log = make(
        [calling(call("c1"), call("c2", "wipe")), answer()],
        ("echo", echo),
        ("wipe", wipe),
        ledger=ledger,
        redactor=create_secret_redactor(["sk-live-123"]),
    )
    await session.run("hi")
    await session.resume(
        {"c1": "approve", "c2": Decision("reject_once", reason="not with key sk-live-123")}
    )

    assert wipe.calls == []
    rows = [(row.tool_call_id, row.status) for row in ledger.records]
    assert rows == [("c2", "blocked"), ("c1", "started"), ("c1", "finished")]
    blocked = ledger.records[0]
    assert blocked.reason == "execution_denied"
    assert blocked.result is not None
    assert blocked.result.error is not None
    assert blocked.result.error.code == APPROVAL_REJECTED
    assert blocked.result.error.message == "not with key [REDACTED]"
    refused = [event for event in log.events if event.type == "tool_execution_blocked"]
    assert [(event.tool_call_id, event.reason) for event in refused] == [("c2", "execution_denied")]
    assert "sk-live-123" not in json.dumps([event.to_dict() for event in log.events])


async def test_a_rejection_reason_quoting_a_secret_reaches_the_model_redacted() -> None:
    from prism_tools import create_secret_redactor

    wipe = Recorder()
    session, provider, _ = make(
        [calling(call("c1", "wipe")), answer()],
        ("wipe", wipe),
        redactor=create_secret_redactor(["sk-live-42"]),
    )
    await session.run("hi")
    await session.resume({"c1": Decision("reject_once", reason="key sk-live-42 must not be used")})

    assert wipe.calls == []
    rows = tool_rows(session.messages)
    assert rows[0].error is not None
    assert rows[0].error.message == "key [REDACTED] must not be used"
    assert "sk-live-42" not in repr(provider.requests[-1].messages)


async def test_a_round_cancelled_while_its_rejections_are_audited_still_gets_its_rows() -> None:
    blocking = asyncio.Event()

    async def slow_sink(event: Any) -> None:
        if event.type == "tool_execution_blocked":
            blocking.set()
            await asyncio.sleep(30)

    echo, wipe = Recorder(), Recorder()
    session, _, _ = make(
        [calling(call("c1", "wipe"), call("c2")), answer()], ("echo", echo), ("wipe", wipe)
    )
    session.subscribe(slow_sink)
    await session.run("hi")
    resumed = asyncio.ensure_future(session.resume({"c1": "reject_once", "c2": "approve"}))
    await blocking.wait()
    resumed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await resumed

    assert echo.calls == []  # nothing ran
    assert wipe.calls == []
    rows = [
        (row.tool_call_id, row.error.code if row.error else None)
        for row in tool_rows(session.messages)
    ]
    assert rows == [("c1", APPROVAL_REJECTED), ("c2", "tool_call_not_dispatched")]


async def test_a_mixed_round_runs_the_approved_call_only() -> None:
    echo, wipe = Recorder(), Recorder()
    session, _, _ = make(
        [calling(call("c1"), call("c2", "wipe")), answer()], ("echo", echo), ("wipe", wipe)
    )
    await session.run("hi")

    await session.resume({"c1": "approve", "c2": "reject_once"})

    assert echo.calls == [("c1", {"text": "hi"})]
    assert wipe.calls == []  # the rejected tool did not run
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["c1", "c2"]
    assert rows[0].error is None
    assert rows[1].error is not None
    assert rows[1].error.code == APPROVAL_REJECTED


async def test_reject_for_run_answers_later_calls_of_that_tool_without_asking() -> None:
    wipe, echo = Recorder(), Recorder()
    session, _, log = make(
        [
            calling(call("c1", "wipe")),
            calling(call("c2", "wipe"), call("c3", "echo")),
            answer(),
        ],
        ("wipe", wipe),
        ("echo", echo),
    )
    await session.run("hi")
    second = await session.resume({"c1": Decision("reject_for_run")})

    # Only the echo call is asked about; the wipe call is already decided.
    assert second.status == "suspended"
    assert [item.tool_call_id for item in second.pending] == ["c3"]
    assert wipe.calls == []
    assert echo.calls == []

    final = await session.resume({"c3": "approve"})

    assert final.status == "succeeded"
    assert wipe.calls == []  # never ran in the whole run
    assert echo.calls == [("c3", {"text": "hi"})]
    rows = {row.tool_call_id: row for row in tool_rows(session.messages)}
    assert rows["c1"].error is not None
    assert rows["c1"].error.message == "Rejected for this run"
    assert rows["c2"].error is not None
    assert (rows["c2"].error.code, rows["c2"].error.message) == (
        APPROVAL_REJECTED,
        "Rejected for this run",
    )
    assert rows["c3"].error is None
    assert log.types.count("run_suspended") == 2


async def test_reject_for_run_keeps_its_reason_for_later_calls() -> None:
    wipe = Recorder()
    session, _, _ = make(
        [calling(call("c1", "wipe")), calling(call("c2", "wipe")), answer()], ("wipe", wipe)
    )
    await session.run("hi")

    result = await session.resume({"c1": Decision("reject_for_run", reason="No wiping")})

    assert result.status == "succeeded"
    assert wipe.calls == []
    messages = [row.error.message for row in tool_rows(session.messages) if row.error]
    assert messages == ["No wiping", "No wiping"]


async def test_allow_for_run_lets_later_calls_of_that_tool_through_only() -> None:
    echo, wipe = Recorder(), Recorder()
    session, _, _ = make(
        [
            calling(call("c1")),
            calling(call("c2", text="again")),
            calling(call("c3", "wipe")),
            answer(),
        ],
        ("echo", echo),
        ("wipe", wipe),
    )
    await session.run("hi")

    second = await session.resume({"c1": "allow_for_run"})

    # c2 (echo) ran without a new suspension; c3 (wipe) still needs approval.
    assert echo.calls == [("c1", {"text": "hi"}), ("c2", {"text": "again"})]
    assert second.status == "suspended"
    assert [item.tool_call_id for item in second.pending] == ["c3"]
    assert wipe.calls == []


async def test_sticky_decisions_last_for_one_run_only() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1")), answer(), calling(call("c2")), answer()], ("echo", echo)
    )
    await session.run("hi")
    await session.resume({"c1": "allow_for_run"})

    result = await session.run("next")

    assert result.status == "suspended"
    assert echo.calls == [("c1", {"text": "hi"})]


async def test_modified_arguments_are_validated_again_and_run_once() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1")), answer()],
        ("echo", echo),
        validator=create_json_schema_tool_argument_validator(),
    )
    await session.run("hi")

    await session.resume({"c1": Decision("approve", arguments={"text": "edited"})})

    assert echo.calls == [("c1", {"text": "edited"})]


async def test_invalid_modified_arguments_are_blocked_and_never_run() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1")), answer()],
        ("echo", echo),
        validator=create_json_schema_tool_argument_validator(),
    )
    await session.run("hi")

    result = await session.resume({"c1": Decision("approve", arguments={"text": 5})})

    assert result.status == "succeeded"
    assert echo.calls == []  # the tool did not run
    (row,) = tool_rows(session.messages)
    assert row.error is not None
    assert row.error.code != APPROVAL_REJECTED


async def test_resume_runs_the_permission_check_again() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1")), answer()],
        ("echo", echo),
        permission=create_static_permission_policy(deny=["tool:echo:execute"]),
    )
    await session.run("hi")

    await session.resume({"c1": "approve"})

    assert echo.calls == []  # approval does not bypass the permission policy
    (row,) = tool_rows(session.messages)
    assert row.error is not None
    assert row.error.code == "ERR_PRISM_PERMISSION_DENIED"


# --- malformed decisions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decisions",
    [
        {"approval_nope": "approve"},
        {},
        {"c1": "approve", "c2": "approve", "c3": "approve"},
        "approve",
    ],
)
async def test_bad_decision_sets_are_refused_with_nothing_run(decisions: Any) -> None:
    echo = Recorder()
    session, provider, _ = make([calling(call("c1"), call("c2")), answer()], ("echo", echo))
    suspended = await session.run("hi")

    with pytest.raises(ApprovalError) as caught:
        await session.resume(decisions)

    assert isinstance(caught.value, ValueError)
    assert echo.calls == []  # the tool did not run
    assert session.pending == suspended.pending  # still waiting
    assert len(provider.requests) == 1


async def test_a_partial_batch_keeps_the_run_suspended_until_every_call_is_decided() -> None:
    echo = Recorder()
    session, provider, _ = make(
        [calling(call("c1"), call("c2", text="two"), call("c3", text="three")), answer()],
        ("echo", echo),
    )
    first = await session.run("hi")
    c1, c2, c3 = first.pending

    partial = await session.resume({c2.approval_id: "reject_once"})

    assert partial.status == "suspended"
    assert partial.finish_reason == APPROVAL_REQUIRED
    assert partial.run_id == first.run_id
    assert partial.pending == (c1, c3)
    assert session.pending == (c1, c3)
    assert echo.calls == []  # nothing runs while a call is undecided
    assert tool_rows(session.messages) == []
    assert len(provider.requests) == 1

    # A decided call cannot be decided again.
    with pytest.raises(ApprovalError, match="Unknown approval id"):
        await session.resume({c2.approval_id: "approve"})

    done = await session.resume({c1.approval_id: "approve", "c3": Decision("approve")})

    assert done.status == "succeeded"
    assert [call_id for call_id, _ in echo.calls] == ["c1", "c3"]
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["c1", "c2", "c3"]  # call order
    assert rows[1].error is not None
    assert rows[1].error.code == APPROVAL_REJECTED


async def test_partial_decisions_survive_the_session_state() -> None:
    echo = Recorder()
    script = [calling(call("c1"), call("c2", text="two")), answer()]
    session, _, _ = make(script, ("echo", echo))
    first = await session.run("hi")
    await session.resume({"c1": Decision("approve", arguments={"text": "edited"})})
    state = json.loads(json.dumps(session.state))

    # Another process: a new agent with the same tools and the provider's remaining script.
    again = Recorder()
    restored, _, _ = make([answer()], ("echo", again))
    restored = restored.agent.session(state=state)
    assert restored.pending == (first.pending[1],)

    done = await restored.resume({"c2": "approve"})

    assert done.status == "succeeded"
    assert echo.calls == []
    assert again.calls == [("c1", {"text": "edited"}), ("c2", {"text": "two"})]


async def test_a_round_needing_too_many_decisions_fails_the_run_with_nothing_run() -> None:
    echo = Recorder()
    many = [call(f"c{i}") for i in range(MAX_PENDING_DECISIONS + 1)]
    session, provider, _ = make(
        [calling(*many), answer()], ("echo", echo), limits={"max_tool_calls": 256}
    )

    with pytest.raises(AgentRunError) as caught:
        await session.run("hi")

    assert isinstance(caught.value.__cause__, DecisionLimitError)
    error = caught.value.result.error
    assert error is not None
    assert error.code == "ERR_PRISM_DECISION_LIMIT"
    assert f"exceed {MAX_PENDING_DECISIONS}" in error.message
    assert echo.calls == []  # the tool did not run
    assert session.pending == ()
    assert len(provider.requests) == 1

    # Exactly the cap still suspends.
    session, _, _ = make(
        [calling(*many[:-1]), answer()], ("echo", echo), limits={"max_tool_calls": 256}
    )
    result = await session.run("hi")
    assert len(result.pending) == MAX_PENDING_DECISIONS
    assert echo.calls == []


async def test_two_decisions_for_one_call_are_refused() -> None:
    echo = Recorder()
    session, _, _ = make([calling(call("c1")), answer()], ("echo", echo))
    suspended = await session.run("hi")
    pending = suspended.pending[0]

    with pytest.raises(ApprovalError, match="More than one decision"):
        await session.resume({pending.approval_id: "approve", "c1": "reject_once"})

    assert echo.calls == []


def test_decisions_are_checked_when_built() -> None:
    with pytest.raises(ApprovalError, match="Unknown decision action"):
        Decision("maybe")  # type: ignore[arg-type]
    with pytest.raises(ApprovalError, match="change arguments"):
        Decision("reject_once", arguments={"text": "x"})
    with pytest.raises(ApprovalError, match="longer than"):
        Decision("reject_once", reason="x" * (MAX_REASON_CHARS + 1))


async def test_resume_without_pending_decisions_is_an_error() -> None:
    echo = Recorder()
    session, _, _ = make([answer()], ("echo", echo))
    await session.run("hi")

    with pytest.raises(ApprovalError, match="no pending"):
        await session.resume({"c1": "approve"})


async def test_a_new_run_is_refused_while_approvals_are_pending() -> None:
    echo = Recorder()
    session, provider, _ = make([calling(call("c1")), answer()], ("echo", echo))
    await session.run("hi")

    with pytest.raises(ApprovalError, match="pending tool approvals"):
        await session.run("something else")

    assert echo.calls == []
    assert len(provider.requests) == 1


# --- switching it on and off ----------------------------------------------------------------------


async def test_interrupt_can_be_switched_on_per_run() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1")), answer(), calling(call("c2")), answer()],
        ("echo", echo),
        interrupt_before_tool=False,
    )

    first = await session.run("hi", interrupt_before_tool=True)
    assert first.status == "suspended"
    assert echo.calls == []
    await session.resume({"c1": "approve"})

    second = await session.run("again")
    assert second.status == "succeeded"
    assert [call_id for call_id, _ in echo.calls] == ["c1", "c2"]


async def test_interrupt_refuses_bounded_tool_calls_in_a_revise_loop() -> None:
    echo = Recorder()
    session, _, _ = make([answer()], ("echo", echo))
    loop = {"strategy": "generate-validate-revise", "validator": bool, "tool_calls": "bounded"}

    with pytest.raises(TypeError, match="interrupt_before_tool"):
        await session.run("hi", loop=loop)


# --- limits, grant and process boundaries ------------------------------------------------------


async def test_run_counters_carry_across_resumes() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1")), calling(call("c2")), calling(call("c3")), answer()],
        ("echo", echo),
        limits={"max_turns": 2},
    )
    await session.run("hi")
    second = await session.resume({"c1": "approve"})
    assert second.status == "suspended"

    with pytest.raises(AgentRunError) as caught:
        await session.resume({"c2": "approve"})

    assert caught.value.result.limit is not None
    assert caught.value.result.limit["limit"] == "max_turns"
    assert [call_id for call_id, _ in echo.calls] == ["c1", "c2"]


async def test_resume_limits_can_only_narrow() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1")), calling(call("c2")), answer()],
        ("echo", echo),
        limits={"max_turns": 2},
    )
    await session.run("hi")
    second = await session.resume({"c1": "approve"}, limits={"max_turns": 50})

    assert second.status == "suspended"
    with pytest.raises(AgentRunError):
        await session.resume({"c2": "approve"}, limits={"max_turns": 50})


def build_agent(
    provider: ScriptedProvider, echo: Recorder, other: Recorder | None = None, **options: Any
) -> Any:
    registry = create_tool_registry(tools_for(("echo", echo), ("other", other or Recorder())))
    return create_agent(
        model=MODEL, provider=provider, tools=registry, interrupt_before_tool=True, **options
    )


async def test_a_fresh_process_resumes_from_json_state_and_runs_the_call_once() -> None:
    first_echo = Recorder()
    first = build_agent(ScriptedProvider([calling(call("c1", text="ship it"))]), first_echo)
    session = first.session()
    suspended = await session.run("deploy", metadata={"ticket": "T-1"})
    text = json.dumps(session.state)
    assert first_echo.calls == []

    # "Another process": new provider, new tool objects, state from JSON text only.
    second_echo = Recorder()
    provider = ScriptedProvider([answer("shipped")])
    second = build_agent(provider, second_echo)
    restored = second.session(state=text)
    assert restored.id == session.id
    assert restored.pending == suspended.pending

    result = await restored.resume({suspended.pending[0].approval_id: "approve"})

    assert result.status == "succeeded"
    assert result.run_id == suspended.run_id
    assert second_echo.calls == [("c1", {"text": "ship it"})]
    assert first_echo.calls == []
    assert provider.requests[0].metadata == {"ticket": "T-1"}
    # Resuming the same JSON text again would need the pending decisions, which are gone now.
    assert "suspension" not in restored.state


async def test_run_metadata_json_cannot_hold_is_kept_as_the_lenient_writer_writes_it() -> None:
    looped: dict[str, Any] = {"ticket": "T-1"}
    looped["self"] = looped
    session = build_agent(ScriptedProvider([calling(call("c1"))]), Recorder()).session()
    await session.run("deploy", metadata={"looped": looped, "when": {1, 2}})
    stored = json.loads(json.dumps(session.state))
    assert stored["suspension"]["metadata"] == {
        "looped": {"ticket": "T-1", "self": "[Circular]"},
        "when": [1, 2],
    }


async def test_resume_keeps_the_runs_grant() -> None:
    echo = Recorder()
    provider = ScriptedProvider([calling(call("c1")), calling(call("c2", "other")), answer()])
    agent = build_agent(provider, echo)
    session = agent.session()
    await session.run("hi", tool_names=["echo"])

    await session.resume({"c1": "approve"})

    # After resuming, the provider still sees only the granted tool.
    assert [tool.name for tool in provider.requests[1].tools] == ["echo"]
    assert echo.calls == [("c1", {"text": "hi"})]


async def test_resume_shrinks_the_grant_to_the_tools_registered_now() -> None:
    echo = Recorder()
    agent = build_agent(ScriptedProvider([calling(call("c1"))]), echo)
    session = agent.session()
    await session.run("hi", tool_names=["echo"])
    state = json.dumps(session.state)

    later_echo = Recorder()
    registry = create_tool_registry(tools_for(("other", later_echo)))
    fresh = create_agent(
        model=MODEL,
        provider=ScriptedProvider([answer()]),
        tools=registry,
        interrupt_before_tool=True,
    )
    restored = fresh.session(state=state)
    await restored.resume({"c1": "approve"})

    assert echo.calls == []
    assert later_echo.calls == []
    (row,) = tool_rows(restored.messages)
    assert row.error is not None


# --- stored states from outside ---------------------------------------------------------------


async def suspended_state() -> dict[str, Any]:
    """The JSON state of a session suspended on two echo calls, c1 and c2."""
    session = build_agent(
        ScriptedProvider([calling(call("c1"), call("c2", text="two"))]), Recorder()
    ).session()
    await session.run("hi")
    state: dict[str, Any] = json.loads(json.dumps(session.state))
    return state


def edit(state: dict[str, Any], path: Sequence[str | int], value: Any) -> None:
    """Sets ``value`` at ``path`` inside ``state``."""
    target: Any = state
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        # A switch written as text would have been read as true.
        (("granted_everything",), "false", "'granted_everything' must be true or false"),
        (("rounds",), -5, "'rounds' must be an integer from 0 to 64"),
        (("turns",), "7", "'turns' must be an integer from 0 to 64"),
        (("turns",), math.inf, "'turns' must be an integer"),
        (("limits", "max_turns"), 1.7, "max_turns must be an integer from 1 to 64"),
        (("limits", "max_turns"), 0, "max_turns must be an integer from 1 to 64"),
        (("limits", "max_hours"), 3, "unknown run limit 'max_hours'"),
        (("counts", "max_tool_calls"), math.inf, "count of 'max_tool_calls' must be an integer"),
        (("counts", "max_turns"), 10**12, "count of 'max_turns' must be an integer from 0"),
        (("counts", "max_hours"), 1, "counts an unknown run limit 'max_hours'"),
        (("call_ids",), [{"id": "c1"}, "c2"], "'call_ids' must be a list of non-empty strings"),
        (("call_ids",), ["c1", "c1"], "names a tool call twice"),
        (("grant",), "echo", "'grant' must be a list of non-empty strings"),
        (("pending",), [], "must hold 1 to 32 pending decisions"),
        (("pending", 1, "tool_call_id"), "c9", "pending decisions for calls not in its round"),
        (("pending", 1, "tool_call_id"), "c1", "pending decisions for calls not in its round"),
        (("metadata",), [["ticket", "T-1"]], "'metadata' must be an object"),
        (("sticky",), {"echo": {"action": "allow_for_run", "reason": 5}}, "sticky reasons"),
        (("sticky",), {"echo": "allow_for_run"}, "sticky rules must map tool names"),
        (("sticky",), {"echo": {"action": "approve"}}, "sticky rules must map tool names"),
        (("run_id",), "", "'run_id' must be a non-empty string"),
    ],
)
async def test_a_stored_suspension_is_read_exactly_as_written(
    path: tuple[str | int, ...], value: Any, message: str
) -> None:
    state = await suspended_state()
    edit(state, ("suspension", *path), value)
    agent = build_agent(ScriptedProvider([answer()]), Recorder())

    with pytest.raises(ValueError, match=re.escape(message)):
        agent.session(state=state)
    with pytest.raises(ValueError, match=re.escape(message)):
        agent.session(state=json.dumps(state))


async def test_a_stored_message_with_a_role_of_the_wrong_kind_is_a_value_error() -> None:
    state = await suspended_state()
    state["messages"][0]["role"] = ["user"]
    agent = build_agent(ScriptedProvider([answer()]), Recorder())

    with pytest.raises(ValueError, match="unknown role"):
        agent.session(state=state)


async def test_a_stored_message_naming_one_call_id_twice_is_a_value_error() -> None:
    # As a provider's turn may not: the second call could never get a row of its own.
    state = await suspended_state()
    calls = state["messages"][1]["tool_calls"]
    calls[1]["id"] = calls[0]["id"]
    agent = build_agent(ScriptedProvider([answer()]), Recorder())

    with pytest.raises(ValueError, match="two stored tool calls of one message share the id"):
        agent.session(state=state)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        # The approved call's arguments, or its tool, changed after the decision was asked for.
        (("messages", 1, "tool_calls", 0, "arguments"), {"text": "rm -rf /"}),
        (("messages", 1, "tool_calls", 0, "name"), "other"),
        # c2 keeps its place in the round but loses its pending decision: no rule covers it.
        (("suspension", "pending"), "drop c2"),
    ],
    ids=["arguments", "tool", "undecided"],
)
async def test_a_resume_refuses_a_stored_round_that_no_longer_matches_its_decisions(
    path: tuple[str | int, ...], value: Any
) -> None:
    state = await suspended_state()
    if value == "drop c2":
        edit(state, path, state["suspension"]["pending"][:1])
    else:
        edit(state, path, value)
    echo, other = Recorder(), Recorder()
    session = build_agent(ScriptedProvider([answer()]), echo, other).session(state=state)
    pending = session.pending

    with pytest.raises(ApprovalError, match=r"Suspended tool call 'c[12]'"):
        await session.resume({item.approval_id: "approve" for item in pending})

    assert echo.calls == []  # the tool did not run
    assert other.calls == []
    assert session.pending == pending


async def test_a_round_call_covered_by_a_stored_rule_still_runs_under_it() -> None:
    # The legitimate shape of a call without a pending decision: an allow_for_run rule for its
    # tool was in force when the round suspended.
    state = await suspended_state()
    state["suspension"]["pending"] = state["suspension"]["pending"][:1]
    state["suspension"]["sticky"] = {"echo": {"action": "allow_for_run", "reason": None}}
    echo = Recorder()
    session = build_agent(ScriptedProvider([answer()]), echo).session(state=state)

    result = await session.resume({"c1": "approve"})

    assert result.status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"}), ("c2", {"text": "two"})]


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            yield from _paths(item, (*path, position))


@given(data=st.data())
async def test_a_stored_state_edited_anywhere_is_refused_or_runs_only_what_it_approved(
    data: st.DataObject,
) -> None:
    # Session states live outside the process. Edited anywhere, with anything, a state is
    # either refused as a ValueError, or restores to a session whose resume is refused with
    # nothing run, or runs only calls matching an approved pending decision or a stored rule.
    state = await suspended_state()
    paths = [path for path in _paths(state) if path]
    for _ in range(data.draw(st.integers(0, 3))):
        path, value = data.draw(st.sampled_from(paths)), data.draw(small_json())
        with suppress(LookupError, TypeError):  # an earlier edit removed the path
            edit(state, path, value)
    echo = Recorder()
    agent = build_agent(ScriptedProvider([answer(), answer()]), echo)
    try:
        session = agent.session(state=state)
    except ValueError:
        event("restore refused")
        return
    suspension = session.suspension
    if suspension is None:
        event("nothing suspended")
        return
    try:
        await session.resume({item.approval_id: "approve" for item in suspension.outstanding})
    except ApprovalError:
        event("resume refused")
        assert echo.calls == []
        return
    event(f"resumed, {len(echo.calls)} ran")
    approved = {
        (item.tool_call_id, item.tool_name, item.arguments_hash)
        for item in suspension.pending
        if suspension.decided.get(item.tool_call_id, Decision("approve")).approves
    }
    allowed = {name for name, rule in suspension.sticky.items() if rule.action == "allow_for_run"}
    for call_id, arguments in echo.calls:
        assert (call_id, "echo", arguments_hash(arguments)) in approved or "echo" in allowed


# --- checkpoint stores ----------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckpointStore]:
    if request.param == "memory":
        yield InMemoryCheckpointStore()
        return
    with SqliteCheckpointStore(tmp_path / "checkpoints.db") as sqlite_store:
        yield sqlite_store


def test_checkpoint_stores_save_load_and_delete(store: CheckpointStore) -> None:
    assert isinstance(store, CheckpointStore)
    assert store.load("s1") is None
    store.save("s1", {"version": 1, "messages": []})
    store.save("s1", {"version": 1, "messages": ["x"]})
    assert store.load("s1") == {"version": 1, "messages": ["x"]}
    store.delete("s1")
    store.delete("s1")
    assert store.load("s1") is None
    with pytest.raises(ValueError, match="session_id"):
        store.save("", {})


def test_checkpoint_stores_refuse_a_session_id_holding_a_lone_surrogate(
    store: CheckpointStore,
) -> None:
    # Refused by both stores alike, and never read as "s\ufffd", which is another session.
    store.save("s\ufffd", {"version": 1})
    for use in (
        lambda: store.save("s\ud800", {"version": 2}),
        lambda: store.load("s\ud800"),
        lambda: store.delete("s\ud800"),
    ):
        with pytest.raises(ValueError, match="session_id holds a lone surrogate"):
            use()
    assert store.load("s\ufffd") == {"version": 1}
    store.save("séance-天", {"version": 3})
    assert store.load("séance-天") == {"version": 3}


def test_checkpoint_stores_refuse_a_state_nested_too_deeply(store: CheckpointStore) -> None:
    nested: Any = "x"
    for _ in range(100_000):
        nested = [nested]
    store.save("s1", {"version": 1})
    with pytest.raises(ValueError, match="nests too deeply"):
        store.save("s1", {"version": 2, "nested": nested})
    assert store.load("s1") == {"version": 1}


def test_a_stored_state_nested_too_deeply_for_the_reader_is_a_value_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoints.db"
    with SqliteCheckpointStore(path) as store:
        store.save("s1", {"version": 1})
    # Written by something else (another version, a hand edit): not by save(), which refuses it.
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE prism_checkpoints SET state = ?", ("[" * 100_000 + "]" * 100_000,))
    with SqliteCheckpointStore(path) as store, pytest.raises(ValueError, match="nests too deeply"):
        store.load("s1")


def test_the_sqlite_store_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    with SqliteCheckpointStore(path) as first:
        first.save("s1", {"version": 1})
    with SqliteCheckpointStore(path) as again:
        assert again.load("s1") == {"version": 1}


def test_the_sqlite_store_closes_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unreadable = not_a_database(tmp_path / "notes.db")
    opened = OpenedConnections().install(monkeypatch)
    with pytest.raises(sqlite3.DatabaseError):
        SqliteCheckpointStore(unreadable)
    with SqliteCheckpointStore(tmp_path / "checkpoints.db") as store:
        store.save("s1", {"version": 1})
        assert len(opened.still_open()) == 1
    assert len(opened.connections) == 2
    assert opened.still_open() == []
    with pytest.raises(sqlite3.ProgrammingError):
        store.load("s1")


async def test_a_suspended_run_is_checkpointed_and_resumed_by_session_id(
    store: CheckpointStore,
) -> None:
    first_echo = Recorder()
    agent = build_agent(ScriptedProvider([calling(call("c1"))]), first_echo, checkpoints=store)
    session = agent.session("s-42")
    suspended = await session.run("hi")
    assert store.load("s-42") is not None
    assert first_echo.calls == []

    echo = Recorder()
    fresh = build_agent(ScriptedProvider([answer()]), echo, checkpoints=store)
    restored = fresh.resume_session("s-42")
    assert restored.pending == suspended.pending

    result = await restored.resume({"c1": "approve"})

    assert result.status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"})]
    assert store.load("s-42") is None  # the resumed run ended
    with pytest.raises(ApprovalError, match="No checkpoint"):
        fresh.resume_session("s-42")


async def test_a_cancelled_resume_removes_the_checkpoint_it_consumed(
    store: CheckpointStore,
) -> None:
    started = asyncio.Event()

    async def slow(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        started.set()
        await asyncio.sleep(30)

    agent = create_agent(
        model=MODEL,
        provider=ScriptedProvider([calling(call("c1")), answer()]),
        tools=[ToolDefinition(name="echo", execute=slow, parameters=SCHEMA)],
        interrupt_before_tool=True,
        checkpoints=store,
    )
    session = agent.session("s-cancel")
    await session.run("hi")
    assert store.load("s-cancel") is not None
    resumed = asyncio.ensure_future(session.resume({"c1": "approve"}))
    await started.wait()
    resumed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await resumed
    # What the store held (approvals used, the round without rows) is gone: no worker can load
    # it and take the call that started for one that never ran.
    assert store.load("s-cancel") is None
    with pytest.raises(ApprovalError, match="No checkpoint"):
        agent.resume_session("s-cancel")


async def test_a_consumed_checkpoint_never_offers_the_calls_again(
    store: CheckpointStore,
) -> None:
    class Crash(Exception):
        pass

    async def crashing(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        raise Crash("boom")

    calls: list[str] = []

    class Spy:
        def __init__(self) -> None:
            self.saved: list[dict[str, Any]] = []

        def save(self, session_id: str, state: Any) -> None:
            self.saved.append(json.loads(json.dumps(state)))
            store.save(session_id, state)

        def replace(self, session_id: str, expected: Any, state: Any) -> bool:
            replaced = store.replace(session_id, expected, state)
            if replaced:
                self.saved.append(json.loads(json.dumps(state)))
            return replaced

        def load(self, session_id: str) -> Any:
            return store.load(session_id)

        def delete(self, session_id: str) -> None:
            calls.append(session_id)
            store.delete(session_id)

    spy = Spy()
    agent = create_agent(
        model=MODEL,
        provider=ScriptedProvider([calling(call("c1")), answer()]),
        tools=[ToolDefinition(name="echo", execute=crashing, parameters=SCHEMA)],
        interrupt_before_tool=True,
        checkpoints=spy,
    )
    session = agent.session("s-1")
    await session.run("hi")
    await session.resume({"c1": "approve"})

    # Saved once suspended, once when the resume consumed the approvals (nothing pending).
    assert ["suspension" in state for state in spy.saved] == [True, False]
    assert calls == ["s-1"]


def test_checkpoint_stores_replace_only_the_state_they_hold(store: CheckpointStore) -> None:
    first = {"version": 1, "n": 0.1, "big": 2**70, "nan": math.nan, "text": "é\ud800"}
    store.save("s1", first)
    assert store.replace("s1", {"version": 1}, {"version": 9}) is False
    assert store.replace("other", first, {"version": 9}) is False
    assert store.load("other") is None
    # A state as load returns it is the state held, NaN and lone surrogate escapes included.
    loaded = store.load("s1")
    assert loaded is not None
    assert store.replace("s1", loaded, {"version": 2}) is True
    assert store.load("s1") == {"version": 2}
    assert store.replace("s1", loaded, {"version": 3}) is False
    assert store.load("s1") == {"version": 2}
    with pytest.raises(ValueError, match="session_id"):
        store.replace("", {"version": 2}, {"version": 3})


async def test_two_sessions_read_from_one_checkpoint_run_its_approved_calls_once(
    store: CheckpointStore,
) -> None:
    echo = Recorder()
    agent = build_agent(ScriptedProvider([calling(call("c1")), answer()]), echo, checkpoints=store)
    await agent.session("s-1").run("hi")
    first, second = agent.resume_session("s-1"), agent.resume_session("s-1")

    assert (await first.resume({"c1": "approve"})).status == "succeeded"
    with pytest.raises(ApprovalError, match="changed after this session read it"):
        await second.resume({"c1": "approve"})

    assert echo.calls == [("c1", {"text": "hi"})]
    assert [item.tool_call_id for item in second.pending] == ["c1"]  # left as it was
    assert store.load("s-1") is None  # the first resume's run ended; nothing wrote after it


async def test_concurrent_resumes_of_one_checkpoint_run_the_round_once(
    store: CheckpointStore,
) -> None:
    ran: list[str] = []

    async def slow(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        await asyncio.sleep(0.01)  # both resumes are under way before either round ends
        ran.append(context.tool_call_id)
        return "ok"

    agent = create_agent(
        model=MODEL,
        provider=ScriptedProvider([calling(call("c1")), answer(), answer()]),
        tools=[ToolDefinition(name="echo", execute=slow, parameters=SCHEMA)],
        interrupt_before_tool=True,
        checkpoints=store,
    )
    await agent.session("s-1").run("hi")
    sessions = [agent.resume_session("s-1") for _ in range(4)]

    outcomes = await asyncio.gather(
        *(session.resume({"c1": "approve"}) for session in sessions), return_exceptions=True
    )

    assert ran == ["c1"]
    assert sum(isinstance(item, ApprovalError) for item in outcomes) == 3
    assert [item.status for item in outcomes if not isinstance(item, BaseException)] == [
        "succeeded"
    ]


async def suspended_with_two_calls(store: CheckpointStore) -> tuple[Any, Recorder]:
    """An agent whose session ``s-1`` is suspended on calls c1 and c2, saved in ``store``."""
    echo = Recorder()
    round_of_two = calling(call("c1"), call("c2", text="two"))
    agent = build_agent(ScriptedProvider([round_of_two, answer()]), echo, checkpoints=store)
    await agent.session("s-1").run("hi")
    return agent, echo


async def test_a_stale_session_cannot_overwrite_decisions_kept_in_the_checkpoint(
    store: CheckpointStore,
) -> None:
    agent, echo = await suspended_with_two_calls(store)
    first, second = agent.resume_session("s-1"), agent.resume_session("s-1")

    assert (await first.resume({"c1": "approve"})).status == "suspended"
    with pytest.raises(ApprovalError, match="changed after this session read it"):
        await second.resume({"c1": "reject_once"})

    again = agent.resume_session("s-1")
    assert [item.tool_call_id for item in again.pending] == ["c2"]
    assert (await again.resume({"c2": "approve"})).status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"}), ("c2", {"text": "two"})]


def test_workers_with_their_own_sqlite_connections_run_an_approved_round_once(
    tmp_path: Path,
) -> None:
    """Each thread stands for a worker process: its own connection, agent and event loop."""
    path = tmp_path / "checkpoints.db"
    echo = Recorder()
    with SqliteCheckpointStore(path) as store:
        agent = build_agent(ScriptedProvider([calling(call("c1"))]), echo, checkpoints=store)
        asyncio.run(agent.session("s-1").run("hi"))
    workers = 6
    all_loaded = threading.Barrier(workers)

    def worker() -> str:
        with SqliteCheckpointStore(path) as own:
            mine = build_agent(ScriptedProvider([answer()]), echo, checkpoints=own)
            session = mine.resume_session("s-1")
            all_loaded.wait()
            try:
                return asyncio.run(session.resume({"c1": "approve"})).status
            except ApprovalError:
                return "refused"

    with ThreadPoolExecutor(workers) as pool:
        outcomes = sorted(pool.map(lambda _: worker(), range(workers)))

    assert outcomes == ["refused"] * (workers - 1) + ["succeeded"]
    assert echo.calls == [("c1", {"text": "hi"})]


def test_a_store_without_replace_is_refused() -> None:
    class Unconditional:
        def save(self, session_id: str, state: Any) -> None: ...

        def load(self, session_id: str) -> Any: ...

        def delete(self, session_id: str) -> None: ...

    with pytest.raises(TypeError, match="save, replace, load and delete"):
        create_agent(
            model=MODEL,
            provider=ScriptedProvider([]),
            tools=[],
            checkpoints=Unconditional(),  # type: ignore[arg-type]
        )


def test_pending_decisions_round_trip_through_json() -> None:
    item = PendingDecision("approval_1", "c1", "echo", "0" * 64)
    assert PendingDecision.from_dict(json.loads(json.dumps(item.to_dict()))) == item
    with pytest.raises(ValueError, match="four non-empty"):
        PendingDecision.from_dict({"approval_id": "a"})


def test_checkpoints_must_be_a_store() -> None:
    with pytest.raises(TypeError, match="checkpoints"):
        create_agent(
            model=MODEL,
            provider=ScriptedProvider([]),
            tools=[],
            checkpoints=object(),  # type: ignore[arg-type]
        )


def test_resume_session_needs_a_store() -> None:
    agent = create_agent(model=MODEL, provider=ScriptedProvider([]), tools=[])
    with pytest.raises(TypeError, match="checkpoints"):
        agent.resume_session("s1")


# --- decisions from outside: any shape ----------------------------------------------------------

_JSON = small_json()
_ACTION = st.one_of(
    st.sampled_from(["approve", "reject_once", "allow_for_run", "reject_for_run"]),
    st.text(max_size=8),
    _JSON,
)
_DECISION = st.one_of(
    _ACTION,
    st.builds(Decision, st.sampled_from(["approve", "allow_for_run"]), _JSON),
    _JSON,
    st.fixed_dictionaries(
        {"action": _ACTION},
        optional={"arguments": _JSON, "reason": st.one_of(st.text(max_size=30), _JSON)},
    ),
)


# Decisions as a host means them, with the arguments and reasons still of any shape.
_MEANT_DECISION = st.one_of(
    st.sampled_from(["approve", "reject_once", "allow_for_run", "reject_for_run"]),
    st.builds(Decision, st.sampled_from(["approve", "allow_for_run"]), _JSON),
    st.fixed_dictionaries(
        {"action": st.sampled_from(["reject_once", "reject_for_run"])},
        optional={"reason": st.one_of(st.text(max_size=30), _JSON)},
    ),
)


def _action_of(decision: object) -> object:
    if isinstance(decision, str):
        return decision
    if isinstance(decision, dict):
        return decision.get("action")
    return decision.action if isinstance(decision, Decision) else None


@given(data=st.data())
async def test_decisions_of_any_shape_run_only_approved_calls_or_are_refused_whole(
    data: st.DataObject,
) -> None:
    # A host's UI hands decisions over from outside the process: whatever their shape, a call
    # runs only under an approving decision, and decisions that are refused leave the session
    # suspended exactly as it was, with nothing run.
    echo = Recorder()
    session, _, _ = make(
        [calling(call("c1"), call("c2", text="there")), answer(), answer()], ("echo", echo)
    )
    pending = (await session.run("hi")).pending
    if data.draw(st.booleans()):
        # One key per pending call, by either of its names: the decisions a host means to give.
        keys = [
            data.draw(st.sampled_from([item.approval_id, item.tool_call_id])) for item in pending
        ]
        values = _MEANT_DECISION
    else:
        names = [item.approval_id for item in pending] + ["c1", "c2"]
        keys = data.draw(
            st.lists(st.one_of(st.sampled_from(names), st.text(max_size=6)), max_size=4)
        )
        values = _DECISION
    decisions: Any = {key: data.draw(values) for key in keys}
    if data.draw(st.booleans()):
        decisions = data.draw(st.one_of(_JSON, st.just(decisions)))
    try:
        await session.resume(decisions)
    except (ApprovalError, TypeError, ValueError):
        event("refused")
        assert echo.calls == [], "refused decisions must not run a call"
        assert session.pending == pending
        return
    event(f"resumed, {len(echo.calls)} ran")
    assert isinstance(decisions, dict)
    for item in pending:
        # A decision names its call by approval id or by tool call id.
        decision = decisions.get(item.approval_id, decisions.get(item.tool_call_id))
        if item.tool_call_id in [call_id for call_id, _ in echo.calls]:
            assert _action_of(decision) in ("approve", "allow_for_run")


@pytest.mark.parametrize(
    "rewrite",
    [
        lambda state: json.loads(json.dumps(state, sort_keys=True)),  # a JSON column's key order
        lambda state: json.loads(json.dumps(state).replace("1.0", "1")),  # 1.0 written as 1
    ],
    ids=["sorted-keys", "integral-float"],
)
async def test_a_state_rewritten_by_another_json_writer_still_resumes_once(
    store: CheckpointStore, rewrite: Callable[[Any], Any]
) -> None:
    echo = Recorder()
    agent = build_agent(ScriptedProvider([calling(call("c1")), answer()]), echo, checkpoints=store)
    session = agent.session("s-1")
    await session.run("hi", metadata={"ratio": 1.0, "b": 2, "a": 1})
    stored = store.load("s-1")
    assert stored is not None
    assert rewrite(stored) != stored or json.dumps(rewrite(stored)) != json.dumps(stored)
    # The host kept the state through its own JSON layer and hands it back.
    first = agent.session(state=rewrite(stored))
    second = agent.session(state=rewrite(stored))
    assert (await first.resume({"c1": "approve"})).status == "succeeded"
    with pytest.raises(ApprovalError):
        await second.resume({"c1": "approve"})
    assert echo.calls == [("c1", {"text": "hi"})]


async def test_a_state_changed_after_restore_cannot_change_what_the_resume_expects(
    store: CheckpointStore,
) -> None:
    agent, echo = await suspended_with_two_calls(store)
    loaded = store.load("s-1")
    assert loaded is not None
    first, stale = agent.session(state=loaded), agent.session(state=loaded)
    assert (await first.resume({"c1": "reject_once"})).status == "suspended"
    # The host refreshes the dict it restored both sessions from, in place, from the store.
    refreshed = store.load("s-1")
    assert refreshed is not None
    loaded.clear()
    loaded.update(refreshed)
    with pytest.raises(ApprovalError):
        await stale.resume({"c1": "approve", "c2": "approve"})
    assert echo.calls == []  # c1 stays rejected, and nothing ran


async def test_a_store_whose_replace_answers_with_a_truthy_stranger_is_not_taken_as_yes() -> None:
    inner = InMemoryCheckpointStore()

    class Cursorish:
        def save(self, session_id: str, state: Any) -> None:
            inner.save(session_id, state)

        def replace(self, session_id: str, expected: Any, state: Any) -> Any:
            return object()  # truthy, not True

        def load(self, session_id: str) -> Any:
            return inner.load(session_id)

        def delete(self, session_id: str) -> None:
            inner.delete(session_id)

    echo = Recorder()
    agent = build_agent(
        ScriptedProvider([calling(call("c1")), answer()]), echo, checkpoints=Cursorish()
    )
    session = agent.session("s-1")
    await session.run("hi")
    with pytest.raises(ApprovalError):
        await session.resume({"c1": "approve"})
    assert echo.calls == []


async def test_a_slow_subscriber_of_the_suspension_cannot_fail_a_suspended_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = WallClock().install(monkeypatch)
    # Grace enough for the subscriber to end on its own once the clock has jumped.
    monkeypatch.setattr("prism_tools.agent.CLOSING_EVENTS_GRACE_MS", 2 * WallClock.LIMIT_MS)

    async def slow(event: Any) -> None:
        if event.type == "run_suspended":
            clock.use_up()  # the subscriber is still at work when the run's wall time is gone
            await asyncio.sleep(0.3)

    echo = Recorder()
    agent = build_agent(
        ScriptedProvider([calling(call("c1")), answer()]),
        echo,
        limits={"max_wall_time_ms": WallClock.LIMIT_MS},
    )
    session = agent.session()
    session.subscribe(slow)
    result = await session.run("hi")
    assert result.status == "suspended"
    assert (await session.resume({"c1": "approve"})).status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"})]


async def test_call_ids_a_provider_repeats_every_turn_resume_the_latest_round() -> None:
    # A provider that sends no ids gets call_0 on every turn; the loop renames the second one.
    echo = Recorder()
    script = [calling(call("call_0")), calling(call("call_0", text="again")), answer()]
    agent = build_agent(ScriptedProvider(script), echo)
    session = agent.session()
    assert (await session.run("hi")).status == "suspended"
    assert (await session.resume({"call_0": "approve"})).status == "suspended"
    assert [item.tool_call_id for item in session.pending] == ["call_0_1"]
    with pytest.raises(ApprovalError, match="Unknown approval id: 'call_0'"):
        await session.resume({"call_0": "approve"})
    assert (await session.resume({"call_0_1": "approve"})).status == "succeeded"
    assert echo.calls == [("call_0", {"text": "hi"}), ("call_0_1", {"text": "again"})]


def hidden_call_agent(provider: ScriptedProvider, echo: Recorder, **options: Any) -> Any:
    """An agent that shows only ``other`` and lets hidden calls through unless a run says no."""
    return build_agent(
        provider,
        echo,
        tool_narrowing=lambda context: ["other"],
        allow_hidden_tool_calls=True,
        **options,
    )


@pytest.mark.parametrize("through_state", [False, True])
async def test_a_resumed_round_keeps_the_runs_refusal_of_hidden_calls(through_state: bool) -> None:
    echo = Recorder()
    session = hidden_call_agent(ScriptedProvider([calling(call("h1")), answer()]), echo).session()
    suspended = await session.run("hi", allow_hidden_tool_calls=False)
    assert suspended.status == "suspended"
    assert session.state["suspension"]["scope"] == {"allow_hidden_tool_calls": False}
    if through_state:
        fresh = hidden_call_agent(ScriptedProvider([answer()]), echo)
        session = fresh.session(state=json.loads(json.dumps(session.state)))

    result = await session.resume({"h1": "approve"})

    assert echo.calls == []  # approved, but the run refused hidden calls: it did not run
    rows = tool_rows(result.messages)
    assert [row.error.message if row.error else None for row in rows] == ["Tool denied: echo"]


async def test_a_resume_passing_its_own_scoping_option_replaces_the_runs() -> None:
    echo = Recorder()
    session = hidden_call_agent(ScriptedProvider([calling(call("h1")), answer()]), echo).session()
    await session.run("hi", allow_hidden_tool_calls=False)

    result = await session.resume({"h1": "approve"}, allow_hidden_tool_calls=True)

    assert result.status == "succeeded"
    assert echo.calls == [("h1", {"text": "hi"})]


async def test_a_resumed_round_keeps_the_runs_search_disclosure() -> None:
    # search_tools exists only on turns the run's tools_disclosure="search" builds it: the
    # approved call to it runs on resume, and the next turn is still narrowed by search.
    echo = Recorder()
    search = ToolCall(id="s1", name="search_tools", arguments={"query": "echo text"})
    provider = ScriptedProvider([calling(search), answer()])
    session = build_agent(provider, echo).session()
    suspended = await session.run(
        "find a tool", tools_disclosure="search", tools_search={"top_k": 3}
    )
    assert [item.tool_name for item in suspended.pending] == ["search_tools"]
    assert session.state["suspension"]["scope"] == {
        "tools_disclosure": "search",
        "tools_search": {"top_k": 3},
    }

    result = await session.resume({"s1": "approve"})

    rows = tool_rows(result.messages)
    assert rows[0].error is None, rows[0].error
    assert "echo" in str(rows[0].content)
    assert "search_tools" in [tool.name for tool in provider.requests[-1].tools]


@pytest.mark.parametrize(
    ("scope", "complaint"),
    [
        ({"tools_disclosure": "some"}, "tools_disclosure"),
        ({"tools_search": {"top_k": 0}}, "tools_search"),
        ({"tools_search": {"top_k": True}}, "tools_search"),
        ({"tools_search": {}}, "tools_search"),
        ({"allow_hidden_tool_calls": "false"}, "allow_hidden_tool_calls"),
        ({"tool_names": ["echo"]}, "unknown options: tool_names"),
        (["allow_hidden_tool_calls"], "'scope' must be an object"),
    ],
)
async def test_a_stored_suspension_with_a_malformed_scope_is_refused(
    scope: Any, complaint: str
) -> None:
    session = build_agent(ScriptedProvider([calling(call("c1"))]), Recorder()).session()
    await session.run("hi", allow_hidden_tool_calls=True)
    state = json.loads(json.dumps(session.state))
    state["suspension"]["scope"] = scope
    with pytest.raises(ValueError, match=re.escape(complaint)):
        build_agent(ScriptedProvider([]), Recorder()).session(state=state)


async def test_a_stored_suspension_without_a_scope_resumes_with_the_agents_options() -> None:
    # States written before the scope was kept have none: the agent's options apply.
    echo = Recorder()
    session = hidden_call_agent(ScriptedProvider([calling(call("h1"))]), echo).session()
    await session.run("hi")
    state = json.loads(json.dumps(session.state))
    assert "scope" not in state["suspension"]  # the run was given no scoping option
    fresh = hidden_call_agent(ScriptedProvider([answer()]), echo).session(state=state)
    assert (await fresh.resume({"h1": "approve"})).status == "succeeded"
    assert echo.calls == [("h1", {"text": "hi"})]


# --- what the stored state carries, exactly --------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def schemaless_agent(provider: ScriptedProvider, echo: Recorder, **options: Any) -> Any:
    return create_agent(
        model=MODEL,
        provider=provider,
        tools=[ToolDefinition(name="echo", execute=echo)],
        interrupt_before_tool=True,
        **options,
    )


async def test_arguments_json_keeps_whole_resume_from_a_stored_state(
    store: CheckpointStore,
) -> None:
    # What a provider adapter hands over: every digit of a wide integer, a lone surrogate (a
    # decoder makes one from "\ud800"), nesting as deep as the adapters take it, and call ids
    # that differ only by a lone surrogate (which the loop gives as the providers send them,
    # U+FFFD in its place, the second renamed so the two stay apart).
    wide = {"amount": 123456789012345678901234567890, "note": "x\ud800y", "deep": nested(250)}
    calls = (ToolCall("c\ud800", "echo", wide), ToolCall("c\ud801", "echo", {"n": -(2**70)}))
    agent = schemaless_agent(ScriptedProvider([calling(*calls)]), Recorder(), checkpoints=store)
    suspended = await agent.session("s1").run("go")
    first, second = "c\ufffd", "c\ufffd_1"
    assert [item.tool_call_id for item in suspended.pending] == [first, second]

    echo = Recorder()
    fresh = schemaless_agent(ScriptedProvider([answer()]), echo, checkpoints=store)
    restored = fresh.resume_session("s1")
    result = await restored.resume({first: "approve", second: "approve"})

    assert result.status == "succeeded"
    assert echo.calls == [(first, wide), (second, {"n": -(2**70)})]


async def test_edited_arguments_kept_for_a_partial_batch_reach_the_tool_unchanged() -> None:
    first = schemaless_agent(ScriptedProvider([calling(call("a"), call("b"))]), Recorder())
    session = first.session()
    await session.run("go")
    edited = {"n": 2**70, "s": "x\ud800y", "nested": {"k": 10**30}}
    partial = await session.resume({"a": Decision("approve", arguments=edited)})
    assert partial.status == "suspended"

    echo = Recorder()
    fresh = schemaless_agent(ScriptedProvider([answer()]), echo)
    restored = fresh.session(state=json.dumps(session.state))
    assert (await restored.resume({"b": "reject_once"})).status == "succeeded"
    assert echo.calls == [("a", edited)]


def test_the_arguments_hash_tells_apart_what_json_tells_apart() -> None:
    from prism_tools.approval import call_arguments_hash

    different = [
        ({"__proto__": "x"}, {"__proto__": "rm -rf /"}),
        ({"n": 2**53}, {"n": 2**53 + 1}),
        ({"n": 2**70}, {"n": 2**70 + 1}),
        ({"s": "x\ud800"}, {"s": "x\ufffd"}),
    ]
    for left, right in different:
        assert call_arguments_hash(left) != call_arguments_hash(right), (left, right)
    # Spellings another JSON writer may change do not count.
    same = [
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({"n": 1}, {"n": 1.0}),
        ({"n": -0.0}, {"n": 0}),
        ({"l": (1, 2)}, {"l": [1, 2]}),
    ]
    for left, right in same:
        assert call_arguments_hash(left) == call_arguments_hash(right), (left, right)


class FailingStore(InMemoryCheckpointStore):
    """A checkpoint store whose save or delete fails, as a locked database does."""

    def __init__(self, *, save: bool = False, delete: bool = False) -> None:
        super().__init__()
        self.fail_save, self.fail_delete = save, delete

    def save(self, session_id: str, state: Any) -> None:
        if self.fail_save:
            raise sqlite3.OperationalError("database is locked (sk-store-secret)")
        super().save(session_id, state)

    def delete(self, session_id: str) -> None:
        if self.fail_delete:
            raise sqlite3.OperationalError("disk I/O error (sk-store-secret)")
        super().delete(session_id)


async def test_a_failed_checkpoint_save_fails_the_run_and_leaves_nothing_waiting() -> None:
    echo = Recorder()
    store = FailingStore(save=True)
    agent = build_agent(
        ScriptedProvider([calling(call("c1"), call("c2")), answer("later")]),
        echo,
        checkpoints=store,
    )
    session = agent.session("s1")
    log = EventLog()
    session.subscribe(log)

    with pytest.raises(AgentRunError) as failed:
        await session.run("hi")

    assert isinstance(failed.value.__cause__, sqlite3.OperationalError)
    assert session.pending == ()
    assert session.suspension is None
    assert store.load("s1") is None
    assert echo.calls == []
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["c1", "c2"]
    assert all(
        row.error is not None and row.error.code == "tool_call_not_dispatched" for row in rows
    )
    assert log.types[-1] == "agent_finished"
    # Not stuck: the session takes its next run.
    store.fail_save = False
    assert (await session.run("again")).output_text == "later"
    assert echo.calls == []


async def test_a_failed_checkpoint_delete_after_a_resumed_run_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    echo = Recorder()
    store = FailingStore(delete=True)
    agent = build_agent(ScriptedProvider([calling(call("c1")), answer()]), echo, checkpoints=store)
    session = agent.session("s1")
    await session.run("hi")

    with caplog.at_level("WARNING", logger="prism_tools.agent"):
        result = await session.resume({"c1": "approve"})

    assert result.status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"})]
    assert "could not remove the checkpoint" in caplog.text
    assert "OperationalError" in caplog.text
    assert "sk-store-secret" not in caplog.text
    stored = store.load("s1")
    assert stored is not None
    assert "suspension" not in stored


@pytest.mark.parametrize(
    ("first", "second"), [("reject_for_run", "allow_for_run"), ("allow_for_run", "reject_for_run")]
)
async def test_opposite_run_rules_for_one_tool_keep_the_rejection(first: str, second: str) -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("a"), call("b")), calling(call("z", text="later")), answer()],
        ("echo", echo),
    )
    await session.run("hi")

    result = await session.resume({"a": first, "b": second})

    assert result.status == "succeeded"
    allowed = "b" if second == "allow_for_run" else "a"
    assert echo.calls == [(allowed, {"text": "hi"})]  # z never ran
    later = {row.tool_call_id: row for row in tool_rows(result.messages)}["z"]
    assert later.error is not None
    assert later.error.code == APPROVAL_REJECTED


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ({"tools_disclosure": "bogus"}, ValueError),
        ({"tools_search": {"top_k": "many"}}, TypeError),
        ({"tools_search": {"size": 1}}, TypeError),
    ],
    ids=["disclosure", "search-top-k", "search-key"],
)
async def test_a_bad_scoping_option_on_resume_leaves_the_approvals_waiting(
    option: dict[str, Any], error: type[Exception]
) -> None:
    echo = Recorder()
    store = InMemoryCheckpointStore()
    session, _, _ = make([calling(call("c1")), answer()], ("echo", echo), checkpoints=store)
    session_id = session.id
    await session.run("hi")

    with pytest.raises(error):
        await session.resume({"c1": "approve"}, **option)

    assert echo.calls == []
    assert [item.tool_call_id for item in session.pending] == ["c1"]
    assert store.load(session_id) is not None
    assert (await session.resume({"c1": "approve"})).status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"})]


async def test_a_resume_that_narrows_max_tool_rounds_stops_before_the_suspended_round() -> None:
    echo = Recorder()
    session, _, _ = make(
        [calling(call("r1")), calling(call("r2", text="two")), answer("after")], ("echo", echo)
    )
    await session.run("hi")
    assert (await session.resume({"r1": "approve"})).status == "suspended"

    result = await session.resume({"r2": "approve"}, limits={"max_tool_rounds": 1})

    assert result.status == "succeeded"
    assert result.finish_reason == "turn_limit"
    assert echo.calls == [("r1", {"text": "hi"})]  # r2 never ran
    assert session.pending == ()
    # As after any stop at the round limit, the next run answers the call first.
    assert (await session.run("go on")).output_text == "after"
    row = {row.tool_call_id: row for row in tool_rows(session.messages)}["r2"]
    assert row.error is not None
    assert row.error.code == "tool_call_not_dispatched"
    assert echo.calls == [("r1", {"text": "hi"})]


async def test_a_value_json_cannot_hold_elsewhere_keeps_the_calls_exact() -> None:
    # A tool result keyed by dates stays in the transcript as the tool gave it; with a lone
    # surrogate elsewhere no JSON writer takes the state whole. Only the odd value is written
    # leniently: the suspended call's name and wide integer stay exact.
    import datetime

    def series(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        return {datetime.date(2024, 1, 1): 5}

    odd = "x\ud800"
    registered = Recorder()
    tools = [
        ToolDefinition(name="series", execute=series),
        ToolDefinition(name="x\ufffd", execute=registered),
        ToolDefinition(name="pay", execute=registered),
    ]
    script = [
        calling(ToolCall("c1", "series", {})),
        calling(ToolCall("c2", odd, {}), ToolCall("c3", "pay", {"amount": 2**70})),
        answer(),
    ]
    store = InMemoryCheckpointStore()

    def agent(provider_script: list[Any]) -> Any:
        return create_agent(
            model=MODEL,
            provider=ScriptedProvider(provider_script),
            tools=tools,
            interrupt_before_tool=True,
            checkpoints=store,
        )

    session = agent(script).session("s")
    await session.run("go")
    assert (await session.resume({"c1": "approve"})).status == "suspended"

    restored = agent(script[2:]).resume_session("s")
    assert [item.tool_name for item in restored.pending] == [odd, "pay"]
    result = await restored.resume({"c2": "approve", "c3": "approve"})
    assert result.status == "succeeded"
    # The unknown tool stays unknown: nothing ran under the name its U+FFFD spelling has.
    assert registered.calls == [("c3", {"amount": 2**70})]


async def test_arguments_as_deep_as_the_adapters_take_resume_from_a_stored_state() -> None:
    deep = {"tree": nested(255)}
    first = schemaless_agent(ScriptedProvider([calling(ToolCall("c1", "echo", deep))]), Recorder())
    session = first.session()
    assert (await session.run("go")).status == "suspended"
    echo = Recorder()
    fresh = schemaless_agent(ScriptedProvider([answer()]), echo)
    restored = fresh.session(state=json.dumps(session.state))
    assert (await restored.resume({"c1": "approve"})).status == "succeeded"
    assert echo.calls == [("c1", deep)]


async def test_a_signal_of_the_wrong_kind_on_resume_leaves_the_approvals_waiting() -> None:
    echo = Recorder()
    session, _, _ = make([calling(call("c1")), answer()], ("echo", echo))
    await session.run("hi")
    with pytest.raises(TypeError, match=r"signal must be an asyncio\.Event"):
        await session.resume({"c1": "approve"}, signal=True)  # type: ignore[arg-type]
    assert [item.tool_call_id for item in session.pending] == ["c1"]
    with pytest.raises(TypeError, match=r"signal must be an asyncio\.Event"):
        await session.run("hi", signal="stop")  # type: ignore[arg-type]
    assert (await session.resume({"c1": "approve"})).status == "succeeded"
    assert echo.calls == [("c1", {"text": "hi"})]


async def test_a_session_state_holds_what_to_dict_and_float_subclasses_give() -> None:
    class Chain:
        def __init__(self, depth: int) -> None:
            self.depth = depth

        def to_dict(self) -> Any:
            return {"next": Chain(self.depth - 1).to_dict()} if self.depth else "end"

    class Real(float):
        pass

    def odd(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        return {"chain": Chain(980), "real": Real(1.5), "wide": 2**70}

    agent = create_agent(
        model=MODEL,
        provider=ScriptedProvider([calling(ToolCall("c1", "odd", {})), answer()]),
        tools=[ToolDefinition(name="odd", execute=odd)],
    )
    session = agent.session()
    await session.run("go")
    state = session.state  # a value too deep to follow is cut, never a RecursionError
    [row] = [message for message in state["messages"] if message.get("role") == "tool"]
    assert row["content"]["real"] == 1.5
    assert row["content"]["wide"] == 2**70
    assert json.loads(json.dumps(state)) == state
