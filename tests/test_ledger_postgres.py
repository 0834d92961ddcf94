"""PostgresRunLedger on a real server: rows committed in order, redacted, queryable, surviving
the process, the connection and a second process creating the schema at the same time."""

from __future__ import annotations

import asyncio
import hashlib
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
from tests.pg import PgSchema, with_options
from tests.support import (
    append_from_threads,
    check_a_killed_process_keeps_every_started_row,
    check_appends_from_threads,
    check_appends_not_awaited_are_written,
    check_rows_of_concurrent_calls_commit_together,
    check_text_no_column_can_hold_is_stored,
    check_values_json_cannot_write_are_stored,
    ledger_row,
)

from prism_tools import (
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    create_tool_registry,
    dispatch_tool_call,
    ledger_postgres,
)
from prism_tools.ledger_postgres import SCHEMA_VERSION, PostgresRunLedger

SECRET = "sk-live-ledger-0001"

postgres = pytest.mark.postgres


def context(call_id: str, session: str = "s1", run: str = "r1") -> ToolExecutionContext:
    return ToolExecutionContext(session_id=session, run_id=run, tool_call_id=call_id)


async def echo(args: dict[str, Any], ctx: ToolExecutionContext) -> dict[str, Any]:
    return {"echo": args}


def tables_holding(schema: PgSchema, text: str) -> list[str]:
    """The schema's tables with a row whose text contains ``text``."""
    from psycopg import sql

    names = schema.sql.execute(
        "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = %s ORDER BY tablename",
        (schema.name,),
    ).fetchall()
    assert names, "the ledger made no tables"
    holding = []
    for (name,) in names:
        query = sql.SQL("SELECT count(*) FROM {} AS t WHERE strpos(t::text, %s) > 0").format(
            sql.Identifier(name)
        )
        if schema.scalar(query.as_string(schema.sql), text):
            holding.append(name)
    return holding


def wait_until_gone(schema: PgSchema, application_name: str) -> None:
    """Waits for the server to have no connection left with this application name."""
    deadline = time.monotonic() + 30
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
    while schema.scalar(query, application_name):
        assert time.monotonic() < deadline, f"{application_name} is still connected"
        time.sleep(0.01)


@postgres
async def test_dispatch_rows_are_stored_in_order_and_redacted(pg_schema: PgSchema) -> None:
    ledger = PostgresRunLedger(pg_schema.dsn)
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    for number in range(3):
        await dispatch_tool_call(
            ToolCall(f"c{number}", "echo", {"token": SECRET, "n": number}),
            registry,
            context(f"c{number}", run="r1" if number < 2 else "r2"),
            ledger=ledger,
            secrets=[SECRET],
        )
    rows = ledger.rows()
    assert [(row.tool_call_id, row.status) for row in rows] == [
        ("c0", "started"),
        ("c0", "finished"),
        ("c1", "started"),
        ("c1", "finished"),
        ("c2", "started"),
        ("c2", "finished"),
    ]
    assert rows[1].result is not None
    assert rows[1].result.value == {"echo": {"token": "[REDACTED]", "n": 0}}
    assert [row.tool_call_id for row in ledger.rows(run_id="r2")] == ["c2", "c2"]
    assert len(ledger.rows(tool_call_id="c1")) == 2
    assert ledger.rows(run_id="r1", tool_call_id="c2") == []
    assert ledger.rows(session_id="nobody") == []
    ledger.close()
    # Read back with SQL, not through the ledger: the secret is in no table, while the redacted
    # arguments are, so the search does see the rows' contents.
    assert tables_holding(pg_schema, SECRET) == []
    assert tables_holding(pg_schema, "[REDACTED]") == ["prism_tool_calls"]
    assert (
        pg_schema.scalar(
            "SELECT row->'arguments'->>'n' FROM prism_tool_calls"
            " WHERE tool_call_id = 'c2' AND status = 'finished'"
        )
        == "2"
    )


@postgres
async def test_ids_and_names_no_column_can_hold_are_stored(pg_schema: PgSchema) -> None:
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        await check_text_no_column_can_hold_is_stored(ledger)


# Ids that differ only where a ledger column cannot: NUL, a lone surrogate, U+FFFD.
ALIKE_IN_COLUMNS = ("call\x00", "call\ud800", "call\ufffd")


