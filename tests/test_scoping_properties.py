"""Random catalogs, grants, narrowing callbacks, hidden-call settings, scripted calls and
``search_tools`` queries: no call outside the grant ever runs, no hidden tool runs unless hidden
calls are allowed, nothing outside the grant is ever sent, and every run ends cleanly."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from prism_tools import (
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolScopeError,
    create_tool_registry,
)
from prism_tools.agent import AgentRunError, Session, create_agent
from prism_tools.messages import ProviderResponse
from prism_tools.providers import ScriptedProvider
from prism_tools.scoping import NarrowingContext

SEARCH = "search_tools"
WORDS = ["weather", "stock", "email", "translate", "order", "refund", "city", "price"]
KNOWN_NAMES = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", SEARCH]

names = st.sampled_from(KNOWN_NAMES) | st.text(alphabet="abcxyz_", min_size=1, max_size=5)
garbage = st.text(max_size=12) | st.sampled_from(["", " ", "ALPHA", "alpha ", "search_tools\n"])
descriptions = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)
queries = st.text(max_size=20) | st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join)
arguments = st.one_of(
    st.just({}),
    st.builds(lambda q: {"query": q}, queries),
    st.builds(lambda q, k: {"query": q, "k": k}, queries, st.integers(-2, 80)),
)


class World:
    """Host tools that record (name, turn) for every call they run."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, int]] = []
        self.provider: ScriptedProvider | None = None

    def tool(self, name: str, description: str) -> ToolDefinition:
        async def execute(args: dict[str, Any], context: ToolExecutionContext) -> str:
            assert self.provider is not None
            # Tool rounds follow the turn that asked for them: the turn is the request count.
            self.ran.append((name, len(self.provider.requests)))
            return f"{name} ran"

        return ToolDefinition(name=name, execute=execute, description=description)


def responses(turns: Sequence[Sequence[tuple[str, Any]]], texts: Sequence[str]) -> list[Any]:
    script: list[Any] = []
    for turn, calls in enumerate(turns):
        tool_calls = tuple(
            ToolCall(f"t{turn}c{index}", name, args) for index, (name, args) in enumerate(calls)
        )
        text = texts[turn % len(texts)] if texts else ""
        script.append(
            ProviderResponse(text=text, tool_calls=tool_calls, finish_reason="tool_calls")
        )
    script.append(ProviderResponse(text="final", finish_reason="stop"))
    return script


def ids_hash(names: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(names).encode()).hexdigest()


@dataclass
class Narrowing:
    """A narrowing callback returning scripted names per turn; remembers what it returned."""

    picks: list[list[str]]
    is_async: bool
    returned: dict[int, list[str]]
    tool_ids: list[tuple[str, ...]]

    def pick(self, context: NarrowingContext) -> list[str]:
        chosen = self.picks[(context.turn - 1) % len(self.picks)]
        self.returned[context.turn] = chosen
        self.tool_ids.append(context.tool_ids)
        return chosen

    def callback(self) -> Any:
        if not self.is_async:
            return self.pick

        async def narrowing(context: NarrowingContext) -> list[str]:
            return self.pick(context)

        return narrowing


