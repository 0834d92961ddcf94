"""Per-run tool grants, per-turn narrowing, search disclosure inside the runtime and session
state (issue 6), driven by a ScriptedProvider whose ``requests`` show exactly which tools each
turn sent. Every refusal also checks that the tool did not run."""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from tests.support import EventLog

import prism_tools
import prism_tools.agent
from prism_tools import (
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolRegistry,
    ToolResult,
    ToolScopeError,
    create_middleware_registry,
    create_tool_registry,
)
from prism_tools.agent import AgentRunError, Session, Skill, SkillError, create_agent
from prism_tools.messages import Message, ProviderRequest, ProviderResponse
from prism_tools.providers import ScriptedProvider
from prism_tools.scoping import NarrowingContext, TurnRecord, tools_hash

MODEL = "test-model"
SEARCH = "search_tools"


# --- helpers ---------------------------------------------------------------------------------


class Ran:
    """Builds tools that record every call they run, in one shared log."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def tool(self, name: str, description: str = "", *, tag: str | None = None) -> ToolDefinition:
        label = tag or name

        async def execute(args: dict[str, Any], context: ToolExecutionContext) -> str:
            self.calls.append((label, context.tool_call_id))
            return f"{label} ran"

        return ToolDefinition(name=name, execute=execute, description=description)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    @property
    def ids(self) -> list[str]:
        return [call_id for _, call_id in self.calls]


def answer(text: str = "done") -> ProviderResponse:
    return ProviderResponse(text=text, finish_reason="stop")


def calling(*calls: ToolCall, text: str = "") -> ProviderResponse:
    return ProviderResponse(text=text, tool_calls=calls, finish_reason="tool_calls")


def call(call_id: str, name: str, arguments: Any = None) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={} if arguments is None else arguments)


def sent(provider: ScriptedProvider) -> list[list[str]]:
    """The tool names each request carried, turn by turn."""
    return [[tool.name for tool in request.tools] for request in provider.requests]


def schema_bytes(request: ProviderRequest) -> bytes:
    return orjson.dumps(
        [
            {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            for tool in request.tools
        ]
    )


def sha(names: Sequence[str]) -> str:
    """The ids hash, computed here independently of the library."""
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


def rows(messages: Sequence[Message]) -> dict[str, Message]:
    return {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}


def events(log: EventLog, kind: str) -> list[dict[str, Any]]:
    return [dict(event.data or {}) for event in log.events if event.type == kind]


def blocked_reasons(log: EventLog) -> dict[str, str | None]:
    return {
        event.tool_call_id or "": event.reason
        for event in log.events
        if event.type == "tool_execution_blocked"
    }


def make(
    script: list[Any],
    tools: ToolRegistry | Sequence[ToolDefinition],
    **options: Any,
) -> tuple[Session, ScriptedProvider, EventLog]:
    provider = ScriptedProvider(script)
    catalog = tools if isinstance(tools, ToolRegistry) else list(tools)
    session = create_agent(model=MODEL, provider=provider, tools=catalog, **options).session()
    log = EventLog()
    session.subscribe(log)
    return session, provider, log


async def run_failing(session: Session, *args: Any, **kwargs: Any) -> AgentRunError:
    with pytest.raises(AgentRunError) as caught:
        await session.run(*args, **kwargs)
    return caught.value


@pytest.fixture
def results(monkeypatch: pytest.MonkeyPatch) -> dict[str, ToolResult]:
    """Every ToolResult dispatch returns during the test, by the call id the model used."""
    seen: dict[str, ToolResult] = {}
    original = prism_tools.agent.dispatch_tool_call

    async def recording(tool_call: ToolCall, *args: Any, **kwargs: Any) -> ToolResult:
        result = await original(tool_call, *args, **kwargs)
        seen[tool_call.id] = result
        return result

    monkeypatch.setattr(prism_tools.agent, "dispatch_tool_call", recording)
    return seen


def assert_denied(results: dict[str, ToolResult], log: EventLog, call_id: str) -> None:
    result = results[call_id]
    assert result.error is not None
    assert (result.metadata or {}).get("blocked_reason") == "tool_denied"
    assert blocked_reasons(log)[call_id] == "tool_denied"


def narrowing_of(pick: Callable[[NarrowingContext], Any], kind: str) -> Any:
    """``pick`` as a sync or an async narrowing callback."""
    if kind == "sync":
        return pick

    async def narrowing(context: NarrowingContext) -> Any:
        return pick(context)

    return narrowing


KINDS = ["sync", "async"]


def catalog(ran: Ran) -> list[ToolDefinition]:
    return [
        ran.tool("weather_forecast", "Get the weather forecast for a city"),
        ran.tool("stock_quote", "Latest stock price quote for a ticker symbol"),
        ran.tool("send_email", "Send an email message to a recipient"),
        ran.tool("translate_text", "Translate text into another language"),
    ]


# --- the grant -------------------------------------------------------------------------------


async def test_no_grant_sends_every_registered_tool_in_registry_order() -> None:
    ran = Ran()
    registry = create_tool_registry([ran.tool("b"), ran.tool("a"), ran.tool("c")])
    session, provider, _ = make([calling(call("c1", "c")), answer()], registry)

    result = await session.run("go", tool_names=None)

    assert result.status == "succeeded"
    assert sent(provider) == [["b", "a", "c"], ["b", "a", "c"]]
    assert provider.requests[0].tools == tuple(registry.list())
    assert ran.calls == [("c", "c1")]
    assert session.state["grant"] is None


async def test_an_empty_grant_sends_no_tools_and_blocks_every_call(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    session, provider, log = make(
        [calling(call("c1", "a"), call("c2", "b")), answer()], [ran.tool("a"), ran.tool("b")]
    )

    result = await session.run("go", tool_names=[])

    assert result.status == "succeeded"
    assert sent(provider) == [[], []]
    assert ran.calls == []
    assert_denied(results, log, "c1")
    assert_denied(results, log, "c2")
    denied = rows(session.messages)
    assert denied["c1"].error is not None
    assert denied["c1"].error.message == "Tool denied: a"
    assert session.state["grant"] == []


async def test_an_empty_grant_sends_nothing_even_with_search_disclosure(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    session, provider, _ = make(
        [calling(call("c1", SEARCH, {"query": "weather"})), answer()], catalog(ran)
    )

    await session.run("weather", tool_names=[], tools_disclosure="search")

    assert sent(provider)[0] == []
    # search_tools was never offered, so this run has no such tool at all.
    result = results["c1"]
    assert result.error is not None
    assert (result.metadata or {}).get("blocked_reason") == "unknown_tool"
    assert ran.calls == []


async def test_unknown_names_fail_the_run_before_any_turn_and_leave_the_transcript() -> None:
    ran = Ran()
    session, provider, log = make([answer("first"), answer("never")], [ran.tool("a")])
    await session.run("hello")
    before_messages = list(session.messages)
    before_state = session.state

    error = await run_failing(session, "go", tool_names=["a", "ghost", "phantom"])

    cause = error.__cause__
    assert isinstance(cause, ToolScopeError)
    assert "ghost" in str(cause)
    assert "phantom" in str(cause)
    assert "a," not in str(cause)
    assert error.result.status == "failed"
    assert error.result.turns == ()
    assert len(provider.requests) == 1  # only the earlier run's turn
    assert session.messages == before_messages
    assert session.state == before_state
    assert "provider_turn_started" not in log.types[log.types.index("agent_finished") + 1 :]
    assert ran.calls == []


async def test_unknown_names_on_a_fresh_session_send_no_request() -> None:
    ran = Ran()
    session, provider, _ = make([answer()], [ran.tool("a")])

    error = await run_failing(session, "go", tool_names=["missing_tool"])

    assert isinstance(error.__cause__, ToolScopeError)
    assert "missing_tool" in str(error.__cause__)
    assert provider.requests == []
    assert session.messages == []
    assert session.grant is None


async def test_a_non_string_name_in_the_grant_fails_the_run() -> None:
    session, provider, _ = make([answer()], [Ran().tool("a")])
    error = await run_failing(session, "go", tool_names=["a", 7])
    assert isinstance(error.__cause__, TypeError)
    assert provider.requests == []


async def test_a_single_string_grant_is_refused() -> None:
    ran = Ran()
    session, provider, _ = make([answer()], [ran.tool("a"), ran.tool("b")])

    with pytest.raises((TypeError, AgentRunError)) as caught:
        await session.run("go", tool_names="ab")

    error = caught.value
    cause = error.__cause__ if isinstance(error, AgentRunError) else error
    assert isinstance(cause, TypeError)
    assert provider.requests == []


async def test_the_grant_keeps_registry_order_whatever_order_it_is_given_in() -> None:
    ran = Ran()
    tools = [ran.tool(name) for name in ("one", "two", "three", "four")]
    seen: list[NarrowingContext] = []

    def narrowing(context: NarrowingContext) -> list[str]:
        seen.append(context)
        return list(reversed(context.tool_ids))

    session, provider, _ = make([answer()], tools)
    await session.run("go", tool_names=["four", "two", "one", "two"])
    assert sent(provider) == [["one", "two", "four"]]
    assert session.state["grant"] == ["one", "two", "four"]

    session, provider, _ = make([answer()], tools)
    await session.run("go", tool_names=["four", "one"], tool_narrowing=narrowing)
    assert seen[0].tool_ids == ("one", "four")
    assert sent(provider) == [["one", "four"]]


async def test_a_registered_tool_outside_the_grant_is_denied_and_does_not_run(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    session, provider, log = make(
        [calling(call("c1", "granted"), call("c2", "secret")), answer()],
        [ran.tool("granted"), ran.tool("secret")],
    )

    result = await session.run("go", tool_names=["granted"])

    assert result.status == "succeeded"
    assert sent(provider) == [["granted"], ["granted"]]
    assert ran.calls == [("granted", "c1")]
    assert_denied(results, log, "c2")
    assert results["c1"].error is None


async def test_the_live_registry_changing_mid_run_changes_nothing_for_that_run(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    registry = create_tool_registry()
    echo_v1 = ran.tool("echo", "first version", tag="echo_v1")
    echo_v2 = ran.tool("echo", "second version", tag="echo_v2")
    newcomer = ran.tool("newcomer", "added during the run")

    async def mutate(args: dict[str, Any], context: ToolExecutionContext) -> str:
        ran.calls.append(("mutate", context.tool_call_id))
        registry.register(newcomer)
        registry.register(echo_v2)  # replaces echo in place
        return "mutated"

    mutate_tool = ToolDefinition(name="mutate", execute=mutate)
    registry.register(echo_v1)
    registry.register(mutate_tool)
    script = [
        calling(call("c1", "mutate")),
        calling(call("c2", "echo"), call("c3", "newcomer")),
        answer("first run over"),
        calling(call("d1", "echo"), call("d2", "newcomer")),
        answer("second run over"),
    ]
    session, provider, _ = make(script, registry)

    await session.run("go")

    assert registry.names() == ["echo", "mutate", "newcomer"]
    assert sent(provider) == [["echo", "mutate"]] * 3
    assert all(request.tools == (echo_v1, mutate_tool) for request in provider.requests)
    assert ran.calls == [("mutate", "c1"), ("echo_v1", "c2")]
    assert results["c3"].error is not None
    assert "c3" not in ran.ids

    await session.run("again")

    assert sent(provider)[3] == ["echo", "mutate", "newcomer"]
    assert provider.requests[3].tools == (echo_v2, mutate_tool, newcomer)
    assert ran.calls[2:] == [("echo_v2", "d1"), ("newcomer", "d2")]


async def test_a_tool_registered_mid_run_stays_out_of_an_explicit_grant_run(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    registry = create_tool_registry()
    late = ran.tool("late")

    async def add(args: dict[str, Any], context: ToolExecutionContext) -> str:
        ran.calls.append(("add", context.tool_call_id))
        registry.register(late)
        return "added"

    registry.register(ToolDefinition(name="add", execute=add))
    session, provider, log = make(
        [calling(call("c1", "add")), calling(call("c2", "late")), answer()],
        registry,
        tool_narrowing=lambda context: [*context.tool_ids, "late"],
    )

    await session.run("go", tool_names=["add"])

    assert sent(provider) == [["add"]] * 3
    assert ran.names == ["add"]
    assert results["c2"].error is not None
    clamped = events(log, "tool_narrowing_clamped")
    assert clamped == [{"turn": t, "dropped": ["late"]} for t in (1, 2, 3)]


async def test_middleware_renaming_a_call_outside_the_grant_is_still_denied(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    middleware = create_middleware_registry()

    def rename(value: ToolCall, next_: Callable[..., Any]) -> Any:
        return next_(ToolCall(value.id, "secret", value.arguments))

    middleware.use("tool_call", rename)
    session, provider, log = make(
        [calling(call("c1", "granted")), answer()],
        [ran.tool("granted"), ran.tool("secret")],
        middleware=middleware,
    )

    result = await session.run("go", tool_names=["granted"])

    assert result.status == "succeeded"
    assert sent(provider) == [["granted"], ["granted"]]
    assert ran.calls == []
    assert_denied(results, log, "c1")
    assert results["c1"].name == "secret"


async def test_middleware_renaming_to_a_hidden_tool_is_denied(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    middleware = create_middleware_registry()
    middleware.use("tool_call", lambda value, next_: ToolCall(value.id, "hidden", {}))
    session, _, log = make(
        [calling(call("c1", "shown")), answer()],
        [ran.tool("shown"), ran.tool("hidden")],
        middleware=middleware,
        tool_narrowing=lambda context: ["shown"],
    )

    await session.run("go")

    assert ran.calls == []
    assert_denied(results, log, "c1")


async def test_a_skill_needing_a_tool_outside_the_grant_fails_the_run() -> None:
    ran = Ran()
    provider = ScriptedProvider([answer(), answer()])
    agent = create_agent(
        model=MODEL,
        provider=provider,
        tools=[ran.tool("lookup"), ran.tool("refund")],
        skills=[Skill("refunds", "Refund orders.", ("lookup", "refund"))],
    )
    session = agent.session()

    error = await run_failing(session, "go", tool_names=["lookup"])

    assert isinstance(error.__cause__, SkillError)
    assert "refund" in str(error.__cause__)
    assert provider.requests == []
    assert session.messages == []
    assert ran.calls == []

    result = await session.run("go", tool_names=["refund", "lookup"])
    assert result.status == "succeeded"
    assert sent(provider) == [["lookup", "refund"]]


# --- session state and resume ----------------------------------------------------------------


async def test_state_is_plain_json_with_transcript_grant_and_activation() -> None:
    ran = Ran()
    session, _, _ = make(
        [calling(call("c1", "a", {"x": 1}), call("c2", "b"), text="calling"), answer("bye")],
        [ran.tool("a"), ran.tool("b"), ran.tool("c")],
    )
    session.activation.activate(["c"])

    await session.run("hi", tool_names=["b", "a"])

    state = session.state
    assert json.loads(json.dumps(state)) == state
    assert state["version"] == 1
    assert state["session_id"] == session.id
    assert state["grant"] == ["a", "b"]
    assert state["activated"] == ["c"]
    assert [m["role"] for m in state["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert ran.calls == [("a", "c1"), ("b", "c2")]


@pytest.mark.parametrize(
    "value",
    [datetime.datetime(2024, 1, 2, 3, 4, 5), {1, 2}, b"raw"],
    ids=["datetime", "set", "bytes"],
)
async def test_state_stays_json_serialisable_whatever_a_tool_returns(value: Any) -> None:
    tool = ToolDefinition(name="t", execute=lambda args, context: value)
    session, _, _ = make([calling(call("c1", "t")), answer()], [tool])
    await session.run("go")
    json.dumps(session.state)


@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
async def test_a_restored_session_has_the_transcript_grant_and_activation(
    as_text: bool,
) -> None:
    ran = Ran()
    tools = [ran.tool("a"), ran.tool("b"), ran.tool("c")]
    first, _, _ = make(
        [calling(call("c1", "a"), call("c2", "nope"), text="looking"), answer("first")], tools
    )
    first.activation.activate(["b"])
    await first.run("hi", tool_names=["a", "b"])
    state = first.state
    stored: Any = json.dumps(state) if as_text else state

    provider = ScriptedProvider([answer("second")])
    agent = create_agent(model=MODEL, provider=provider, tools=tools)
    restored = agent.session(state=stored)

    assert restored.messages == first.messages
    assert restored.grant == ("a", "b")
    assert restored.activation.names == ("b",)
    assert restored.state["messages"] == state["messages"]

    await restored.run("more")
    assert provider.requests[0].messages == (*first.messages, Message("user", "more"))
    assert sent(provider) == [["a", "b"]]


async def test_a_later_run_without_names_keeps_the_grant_even_if_the_registry_grew(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    registry = create_tool_registry([ran.tool("a"), ran.tool("b")])
    session, provider, log = make(
        [
            answer("first"),
            calling(call("c1", "b"), call("c2", "extra")),
            answer("second"),
        ],
        registry,
    )

    await session.run("one", tool_names=["a"])
    registry.register(ran.tool("extra"))
    await session.run("two")

    assert sent(provider) == [["a"], ["a"], ["a"]]
    assert ran.calls == []
    assert_denied(results, log, "c1")
    assert_denied(results, log, "c2")
    assert session.state["grant"] == ["a"]


async def test_a_restored_grant_only_shrinks_to_what_is_registered_now(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    old = create_tool_registry([ran.tool("a"), ran.tool("b"), ran.tool("c")])
    first, _, _ = make([answer()], old)
    await first.run("hi", tool_names=["a", "b"])
    state = first.state
    assert state["grant"] == ["a", "b"]

    # Today: "b" is gone, "c" and "d" exist. The restored grant is {"a"}, never wider.
    now = create_tool_registry([ran.tool("a"), ran.tool("c"), ran.tool("d")])
    provider = ScriptedProvider(
        [calling(call("x1", "c"), call("x2", "d"), call("x3", "a")), answer()]
    )
    session = create_agent(model=MODEL, provider=provider, tools=now).session(state=state)
    log = EventLog()
    session.subscribe(log)
    assert session.grant == ("a",)
    now.register(ran.tool("b"))  # back again after the restore: still not granted

    await session.run("continue")

    assert sent(provider) == [["a"], ["a"]]
    assert ran.calls == [("a", "x3")]
    assert_denied(results, log, "x1")
    assert_denied(results, log, "x2")
    assert session.state["grant"] == ["a"]


async def test_a_restored_empty_grant_stays_empty(results: dict[str, ToolResult]) -> None:
    ran = Ran()
    tools = [ran.tool("a")]
    first, _, _ = make([answer()], tools)
    await first.run("hi", tool_names=[])
    provider = ScriptedProvider([calling(call("c1", "a")), answer()])
    session = create_agent(model=MODEL, provider=provider, tools=tools).session(
        state=json.dumps(first.state)
    )
    log = EventLog()
    session.subscribe(log)

    await session.run("go")

    assert sent(provider) == [[], []]
    assert ran.calls == []
    assert_denied(results, log, "c1")


def good_state() -> dict[str, Any]:
    return {
        "version": 1,
        "session_id": "s",
        "messages": [{"role": "user", "content": "hi"}],
        "grant": None,
        "activated": [],
    }


def with_(**changes: Any) -> dict[str, Any]:
    return {**good_state(), **changes}


MALFORMED_STATES = [
    pytest.param("not json at all", id="bad-json-text"),
    pytest.param("[" * 100_000 + "]" * 100_000, id="json-text-nested-too-deeply"),
    pytest.param(
        '{"version": 1, "messages": ' + "[" * 5_000 + "]" * 5_000 + "}",
        id="messages-nested-too-deeply",
    ),
    pytest.param("[1, 2]", id="json-list"),
    pytest.param(42, id="int"),
    pytest.param([], id="list"),
    pytest.param({k: v for k, v in good_state().items() if k != "version"}, id="no-version"),
    pytest.param(with_(version=2), id="future-version"),
    pytest.param(with_(messages={"role": "user"}), id="messages-not-a-list"),
    pytest.param(with_(messages=[42]), id="message-not-an-object"),
    pytest.param(with_(messages=[{"role": "system", "content": "x"}]), id="unknown-role"),
    pytest.param(with_(messages=[{"role": "tool", "content": 1}]), id="tool-row-without-id"),
    pytest.param(
        with_(messages=[{"role": "assistant", "tool_calls": [{"name": "a"}]}]),
        id="call-without-id",
    ),
    pytest.param(with_(messages=[{"role": "user", "error": 5}]), id="bad-error"),
    pytest.param(with_(grant="a"), id="grant-string"),
    pytest.param(with_(grant=[1]), id="grant-non-string"),
    pytest.param(with_(activated="a"), id="activated-string"),
    pytest.param(with_(activated=[""]), id="activated-empty-name"),
    pytest.param(with_(activated=[None]), id="activated-non-string"),
    pytest.param(
        with_(messages=[{"role": "assistant", "tool_calls": 5}]),
        id="tool-calls-not-a-list",
    ),
    pytest.param(
        with_(messages=[{"role": "tool", "tool_call_id": 5, "content": "x"}]),
        id="tool-call-id-not-a-string",
    ),
    pytest.param(with_(version=True), id="version-true"),
    pytest.param(with_(version=1.0), id="version-float"),
    pytest.param(with_(messages=[{"role": "assistant", "tool_calls": 0}]), id="tool-calls-zero"),
    pytest.param(with_(messages=[{"role": "assistant", "tool_calls": {}}]), id="tool-calls-object"),
    pytest.param(
        with_(messages=[{"role": "assistant", "tool_calls": [{"id": "", "name": "a"}]}]),
        id="call-with-empty-id",
    ),
    pytest.param(
        # Deeper than a copy of the state can go, though Python's JSON reader takes it.
        with_(messages=[{"role": "user", "content": json.loads("[" * 700 + "]" * 700)}]),
        id="state-too-deep-to-copy",
    ),
]


@pytest.mark.parametrize("state", MALFORMED_STATES)
async def test_a_malformed_state_is_a_value_error_and_changes_nothing(state: Any) -> None:
    ran = Ran()
    provider = ScriptedProvider([answer()])
    agent = create_agent(model=MODEL, provider=provider, tools=[ran.tool("a")])
    with pytest.raises(ValueError):  # noqa: PT011 - the contract is the type
        agent.session(state=state)

    session = agent.session()
    session.messages.append(Message("user", "kept"))
    with pytest.raises(ValueError):  # noqa: PT011
        session.restore(state)
    assert session.messages == [Message("user", "kept")]
    assert session.grant is None


async def test_a_good_state_restores() -> None:
    agent = create_agent(model=MODEL, provider=ScriptedProvider([]), tools=[Ran().tool("a")])
    session = agent.session(state=with_(grant=["a", "gone"], activated=["a", "x"]))
    assert session.messages == [Message("user", "hi")]
    assert session.grant == ("a",)
    assert session.activation.names == ("a", "x")


# --- narrowing -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["agent", "run"])
@pytest.mark.parametrize("kind", KINDS)
async def test_narrowing_sees_the_context_and_picks_the_tools_in_grant_order(
    kind: str, where: str
) -> None:
    ran = Ran()
    tools = [ran.tool(name) for name in ("a", "b", "c", "d")]
    seen: list[NarrowingContext] = []
    picks = {1: ["d", "b"], 2: ["c"], 3: []}

    def pick(context: NarrowingContext) -> list[str]:
        seen.append(context)
        return picks[context.turn]

    session, provider, log = make(
        [
            calling(call("c1", "b"), text="first thoughts"),
            calling(call("c2", "c"), text="second thoughts"),
            answer("end"),
        ],
        tools,
        **({"tool_narrowing": narrowing_of(pick, kind)} if where == "agent" else {}),
    )
    run_options = {"tool_narrowing": narrowing_of(pick, kind)} if where == "run" else {}

    result = await session.run("go", tool_names=["d", "a", "b", "c"], **run_options)

    assert result.status == "succeeded"
    assert seen == [
        NarrowingContext(1, None, ("a", "b", "c", "d")),
        NarrowingContext(2, "first thoughts", ("a", "b", "c", "d")),
        NarrowingContext(3, "second thoughts", ("a", "b", "c", "d")),
    ]
    assert sent(provider) == [["b", "d"], ["c"], []]
    assert ran.calls == [("b", "c1"), ("c", "c2")]
    assert events(log, "tool_narrowing_clamped") == []


@pytest.mark.parametrize("kind", KINDS)
async def test_names_outside_the_grant_are_dropped_with_one_clamped_event_per_turn(
    kind: str,
) -> None:
    ran = Ran()
    tools = [ran.tool(name) for name in ("a", "b", "secret")]
    picks = {
        1: ["secret", "b", "ghost", "b", "secret"],
        2: ["a"],
        3: ["zzz", "a"],
    }
    session, provider, log = make(
        [calling(call("c1", "b")), calling(call("c2", "a")), answer()], tools
    )

    await session.run(
        "go",
        tool_names=["a", "b"],
        tool_narrowing=narrowing_of(lambda context: picks[context.turn], kind),
    )

    assert sent(provider) == [["b"], ["a"], ["a"]]
    assert events(log, "tool_narrowing_clamped") == [
        {"turn": 1, "dropped": ["secret", "ghost"]},
        {"turn": 3, "dropped": ["zzz"]},
    ]
    order = [t for t in log.types if t in ("tool_narrowing_clamped", "provider_turn_started")]
    assert order == [
        "tool_narrowing_clamped",
        "provider_turn_started",
        "provider_turn_started",
        "tool_narrowing_clamped",
        "provider_turn_started",
    ]
    assert ran.calls == [("b", "c1"), ("a", "c2")]


ITERATORS: dict[str, Callable[[list[str]], Any]] = {
    "iterator": iter,
    "generator": lambda names: (name for name in names),
    "map": lambda names: map(str, names),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("returning", list(ITERATORS), ids=list(ITERATORS))
async def test_a_narrowing_returning_an_iterator_still_reports_the_dropped_names(
    kind: str, returning: str
) -> None:
    # An iterator can be read once: the names it gave must serve both to pick the tools and
    # to report the ones dropped.
    ran = Ran()
    tools = [ran.tool(name) for name in ("a", "b", "secret")]
    session, provider, log = make([answer()], tools)
    make_result = ITERATORS[returning]

    await session.run(
        "go",
        tool_names=["a", "b"],
        tool_narrowing=narrowing_of(
            lambda context: make_result(["secret", "b", "ghost", "secret"]), kind
        ),
    )

    assert sent(provider) == [["b"]]
    assert events(log, "tool_narrowing_clamped") == [{"turn": 1, "dropped": ["secret", "ghost"]}]
    assert ran.calls == []


@pytest.mark.parametrize("kind", KINDS)
async def test_a_raising_narrowing_fails_the_run_and_sends_no_request_for_that_turn(
    kind: str,
) -> None:
    ran = Ran()
    boom = LookupError("narrowing broke")

    def pick(context: NarrowingContext) -> list[str]:
        if context.turn == 2:
            raise boom
        return ["a"]

    session, provider, _ = make([calling(call("c1", "a")), answer(), answer()], [ran.tool("a")])

    error = await run_failing(session, "go", tool_narrowing=narrowing_of(pick, kind))

    assert error.__cause__ is boom
    assert len(provider.requests) == 1
    assert ran.calls == [("a", "c1")]
    assert len(error.result.turns) == 1
    assert error.result.status == "failed"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "returned",
    ["a", None, 7, ["a", 3], [None]],
    ids=["string", "none", "int", "non-string-name", "none-name"],
)
async def test_a_narrowing_returning_something_that_is_not_names_is_a_type_error(
    kind: str, returned: Any
) -> None:
    ran = Ran()
    session, provider, _ = make([answer()], [ran.tool("a")])

    error = await run_failing(session, "go", tool_narrowing=narrowing_of(lambda c: returned, kind))

    assert isinstance(error.__cause__, TypeError)
    assert provider.requests == []
    assert ran.calls == []


@pytest.mark.parametrize(
    "returned",
    [("b", "a"), {"b", "a"}, iter(["b", "a"]), {"b": 1, "a": 2}],
    ids=["tuple", "set", "iterator", "dict-keys"],
)
async def test_any_collection_of_names_is_accepted(returned: Any) -> None:
    ran = Ran()
    session, provider, _ = make([answer()], [ran.tool("a"), ran.tool("b"), ran.tool("c")])
    await session.run("go", tool_narrowing=lambda context: returned)
    assert sent(provider) == [["a", "b"]]


async def test_run_narrowing_wins_over_the_agents() -> None:
    ran = Ran()
    agent_calls: list[int] = []

    def agent_pick(context: NarrowingContext) -> list[str]:
        agent_calls.append(context.turn)
        return ["a"]

    session, provider, _ = make(
        [answer(), answer()], [ran.tool("a"), ran.tool("b")], tool_narrowing=agent_pick
    )

    await session.run("go", tool_narrowing=lambda context: ["b"])
    assert sent(provider) == [["b"]]
    assert agent_calls == []

    await session.run("again")
    assert sent(provider)[1] == ["a"]
    assert agent_calls == [1]


@pytest.mark.parametrize("disclosure", ["all", "search"])
async def test_identical_subsets_give_identical_tool_lists_and_schema_bytes(
    disclosure: str,
) -> None:
    tools = [
        ToolDefinition(
            name=name,
            execute=lambda args, context: "ok",
            description=f"{name} the weather data",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        )
        for name in ("alpha", "beta", "gamma")
    ]
    session, provider, _ = make(
        [calling(call(f"c{turn}", "alpha"), text="weather") for turn in range(3)] + [answer()],
        tools,
    )

    result = await session.run(
        "weather",
        tool_narrowing=lambda context: ["gamma", "alpha"],
        tools_disclosure=disclosure,
    )

    requests = provider.requests
    assert len(requests) == 4
    expected = ["alpha", "gamma"] + ([SEARCH] if disclosure == "search" else [])
    assert all(names == expected for names in sent(provider))
    assert len({schema_bytes(request) for request in requests}) == 1
    assert len({record.tools["ids_hash"] for record in result.turns}) == 1
    if disclosure == "all":
        assert all(request.tools == requests[0].tools for request in requests)


async def test_a_hidden_granted_tool_is_denied_and_stays_out_of_the_request(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    session, provider, log = make(
        [calling(call("c1", "hidden"), call("c2", "shown")), answer()],
        [ran.tool("shown"), ran.tool("hidden")],
    )

    await session.run("go", tool_narrowing=lambda context: ["shown"])

    assert sent(provider) == [["shown"], ["shown"]]
    assert ran.calls == [("shown", "c2")]
    assert_denied(results, log, "c1")


@pytest.mark.parametrize("where", ["agent", "run"])
async def test_allow_hidden_tool_calls_runs_hidden_granted_tools_but_never_shows_them(
    where: str, results: dict[str, ToolResult]
) -> None:
    ran = Ran()
    agent_options = {"allow_hidden_tool_calls": True} if where == "agent" else {}
    run_options = {"allow_hidden_tool_calls": True} if where == "run" else {}
    session, provider, log = make(
        [calling(call("c1", "hidden"), call("c2", "outside")), answer()],
        [ran.tool("shown"), ran.tool("hidden"), ran.tool("outside")],
        **agent_options,
    )

    await session.run(
        "go",
        tool_names=["shown", "hidden"],
        tool_narrowing=lambda context: ["shown"],
        **run_options,
    )

    assert sent(provider) == [["shown"], ["shown"]]
    assert ran.calls == [("hidden", "c1")]
    assert_denied(results, log, "c2")


async def test_a_run_can_refuse_hidden_calls_the_agent_allows(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    session, _, log = make(
        [calling(call("c1", "hidden")), answer()],
        [ran.tool("shown"), ran.tool("hidden")],
        allow_hidden_tool_calls=True,
        tool_narrowing=lambda context: ["shown"],
    )
    await session.run("go", allow_hidden_tool_calls=False)
    assert ran.calls == []
    assert_denied(results, log, "c1")


async def test_visibility_is_checked_per_turn(results: dict[str, ToolResult]) -> None:
    ran = Ran()
    picks = {1: ["a"], 2: ["b"], 3: ["a", "b"]}
    session, provider, log = make(
        [
            calling(call("t1a", "a"), call("t1b", "b")),
            calling(call("t2a", "a"), call("t2b", "b")),
            calling(call("t3a", "a"), call("t3b", "b")),
            answer(),
        ],
        [ran.tool("a"), ran.tool("b")],
    )

    await session.run("go", tool_narrowing=lambda context: picks.get(context.turn, []))

    assert sent(provider) == [["a"], ["b"], ["a", "b"], []]
    assert ran.ids == ["t1a", "t2b", "t3a", "t3b"]
    for call_id in ("t1b", "t2a"):
        assert_denied(results, log, call_id)


# --- turn metadata ---------------------------------------------------------------------------


async def test_each_turn_records_the_count_and_hash_of_the_names_sent() -> None:
    ran = Ran()
    picks = {1: ["b", "a"], 2: [], 3: ["c"]}
    session, provider, log = make(
        [calling(call("c1", "a")), calling(call("c2", "x"), call("c3", "y")), answer()],
        [ran.tool("a"), ran.tool("b"), ran.tool("c")],
    )

    result = await session.run("go", tool_narrowing=lambda context: picks[context.turn])

    names = sent(provider)
    assert names == [["a", "b"], [], ["c"]]
    expected = [{"count": len(n), "ids_hash": sha(n)} for n in names]
    assert expected[1]["ids_hash"] == hashlib.sha256(b"").hexdigest()
    started = [e.data for e in log.events if e.type == "provider_turn_started"]
    assert [data["metadata"]["tools"] for data in started] == expected  # type: ignore[index]
    assert [data["turn"] for data in started] == [1, 2, 3]  # type: ignore[index]
    assert [record.tools for record in result.turns] == expected
    assert [record.turn for record in result.turns] == [1, 2, 3]
    assert [record.tool_calls for record in result.turns] == [1, 2, 0]
    assert all(isinstance(record, TurnRecord) for record in result.turns)
    assert all(len(h["ids_hash"]) == 64 for h in expected)
    assert tools_hash(["a", "b"]) == sha(["a", "b"])


async def test_the_hash_covers_names_in_order_and_non_ascii_names() -> None:
    ran = Ran()
    session, provider, _ = make([answer()], [ran.tool("météo"), ran.tool("天気"), ran.tool("a")])
    result = await session.run("go")
    names = ["météo", "天気", "a"]
    assert sent(provider) == [names]
    assert result.turns[0].tools == {"count": 3, "ids_hash": sha(names)}
    assert sha(names) != sha(list(reversed(names)))


async def test_a_failed_run_still_records_the_turns_it_sent() -> None:
    ran = Ran()
    session, _, _ = make([calling(call("c1", "a")), RuntimeError("provider down")], [ran.tool("a")])
    error = await run_failing(session, "go")
    assert [record.tools for record in error.result.turns] == [
        {"count": 1, "ids_hash": sha(["a"])}
    ] * 2


# --- disclosure ------------------------------------------------------------------------------


async def test_all_disclosure_is_identical_to_no_option() -> None:
    ran = Ran()
    tools = catalog(ran)
    script = [calling(call("c1", "stock_quote"), text="weather"), answer()]
    plain, plain_provider, plain_log = make(list(script), tools)
    explicit, explicit_provider, explicit_log = make(list(script), tools, tools_disclosure="search")

    await plain.run("weather", tool_narrowing=lambda context: context.tool_ids[1:])
    await explicit.run(
        "weather",
        tools_disclosure="all",
        tool_narrowing=lambda context: context.tool_ids[1:],
    )

    assert [r.tools for r in plain_provider.requests] == [
        r.tools for r in explicit_provider.requests
    ]
    assert sent(plain_provider) == [["stock_quote", "send_email", "translate_text"]] * 2
    assert events(explicit_log, "tools_disclosure_fallback") == []
    assert [e.data for e in plain_log.events if e.type == "provider_turn_started"] == [
        e.data for e in explicit_log.events if e.type == "provider_turn_started"
    ]


async def test_search_disclosure_sends_top_k_for_the_turns_text_then_search_tools() -> None:
    ran = Ran()
    session, provider, log = make(
        [
            calling(call("c1", "weather_forecast"), text="Now I will check the stock price"),
            calling(call("c2", "stock_quote")),
            answer("Thanks, all done"),
        ],
        catalog(ran),
    )

    result = await session.run(
        "what is the weather in Paris", tools_disclosure="search", tools_search={"top_k": 1}
    )

    assert result.status == "succeeded"
    assert sent(provider) == [
        ["weather_forecast", SEARCH],
        ["stock_quote", SEARCH],
        ["stock_quote", SEARCH],
    ]
    assert ran.calls == [("weather_forecast", "c1"), ("stock_quote", "c2")]
    assert events(log, "tools_disclosure_fallback") == []
    assert [record.tools for record in result.turns] == [
        {"count": 2, "ids_hash": sha(names)} for names in sent(provider)
    ]


async def test_disclosure_and_top_k_can_be_set_on_the_agent_and_the_run_wins() -> None:
    ran = Ran()
    tools = [ran.tool(f"weather_{i}", "weather report") for i in range(6)]
    session, provider, _ = make(
        [answer(), answer(), answer()],
        tools,
        tools_disclosure="search",
        tools_search={"top_k": 2},
    )

    await session.run("weather")
    await session.run("weather", tools_search={"top_k": 3})
    await session.run("weather", tools_disclosure="all")

    assert [len(names) for names in sent(provider)] == [3, 4, 6]
    assert sent(provider)[0][-1] == SEARCH
    assert sent(provider)[1][-1] == SEARCH
    assert SEARCH not in sent(provider)[2]


@pytest.mark.parametrize(
    ("top_k", "hits"), [(0, 1), (-5, 1), (1, 1), (7, 7), (64, 64), (65, 64), (500, 64)]
)
async def test_top_k_is_clamped_to_1_through_64(top_k: int, hits: int) -> None:
    ran = Ran()
    tools = [ran.tool(f"weather_tool_{i:02d}", "weather report") for i in range(80)]
    session, provider, _ = make([answer()], tools)

    await session.run("weather", tools_disclosure="search", tools_search={"top_k": top_k})

    names = sent(provider)[0]
    assert len(names) == hits + 1
    assert names[-1] == SEARCH
    assert names[:-1] == sorted(names[:-1])  # registry order


@pytest.mark.parametrize(
    "options",
    [{"top_k": "8"}, {"top_k": True}, {"top_k": 1.5}, {"size": 3}, ["top_k"]],
    ids=["string", "bool", "float", "unknown-key", "not-a-mapping"],
)
async def test_bad_search_options_are_refused(options: Any) -> None:
    ran = Ran()
    with pytest.raises(TypeError):
        create_agent(model=MODEL, provider=ScriptedProvider([]), tools=[], tools_search=options)
    session, provider, _ = make([answer()], [ran.tool("a")])
    error = await run_failing(session, "go", tools_disclosure="search", tools_search=options)
    assert isinstance(error.__cause__, TypeError)
    assert provider.requests == []


async def test_an_unknown_disclosure_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="tools_disclosure"):
        create_agent(
            model=MODEL,
            provider=ScriptedProvider([]),
            tools=[],
            tools_disclosure="some",  # type: ignore[arg-type]
        )
    session, provider, _ = make([answer()], [Ran().tool("a")])
    error = await run_failing(session, "go", tools_disclosure="everything")
    assert isinstance(error.__cause__, ValueError)
    assert provider.requests == []


async def test_search_tools_activates_what_it_finds_for_later_turns_and_runs() -> None:
    ran = Ran()
    session, provider, _ = make(
        [
            calling(call("s1", SEARCH, {"query": "translate"})),
            calling(call("c1", "translate_text", {"text": "hola"})),
            answer("translated"),
            answer("again"),
            answer("cleared"),
        ],
        catalog(ran),
    )

    await session.run("hello", tools_disclosure="search")

    assert sent(provider)[:3] == [
        [SEARCH],
        ["translate_text", SEARCH],
        ["translate_text", SEARCH],
    ]
    listing = rows(session.messages)["s1"]
    assert listing.error is None
    assert isinstance(listing.content, str)
    assert listing.content.startswith("translate_text: Translate text into another language")
    assert ran.calls == [("translate_text", "c1")]
    assert session.activation.names == ("translate_text",)
    assert session.state["activated"] == ["translate_text"]

    await session.run("hello", tools_disclosure="search")
    assert sent(provider)[3] == ["translate_text", SEARCH]

    session.clear_activated_tools()
    assert session.state["activated"] == []
    await session.run("hello", tools_disclosure="search")
    assert sent(provider)[4] == [SEARCH]


async def test_activations_survive_a_restore() -> None:
    ran = Ran()
    tools = catalog(ran)
    first, _, _ = make(
        [calling(call("s1", SEARCH, {"query": "email"})), answer()],
        tools,
        tools_disclosure="search",
    )
    await first.run("hello")
    assert first.state["activated"] == ["send_email"]

    provider = ScriptedProvider([answer()])
    agent = create_agent(model=MODEL, provider=provider, tools=tools, tools_disclosure="search")
    restored = agent.session(state=json.dumps(first.state))
    await restored.run("hello")
    assert sent(provider) == [["send_email", SEARCH]]


async def test_search_cannot_reveal_or_unlock_a_tool_outside_the_grant(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    session, provider, log = make(
        [
            calling(call("s1", SEARCH, {"query": "stock price quote"})),
            calling(call("c1", "stock_quote"), call("s2", SEARCH, {"query": "stock", "k": 64})),
            answer(),
        ],
        catalog(ran),
    )
    session.activation.activate(["stock_quote"])  # even a stale activation grants nothing

    await session.run("hello", tool_names=["weather_forecast"], tools_disclosure="search")

    assert all("stock_quote" not in names for names in sent(provider))
    for call_id in ("s1", "s2"):
        listing = rows(session.messages)[call_id]
        assert listing.error is None
        assert "stock_quote" not in str(listing.content)
    assert ran.calls == []
    assert_denied(results, log, "c1")


async def test_search_cannot_reveal_or_unlock_a_tool_hidden_by_narrowing(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    picks = {1: ["stock_quote", "weather_forecast"], 2: ["weather_forecast"]}
    session, provider, log = make(
        [
            calling(call("s1", SEARCH, {"query": "stock price quote"})),
            calling(call("c1", "stock_quote"), call("s2", SEARCH, {"query": "stock quote"})),
            answer(),
        ],
        catalog(ran),
    )

    await session.run(
        "hello",
        tools_disclosure="search",
        tool_narrowing=lambda context: picks.get(context.turn, ["weather_forecast"]),
    )

    # Turn 1 showed it, so search_tools listed and activated it; turn 2 hides it again.
    assert "stock_quote" in str(rows(session.messages)["s1"].content)
    assert session.activation.names == ("stock_quote",)
    assert sent(provider)[1:] == [[SEARCH], [SEARCH]]
    assert "stock_quote" not in str(rows(session.messages)["s2"].content)
    assert ran.calls == []
    assert_denied(results, log, "c1")


async def test_a_visible_tool_outside_the_top_k_is_still_callable() -> None:
    # Disclosure decides what is described, not what is callable.
    ran = Ran()
    session, provider, _ = make(
        [calling(call("c1", "send_email")), answer()], catalog(ran), tools_disclosure="search"
    )
    await session.run("what is the weather", tools_search={"top_k": 1})
    assert sent(provider)[0] == ["weather_forecast", SEARCH]
    assert ran.calls == [("send_email", "c1")]


async def test_search_tools_is_not_callable_without_search_disclosure(
    results: dict[str, ToolResult],
) -> None:
    ran = Ran()
    session, _, log = make([calling(call("s1", SEARCH, {"query": "x"})), answer()], catalog(ran))
    await session.run("go", tool_names=["weather_forecast"])
    assert results["s1"].error is not None
    assert blocked_reasons(log)["s1"] in ("unknown_tool", "tool_denied")
    assert session.activation.names == ()


async def test_the_generated_search_tools_does_not_run_on_a_turn_that_does_not_show_it(
    results: dict[str, ToolResult],
) -> None:
    # No grant and hidden calls allowed: every registered tool is callable on every turn. The
    # generated search_tools is not one of them; it exists on the turns that show it.
    ran = Ran()
    picks = {1: ["weather_forecast"]}
    session, provider, log = make(
        [
            calling(call("c1", "weather_forecast")),
            calling(call("s2", SEARCH, {"query": "stock price quote"}), call("c2", "stock_quote")),
            answer(),
        ],
        catalog(ran),
        allow_hidden_tool_calls=True,
    )

    await session.run(
        "weather",
        tools_disclosure="search",
        tool_narrowing=lambda context: picks.get(context.turn, []),
    )

    assert sent(provider) == [["weather_forecast", SEARCH], [], []]
    assert_denied(results, log, "s2")
    assert "stock_quote" not in str(rows(session.messages)["s2"].content)
    assert session.activation.names == ()  # it did not run: it found and activated nothing
    # Hidden host tools stay callable, as allowed.
    assert ran.calls == [("weather_forecast", "c1"), ("stock_quote", "c2")]


def many_tools(ran: Ran, count: int) -> list[ToolDefinition]:
    return [ran.tool(f"tool_{i:04d}", f"does thing number {i}") for i in range(count)]


async def test_above_the_index_cap_every_visible_tool_is_sent_with_a_fallback_event() -> None:
    ran = Ran()
    tools = many_tools(ran, 1100)
    session, provider, log = make(
        [calling(call("c1", "tool_1099")), answer()], tools, tools_disclosure="search"
    )

    await session.run("thing number 5")

    assert sent(provider) == [[tool.name for tool in tools]] * 2
    assert provider.requests[0].tools == tuple(tools)
    fallbacks = events(log, "tools_disclosure_fallback")
    assert [e["turn"] for e in fallbacks] == [1, 2]
    assert all(e["reason"] in ("index_capacity", "index_error") for e in fallbacks)
    assert ran.calls == [("tool_1099", "c1")]


async def test_the_generated_search_tools_does_not_run_on_a_fallback_turn(
    results: dict[str, ToolResult],
) -> None:
    # Turn 2 shows more tools than the index cap, so every one of them and no search_tools.
    ran = Ran()
    tools = many_tools(ran, 1100)
    picks = {1: ["tool_0005"]}
    session, provider, log = make(
        [
            calling(call("c1", "tool_0005")),
            calling(call("s2", SEARCH, {"query": "thing number 7"}), call("c2", "tool_1099")),
            answer(),
        ],
        tools,
        tools_disclosure="search",
        allow_hidden_tool_calls=True,
    )

    await session.run(
        "thing number 5",
        tool_narrowing=lambda context: picks.get(context.turn, [tool.name for tool in tools]),
    )

    assert sent(provider)[0] == ["tool_0005", SEARCH]
    assert SEARCH not in sent(provider)[1]
    assert [e["reason"] for e in events(log, "tools_disclosure_fallback")] == [
        "index_capacity",
        "index_capacity",
    ]
    assert_denied(results, log, "s2")
    assert session.activation.names == ()
    assert ran.calls == [("tool_0005", "c1"), ("tool_1099", "c2")]


async def test_the_capacity_fallback_says_it_is_the_index_cap() -> None:
    session, _, log = make([answer()], many_tools(Ran(), 1100), tools_disclosure="search")
    await session.run("thing")
    [fallback] = events(log, "tools_disclosure_fallback")
    assert fallback["reason"] == "index_capacity"
    assert "1024" in str(fallback["detail"])


async def test_the_capacity_fallback_keeps_narrowing_and_the_grant() -> None:
    ran = Ran()
    tools = many_tools(ran, 1100)
    session, provider, log = make([answer(), answer()], tools, tools_disclosure="search")

    # Narrowed but still above the cap: every visible tool, in grant order, and one event.
    await session.run(
        "thing",
        tool_narrowing=lambda context: [n for n in context.tool_ids if not n.endswith("07")],
    )
    assert sent(provider)[0] == [t.name for t in tools if not t.name.endswith("07")]
    assert len(events(log, "tools_disclosure_fallback")) == 1

    # Narrowed below the cap: the search runs over the visible tools only.
    await session.run(
        "thing",
        tool_narrowing=lambda context: [n for n in context.tool_ids if n.endswith("7")],
    )
    shown = sent(provider)[1]
    assert shown[-1] == "search_tools"
    assert all(name.endswith("7") for name in shown[:-1])
    assert len(events(log, "tools_disclosure_fallback")) == 1


async def test_the_index_covers_only_the_grant() -> None:
    ran = Ran()
    tools = many_tools(ran, 1100)
    grant = [f"tool_{i:04d}" for i in range(0, 1100, 100)]
    session, provider, log = make(
        [calling(call("s1", SEARCH, {"query": "500"})), answer()],
        tools,
        tools_disclosure="search",
    )

    await session.run("thing number 300", tool_names=grant, tools_search={"top_k": 1})

    assert events(log, "tools_disclosure_fallback") == []
    assert sent(provider)[0] == ["tool_0300", SEARCH]
    assert "tool_0500" in str(rows(session.messages)["s1"].content)
    assert sent(provider)[1] == ["tool_0300", "tool_0500", SEARCH]


async def test_a_host_tool_named_search_tools_falls_back_and_is_never_shadowed() -> None:
    ran = Ran()
    host = ran.tool(SEARCH, "the host's own order search", tag="host_search")
    tools = [*catalog(ran), host]
    session, provider, log = make(
        [calling(call("s1", SEARCH, {"query": "orders"})), answer()],
        tools,
        tools_disclosure="search",
    )

    await session.run("weather")

    assert provider.requests[0].tools == tuple(tools)
    assert provider.requests[1].tools == tuple(tools)
    assert [e["reason"] for e in events(log, "tools_disclosure_fallback")] == [
        "reserved_name",
        "reserved_name",
    ]
    assert ran.calls == [("host_search", "s1")]


async def test_the_host_search_tools_is_not_shadowed_after_a_turn_that_hid_it() -> None:
    ran = Ran()
    host = ran.tool(SEARCH, "the host's own order search", tag="host_search")
    weather = ran.tool("weather", "weather forecast")
    picks = {1: ["weather"], 2: [SEARCH, "weather"]}
    session, provider, _ = make(
        [
            calling(call("w1", "weather")),
            calling(call("s1", SEARCH, {"query": "weather"})),
            answer(),
        ],
        [host, weather],
        tools_disclosure="search",
    )

    await session.run("weather", tool_narrowing=lambda context: picks.get(context.turn, []))

    assert provider.requests[1].tools == (host, weather)  # the host's tool is what was shown
    assert ran.calls == [("weather", "w1"), ("host_search", "s1")]


async def test_top_k_counts_visible_tools_when_narrowing_hides_better_matches() -> None:
    tools = [
        ToolDefinition(name=f"w{i}", description="weather " * (10 - i) + "forecast")
        for i in range(10)
    ]
    session, provider, _ = make([answer()], tools)
    await session.run(
        "weather",
        tools_disclosure="search",
        tools_search={"top_k": 3},
        tool_narrowing=lambda context: ["w7", "w8", "w9"],
    )
    assert sent(provider) == [["w7", "w8", "w9", SEARCH]]


async def test_a_restored_session_keeps_its_id_unless_given_another() -> None:
    ran = Ran()
    session, _, _ = make([answer()], [ran.tool("a")])
    await session.run("hello")
    agent = session.agent
    assert agent.session(state=session.state).id == session.id
    assert agent.session(state=json.dumps(session.state)).id == session.id
    assert agent.session("other", state=session.state).id == "other"


async def test_a_failed_skill_check_does_not_replace_the_stored_grant() -> None:
    ran = Ran()
    provider = ScriptedProvider([answer(), answer()])
    agent = create_agent(
        model=MODEL,
        provider=provider,
        tools=[ran.tool("a"), ran.tool("b")],
        skills=[Skill("needs-b", tool_names=("b",))],
    )
    session = agent.session()
    await session.run("first", tool_names=["a", "b"])
    with pytest.raises(AgentRunError):
        await session.run("second", tool_names=["a"])
    assert session.grant == ("a", "b")
