"""Durable dispatch: ``dispatch_tool_call`` with the effect store and ledger of each backend next to
plain ``sqlite3`` / ``psycopg`` writes of the same rows, at concurrency 1 and 16.

Every call dispatches ``send``, a no-op async tool declared ``ToolEffect("external_mutation",
"required")``, with an ``AgentIdentity`` and a fresh tool call id (a repeated id would replay the
stored result). Dispatch then commits five writes per call: the effect store's three transitions
(claim ``pending``, mark ``dispatched``, store the result ``completed``) and the ledger's two rows
(``started``, ``finished``). Groups, one per backend (``--benchmark-group-by=group``):

* ``durability/memory``: ``InMemoryToolEffectStore`` + ``InMemoryRunLedger``. Rows: ours at
  concurrency 1 and 16; ours ``bare dispatch`` (the same tool with no effect declaration, no
  identity, no store and no ledger: what dispatch costs without durability); plain (the same five
  writes as dict updates and list appends).
* ``durability/sqlite``: ``SqliteToolEffectStore`` and ``SqliteRunLedger``, each in its own file
  in a temp dir. Plain: the same five writes with the statements the library runs (``INSERT ...
  ON CONFLICT DO NOTHING`` claim, ``INSERT`` started row, ``UPDATE ... WHERE version = ? AND
  claim_token IS ?`` dispatched, the same ``UPDATE`` completed, ``INSERT`` finished row) as
  single autocommitted statements on two connections of their own to two fresh files made with
  the same schema (the library makes the tables, then the plain rows never touch it). Both
  sides run ``journal_mode=WAL`` and ``synchronous=FULL``: every commit fsyncs the WAL. (Ours
  may commit the writes of concurrent calls together; each call still proceeds only after its
  writes are committed.)
* ``durability/postgres``: ``PostgresToolEffectStore`` and ``PostgresRunLedger``, each given the
  DSN (one connection each, as a DSN gives), tables in a schema of their own. Plain: the same five
  statements with psycopg autocommit on two connections of its own in another schema. The
  server's ``fsync``, ``synchronous_commit`` and ``wal_sync_method`` are read and recorded (the
  ``.ci/postgres.sh`` server keeps PostgreSQL's defaults: every commit waits for its WAL flush).
  Skipped without ``PRISM_TOOLS_PG_DSN`` or psycopg.

In the SQLite and PostgreSQL groups two more ours rows split the cost: ``store only`` (that
backend's effect store, in-memory ledger) and ``ledger only`` (in-memory store, that backend's
ledger).

Row order: ours ``full`` and plain run back to back for each concurrency (a slow spell of the
shared disk then lands on both sides of a ratio), then the split rows.

Concurrency 16: 16 worker coroutines take calls from one counter and await ``dispatch_tool_call``
(ours) or ``asyncio.to_thread`` of one call's five writes (plain; each connection behind a lock,
as ours shares one connection per component). Concurrency 1: one call after the other; plain then
writes directly, without a thread.

Timing: every round runs ``CALLS`` (64) calls in one ``loop.run_until_complete`` on an event loop
made once per row; rounds are fixed from one timed round (about ``ROW_SECONDS``, at least
``MIN_ROUNDS``). Reported times are per round: divide by 64 for one call. Before timing, every row
checks that its calls really ran and committed their rows (the tool's counter, the ledger and the
store or tables grow by the right counts).

Ratios: ``python bench_durability.py FILE [FILE ...]`` on ``--benchmark-json`` output prints calls
per second, ours/plain time per call against the target (at most ``TARGET``, 1.5x, for SQLite and
PostgreSQL), the fsync policy, and the split of ours' time, on each row's lowest median.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from prism_tools import (
    AgentIdentity,
    InMemoryToolEffectStore,
    SqliteRunLedger,
    SqliteToolEffectStore,
    ToolCall,
    ToolDefinition,
    ToolEffect,
    ToolExecutionContext,
    ToolRegistry,
    dispatch_tool_call,
)
from prism_tools.ledger import InMemoryRunLedger

CALLS = 64
"""Calls per benchmark round."""
ROW_SECONDS = 2.0
MIN_ROUNDS = 5
TARGET = 1.5
"""Ours / plain time per call, at most (SQLite and PostgreSQL)."""
CONCURRENCY = (1, 16)
WRITES_PER_CALL = 5

GROUP = "durability/{}"
BACKENDS = ("memory", "sqlite", "postgres")
IDENTITY = AgentIdentity(principal_id="agent_1", tenant_id="tenant_1")
EFFECT = ToolEffect("external_mutation", "required")
ARGS = {"to": "ops@example.com", "amount": 12}
SQLITE_POLICY = "WAL, synchronous=FULL (every commit fsyncs the WAL)"

_ids = itertools.count()


class Counter:
    def __init__(self) -> None:
        self.calls = 0


# ------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    event_loop = asyncio.new_event_loop()
    try:
        yield event_loop
    finally:
        event_loop.close()


@pytest.fixture
def pg_dsn() -> str:
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    dsn = os.environ.get("PRISM_TOOLS_PG_DSN")
    if not dsn:
        pytest.skip("PRISM_TOOLS_PG_DSN is not set (start a server with .ci/postgres.sh start)")
    return dsn


def pg_schema(dsn: str, schema: str) -> Any:
    """A fresh schema ``schema``; an autocommit connection whose search_path is it."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.execute(f"CREATE SCHEMA {schema}")
    return psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}")


