"""Run every benchmark suite and write ``docs/performance.md`` from the results.

Usage, from the repository root in a virtualenv holding the release build and the peers
(``make bench`` makes one and runs this)::

    python benches/report.py                    # every suite, then docs/performance.md
    python benches/report.py --quick            # a few rounds per row: a smoke test
    python benches/report.py --suite dispatch --suite search --results /tmp/bench
    python benches/report.py --from-results /tmp/bench   # re-render, run nothing

Each suite runs in a subprocess of this interpreter from ``benches/`` (so ``import prism_tools``
finds the installed build, never an editable tree) with pytest-benchmark's ``--benchmark-json``
into the results directory; ``search`` also runs ``search_quality.py --json``. Before running it
checks that the installed core is a release build (see ``release_problems``) and stops with exit
code 2 otherwise, unless ``--allow-debug``. The results directory also gets ``meta.json`` (machine,
versions, commands, timings) and each suite's log and JUnit XML (for skip reasons).

The page is rendered only from those files: the ratio code of each bench module is imported and
reused (``per_call_micros``/``best_micros``/``best_per_run``/... and ``target_ratios``), the prose
lives in the templates below with every number filled in from the run. ``main(argv)`` is the entry
point (``prism-tools bench`` loads this file and calls it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

BENCHES = Path(__file__).resolve().parent
REPO_ROOT = BENCHES.parent
DEFAULT_OUT = REPO_ROOT / "docs" / "performance.md"
COMMAND = "python benches/report.py"

PYTEST_OPTIONS = (
    "--benchmark-only",
    "--benchmark-group-by=group",
    "--benchmark-columns=min,median,mean,rounds",
    "-p",
    "no:cacheprovider",
    "-q",
)
QUICK_OPTIONS = ("-p", "report_quick", "--benchmark-max-time=0.05", "--benchmark-min-rounds=3")

PEERS = (
    "openai-agents",
    "openai",
    "pydantic-ai-slim",
    "pydantic",
    "pydantic-core",
    "langchain-core",
    "langsmith",
    "jsonschema",
    "jsonschema-rs",
    "fastjsonschema",
    "rank-bm25",
    "bm25s",
    "numpy",
    "snowballstemmer",
    "psycopg",
)
HARNESS = ("pytest", "pytest-benchmark", "pytest-asyncio", "orjson")


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    issue: int
    file: str
    select: str | None = None
    """``-k`` expression when the suite is part of a bench file."""
    quality: bool = False
    """Also run ``search_quality.py``."""


SUITES = (
    Suite("dispatch", "Dispatch", 2, "bench_dispatch.py", "test_noop_ or test_audit_"),
    Suite("validation", "JSON Schema validation", 3, "bench_validation.py"),
    Suite("search", "Tool search", 4, "bench_search.py", quality=True),
    Suite("filtering", "Filtering", 2, "bench_dispatch.py", "test_filter_"),
    Suite("registry", "Registry lookup", 2, "bench_dispatch.py", "test_get_"),
    Suite("turn-prep", "Turn preparation at 1,024 tools", 6, "bench_turn_prep.py"),
    Suite("runtime", "Agent runtime", 5, "bench_runtime.py"),
    Suite("durability", "Durability", 7, "bench_durability.py"),
)
SUITE_NAMES = tuple(suite.name for suite in SUITES)


# ------------------------------------------------------------------------ release-build check


def elf_sections(path: Path) -> list[str] | None:
    """Section names of an ELF file; None when ``path`` is not ELF (macOS, Windows)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        return None
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        (shoff,) = struct.unpack_from(order + "Q", data, 0x28)
        entsize, count, strndx = struct.unpack_from(order + "HHH", data, 0x3A)
        name_at, offset_at, offset_fmt = 0, 0x18, "Q"
    else:
        (shoff,) = struct.unpack_from(order + "I", data, 0x20)
        entsize, count, strndx = struct.unpack_from(order + "HHH", data, 0x2E)
        name_at, offset_at, offset_fmt = 0, 0x10, "I"
    if shoff == 0 or count == 0:
        return []
    (strtab,) = struct.unpack_from(order + offset_fmt, data, shoff + strndx * entsize + offset_at)
    names = []
    for index in range(count):
        (name,) = struct.unpack_from(order + "I", data, shoff + index * entsize + name_at)
        start = strtab + name
        names.append(data[start : data.index(b"\0", start)].decode("ascii", "replace"))
    return names


def release_problems(core: Path, *, editable: bool) -> list[str]:
    """Why the core at ``core`` is not the release build a benchmark must measure (empty: it is).

    The core carries no build-profile attribute, so three signs are checked: an editable install
    (pip's ``direct_url.json``); a core inside a source tree (a ``Cargo.toml`` in a parent, where
    ``maturin develop`` puts its debug build); and, for ELF files, debug or symbol sections, which
    the release profile strips (``strip = true`` in ``Cargo.toml``) and a dev build keeps."""
    problems = []
    if editable:
        problems.append("prism-tools is an editable install")
    for parent in core.resolve().parents:
        if parent.name in ("site-packages", "dist-packages"):
            break  # an installed copy, even when the venv itself sits inside a checkout
        if (parent / "Cargo.toml").is_file():
            problems.append(f"the core is inside the source tree {parent}")
            break
    sections = elf_sections(core) if core.is_file() else None
    unstripped = sorted({".symtab", ".debug_info"} & set(sections or ()))
    if unstripped:
        problems.append(
            f"the core has {', '.join(unstripped)} (the release profile strips them): "
            "a dev or profiling build"
        )
    return problems


# --------------------------------------------------------------------------------- environment


def probe() -> dict[str, Any]:
    """What the suites will import, from this interpreter: prism_tools, its core, its install
    record, every peer's and the harness' versions. Run from ``benches/`` (``--probe``)."""
    import prism_tools
    from prism_tools import _core

    direct_url: dict[str, Any] = {}
    try:
        text = importlib.metadata.distribution("prism-tools").read_text("direct_url.json")
        direct_url = json.loads(text) if text else {}
    except importlib.metadata.PackageNotFoundError:
        pass
    versions: dict[str, str | None] = {}
    for dist in (*PEERS, *HARNESS):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "prism_tools": prism_tools.__version__,
        "package": str(Path(prism_tools.__file__).parent),
        "core": str(Path(_core.__file__)),
        "core_bytes": Path(_core.__file__).stat().st_size,
        "installed_from": direct_url.get("url"),
        "editable": bool(direct_url.get("dir_info", {}).get("editable", False)),
        "versions": versions,
    }


def probe_subprocess(python: str) -> dict[str, Any]:
    done = subprocess.run(
        [python, str(BENCHES / "report.py"), "--probe"],
        cwd=BENCHES,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cannot import prism_tools from {BENCHES}: {last}")
    return dict(json.loads(done.stdout))


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_bytes": ram,
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
    }


def git_commit(root: Path) -> str | None:
    """HEAD's commit of the checkout at ``root``, read from ``.git`` without running git."""
    git = root / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: <path>"
            git = (root / git.read_text(encoding="utf-8").split(":", 1)[1].strip()).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        for base in (git, common):
            if (base / ref).is_file():
                return (base / ref).read_text(encoding="utf-8").strip()
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(encoding="utf-8").splitlines():
                if line.endswith(" " + ref):
                    return line.split(" ", 1)[0]
    except OSError:
        return None
    return None