@postgres
async def test_rows_asked_for_by_id_are_those_of_that_id_alone(pg_schema: PgSchema) -> None:
    # The columns hold NUL and a lone surrogate as U+FFFD, so the query found all three calls.
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        for call_id in ALIKE_IN_COLUMNS:
            await dispatch_tool_call(
                ToolCall(call_id, "echo", {}),
                registry,
                context(call_id, session=call_id),
                ledger=ledger,
            )
        assert [(row.tool_call_id, row.status) for row in ledger.rows(tool_call_id="call\x00")] == [
            ("call\x00", "started"),
            ("call\x00", "finished"),
        ]
        assert [row.session_id for row in ledger.rows(session_id="call\x00")] == ["call\x00"] * 2
        # A lone surrogate has no UTF-8 spelling: the row itself keeps it as U+FFFD, so those
        # two calls are one id to the ledger; never the call whose id holds NUL.
        surrogate = ledger.rows(tool_call_id="call\ud800")
        assert surrogate == ledger.rows(tool_call_id="call\ufffd")
        assert {row.tool_call_id for row in surrogate} == {"call\ufffd"}
        assert [row.status for row in surrogate] == ["started", "finished"] * 2


@postgres
async def test_rows_are_found_by_the_id_that_is_not_text_they_were_written_with(
    pg_schema: PgSchema,
) -> None:
    # A row stores such an id as its text; the query compared the column with the id itself
    # ("operator does not exist: text = smallint").
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        await dispatch_tool_call(
            ToolCall(5, "echo", {}),  # type: ignore[arg-type]
            registry,
            ToolExecutionContext(session_id=7, run_id="r1", tool_call_id=5),  # type: ignore[arg-type]
            ledger=ledger,
        )
        found = ledger.rows(tool_call_id=5)  # type: ignore[arg-type]
        assert [(row.tool_call_id, row.session_id, row.status) for row in found] == [
            ("5", "7", "started"),
            ("5", "7", "finished"),
        ]
        assert ledger.rows(session_id=7) == found  # type: ignore[arg-type]
        assert ledger.rows(tool_call_id="5", session_id="7") == found