def pg_policy(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        found = [
            f"{name}={conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
            for name in ("fsync", "synchronous_commit", "wal_sync_method")
        ]
    return ", ".join(found) + " (every commit waits for its WAL flush)"


def time_calls(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    backend: str,
    batch: Callable[[], Coroutine[Any, Any, None]],
    **info: Any,
) -> None:
    """Time ``batch()`` (``CALLS`` calls) per round on ``loop``."""
    benchmark.group = GROUP.format(backend)
    benchmark.extra_info.update(info, backend=backend, calls_per_round=CALLS)

    def round_() -> None:
        loop.run_until_complete(batch())

    if getattr(benchmark, "disabled", False):
        benchmark(round_)
        return
    round_()
    started = time.perf_counter()
    round_()
    per_round = time.perf_counter() - started
    rounds = max(MIN_ROUNDS, int(ROW_SECONDS / per_round))
    benchmark.pedantic(round_, iterations=1, rounds=rounds, warmup_rounds=0)


def run_workers(
    one_call: Callable[[], Coroutine[Any, Any, None]], concurrency: int
) -> Callable[[], Coroutine[Any, Any, None]]:
    """``CALLS`` calls of ``one_call`` by ``concurrency`` workers taking them from one counter."""

    async def batch() -> None:
        taken = 0

        async def worker() -> None:
            nonlocal taken
            while taken < CALLS:
                taken += 1
                await one_call()

        if concurrency == 1:
            await worker()
        else:
            await asyncio.gather(*(worker() for _ in range(concurrency)))

    return batch


# ------------------------------------------------------------------------------------------ ours


def ours_call(
    counter: Counter, ledger: Any, store: Any, *, bare: bool = False
) -> Callable[[], Coroutine[Any, Any, None]]:
    """One dispatch of ``send`` with a fresh tool call id."""

    async def send(args: dict[str, Any], ctx: ToolExecutionContext) -> dict[str, Any]:
        counter.calls += 1
        return {"sent": True}

    tool = ToolDefinition(name="send", execute=send, effect=None if bare else EFFECT)
    registry = ToolRegistry([tool])
    options: dict[str, Any] = {} if bare else {"identity": IDENTITY}

    async def one_call() -> None:
        call_id = f"call_{next(_ids)}"
        context = ToolExecutionContext(session_id="session_1", run_id="run_1", tool_call_id=call_id)
        result = await dispatch_tool_call(
            ToolCall(call_id, "send", ARGS),
            registry,
            context,
            ledger=ledger,
            effect_store=store,
            **options,
        )
        if result.error is not None:
            raise AssertionError(result.error)

    return one_call


def check_ours(
    loop: asyncio.AbstractEventLoop,
    counter: Counter,
    batch: Callable[[], Coroutine[Any, Any, None]],
    ledger: Any,
    store: Any,
) -> None:
    """A round runs ``CALLS`` tools, writes two ledger rows and one effect record per call."""
    calls, rows = counter.calls, len(ledger) if ledger is not None else 0
    records = stored_effects(store)
    loop.run_until_complete(batch())
    assert counter.calls - calls == CALLS, counter.calls - calls
    if ledger is not None:
        assert len(ledger) - rows == 2 * CALLS, len(ledger) - rows
    if store is not None:
        assert stored_effects(store) - records == CALLS


def stored_effects(store: Any) -> int:
    if store is None:
        return 0
    if isinstance(store, InMemoryToolEffectStore):
        return len(store)
    if isinstance(store, SqliteToolEffectStore):
        with store._lock:
            (count,) = (
                store._connect().execute("SELECT count(*) FROM prism_tool_effects").fetchone()
            )
        return int(count)
    with store._connection() as conn:
        return int(conn.execute("SELECT count(*) FROM prism_tool_effects").fetchone()[0])


def run_ours(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    backend: str,
    concurrency: int,
    ledger: Any,
    store: Any,
    part: str,
    policy: str,
) -> None:
    counter = Counter()
    batch = run_workers(
        ours_call(counter, ledger, store, bare=part == "bare dispatch"), concurrency
    )
    check_ours(loop, counter, batch, ledger, store)
    time_calls(
        benchmark,
        loop,
        backend,
        batch,
        engine="ours",
        part=part,
        concurrency=concurrency,
        policy=policy,
    )


def memory_ours(
    benchmark: Any, loop: asyncio.AbstractEventLoop, concurrency: int, part: str
) -> None:
    if part == "bare dispatch":
        ledger, store = None, None
    else:
        ledger, store = InMemoryRunLedger(), InMemoryToolEffectStore()
    run_ours(benchmark, loop, "memory", concurrency, ledger, store, part, "in memory, no fsync")


def sqlite_ours(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    concurrency: int,
    part: str,
) -> None:
    durable_ledger = part in ("full", "ledger only")
    durable_store = part in ("full", "store only")
    ledger: Any = (
        SqliteRunLedger(tmp_path / "ledger.db", synchronous="FULL")
        if durable_ledger
        else InMemoryRunLedger()
    )
    store: Any = (
        SqliteToolEffectStore(tmp_path / "effects.db")
        if durable_store
        else InMemoryToolEffectStore()
    )
    try:
        run_ours(benchmark, loop, "sqlite", concurrency, ledger, store, part, SQLITE_POLICY)
    finally:
        if durable_ledger:
            ledger.close()
        if durable_store:
            store.close()


def postgres_ours(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    pg_dsn: str,
    concurrency: int,
    part: str,
) -> None:
    from prism_tools import PostgresToolEffectStore
    from prism_tools.ledger_postgres import PostgresRunLedger

    pg_schema(pg_dsn, "bench_ours").close()
    dsn = f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}options=-csearch_path%3Dbench_ours"
    durable_ledger = part in ("full", "ledger only")
    durable_store = part in ("full", "store only")
    ledger: Any = PostgresRunLedger(dsn) if durable_ledger else InMemoryRunLedger()
    store: Any = PostgresToolEffectStore(dsn) if durable_store else InMemoryToolEffectStore()
    try:
        run_ours(benchmark, loop, "postgres", concurrency, ledger, store, part, pg_policy(pg_dsn))
    finally:
        if durable_ledger:
            ledger.close()
        if durable_store:
            store.close()