def rustc_version() -> str | None:
    rustc = shutil.which("rustc")
    if rustc is None:
        return None
    done = subprocess.run([rustc, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def load_average() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (OSError, AttributeError):
        return None


# ------------------------------------------------------------------------------------- running


def suite_commands(suite: Suite, results: Path, *, quick: bool, repeat: int = 1) -> list[list[str]]:
    """The commands that run ``suite`` from ``benches/``, writing into ``results``: the
    benchmark ``repeat`` times (``NAME.json``, then ``NAME.2.json``, ...), the quality script
    once."""
    commands = []
    for run in range(1, repeat + 1):
        stem = suite.name if run == 1 else f"{suite.name}.{run}"
        pytest_cmd = [
            sys.executable,
            "-m",
            "pytest",
            suite.file,
            *PYTEST_OPTIONS,
            f"--benchmark-json={results / (stem + '.json')}",
            f"--junitxml={results / (stem + '.xml')}",
        ]
        if suite.select:
            pytest_cmd += ["-k", suite.select]
        if quick:
            pytest_cmd += QUICK_OPTIONS
        commands.append(pytest_cmd)
    if suite.quality:
        commands.append(
            [sys.executable, "search_quality.py", "--json", str(results / "quality.json")]
        )
    return commands


def shown(command: Sequence[str], results: Path) -> str:
    """``command`` as a reader would type it in ``benches/``: ``python``, results as ``RESULTS``."""
    words = ["python", *command[1:]]
    return shlex.join(words).replace(str(results), "RESULTS")


def run_suites(
    suites: Sequence[Suite],
    results: Path,
    *,
    quick: bool,
    log: Callable[[str], None],
    repeat: int = 1,
) -> dict[str, Any]:
    """Run each suite's commands in order; return their status, duration and commands."""
    env = dict(os.environ)
    # pytest-benchmark records commit info with `git describe --dirty`; never let that take
    # the index lock of a checkout someone may be committing in.
    env["GIT_OPTIONAL_LOCKS"] = "0"
    started = time.monotonic()
    status: dict[str, Any] = {}
    for number, suite in enumerate(suites, 1):
        suite_started = time.monotonic()
        log(f"[{number}/{len(suites)}] {suite.name}: running ({elapsed(started)} elapsed)")
        outcome = "ok"
        codes = []
        commands = suite_commands(suite, results, quick=quick, repeat=repeat)
        with (results / f"{suite.name}.log").open("w", encoding="utf-8") as out:
            for command in commands:
                out.write("$ " + shlex.join(command) + "\n")
                out.flush()
                process = subprocess.Popen(
                    command, cwd=BENCHES, env=env, stdout=out, stderr=subprocess.STDOUT
                )
                while True:
                    try:
                        code = process.wait(timeout=30)
                        break
                    except subprocess.TimeoutExpired:
                        log(
                            f"[{number}/{len(suites)}] {suite.name}: still running "
                            f"({elapsed(suite_started)} in this suite, {elapsed(started)} in all)"
                        )
                codes.append(code)
                if code != 0:
                    outcome = "failed"
        seconds = time.monotonic() - suite_started
        log(
            f"[{number}/{len(suites)}] {suite.name}: {outcome} in {elapsed(suite_started)} "
            f"({elapsed(started)} elapsed)"
            + ("" if outcome == "ok" else f"; see {results / (suite.name + '.log')}")
        )
        status[suite.name] = {
            "status": outcome,
            "exit_codes": codes,
            "seconds": round(seconds, 1),
            "commands": [shown(command, results) for command in commands],
        }
    return status


def elapsed(since: float) -> str:
    seconds = int(time.monotonic() - since)
    return f"{seconds // 60}m{seconds % 60:02d}s"


# ------------------------------------------------------------------------------------- loading


@dataclass
class Results:
    """Everything a page is rendered from: ``meta.json`` and each suite's files."""

    meta: dict[str, Any]
    reports: dict[str, dict[str, Any]]
    """Suite name -> its pytest-benchmark JSON document."""
    skipped: dict[str, dict[str, str]]
    """Suite name -> {row: skip reason} from its JUnit XML."""
    quality: dict[str, Any] | None


def junit_skips(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    skips = {}
    for case in ET.parse(path).iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            reason = skipped.get("message", "").removeprefix("Skipped: ").strip()
            skips[case.get("name", "?")] = reason
    return skips


def lowest_medians(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One pytest-benchmark document from repeated runs of a suite: the first run's document,
    each row replaced by that row's entry with the lowest median over the runs. A neighbour
    that slows one run of a row then no longer decides its number."""
    best: dict[str, dict[str, Any]] = {}
    for run in runs:
        for bench in run.get("benchmarks", []):
            key = bench.get("fullname") or bench["name"]
            kept = best.get(key)
            if kept is None or bench["stats"]["median"] < kept["stats"]["median"]:
                best[key] = bench
    merged = dict(runs[0])
    merged["benchmarks"] = [
        best[bench.get("fullname") or bench["name"]] for bench in runs[0].get("benchmarks", [])
    ]
    return merged


def load_results(directory: Path) -> Results:
    meta_path = directory / "meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    # A reused results directory may hold files of earlier runs: read only this run's suites.
    ran = meta.get("suites", SUITE_NAMES)
    reports, skipped = {}, {}
    for name in (name for name in SUITE_NAMES if name in ran):
        path = directory / f"{name}.json"
        if path.is_file():
            runs = [json.loads(path.read_text(encoding="utf-8"))]
            repeat = 2
            while (directory / f"{name}.{repeat}.json").is_file():
                extra = directory / f"{name}.{repeat}.json"
                runs.append(json.loads(extra.read_text(encoding="utf-8")))
                repeat += 1
            reports[name] = lowest_medians(runs)
        skipped[name] = junit_skips(directory / f"{name}.xml")
    quality_path = directory / "quality.json"
    quality = (
        json.loads(quality_path.read_text(encoding="utf-8"))
        if quality_path.is_file() and "search" in ran
        else None
    )
    return Results(meta, reports, skipped, quality)


def bench_module(name: str) -> ModuleType:
    """A bench module by name; ``benches/`` goes on ``sys.path`` as the suites have it."""
    if str(BENCHES) not in sys.path:
        sys.path.insert(0, str(BENCHES))
    return importlib.import_module(name)


# ---------------------------------------------------------------------------------- formatting


def fmt_us(micros: float | None) -> str:
    """Microseconds with three significant digits."""
    if micros is None:
        return "n/a"
    size = abs(micros)  # a difference of two rows can be negative on a noisy run
    if size >= 10_000:
        return f"{micros / 1000:,.1f} ms"
    if size >= 100:
        return f"{micros:,.0f} µs"
    if size >= 10:
        return f"{micros:.1f} µs"
    if size >= 1:
        return f"{micros:.2f} µs"
    return f"{micros:.3f} µs"


def fmt_x(ratio: float | None) -> str:
    """A ratio with three significant digits, ``x`` suffixed."""
    if ratio is None:
        return "n/a"
    if ratio >= 100:
        return f"{ratio:,.0f}x"
    if ratio >= 10:
        return f"{ratio:.1f}x"
    if ratio >= 1:
        return f"{ratio:.2f}x"
    return f"{ratio:.3g}x"


def fmt_pct(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio * 100:.1f}%"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    """A Markdown table; ``align`` holds one ``l``/``r`` per column (default: first left)."""
    spec = align or "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("| " + " | ".join("---:" if a == "r" else "---" for a in spec) + " |")
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


class Blank(dict[str, str]):
    """Template values: a number the run did not produce reads ``n/a``."""

    def __missing__(self, key: str) -> str:
        return "n/a"


def fill(template: str, values: Mapping[str, str]) -> list[str]:
    return template.strip("\n").format_map(Blank(values)).splitlines()


# ---------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Target:
    issue: int
    suite: str
    text: str
    measured: float | None
    limit: float
    at_most: bool
    shown: Callable[[float | None], str] = fmt_x
    detail: str = ""

    @property
    def verdict(self) -> str:
        if self.measured is None:
            return "not measured"
        met = self.measured <= self.limit if self.at_most else self.measured >= self.limit
        return "met" if met else "not met"


@dataclass(frozen=True)
class Versus:
    """One comparison for the peers table: our row against another row (a peer or a baseline)."""

    suite: str
    ours: str
    other: str
    kind: str
    ours_us: float
    other_us: float


@dataclass
class Section:
    lines: list[str]
    targets: list[Target]
    versus: list[Versus]


NOT_RUN = "Not run in this report."


def finished(
    report: object, lines: list[str], targets: list[Target], versus: list[Versus]
) -> Section:
    """The section, or only its targets (unmeasured) when its suite did not run."""
    if report is None:
        return Section([NOT_RUN], targets, [])
    return Section(lines, targets, versus)


def versus_rows(items: Iterable[Versus]) -> list[list[str]]:
    rows = []
    for item in items:
        ratio = item.ours_us / item.other_us
        reading = f"ours {1 / ratio:.3g}x faster" if ratio < 1 else f"ours {ratio:.3g}x slower"
        rows.append(
            [
                item.suite,
                item.ours,
                f"{item.other} ({item.kind})",
                fmt_us(item.ours_us),
                fmt_us(item.other_us),
                fmt_x(ratio),
                reading,
            ]
        )
    return rows


def labelled_rows(
    best: Mapping[str, float], labels: Sequence[tuple[str, str, str]], reference: str
) -> list[list[str]]:
    """Rows ``(key, label, what)`` found in ``best``, with their time and ratio to ``reference``."""
    base = best.get(reference)
    rows = []
    for key, label, what in labels:
        if key not in best:
            continue
        ratio = fmt_x(best[key] / base) if base else "n/a"
        rows.append([label, what, fmt_us(best[key]), ratio])
    return rows


def not_measured(
    keys: Iterable[str], best: Mapping[str, float], skips: Mapping[str, str]
) -> list[str]:
    """A line naming the expected rows the run has no number for, with pytest's skip reason."""
    missing = []
    for key in keys:
        if key in best:
            continue
        reason = skips.get(key)
        missing.append(f"`{key}` ({reason})" if reason else f"`{key}`")
    if not missing:
        return []
    return ["", "Not measured in this run: " + "; ".join(missing) + "."]


# ---------------------------------------------------------------------------------- dispatch

DISPATCH_ROWS = (
    (
        "test_noop_floor",
        "floor",
        "dict lookup, set membership, `isinstance(args, dict)`, `await tool(args, ctx)`",
    ),
    (
        "test_noop_ours",
        "**ours**",
        "`await dispatch_tool_call(call, registry=..., context=..., filter=...)`",
    ),
    (
        "test_noop_ours_from_json_text",
        "ours, from JSON text",
        "`orjson.loads` of the argument text, `ToolCall(...)`, then dispatch",
    ),
    (
        "test_noop_ours_argument_text",
        "ours, argument text",
        "`ToolCall(..., arguments=json_text)`; dispatch parses it in the Rust core",
    ),
    (
        "test_noop_ours_shared_run_context",
        "ours, shared run context",
        "a context whose `tool_call_id` is not the call's, so dispatch builds one per call",
    ),
    (
        "test_noop_openai_agents",
        "openai-agents",
        "`FunctionTool.on_invoke_tool(ToolContext, json_text)` of a `@function_tool`",
    ),
    (
        "test_noop_pydantic_ai",
        "pydantic-ai",
        "`ToolManager.handle_call(ToolCallPart)`, one-tool `FunctionToolset`",
    ),
    ("test_noop_langchain_core", "langchain-core", "`StructuredTool.ainvoke(args_dict)`"),
    (
        "test_noop_langchain_core_tool_call",
        "langchain-core, tool call",
        '`StructuredTool.ainvoke({"type": "tool_call", ...})`, returns a `ToolMessage`',
    ),
)
AUDIT_ROWS = (
    ("test_audit_off", "plain (no events, no ledger)", ""),
    ("test_audit_events_only", "events only (sync sink)", ""),
    ("test_audit_ledger_only", "ledger only (sync ledger)", ""),
    ("test_audit_events_and_ledger", "**events + ledger (sync sink and ledger)**", ""),
    ("test_audit_events_and_ledger_async", "events + ledger (async sink and ledger)", ""),
)
DISPATCH_PEERS = {
    "test_noop_openai_agents": "openai-agents",
    "test_noop_pydantic_ai": "pydantic-ai",
    "test_noop_langchain_core": "langchain-core",
}

DISPATCH_TEXT = """
What one tool call costs when it goes through `dispatch_tool_call`, next to the least a
hand-written Python dispatcher can do and the dispatch entry points of three other agent
libraries (`benches/bench_dispatch.py`).

Method: each row awaits {calls} calls in a plain `for` loop inside one `loop.run_until_complete`
on an event loop created once per row, so loop start-up is not measured; times below are per
call. Before it is timed, every row checks that the tool really runs (a peer that turned an error
into a return value would otherwise look fast). The call object, the context and the argument
dict are built once outside the loop, for us and for the peers alike; only the rows marked "from
JSON text" and "argument text" build them per call. The dispatch keywords are written out in the
loop, as a host would write them. GC stays on.

### dispatch/no-op tool

A no-op async tool, arguments `{{"city": "Paris", "units": "metric"}}`, a `ToolFilter` with an
allow list set, no events, no ledger.
"""

DISPATCH_NOTES = """
The rows do different amounts of work, which affects the ratios:

- Ours takes arguments already parsed into a dict and checks only that they form a JSON object;
  schema validation is the `validate=` hook, not set here. Ours returns a `ToolResult`.
- openai-agents and pydantic-ai start from the model's argument text, parse it and validate it
  with a pydantic model generated from the function's signature, so the rows that start from text
  are the closer comparison: openai-agents is {oa_vs_text} "ours, from JSON text" and
  {oa_vs_arg} "ours, argument text"; pydantic-ai is {pa_vs_text} "ours, from JSON text".
- langchain-core's `ainvoke` validates with pydantic, sets up its callback manager and run
  config, and runs the coroutine in a new asyncio task, even with no callbacks and tracing off.
- The floor builds no result object and checks only what it is told to check.

Where our time goes: building the `ToolResult`; creating the coroutine of a function with many
keyword parameters; one crossing into the Rust core for lookup, filter and the argument-shape
check; and a dozen `is not None` tests for optional features (limits, middleware, guardrails,
identity, trust, permission, validate, before_execute) that run on every call. Dispatch hands the
tool the caller's context only when that context's `tool_call_id` is the call's, no identity
override is given and its `progress` is the default; otherwise it builds a new
`ToolExecutionContext` and a progress closure per call: the {shared_extra} between "ours" and
"ours, shared run context".

### dispatch/events+ledger

The same call with `emit=` set to a sink that discards and `ledger=` set to an object whose
`append_tool_call` discards. Each call makes two events and two rows (started and finished).
"""

AUDIT_NOTES = """
Where the audit time goes: every event is a many-field `AgentEvent` and every row a 20-field
`ToolCallRecord`, two of each per call; with any audit on, dispatch also builds the per-call
context and progress closure, plus the audit object, two row ids and a second timestamp.
"""


def dispatch_section(results: Results) -> Section:
    module = bench_module("bench_dispatch")
    report = results.reports.get("dispatch")
    best = module.per_call_micros([report] if report else [])
    ratios = module.target_ratios(best)
    skips = results.skipped.get("dispatch", {})
    lines = fill(DISPATCH_TEXT, {"calls": f"{module.CALLS:,}"})
    lines += [
        "",
        *table(
            ["row", "what it calls", "median per call", "ratio to floor"],
            labelled_rows(best, DISPATCH_ROWS, "test_noop_floor"),
            "llrr",
        ),
    ]
    lines += not_measured((key for key, _, _ in DISPATCH_ROWS), best, skips)

    def over(top: str, bottom: str) -> str:
        return fmt_x(best[top] / best[bottom]) if top in best and bottom in best else "n/a"

    shared = (
        fmt_us(best["test_noop_ours_shared_run_context"] - best["test_noop_ours"])
        if {"test_noop_ours_shared_run_context", "test_noop_ours"} <= best.keys()
        else "n/a"
    )
    lines += [
        "",
        *fill(
            DISPATCH_NOTES,
            {
                "oa_vs_text": over("test_noop_openai_agents", "test_noop_ours_from_json_text"),
                "oa_vs_arg": over("test_noop_openai_agents", "test_noop_ours_argument_text"),
                "pa_vs_text": over("test_noop_pydantic_ai", "test_noop_ours_from_json_text"),
                "shared_extra": f"{shared} difference" if shared != "n/a" else "difference",
            },
        ),
    ]
    lines += [
        "",
        *table(
            ["row", "median per call", "ratio to plain"],
            [
                [label, time_, ratio]
                for label, _, time_, ratio in labelled_rows(best, AUDIT_ROWS, "test_audit_off")
            ],
        ),
    ]
    lines += not_measured((key for key, _, _ in AUDIT_ROWS), best, skips)
    lines += ["", *fill(AUDIT_NOTES, {})]
    ours = best.get("test_noop_ours")
    floor, audit = best.get("test_noop_floor"), best.get("test_audit_events_and_ledger")
    targets = [
        Target(
            2,
            "dispatch",
            f"ours at most {module.FLOOR_TARGET:g}x the hand-written floor",
            ratios["floor"],
            module.FLOOR_TARGET,
            at_most=True,
            detail=f"{fmt_us(ours)} against {fmt_us(floor)}",
        )
    ]
    for key, limit in module.PEER_TARGETS.items():
        peer = DISPATCH_PEERS[key]
        targets.append(
            Target(
                2,
                "dispatch",
                f"at least {limit:g}x faster than {peer}",
                ratios[key],
                limit,
                at_most=False,
                detail=f"{fmt_us(best.get(key))} against {fmt_us(ours)}",
            )
        )
    targets.append(
        Target(
            2,
            "dispatch",
            f"events and an in-memory ledger at most {module.AUDIT_TARGET:g}x ours without them",
            ratios["audit"],
            module.AUDIT_TARGET,
            at_most=True,
            detail=f"{fmt_us(audit)} against {fmt_us(best.get('test_audit_off'))}",
        )
    )
    versus = [
        Versus("dispatch", "ours", name, "peer", ours, best[key])
        for key, name in DISPATCH_PEERS.items()
        if ours is not None and key in best
    ]
    if ours is not None and floor is not None:
        versus.insert(0, Versus("dispatch", "ours", "hand-written floor", "baseline", ours, floor))
    return finished(report, lines, targets, versus)


LOOKUP_TEXT = """
`benches/bench_dispatch.py`, group `registry.get/1024 tools`: {calls} lookups of registered names
per round among 1,024 tools, the names passed as fresh string objects (as parsed from a model
reply), so `dict.get` cannot win on identity alone. Times are per lookup.
"""
LOOKUP_NOTES = """
`ToolRegistry.get` is a Python method that calls into Rust and then indexes a list; the Rust
call converts its argument, takes a read lock and hashes the name, where `dict.get` uses the
string's cached hash. No target: issue 2 asks for the measurement.
"""
FILTER_TEXT = """
`benches/bench_dispatch.py`, group `filter_tools/1024 tools`: 1,024 tools and a filter that
allows 512 names and denies 16 (8 of the denied names are also allowed); 504 tools pass. Each
row checks it picks the same tools as the comprehension. Times are per call.
"""
FILTER_NOTES = """
On a registry the names are already in Rust and one call returns the permitted slots; on a list,
`filter_tools` checks every item with `isinstance`, builds the list of names and hands it to the
compiled filter. No target: issue 2 asks for the measurement.
"""


def lookup_section(results: Results, name: str) -> Section:
    module = bench_module("bench_dispatch")
    report = results.reports.get(name)
    best = module.per_call_micros([report] if report else [])
    skips = results.skipped.get(name, {})
    rows: tuple[tuple[str, str, str], ...]
    if name == "registry":
        rows = (
            ("test_get_dict", "`dict.get`", ""),
            ("test_get_registry", "**`ToolRegistry.get`**", ""),
        )
        reference, text, notes = "test_get_dict", LOOKUP_TEXT, LOOKUP_NOTES
        pairs = [("test_get_registry", "`ToolRegistry.get`", "test_get_dict", "`dict.get`")]
    else:
        rows = (
            (
                "test_filter_comprehension",
                "`[t for t in tools if t.name in allow and t.name not in deny]` (Python sets)",
                "",
            ),
            ("test_filter_registry", "**`filter_tools(registry, tool_filter)`**", ""),
            ("test_filter_list", "`filter_tools(list_of_tools, tool_filter)`", ""),
        )
        reference, text, notes = "test_filter_comprehension", FILTER_TEXT, FILTER_NOTES
        pairs = [
            ("test_filter_registry", "`filter_tools(registry)`", reference, "comprehension"),
            ("test_filter_list", "`filter_tools(list)`", reference, "comprehension"),
        ]
    lines = fill(text, {"calls": f"{module.CALLS:,}"})
    lines += [
        "",
        *table(
            ["row", "median", "ratio"],
            [[label, t, r] for label, _, t, r in labelled_rows(best, rows, reference)],
        ),
    ]
    lines += not_measured((key for key, _, _ in rows), best, skips)
    lines += ["", *fill(notes, {})]
    versus = [
        Versus(name, ours_label, other_label, "baseline", best[ours], best[other])
        for ours, ours_label, other, other_label in pairs
        if ours in best and other in best
    ]
    return finished(report, lines, [], versus)


# -------------------------------------------------------------------------------- validation

TEXT_ROWS = (
    ("test_text_ours", "**ours**", "`adapter.parse_and_validate(schema, text)`"),
    (
        "test_text_ours_tool_validator",
        "ours, as dispatch calls it",
        "`ToolParameterValidator.parse_checked(tool, text)`",
    ),
    (
        "test_text_ours_compiled_piece",
        "piece: core call only",
        "`CompiledSchema.parse_and_validate`",
    ),
    ("test_text_ours_parse_piece", "piece: our parser only", "`SchemaValidator.parse(text)`"),
    ("test_text_orjson_piece", "piece: `orjson.loads` only", ""),
    ("test_text_jsonschema_rs", "reference", "`orjson.loads` + jsonschema-rs `is_valid`"),
    ("test_text_fastjsonschema", "fastjsonschema", "`orjson.loads` + compiled `validate`"),
    ("test_text_jsonschema", "jsonschema", "`orjson.loads` + `is_valid`"),
)
DICT_ROWS = (
    ("test_dict_ours_validate", "ours", "`adapter.validate(schema, args)`"),
    ("test_dict_ours_found", "ours", "`adapter.found(schema, args)`"),
    ("test_dict_ours_tool_validator", "ours", "tool validator `validator(tool, args)`"),
    ("test_dict_ours_compiled_piece", "piece", "`CompiledSchema.validate(args, 256)`"),
    ("test_dict_jsonschema_rs", "reference", "jsonschema-rs `is_valid`"),
    ("test_dict_fastjsonschema", "fastjsonschema", "compiled `validate`"),
    ("test_dict_jsonschema", "jsonschema", "`is_valid`"),
)
INVALID_ROWS = (
    (
        "test_invalid_ours_tool_validator",
        "**ours, full report**",
        "tool validator: the `ErrorInfo` a model sees, all issues in `details`",
    ),
    ("test_invalid_ours_found", "ours", "`adapter.found`: `(path, keyword, message)` tuples"),
    ("test_invalid_ours_validate", "ours", "`adapter.validate`: `ArgumentIssue`s"),
    ("test_invalid_jsonschema_rs", "reference", "jsonschema-rs `list(iter_errors(args))`"),
    ("test_invalid_jsonschema", "jsonschema", "`list(iter_errors(args))`"),
)
COMPILE_ROWS = (
    ("test_compile_ours", "**ours**", "`SchemaValidator.compile(schema)`"),
    ("test_compile_ours_adapter", "ours through the adapter", "`adapter.compiled(schema)`"),
    ("test_compile_jsonschema_rs", "reference", "`jsonschema_rs.validator_for(schema)`"),
    (
        "test_compile_schema_copy_piece",
        "piece",
        "copying the schema with a new `description` (in every row above)",
    ),
)
CACHE_ROWS = (
    (
        "test_cache_hit_ours",
        "**ours**",
        "`adapter.compiled(schema)`, schema compiled before (found by identity in the core)",
    ),
    (
        "test_cache_hit_core_lru",
        "ours, the core's LRU",
        "`SchemaValidator.compile` of an equal but new dict",
    ),
    (
        "test_cache_small_validation",
        "a small validation",
        "`adapter.validate(schema, small_valid_args)`",
    ),
    (
        "test_cache_validate_through_lookup",
        "**lookup and validation**",
        "`SchemaValidator.validate_with(schema, args)`: found by identity, then validated",
    ),
    (
        "test_cache_validate_compiled",
        "**validation alone**",
        "`CompiledSchema.validate(args)`: the same validation, compiled schema in hand",
    ),
    ("test_cache_noop_floor", "floor", "a Python function that returns its argument"),
)
VALIDATION_PEERS = {
    "jsonschema_rs": "jsonschema-rs",
    "fastjsonschema": "fastjsonschema",
    "jsonschema": "jsonschema",
}

VALIDATION_TEXT = """
What checking a model's tool arguments against the tool's `parameters` schema costs, next to the
validators a host could assemble itself: jsonschema-rs (compiled once with `validator_for`),
fastjsonschema (compiled once) and Python `jsonschema` (a `Draft202012Validator` built once).
Where a case starts from the model's argument text, every peer parses it with `orjson.loads` and
returns the parsed dict when it is valid, so every row ends with the same thing in hand
(`benches/bench_validation.py`).

Method:

- Small schema: five properties (a string with length bounds, an enum, an integer with a range, a
  boolean, a string with a `pattern`), two required, `additionalProperties: false`.
- Large schema: 50 properties, objects nested four deep, local `$ref`s into `$defs`, several
  `pattern`s, no `format`; only keywords that mean the same in drafts 7 and 2020-12, because
  fastjsonschema reads draft 7.
- Invalid case: the small schema and an argument dict with six violations; every row that
  collects issues finds all six.
- Compile case: every call compiles a schema nobody has seen, for us and for the peer alike: each
  call copies the schema with its own `description` (timed as its own "piece" row). Our core
  keeps the default LRU, so in the steady state every compile also evicts the oldest one.
- Before timing, every row is checked: valid input is valid, six issues are six, a compile really
  misses the cache, a cache hit really hits.
- Each row fixes its calls per round from a quick measurement (rounds of about 100 µs), because a
  one-call round carries the timer's own overhead, enough to change a sub-microsecond ratio by a
  third. Times are per call. Rows marked "piece" time one part of our path on its own.
"""
VALIDATION_NOTES = """
Where the time goes, from the piece rows above. Argument text is parsed in Rust into a flat
document (strings borrowed from the text), validated there with no call into Python, and then
turned into Python objects: our parser alone (document and Python objects, no validation) takes
{parse_small} (small) and {parse_large} (large) against {orjson_small} and {orjson_large} for
`orjson.loads`, which builds its objects with direct CPython calls that the core's safe PyO3
code does not make. The adapter's `parse_and_validate` is the core's own method, so the gap
between "ours" and "core call only" is finding the compiled schema by the schema object's
identity and making the issue list: {glue_small} (small). The full report, message, `details`
issues and the `ErrorInfo` itself, is written in Rust; it costs {report_extra} over
`adapter.found`. A compile converts the schema to a `serde_json::Value`, runs the guards (which
also collect the property names whose interned strings later key the built dicts), writes the
canonical bytes for the cache key, builds the `jsonschema` crate validator with the linear-time
`regex` engine and a pattern cache shared by the validator's compiles, and drops the evicted
validator.
"""
CACHE_NOTES = """
A host never calls the lookup on its own: every validating call (`validate_with`, `report_with`,
the tool validator dispatch runs) finds the compiled schema by the schema object's identity,
under a short lock, inside the one crossing that validates; a thread's repeat of the schema it
found last is answered before the lock, with two comparisons. So the target is read as what the
lookup adds to a validation: "lookup and validation" less "validation alone" is {added}, {share}
of the validation, and that gap also carries passing the schema into the call. The lookup as a
call of its own, `adapter.compiled`, is mostly the price of any Python call: {call_share} of a
small validation through the adapter, {call_above_floor} with the floor ({floor}) taken off both
sides, where 2% would be {two_pct}. The two rows that give the gap are about 0.4 µs each and a
few nanoseconds apart, so their difference moves from run to run by about as much as it is; timing
the two in alternation does not fix that here (the gap's middle half still spans about ten
points). `python benches/instructions.py --case cache-hit` counts the same two rows in
instructions, which repeat from run to run.
"""


def validation_section(results: Results) -> Section:
    module = bench_module("bench_validation")
    report = results.reports.get("validation")
    best = module.per_call_micros([report] if report else [])
    ratios = module.target_ratios(best)
    skips = results.skipped.get("validation", {})
    lines = fill(VALIDATION_TEXT, {})
    for case, title in (
        ("small", "text->validated dict, small schema (5 properties)"),
        ("large", "text->validated dict, large schema (50 properties, 4 levels, $ref)"),
    ):
        rows = tuple((f"{key}[{case}]", label, what) for key, label, what in TEXT_ROWS)
        lines += ["", f"### {title}", ""]
        lines += table(
            ["row", "what it calls", "median", "ratio to reference"],
            labelled_rows(best, rows, f"test_text_jsonschema_rs[{case}]"),
            "llrr",
        )
        lines += not_measured((key for key, _, _ in rows), best, skips)
    lines += ["", "### dict validation (arguments already parsed; no target)", ""]
    lines += case_table(best, DICT_ROWS, "test_dict_jsonschema_rs")
    lines += not_measured(
        (f"{key}[{case}]" for key, _, _ in DICT_ROWS for case in module.CASES), best, skips
    )
    lines += ["", "### invalid arguments, 6 violations, full report", ""]
    lines += table(
        ["row", "what it returns", "median", "ratio to reference"],
        labelled_rows(best, INVALID_ROWS, "test_invalid_jsonschema_rs"),
        "llrr",
    )
    lines += not_measured((key for key, _, _ in INVALID_ROWS), best, skips)
    lines += ["", "fastjsonschema stops at the first error, so it has no row here."]
    lines += ["", "### compile + guards of a new schema", ""]
    lines += case_table(best, COMPILE_ROWS, "test_compile_jsonschema_rs")
    lines += not_measured(
        (f"{key}[{case}]" for key, _, _ in COMPILE_ROWS for case in module.CASES), best, skips
    )

    def gap(top: str, bottom: str) -> str:
        return fmt_us(best[top] - best[bottom]) if top in best and bottom in best else "n/a"

    lines += ["", "### cache hit", ""]
    small = best.get("test_cache_small_validation")
    lines += table(
        ["row", "what it calls", "median", "share of a small validation"],
        [
            [label, what, fmt_us(best[key]), fmt_pct(best[key] / small) if small else "n/a"]
            for key, label, what in CACHE_ROWS
            if key in best
        ],
        "llrr",
    )
    lines += not_measured((key for key, _, _ in CACHE_ROWS), best, skips)
    lines += [
        "",
        *fill(
            CACHE_NOTES,
            {
                "added": gap(*module.CACHE_GAP_ROWS),
                "share": fmt_pct(ratios["cache"]),
                "call_share": fmt_pct(ratios["cache call"]),
                "call_above_floor": fmt_pct(ratios["cache call above floor"]),
                "floor": fmt_us(best.get("test_cache_noop_floor")),
                "two_pct": fmt_us(small * module.CACHE_TARGET if small else None),
            },
        ),
    ]

    lines += [
        "",
        *fill(
            VALIDATION_NOTES,
            {
                "parse_small": fmt_us(best.get("test_text_ours_parse_piece[small]")),
                "parse_large": fmt_us(best.get("test_text_ours_parse_piece[large]")),
                "orjson_small": fmt_us(best.get("test_text_orjson_piece[small]")),
                "orjson_large": fmt_us(best.get("test_text_orjson_piece[large]")),
                "glue_small": gap("test_text_ours[small]", "test_text_ours_compiled_piece[small]"),
                "report_extra": gap("test_invalid_ours_tool_validator", "test_invalid_ours_found"),
            },
        ),
    ]

    def against(ours: str, other: str) -> str:
        return f"{fmt_us(best.get(ours))} against {fmt_us(best.get(other))}"

    targets = [
        Target(
            3,
            "validation",
            f"text to validated dict, {case} schema: at most "
            f"{module.TEXT_TARGETS[case]:g}x `orjson.loads` + jsonschema-rs `is_valid`",
            ratios[f"text {case}"],
            module.TEXT_TARGETS[case],
            at_most=True,
            detail=against(f"test_text_ours[{case}]", f"test_text_jsonschema_rs[{case}]"),
        )
        for case in module.CASES
    ]
    targets.append(
        Target(
            3,
            "validation",
            f"six violations, full compact report: at most {module.INVALID_TARGET:g}x "
            "jsonschema-rs collecting all errors",
            ratios["invalid"],
            module.INVALID_TARGET,
            at_most=True,
            detail=against("test_invalid_ours_tool_validator", "test_invalid_jsonschema_rs"),
        )
    )
    targets += [
        Target(
            3,
            "validation",
            f"compile + guards of a new {case} schema: at most "
            f"{module.COMPILE_TARGET:g}x `jsonschema_rs.validator_for`",
            ratios[f"compile {case}"],
            module.COMPILE_TARGET,
            at_most=True,
            detail=against(f"test_compile_ours[{case}]", f"test_compile_jsonschema_rs[{case}]"),
        )
        for case in module.CASES
    ]
    targets.append(
        Target(
            3,
            "validation",
            f"cache hit under {fmt_pct(module.CACHE_TARGET)} of a small validation",
            ratios["cache"],
            module.CACHE_TARGET,
            at_most=True,
            shown=fmt_pct,
            detail=(
                f"the lookup adds {gap(*module.CACHE_GAP_ROWS)}"
                f" to {fmt_us(best.get(module.CACHE_GAP_ROWS[1]))}"
            ),
        )
    )
    versus = []
    for case in module.CASES:
        ours = best.get(f"test_text_ours[{case}]")
        for peer, label in VALIDATION_PEERS.items():
            other = best.get(f"test_text_{peer}[{case}]")
            if ours is not None and other is not None:
                versus.append(
                    Versus("validation", f"text, {case} schema", label, "peer", ours, other)
                )
    ours = best.get("test_invalid_ours_tool_validator")
    for peer in ("jsonschema_rs", "jsonschema"):
        other = best.get(f"test_invalid_{peer}")
        if ours is not None and other is not None:
            versus.append(
                Versus(
                    "validation",
                    "6 violations, full report",
                    VALIDATION_PEERS[peer],
                    "peer",
                    ours,
                    other,
                )
            )
    for case in module.CASES:
        ours, other = (
            best.get(f"test_compile_ours[{case}]"),
            best.get(f"test_compile_jsonschema_rs[{case}]"),
        )
        if ours is not None and other is not None:
            versus.append(
                Versus(
                    "validation", f"compile, {case} schema", "jsonschema-rs", "peer", ours, other
                )
            )
    return finished(report, lines, targets, versus)


def case_table(
    best: Mapping[str, float], rows: Sequence[tuple[str, str, str]], reference: str
) -> list[str]:
    """Small and large side by side, each with its ratio to ``reference``."""
    body = []
    for key, label, what in rows:
        cells = [f"{label}: {what}" if what else label]
        present = False
        for case in ("small", "large"):
            value, base = best.get(f"{key}[{case}]"), best.get(f"{reference}[{case}]")
            present = present or value is not None
            cells += [fmt_us(value), fmt_x(value / base) if value is not None and base else ""]
        if present:
            body.append(cells)
    return table(["row", "small", "ratio", "large", "ratio"], body)


# ------------------------------------------------------------------------------------ search

SEARCH_TEXT = """
Query and build cost of `ToolSearchIndex` next to two Python BM25 libraries
(`benches/bench_search.py`): `bm25s` (numpy backend) and `rank_bm25` (`BM25Okapi`), both with
ours' k1 and b, both fed the tokens of the reference analyzer (`tests/reference/search.py`),
computed once before timing; ours takes raw text and tokenises, stems and builds its hits inside
every timed call (stems through the process's stem memo, which the first build warms, as a host
rebuilding indexes over the same tools would). Catalogs are synthetic and seeded: a Zipf draw
over English function words and generated words, so a few terms sit in most tools and most
terms in very few. Each catalog has
64 queries of 5-15 words; search rows run all 64 per call and the times below are per query.
"bm25s get_scores" scores the same way without `retrieve`'s wrapper and full `argpartition`.
"""
SEARCH_NOTES = """
How ours grows with the catalog (it should grow with the postings a query touches, not with the
number of tools): {growth}. Where a query's time goes, at {size} tools (per query or call):
"""
QUALITY_TEXT = """
Retrieval quality on public tool-retrieval data (`benches/search_quality.py`, the data in
`shared/data/retrieval/`, overridable with `PRISM_SHARED_DATA`): every engine indexes the whole
catalog and answers every query with its top {top_k}. Recall@k is the mean over queries of
|relevant in top k| / |relevant|; MRR takes 1/rank of the first relevant tool. The peers get the
reference analyzer's tokens (k1={k1}, b={b}) and rank with a stable sort; ours uses what they do
not have: name/description field weights, prefix terms and query-term saturation. The last column
is build plus all queries, for information only.
"""


def search_section(results: Results) -> Section:
    module = bench_module("bench_search")
    report = results.reports.get("search")
    best = module.best_micros([report] if report else [])
    ratios = module.target_ratios(best)
    targets: list[Target] = []
    versus: list[Versus] = []
    size = module.TARGET_SIZE
    for (op, peer), limit in module.TARGETS.items():
        ours, other = best.get((op, "ours", size)), best.get((op, peer, size))
        what = "one top-16 search" if op == "search" else "index build"
        targets.append(
            Target(
                4,
                "search",
                f"{what} at {size:,} tools: at most {limit:g}x {peer}",
                ratios[op, peer],
                limit,
                at_most=True,
                detail=f"{fmt_us(ours)} against {fmt_us(other)}",
            )
        )
        if ours is not None and other is not None:
            versus.append(Versus("search", f"{op} at {size:,} tools", peer, "peer", ours, other))
    ours = best.get(("search", "ours", size))
    other = best.get(("search", "bm25s get_scores", size))
    if ours is not None and other is not None:
        versus.append(
            Versus("search", f"search at {size:,} tools", "bm25s get_scores", "peer", ours, other)
        )
    if report is None:
        lines = ["Speed: not run in this report."]
    else:
        lines = search_speed_lines(module, best, results.skipped.get("search", {}))
    lines += ["", "### Retrieval quality", ""]
    quality_lines, quality_targets = quality_part(results.quality)
    return Section(lines + quality_lines, targets + quality_targets, versus)


def search_speed_lines(
    module: ModuleType, best: Mapping[tuple[str, str, int], float], skips: Mapping[str, str]
) -> list[str]:
    lines = fill(SEARCH_TEXT, {})
    for op, unit, peers in (
        ("search", "per query", ("bm25s", "bm25s get_scores", "rank_bm25")),
        ("build", "per build", ("bm25s", "rank_bm25")),
    ):
        sizes = sorted({size for (o, _, size) in best if o == op})
        header = ["tools", f"ours ({unit})", *peers, *(f"ours / {peer}" for peer in peers)]
        rows = []
        for size in sizes:
            ours = best.get((op, "ours", size))
            cells = [f"{size:,}", fmt_us(ours)]
            cells += [fmt_us(best.get((op, peer, size))) for peer in peers]
            for peer in peers:
                other = best.get((op, peer, size))
                cells.append(fmt_x(ours / other) if ours is not None and other else "n/a")
            rows.append(cells)
        lines += ["", f"### {op}", "", *table(header, rows)]
    ours_sizes = sorted(size for (op, engine, size) in best if op == "search" and engine == "ours")
    growth = ", ".join(
        f"{fmt_us(best[('search', 'ours', size)])} at {size:,} tools" for size in ours_sizes
    )
    pieces = sorted(
        ((engine, micros) for (op, engine, _), micros in best.items() if op == "piece"),
        key=lambda item: item[1],
    )
    lines += [
        "",
        *fill(SEARCH_NOTES, {"growth": growth or "n/a", "size": f"{module.PIECES_SIZE:,}"}),
        "",
        *(f"- {engine}: {fmt_us(micros)}" for engine, micros in pieces),
    ]
    if skips:
        lines += [
            "",
            "Not measured in this run: "
            + "; ".join(f"`{key}` ({reason})" for key, reason in sorted(skips.items()))
            + ".",
        ]
    return lines


def fmt_recall(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def quality_part(quality: Mapping[str, Any] | None) -> tuple[list[str], list[Target]]:
    """The quality tables and the Recall targets; without results, the targets of
    ``search_quality.DATASETS`` unmeasured."""
    if quality is None or quality.get("skipped"):
        datasets = bench_module("search_quality").DATASETS.values()
        targets = [
            Target(
                4,
                "search",
                f"{data.title}: Recall@{k} at least {limit:.2f}",
                None,
                limit,
                at_most=False,
                shown=fmt_recall,
            )
            for data in datasets
            for k, limit in sorted(data.targets.items())
        ]
        note = NOT_RUN if quality is None else f"Not measured: {quality['skipped']}."
        return [note], targets
    lines = fill(
        QUALITY_TEXT,
        {
            "top_k": str(quality.get("top_k")),
            "k1": str(quality.get("k1")),
            "b": str(quality.get("b")),
        },
    )
    targets = []
    for data in quality["datasets"].values():
        lines += quality_table(data)
        recall = data["engines"].get("ours", {}).get("recall", {})
        targets += [
            Target(
                4,
                "search",
                f"{data['title']}: Recall@{k} at least {limit:.2f}",
                recall.get(k),
                limit,
                at_most=False,
                shown=fmt_recall,
            )
            for k, limit in sorted(data["targets"].items(), key=lambda item: int(item[0]))
        ]
    return lines, targets


def quality_table(data: Mapping[str, Any]) -> list[str]:
    lines = ["", f"#### {data['title']} ({data['tools']:,} tools, {data['queries']:,} queries)", ""]
    rows = []
    cutoffs = ("1", "5", "16")
    for engine, found in data["engines"].items():
        if "recall" not in found:
            rows.append([engine, found.get("note", "not measured"), "", "", "", ""])
            continue
        rows.append(
            [engine]
            + [f"{found['recall'].get(k, 0):.4f}" for k in cutoffs]
            + [f"{found['mrr']:.4f}", f"{found['seconds']:.1f}"]
        )
    return lines + table(
        ["engine", "Recall@1", "Recall@5", "Recall@16", "MRR@16", "s (build + queries)"], rows
    )


# --------------------------------------------------------------------------------- turn prep

TURN_PREP_TEXT = """
`benches/bench_turn_prep.py`: 1,024 registered tools with schemas, a 200-tool grant, a narrowing
callback keeping 100, search disclosure with top 16, and the OpenAI `tools` payload as JSON
bytes, one turn per call. Ours is `RunScope.for_turn` and `openai_tools_json`; the plain row does
the same preparation in Python (list comprehensions, `rank_bm25` over the visible tools cached per
visible subset as ours is, the reference tokeniser, `json.dumps` of the entries every turn). Both
get the same turn text each round and the same activated names.
"""
TURN_PREP_NOTES = """
Per visible set, ours builds the search index, the `search_tools` definition and the dispatch
filters once; tool payloads are built once per definition and joined from cached bytes. Part of
ours' time is the benchmark's own narrowing callback, written in Python.
"""


def turn_prep_section(results: Results) -> Section:
    module = bench_module("bench_turn_prep")
    report = results.reports.get("turn-prep")
    best = module.best_per_turn([report] if report else [])
    ratio = module.speedup(best)
    lines = fill(TURN_PREP_TEXT, {})
    labels = {"ours": "**ours**", "plain": "plain Python"}
    lines += [
        "",
        *table(
            ["row", "median per turn"],
            [
                [labels.get(engine, engine), fmt_us(micros)]
                for engine, micros in sorted(best.items())
            ],
        ),
    ]
    lines += not_measured(
        ("test_turn_prep_plain",) if "plain" not in best else (),
        {},
        results.skipped.get("turn-prep", {}),
    )
    lines += ["", *fill(TURN_PREP_NOTES, {})]
    targets = [
        Target(
            6,
            "turn-prep",
            f"per-turn preparation at 1,024 tools at least {module.TARGET:g}x faster than plain "
            "Python",
            ratio,
            module.TARGET,
            at_most=False,
            detail=f"{fmt_us(best.get('ours'))} against {fmt_us(best.get('plain'))}",
        )
    ]
    versus = []
    if "ours" in best and "plain" in best:
        versus.append(
            Versus("turn-prep", "ours", "plain Python", "baseline", best["ours"], best["plain"])
        )
    return finished(report, lines, targets, versus)


# ----------------------------------------------------------------------------------- runtime

RUNTIME_TEXT = """
Whole `session.run` calls against two peer agent loops, and one 64-call parallel round against a
bare `asyncio.gather` (`benches/bench_runtime.py`).

Group `{turns}`: a scripted three-turn conversation (two calls of two no-op async tools per turn,
then a final text). Ours builds a fresh agent, `ScriptedProvider` and session for every run (the
headline row, which pays for more than the peers do), or reuses one agent with a stateless
provider; extra rows run the two calls of a turn in parallel, and take the arguments as JSON text
checked against the tools' JSON Schemas (the work both peers do with pydantic). The peers reuse
one agent: pydantic-ai `Agent.run` with a `FunctionModel`, openai-agents `Runner.run` with a fake
`Model` and tracing off. Every round runs {runs} whole runs in one `run_until_complete`; times
are per run. Before timing, every row checks that a run executes all its tool calls and ends with
the final text.
"""
WIDE_TEXT = """
Group `{wide}`: one round of 64 calls of a tool that awaits `asyncio.sleep(0)`, next to
`asyncio.gather` over the same 64 coroutines, plus the rows that say where a call's time goes.
The per-call ratio uses marginal costs, `(T64 - T1) / 63`, which leaves out the two provider
turns and the run set-up that `gather` does not do. Whole run: ours {whole} the `gather`; per
call from marginal costs: {per_call} ({marginal} against {gather_call}); ours' fixed cost of the
two turns and the run: {fixed}.
"""


def runtime_section(results: Results) -> Section:
    module = bench_module("bench_runtime")
    report = results.reports.get("runtime")
    medians, _ = module.best_per_run([report] if report else [])
    peers = module.peer_ratios(medians)
    wide = module.wide_numbers(medians)
    lines = fill(RUNTIME_TEXT, {"turns": module.TURNS, "runs": str(module.RUNS)})
    turn_rows = sorted(
        (
            (engine, case, us)
            for (group, engine, case), us in medians.items()
            if group == module.TURNS
        ),
        key=lambda row: row[2],
    )
    ours = medians.get((module.TURNS, "ours", "fresh agent"))
    lines += [
        "",
        *table(
            ["row", "median per run", "ratio to ours (fresh agent)"],
            [
                [f"{engine}: {case}", fmt_us(us), fmt_x(us / ours) if ours else "n/a"]
                for engine, case, us in turn_rows
            ],
        ),
    ]
    lines += [
        "",
        *fill(
            WIDE_TEXT,
            {
                "wide": module.WIDE,
                "whole": fmt_x(wide.get("whole")),
                "per_call": fmt_x(wide.get("per_call")),
                "marginal": fmt_us(wide.get("marginal")),
                "gather_call": fmt_us(wide.get("gather_call")),
                "fixed": fmt_us(wide.get("fixed")),
            },
        ),
        "",
    ]
    wide_rows = sorted(
        (
            (engine, case, us)
            for (group, engine, case), us in medians.items()
            if group == module.WIDE
        ),
        key=lambda row: row[2],
    )
    lines += table(
        ["row", "median per run", "per call"],
        [
            [
                f"{engine}: {case}",
                fmt_us(us),
                fmt_us(us / (1 if case.endswith(" 1 call") else module.WIDE_CALLS)),
            ]
            for engine, case, us in wide_rows
        ],
    )
    steps = module.call_breakdown(medians)
    if steps:
        lines += ["", "Where one call of the round goes (differences of medians, per call):", ""]
        lines += [f"- {label}: {fmt_us(micros)}" for label, micros in steps]
    skipped = results.skipped.get("runtime", {})
    if skipped:
        lines += [
            "",
            "Not measured in this run: "
            + "; ".join(f"`{key}` ({reason})" for key, reason in sorted(skipped.items()))
            + ".",
        ]
    targets = []
    for engine in ("pydantic-ai", "openai-agents"):
        other = medians.get(
            next((k for k in medians if k[0] == module.TURNS and k[1] == engine), ("",) * 3)
        )
        targets.append(
            Target(
                5,
                "runtime",
                f"a 3-turn, 4-call run at least {module.PEER_TARGET:g}x faster than {engine}",
                peers.get(engine),
                module.PEER_TARGET,
                at_most=False,
                detail=f"{fmt_us(other)} against {fmt_us(ours)}",
            )
        )
    targets.append(
        Target(
            5,
            "runtime",
            f"64 calls at `tool_concurrency=8` at most {module.GATHER_TARGET:g}x a bare "
            "`asyncio.gather` (whole run)",
            wide.get("whole"),
            module.GATHER_TARGET,
            at_most=True,
            detail=f"{fmt_us(wide.get('run64'))} against {fmt_us(wide.get('gather64'))}; per "
            f"call from marginal costs {fmt_x(wide.get('per_call'))}",
        )
    )
    versus = []
    for (group, engine, _case), us in medians.items():
        if group == module.TURNS and engine != "ours" and ours is not None:
            versus.append(Versus("runtime", "3-turn run, fresh agent", engine, "peer", ours, us))
    if "run64" in wide:
        versus.append(
            Versus(
                "runtime",
                "64-call round",
                "`asyncio.gather`",
                "baseline",
                wide["run64"],
                wide["gather64"],
            )
        )
    return finished(report, lines, targets, versus)


# -------------------------------------------------------------------------------- durability

DURABILITY_TEXT = """
`benches/bench_durability.py`: `dispatch_tool_call` of a no-op tool declared
`ToolEffect("external_mutation", "required")`, with an `AgentIdentity` and a fresh tool call id
per call, so every call commits {writes} writes: the effect store's three transitions (`pending`,
`dispatched`, `completed`) and the ledger's two rows (`started`, `finished`). Next to it, the same
writes done directly: single autocommitted `INSERT`/`UPDATE` statements with `sqlite3` or
`psycopg` on the same schema (dict updates for the in-memory backend), with the same durability:
SQLite in WAL mode with `synchronous=FULL` on both sides; PostgreSQL with the server's settings,
stated per row. Concurrency 16: 16 worker coroutines share one counter of calls. Every round runs
{calls} calls; times are per call.
"""
DURABILITY_NOTES = """
The split rows say where ours' time goes: `store only` is that backend's effect store with an
in-memory ledger, `ledger only` the in-memory store with that backend's ledger, and `bare
dispatch` (memory) the same tool without effect, identity, store or ledger, what dispatch costs
without durability. The memory rows have no target: their plain side is dict updates, so they
show the Python work of a durable call with no I/O at all.
"""


def durability_best(
    report: Mapping[str, Any],
) -> tuple[dict[tuple[str, str, str, int], float], dict[str, str]]:
    """Seconds per call per ``(backend, engine, part, concurrency)`` and each backend's fsync
    policy, from the bench's ``extra_info`` (the same reading as its ``ratio_report``)."""
    best: dict[tuple[str, str, str, int], float] = {}
    policies: dict[str, str] = {}
    for bench in report["benchmarks"]:
        info = bench.get("extra_info", {})
        if "engine" not in info or not str(bench.get("group", "")).startswith("durability/"):
            continue
        key = (info["backend"], info["engine"], info["part"], int(info["concurrency"]))
        per_call = bench["stats"]["median"] / info["calls_per_round"]
        best[key] = min(per_call, best.get(key, float("inf")))
        policies[info["backend"]] = info.get("policy", "")
    return best, policies


def durability_section(results: Results) -> Section:
    report = results.reports.get("durability")
    module = bench_module("bench_durability")
    limit = float(getattr(module, "TARGET", 1.5))
    backends = tuple(getattr(module, "BACKENDS", ("memory", "sqlite", "postgres")))
    concurrencies = tuple(getattr(module, "CONCURRENCY", (1, 16)))
    best, policies = durability_best(report or {"benchmarks": []})
    lines = fill(
        DURABILITY_TEXT,
        {
            "writes": str(getattr(module, "WRITES_PER_CALL", 5)),
            "calls": str(getattr(module, "CALLS", 64)),
        },
    )
    rows, targets, versus = [], [], []
    for backend in backends:
        for concurrency in concurrencies:
            ours = best.get((backend, "ours", "full", concurrency))
            plain = best.get((backend, "plain", "full", concurrency))
            if ours is None or plain is None:
                if backend != "memory":
                    targets.append(
                        Target(
                            7,
                            "durability",
                            f"{backend}, concurrency {concurrency}: ours at most "
                            f"{limit:g}x the plain writes",
                            None,
                            limit,
                            at_most=True,
                        )
                    )
                continue
            ratio = ours / plain
            rows.append(
                [
                    backend,
                    str(concurrency),
                    f"{1 / ours:,.0f}",
                    f"{1 / plain:,.0f}",
                    fmt_x(ratio),
                    policies.get(backend, ""),
                ]
            )
            versus.append(
                Versus(
                    "durability",
                    f"{backend}, concurrency {concurrency}",
                    "plain writes",
                    "baseline",
                    ours * 1e6,
                    plain * 1e6,
                )
            )
            if backend != "memory":
                targets.append(
                    Target(
                        7,
                        "durability",
                        f"{backend}, concurrency {concurrency}: ours at most {limit:g}x the plain "
                        "writes",
                        ratio,
                        limit,
                        at_most=True,
                        detail=f"{1 / ours:,.0f} against {1 / plain:,.0f} calls/s",
                    )
                )
    lines += [
        "",
        *table(
            [
                "backend",
                "concurrency",
                "ours, calls/s",
                "plain, calls/s",
                "ours / plain (time)",
                "fsync policy",
            ],
            rows,
            "lrrrrl",
        ),
    ]
    lines += ["", "Every row, per call:", ""]
    lines += table(
        ["backend", "concurrency", "row", "median per call", "calls/s"],
        [
            [
                backend,
                str(concurrency),
                f"{engine}: {part}",
                fmt_us(seconds * 1e6),
                f"{1 / seconds:,.0f}",
            ]
            for (backend, engine, part, concurrency), seconds in sorted(best.items())
        ],
        "lrlrr",
    )
    if results.meta.get("postgres") is False:
        lines += [
            "",
            "PostgreSQL rows were not run: `PRISM_TOOLS_PG_DSN` was not set (`make bench` "
            "starts a throwaway server with `.ci/postgres.sh`).",
        ]
    elif not any(key[0] == "postgres" for key in best):
        reasons = sorted(set(results.skipped.get("durability", {}).values()))
        lines += [
            "",
            "PostgreSQL rows were not run" + (f": {'; '.join(reasons)}." if reasons else "."),
        ]
    lines += ["", *fill(DURABILITY_NOTES, {})]
    return finished(report, lines, targets, versus)


# -------------------------------------------------------------------------------------- page

HEADER = """
<!-- Generated by benches/report.py from the results of one run. Do not edit by hand: run
`make bench` (or `python benches/report.py`) and commit the regenerated file. -->

# Performance

> Generated on {generated} by
>
>     {command}
>
> Do not edit by hand: every number here comes from that run, the prose from the templates in
> `benches/report.py`.
"""
QUICK_BANNER = """
> **Quick run (`--quick`): a few rounds per row, for smoke tests only. These numbers are not
> measurements; do not quote them.**
"""
INTRO = """
What a tool call, an argument check, a search, a filter, a lookup, a turn's tool preparation, an
agent run and a durable call cost in prism-tools, next to the peers a host could use instead and
to hand-written Python baselines, all measured in one run on the release build. Each suite's
method is in its section; how to run it is in `benches/README.md`.
"""
METHOD = """
## Method

- Every suite runs in its own `pytest` process from `benches/`, so `import prism_tools` finds the
  installed release build, not a source tree; the report refuses a build that is not a release
  build (the check is under Setup).
- Every row is checked before it is timed (the tool ran, the issues were found, the rows were
  committed), so a peer that skips work cannot look fast.
- The tables give each row's **median** round, divided by the calls per round. A ratio is one
  median over another from the same run. "ours / other" below 1 means ours takes less time.
- GC stays on (pytest-benchmark's default).

## Noise

Other jobs may share the machine: a busy neighbour slows whichever row happens to be running,
sometimes by 2x, and leaves the rest alone, so a single row can be off while the others hold. The
load average was {load_before} when the run started and {load_after} when it ended ({cores}
cores). {repeats}
To check a verdict that sits near its limit, run the suite again (`--suite NAME`, or `--repeat N`
to keep each row's lowest median over N runs) and compare. For numbers the neighbours do not
move, `python benches/instructions.py` counts the instructions a call of each side of those
targets takes (callgrind, inside the batch of calls only): not time, but our rows repeat to the
instruction and the peers' within about 1%.
"""


def setup_lines(results: Results) -> list[str]:
    meta = results.meta
    env = meta.get("env", {})
    mach = meta.get("machine", {})
    versions = env.get("versions", {})
    ram = mach.get("ram_bytes")
    commit = meta.get("commit")
    build = env.get("prism_tools", "unknown")
    if env.get("installed_from"):
        build += f", installed from `{env['installed_from']}`"
    check = meta.get("release_check", {})
    if check.get("problems"):
        verdict = "**not a release build** (`--allow-debug`): " + "; ".join(check["problems"])
    elif check:
        verdict = "release build (" + check.get("how", "") + ")"
    else:
        verdict = "not recorded"
    peers = [f"{dist} {versions[dist]}" for dist in PEERS if versions.get(dist)]
    absent = [dist for dist in PEERS if dist in versions and not versions[dist]]
    harness = [f"{dist} {versions[dist]}" for dist in HARNESS if versions.get(dist)]
    rows = [
        [
            "machine",
            f"{mach.get('cpu', 'unknown')}, {mach.get('cores', '?')} cores, "
            + (f"{ram / 2**30:.1f} GiB RAM" if ram else "RAM unknown")
            + f", {mach.get('os', 'unknown')} ({mach.get('machine', '?')})",
        ],
        ["Python", env.get("python", "unknown")],
        ["prism-tools", build],
        ["checkout", f"commit `{commit}`" if commit else "not a git checkout"],
        [
            "core",
            f"`{Path(env['core']).name}` from `{env.get('package')}`"
            if env.get("core")
            else "unknown",
        ],
        ["build check", verdict],
        ["rustc", meta.get("rustc") or "not found on PATH"],
        ["peers", ", ".join(peers) or "none installed"],
        ["harness", ", ".join(harness) or "unknown"],
    ]
    lines = ["## Setup", "", *table(["", ""], rows, "ll")]
    if absent:
        lines += ["", "Not installed, so their rows were skipped: " + ", ".join(absent) + "."]
    lines += [
        "",
        "Commands, run in order from `benches/` (`RESULTS` is the results directory):",
        "",
    ]
    for suite in SUITES:
        state = meta.get("suites", {}).get(suite.name)
        if state is None:
            continue
        for command in state["commands"]:
            lines.append(f"    {command}")
    return lines


def targets_lines(targets: Sequence[Target]) -> list[str]:
    rows = [
        [
            str(target.issue),
            target.text,
            target.shown(target.measured) + (f" ({target.detail})" if target.detail else ""),
            f"**{target.verdict}**",
        ]
        for target in targets
    ]
    counts = {state: sum(t.verdict == state for t in targets) for state in ("met", "not met")}
    lines = ["## Targets", ""]
    lines += [
        f"Every benchmark target of issues 2-7, on this run: {counts['met']} met, "
        f"{counts['not met']} not met, {len(targets) - sum(counts.values())} not measured.",
        "",
    ]
    return lines + table(["issue", "target", "measured", "verdict"], rows, "rllr")


def status_lines(results: Results) -> list[str]:
    suites = results.meta.get("suites", {})
    rows = []
    for suite in SUITES:
        state = suites.get(suite.name)
        if state is None:
            status = "ran" if suite.name in results.reports else "not run in this report"
            rows.append([suite.name, str(suite.issue), status, ""])
            continue
        rows.append([suite.name, str(suite.issue), state["status"], f"{state['seconds']:.0f} s"])
    return ["## Suites", "", *table(["suite", "issue", "status", "time"], rows, "lrll")]


SECTIONS: tuple[tuple[str, str, Callable[[Results], Section]], ...] = (
    ("dispatch", "Dispatch", dispatch_section),
    ("validation", "JSON Schema validation", validation_section),
    ("search", "Tool search", search_section),
    ("filtering", "Filtering", lambda results: lookup_section(results, "filtering")),
    ("registry", "Registry lookup", lambda results: lookup_section(results, "registry")),
    ("turn-prep", "Turn preparation", turn_prep_section),
    ("runtime", "Agent runtime", runtime_section),
    ("durability", "Durability", durability_section),
)


def render(results: Results) -> str:
    """The whole page, from ``results`` only."""
    meta = results.meta
    command = meta.get("command", COMMAND)
    lines = fill(
        HEADER, {"command": command, "generated": meta.get("generated", "an unknown date")}
    )
    if meta.get("quick"):
        lines += ["", *fill(QUICK_BANNER, {})]
    lines += ["", *fill(INTRO, {})]
    sections = []
    for _name, title, build in SECTIONS:
        section = build(results)
        sections.append((title, section))
    targets = sorted(
        (target for _, section in sections for target in section.targets),
        key=lambda target: target.issue,
    )
    versus = [item for _, section in sections for item in section.versus]
    lines += ["", *targets_lines(targets)]
    lines += ["", "## Ours against each peer and baseline", ""]
    lines += table(
        ["suite", "our row", "against", "ours", "other", "ours / other", "reading"],
        versus_rows(versus),
        "lllrrrl",
    )
    lines += ["", *setup_lines(results)]
    lines += ["", *status_lines(results)]
    load = meta.get("load", {})
    mach = meta.get("machine", {})
    lines += [
        "",
        *fill(
            METHOD,
            {
                "load_before": ", ".join(map(str, load.get("before") or [])) or "not recorded",
                "load_after": ", ".join(map(str, load.get("after") or [])) or "not recorded",
                "cores": str(mach.get("cores", "?")),
                "repeats": (
                    f"Each suite ran {meta['repeat']} times; every row shows its lowest median."
                    if meta.get("repeat", 1) > 1
                    else "Each suite ran once."
                ),
            },
        ),
    ]
    issues = {suite.name: suite.issue for suite in SUITES}
    for (name, _, _), (title, section) in zip(SECTIONS, sections, strict=True):
        lines += ["", f"## {title}", "", f"Suite `{name}`, issue {issues[name]}.", ""]
        lines += section.lines
    return "\n".join(lines).rstrip() + "\n"


# -------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description="Run every benchmark suite and write docs/performance.md."
    )
    parser.add_argument("--quick", action="store_true", help="a few rounds per row (smoke test)")
    parser.add_argument(
        "--suite", action="append", choices=SUITE_NAMES, help="suite to run (repeatable)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each suite N times and keep each row's lowest median (default 1)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="page to write")
    parser.add_argument("--results", type=Path, help="keep the JSON results in this directory")
    parser.add_argument(
        "--from-results", type=Path, metavar="DIR", help="render DIR's results; run nothing"
    )
    parser.add_argument(
        "--allow-debug", action="store_true", help="measure a build that is not a release build"
    )
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None, *, command: str | None = None) -> int:
    """Run the suites and write the page; ``command`` is how the page names its invocation
    (default ``python benches/report.py`` with ``argv``). Exit codes: 0 written, 1 written but a
    suite failed, 2 refused (not a release build, or bad results directory)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(args_list)
    if args.probe:
        print(json.dumps(probe()))
        return 0

    def log(message: str) -> None:
        print(f"bench: {message}", file=sys.stderr, flush=True)

    if args.from_results is not None:
        if not args.from_results.is_dir():
            print(f"bench: no results directory {args.from_results}", file=sys.stderr)
            return 2
        results = load_results(args.from_results)
        if not results.reports and results.quality is None:
            print(f"bench: no benchmark results in {args.from_results}", file=sys.stderr)
            return 2
        write_page(args.out, render(results))
        log(f"wrote {args.out} from {args.from_results}")
        return 0

    try:
        env = probe_subprocess(sys.executable)
    except RuntimeError as err:
        print(f"bench: {err}", file=sys.stderr)
        return 2
    problems = release_problems(Path(env["core"]), editable=env["editable"])
    if problems and not args.allow_debug:
        print(
            f"bench: refusing to measure a non-release build ({'; '.join(problems)}); "
            "install with `pip install .` or pass --allow-debug",
            file=sys.stderr,
        )
        return 2
    chosen = [suite for suite in SUITES if not args.suite or suite.name in args.suite]
    if args.results is not None:
        args.results.mkdir(parents=True, exist_ok=True)
        results_dir = args.results
    else:
        results_dir = Path(tempfile.mkdtemp(prefix="prism-bench-"))
    mach = machine()
    meta: dict[str, Any] = {
        "command": command or shlex.join([*COMMAND.split(), *args_list]),
        "generated": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "machine": mach,
        "env": env,
        "commit": git_commit(REPO_ROOT),
        "rustc": rustc_version(),
        "postgres": bool(os.environ.get("PRISM_TOOLS_PG_DSN")),
        "release_check": {
            "problems": problems,
            "how": "not an editable install, core outside a source tree"
            + (
                ", debug and symbol sections stripped"
                if elf_sections(Path(env["core"])) is not None
                else ""
            ),
        },
        "load": {"before": load_average()},
        "repeat": args.repeat,
    }
    log(f"{len(chosen)} suite(s), results in {results_dir}" + (" (quick)" if args.quick else ""))
    meta["suites"] = run_suites(chosen, results_dir, quick=args.quick, log=log, repeat=args.repeat)
    meta["load"]["after"] = load_average()
    (results_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    write_page(args.out, render(load_results(results_dir)))
    log(f"wrote {args.out}" + ("" if args.results else f" (results were in {results_dir})"))
    if args.results is None:
        shutil.rmtree(results_dir, ignore_errors=True)
    failed = [name for name, state in meta["suites"].items() if state["status"] != "ok"]
    if failed:
        log("failed: " + ", ".join(failed))
        return 1
    return 0


def write_page(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
