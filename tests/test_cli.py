"""The ``prism-tools`` command line and the scripted demo behind ``prism-tools demo``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from prism_tools import BLOCKED_REASONS, ToolExecutionContext, __version__
from prism_tools.cli import find_checkout, main
from prism_tools.demo import DEMO_SECRET, run_demo
from prism_tools.examples import EXCLUSIVE_TOOL, PROGRESS_TOOL, example_tools
from prism_tools.formats import load_catalog
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


# --- check, search, export, bench -------------------------------------------------------------

CATALOGS = Path(__file__).resolve().parent / "data" / "catalogs"


def run_cli_both(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "name",
    [
        "openai_chat.json",
        "openai_responses.json",
        "anthropic.json",
        "gemini.json",
        "mcp.json",
        "plain.json",
        "plain.jsonl",
    ],
)
def test_check_passes_every_sample_format(capsys: pytest.CaptureFixture[str], name: str) -> None:
    status, out, err = run_cli_both(capsys, "check", str(CATALOGS / name))
    assert (status, err) == (0, "")
    assert out.splitlines()[-1] == "3 schema(s) passed the guards; ok"


def test_check_lists_every_bad_entry_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_cli_both(capsys, "check", str(CATALOGS / "malformed.json"))
    assert status == 1
    assert err == ""
    lines = out.splitlines()
    assert lines[0].endswith("1 tools (plain)")
    assert [line.split(":")[0].strip() for line in lines[1:-1]] == [
        "entry 1",
        "entry 2 ('bad_params')",
        "entry 3",
        "entry 4 ('two_schemas')",
        "entry 5",
    ]
    assert lines[-1] == "1 schema(s) passed the guards; 5 problem(s)"


def hostile_catalog(tmp_path: Path) -> Path:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(80):
        deep = {"type": "object", "properties": {"x": deep}}
    entries = [
        {"name": "fine", "parameters": {"type": "object"}},
        {"name": "remote", "parameters": {"$ref": "https://example.com/s.json"}},
        {"name": "fine", "parameters": {"type": "object"}},
        {"name": "deep", "parameters": deep},
        {"name": "no_schema"},
    ]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def test_check_reports_refused_schemas_and_duplicates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = hostile_catalog(tmp_path)
    status, out, _ = run_cli_both(capsys, "check", str(path))
    assert status == 1
    assert "entry 1 ('remote'): " in out
    assert "entry 2 ('fine'): duplicate tool name 'fine' (first at entry 0)" in out
    assert "entry 3 ('deep'): " in out
    assert "1 tool(s) have no parameters schema" in out

    status, out, _ = run_cli_both(capsys, "check", "--json", "--require-schema", str(path))
    assert status == 1
    data = json.loads(out)
    assert data["ok"] is False
    assert data["format"] == "plain"
    assert [(p["index"], p["kind"]) for p in data["problems"]] == [
        (1, "refused_schema"),
        (2, "duplicate_name"),
        (3, "refused_schema"),
        (4, "missing_schema"),
    ]
    assert all(p["reason"] for p in data["problems"])


def test_check_of_the_built_in_catalog_passes(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli_both(capsys, "check", "--json", "@examples")
    data = json.loads(out)
    assert status == 0
    assert data["ok"] is True
    assert data["tools"] == len(example_tools())


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "cannot read"),
        (b"{not json", "invalid JSON"),
        (b"\xff\xfe\x00garbage", "catalog"),
        (b"[" * 100_000, "catalog"),
        (b"42", "catalog"),
    ],
)
@pytest.mark.parametrize("command", ["check", "search", "export"])
def test_unreadable_catalogs_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: str,
    content: bytes | None,
    fragment: str,
) -> None:
    path = tmp_path / "catalog.json"
    if content is not None:
        path.write_bytes(content)
    argv = [command, str(path)] + (["weather"] if command == "search" else [])
    status, out, err = run_cli_both(capsys, *argv)
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"prism-tools {command}: ")
    assert "Traceback" not in err


def test_search_ranks_with_scores_and_matched_words(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli_both(capsys, "search", "@examples", "weather forecast", "-k", "3")
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[:2] == ["1.", "get_weather_forecast"]
    assert "[weather, forecast]" in lines[0]

    status, out, _ = run_cli_both(capsys, "search", "--json", "@examples", "weather forecast")
    hits = json.loads(out)["hits"]
    assert status == 0
    assert len(hits) == 5
    assert hits[0]["name"] == "get_weather_forecast"
    assert hits[0]["matched"] == ["weather", "forecast"]
    scores = [hit["score"] for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_json_output_shows_arguments_that_are_not_utf8_as_escapes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Python keeps argv bytes that are not UTF-8 as lone surrogates, which JSON cannot carry.
    status, out, err = run_cli_both(capsys, "search", "--json", "@examples", "weather\udcff")
    assert (status, err) == (0, "")
    assert json.loads(out)["query"] == "weather\\xff"
    catalog = tmp_path / "tools.json"
    catalog.write_text(json.dumps([{"name": "a", "parameters": {"type": "object"}}]))
    odd = tmp_path / "tools\udcff.json"
    catalog.rename(odd)
    status, out, err = run_cli_both(capsys, "check", "--json", str(odd))
    assert (status, err) == (0, "")
    assert json.loads(out)["catalog"] == str(tmp_path / "tools\\xff.json")


def test_search_of_a_file_catalog_and_bad_k(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli_both(capsys, "search", str(CATALOGS / "mcp.json"), "docs")
    assert status == 0
    assert "search_docs" in out
    status, _, err = run_cli_both(capsys, "search", "@examples", "q", "-k", "0")
    assert status == 2
    assert err.startswith("prism-tools search: -k must be between 1 and ")
    status, out, _ = run_cli_both(capsys, "search", "@examples", "zzqqxx")
    assert (status, out) == (0, f"no tool matches 'zzqqxx' among {len(example_tools())} tools\n")


@pytest.mark.parametrize("shape", ["openai_chat", "openai_responses", "anthropic", "gemini", "mcp"])
def test_export_round_trips_through_load_catalog(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, shape: str
) -> None:
    status, out, _ = run_cli_both(capsys, "export", str(CATALOGS / "plain.json"), "-f", shape)
    assert status == 0
    path = tmp_path / f"{shape}.json"
    path.write_text(out, encoding="utf-8")
    again = load_catalog(path)
    original = load_catalog(CATALOGS / "plain.json")
    assert [(t.name, t.description, t.parameters) for t in again] == [
        (t.name, t.description, t.parameters) for t in original
    ]


def test_catalog_text_reaches_the_terminal_escaped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A catalog must not clear the screen, retitle the window or fake a line of output.
    hostile = [
        {"name": "weather\x1b[2J\nprism-tools: all clear", "description": "weather \x1b]0;x\x07"},
        {"name": "weather\u202eevil", "description": "weather"},
    ]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(hostile))
    status, out, err = run_cli_both(capsys, "search", str(path), "weather")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 2
    assert "weather\\x1b[2J\\nprism-tools: all clear" in out
    assert "weather \\x1b]0;x\\x07" in out
    assert "weather\\u202eevil" in out
    assert all(char.isprintable() for char in out.replace("\n", ""))

    rpc = tmp_path / "error.json"
    rpc.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"message": "a\x1b[31mb"}}))
    status, out, err = run_cli_both(capsys, "check", str(rpc))
    assert (status, out) == (2, "")
    assert err == "prism-tools check: catalog: JSON-RPC error response: a\\x1b[31mb\n"


def test_export_writes_integers_beyond_64_bits_with_every_digit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wide = 10**30 + 7
    path = tmp_path / "tools.json"
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": wide}}}
    path.write_text(json.dumps([{"name": "a", "parameters": schema}]))
    for shape in ("plain", "openai_chat", "anthropic", "gemini", "mcp"):
        status, out, err = run_cli_both(capsys, "export", str(path), "-f", shape)
        assert (status, err) == (0, "")
        assert str(wide) in out
        assert load_catalog(out.encode())[0].parameters == schema


def test_export_strict_refusal_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_cli_both(capsys, "export", "@examples", "-f", "openai_chat", "--strict")
    assert status == 2
    assert out == ""
    assert "cannot make the schema strict at /" in err
    assert err.count("\n") == 1


def test_bench_outside_a_checkout_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli_both(capsys, "bench", "--quick")
    assert status == 2
    assert out == ""
    assert err.startswith("prism-tools bench: bench runs the suites of a source checkout")
    assert err.count("\n") == 1


def test_bench_hands_its_arguments_to_the_report_script(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    status, out, _ = run_cli_both(capsys, "bench", "--help")
    assert status == 0
    assert "--quick" in out
    assert "--from-results" in out


@pytest.mark.parametrize("command", ["check", "search", "export", "demo", "list"])
def test_every_command_has_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    assert main([command, "--help"]) == 0
    assert f"prism-tools {command}" in capsys.readouterr().out


def test_find_checkout_walks_up_from_inside_a_checkout(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    assert find_checkout(root / "tests" / "data") == root
    assert find_checkout(tmp_path) is None


def test_check_shows_progress_only_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["check", "@examples"]) == 0
    progress = terminal.getvalue()
    total = len(example_tools())
    assert progress.startswith("\rchecked 100/")
    assert progress.endswith(f"\rchecked {total}/{total} tools\n")

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert main(["check", "@examples"]) == 0
    assert sys.stderr.getvalue() == ""  # type: ignore[attr-defined]
    capsys.readouterr()


def test_export_strict_is_refused_for_formats_without_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run_cli_both(capsys, "export", "@examples", "-f", "anthropic", "--strict")
    assert (status, out) == (2, "")
    assert err == "prism-tools export: strict mode applies to the OpenAI formats, not 'anthropic'\n"


def test_terminal_text_keeps_spaces_and_joiners_and_escapes_the_rest() -> None:
    from prism_tools.cli import _terminal

    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # with a zero-width non-joiner
    for readable in ("10\xa0km", "東京\u3000タワー", "👩\u200d💻 dev", persian, "été"):
        assert _terminal(readable) == readable
    assert _terminal("a\u202eb\x1bc\u2028d") == "a\\u202eb\\x1bc\\u2028d"


# --- output that cannot be written as it is ---------------------------------------------------


def run_command(*argv: str, env: dict[str, str] | None = None, **streams: Any) -> Any:
    """``prism-tools`` in a child process, with its own standard streams (piped unless given)."""
    import os

    return subprocess.run(
        [sys.executable, "-m", "prism_tools", *argv],
        stdout=streams.get("stdout", subprocess.PIPE),
        stderr=streams.get("stderr", subprocess.PIPE),
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    "argv",
    [("demo",), ("demo", "--json"), ("search", "@examples", "zz café")],
    ids=["demo", "demo-json", "search"],
)
def test_a_terminal_that_cannot_encode_the_text_gets_escapes(argv: tuple[str, ...]) -> None:
    completed = run_command(*argv, env={"PYTHONIOENCODING": "ascii"})
    assert completed.returncode == 0, completed.stderr
    assert b"Traceback" not in completed.stderr
    assert completed.stdout.isascii()
    assert completed.stdout  # the output itself still came


def test_a_catalog_file_name_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    name = tmp_path / "odd\x1b[2Jname.json"
    name.write_text(json.dumps([{"name": "a", "parameters": {"type": "object"}}]))
    completed = run_command("check", str(name), env={"PYTHONIOENCODING": "utf-8:strict"})
    assert completed.returncode == 0, completed.stderr
    assert b"\x1b" not in completed.stdout
    assert b"odd\\x1b[2Jname.json" in completed.stdout


def test_a_reader_that_goes_away_stops_the_output_quietly(tmp_path: Path) -> None:
    # As in `prism-tools check big.json | head -1`: the pipe closes after the first line. The
    # report (a line for each of 20,000 refused schemas, about 4 MiB) is far beyond what a pipe
    # buffers (64 KiB by default, 1 MiB at most), so the command is still writing when the reader
    # goes away, whatever the scheduling. A short output could all fit in the pipe first.
    catalog = tmp_path / "big.json"
    refused = {"type": "object", "properties": {"__proto__": {}}}
    entries = [
        {"name": f"tool_{index}_{'n' * 100}", "parameters": refused} for index in range(20000)
    ]
    catalog.write_text(json.dumps(entries))
    child = subprocess.Popen(
        [sys.executable, "-m", "prism_tools", "check", str(catalog)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.readline()
    child.stdout.close()
    status = child.wait(timeout=120)
    err = child.stderr.read()
    child.stderr.close()
    assert status == 141
    assert err == b""


def test_output_that_cannot_be_written_is_one_line_and_exit_2() -> None:
    with open("/dev/full", "wb") as full:
        completed = run_command("export", "@examples", stdout=full, stderr=subprocess.PIPE)
    assert completed.returncode == 2
    assert completed.stderr.count(b"\n") == 1
    assert completed.stderr.startswith(b"prism-tools export: cannot write output: ")


def test_a_closed_standard_output_is_one_line_and_exit_2() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.stdout = None; from prism_tools.cli import main; "
            "raise SystemExit(main(['version']))",
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stderr == b"prism-tools: standard output is closed\n"


@pytest.mark.parametrize(
    "argv",
    [("check",), ("list", "--domain", "astrology"), ("search", "@examples", "x", "-k", "many")],
)
def test_a_usage_error_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    status, out, err = run_cli_both(capsys, *argv)
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"prism-tools {argv[0]}: ")


def test_an_endless_or_nameless_catalog_is_refused_unread(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = run_cli_both(capsys, "check", "/dev/zero")
    assert status == 2
    assert err == "prism-tools check: catalog: cannot read '/dev/zero': larger than 64 MiB\n"
    status, _, err = run_cli_both(capsys, "check", "")
    assert status == 2
    assert err == "prism-tools check: catalog: cannot read '': no file name given\n"


def test_check_finds_duplicates_inside_one_gemini_tool_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    declaration = {"name": "get_weather", "parameters": {"type": "object"}}
    path = tmp_path / "gemini.json"
    path.write_text(json.dumps([{"function_declarations": [declaration, declaration]}]))
    status, out, _ = run_cli_both(capsys, "check", str(path))
    assert status == 1
    assert "duplicate tool name 'get_weather'" in out


def ascii_stdout(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A standard output that can encode ASCII only (an ASCII-only locale), as the host has it."""
    import io

    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    return stream


