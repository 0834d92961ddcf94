from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from random import Random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prism_tools import (
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolFilter,
    ToolSearchIndex,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools.disclosure import (
    DESCRIPTION_LINE_CHARS,
    MAX_ACTIVATED,
    SEARCH_TOOLS_NAME,
    ToolActivationState,
    create_search_tools_tool,
    disclose_tools,
    plan_tool_disclosure,
)
from prism_tools.types import JSONValue

WORDS_FOR_WIDE = ["weather", "email", "file", "city", "alert", "the"]
CATALOG = [
    ("get_weather", "Weather forecast for a city, today and tomorrow."),
    ("send_email", "Send an email message to one recipient."),
    ("read_file", "Read a text file from the workspace."),
    ("write_file", "Write a text file into the workspace."),
    ("convert_currency", "Convert an amount between two currencies at today's rate."),
    ("translate_text", "Translate text between languages."),
    ("search_flights", "Find flights between two airports on a date."),
    ("book_hotel", "Book a hotel room in a city for some nights."),
]


def make_tools(calls: list[str] | None = None) -> list[ToolDefinition]:
    def runner(name: str) -> Any:
        def run(args: dict[str, JSONValue], context: ToolExecutionContext) -> str:
            if calls is not None:
                calls.append(name)
            return f"{name} ran"

        return run

    return [
        ToolDefinition(name, execute=runner(name), description=description)
        for name, description in CATALOG
    ]


def names(tools: Sequence[ToolDefinition]) -> list[str]:
    return [tool.name for tool in tools]


def context(call_id: str = "c1") -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=call_id)


