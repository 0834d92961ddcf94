"""The second half of ``prism-tools demo``: search over the catalog and a scripted agent session.

Search: the BM25 index over all example tools answers a user request, and disclosure picks the
tools one turn would show. Session: a ``ScriptedProvider`` plays a model that calls two tools
and a misspelled one in one parallel round, corrects itself after the error, and answers. Every
call goes through the same checks as a hand-dispatched one (JSON Schema validation included).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from prism_tools import _json
from prism_tools.agent import RunResult, create_agent
from prism_tools.disclosure import ToolDisclosure, plan_tool_disclosure
from prism_tools.examples import create_example_registry
from prism_tools.messages import Message, ProviderResponse, Usage
from prism_tools.providers import ScriptedProvider
from prism_tools.registry import ToolRegistry
from prism_tools.search import SearchHit, ToolSearchIndex
from prism_tools.types import AgentEvent, JSONValue, ToolCall
from prism_tools.validation import create_json_schema_tool_argument_validator

USER_REQUEST = "What's the weather in Lisbon right now, and how much is 100 EUR in US dollars?"
SEARCH_QUERY = "convert currency exchange rate"
MISSPELLED_TOOL = "get_wether_forecast"


@dataclass
class AgentDemoReport:
    """What the search and the scripted sessions produced."""

    tool_count: int
    hits: list[SearchHit]
    disclosure: ToolDisclosure
    result: RunResult
    events: list[AgentEvent] = field(default_factory=list)
    requests: int = 0
    search_result: RunResult | None = None
    sent_per_turn: list[list[str]] = field(default_factory=list)

    @property
    def search_ok(self) -> bool:
        """True when search disclosure went as scripted: the first turn did not show
        ``convert_currency``, ``search_tools`` found it, and the next turn showed and ran it."""
        result = self.search_result
        if result is None or result.status != "succeeded" or len(self.sent_per_turn) != 3:
            return False
        first, second, _ = self.sent_per_turn
        rows = {row.tool_call_id: row for row in result.messages if row.role == "tool"}
        converted = rows.get("call_s2")
        return (
            "convert_currency" not in first
            and "convert_currency" in second
            and first[-1] == second[-1] == "search_tools"
            and converted is not None
            and converted.error is None
        )

    @property
    def ok(self) -> bool:
        """True when both sessions went as scripted."""
        return self.session_ok and self.search_ok

    @property
    def session_ok(self) -> bool:
        """True when the session went as scripted: it succeeded, the misspelled call was refused
        with the list of real names, and every call got exactly one result row."""
        rows = [message for message in self.result.messages if message.role == "tool"]
        calls = [call for message in self.result.messages for call in message.tool_calls]
        refused = [row for row in rows if row.name == MISSPELLED_TOOL]
        return (
            self.result.status == "succeeded"
            and len(rows) == len(calls)
            and len(refused) == 1
            and refused[0].error is not None
            and "Tools you can call" in refused[0].error.message
            and sum(row.error is None for row in rows) == len(rows) - 1
        )


def _script() -> list[ProviderResponse]:
    return [
        ProviderResponse(
            text="Let me check both.",
            tool_calls=(
                ToolCall("call_w1", "get_current_weather", {"city": "Lisbon"}),
                ToolCall(
                    "call_c1",
                    "convert_currency",
                    {"amount": 100, "from_currency": "EUR", "to_currency": "USD"},
                ),
                ToolCall("call_f1", MISSPELLED_TOOL, {"city": "Lisbon", "days": 2}),
            ),
            usage=Usage(420, 38),
            finish_reason="tool_calls",
        ),
        ProviderResponse(
            tool_calls=(
                ToolCall("call_f2", "get_weather_forecast", {"city": "Lisbon", "days": 2}),
            ),
            usage=Usage(610, 21),
            finish_reason="tool_calls",
        ),
        ProviderResponse(
            text="Lisbon is partly cloudy at about 9 °C, and 100 EUR is about 108 USD.",
            usage=Usage(702, 25),
            finish_reason="stop",
        ),
    ]


async def run_agent_demo(registry: ToolRegistry | None = None) -> AgentDemoReport:
    """Search the catalog, plan a turn's disclosure, and run the scripted session."""
    registry = registry if registry is not None else create_example_registry()
    index = ToolSearchIndex(registry)
    hits = index.search(SEARCH_QUERY, k=5)
    disclosure = plan_tool_disclosure(registry, query=USER_REQUEST, top_k=8, index=index)

    provider = ScriptedProvider(_script())
    agent = create_agent(
        model="scripted-model",
        provider=provider,
        tools=registry,
        validator=create_json_schema_tool_argument_validator(),
        loop={"tool_concurrency": 4},
        instructions="Answer with the tools; never guess live data.",
    )
    session = agent.session("demo-session")
    events: list[AgentEvent] = []
    session.subscribe(events.append)
    result = await session.run(USER_REQUEST)

    # The same request with search disclosure: each turn sends the top 8 tools for the latest
    # text plus search_tools; what search_tools finds is shown from the next turn on.
    search_provider = ScriptedProvider(_search_script())
    search_agent = create_agent(
        model="scripted-model",
        provider=search_provider,
        tools=registry,
        validator=create_json_schema_tool_argument_validator(),
        tools_disclosure="search",
        tools_search={"top_k": 8},
    )
    search_result = await search_agent.session("demo-search-session").run(USER_REQUEST)
    return AgentDemoReport(
        tool_count=len(registry),
        hits=hits,
        disclosure=disclosure,
        result=result,
        events=events,
        requests=len(provider.requests),
        search_result=search_result,
        sent_per_turn=[
            [tool.name for tool in request.tools] for request in search_provider.requests
        ],
    )