def written(stream: Any) -> str:
    stream.flush()
    return str(stream.buffer.getvalue().decode("ascii"))


def test_main_leaves_the_hosts_stream_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = ascii_stdout(monkeypatch)
    assert main(["search", "@examples", "zz café"]) == 0
    assert "zz caf\\xe9" in written(stream)
    assert stream.errors == "strict"  # the host's own stream is not reconfigured


def test_json_output_stays_json_on_a_stream_that_cannot_encode_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    names = ["café", "snow_\u2603", "smile_\U0001f600"]
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps([{"name": name} for name in names]), encoding="utf-8")
    stream = ascii_stdout(monkeypatch)
    assert main(["export", str(path)]) == 0
    assert [entry["name"] for entry in json.loads(written(stream))] == names


def test_an_error_that_is_not_about_the_output_is_not_reported_as_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def gone() -> Path:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(Path, "cwd", staticmethod(gone))
    status, _, err = run_cli_both(capsys, "bench", "--quick")
    assert status == 2
    assert err == "prism-tools bench: No such file or directory\n"
    print("still here")  # the host's standard output still works
    assert capsys.readouterr().out == "still here\n"


def test_a_closed_standard_error_does_not_stop_the_command() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "prism_tools", "version"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: __import__("os").close(2),
    )
    assert completed.returncode == 0
    assert completed.stdout == f"prism-tools {__version__}\n".encode()


