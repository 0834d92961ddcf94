"""The runnable examples in the docs and README run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.DOTALL)


def test_dispatch_doc_example_runs() -> None:
    blocks = python_blocks(ROOT / "docs" / "dispatch.md")
    runnable = [block for block in blocks if "asyncio.run(" in block]
    assert runnable, "docs/dispatch.md lost its runnable example"
    for block in runnable:
        exec(compile(block, "docs/dispatch.md", "exec"), {"__name__": "__docs__"})


def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = [block for block in python_blocks(ROOT / "README.md") if "asyncio.run(" in block]
    assert len(blocks) == 1
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out
    assert "{'city': 'Paris', 'celsius': 21} ['started', 'started', 'finished']" in printed
    assert "tool_execution_progress" in printed


def test_search_doc_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks(ROOT / "docs" / "search.md")
    assert blocks, "docs/search.md lost its example"
    exec(compile(blocks[0], "docs/search.md", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("get_weather ")
    assert printed[0].endswith("('forecast',)")
    assert printed[-1] == "['send_email', 'search_tools']"


def test_runtime_doc_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = [b for b in python_blocks(ROOT / "docs" / "runtime.md") if "asyncio.run(" in b]
    assert len(blocks) == 1, "docs/runtime.md lost its runnable example"
    exec(compile(blocks[0], "docs/runtime.md", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "succeeded stop It is 21 °C in Paris.",
        "['user', 'assistant', 'tool', 'assistant']",
    ]


def test_readme_first_tool_builds_the_schema_it_shows() -> None:
    [block] = [block for block in python_blocks(ROOT / "README.md") if "@tool" in block]
    namespace: dict[str, object] = {"__name__": "__docs__"}
    exec(compile(block, "README.md", "exec"), namespace)
    from prism_tools import ToolDefinition, ToolRegistry

    weather, registry = namespace["get_weather"], namespace["registry"]
    assert isinstance(weather, ToolDefinition)
    assert isinstance(registry, ToolRegistry)
    assert registry.get("get_weather") is weather
    assert weather.description == "Current weather for a city."
    schema = weather.parameters
    assert schema is not None
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]  # type: ignore[index]


def test_readme_catalog_commands_run_as_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shlex

    from prism_tools.cli import main

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Check the catalog you already have") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    outputs = []
    for line in block.group(1).strip().splitlines():
        words = shlex.split(line, comments=True)
        assert words[0] == "prism-tools", line
        target = None
        if ">" in words:
            target = words[words.index(">") + 1]
            words = words[: words.index(">")]
        assert main(words[1:]) == 0, line
        out = capsys.readouterr().out
        if target is not None:
            (tmp_path / target).write_text(out, encoding="utf-8")
        outputs.append(out)
    assert outputs[1].splitlines()[-1].endswith("; ok")
    hits = outputs[2].splitlines()
    assert len(hits) == 3
    assert all("[rain" in hit for hit in hits), hits


def printed_by(doc: str, marker: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Runs the one Python block of ``doc`` holding ``marker``; returns the lines it printed."""
    [block] = [b for b in python_blocks(ROOT / doc) if marker in b]
    exec(compile(block, doc, "exec"), {"__name__": "__docs__"})
    return capsys.readouterr().out.splitlines()


def test_function_tools_doc_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert printed_by("docs/function-tools.md", "asyncio.run(", capsys) == [
        "['city', 'days', 'unit']",
        "Forecast for Paris, 3 days, Unit.CELSIUS",
        'Invalid arguments for tool get_forecast: /days: value is not of type "integer"',
    ]


def test_formats_doc_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    # The MCP tool ran; strict mode closed the schema; the Anthropic payload kept it as loaded.
    assert printed_by("docs/formats.md", "asyncio.run(", capsys) == [
        "{'city': 'Paris', 'celsius': 21}",
        "False",
        "True",
    ]


def test_providers_doc_streaming_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert printed_by("docs/providers.md", "assemble_response", capsys) == [
        "{'city': 'Paris'} tool_calls"
    ]


def test_dispatch_doc_guardrail_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    # One call allowed, one blocked at tool_input, one tripped at tool_output.
    assert printed_by("docs/dispatch.md", "guardrail(", capsys) == [
        "{'sent': 'a@example.com'}",
        "Tool call blocked by guardrail "
        "{'guardrail': 'internal_mail_only', 'reason': 'external recipient x@evil.test'}",
        "ERR_PRISM_GUARDRAIL_BLOCKED no_card_numbers card number in tool output",
        "[('internal_mail_only', 'allow'), ('no_card_numbers', 'allow'), "
        "('internal_mail_only', 'block'), ('internal_mail_only', 'allow'), "
        "('no_card_numbers', 'tripwire')]",
    ]
