"""The ``prism-tools`` command: ``demo``, ``check``, ``search``, ``export``, ``list``, ``bench``
and ``version``.

Every command returns its exit status instead of exiting: 0 success, 1 a finding (a catalog
with problems, a demo that did not end as scripted), 2 a usage error or an input that could not
be read. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import importlib.util
import os
import re
import sys
import unicodedata
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

from prism_tools import __version__, _json
from prism_tools.catalog_check import CatalogCheck, CatalogFinding, check_catalog
from prism_tools.demo import format_report, report_data, run_demo
from prism_tools.demo_agent import agent_report_data, format_agent_report, run_agent_demo
from prism_tools.errors import PrismError
from prism_tools.examples import example_domains, example_tools
from prism_tools.formats import (
    CATALOG_FORMATS,
    CatalogFormat,
    CatalogFormatError,
    export_catalog,
    load_catalog,
    load_catalog_report,
)
from prism_tools.search import MAX_INDEXED_CEILING, MAX_TOP_K, ToolSearchIndex
from prism_tools.types import ToolDefinition

T = TypeVar("T")

EXAMPLES = "@examples"
"""The catalog argument that names the built-in example catalog instead of a file."""

PROGRESS_EVERY = 100
"""Tools between two progress lines of ``check`` on a terminal."""


# The exit status when the reader of the output went away (a closed pipe): 128 + SIGPIPE, as a
# command killed by it would give.
EXIT_CLOSED_PIPE = 141


class CommandError(Exception):
    """A one-line reason a command cannot run; ``main`` prints it and returns 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``prism-tools <command>: <reason>``), as every
    other error of the command is, and its help and errors written to the command's own streams
    (``_STREAMS``), never by swapping the process's ``sys.stdout``."""

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if not message:
            return
        streams = _STREAMS.get()
        if streams is None:
            super()._print_message(message, file)
            return
        out, err = streams
        (out if file is sys.stdout else err).write(message)

    def error(self, message: str) -> NoReturn:
        # The message may quote an argument: escaped, as catalog text is, to stay one line.
        text = _terminal(_argument_text(message))
        self.exit(2, f"{self.prog}: {text} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``prism-tools`` command."""
    parser = _Parser(
        prog="prism-tools",
        description="A tool harness for LLM agents. Run 'prism-tools demo' for a tour.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    catalog_help = (
        f"a catalog file (JSON: OpenAI, Anthropic, Gemini, MCP or plain shapes), or {EXAMPLES} "
        "for the built-in example catalog"
    )

    demo = commands.add_parser(
        "demo",
        help="dispatch scripted calls over the example catalog and show every outcome",
        description="Dispatch scripted tool calls over the built-in example catalog, showing "
        "success with progress, each blocked reason, secret scrubbing and concurrency; then "
        "search the catalog and run a scripted multi-turn agent session with parallel calls. "
        "Runs offline. Exits 1 if anything did not end as scripted.",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of text")

    check = commands.add_parser(
        "check",
        help="check every tool schema of a catalog against the guards; report all problems",
        description="Load a catalog (the shape is detected), run every tool's parameters "
        "schema through the same guards and compile step dispatch uses (default limits), and "
        "report entries that could not be read, duplicate names and refused schemas with "
        "their reason. Exits 1 if there is any problem.",
    )
    check.add_argument("catalog", metavar="CATALOG", help=catalog_help)
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument(
        "--require-schema",
        action="store_true",
        help="count a tool without a parameters schema as a problem",
    )

    search = commands.add_parser(
        "search",
        help="rank a catalog's tools for a query (BM25 over names and descriptions)",
        description="Build the search index over a catalog and print the best tools for QUERY "
        "with their scores and the query words each matched.",
    )
    search.add_argument("catalog", metavar="CATALOG", help=catalog_help)
    search.add_argument("query", metavar="QUERY", help="what the agent is looking for")
    search.add_argument(
        "-k",
        type=int,
        default=5,
        metavar="N",
        help=f"how many tools to show (1 to {MAX_TOP_K}; default 5)",
    )
    search.add_argument("--json", action="store_true", help="print one JSON object")

    export = commands.add_parser(
        "export",
        help="write a catalog in another provider's shape",
        description="Load a catalog (the shape is detected) and print it as JSON in FORMAT.",
    )
    export.add_argument("catalog", metavar="CATALOG", help=catalog_help)
    export.add_argument(
        "--format", "-f", choices=CATALOG_FORMATS, default="plain", help="the shape to write"
    )
    export.add_argument(
        "--strict",
        action="store_true",
        help="OpenAI strict mode: every property required, no additional properties",
    )

    listing = commands.add_parser("list", help="list the example catalog's tools")
    listing.add_argument(
        "--domain", choices=example_domains(), help="only the tools of this domain"
    )

    bench = commands.add_parser(
        "bench",
        help="run every benchmark suite against the peers and write docs/performance.md",
        description="Run benches/report.py of a source checkout with this interpreter: every "
        "suite, peers side by side, then the report. Needs a release build and the 'bench' "
        "extra; arguments after 'bench' are passed on (try 'prism-tools bench --help').",
        add_help=False,
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    commands.add_parser("version", help="print the installed version")
    return parser


# ------------------------------------------------------------------------------------ catalogs


def _load(source: str) -> list[ToolDefinition]:
    if source == EXAMPLES:
        return example_tools()
    try:
        return load_catalog(source)
    except CatalogFormatError as err:
        raise CommandError(str(err)) from None


def _progress_printer(err: _Stream) -> Callable[[int, int], None] | None:
    """Progress lines for long checks, only where someone watches (a terminal)."""
    if not err.isatty():
        return None

    def report(done: int, total: int) -> None:
        if done % PROGRESS_EVERY == 0 or done == total:
            err.write(f"\rchecked {done}/{total} tools")
            if done == total:
                err.write("\n")
            err.flush()

    return report


_JOINERS = frozenset("\u200c\u200d")  # zero-width non-joiner and joiner


def _terminal(text: str) -> str:
    """Text from a catalog as a terminal should get it: control and format characters (escape
    sequences, line breaks, bidirectional overrides) written as their escapes, so a catalog
    cannot clear the screen, retitle the window or fake a line of this command's output."""
    if text.isprintable():
        return text
    return "".join(char if _shown(char) else ascii(char)[1:-1] for char in text)


def _shown(char: str) -> bool:
    """Whether a character goes to the terminal as it is: printable ones, spaces of every
    width, and the joiners of emoji and of scripts such as Persian; not controls, bidirectional
    overrides, other invisible format characters or line separators."""
    return char.isprintable() or unicodedata.category(char) == "Zs" or char in _JOINERS


def _argument_text(text: str) -> str:
    """A command-line argument as JSON output can hold it: bytes that were not UTF-8 (Python
    keeps them as lone surrogates) are shown as ``\\xNN`` escapes."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return _json.replace_lone_surrogates(text)


def _check(source: str, as_json: bool, require_schema: bool, out: _Stream, err: _Stream) -> int:
    if source == EXAMPLES:
        tools: Sequence[ToolDefinition] = example_tools()
        entries: Sequence[int] | None = None
        load_problems: list[CatalogFinding] = []
        shape = "built-in"
    else:
        loaded = load_catalog_report(source)
        unreadable = [problem for problem in loaded.problems if problem.index is None]
        if unreadable:
            # The document itself could not be read: nothing to check.
            raise CommandError(unreadable[0].message)
        tools, entries = loaded.tools, loaded.entries
        shape = ", ".join(dict.fromkeys(loaded.formats)) or "no tools"
        load_problems = [
            CatalogFinding(problem.index or 0, problem.name, "invalid_entry", problem.message)
            for problem in loaded.problems
        ]
    result = check_catalog(
        tools,
        indexes=entries,
        load_problems=load_problems,
        require_schema=require_schema,
        progress=_progress_printer(err),
    )
    if as_json:
        data = {"catalog": _argument_text(source), "format": shape, **result.to_dict()}
        out.write_json(_json.dumps(data).decode("utf-8") + "\n")
    else:
        out.write(_format_check(source, shape, result))
    return 0 if result.ok else 1


def _format_check(source: str, shape: str, result: CatalogCheck) -> str:
    lines = [f"{_terminal(_argument_text(source))}: {result.tools} tools ({shape})"]
    for problem in result.problems:
        if problem.kind == "invalid_entry":
            lines.append(f"  {_terminal(problem.message)}")  # already says which entry
        else:
            lines.append(
                f"  entry {problem.index} ({problem.name!r}): {_terminal(problem.message)}"
            )
    if result.without_schema:
        lines.append(f"  {result.without_schema} tool(s) have no parameters schema")
    verdict = "ok" if result.ok else f"{len(result.problems)} problem(s)"
    lines.append(f"{result.checked} schema(s) passed the guards; {verdict}")
    return "\n".join(lines) + "\n"


def _search(source: str, query: str, k: int, as_json: bool, out: _Stream) -> int:
    if not 1 <= k <= MAX_TOP_K:
        raise CommandError(f"-k must be between 1 and {MAX_TOP_K}, not {k}")
    tools = _load(source)
    if len(tools) > MAX_INDEXED_CEILING:
        raise CommandError(
            f"the catalog has {len(tools)} tools; search indexes at most {MAX_INDEXED_CEILING}"
        )
    try:
        index = ToolSearchIndex(tools, max_indexed=max(len(tools), 1))
        hits = index.search(query, k)
    except (PrismError, ValueError) as error:
        raise CommandError(str(error)) from None
    if as_json:
        data = {
            "catalog": _argument_text(source),
            "query": _argument_text(query),
            "hits": [
                {"name": hit.name, "score": hit.score, "matched": list(hit.matched)} for hit in hits
            ],
        }
        out.write_json(_json.dumps(data).decode("utf-8") + "\n")
        return 0
    if not hits:
        out.write(f"no tool matches {query!r} among {len(tools)} tools\n")
        return 0
    descriptions = {tool.name: tool.description for tool in tools}
    width = max(len(_terminal(hit.name)) for hit in hits)
    for rank, hit in enumerate(hits, start=1):
        summary = descriptions.get(hit.name, "").strip().splitlines()
        first = summary[0] if summary else ""
        out.write(
            f"{rank:>2}. {_terminal(hit.name):<{width}}  {hit.score:7.3f}  "
            f"[{_terminal(', '.join(hit.matched))}]  {_terminal(first[:80])}\n"
        )
    return 0


def _export(source: str, shape: CatalogFormat, strict: bool, out: _Stream) -> int:
    tools = _load(source)
    try:
        document = export_catalog(tools, shape, strict=strict)
    except (CatalogFormatError, ValueError) as error:
        raise CommandError(str(error)) from None
    try:
        text = _json.dumps_exact(document).decode("utf-8")
    except ValueError as error:
        raise CommandError(str(error)) from None
    out.write_json(text + "\n")
    return 0


# -------------------------------------------------------------------------------- other commands


def _demo(as_json: bool, out: _Stream) -> int:
    report, agent_report = _run_apart(_both_demos)
    if as_json:
        data = report_data(report)
        data["agent"] = agent_report_data(agent_report)
        out.write_json(_json.dumps(data).decode("utf-8") + "\n")
    else:
        out.write(format_report(report))
        out.write(format_agent_report(agent_report))
    return 0 if report.ok and agent_report.ok else 1


async def _both_demos() -> tuple[Any, Any]:
    return await run_demo(), await run_agent_demo()


def _run_apart(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``main()`` run to its end on an event loop of its own, leaving the caller's alone: a
    host's current loop stays current, and inside a running loop (an async app, a notebook) it
    runs on a worker thread, since one thread runs one loop at a time."""

    def run() -> T:
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            return runner.run(main())  # the coroutine is made on its own loop

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(contextvars.copy_context().run, run).result()


def _list(domain: str | None, out: _Stream) -> int:
    tools = example_tools(domain)
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        tool_domain = (tool.metadata or {}).get("domain", "")
        out.write(f"{tool.name:<{width}}  {tool_domain:<13}  {tool.description}\n")
    out.write(f"{len(tools)} tools\n")
    return 0


def find_checkout(start: Path | None = None) -> Path | None:
    """The source checkout ``bench`` runs in: the nearest directory, from ``start`` (default:
    the working directory) upwards, that holds ``benches/report.py`` and a ``pyproject.toml``."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / "benches" / "report.py").is_file() and (
            directory / "pyproject.toml"
        ).is_file():
            return directory
    return None


def _bench(args: Sequence[str]) -> int:
    checkout = find_checkout()
    if checkout is None:
        raise CommandError(
            "bench runs the suites of a source checkout (benches/ is not installed with the "
            "package): run it inside a clone of prism-tools"
        )
    script = checkout / "benches" / "report.py"
    spec = importlib.util.spec_from_file_location("prism_tools_bench_report", script)
    if spec is None or spec.loader is None:
        raise CommandError(f"cannot load {script}")
    report = importlib.util.module_from_spec(spec)
    # Registered before it runs: the report's dataclasses look their module up by name.
    sys.modules[spec.name] = report
    try:
        spec.loader.exec_module(report)
        status = report.main(list(args), command=" ".join(["prism-tools bench", *args]))
    except SystemExit as exit_:  # the report's own argument parser (usage errors, --help)
        code = exit_.code
        return code if isinstance(code, int) else 0 if code is None else 2
    finally:
        sys.modules.pop(spec.name, None)
    return int(status)


class _OutputError(Exception):
    """Writing to standard output failed (``error``: a closed pipe, a full disk, a closed
    file): told apart from every other error, which says nothing about the output."""

    def __init__(self, error: OSError | ValueError) -> None:
        super().__init__(str(error))
        self.error = error


class _Stream:
    """A standard stream as the commands write to it. Text the stream cannot encode (an
    ASCII-only terminal) is written with backslash escapes, without changing the stream itself
    (a host calling ``main`` keeps its own). A failed write to standard output raises
    ``_OutputError``; one to standard error is dropped (there is nowhere left to report it)."""

    def __init__(self, stream: TextIO | None, *, is_output: bool) -> None:
        self.stream = stream
        self.is_output = is_output

    def write(self, text: str) -> int:
        self._write(text, _backslashed)
        return len(text)

    def write_json(self, text: str) -> None:
        """JSON text: where the stream cannot encode a character, the character's JSON escape,
        so the output stays JSON (a backslash escape would not be)."""
        self._write(text, _json_escaped)

    def _write(self, text: str, escaped: Callable[[str, str], str]) -> None:
        # In pieces smaller than the stream's buffer: one large write that the operating system
        # takes only part of (a pipe closed early, a file size limit) comes back short without
        # an error, where a piece that fails raises.
        for start in range(0, len(text), _WRITE_PIECE):
            self._call(partial(_write_piece, text[start : start + _WRITE_PIECE], escaped), None)

    def flush(self) -> None:
        self._call(lambda stream: stream.flush(), None)

    def isatty(self) -> bool:
        try:
            return self.stream is not None and self.stream.isatty()
        except (OSError, ValueError):
            return False

    def _call(self, step: Callable[[TextIO], Any], dropped: Any) -> Any:
        if self.stream is None:
            return dropped
        try:
            return step(self.stream)
        except (OSError, ValueError) as error:  # ValueError: the stream was closed
            if self.is_output:
                raise _OutputError(error) from None
            return dropped


_WRITE_PIECE = 4096  # characters: at most 16 KiB of UTF-8, below a text stream's buffer


def _write_piece(text: str, escaped: Callable[[str, str], str], stream: TextIO) -> int:
    try:
        return stream.write(text)  # encoded whole before anything is written
    except UnicodeEncodeError:
        # A character the stream cannot encode: the piece goes escaped, the stream unchanged.
        return stream.write(escaped(text, getattr(stream, "encoding", None) or "ascii"))


def _backslashed(text: str, encoding: str) -> str:
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        return text.encode("ascii", "backslashreplace").decode("ascii")


def _json_escaped(text: str, encoding: str) -> str:
    return _NON_ASCII.sub(_json_escape, text)


_NON_ASCII = re.compile("[^\\x00-\\x7f]")


def _json_escape(match: re.Match[str]) -> str:
    """A character as JSON escapes (two, a UTF-16 pair, beyond the BMP)."""
    encoded = match.group().encode("utf-16-be", "surrogatepass")
    units = (int.from_bytes(encoded[at : at + 2], "big") for at in range(0, len(encoded), 2))
    return "".join(f"\\u{unit:04x}" for unit in units)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status instead of exiting."""
    if sys.stdout is None:
        # Started with its output closed (``>&-``): nowhere to write the result.
        _Stream(sys.stderr, is_output=False).write("prism-tools: standard output is closed\n")
        return 2
    out = _Stream(sys.stdout, is_output=True)
    err = _Stream(sys.stderr, is_output=False)
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = arguments[0] if arguments and arguments[0] in _COMMANDS else None
    prefix = "prism-tools" if command is None else f"prism-tools {command}"
    try:
        status = _main(arguments, out, err)
        out.flush()  # what is still buffered fails here, where it is reported
    except KeyboardInterrupt:
        # Wherever it lands (parsing, a command, the final flush): one line, as for a command.
        err.write(f"{prefix}: interrupted\n")
        return 130
    except _OutputError as failure:
        if isinstance(failure.error, BrokenPipeError):
            # The reader went away: stop quietly. From the command line, the interpreter's
            # final flush of the buffered rest must not fail again; a host that called main()
            # keeps its own standard output.
            if argv is None:
                _silence_stdout()
            return EXIT_CLOSED_PIPE
        if argv is None:
            _silence_stdout()
        error = failure.error
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        err.write(f"{prefix}: cannot write output: {_terminal(reason)}\n")
        return 2
    return status


_COMMANDS = frozenset(("demo", "check", "search", "export", "list", "version", "bench"))


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a file descriptor: nothing is flushed to a pipe later


def _main(arguments: list[str], out: _Stream, err: _Stream) -> int:
    if arguments[:1] == ["bench"]:
        # Everything after 'bench' belongs to the report script, '--help' included, which
        # argparse's REMAINDER would not pass on when it comes first.
        try:
            return _bench(arguments[1:])
        except CommandError as error:
            err.write(f"prism-tools bench: {_terminal(str(error))}\n")
            return 2
        except OSError as error:
            err.write(f"prism-tools bench: {_terminal(error.strerror or str(error))}\n")
            return 2
        except (_OutputError, KeyboardInterrupt):
            raise
        except Exception as error:
            # The report script's own failure (bad results, a missing extra): one line.
            reason = f"{type(error).__name__}: {error}"
            err.write(f"prism-tools bench: {_terminal(reason)}\n")
            return 2
    parser = build_parser()
    try:
        with _command_streams(out, err):
            args, unknown = parser.parse_known_args(arguments)
            if unknown:
                # Named with the command they were given to, as every other usage error is.
                command = parser.prog if args.command is None else f"prism-tools {args.command}"
                words = " ".join(unknown)
                _Parser(prog=command).error(f"unrecognized arguments: {words}")
    except SystemExit as exit_:
        # argparse exits on --help and on usage errors; callers get the status back instead.
        code = exit_.code
        return code if isinstance(code, int) else 0 if code is None else 2
    try:
        if args.command == "demo":
            return _demo(args.json, out)
        if args.command == "check":
            return _check(args.catalog, args.json, args.require_schema, out, err)
        if args.command == "search":
            return _search(args.catalog, args.query, args.k, args.json, out)
        if args.command == "export":
            return _export(args.catalog, cast(CatalogFormat, args.format), args.strict, out)
        if args.command == "list":
            return _list(args.domain, out)
        out.write(f"prism-tools {__version__}\n")
        return 0
    except CommandError as error:
        err.write(f"prism-tools {args.command}: {_terminal(str(error))}\n")
        return 2
    except KeyboardInterrupt:
        err.write(f"prism-tools {args.command}: interrupted\n")
        return 130


# The streams of the command running in this thread (or task), for argparse's help and errors.
_STREAMS: ContextVar[tuple[_Stream, _Stream] | None] = ContextVar(
    "prism_tools_cli_streams", default=None
)


@contextmanager
def _command_streams(out: _Stream, err: _Stream) -> Iterator[None]:
    """argparse writes help and usage errors to ``sys.stdout``/``sys.stderr``: ``_Parser`` writes
    them to the command's own streams instead while this holds (per thread, so hosts calling
    ``main`` from several threads keep theirs)."""
    token = _STREAMS.set((out, err))
    try:
        yield
    finally:
        _STREAMS.reset(token)
