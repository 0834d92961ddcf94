"""The search and agent-session half of ``prism-tools demo``."""

from __future__ import annotations

import orjson
import pytest

from prism_tools.cli import main
from prism_tools.demo_agent import (
    MISSPELLED_TOOL,
    agent_report_data,
    format_agent_report,
    run_agent_demo,
)


async def test_the_scripted_session_recovers_from_a_misspelled_tool() -> None:
    report = await run_agent_demo()
    assert report.ok
    result = report.result
    assert result.status == "succeeded"
    assert len(result.turns) == 3
    assert report.requests == 3
    roles = [message.role for message in result.messages]
    assert roles == ["user", "assistant", "tool", "tool", "tool", "assistant", "tool", "assistant"]
    refused = next(message for message in result.messages if message.name == MISSPELLED_TOOL)
    assert refused.error is not None
    assert "get_weather_forecast" in refused.error.message
    # The parallel round's rows come back in call order, and the real tools really ran.
    rows = [message for message in result.messages if message.role == "tool"]
    assert [row.tool_call_id for row in rows] == ["call_w1", "call_c1", "call_f1", "call_f2"]
    assert rows[1].content["currency"] == "USD"
    assert result.usage.total_tokens == 1816


async def test_search_and_disclosure_narrow_the_catalog() -> None:
    report = await run_agent_demo()
    assert [hit.name for hit in report.hits[:2]] == ["get_exchange_rate", "convert_currency"]
    plan = report.disclosure
    assert plan.fallback is None
    assert plan.names[-1] == "search_tools"
    assert "get_current_weather" in plan.names
    assert len(plan.tools) <= 9 < report.tool_count


async def test_report_renders_as_text_and_json() -> None:
    report = await run_agent_demo()
    text = format_agent_report(report)
    assert "The sessions went as scripted." in text
    assert "Tools you can call" in text
    data = orjson.loads(orjson.dumps(agent_report_data(report)))
    assert data["ok"] is True
    assert data["session"]["events"][0] == "agent_started"
    assert data["session"]["events"][-1] == "agent_finished"


def test_the_cli_demo_includes_the_session(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "== Agent session: 3 turns" in out
    assert main(["demo", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["agent"]["session"]["status"] == "succeeded"


async def test_search_disclosure_finds_the_tool_the_first_turn_did_not_show() -> None:
    report = await run_agent_demo()
    assert report.search_ok
    first, second, third = report.sent_per_turn
    assert len(first) == 9  # top 8 and search_tools, out of 364
    assert "convert_currency" not in first
    assert "convert_currency" in second
    assert second == third  # the same tools, so the same schema bytes, on consecutive turns
    result = report.search_result
    assert result is not None
    assert [record.tools["count"] for record in result.turns] == [9, 12, 12]
    assert result.turns[1].tools["ids_hash"] == result.turns[2].tools["ids_hash"]