def test_usage_errors_escape_what_they_quote_and_name_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, _, err = run_cli_both(capsys, "check", "a.json", "b.json")
    assert status == 2
    assert err.startswith("prism-tools check: unrecognized arguments: b.json")
    status, _, err = run_cli_both(capsys, "list", "--domain", "\x1b]0;pwned\x07")
    assert status == 2
    assert err.count("\n") == 1
    assert "\x1b" not in err
    assert "\\x1b]0;pwned\\x07" in err


def test_a_large_output_cut_short_by_its_reader_is_a_closed_pipe(tmp_path: Path) -> None:
    # One large write the pipe takes only part of used to come back short, with no error: the
    # output was cut and the command still exited 0.
    path = tmp_path / "big.json"
    tool_entry = {"name": "t", "description": "d" * 2000, "parameters": {"type": "object"}}
    path.write_text(json.dumps([{**tool_entry, "name": f"t{n}"} for n in range(3000)]))
    child = subprocess.Popen(
        [sys.executable, "-m", "prism_tools", "export", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.read(1000)
    child.stdout.close()
    assert child.wait(timeout=120) == 141
    assert child.stderr.read() == b""
    child.stderr.close()


def test_hosts_calling_main_from_several_threads_keep_their_streams() -> None:
    import threading

    before = sys.stdout, sys.stderr
    errors: list[BaseException] = []

    def call() -> None:
        try:
            for _ in range(20):
                main(["--help"])
                main(["check"])
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert (sys.stdout, sys.stderr) == before


async def test_the_demo_runs_from_inside_a_running_event_loop(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # An async host (or a notebook cell) calling the command in-process.
    status, out = run_cli(capsys, "demo")
    assert status == 0
    assert "ended as scripted" in out


def test_the_demo_leaves_the_hosts_current_event_loop_in_place(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import asyncio

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        assert run_cli(capsys, "demo")[0] == 0
        assert asyncio.get_event_loop() is loop
        assert not loop.is_closed()
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_a_catalog_of_too_many_entries_is_refused_before_it_costs_memory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "zeros.json"
    path.write_text("[" + ",".join(["0"] * 200_000) + "]")
    status, out, err = run_cli_both(capsys, "check", str(path))
    assert status == 2
    assert out == ""
    assert "at most 100,000 are read" in err


def test_an_interrupt_anywhere_is_one_line_and_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import prism_tools.cli as cli

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)  # during parsing
    assert run_cli_both(capsys, "list") == (130, "", "prism-tools list: interrupted\n")
    monkeypatch.setattr(cli, "_bench", interrupted)
    assert run_cli_both(capsys, "bench") == (130, "", "prism-tools bench: interrupted\n")


def test_a_failing_bench_report_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import prism_tools.cli as cli

    def broken(args: Any) -> int:
        raise ValueError("results/meta.json is not a results directory")

    monkeypatch.setattr(cli, "_bench", broken)
    status, _, err = run_cli_both(capsys, "bench", "--from-results", "results")
    assert status == 2
    assert err == "prism-tools bench: ValueError: results/meta.json is not a results directory\n"
