"""The ``prism-tools`` command line and the scripted demo behind ``prism-tools demo``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from prism_tools import BLOCKED_REASONS, ToolExecutionContext, __version__
from prism_tools.cli import main
from prism_tools.demo import DEMO_SECRET, run_demo
from prism_tools.examples import EXCLUSIVE_TOOL, PROGRESS_TOOL, example_tools
from prism_tools.validation import create_json_schema_tool_argument_validator


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def call_id_of(event: dict[str, Any]) -> str | None:
    """The call an event (as plain data) belongs to; event types keep it in different places."""
    if "tool_call_id" in event:
        return str(event["tool_call_id"])
    if "call" in event:
        return str(event["call"]["id"])
    if "result" in event:
        return str(event["result"]["tool_call_id"])
    return None


def test_demo_shows_every_outcome_and_never_the_secret(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out = run_cli(capsys, "demo")
    assert status == 0
    for reason in BLOCKED_REASONS:
        assert f"blocked ({reason})" in out, reason
    assert "[REDACTED]" in out
    assert DEMO_SECRET not in out
    assert "tool_execution_progress" in out
    assert "ended as scripted" in out
    # Both ways of getting invalid_arguments are shown.
    assert out.count("blocked (invalid_arguments)") == 2
    assert (
        'Invalid arguments for tool get_weather_forecast: /: "days" is a required property' in out
    )


def test_demo_json_is_one_object_with_events_rows_and_results(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out = run_cli(capsys, "demo", "--json")
    assert status == 0
    assert DEMO_SECRET not in out
    data = json.loads(out)
    assert data["version"] == __version__
    assert data["ok"] is True
    assert data["tools"] == len(example_tools())

    steps = data["steps"]
    assert {step["reason"] for step in steps if step["outcome"] == "blocked"} == set(
        BLOCKED_REASONS
    )
    assert all(isinstance(step["result"], dict) for step in steps)
    assert any("[REDACTED]" in step["result"].get("error", {}).get("message", "") for step in steps)

    progress_call = next(step["call_id"] for step in steps if step["tool"] == PROGRESS_TOOL)
    types = [event["type"] for event in data["events"] if call_id_of(event) == progress_call]
    assert types[0] == "guardrail_decision"
    assert types[1] == "tool_execution_started"
    assert types[-1] == "tool_execution_finished"
    progress = types[2:-1]
    assert len(progress) >= 2
    assert set(progress) == {"tool_execution_progress"}

    statuses = {row["status"] for row in data["rows"]}
    assert statuses == {"started", "finished", "blocked", "error"}
    assert all(row["redacted"] is True for row in data["rows"])


async def test_demo_report_holds_no_secret_and_ends_as_scripted() -> None:
    report = await run_demo()
    assert report.ok
    for value in (report.steps, report.events, report.rows):
        assert DEMO_SECRET not in repr(value)
    # Results come back in call order, whatever order the concurrent calls finished in.
    assert [step.call_id for step in report.steps] == sorted(step.call_id for step in report.steps)
    by_title = {step.title: step for step in report.steps}
    assert by_title["Concurrent: weather in Tokyo"].result.value["city"] == "Tokyo"
    corrected = by_title["The same call, corrected with the missing argument"]
    assert corrected.result.ok


async def test_exclusive_tool_runs_alone_after_the_concurrent_calls() -> None:
    report = await run_demo()
    batch = [step for step in report.steps if step.batch]
    exclusive = next(step.call_id for step in batch if step.tool == EXCLUSIVE_TOOL)
    others = {step.call_id for step in batch if step.tool != EXCLUSIVE_TOOL}
    order = [(event.type, _call_id(event)) for event in report.events]
    exclusive_start = order.index(("tool_execution_started", exclusive))
    finishes = [
        index
        for index, (kind, call_id) in enumerate(order)
        if kind == "tool_execution_finished" and call_id in others
    ]
    assert len(finishes) == len(others)
    assert max(finishes) < exclusive_start


def _call_id(event: Any) -> str | None:
    if event.tool_call_id is not None:
        return str(event.tool_call_id)
    if event.call is not None:
        return str(event.call.id)
    if event.result is not None:
        return str(event.result.tool_call_id)
    return None


def test_validation_message_names_the_missing_arguments() -> None:
    # The demo checks arguments with the JSON Schema validator over the catalog's schemas.
    validate = create_json_schema_tool_argument_validator(missing_schema="reject")
    tool = next(tool for tool in example_tools() if tool.name == "get_weather_forecast")
    context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c")
    problem = validate(tool, {}, context)
    assert problem is not None
    assert problem.message.startswith("Invalid arguments for tool get_weather_forecast: ")
    assert '"city" is a required property' in problem.message
    assert '"days" is a required property' in problem.message
    assert validate(tool, {"city": "Lisbon", "days": 2}, context) is None


def test_python_dash_m_runs_the_demo() -> None:
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "prism_tools", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    elapsed = time.perf_counter() - started
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    for reason in BLOCKED_REASONS:
        assert reason in completed.stdout
    assert "[REDACTED]" in completed.stdout
    assert DEMO_SECRET not in completed.stdout
    assert elapsed < 20  # generous for slow CI; it takes well under a second locally


def test_list_prints_every_tool_and_the_count(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run_cli(capsys, "list")
    assert status == 0
    lines = out.splitlines()
    assert lines[-1] == f"{len(example_tools())} tools"
    listed = [line.split()[0] for line in lines[:-1]]
    assert listed == [tool.name for tool in example_tools()]


def test_list_by_domain(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run_cli(capsys, "list", "--domain", "weather")
    assert status == 0
    assert out.splitlines()[-1] == f"{len(example_tools('weather'))} tools"
    assert "get_current_weather" in out
    assert "send_email" not in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "version") == (0, f"prism-tools {__version__}\n")


def test_usage_errors_return_a_status_instead_of_exiting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2
    assert main(["no-such-command"]) == 2
    assert main(["list", "--domain", "astrology"]) == 2
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