# ----------------------------------------------------------------------------------------- plain


def sample_rows() -> tuple[str, bytes, str, str]:
    """What one of ours' calls writes, as text: the ``pending`` effect record, the ``completed``
    one, and the ``started`` and ``finished`` ledger rows (taken from one in-memory dispatch)."""
    ledger, store = InMemoryRunLedger(), InMemoryToolEffectStore()
    asyncio.run(ours_call(Counter(), ledger, store)())
    started, finished = (json.dumps(record.to_dict()) for record in ledger.records)
    (blob,) = (row[2] for row in store._rows.values())
    pending = blob.decode("utf-8").replace('"completed"', '"pending"', 1)
    return pending, blob, started, finished


class PlainWriter:
    """One call's five writes as autocommitted statements on two connections (effects, ledger),
    each behind a lock. ``param`` is the driver's placeholder."""

    def __init__(self, effects: Any, ledger: Any, param: str) -> None:
        self.effects, self.ledger = effects, ledger
        self.effects_lock, self.ledger_lock = threading.Lock(), threading.Lock()
        self.pending, self.completed, self.started, self.finished = sample_rows()
        p = param
        slot = f"tenant_id = {p} AND account_id = {p} AND user_id = {p} AND principal_id = {p}"
        slot += f" AND effect_key = {p}"
        cast = "::json" if p == "%s" else ""
        same_token = "IS NOT DISTINCT FROM" if p == "%s" else "IS"
        # The statements ours' stores run: a conditional insert of the claim, then updates
        # conditional on the version and claim token.
        self.insert_effect = (
            "INSERT INTO prism_tool_effects (tenant_id, account_id, user_id, principal_id,"
            " effect_key, status, version, claim_token, updated_ms, record)"
            f" VALUES ({', '.join([p] * 9)}, {p}{cast}) ON CONFLICT DO NOTHING"
        )
        self.update_effect = (
            f"UPDATE prism_tool_effects SET status = {p}, version = {p}, claim_token = {p},"
            f" updated_ms = {p}, record = {p}{cast} WHERE {slot} AND version = {p}"
            f" AND claim_token {same_token} {p}"
        )
        self.insert_row = (
            "INSERT INTO prism_tool_calls"
            " (row_id, session_id, run_id, tool_call_id, name, status, row)"
            f" VALUES ({', '.join([p] * 6)}, {p}{cast})"
        )
        self.record_blob = p != "%s"

    def record(self, text: str | bytes) -> str | bytes:
        if self.record_blob:
            return text if isinstance(text, bytes) else text.encode("utf-8")
        return text.decode("utf-8") if isinstance(text, bytes) else text

    def effect(self, sql: str, values: tuple[Any, ...]) -> None:
        with self.effects_lock:
            count = self.effects.execute(sql, values).rowcount
        assert count == 1, count

    def row(self, values: tuple[Any, ...]) -> None:
        with self.ledger_lock:
            self.ledger.execute(self.insert_row, values)

    def call(self) -> None:
        n = next(_ids)
        slot = ("tenant_1", "", "", "agent_1", f"prism:tool-effect:v1:{n:064x}")
        now = int(time.time() * 1000)
        token = f"token_{n}"
        ids = ("session_1", "run_1", f"call_{n}", "send")
        self.effect(
            self.insert_effect, (*slot, "pending", 1, token, now, self.record(self.pending))
        )
        self.row((f"row_{n}_1", *ids, "started", self.started))
        self.effect(
            self.update_effect,
            ("dispatched", 2, token, now, self.record(self.pending), *slot, 1, token),
        )
        self.effect(
            self.update_effect,
            ("completed", 3, None, now, self.record(self.completed), *slot, 2, token),
        )
        self.row((f"row_{n}_2", *ids, "finished", self.finished))