def check_run(
    session: Session,
    world: World,
    provider: ScriptedProvider,
    outcome: Any,
    *,
    grant: set[str],
    narrowing: Narrowing | None,
    allow_hidden: bool,
    disclosure: str,
    activated_before: Sequence[str],
    generated_search: bool,
) -> None:
    """The invariants every run keeps."""

    def visible(turn: int) -> set[str]:
        if narrowing is None:
            return grant
        return grant & set(narrowing.returned[turn])

    # Nothing outside the grant (or hidden, unless allowed) ever runs.
    for name, turn in world.ran:
        assert name in grant, f"{name!r} ran outside the grant {sorted(grant)}"
        if not allow_hidden:
            assert name in visible(turn), f"hidden {name!r} ran on turn {turn}"

    # Every tool sent is within the grant and this turn's narrowing, plus the generated search.
    for turn, request in enumerate(provider.requests, start=1):
        request_names = [tool.name for tool in request.tools]
        assert len(request_names) == len(set(request_names))
        for tool in request.tools:
            generated = disclosure == "search" and tool.name == SEARCH and tool.kind == "search"
            assert generated or tool.name in visible(turn), (turn, tool.name, sorted(grant))
        if narrowing is not None:
            # Narrowing always sees the grant, in registry order.
            assert set(narrowing.tool_ids[turn - 1]) == grant

    # The generated search_tools answers only on the turns that show it (call ids are
    # "t<script index>c<n>", and script index i answers request i + 1).
    if generated_search:
        for message in session.messages:
            if message.role == "tool" and message.name == SEARCH and message.error is None:
                assert message.tool_call_id is not None
                turn = int(message.tool_call_id[1:].split("c", 1)[0]) + 1
                shown = [tool.name for tool in provider.requests[turn - 1].tools]
                assert SEARCH in shown, f"search_tools ran on turn {turn}, which showed {shown}"

    # search_tools only ever activates granted names (the rest were activated before the run).
    assert set(session.activation.names) <= grant | set(activated_before)
    json.dumps(session.state)

    # The turn records hash exactly the names sent.
    result = outcome.result if isinstance(outcome, AgentRunError) else outcome
    assert len(result.turns) == len(provider.requests)
    for record, request in zip(result.turns, provider.requests, strict=True):
        sent_names = [tool.name for tool in request.tools]
        assert record.tools == {"count": len(sent_names), "ids_hash": ids_hash(sent_names)}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    catalog = draw(
        st.lists(st.tuples(names, descriptions), unique_by=lambda t: t[0], min_size=1, max_size=7)
    )
    catalog_names = [name for name, _ in catalog]
    pool = st.sampled_from(catalog_names) | names
    if draw(st.booleans()):
        grant = None
    else:
        chosen = draw(st.lists(st.sampled_from(catalog_names), max_size=7))
        unknown = draw(st.lists(names.filter(lambda n: n not in catalog_names), max_size=2))
        if draw(st.integers(0, 3)) > 0:
            unknown = []  # mostly valid grants, so most runs get going
        grant = draw(st.permutations([*chosen, *unknown]))
    picked = st.integers(0, 9).flatmap(
        lambda roll: st.sampled_from(catalog_names) if roll < 7 else names | garbage
    )
    narrowing = draw(st.none() | st.lists(st.lists(picked, max_size=6), min_size=1, max_size=4))

    # Mostly catalog names, so that tools get the chance to run (or to be refused).
    call_names = st.integers(0, 9).flatmap(
        lambda roll: (
            st.sampled_from(catalog_names)
            if roll < 6
            else st.just(SEARCH)
            if roll < 8
            else names | garbage
        )
    )
    # A turn without calls ends the run, so every scripted turn calls something.
    turns = draw(
        st.lists(
            st.lists(st.tuples(call_names, arguments), min_size=1, max_size=3),
            min_size=1,
            max_size=4,
        )
    )
    return {
        "catalog": catalog,
        "grant": grant,
        "narrowing": narrowing,
        "turns": turns,
        "texts": draw(st.lists(queries, max_size=3)),
        "input": draw(queries),
        "narrowing_async": draw(st.booleans()),
        "allow_hidden": draw(st.booleans()),
        "allow_hidden_on_agent": draw(st.booleans()),
        "disclosure": draw(st.sampled_from(["all", "search"])),
        "top_k": draw(st.integers(-3, 100)),
        "activated": draw(st.lists(pool | garbage.filter(bool), max_size=3)),
    }


