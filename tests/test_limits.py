"""Run limits: defaults, checks, merging, and what each breach does to a run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from tests.support import EventLog, WallClock

from prism_tools import ErrorInfo, RunLimitError, ToolCall, ToolDefinition, ToolExecutionContext
from prism_tools.agent import NOT_DISPATCHED, AgentRunError, Session, create_agent
from prism_tools.limits import CEILINGS, DEFAULTS, RunLimits, merge_limits, read_limits
from prism_tools.messages import Message, ProviderResponse
from prism_tools.providers import ScriptedProvider


class Recorder:
    """A tool body that records the call id of every call it runs."""

    def __init__(self, value: Any = "ok", delay: float = 0.0) -> None:
        self.ran: list[str] = []
        self.value = value
        self.delay = delay

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.ran.append(context.tool_call_id)
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.value


def answer(text: str = "done") -> ProviderResponse:
    return ProviderResponse(text=text, finish_reason="stop")


def calling(*calls: ToolCall) -> ProviderResponse:
    return ProviderResponse(tool_calls=calls, finish_reason="tool_calls")


def echo_call(call_id: str, name: str = "echo") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={})


def always_calling(turns: int) -> list[ProviderResponse]:
    """``turns`` responses that each call ``echo`` once."""
    return [calling(echo_call(f"call_{turn}")) for turn in range(1, turns + 1)]


def make_session(
    script: list[Any], tool: Recorder | None = None, **options: Any
) -> tuple[Session, ScriptedProvider, Recorder, EventLog]:
    provider = ScriptedProvider(script)
    tool = Recorder() if tool is None else tool
    agent = create_agent(
        model="test-model",
        provider=provider,
        tools=[ToolDefinition(name="echo", execute=tool)],
        **options,
    )
    session = agent.session()
    log = EventLog()
    session.subscribe(log)
    return session, provider, tool, log


async def run_failing(session: Session, *args: Any, **kwargs: Any) -> AgentRunError:
    with pytest.raises(AgentRunError) as caught:
        await session.run(*args, **kwargs)
    return caught.value


def limit_events(log: EventLog) -> list[Any]:
    return [event for event in log.events if event.type == "run_limit_exceeded"]


def tool_rows(messages: tuple[Message, ...] | list[Message]) -> list[Message]:
    return [message for message in messages if message.role == "tool"]


# --- defaults, checks ------------------------------------------------------------------------


def test_defaults_and_ceilings_are_the_documented_numbers() -> None:
    assert dict(DEFAULTS) == {
        "max_turns": 16,
        "max_tool_rounds": 8,
        "max_tool_calls": 32,
        "max_wall_time_ms": 120_000,
    }
    assert dict(CEILINGS) == {
        "max_turns": 64,
        "max_tool_rounds": 64,
        "max_tool_calls": 256,
        "max_wall_time_ms": 1_800_000,
    }
    assert RunLimits() == RunLimits(
        max_turns=16, max_tool_rounds=8, max_tool_calls=32, max_wall_time_ms=120_000
    )
    assert merge_limits(None, None) == RunLimits()


BAD_VALUES = [
    ("max_turns", 0),
    ("max_turns", -1),
    ("max_turns", True),
    ("max_turns", False),
    ("max_turns", 1.0),
    ("max_turns", 2.5),
    ("max_turns", "4"),
    ("max_turns", None),
    ("max_turns", 65),
    ("max_tool_rounds", 0),
    ("max_tool_rounds", 65),
    ("max_tool_calls", 257),
    ("max_tool_calls", float("nan")),
    ("max_wall_time_ms", 0),
    ("max_wall_time_ms", 1_800_001),
]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_bad_values_are_a_type_error_naming_the_limit_and_its_range(name: str, value: Any) -> None:
    expected = f"{name} must be an integer from 1 to {CEILINGS[name]}, got {value!r}"
    with pytest.raises(TypeError) as caught:
        read_limits({name: value})
    assert str(caught.value) == expected
    with pytest.raises(TypeError, match=f"^{name} must be an integer from 1 to"):
        RunLimits(**{name: value})
    with pytest.raises(TypeError, match=f"^{name} must be an integer from 1 to"):
        create_agent(model="m", provider=ScriptedProvider([]), tools=[], limits={name: value})


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
async def test_bad_values_at_run_raise_before_anything_happens(name: str, value: Any) -> None:
    session, provider, _, log = make_session([answer()])
    with pytest.raises(TypeError, match=f"^{name} must be an integer from 1 to"):
        await session.run("hi", limits={name: value})
    assert provider.requests == []
    assert session.messages == []
    assert log.events == []
    # The refused run did not leave the session busy.
    result = await session.run("hi")
    assert result.output_text == "done"


def test_unknown_limit_names_and_non_mappings_are_type_errors() -> None:
    with pytest.raises(TypeError, match=r"^unknown run limit 'max_tokens'; known: max_tool_calls"):
        read_limits({"max_tokens": 5})
    with pytest.raises(TypeError, match="unknown run limit 'maxTurns'"):
        create_agent(model="m", provider=ScriptedProvider([]), tools=[], limits={"maxTurns": 2})
    with pytest.raises(TypeError, match="limits must be a mapping or RunLimits, got list"):
        read_limits([("max_turns", 2)])  # type: ignore[arg-type]


async def test_unknown_limit_name_at_run_is_a_type_error() -> None:
    session, provider, _, _ = make_session([answer()])
    with pytest.raises(TypeError, match="unknown run limit 'max_tool_round'"):
        await session.run("hi", limits={"max_tool_round": 2})
    assert provider.requests == []


@pytest.mark.parametrize("name", sorted(CEILINGS))
def test_one_and_the_ceiling_are_accepted(name: str) -> None:
    assert read_limits({name: 1}) == {name: 1}
    assert read_limits({name: CEILINGS[name]}) == {name: CEILINGS[name]}
    assert getattr(RunLimits(**{name: CEILINGS[name]}), name) == CEILINGS[name]


def test_read_limits_accepts_a_run_limits_object() -> None:
    assert read_limits(RunLimits(max_turns=3)) == {
        "max_turns": 3,
        "max_tool_rounds": 8,
        "max_tool_calls": 32,
        "max_wall_time_ms": 120_000,
    }


# --- merging ---------------------------------------------------------------------------------


def test_agent_limits_replace_the_defaults_one_by_one() -> None:
    merged = merge_limits({"max_turns": 40, "max_tool_calls": 2}, None)
    assert merged == RunLimits(max_turns=40, max_tool_calls=2)


def test_run_limits_replace_the_defaults_when_the_agent_has_none() -> None:
    merged = merge_limits(None, {"max_turns": 64, "max_tool_rounds": 2})
    assert merged == RunLimits(max_turns=64, max_tool_rounds=2)


def test_once_the_agent_has_limits_a_run_can_only_narrow() -> None:
    agent = {"max_turns": 4}
    assert merge_limits(agent, {"max_turns": 10}).max_turns == 4
    assert merge_limits(agent, {"max_turns": 2}).max_turns == 2
    # Not even a limit the agent left at its default can be raised.
    assert merge_limits(agent, {"max_tool_calls": 100}).max_tool_calls == 32
    assert merge_limits(agent, {"max_tool_calls": 5}).max_tool_calls == 5
    assert merge_limits(RunLimits(max_turns=6), RunLimits(max_turns=64)).max_turns == 6


async def test_a_run_without_agent_limits_may_go_past_the_default_turns() -> None:
    turns = DEFAULTS["max_turns"] + 2
    session, provider, tool, _ = make_session([*always_calling(turns - 1), answer()])
    result = await session.run("go", limits={"max_turns": turns, "max_tool_rounds": turns})
    assert result.status == "succeeded"
    assert len(result.turns) == turns
    assert len(provider.requests) == turns
    assert len(tool.ran) == turns - 1


async def test_run_limits_narrow_agent_limits_in_a_real_run() -> None:
    session, provider, _, _ = make_session(always_calling(10), limits={"max_turns": 5})
    error = await run_failing(session, "go", limits={"max_turns": 2})
    assert error.result.limit == {"limit": "max_turns", "maximum": 2, "observed": 3}
    assert len(provider.requests) == 2


async def test_run_limits_cannot_raise_agent_limits_in_a_real_run() -> None:
    session, provider, _, _ = make_session(always_calling(10), limits={"max_turns": 2})
    error = await run_failing(session, "go", limits={"max_turns": 6, "max_tool_rounds": 6})
    assert error.result.limit == {"limit": "max_turns", "maximum": 2, "observed": 3}
    assert len(provider.requests) == 2


# --- max_turns -------------------------------------------------------------------------------


async def test_max_turns_breach_fails_the_run_with_one_limit_event() -> None:
    session, provider, tool, log = make_session(always_calling(10), limits={"max_turns": 2})
    error = await run_failing(session, "go")

    assert isinstance(error.__cause__, RunLimitError)
    assert error.__cause__.code == "ERR_PRISM_RUN_LIMIT"
    assert str(error.__cause__) == "Run limit exceeded: max_turns"
    assert error.__cause__.breach == {"limit": "max_turns", "maximum": 2, "observed": 3}
    result = error.result
    assert result.status == "failed"
    assert result.finish_reason == "error"
    assert result.limit == {"limit": "max_turns", "maximum": 2, "observed": 3}
    assert result.error == ErrorInfo(
        message="Run limit exceeded: max_turns", code="ERR_PRISM_RUN_LIMIT", name="RunLimitError"
    )
    assert len(result.turns) == 2
    assert len(provider.requests) == 2
    assert tool.ran == ["call_1", "call_2"]
    # The transcript keeps both complete rounds.
    assert [m.role for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert result.messages == tuple(session.messages)

    [event] = limit_events(log)
    assert event.data == {"breach": {"limit": "max_turns", "maximum": 2, "observed": 3}}
    assert log.types[-2:] == ["run_limit_exceeded", "agent_finished"]
    finished = log.events[-1]
    assert finished.data is not None
    assert finished.data["status"] == "failed"
    assert finished.data["finish_reason"] == "error"


async def test_max_turns_one_allows_exactly_one_provider_turn() -> None:
    session, provider, _, _ = make_session([answer("only")], limits={"max_turns": 1})
    result = await session.run("go")
    assert result.status == "succeeded"
    assert result.output_text == "only"
    assert len(provider.requests) == 1


# --- max_tool_calls --------------------------------------------------------------------------


async def test_max_tool_calls_counts_blocked_calls_and_stops_before_the_next_tool() -> None:
    script = [
        calling(echo_call("call_1", name="missing")),  # blocked, still charged
        calling(echo_call("call_2")),
        calling(echo_call("call_3")),
        answer(),
    ]
    session, provider, tool, log = make_session(script, limits={"max_tool_calls": 2})
    error = await run_failing(session, "go")

    assert tool.ran == ["call_2"], "the call past the limit must not run"
    assert error.result.limit == {"limit": "max_tool_calls", "maximum": 2, "observed": 3}
    assert isinstance(error.__cause__, RunLimitError)
    assert error.__cause__.limit == "max_tool_calls"
    assert len(provider.requests) == 3
    assert len(limit_events(log)) == 1
    # The call that hit the limit still has its one row, carrying the breach.
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["call_1", "call_2", "call_3"]
    assert rows[2].error is not None
    assert rows[2].error.code == "ERR_PRISM_RUN_LIMIT"
    assert "tool_execution_started" not in [
        event.type for event in log.events if event.subject_call_id == "call_3"
    ]


async def test_max_tool_calls_breach_inside_one_batch() -> None:
    calls = [echo_call(f"call_{index}") for index in range(4)]
    session, _, tool, log = make_session([calling(*calls), answer()], limits={"max_tool_calls": 2})
    error = await run_failing(session, "go")

    assert tool.ran == ["call_0", "call_1"]
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == ["call_0", "call_1", "call_2", "call_3"]
    assert [row.error is None for row in rows] == [True, True, False, False]
    assert rows[2].error is not None
    assert rows[2].error.code == "ERR_PRISM_RUN_LIMIT"
    assert rows[3].error is not None
    assert rows[3].error.code == NOT_DISPATCHED
    assert error.result.limit == {"limit": "max_tool_calls", "maximum": 2, "observed": 3}
    assert len(limit_events(log)) == 1


async def test_max_tool_calls_breach_in_a_parallel_batch_is_reported_once() -> None:
    calls = [echo_call(f"call_{index}") for index in range(6)]
    session, _, tool, log = make_session(
        [calling(*calls), answer()],
        tool=Recorder(delay=0.01),
        limits={"max_tool_calls": 2},
        loop={"tool_concurrency": 6},
    )
    error = await run_failing(session, "go")

    assert sorted(tool.ran) == ["call_0", "call_1"]
    rows = tool_rows(session.messages)
    assert [row.tool_call_id for row in rows] == [call.id for call in calls]
    assert [row.error for row in rows[:2]] == [None, None]
    assert all(row.error is not None for row in rows[2:])
    assert len(limit_events(log)) == 1
    assert isinstance(error.__cause__, RunLimitError)
    assert error.result.limit == {"limit": "max_tool_calls", "maximum": 2, "observed": 3}


# --- max_tool_rounds -------------------------------------------------------------------------


async def test_max_tool_rounds_is_a_clean_stop_leaving_the_last_calls_unanswered() -> None:
    session, provider, tool, log = make_session(always_calling(10), limits={"max_tool_rounds": 1})
    result = await session.run("go")

    assert result.status == "succeeded"
    assert result.finish_reason == "turn_limit"
    assert result.limit is None
    assert len(result.turns) == 2
    assert len(provider.requests) == 2
    assert tool.ran == ["call_1"]
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    last = session.messages[-1]
    assert [call.id for call in last.tool_calls] == ["call_2"]
    assert limit_events(log) == []
    finished = log.events[-1]
    assert finished.type == "agent_finished"
    assert finished.data == {"status": "succeeded", "finish_reason": "turn_limit"}


async def test_max_tool_rounds_not_reached_ends_naturally() -> None:
    session, provider, _, _ = make_session(
        [*always_calling(1), answer()], limits={"max_tool_rounds": 1}
    )
    result = await session.run("go")
    assert result.finish_reason == "stop"
    assert len(provider.requests) == 2


# --- max_wall_time_ms ------------------------------------------------------------------------


class UsesUpTheWallTime(Recorder):
    """A slow tool body during which the wall time runs out (``clock.use_up`` as it starts): a
    short real limit could run out on a loaded machine before the tool ever started."""

    def __init__(self, clock: WallClock) -> None:
        super().__init__(delay=5)
        self.clock = clock

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.clock.use_up()  # before the tool's own sleep begins: the limit comes first
        return await super().__call__(args, context)


async def test_wall_time_breach_with_a_slow_tool_fails_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session, _, tool, log = make_session(
        [calling(echo_call("call_1")), answer()],
        tool=UsesUpTheWallTime(WallClock().install(monkeypatch)),
        limits={"max_wall_time_ms": WallClock.LIMIT_MS},
    )
    started = time.perf_counter()  # real time: the clock the run reads jumps
    error = await run_failing(session, "go")
    elapsed = time.perf_counter() - started

    assert elapsed < 2, "the run must stop at the wall-time limit, not wait for the tool"
    assert tool.ran == ["call_1"]
    assert isinstance(error.__cause__, RunLimitError)
    assert error.__cause__.limit == "max_wall_time_ms"
    assert error.result.status == "failed"
    assert error.result.limit is not None
    assert error.result.limit["limit"] == "max_wall_time_ms"
    assert error.result.limit["maximum"] == WallClock.LIMIT_MS
    assert isinstance(error.result.limit["observed"], int)
    assert error.result.limit["observed"] >= WallClock.LIMIT_MS
    assert len(limit_events(log)) == 1


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_wall_time_breach_mid_batch_still_answers_every_call(
    concurrency: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = [echo_call("call_1"), echo_call("call_2")]
    session, _, _, _ = make_session(
        [calling(*calls), answer()],
        tool=UsesUpTheWallTime(WallClock().install(monkeypatch)),
        limits={"max_wall_time_ms": WallClock.LIMIT_MS},
        loop={"tool_concurrency": concurrency},
    )
    await run_failing(session, "go")
    assert [row.tool_call_id for row in tool_rows(session.messages)] == ["call_1", "call_2"]


async def test_a_provider_timeout_is_not_a_wall_time_breach() -> None:
    failure = TimeoutError("upstream timed out")
    session, _, _, log = make_session([failure])
    error = await run_failing(session, "go")
    assert error.__cause__ is failure
    assert error.result.limit is None
    assert limit_events(log) == []
