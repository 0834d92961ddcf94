"""Crash tests: a worker killed with SIGKILL at random points of a call with a durable effect.

Each round forks a worker that dispatches one call of a tool with an
``external_mutation``/``required`` effect, through an effect store and a ledger on disk (SQLite)
or on a real server (PostgreSQL). The tool writes its side effect (a row in a side table) and
then waits a random moment. The parent kills the worker at a random moment of the call, then
delivers the same call again in the parent, as a fresh worker would. After every kill:

* the side effect happened at most once;
* a redelivery never runs a call that may have run: it is replayed from a completed record or
  refused as ``ERR_PRISM_TOOL_EFFECT_UNKNOWN``; only a call that was never claimed runs (once);
* the ledger holds every row the dead worker had moved past: if the side effect happened, its
  ``started`` row is there.

``PRISM_CRASH_KILLS`` sets the number of kills per store (200 under CI, 25 otherwise). Three
more kills land where the worker says it has got to (before its call, in the tool once the side
effect is written, after the call returned), so each outcome comes up whatever the scheduling.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from tests.pg import PgSchema

from prism_tools import (
    AgentIdentity,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
)
from prism_tools.effect_stores import SqliteToolEffectStore
from prism_tools.effects import ToolEffect
from prism_tools.ledger_sqlite import SqliteRunLedger

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL and fork")

IDENTITY = AgentIdentity(principal_id="worker", tenant_id="t1")
EFFECT = ToolEffect("external_mutation", "required")


def kills() -> int:
    default = 200 if os.environ.get("CI") == "true" else 25
    return int(os.environ.get("PRISM_CRASH_KILLS", default))


Backend = tuple[Callable[[], Any], Callable[[], Any]]
"""(make an effect store, make a ledger), called inside the process that uses them."""


def side_effects(side: Path, call_id: str) -> int:
    with closing(sqlite3.connect(side)) as conn, conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM transfers WHERE call = ?", (call_id,)
        ).fetchone()
    return int(count)


# Where a worker waits to be killed, told by ``reached``, and what a redelivery then does.
HELD = {
    "before its call": "ran on redelivery",
    "in the tool": "refused",
    "after its call": "replayed",
}


def make_tool(side: Path, pause: float, reached: Any = None) -> ToolDefinition:
    async def transfer(args: dict[str, Any], ctx: ToolExecutionContext) -> dict[str, Any]:
        with closing(sqlite3.connect(side)) as conn, conn:
            conn.execute("INSERT INTO transfers (call) VALUES (?)", (ctx.tool_call_id,))
        if reached is not None:
            reached.set()
            await asyncio.get_running_loop().create_future()  # killed while waiting here
        await asyncio.sleep(pause)
        return {"transferred": args["amount"]}

    return ToolDefinition("transfer", execute=transfer, effect=EFFECT)


async def deliver(
    call_id: str, side: Path, backend: Backend, pause: float, reached: Any = None
) -> ToolResult:
    make_store, make_ledger = backend
    store, ledger = make_store(), make_ledger()
    try:
        return await dispatch_tool_call(
            ToolCall(call_id, "transfer", {"amount": 5}),
            create_tool_registry([make_tool(side, pause, reached)]),
            ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=call_id),
            identity=IDENTITY,
            effect_store=store,
            ledger=ledger,
        )
    finally:
        store.close()
        ledger.close()


def worker(
    call_id: str, side: str, backend: Backend, pause: float, hold: str | None, reached: Any
) -> None:
    if hold == "before its call":
        reached.set()
        time.sleep(3600)  # killed while waiting here
    asyncio.run(
        deliver(call_id, Path(side), backend, pause, reached if hold == "in the tool" else None)
    )
    if hold == "after its call":
        reached.set()
        time.sleep(3600)
    os._exit(0)


def crash_rounds(tmp_path: Path, backend: Backend, rows: Callable[[str], list[Any]]) -> None:
    side = tmp_path / "side.db"
    with closing(sqlite3.connect(side)) as conn, conn:
        conn.execute("CREATE TABLE transfers (call TEXT)")
    context = multiprocessing.get_context("fork")
    rng = random.Random(20261130)
    for number, hold in enumerate([*HELD, *[None] * kills()]):
        call_id = f"call-{number}"
        reached = context.Event()
        pause = 0.0 if hold else rng.uniform(0.0, 0.02)
        process = context.Process(
            target=worker, args=(call_id, str(side), backend, pause, hold, reached)
        )
        process.start()
        if hold is None:
            time.sleep(rng.uniform(0.0, 0.06))
        else:
            assert reached.wait(60), f"{call_id}: the worker never got {hold}"
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        before = side_effects(side, call_id)
        assert before <= 1
        result = asyncio.run(deliver(call_id, side, backend, 0.0))
        after = side_effects(side, call_id)
        if result.error is None:
            # Replayed from a completed record, or never claimed and run now: once either way.
            assert after == 1
            kind = "replayed" if before == 1 else "ran on redelivery"
        else:
            assert result.error.code in {
                "ERR_PRISM_TOOL_EFFECT_UNKNOWN",
                "ERR_PRISM_TOOL_EFFECT_CONFLICT",
            }
            assert after == before  # a call that may have run never runs again
            kind = "refused"
        if before == 1:
            statuses = [row.status for row in rows(call_id)]
            assert "started" in statuses, f"{call_id}: the started row was lost"
        # The kills hit the interesting moments, not only one of them: each of the three
        # outcomes comes at least from its held kill (how the random ones fall depends on the
        # machine's speed).
        if hold is not None:
            assert kind == HELD[hold], f"{call_id}: killed {hold}, then {kind}"


def test_sqlite_worker_killed_at_random_points(tmp_path: Path) -> None:
    effects, ledger_file = str(tmp_path / "effects.db"), str(tmp_path / "ledger.db")

    def store() -> SqliteToolEffectStore:
        return SqliteToolEffectStore(effects)

    def ledger() -> SqliteRunLedger:
        return SqliteRunLedger(ledger_file)

    def rows(call: str) -> list[Any]:
        with ledger() as opened:
            return opened.rows(tool_call_id=call)

    crash_rounds(tmp_path, (store, ledger), rows)


@pytest.mark.postgres
def test_postgres_worker_killed_at_random_points(tmp_path: Path, pg_schema: PgSchema) -> None:
    from prism_tools import PostgresRunLedger, PostgresToolEffectStore

    dsn = pg_schema.dsn

    def store() -> PostgresToolEffectStore:
        return PostgresToolEffectStore(dsn)

    def ledger() -> PostgresRunLedger:
        return PostgresRunLedger(dsn)

    def rows(call: str) -> list[Any]:
        with ledger() as opened:
            return opened.rows(tool_call_id=call)

    crash_rounds(tmp_path, (store, ledger), rows)