class PlainMemory:
    """The same five writes into a dict and a list."""

    def __init__(self) -> None:
        self.effects: dict[tuple[str, ...], tuple[str, int, str | None, int, bytes]] = {}
        self.rows: list[tuple[str, ...]] = []
        self.pending, self.completed, self.started, self.finished = sample_rows()
        self.lock = threading.Lock()

    def call(self) -> None:
        n = next(_ids)
        slot = ("tenant_1", "", "", "agent_1", f"prism:tool-effect:v1:{n:064x}")
        now = int(time.time() * 1000)
        token = f"token_{n}"
        ids = ("session_1", "run_1", f"call_{n}", "send")
        pending = self.pending.encode("utf-8")
        with self.lock:
            self.effects[slot] = ("pending", 1, token, now, pending)
        self.rows.append((f"row_{n}_1", *ids, "started", self.started))
        with self.lock:
            self.effects[slot] = ("dispatched", 2, token, now, pending)
        with self.lock:
            self.effects[slot] = ("completed", 3, None, now, self.completed)
        self.rows.append((f"row_{n}_2", *ids, "finished", self.finished))


def plain_call(
    writer: PlainWriter | PlainMemory, concurrency: int, *, threads: bool
) -> Callable[[], Coroutine[Any, Any, None]]:
    """One call's writes: directly at concurrency 1, else in a worker thread (SQL) or inline."""

    async def direct() -> None:
        writer.call()

    async def in_thread() -> None:
        await asyncio.to_thread(writer.call)

    return in_thread if threads and concurrency > 1 else direct


