"""Instructions a call, counted by callgrind, for the targets whose wall-clock ratio moves with
the machine.

On a shared machine a peer's row can run twice as slow on one report as on the next, which is
enough to turn a verdict either way (see "Noise" in docs/performance.md). Instruction counts do
not move with the neighbours: this script measures the same pairs of rows as the report's
targets, ours and the peer's, as instructions per call, so a change can be judged on numbers
that repeat.

    python benches/instructions.py [--case NAME ...] [--calls N]

Each side runs in a child process under ``valgrind --tool=callgrind`` twice, with ``N`` and
``2N`` calls after the same set-up. Only the batch of calls is counted (start-up and set-up are
not), and the difference over ``N`` is one call. ``PYTHONHASHSEED`` is fixed, since string hashing
moves a count by more than the gaps measured here. Instructions are not time (a cache miss or a
mispredicted branch costs no extra instructions), so this complements the report and does not
replace it. It needs valgrind and the ``bench`` extra, and a release build of the core
(``pip install '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import operator
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Enough calls that the garbage collector's passes, part of what a call costs, average out.
DEFAULT_CALLS = 2000
# The C function callgrind counts inside: CPython's operator.call (3.11 and later).
BATCH_ENTRY = "_operator_call"


@dataclass(frozen=True)
class Case:
    """One target as a pair of sides: ``ours / other`` is read against ``limit``; with
    ``at_least`` the target is ``other / ours >= limit`` (ours so many times faster)."""

    name: str
    target: str
    ours: str
    other: str
    limit: float
    at_least: bool = False
    calls: int = DEFAULT_CALLS

    def ratio(self, ours: int, other: int) -> float:
        return other / ours if self.at_least else ours / other

    def holds(self, ratio: float) -> bool:
        return ratio >= self.limit if self.at_least else ratio <= self.limit


CASES = (
    Case(
        "text-small", "text to validated dict, small schema", "text_small", "text_small_peer", 1.0
    ),
    Case(
        "text-large", "text to validated dict, large schema", "text_large", "text_large_peer", 0.8
    ),
    Case("invalid", "six violations, full compact report", "invalid", "invalid_peer", 0.3),
    Case(
        "compile-small",
        "compile + guards, new small schema",
        "compile_small",
        "compile_small_peer",
        1.2,
    ),
    Case(
        "compile-large",
        "compile + guards, new large schema",
        "compile_large",
        "compile_large_peer",
        1.2,
        calls=100,
    ),
    Case(
        "cache-hit",
        "validation through the identity lookup, over the compiled schema in hand",
        "validate_through_lookup",
        "validate_compiled",
        1.02,
    ),
    Case(
        "floor",
        "dispatch, over the hand-written floor",
        "dispatch",
        "dispatch_floor",
        4.0,
    ),
    Case(
        "openai-agents",
        "dispatch, times faster than openai-agents",
        "dispatch",
        "dispatch_openai_agents",
        8.0,
        at_least=True,
    ),
    Case(
        "events+ledger",
        "dispatch with events and a ledger, over without",
        "dispatch_audited",
        "dispatch",
        3.0,
    ),
)


# --------------------------------------------------------------------------- the measured sides
# Each side builds what it needs once and returns ``run(n)``, which makes ``n`` calls. The rows
# and their data are the report's own (bench_validation.py, bench_dispatch.py).


def _repeat(call: Callable[[], Any]) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            call()

    return run


def _text(case: str, peer: bool) -> Callable[[int], None]:
    import bench_validation as bv

    schema, text = bv.SCHEMAS[case], bv.TEXT[case]
    if peer:
        import jsonschema_rs
        import orjson

        is_valid, loads = jsonschema_rs.validator_for(schema).is_valid, orjson.loads
        assert is_valid(loads(text))
        return _repeat(lambda: is_valid(loads(text)))
    adapter = bv.fresh_adapter(schema)
    assert adapter.parse_and_validate(schema, text) == (bv.VALID[case], [])
    return _repeat(lambda: adapter.parse_and_validate(schema, text))


def _invalid(peer: bool) -> Callable[[int], None]:
    import bench_validation as bv

    if peer:
        import jsonschema_rs

        iter_errors = jsonschema_rs.validator_for(bv.SMALL_SCHEMA).iter_errors
        assert len(list(iter_errors(bv.SMALL_INVALID))) == bv.VIOLATIONS
        return _repeat(lambda: list(iter_errors(bv.SMALL_INVALID)))
    from prism_tools import ToolDefinition, create_json_schema_tool_argument_validator

    tool = ToolDefinition(name="weather", parameters=bv.SMALL_SCHEMA)
    validator = create_json_schema_tool_argument_validator()
    assert validator(tool, bv.SMALL_INVALID) is not None
    return _repeat(lambda: validator(tool, bv.SMALL_INVALID))


def _compile(case: str, peer: bool) -> Callable[[int], None]:
    import bench_validation as bv

    schemas = bv.varied(bv.SCHEMAS[case], "peer" if peer else "ours")
    if peer:
        import jsonschema_rs

        validator_for = jsonschema_rs.validator_for
        return _repeat(lambda: validator_for(next(schemas)))
    from prism_tools._core import SchemaValidator

    core = SchemaValidator()
    # Fill the LRU first, as the report's row does over its rounds: every measured compile
    # then evicts one, as it does there.
    for schema in itertools.islice(schemas, core.cache_info()[2]):
        core.compile(schema)
    return _repeat(lambda: core.compile(next(schemas)))


def _cache(through_lookup: bool) -> Callable[[int], None]:
    """The report's cache rows: its target (a lookup under 2% of a small validation) is the gap
    between them, which is too small for wall-clock medians to tell on a shared machine."""
    import bench_validation as bv

    if through_lookup:
        core, call = bv.lookup_row()
        hits = core.cache_info()[0]
        assert call() is None
        assert core.cache_info()[0] == hits + 1, "the lookup must find the schema by identity"
        return _repeat(call)
    call = bv.compiled_row()
    assert call() is None
    return _repeat(call)


def _dispatch(audited: bool) -> Callable[[int], None]:
    import bench_dispatch as bd

    if audited:
        # Rows are stamped from a per-millisecond cache. Under callgrind a call runs a hundred
        # times slower, so the stamp would be rebuilt every few calls instead of every few hundred
        # as in a real run, by an amount that moves with the machine. A clock that does not move
        # keeps the count what a real call costs, and repeatable.
        import prism_tools.dispatch

        prism_tools.dispatch._time_ns = itertools.repeat(1_764_000_000_000_000_000).__next__
    loop = asyncio.new_event_loop()
    options = {"emit": bd.discard_event, "ledger": bd.DiscardingLedger()} if audited else {}
    bd.check_ours(loop, **options)
    return lambda n: loop.run_until_complete(bd.ours_batch(**options, calls=n)())


def _dispatch_floor() -> Callable[[int], None]:
    import bench_dispatch as bd

    loop = asyncio.new_event_loop()
    loop.run_until_complete(bd.floor_batch(calls=1)())
    return lambda n: loop.run_until_complete(bd.floor_batch(calls=n)())


def _dispatch_openai_agents() -> Callable[[int], None]:
    from agents import function_tool
    from agents.tool_context import ToolContext

    import bench_dispatch as bd

    @function_tool(name_override=bd.TOOL_NAME)
    async def oa_noop(city: str, units: str) -> None:
        return None

    ctx = ToolContext(
        context=None, tool_name=bd.TOOL_NAME, tool_call_id=bd.CALL_ID, tool_arguments=bd.ARGS_JSON
    )
    invoke = oa_noop.on_invoke_tool
    loop = asyncio.new_event_loop()
    assert loop.run_until_complete(invoke(ctx, bd.ARGS_JSON)) is None

    async def batch(n: int) -> None:
        for _ in range(n):
            await invoke(ctx, bd.ARGS_JSON)

    return lambda n: loop.run_until_complete(batch(n))


SIDES: dict[str, Callable[[], Callable[[int], None]]] = {
    "text_small": lambda: _text("small", peer=False),
    "text_small_peer": lambda: _text("small", peer=True),
    "text_large": lambda: _text("large", peer=False),
    "text_large_peer": lambda: _text("large", peer=True),
    "invalid": lambda: _invalid(peer=False),
    "invalid_peer": lambda: _invalid(peer=True),
    "compile_small": lambda: _compile("small", peer=False),
    "compile_small_peer": lambda: _compile("small", peer=True),
    "compile_large": lambda: _compile("large", peer=False),
    "compile_large_peer": lambda: _compile("large", peer=True),
    "validate_through_lookup": lambda: _cache(through_lookup=True),
    "validate_compiled": lambda: _cache(through_lookup=False),
    "dispatch": lambda: _dispatch(audited=False),
    "dispatch_audited": lambda: _dispatch(audited=True),
    "dispatch_floor": _dispatch_floor,
    "dispatch_openai_agents": _dispatch_openai_agents,
}


# ---------------------------------------------------------------------------------- counting

_COLLECTED = re.compile(r"Collected\s*:\s*([0-9]+)")


def collected(valgrind_output: str) -> int:
    """The instruction total callgrind prints at exit (``==pid== Collected : N``)."""
    found = _COLLECTED.findall(valgrind_output)
    if not found:
        raise RuntimeError("callgrind printed no instruction total:\n" + valgrind_output[-2000:])
    return int(found[-1])


def per_call(side: str, calls: int) -> int:
    """Instructions one call of ``side`` takes: runs of ``calls`` and ``2 * calls`` calls,
    counted only inside the batch of calls, differenced."""

    def total(n: int) -> int:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            # Count only inside operator.call, which the child makes the batch's one caller: the
            # interpreter's start-up (about 1.8 billion instructions) differs between runs by up
            # to some 200,000, as much as a few hundred cheap calls.
            f"--toggle-collect={BATCH_ENTRY}",
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            side,
            "--calls",
            str(n),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{side} with {n} calls failed:\n{done.stderr[-2000:]}")
        counted = collected(done.stderr)
        if counted == 0:
            raise RuntimeError(
                f"callgrind counted nothing inside {BATCH_ENTRY}: this Python's library does not"
                " name it (a stripped build?)"
            )
        return counted

    return (total(2 * calls) - total(calls)) // calls


def table(rows: list[tuple[Case, int, int]]) -> str:
    """The results as a Markdown table, one row a target."""
    lines = [
        "| target | ours | other | ratio | limit | holds |",
        "| --- | ---: | ---: | ---: | ---: | :---: |",
    ]
    for case, ours, other in rows:
        ratio = case.ratio(ours, other)
        limit = f"{'at least' if case.at_least else 'at most'} {case.limit:g}x"
        verdict = "yes" if case.holds(ratio) else "**no**"
        lines.append(
            f"| {case.target} | {ours:,} | {other:,} | {ratio:.3f}x | {limit} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=[case.name for case in CASES])
    parser.add_argument("--calls", type=int, help="calls in the shorter run (default per case)")
    parser.add_argument("--child", choices=sorted(SIDES), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    if options.child:
        run = SIDES[options.child]()
        # The one call of operator.call in the child: callgrind counts only inside it.
        operator.call(run, options.calls or DEFAULT_CALLS)
        return 0
    if shutil.which("valgrind") is None:
        print("instructions: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    chosen = [case for case in CASES if not options.case or case.name in options.case]
    rows = []
    for case in chosen:
        calls = options.calls or case.calls
        rows.append((case, per_call(case.ours, calls), per_call(case.other, calls)))
        print(f"instructions: {case.name} done", file=sys.stderr)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