def schema_bytes(tools: Sequence[ToolDefinition]) -> bytes:
    """What a provider adapter would serialise: names, descriptions and schemas, in order."""
    return orjson.dumps(
        [
            {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            for tool in tools
        ]
    )


def test_top_hits_in_input_order_then_search_tools() -> None:
    tools = make_tools()
    disclosed = disclose_tools(tools, query="translate this email into French", top_k=2)
    assert names(disclosed) == ["send_email", "translate_text", SEARCH_TOOLS_NAME]
    plan = plan_tool_disclosure(tools, query="translate this email into French", top_k=2)
    assert plan.fallback is None
    assert {hit.name for hit in plan.hits} == {"send_email", "translate_text"}


def test_activated_tools_join_the_hits_and_unknown_names_are_inert() -> None:
    tools = make_tools()
    disclosed = disclose_tools(
        tools, query="weather tomorrow", top_k=1, activated=["book_hotel", "ghost_tool"]
    )
    assert names(disclosed) == ["get_weather", "book_hotel", SEARCH_TOOLS_NAME]


def test_a_query_with_no_hits_still_offers_search_tools() -> None:
    disclosed = disclose_tools(make_tools(), query="the of and", top_k=4)
    assert names(disclosed) == [SEARCH_TOOLS_NAME]


def test_identical_inputs_give_identical_schema_bytes() -> None:
    tools = make_tools()
    first = disclose_tools(tools, query="hotel in a city", activated=["read_file"], top_k=3)
    second = disclose_tools(tools, query="hotel in a city", activated=["read_file"], top_k=3)
    assert names(first) == names(second)
    assert schema_bytes(first) == schema_bytes(second)
    assert first[:-1] == second[:-1]  # the same definition objects, not copies


def test_registry_input_uses_registry_order() -> None:
    registry = create_tool_registry(make_tools()[::-1])
    disclosed = disclose_tools(registry, query="read or write a file", top_k=2)
    assert names(disclosed) == ["write_file", "read_file", SEARCH_TOOLS_NAME]


def test_prebuilt_index_over_a_wider_list_cannot_widen_the_disclosure() -> None:
    tools = make_tools()
    wider = [*tools, ToolDefinition("delete_everything", description="Delete every file.")]
    index = ToolSearchIndex(wider)
    disclosed = disclose_tools(tools, query="delete file", index=index, top_k=4)
    assert "delete_everything" not in names(disclosed)
    assert set(names(disclosed)) <= {*names(tools), SEARCH_TOOLS_NAME}


async def test_search_tools_with_a_wider_index_lists_only_input_tools() -> None:
    tools = make_tools()
    wider = [*tools, ToolDefinition("delete_everything", description="Delete every file.")]
    state = ToolActivationState()
    plan = plan_tool_disclosure(tools, query="x", index=ToolSearchIndex(wider), state=state)
    registry = create_tool_registry(list(plan.tools))
    result = await dispatch_tool_call(
        ToolCall(id="c1", name=SEARCH_TOOLS_NAME, arguments={"query": "delete a file"}),
        registry,
        context(),
    )
    assert result.error is None
    assert "delete_everything" not in result.value
    assert "delete_everything" not in state


def test_a_wider_index_neither_names_nor_counts_tools_outside_the_list() -> None:
    admin = ToolDefinition("delete_all_users", description="Delete every user. Weather admin.")
    weather = ToolDefinition("get_weather", description="Weather forecast for a city.")
    wide = ToolSearchIndex([admin, weather])  # say, one index shared by every tenant

    plan = plan_tool_disclosure([weather], query="weather admin", top_k=1, index=wide)

    assert [hit.name for hit in plan.hits] == ["get_weather"]
    assert names(plan.tools) == ["get_weather", SEARCH_TOOLS_NAME]
    search = plan.tools[-1]
    assert search.execute is not None
    listing = search.execute({"query": "weather admin", "k": 1}, context())
    assert listing == "get_weather: Weather forecast for a city. [matched: weather]"


def test_an_input_tool_ranked_below_64_outside_tools_is_still_found() -> None:
    # The index answers at most 64 hits a search; here all 64 are outside the input list.
    shared = [
        ToolDefinition(f"weather_station_{i}", description="Weather station weather readings.")
        for i in range(100)
    ]
    mine = ToolDefinition("notify_team", description="Send a weather alert to the team.")
    listed = [ToolDefinition("send_email", description="Send an email."), mine]
    wide = ToolSearchIndex([*shared, *listed])
    assert "notify_team" not in {hit.name for hit in wide.search("weather", 64)}

    state = ToolActivationState()
    plan = plan_tool_disclosure(listed, query="weather", top_k=2, index=wide, state=state)

    assert [hit.name for hit in plan.hits] == ["notify_team"]
    assert names(plan.tools) == ["notify_team", SEARCH_TOOLS_NAME]
    search = plan.tools[-1]
    assert search.execute is not None
    listing = search.execute({"query": "weather", "k": 1}, context())
    assert listing == "notify_team: Send a weather alert to the team. [matched: weather]"
    assert state.names == ("notify_team",)

    alone = create_search_tools_tool(
        wide, ToolActivationState(), descriptions=listed, allowed=["notify_team"]
    )
    assert alone.execute is not None
    assert alone.execute({"query": "weather", "k": 1}, context()).startswith("notify_team: ")


@given(
    size=st.integers(1, 200),
    random=st.randoms(use_true_random=False),
    query=st.lists(st.sampled_from(WORDS_FOR_WIDE), min_size=1, max_size=3).map(" ".join),
    top_k=st.integers(1, 64),
    k=st.integers(1, 64),
)
def test_a_wider_index_finds_as_many_input_tools_as_match(
    size: int, random: Random, query: str, top_k: int, k: int
) -> None:
    # Up to 200 tools over a few words: often more than 64 match, many outside the input list.
    catalog = [
        ToolDefinition(
            f"{random.choice(WORDS_FOR_WIDE)}_{i}",
            description=" ".join(random.choices(WORDS_FOR_WIDE, k=random.randint(0, 4))),
        )
        for i in range(size)
    ]
    share = random.random()
    listed = [tool for tool in catalog if random.random() < share]
    listed_names = set(names(listed))
    # Which tools match does not depend on the index (only their scores do).
    matching = len(ToolSearchIndex(listed).search(query, 64)) if listed else 0

    plan = plan_tool_disclosure(listed, query=query, top_k=top_k, index=ToolSearchIndex(catalog))

    assert {hit.name for hit in plan.hits} <= listed_names
    assert len(plan.hits) == min(top_k, matching)
    search = plan.tools[-1]
    assert search.execute is not None
    listing = search.execute({"query": query, "k": k}, context())
    found = [] if listing.startswith("No tools matched") else listing.splitlines()
    assert len(found) == min(k, matching)
    assert {line.split(": ", 1)[0] for line in found} <= listed_names


def test_capacity_fallback_discloses_every_tool_without_search_tools() -> None:
    tools = make_tools()
    plan = plan_tool_disclosure(tools, query="weather", max_indexed=3)
    assert plan.fallback == "index_capacity"
    assert plan.detail is not None
    assert "at most 3" in plan.detail
    assert plan.tools == tuple(tools)
    assert disclose_tools(tools, query="weather", max_indexed=3) == tools


def test_index_build_failure_discloses_every_tool() -> None:
    tools = [*make_tools(), ToolDefinition("get_weather", description="a second one")]
    plan = plan_tool_disclosure(tools, query="weather")
    assert plan.fallback == "index_error"
    assert plan.tools == tuple(tools)


def test_search_failure_discloses_every_tool() -> None:
    class BrokenIndex:
        def search(self, query: str, k: int | None = None) -> list[Any]:
            raise RuntimeError("index corrupted")

    tools = make_tools()
    plan = plan_tool_disclosure(tools, query="weather", index=BrokenIndex())  # type: ignore[arg-type]
    assert plan.fallback == "search_error"
    assert plan.tools == tuple(tools)


def test_a_host_tool_named_search_tools_is_never_shadowed() -> None:
    own = ToolDefinition(SEARCH_TOOLS_NAME, description="the host's own")
    tools = [*make_tools(), own]
    plan = plan_tool_disclosure(tools, query="weather", top_k=1)
    assert plan.fallback == "reserved_name"
    assert plan.tools == tuple(tools)
    assert plan.tools[-1] is own


def test_option_errors_are_clear() -> None:
    tools = make_tools()
    with pytest.raises(ValueError, match="top_k"):
        disclose_tools(tools, query="x", top_k=0)
    with pytest.raises(ValueError, match="top_k"):
        disclose_tools(tools, query="x", top_k=65)
    with pytest.raises(TypeError, match="query"):
        disclose_tools(tools, query=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="item 1"):
        disclose_tools([tools[0], "read_file"], query="x")  # type: ignore[list-item]
    with pytest.raises(TypeError, match="state must be a ToolActivationState, got list"):
        disclose_tools(tools, query="x", state=["read_file"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a single str"):
        disclose_tools("read_file", query="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="activated must be a collection of tool names"):
        disclose_tools(tools, query="x", activated="read_file")
    index, state = ToolSearchIndex(tools), ToolActivationState()
    for wrong in (True, 2.0, "3", 0, 65):
        # True would pass as 1 and then refuse every call that leaves k out.
        with pytest.raises(ValueError, match="default_k must be between 1 and 64"):
            create_search_tools_tool(index, state, default_k=wrong)  # type: ignore[arg-type]


async def test_search_tools_returns_inert_lines_and_activates_what_it_found() -> None:
    tools = make_tools()
    state = ToolActivationState()
    first = plan_tool_disclosure(tools, query="weather", top_k=1, state=state)
    assert names(first.tools) == ["get_weather", SEARCH_TOOLS_NAME]
    registry = create_tool_registry(list(first.tools))
    result = await dispatch_tool_call(
        ToolCall(
            id="c1",
            name=SEARCH_TOOLS_NAME,
            arguments={"query": "book a hotel room in a city", "k": 2},
        ),
        registry,
        context(),
    )
    assert result.error is None
    lines = result.value.splitlines()
    assert len(lines) == 2
    listing = "book_hotel: Book a hotel room in a city for some nights."
    assert lines[0] == listing + " [matched: book, hotel, room, city]"
    assert "properties" not in result.value  # no schemas in the listing
    assert lines[1].startswith("get_weather: Weather forecast for a city")
    assert lines[1].endswith("[matched: city]")
    assert state.names == ("book_hotel", "get_weather")
    second = disclose_tools(tools, query="weather", top_k=1, state=state)
    assert "book_hotel" in names(second)


async def test_search_tools_refuses_bad_arguments_and_activates_nothing() -> None:
    state = ToolActivationState()
    tool = create_search_tools_tool(ToolSearchIndex(make_tools()), state)
    registry = create_tool_registry([tool])
    for arguments in ({"query": ""}, {"query": "hotel", "k": 0}, {"query": "hotel", "k": True}, {}):
        result = await dispatch_tool_call(
            ToolCall(id="c1", name=SEARCH_TOOLS_NAME, arguments=arguments), registry, context()
        )
        assert result.error is not None
        assert len(state) == 0


async def test_search_tools_says_so_when_nothing_matches() -> None:
    state = ToolActivationState()
    tool = create_search_tools_tool(ToolSearchIndex(make_tools()), state)
    registry = create_tool_registry([tool])
    result = await dispatch_tool_call(
        ToolCall(id="c1", name=SEARCH_TOOLS_NAME, arguments={"query": "zebra xylophone"}),
        registry,
        context(),
    )
    assert result.error is None
    assert "No tools matched" in result.value
    assert len(state) == 0


def test_listing_lines_are_single_short_lines() -> None:
    long_description = "Checks " + "very " * 60 + "carefully.\nSecond line\twith\x00control"
    tools = [
        ToolDefinition("check\nthing", description=long_description),
        ToolDefinition("other", description=""),
    ]
    state = ToolActivationState()
    tool = create_search_tools_tool(ToolSearchIndex(tools), state, descriptions=tools)
    assert tool.execute is not None
    text = tool.execute({"query": "check carefully"}, context())
    lines = text.splitlines()
    assert len(lines) == 1
    name, rest = lines[0].split(": ", 1)
    assert name == '"check\\nthing"'  # the exact name, escaped, not another name
    description = rest.rsplit(" [matched:", 1)[0]
    assert len(description) <= DESCRIPTION_LINE_CHARS
    assert description.endswith("…")
    assert "Second line" not in text


def read_listed_name(line: str) -> str:
    """The exact tool name a ``search_tools`` line starts with."""
    if line.startswith('"'):
        name, end = json.JSONDecoder().raw_decode(line)
        assert line[end : end + 2] == ": "
        assert isinstance(name, str)
        return name
    return line.split(": ", 1)[0]


def test_listing_prints_every_name_whole_and_unambiguous() -> None:
    # A name is what the model calls: cut or collapsed, two tools print alike, or a tool
    # prints under a name that is not its own.
    long_read = "crm_" + "x" * 120 + "_read"
    long_delete = "crm_" + "x" * 120 + "_delete"
    tools = [
        ToolDefinition(long_read, description="Read a customer record."),
        ToolDefinition(long_delete, description="Delete a customer record."),
        ToolDefinition("report\tweekly", description="Weekly customer report."),
        ToolDefinition("report weekly", description="Weekly customer report, spaced."),
        ToolDefinition('"report"', description="Quoted customer report."),
    ]
    tool = create_search_tools_tool(
        ToolSearchIndex(tools), ToolActivationState(), descriptions=tools
    )
    assert tool.execute is not None

    lines = tool.execute({"query": "customer record report"}, context()).splitlines()

    printed = [line.split(": ", 1)[0] for line in lines]
    assert sorted(printed) == sorted(
        [long_read, long_delete, '"report\\tweekly"', '"report weekly"', '"\\"report\\""']
    )
    assert sorted(map(read_listed_name, lines)) == sorted(names(tools))


@given(
    tool_names=st.lists(
        st.text(min_size=1, max_size=12).filter(lambda name: name != SEARCH_TOOLS_NAME),
        min_size=1,
        max_size=12,
        unique=True,
    )
)
def test_every_listed_name_reads_back_exactly_on_one_line(tool_names: list[str]) -> None:
    tools = [ToolDefinition(name, description="thing") for name in tool_names]
    tool = create_search_tools_tool(
        ToolSearchIndex(tools), ToolActivationState(), descriptions=tools
    )
    assert tool.execute is not None
    lines = tool.execute({"query": "thing", "k": 64}, context()).split("\n")
    assert len(lines) == len(tools)
    assert all(line.isprintable() for line in lines)
    assert sorted(map(read_listed_name, lines)) == sorted(tool_names)


async def test_activation_never_grants_a_denied_tool() -> None:
    calls: list[str] = []
    tools = make_tools(calls)
    state = ToolActivationState(["send_email"])
    disclosed = disclose_tools(tools, query="weather", top_k=1, state=state)
    assert "send_email" in names(disclosed)
    registry = create_tool_registry(disclosed)
    result = await dispatch_tool_call(
        ToolCall(id="c1", name="send_email", arguments={}),
        registry,
        context(),
        filter=ToolFilter(deny=["send_email"]),
    )
    assert result.error is not None
    assert result.metadata == {"blocked_reason": "tool_denied"}
    assert calls == []


def test_activation_state_keeps_the_newest_names_under_the_cap() -> None:
    state = ToolActivationState()
    state.activate(f"tool_{i}" for i in range(MAX_ACTIVATED + 10))
    assert len(state) == MAX_ACTIVATED
    assert state.names[0] == "tool_10"
    assert state.names[-1] == f"tool_{MAX_ACTIVATED + 9}"
    state.activate(["tool_10"])  # re-activation makes a name the newest
    assert state.names[-1] == "tool_10"
    state.activate(["fresh"])
    assert "tool_11" not in state
    assert "tool_10" in state
    state.clear()
    assert state.names == ()


def test_activation_state_round_trips_through_json() -> None:
    state = ToolActivationState(["b", "a", "ünïcode"], cap=5)
    restored = ToolActivationState.from_json(state.to_json())
    assert restored.names == ("b", "a", "ünïcode")
    assert ToolActivationState.from_json(state.to_json().encode()).names == restored.names
    many = ToolActivationState.from_json(orjson.dumps({"activated": [str(i) for i in range(300)]}))
    assert many.names == tuple(str(i) for i in range(172, 300))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"activated": "a"}',
        '{"activated": [1]}',
        '{"activated": [""]}',
        "[" * 100_000,
    ],
)
def test_activation_state_refuses_corrupt_json(text: str) -> None:
    with pytest.raises(ValueError, match="activation state"):
        ToolActivationState.from_json(text)


def test_activation_state_refuses_bad_names_and_caps() -> None:
    with pytest.raises(TypeError, match="single string"):
        ToolActivationState().activate("abc")
    with pytest.raises(TypeError, match="non-empty"):
        ToolActivationState([""])
    with pytest.raises(ValueError, match="cap"):
        ToolActivationState(cap=0)
    with pytest.raises(ValueError, match="cap"):
        ToolActivationState(cap=MAX_ACTIVATED + 1)


def test_activation_state_is_safe_across_threads() -> None:
    state = ToolActivationState()

    def worker(offset: int) -> None:
        for i in range(500):
            state.activate([f"t{offset}_{i % 40}"])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(state) == MAX_ACTIVATED
    assert len(set(state.names)) == MAX_ACTIVATED


WORDS = ["weather", "email", "file", "hotel", "city", "text", "read", "book", "the", "zebra"]


@given(
    picks=st.lists(
        st.tuples(st.sampled_from(WORDS), st.lists(st.sampled_from(WORDS), max_size=6)),
        max_size=20,
    ),
    query=st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join),
    activated=st.lists(st.text(min_size=1, max_size=12), max_size=6),
    top_k=st.integers(1, 64),
)
def test_disclosure_never_widens_and_keeps_input_order(
    picks: list[tuple[str, list[str]]], query: str, activated: list[str], top_k: int
) -> None:
    tools = [
        ToolDefinition(f"{word}_{i}", description=" ".join(description))
        for i, (word, description) in enumerate(picks)
    ]
    activated = [*activated, *(tool.name for tool in tools[:2])]
    disclosed = disclose_tools(tools, query=query, top_k=top_k, activated=activated)
    assert disclosed, "disclosure never shows zero tools"
    assert disclosed[-1].name == SEARCH_TOOLS_NAME
    shown = disclosed[:-1]
    positions = [tools.index(tool) for tool in shown]  # identity: every one is an input tool
    assert positions == sorted(positions)
    hits = plan_tool_disclosure(tools, query=query, top_k=top_k).hits
    expected = {hit.name for hit in hits} | {name for name in activated if name in names(tools)}
    assert set(names(shown)) == expected
    assert len(shown) <= top_k + len(activated)
