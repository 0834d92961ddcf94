"""PostgresToolEffectStore on a real server: the shared conformance suite, records outliving the
connection, schema versioning, processes racing for one claim, and lost connections."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from tests.effects_conformance import (
    IDENTITY,
    START,
    EffectStoreConformance,
    ManualClock,
    make_key,
    result_for,
)
from tests.pg import PgSchema, with_options
from tests.support import ledger_row

from prism_tools import (
    InMemoryRunLedger,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
    effect_stores_postgres,
)
from prism_tools.effect_stores_postgres import (
    COMPONENT,
    SCHEMA_VERSION,
    PostgresToolEffectStore,
)
from prism_tools.effects import (
    ERR_TOOL_EFFECT_LIMIT,
    ToolEffect,
    ToolEffectError,
    ToolEffectStore,
)
from prism_tools.identity import AgentIdentity, Ownership

postgres = pytest.mark.postgres


@postgres
class TestPostgresStore(EffectStoreConformance):
    @pytest.fixture
    def make_store(self, pg_schema: PgSchema) -> Iterator[Any]:
        stores: list[PostgresToolEffectStore] = []

        def build(now: Any) -> PostgresToolEffectStore:
            store = PostgresToolEffectStore(pg_schema.dsn, now=now)
            stores.append(store)
            return store

        yield build
        for store in stores:
            store.close()


@postgres
class TestPostgresStoreOnAPool(EffectStoreConformance):
    """The suite again with a pool whose connections are not in autocommit mode, so that
    concurrent calls of one store really run in parallel."""

    @pytest.fixture
    def make_store(self, pg_schema: PgSchema) -> Iterator[Any]:
        from psycopg_pool import ConnectionPool

        with ConnectionPool(pg_schema.dsn, min_size=1, max_size=8, open=True) as pool:
            yield lambda now: PostgresToolEffectStore(pool, now=now)


def wait_until_gone(schema: PgSchema, application_name: str) -> None:
    deadline = time.monotonic() + 30
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
    while schema.scalar(query, application_name):
        assert time.monotonic() < deadline, f"{application_name} is still connected"
        time.sleep(0.01)


def terminate(schema: PgSchema, application_name: str) -> None:
    schema.sql.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (application_name,),
    )
    wait_until_gone(schema, application_name)


# --- durability and schema ------------------------------------------------------------------------


@postgres
async def test_records_survive_reconnecting(pg_schema: PgSchema) -> None:
    key = make_key()
    with PostgresToolEffectStore(pg_schema.dsn) as first:
        claim = (await first.begin(key)).record
        assert claim.claim_token is not None
        sent = await first.mark_dispatched(key, claim_token=claim.claim_token, expected_version=1)
    with PostgresToolEffectStore(pg_schema.dsn) as second:
        assert await second.get(key) == sent
        assert (await second.begin(key)).outcome == "existing"
        done = await second.complete(
            key, claim_token=sent.claim_token or "", expected_version=2, result=result_for(key)
        )
    with PostgresToolEffectStore(pg_schema.dsn) as third:
        assert await third.get(key) == done
    row = pg_schema.sql.execute(
        "SELECT status, version, claim_token, record->>'status' FROM prism_tool_effects"
    ).fetchall()
    assert row == [("completed", 3, None, "completed")]


@postgres
async def test_lazy_expiry_is_written_back(pg_schema: PgSchema) -> None:
    clock = ManualClock()
    key = make_key()
    with PostgresToolEffectStore(pg_schema.dsn, now=clock) as store:
        await store.begin(key, claim_ttl_ms=10)
        clock.advance(10)
        expired = await store.get(key)
    assert expired is not None
    assert expired.status == "failed_retryable"
    assert pg_schema.sql.execute(
        "SELECT status, version, claim_token FROM prism_tool_effects"
    ).fetchall() == [("failed_retryable", 2, None)]


@postgres
async def test_the_schema_is_versioned_and_a_newer_one_is_refused(pg_schema: PgSchema) -> None:
    with PostgresToolEffectStore(pg_schema.dsn) as store:
        await store.get(make_key())
    assert pg_schema.sql.execute(
        "SELECT component, version FROM prism_schema_version"
    ).fetchall() == [(COMPONENT, SCHEMA_VERSION)]
    pg_schema.sql.execute(
        "UPDATE prism_schema_version SET version = %s WHERE component = %s",
        (SCHEMA_VERSION + 1, COMPONENT),
    )
    name = f"prism-refused-{uuid.uuid4().hex[:12]}"
    with pytest.raises(RuntimeError, match="newer"):
        PostgresToolEffectStore(with_options(pg_schema.dsn, application_name=name))
    # The refused store closed the connection it had opened.
    wait_until_gone(pg_schema, name)


@postgres
def test_the_store_and_the_ledger_share_a_schema(pg_schema: PgSchema) -> None:
    from prism_tools.ledger_postgres import SCHEMA_VERSION as LEDGER_VERSION
    from prism_tools.ledger_postgres import PostgresRunLedger

    PostgresToolEffectStore(pg_schema.dsn).close()
    PostgresRunLedger(pg_schema.dsn).close()
    PostgresToolEffectStore(pg_schema.dsn).close()
    assert sorted(
        pg_schema.sql.execute("SELECT component, version FROM prism_schema_version").fetchall()
    ) == [("ledger", LEDGER_VERSION), (COMPONENT, SCHEMA_VERSION)]


@postgres
def test_stores_racing_to_create_the_schema_all_succeed(pg_schema: PgSchema) -> None:
    count = 8
    barrier = threading.Barrier(count)
    stores: list[PostgresToolEffectStore] = []
    errors: list[BaseException] = []

    def opener() -> None:
        barrier.wait()
        try:
            stores.append(PostgresToolEffectStore(pg_schema.dsn))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=opener) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in stores:
        store.close()
    assert errors == []
    assert pg_schema.scalar("SELECT count(*) FROM prism_schema_version") == 1


@postgres
async def test_every_string_a_result_can_hold_comes_back(pg_schema: PgSchema) -> None:
    key = make_key(arguments={"nul": "a\x00b"})
    value = {"nul": "a\x00b", "emoji": "\U0001f600", "quote": 'it\'s "x"', "bs": "\\u0000"}
    with PostgresToolEffectStore(pg_schema.dsn) as store:
        claim = (await store.begin(key)).record
        token = claim.claim_token or ""
        await store.mark_dispatched(key, claim_token=token, expected_version=1)
        await store.complete(
            key, claim_token=token, expected_version=2, result=result_for(key, value)
        )
    with PostgresToolEffectStore(pg_schema.dsn) as again:
        record = await again.get(key)
    assert record is not None
    assert record.result is not None
    assert record.result.value == value


@postgres
async def test_ids_with_a_nul_character_are_refused(pg_schema: PgSchema) -> None:
    identity = AgentIdentity(principal_id="agent\x00", tenant_id="t1")
    key = make_key(identity=identity, ownership=Ownership("t1"))
    with PostgresToolEffectStore(pg_schema.dsn) as store:
        with pytest.raises(ToolEffectError) as info:
            await store.begin(key)
        assert info.value.code == ERR_TOOL_EFFECT_LIMIT
        assert await store.cleanup(ownership=Ownership("t\x00"), before=START) == 0


@postgres
def test_bad_sources_are_refused(pg_schema: PgSchema) -> None:
    import psycopg

    with pytest.raises(TypeError, match="connection string"):
        PostgresToolEffectStore(42)  # type: ignore[arg-type]
    with psycopg.connect(pg_schema.dsn) as conn, pytest.raises(ValueError, match="autocommit"):
        PostgresToolEffectStore(conn)
    closed = psycopg.connect(pg_schema.dsn, autocommit=True)
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        PostgresToolEffectStore(closed)
    with pytest.raises(RuntimeError, match="no schema"):
        PostgresToolEffectStore(
            with_options(pg_schema.dsn, options="-c search_path=no_such_schema")
        )


@postgres
async def test_a_borrowed_connection_stays_open(pg_schema: PgSchema) -> None:
    import psycopg

    with psycopg.connect(pg_schema.dsn, autocommit=True) as conn:
        store = PostgresToolEffectStore(conn)
        assert isinstance(store, ToolEffectStore)
        assert (await store.begin(make_key())).outcome == "acquired"
        store.close()
        store.close()
        assert not conn.closed
        with pytest.raises(RuntimeError, match="closed"):
            await store.get(make_key())


@postgres
def test_a_ledger_and_a_store_on_one_borrowed_connection_work_from_two_threads(
    pg_schema: PgSchema,
) -> None:
    # Each used to lock only itself, so the store's statements landed inside the ledger's
    # pipelined batches: "another command is already in progress", claims lost.
    import psycopg

    from prism_tools.ledger_postgres import PostgresRunLedger

    keys = 200
    errors: list[BaseException] = []
    acquired: list[str] = []
    appended: list[str] = []
    ledger_started, stop = threading.Event(), threading.Event()

    def append_rows(ledger: PostgresRunLedger) -> None:
        async def main() -> None:
            batch = 0
            while not stop.is_set():
                call_ids = [f"c{batch}-{n}" for n in range(8)]
                waiting = [ledger.append_tool_call(ledger_row(call_id)) for call_id in call_ids]
                outcomes = await asyncio.gather(
                    *(write for write in waiting if write is not None), return_exceptions=True
                )
                errors.extend(item for item in outcomes if isinstance(item, BaseException))
                appended.extend(call_ids)
                ledger_started.set()
                batch += 1

        try:
            asyncio.run(main())
        except BaseException as err:
            errors.append(err)
        finally:
            ledger_started.set()

    def claim_keys(store: PostgresToolEffectStore) -> None:
        async def main() -> None:
            for start in range(0, keys, 10):
                outcomes = await asyncio.gather(
                    *(store.begin(make_key(f"k{n}")) for n in range(start, start + 10)),
                    return_exceptions=True,
                )
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        errors.append(outcome)
                    elif outcome.outcome == "acquired":
                        acquired.append(outcome.record.key)

        try:
            asyncio.run(main())
        except BaseException as err:
            errors.append(err)

    with psycopg.connect(pg_schema.dsn, autocommit=True) as conn:
        ledger, store = PostgresRunLedger(conn), PostgresToolEffectStore(conn)
        # Daemon threads: one stuck on the connection must fail the test, not hang the process.
        writer = threading.Thread(target=append_rows, args=(ledger,), daemon=True)
        claimer = threading.Thread(target=claim_keys, args=(store,), daemon=True)
        writer.start()
        try:
            assert ledger_started.wait(10)
            claimer.start()
            claimer.join(30)
        finally:
            stop.set()
            writer.join(30)
        assert not claimer.is_alive()
        assert not writer.is_alive()
        assert not errors, f"{len(errors)} errors, the first: {errors[0]!r}"
        assert len(acquired) == keys
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is left usable
        store.close()
        ledger.close()
    stored = {key for (key,) in pg_schema.sql.execute("SELECT effect_key FROM prism_tool_effects")}
    assert stored == set(acquired)
    assert pg_schema.scalar("SELECT count(*) FROM prism_tool_calls") == len(appended)


def test_a_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"prism-tools\[postgres\]"):
        PostgresToolEffectStore("postgresql://nobody@127.0.0.1:1/none")


# --- races ------------------------------------------------------------------------------------


@postgres
async def test_stores_racing_on_one_key_acquire_once(
    pg_schema: PgSchema, monkeypatch: pytest.MonkeyPatch
) -> None:
    inserts: list[bool] = []
    insert = PostgresToolEffectStore._insert

    def counting(self: PostgresToolEffectStore, *args: Any) -> bool:
        written = insert(self, *args)
        inserts.append(written)
        return written

    monkeypatch.setattr(PostgresToolEffectStore, "_insert", counting)
    stores = [PostgresToolEffectStore(pg_schema.dsn) for _ in range(4)]
    try:
        for index in range(25):
            key = make_key(f"k{index}")
            inserts.clear()
            outcomes = await asyncio.gather(*(store.begin(key) for store in stores))
            assert [item.outcome for item in outcomes].count("acquired") == 1
            assert len({item.record.claim_token for item in outcomes}) == 1
            # Every store tried to insert its own claim; the losers' inserts changed no row.
            assert sorted(inserts) == [False, False, False, True]
    finally:
        for store in stores:
            store.close()


@postgres
async def test_a_clean_call_is_three_statements_and_no_read(
    pg_schema: PgSchema, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    write_once = PostgresToolEffectStore._write_once

    def recording(self: PostgresToolEffectStore, sql: str, values: Any) -> bool:
        statements.append(sql)
        return write_once(self, sql, values)

    def no_read(*args: Any) -> Any:
        raise AssertionError("a clean call read its record")

    with PostgresToolEffectStore(pg_schema.dsn) as store:
        monkeypatch.setattr(PostgresToolEffectStore, "_write_once", recording)
        monkeypatch.setattr(PostgresToolEffectStore, "_attempt", staticmethod(no_read))
        key = make_key()
        claim = (await store.begin(key)).record
        sent = await store.mark_dispatched_from(key, claim)
        done = await store.complete_from(key, sent, result_for(key))
        monkeypatch.undo()
        assert [sql.split()[0] for sql in statements] == ["INSERT", "UPDATE", "UPDATE"]
        assert "ON CONFLICT DO NOTHING" in statements[0]
        assert all(
            "version = %s AND claim_token IS NOT DISTINCT FROM" in sql for sql in statements[1:]
        )
        assert await store.get(key) == done


@postgres
async def test_a_batch_is_one_pipeline_and_racing_claims_in_it_have_one_winner(
    pg_schema: PgSchema, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipelines: list[int] = []
    pipelined = effect_stores_postgres.run_together

    def counting(connections: Any, writes: list[Any]) -> Any:
        pipelines.append(len(writes))
        return pipelined(connections, writes)

    monkeypatch.setattr(effect_stores_postgres, "run_together", counting)
    with PostgresToolEffectStore(pg_schema.dsn) as store:
        same = make_key("call-same")
        others = [make_key(f"call-{index}") for index in range(4)]
        outcomes = await asyncio.gather(
            *(store.begin(same) for _ in range(4)), *(store.begin(key) for key in others)
        )
        # The eight claims went to the server as one pipeline; of the four racing for one key
        # exactly one won, as when each is its own statement.
        assert pipelines[0] == 8
        assert sorted(item.outcome for item in outcomes[:4]) == ["acquired"] + ["existing"] * 3
        assert [item.outcome for item in outcomes[4:]] == ["acquired"] * 4
        winner = next(item.record for item in outcomes[:4] if item.outcome == "acquired")
        assert await store.get(same) == winner
        # Dispatch's transitions of the four other claims (from the records it holds) are a
        # pipeline of conditional swaps.
        pipelines.clear()
        sent = await asyncio.gather(
            *(
                store.mark_dispatched_from(key, item.record)
                for key, item in zip(others, outcomes[4:], strict=True)
            )
        )
        assert pipelines == [4]
        assert [(record.status, record.version) for record in sent] == [("dispatched", 2)] * 4


@postgres
async def test_concurrent_writes_share_one_transaction(
    pg_schema: PgSchema, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    commit_together = PostgresToolEffectStore._commit_together

    def recording(self: PostgresToolEffectStore, writes: list[Any]) -> Any:
        batches.append(len(writes))
        return commit_together(self, writes)

    monkeypatch.setattr(PostgresToolEffectStore, "_commit_together", recording)
    with PostgresToolEffectStore(pg_schema.dsn) as store:
        keys = [make_key(f"call-{index}") for index in range(5)]
        outcomes = await asyncio.gather(*(store.begin(key) for key in keys))
        assert [item.outcome for item in outcomes] == ["acquired"] * 5
        assert batches == [5]
        for key, outcome in zip(keys, outcomes, strict=True):
            assert await store.get(key) == outcome.record
        # A write that fails in a batch fails alone; the others are committed.
        original = PostgresToolEffectStore._insert

        def failing(self: PostgresToolEffectStore, slot: Any, record: Any, blob: bytes) -> bool:
            if record.tool_call_id == "call-bad":
                raise RuntimeError("refused")
            return original(self, slot, record, blob)

        monkeypatch.setattr(PostgresToolEffectStore, "_insert", failing)
        names = ["call-a", "call-bad", "call-b"]
        mixed = await asyncio.gather(
            *(store.begin(make_key(name)) for name in names), return_exceptions=True
        )
        assert isinstance(mixed[1], RuntimeError)
        assert [getattr(item, "outcome", None) for item in mixed] == ["acquired", None, "acquired"]
        assert await store.get(make_key("call-bad")) is None
        assert await store.get(make_key("call-a")) is not None


@postgres
async def test_racing_transitions_have_one_winner(pg_schema: PgSchema) -> None:
    stores = [PostgresToolEffectStore(pg_schema.dsn) for _ in range(4)]
    try:
        key = make_key()
        claim = (await stores[0].begin(key)).record
        token = claim.claim_token or ""
        outcomes = await asyncio.gather(
            *(
                store.mark_dispatched(key, claim_token=token, expected_version=1)
                for store in stores
            ),
            return_exceptions=True,
        )
        assert sum(not isinstance(item, BaseException) for item in outcomes) == 1
        assert all(
            isinstance(item, ToolEffectError) for item in outcomes if isinstance(item, Exception)
        )
    finally:
        for store in stores:
            store.close()


# The durability issue asks for 1,000 races in CI; a local run does fewer.
RACE_ROUNDS = 1000 if os.environ.get("CI") == "true" else 250


def race_worker(dsn: str, barrier: Any, rounds: int, queue: Any) -> None:
    """Child process body: ``begin`` each round's key once, in step with the other process."""

    async def main() -> list[str]:
        outcomes = []
        with PostgresToolEffectStore(dsn) as store:
            for index in range(rounds):
                await asyncio.to_thread(barrier.wait)
                outcomes.append((await store.begin(make_key(f"race-{index}"))).outcome)
        return outcomes

    queue.put(asyncio.run(main()))