def run_plain(
    benchmark: Any,
    loop: asyncio.AbstractEventLoop,
    backend: str,
    concurrency: int,
    writer: PlainWriter | PlainMemory,
    count: Callable[[], tuple[int, int]],
    policy: str,
) -> None:
    batch = run_workers(plain_call(writer, concurrency, threads=backend != "memory"), concurrency)
    effects, rows = count()
    loop.run_until_complete(batch())
    assert count() == (effects + CALLS, rows + 2 * CALLS), (count(), effects, rows)
    time_calls(
        benchmark,
        loop,
        backend,
        batch,
        engine="plain",
        part="full",
        concurrency=concurrency,
        policy=policy,
    )


def memory_plain(benchmark: Any, loop: asyncio.AbstractEventLoop, concurrency: int) -> None:
    writer = PlainMemory()
    run_plain(
        benchmark,
        loop,
        "memory",
        concurrency,
        writer,
        lambda: (len(writer.effects), len(writer.rows)),
        "in memory, no fsync",
    )


def sqlite_plain(
    benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path, concurrency: int
) -> None:
    # The library makes the tables (same schema and indexes), then plain connections write.
    SqliteRunLedger(tmp_path / "ledger.db").close()
    SqliteToolEffectStore(tmp_path / "effects.db")._connect().close()
    connections = []
    for name in ("effects.db", "ledger.db"):
        db = sqlite3.connect(tmp_path / name, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        connections.append(db)
    effects, ledger = connections
    assert effects.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    writer = PlainWriter(effects, ledger, "?")

    def count() -> tuple[int, int]:
        (stored,) = effects.execute("SELECT count(*) FROM prism_tool_effects").fetchone()
        (rows,) = ledger.execute("SELECT count(*) FROM prism_tool_calls").fetchone()
        return stored, rows

    try:
        run_plain(benchmark, loop, "sqlite", concurrency, writer, count, SQLITE_POLICY)
    finally:
        for db in connections:
            db.close()


def postgres_plain(
    benchmark: Any, loop: asyncio.AbstractEventLoop, pg_dsn: str, concurrency: int
) -> None:
    from prism_tools import PostgresToolEffectStore
    from prism_tools.ledger_postgres import PostgresRunLedger

    effects = pg_schema(pg_dsn, "bench_plain")
    PostgresToolEffectStore(effects).close()
    ledger = pg_schema(pg_dsn, "bench_plain_ledger")
    PostgresRunLedger(ledger).close()
    writer = PlainWriter(effects, ledger, "%s")

    def count() -> tuple[int, int]:
        stored = effects.execute("SELECT count(*) FROM prism_tool_effects").fetchone()[0]
        rows = ledger.execute("SELECT count(*) FROM prism_tool_calls").fetchone()[0]
        return int(stored), int(rows)

    try:
        run_plain(benchmark, loop, "postgres", concurrency, writer, count, pg_policy(pg_dsn))
    finally:
        effects.close()
        ledger.close()


# ----------------------------------------------------------------------------------------- rows

# Each compared pair (ours full and plain, at one concurrency) runs back to back, so that a slow
# spell of the shared disk falls on both sides of a ratio rather than on one.
Case = tuple[str, str, int]
"""(engine, part, concurrency)."""


def cases(parts: Sequence[str]) -> list[Case]:
    paired = [(engine, "full", c) for c in CONCURRENCY for engine in ("ours", "plain")]
    return paired + [("ours", part, c) for part in parts for c in CONCURRENCY]


def case_id(case: Case) -> str:
    engine, part, concurrency = case
    return f"{engine}-{part.replace(' ', '_')}-c{concurrency}"


@pytest.mark.parametrize("case", cases(["bare dispatch"]), ids=case_id)
def test_memory(benchmark: Any, loop: asyncio.AbstractEventLoop, case: Case) -> None:
    engine, part, concurrency = case
    if engine == "ours":
        memory_ours(benchmark, loop, concurrency, part)
    else:
        memory_plain(benchmark, loop, concurrency)


@pytest.mark.parametrize("case", cases(["store only", "ledger only"]), ids=case_id)
def test_sqlite(
    benchmark: Any, loop: asyncio.AbstractEventLoop, tmp_path: Path, case: Case
) -> None:
    engine, part, concurrency = case
    if engine == "ours":
        sqlite_ours(benchmark, loop, tmp_path, concurrency, part)
    else:
        sqlite_plain(benchmark, loop, tmp_path, concurrency)


@pytest.mark.parametrize("case", cases(["store only", "ledger only"]), ids=case_id)
def test_postgres(benchmark: Any, loop: asyncio.AbstractEventLoop, pg_dsn: str, case: Case) -> None:
    engine, part, concurrency = case
    if engine == "ours":
        postgres_ours(benchmark, loop, pg_dsn, concurrency, part)
    else:
        postgres_plain(benchmark, loop, pg_dsn, concurrency)


# ---------------------------------------------------------------------------------------- report

Key = tuple[str, str, str, int]
"""(backend, engine, part, concurrency)."""


def ratio_report(paths: Sequence[str]) -> str:
    """Markdown: calls per second, ours/plain against the target and ours' split, per backend and
    concurrency, on each row's lowest median over the files."""
    best: dict[Key, float] = {}
    policies: dict[str, str] = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        for bench in report["benchmarks"]:
            info = bench.get("extra_info", {})
            if "engine" not in info or not str(bench.get("group", "")).startswith("durability/"):
                continue
            key = (info["backend"], info["engine"], info["part"], info["concurrency"])
            per_call = bench["stats"]["median"] / info["calls_per_round"]
            best[key] = min(per_call, best.get(key, float("inf")))
            policies[info["backend"]] = info["policy"]
    lines = [
        f"Median per call, lowest over {len(paths)} run(s). Ours: dispatch_tool_call with the "
        f"backend's effect store and ledger ({WRITES_PER_CALL} commits per call); plain: the same "
        "commits as single autocommitted statements.",
        "",
        "| backend | concurrency | ours calls/s | plain calls/s | ours / plain (time) | target "
        "| fsync policy |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for backend in BACKENDS:
        for concurrency in CONCURRENCY:
            ours = best.get((backend, "ours", "full", concurrency))
            plain = best.get((backend, "plain", "full", concurrency))
            if ours is None or plain is None:
                continue
            ratio = ours / plain
            if backend == "memory":
                verdict = "- (no target)"
            else:
                verdict = f"<= {TARGET:g}x: **{'met' if ratio <= TARGET else 'NOT met'}**"
            lines.append(
                f"| {backend} | {concurrency} | {cps(ours)} | {cps(plain)} | {ratio:.2f}x "
                f"| {verdict} | {policies.get(backend, '-')} |"
            )
    lines += ["", "Where ours' time goes (us per call):", ""]
    lines += [
        "| backend | concurrency | row | us per call | calls/s |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for (backend, engine, part, concurrency), seconds in sorted(best.items()):
        lines.append(
            f"| {backend} | {concurrency} | {engine}: {part} | {seconds * 1e6:,.1f} "
            f"| {cps(seconds)} |"
        )
    return "\n".join(lines)


def cps(seconds: float) -> str:
    return f"{1 / seconds:,.0f}"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} BENCHMARK_JSON [BENCHMARK_JSON ...]")
    print(ratio_report(sys.argv[1:]))
