"""The ``prism-tools`` command: ``demo``, ``list`` and ``version``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from prism_tools import __version__, _json
from prism_tools.demo import format_report, report_data, run_demo
from prism_tools.demo_agent import agent_report_data, format_agent_report, run_agent_demo
from prism_tools.examples import example_domains, example_tools


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``prism-tools`` command."""
    parser = argparse.ArgumentParser(
        prog="prism-tools",
        description="A tool harness for LLM agents. Run 'prism-tools demo' for a tour.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="dispatch scripted calls over the example catalog and show every outcome",
        description="Dispatch scripted tool calls over the built-in example catalog, showing "
        "success with progress, each blocked reason, secret scrubbing and concurrency; then "
        "search the catalog and run a scripted multi-turn agent session with parallel calls. "
        "Runs offline. Exits 1 if anything did not end as scripted.",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON object instead of text")

    listing = commands.add_parser("list", help="list the example catalog's tools")
    listing.add_argument(
        "--domain", choices=example_domains(), help="only the tools of this domain"
    )

    commands.add_parser("version", help="print the installed version")
    return parser


def _demo(as_json: bool, out: TextIO) -> int:
    report = asyncio.run(run_demo())
    agent_report = asyncio.run(run_agent_demo())
    if as_json:
        data = report_data(report)
        data["agent"] = agent_report_data(agent_report)
        out.write(_json.dumps(data).decode("utf-8") + "\n")
    else:
        out.write(format_report(report))
        out.write(format_agent_report(agent_report))
    return 0 if report.ok and agent_report.ok else 1


def _list(domain: str | None, out: TextIO) -> int:
    tools = example_tools(domain)
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        tool_domain = (tool.metadata or {}).get("domain", "")
        out.write(f"{tool.name:<{width}}  {tool_domain:<13}  {tool.description}\n")
    out.write(f"{len(tools)} tools\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status instead of exiting."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        # argparse exits on --help and on usage errors; callers get the status back instead.
        code = exit_.code
        return code if isinstance(code, int) else 0 if code is None else 2
    out = sys.stdout
    if args.command == "demo":
        return _demo(args.json, out)
    if args.command == "list":
        return _list(args.domain, out)
    out.write(f"prism-tools {__version__}\n")
    return 0