@postgres
def test_processes_racing_begin_acquire_once(pg_schema: PgSchema) -> None:
    workers = 2
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    queue = context.Queue()
    processes = [
        context.Process(target=race_worker, args=(pg_schema.dsn, barrier, RACE_ROUNDS, queue))
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    results = [queue.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0
    for index in range(RACE_ROUNDS):
        assert sorted(result[index] for result in results) == ["acquired", "existing"], index
    assert pg_schema.sql.execute(
        "SELECT count(*), min(version), max(version) FROM prism_tool_effects"
    ).fetchall() == [(RACE_ROUNDS, 1, 1)]


# --- lost connections ---------------------------------------------------------------------------


class KillingClock:
    """A clock that, once armed, terminates the store's connection on its n-th reading.

    The base store reads the clock once while checking the key (before touching the database)
    and once inside the transition, after the row was read and before the write; arming it with
    ``n=2`` therefore cuts the connection in the middle of the call.
    """

    def __init__(self, schema: PgSchema, application_name: str) -> None:
        self.schema = schema
        self.application_name = application_name
        self.countdown = 0

    def arm(self, n: int) -> None:
        self.countdown = n

    def __call__(self) -> datetime:
        if self.countdown:
            self.countdown -= 1
            if not self.countdown:
                terminate(self.schema, self.application_name)
        return START


@postgres
async def test_a_connection_dropped_mid_call_is_an_error_and_the_next_call_works(
    pg_schema: PgSchema,
) -> None:
    import psycopg

    name = f"prism-effects-{uuid.uuid4().hex[:12]}"
    clock = KillingClock(pg_schema, name)
    key = make_key()
    with PostgresToolEffectStore(
        with_options(pg_schema.dsn, application_name=name), clock
    ) as store:
        # Cut after the read, before the INSERT: begin fails, and nothing was claimed.
        clock.arm(2)
        with pytest.raises(psycopg.OperationalError):
            await store.begin(key)
        assert clock.countdown == 0
        assert await store.get(key) is None
        claim = await store.begin(key)
        assert claim.outcome == "acquired"
        token = claim.record.claim_token or ""
        # Cut after the read, before the UPDATE: the transition fails and the claim is unchanged.
        clock.arm(2)
        with pytest.raises(psycopg.OperationalError):
            await store.mark_dispatched(key, claim_token=token, expected_version=1)
        assert await store.get(key) == claim.record
        # Cut between calls: the next call meets the dead connection and fails too.
        terminate(pg_schema, name)
        with pytest.raises(psycopg.OperationalError):
            await store.mark_dispatched(key, claim_token=token, expected_version=1)
        sent = await store.mark_dispatched(key, claim_token=token, expected_version=1)
        assert (sent.status, sent.version) == ("dispatched", 2)
    assert pg_schema.sql.execute("SELECT status, version FROM prism_tool_effects").fetchall() == [
        ("dispatched", 2)
    ]


# --- dispatch with the store --------------------------------------------------------------------

REQUIRED = ToolEffect("external_mutation", "required")


async def send_through(
    store: PostgresToolEffectStore,
    execute: Any,
    ledger: InMemoryRunLedger,
    *,
    signal: asyncio.Event | None = None,
    before_execute: Any = None,
) -> ToolResult:
    """Dispatches ``make_key()``'s call to a ``send_email`` tool running ``execute``."""
    key = make_key()
    return await dispatch_tool_call(
        ToolCall(key.tool_call_id, key.tool_name, {"to": "a@example.com"}),
        create_tool_registry([ToolDefinition(key.tool_name, execute=execute, effect=REQUIRED)]),
        ToolExecutionContext(
            session_id=key.session_id,
            run_id=key.run_id,
            tool_call_id=key.tool_call_id,
            signal=signal,
        ),
        identity=IDENTITY,
        effect_store=store,
        ledger=ledger,
        before_execute=before_execute,
    )


@postgres
async def test_a_run_signal_set_while_a_durable_tool_runs_still_stores_its_result(
    pg_schema: PgSchema,
) -> None:
    signal = asyncio.Event()
    runs: list[str] = []

    async def body(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        runs.append(ctx.tool_call_id)
        signal.set()  # the host stops the run while the tool is under way
        return "sent"

    ledger = InMemoryRunLedger()
    with PostgresToolEffectStore(pg_schema.dsn) as store:
        result = await send_through(store, body, ledger, signal=signal)
        assert (result.value, result.error) == ("sent", None)
        record = await store.get(make_key())
    assert [row.status for row in ledger.records] == ["started", "finished"]
    assert runs == ["call-1"]
    assert record is not None
    assert (record.status, record.claim_token) == ("completed", None)
    assert pg_schema.sql.execute(
        "SELECT status, claim_token FROM prism_tool_effects"
    ).fetchall() == [("completed", None)]


@postgres
async def test_a_connection_lost_before_the_dispatched_mark_releases_the_claim(
    pg_schema: PgSchema,
) -> None:
    name = f"prism-effects-{uuid.uuid4().hex[:12]}"
    runs: list[str] = []

    async def body(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        runs.append(ctx.tool_call_id)
        return "sent"

    def lose_the_connection(call: ToolCall, tool: ToolDefinition, ctx: Any) -> None:
        terminate(pg_schema, name)  # after the claim was taken, before the mark

    ledger = InMemoryRunLedger()
    with PostgresToolEffectStore(with_options(pg_schema.dsn, application_name=name)) as store:
        result = await send_through(store, body, ledger, before_execute=lose_the_connection)
        assert result.error is not None
        assert result.error.code == "ERR_PRISM_TOOL_EFFECT_PRE_DISPATCH"
        assert runs == []
        record = await store.get(make_key())
        assert record is not None
        # The mark did not land: the claim is released for another attempt rather than left
        # pending and held until it expires, and a redelivery runs the tool once.
        assert (record.status, record.claim_token) == ("failed_retryable", None)
        again = await send_through(store, body, InMemoryRunLedger())
        assert again.value == "sent"
        assert runs == ["call-1"]
    assert [row.status for row in ledger.records] == ["started", "error"]