def incompressible(length: int, seed: str) -> str:
    """``length`` hex digits that compression does not shorten (PostgreSQL compresses an index
    entry before it checks its size)."""
    digits = "".join(
        hashlib.sha256(f"{seed}-{block}".encode()).hexdigest() for block in range(length // 64 + 1)
    )
    return digits[:length]


def wide_characters(length: int, seed: str) -> str:
    """``length`` three-byte characters (CJK), as varied as ``incompressible``."""
    return "".join(chr(0x4E00 + int(digit, 16) * 37) for digit in incompressible(length, seed))


@postgres
async def test_ids_too_long_for_an_index_entry_are_written_and_found(pg_schema: PgSchema) -> None:
    # A btree index entry holds 2,704 bytes: longer call and session ids failed the row (and so
    # the call) with "index row size exceeds btree maximum".
    shared = incompressible(3000, "shared")
    shared_wide = wide_characters(1000, "wide")  # 3,000 bytes
    call_ids = [
        incompressible(3000, "a"),
        incompressible(10_000, "b"),
        shared + "1",
        shared + "2",
        shared_wide + "1",
        shared_wide + "2",
    ]
    session_base = incompressible(10_000, "session")
    sessions = [session_base + "1", session_base + "2"]
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        for number, call_id in enumerate(call_ids):
            result = await dispatch_tool_call(
                ToolCall(call_id, "echo", {"n": number}),
                registry,
                context(call_id, session=sessions[number % 2]),
                ledger=ledger,
            )
            assert result.error is None
        for number, call_id in enumerate(call_ids):
            found = ledger.rows(tool_call_id=call_id)
            assert [(row.tool_call_id, row.status) for row in found] == [
                (call_id, "started"),
                (call_id, "finished"),
            ]
            assert found[0].session_id == sessions[number % 2]
            assert found[0].arguments == {"n": number}
        for parity, session in enumerate(sessions):
            assert [row.tool_call_id for row in ledger.rows(session_id=session)] == [
                call_id for call_id in call_ids[parity::2] for _ in ("started", "finished")
            ]
        assert ledger.rows(session_id=session_base) == []
        assert ledger.rows(tool_call_id=shared) == []
    assert pg_schema.scalar("SELECT count(*) FROM prism_tool_calls") == 2 * len(call_ids)


@postgres
async def test_results_json_cannot_write_as_they_are_are_stored(pg_schema: PgSchema) -> None:
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        await check_values_json_cannot_write_are_stored(ledger)


@postgres
async def test_rows_survive_reconnecting_and_the_schema_is_versioned(
    pg_schema: PgSchema,
) -> None:
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        await dispatch_tool_call(ToolCall("c1", "echo", {}), registry, context("c1"), ledger=ledger)
    with PostgresRunLedger(pg_schema.dsn) as again:
        assert len(again) == 2
        assert again.records[0].status == "started"
    assert pg_schema.sql.execute(
        "SELECT component, version FROM prism_schema_version"
    ).fetchall() == [("ledger", SCHEMA_VERSION)]
    pg_schema.sql.execute("UPDATE prism_schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    name = f"prism-refused-{uuid.uuid4().hex[:12]}"
    with pytest.raises(RuntimeError, match="schema version"):
        PostgresRunLedger(with_options(pg_schema.dsn, application_name=name))
    # The refused ledger closed the connection it had opened.
    wait_until_gone(pg_schema, name)


@postgres
async def test_rows_of_concurrent_calls_are_committed_together(
    pg_schema: PgSchema, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        await check_rows_of_concurrent_calls_commit_together(ledger, ledger_postgres, monkeypatch)


@postgres
async def test_appends_not_awaited_or_cancelled_are_still_written(pg_schema: PgSchema) -> None:
    await check_appends_not_awaited_are_written(lambda: PostgresRunLedger(pg_schema.dsn))


@postgres
def test_appends_from_many_threads_all_land(pg_schema: PgSchema) -> None:
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        check_appends_from_threads(ledger, ledger_row)


@postgres
def test_a_pool_and_a_borrowed_connection_work_and_stay_open(pg_schema: PgSchema) -> None:
    import psycopg
    from psycopg_pool import ConnectionPool

    # Pool connections are not in autocommit mode here: each append must still commit at once.
    with ConnectionPool(pg_schema.dsn, min_size=1, max_size=4, open=True) as pool:
        ledger = PostgresRunLedger(pool)
        append_from_threads(ledger, ledger_row, prefix="p", per_thread=25)
        assert pg_schema.scalar("SELECT count(*) FROM prism_tool_calls") == 100
        assert len(ledger) == 100
        ledger.close()
        with pytest.raises(RuntimeError, match="closed"):
            ledger.append_tool_call(ledger_row("late"))
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)

    with psycopg.connect(pg_schema.dsn, autocommit=True) as conn:
        with PostgresRunLedger(conn) as borrowed:
            borrowed.append_tool_call(ledger_row("b1"))
            assert [row.tool_call_id for row in borrowed.rows(tool_call_id="b1")] == ["b1"]
        assert not conn.closed
        assert pg_schema.scalar("SELECT count(*) FROM prism_tool_calls") == 101


@postgres
def test_a_lost_connection_is_reopened_before_the_nextledger_row(pg_schema: PgSchema) -> None:
    import psycopg

    name = f"prism-ledger-{uuid.uuid4().hex[:12]}"
    ledger = PostgresRunLedger(with_options(pg_schema.dsn, application_name=name))
    ledger.append_tool_call(ledger_row("before"))
    pg_schema.sql.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (name,),
    )
    wait_until_gone(pg_schema, name)
    # The append that meets the dead connection fails: its row may or may not have been
    # committed, so it is never retried behind the caller's back.
    with pytest.raises(psycopg.OperationalError):
        ledger.append_tool_call(ledger_row("lost"))
    ledger.append_tool_call(ledger_row("after"))
    assert [row.tool_call_id for row in ledger.records] == ["before", "after"]
    ledger.close()


@postgres
async def test_a_batch_that_meets_a_lost_connection_fails_every_row_in_it(
    pg_schema: PgSchema,
) -> None:
    import psycopg

    name = f"prism-ledger-{uuid.uuid4().hex[:12]}"
    with PostgresRunLedger(with_options(pg_schema.dsn, application_name=name)) as ledger:
        # Two appends in one turn: a batch, so the appends below are queued too.
        await asyncio.gather(
            *(cast(Any, ledger.append_tool_call(ledger_row(call_id))) for call_id in ("b1", "b2"))
        )
        pg_schema.sql.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (name,),
        )
        wait_until_gone(pg_schema, name)
        # The batch may or may not have been committed when the connection went: every row in
        # it fails, and none is written again behind its caller's back.
        lost = [ledger.append_tool_call(ledger_row(f"lost{n}")) for n in range(3)]
        outcomes = await asyncio.gather(*(cast(Any, row) for row in lost), return_exceptions=True)
        assert all(isinstance(outcome, psycopg.OperationalError) for outcome in outcomes)
        after = ledger.append_tool_call(ledger_row("after"))
        if after is not None:
            await after
        assert [row.tool_call_id for row in ledger.records] == ["b1", "b2", "after"]