def _search_script() -> list[ProviderResponse]:
    return [
        ProviderResponse(
            tool_calls=(
                ToolCall("call_s0", "get_current_weather", {"city": "Lisbon"}),
                ToolCall("call_s1", "search_tools", {"query": SEARCH_QUERY, "k": 3}),
            ),
            finish_reason="tool_calls",
        ),
        ProviderResponse(
            tool_calls=(
                ToolCall(
                    "call_s2",
                    "convert_currency",
                    {"amount": 100, "from_currency": "EUR", "to_currency": "USD"},
                ),
            ),
            finish_reason="tool_calls",
        ),
        ProviderResponse(text="Lisbon: partly cloudy, about 9 °C. 100 EUR is about 108 USD."),
    ]


def _short(value: JSONValue, limit: int = 96) -> str:
    text = value if isinstance(value, str) else _json.dumps(value).decode("utf-8")
    text = " | ".join(text.splitlines())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message_line(message: Message) -> str:
    if message.role == "tool":
        if message.error is not None:
            return f"  tool       {message.name}: error: {_short(message.error.message)}"
        return f"  tool       {message.name}: {_short(message.content)}"
    calls = ", ".join(call.name for call in message.tool_calls)
    text = _short(message.content) if message.content else ""
    joined = " ".join(part for part in (text, f"[calls: {calls}]" if calls else "") if part)
    return f"  {message.role:<10} {joined}"


def format_agent_report(report: AgentDemoReport) -> str:
    """The search hits, the disclosure plan and the session transcript, as text."""
    lines = ["", f"== Search over {report.tool_count} tools: {SEARCH_QUERY!r}"]
    lines += [
        f"  {hit.score:6.2f}  {hit.name:<26} matched: {', '.join(hit.matched)}"
        for hit in report.hits
    ]
    plan = report.disclosure
    lines += [
        "",
        f"== Disclosure for {USER_REQUEST!r}",
        f"  {len(plan.tools)} of {report.tool_count} tools shown"
        f" ({'narrowed by search' if plan.fallback is None else 'fell back: ' + plan.fallback}):",
        "  " + ", ".join(plan.names),
    ]
    result = report.result
    counts = Counter(event.type for event in report.events)
    lines += [
        "",
        f"== Agent session: {len(result.turns)} turns, {report.requests} provider requests, "
        f"status {result.status}, finish {result.finish_reason}, "
        f"{result.usage.total_tokens} tokens",
        *(_message_line(message) for message in result.messages),
        "  events: " + ", ".join(f"{kind} x{count}" for kind, count in counts.items()),
    ]
    if report.search_result is not None:
        lines += [
            "",
            f"== The same request with tools_disclosure='search' (top 8 of {report.tool_count})",
        ]
        for number, names in enumerate(report.sent_per_turn, start=1):
            lines.append(f"  turn {number}: {len(names)} tools sent: {', '.join(names)}")
        lines += [_message_line(message) for message in report.search_result.messages]
    lines += [
        "",
        "The sessions went as scripted." if report.ok else "A session did not go as scripted.",
    ]
    return "\n".join(lines) + "\n"


def agent_report_data(report: AgentDemoReport) -> dict[str, JSONValue]:
    """The search and session as plain JSON-ready data."""
    result = report.result
    return {
        "ok": report.ok,
        "search": {
            "query": SEARCH_QUERY,
            "hits": [
                {"name": hit.name, "score": hit.score, "matched": list(hit.matched)}
                for hit in report.hits
            ],
        },
        "disclosure": {
            "query": USER_REQUEST,
            "tools": list(report.disclosure.names),
            "fallback": report.disclosure.fallback,
        },
        "session": {
            "status": result.status,
            "finish_reason": result.finish_reason,
            "turns": len(result.turns),
            "usage": {
                "input_tokens": result.usage.input_tokens,
                "output_tokens": result.usage.output_tokens,
            },
            "messages": [
                {
                    "role": message.role,
                    "content": message.content,
                    "tool_calls": [call.to_dict() for call in message.tool_calls],
                    "tool_call_id": message.tool_call_id,
                    "name": message.name,
                    "error": None if message.error is None else message.error.to_dict(),
                }
                for message in result.messages
            ],
            "events": [event.type for event in report.events],
        },
        "search_session": {
            "ok": report.search_ok,
            "tools_sent_per_turn": [list(names) for names in report.sent_per_turn],
        },
    }


__all__ = [
    "MISSPELLED_TOOL",
    "SEARCH_QUERY",
    "USER_REQUEST",
    "AgentDemoReport",
    "agent_report_data",
    "format_agent_report",
    "run_agent_demo",
]