@given(scenarios())
async def test_no_call_outside_the_grant_or_hidden_ever_runs(scenario: dict[str, Any]) -> None:
    world = World()
    tools = [world.tool(name, description) for name, description in scenario["catalog"]]
    catalog_names = {tool.name for tool in tools}
    tools_by_name = {tool.name: tool for tool in tools}
    provider = ScriptedProvider(responses(scenario["turns"], scenario["texts"]))
    world.provider = provider
    allow_hidden: bool = scenario["allow_hidden"]
    on_agent = scenario["allow_hidden_on_agent"]
    agent = create_agent(
        model="m",
        provider=provider,
        tools=create_tool_registry(tools),
        allow_hidden_tool_calls=allow_hidden if on_agent else False,
    )
    session = agent.session()
    session.activation.activate(scenario["activated"])
    narrowing = (
        None
        if scenario["narrowing"] is None
        else Narrowing(scenario["narrowing"], scenario["narrowing_async"], {}, [])
    )

    requested = scenario["grant"]
    unknown = [] if requested is None else [n for n in requested if n not in catalog_names]
    grant = catalog_names if requested is None else set(requested) & catalog_names

    outcome: Any
    try:
        outcome = await session.run(
            scenario["input"],
            tool_names=requested,
            tool_narrowing=None if narrowing is None else narrowing.callback(),
            tools_disclosure=scenario["disclosure"],
            tools_search={"top_k": scenario["top_k"]},
            allow_hidden_tool_calls=None if on_agent else allow_hidden,
        )
    except AgentRunError as error:
        outcome = error
    event(f"outcome: {type(outcome).__name__}")
    event(f"tools ran: {min(len(world.ran), 3)}")
    refused = [
        m
        for m in session.messages
        if m.role == "tool" and m.error is not None and m.name in tools_by_name
    ]
    event(f"calls to host tools refused or failed: {min(len(refused), 3)}")

    if unknown:
        assert isinstance(outcome, AgentRunError)
        assert isinstance(outcome.__cause__, ToolScopeError)
        assert provider.requests == []
        assert world.ran == []
        assert session.messages == []
        return
    assert not isinstance(outcome, AgentRunError), repr(outcome.__cause__)
    assert outcome.status == "succeeded"
    check_run(
        session,
        world,
        provider,
        outcome,
        grant=grant,
        narrowing=narrowing,
        allow_hidden=allow_hidden,
        disclosure=scenario["disclosure"],
        activated_before=scenario["activated"],
        generated_search=SEARCH not in catalog_names,
    )


@given(
    catalog=st.lists(names, unique=True, min_size=1, max_size=6),
    data=st.data(),
    via_text=st.booleans(),
)
async def test_a_resumed_grant_never_widens(
    catalog: list[str], data: st.DataObject, via_text: bool
) -> None:
    world = World()
    first_provider = ScriptedProvider([ProviderResponse(text="ok")])
    world.provider = first_provider
    registry = create_tool_registry([world.tool(name, "") for name in catalog])
    first = create_agent(model="m", provider=first_provider, tools=registry).session()
    granted = data.draw(st.lists(st.sampled_from(catalog), unique=True), label="grant")
    await first.run("hi", tool_names=granted)
    state: Any = json.dumps(first.state) if via_text else first.state

    # Today's registry: some tools dropped, some added (possibly ones granted before).
    kept = data.draw(st.lists(st.sampled_from(catalog), unique=True), label="kept")
    added = data.draw(st.lists(names, unique=True, max_size=4), label="added")
    now_names = list(dict.fromkeys([*kept, *added]))
    calls = data.draw(
        st.lists(st.sampled_from([*catalog, *added, SEARCH]), max_size=6), label="calls"
    )
    provider = ScriptedProvider(responses([[(name, {}) for name in calls]], ["x"]))
    world.provider = provider
    now = create_tool_registry([world.tool(name, "") for name in now_names])
    session = create_agent(model="m", provider=provider, tools=now).session(state=state)
    late = data.draw(st.lists(names, unique=True, max_size=3), label="late")
    for name in late:
        now.register(world.tool(name, ""))

    result = await session.run("again")

    allowed = set(granted) & set(now_names)
    assert result.status == "succeeded"
    assert {name for name, _ in world.ran} <= allowed
    for request in provider.requests:
        assert {tool.name for tool in request.tools} <= allowed
    assert set(session.state["grant"] or ()) <= allowed