@postgres
def test_connections_racing_to_create_the_schema_all_succeed(pg_schema: PgSchema) -> None:
    count = 8
    barrier = threading.Barrier(count)
    ledgers: list[PostgresRunLedger] = []
    errors: list[BaseException] = []

    def opener() -> None:
        barrier.wait()
        try:
            ledgers.append(PostgresRunLedger(pg_schema.dsn))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=opener) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for ledger in ledgers:
        ledger.close()
    assert errors == []
    assert pg_schema.sql.execute(
        "SELECT component, version FROM prism_schema_version"
    ).fetchall() == [("ledger", SCHEMA_VERSION)]


@postgres
def test_every_string_a_row_can_hold_comes_back(pg_schema: PgSchema) -> None:
    arguments = {"nul": "a\x00b", "emoji": "\U0001f600", "quote": 'it\'s "x"', "big": 2**70}
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        ledger.append_tool_call(ledger_row("odd", arguments))
        (row,) = ledger.rows()
    assert row.arguments == {**arguments, "big": str(2**70)}


@postgres
def test_bad_sources_and_rows_are_refused(pg_schema: PgSchema) -> None:
    import psycopg

    with pytest.raises(TypeError, match="connection string"):
        PostgresRunLedger(42)  # type: ignore[arg-type]
    with psycopg.connect(pg_schema.dsn) as conn, pytest.raises(ValueError, match="autocommit"):
        PostgresRunLedger(conn)
    closed = psycopg.connect(pg_schema.dsn, autocommit=True)
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        PostgresRunLedger(closed)
    with pytest.raises(RuntimeError, match="no schema"):
        PostgresRunLedger(with_options(pg_schema.dsn, options="-c search_path=no_such_schema"))
    ledger = PostgresRunLedger(pg_schema.dsn)
    with pytest.raises(TypeError, match="ToolCallRecord"):
        ledger.append_tool_call({"id": "x"})  # type: ignore[arg-type]
    ledger.close()
    ledger.close()
    with pytest.raises(RuntimeError, match="closed"):
        ledger.rows()


def test_a_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"prism-tools\[postgres\]"):
        PostgresRunLedger("postgresql://nobody@127.0.0.1:1/none")


@postgres
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("calls", [1, 40])
def test_a_killed_process_never_loses_a_row_it_moved_past(
    pg_schema: PgSchema, tmp_path: Path, calls: int
) -> None:
    # Seen through a connection of another process. With 40 calls on one loop, their started
    # rows are committed together (group commit).
    check_a_killed_process_keeps_every_started_row(
        "postgres", pg_schema.dsn, tmp_path, calls, lambda: PostgresRunLedger(pg_schema.dsn)
    )


@postgres
async def test_rows_an_earlier_version_stored_with_long_ids_are_still_found(
    pg_schema: PgSchema,
) -> None:
    # The version before kept every id whole in its column, up to the index's limit (some
    # 2,700 bytes); ids from 2,601 bytes are now kept shortened, and a query finds both forms.
    call_id = incompressible(2650, "old")
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with PostgresRunLedger(pg_schema.dsn) as ledger:
        await dispatch_tool_call(
            ToolCall(call_id, "echo", {}), registry, context(call_id), ledger=ledger
        )
        # As the earlier version wrote it: the whole id in the column.
        pg_schema.sql.execute(
            "UPDATE prism_tool_calls SET tool_call_id = %s, session_id = %s",
            (call_id, "s1"),
        )
        found = ledger.rows(tool_call_id=call_id)
        assert [(row.tool_call_id, row.status) for row in found] == [
            (call_id, "started"),
            (call_id, "finished"),
        ]
