"""``PostgresRunLedger``: the audit ledger in PostgreSQL, shared by processes and machines.

The same contract as ``SqliteRunLedger``: each row is committed before its append is done, and
dispatch waits for the append before it moves past the row, so a crash of the process never
loses a row that dispatch had moved past. On the ledger's own connection, rows that concurrent
calls on one event loop append in one turn of the loop are committed together (one transaction,
one flush of the server's WAL; see ``_group_commit``). How far a commit
survives a crash of the server is the server's ``synchronous_commit`` and ``fsync`` setting.
Rows arrive already redacted when dispatch has secrets or a redactor.

psycopg 3 is an optional dependency (``pip install 'prism-tools[postgres]'``); it is imported
when a ledger is made, never by ``import prism_tools``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from prism_tools._group_commit import GroupCommit, Write, WriteOutcome
from prism_tools._postgres import (
    SCHEMA_LOCK_SQL,
    ConnectionPoolLike,
    PostgresConnections,
    run_alone,
    run_together,
)
from prism_tools.ledger import StoredRow, column_text, exact_rows, row_filter, stored_row
from prism_tools.types import ToolCallRecord

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION: Final = 1

# Every process that creates or checks the schema takes this transaction-scoped advisory lock
# first, so two processes opening a fresh database at once do not race on CREATE TABLE.

_SCHEMA: Final = (
    # One row per component (as on SQLite), so the ledger and the effect store share a schema.
    "CREATE TABLE IF NOT EXISTS prism_schema_version ("
    " component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS prism_tool_calls ("
    " seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " row_id TEXT NOT NULL,"
    " session_id TEXT NOT NULL,"
    " run_id TEXT NOT NULL,"
    " tool_call_id TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " status TEXT NOT NULL,"
    # json, not jsonb: it keeps the text as written and accepts every string a row can hold
    # (jsonb refuses \u0000), while still answering SQL such as row->'arguments'.
    " row JSON NOT NULL)",
    "CREATE INDEX IF NOT EXISTS prism_tool_calls_session ON prism_tool_calls (session_id, seq)",
    "CREATE INDEX IF NOT EXISTS prism_tool_calls_run ON prism_tool_calls (run_id, seq)",
    "CREATE INDEX IF NOT EXISTS prism_tool_calls_call ON prism_tool_calls (tool_call_id, seq)",
)

_INSERT: Final = (
    "INSERT INTO prism_tool_calls (row_id, session_id, run_id, tool_call_id, name, status, row)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s::json)"
)

# How many of the ledger's tables the current schema (the first one on search_path) holds.
_TABLES_PRESENT_SQL: Final = (
    "SELECT current_schema(), count(*) FROM pg_catalog.pg_tables"
    " WHERE schemaname = current_schema()"
    " AND tablename IN ('prism_schema_version', 'prism_tool_calls')"
)


# A btree index entry holds at most 2,704 bytes: an id longer than this (a model may send any
# call id) is kept in its column as its head and a digest of the whole, so the row is written
# and found. The row's JSON keeps the whole id, which ``exact_rows`` compares.
_INDEXED_MAX_BYTES: Final = 2600
_INDEXED_HEAD_BYTES: Final = 2500


def indexed_text(value: str) -> str:
    """``value`` as an indexed column holds it: ``column_text``, and an id over
    ``_INDEXED_MAX_BYTES`` as its first bytes, an ellipsis and its SHA-256."""
    text = column_text(value)
    if len(text) * 4 <= _INDEXED_MAX_BYTES:
        return text  # short enough in any spelling
    encoded = text.encode("utf-8")
    if len(encoded) <= _INDEXED_MAX_BYTES:
        return text
    head = encoded[:_INDEXED_HEAD_BYTES].decode("utf-8", "ignore")
    return f"{head}\u2026{hashlib.sha256(encoded).hexdigest()}"


def indexed_forms(value: str) -> tuple[str, ...]:
    """The texts a query looks for an id by: ``indexed_text``, and for an id it shortens, also
    its whole ``column_text``, as the version before kept ids up to the index's limit."""
    text = indexed_text(value)
    whole = column_text(value)
    return (text,) if text == whole else (text, whole)


def _indexed_row(row: StoredRow) -> StoredRow:
    row_id, session_id, run_id, tool_call_id, name, status, data = row
    return (
        row_id,
        indexed_text(session_id),
        indexed_text(run_id),
        indexed_text(tool_call_id),
        name,
        status,
        data,
    )


class PostgresRunLedger:
    """Ledger rows in PostgreSQL, each committed before its append is done, queryable by
    session, run and call.

    ``source`` is a connection string (the ledger opens and owns one connection, and reopens it
    before the next operation if it was lost), an open ``psycopg.Connection`` in autocommit mode
    (borrowed: ``close`` leaves it open), or a pool with a ``connection()`` context manager such
    as ``psycopg_pool.ConnectionPool`` (borrowed too; each operation takes a connection from it).
    Safe to share between threads and tasks. The tables live in the first schema on the
    connection's ``search_path`` and are created on first use; ``prism_schema_version`` records
    their version for later migrations, and a database with a newer version is refused.
    """

    def __init__(self, source: str | psycopg.Connection[Any] | ConnectionPoolLike, /) -> None:
        self._db = PostgresConnections(source, "PostgresRunLedger")
        self._group = GroupCommit(self._commit_rows)
        try:
            self._create_schema()
        except BaseException:
            self.close()
            raise

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A connection for one operation; what it wrote is committed when the block ends."""
        return self._db.connection()

    def _create_schema(self) -> None:
        with self._connection() as conn, conn.transaction():
            conn.execute(SCHEMA_LOCK_SQL)
            schema, present = _one(conn.execute(_TABLES_PRESENT_SQL).fetchone())
            if schema is None:
                raise RuntimeError(
                    "no schema to hold the ledger tables: the connection's search_path names "
                    "no existing schema"
                )
            if present < 2:
                # Checked first so that an existing ledger is opened without DDL, which would
                # briefly lock out other processes' inserts.
                for statement in _SCHEMA:
                    conn.execute(statement)
            found = conn.execute(
                "SELECT version FROM prism_schema_version WHERE component = 'ledger'"
            ).fetchone()
            version = None if found is None else found[0]
            if version is None:
                conn.execute(
                    "INSERT INTO prism_schema_version (component, version) VALUES ('ledger', %s)"
                    " ON CONFLICT (component) DO NOTHING",
                    (SCHEMA_VERSION,),
                )
            elif version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"ledger schema {schema!r} in database {conn.info.dbname!r} has schema "
                    f"version {version}; this version of prism-tools reads up to {SCHEMA_VERSION}"
                )

    def append_tool_call(self, record: ToolCallRecord) -> Awaitable[None] | None:
        """Stores one row, as ``SqliteRunLedger.append_tool_call`` does: committed when this
        returns outside an event loop or for a lone caller (``None``); inside a loop, queued for
        the commit of the rows of concurrent calls, and the awaitable returned finishes after it
        (the row is written even if the awaitable is never awaited or its waiter is cancelled).
        """
        row = _indexed_row(stored_row(record))
        loop = self._group.loop_to_queue_on()
        if loop is None:
            self._insert(row)
            return None
        # Shielded: a waiter cancelled before the commit must not take its row out of it.
        return asyncio.shield(self._group.enqueue(loop, partial(self._insert, row)))

    def _insert(self, row: StoredRow) -> bool:
        return self._db.write_once(_INSERT, row)

    def _commit_rows(self, writes: list[Write]) -> list[WriteOutcome]:
        if not self._db.hold_if_free():
            # A pool, or the connection busy in another thread: each row on its own, as a lone
            # append would be written.
            return [run_alone(write) for write in writes]
        try:
            return run_together(self._db, writes)
        finally:
            self._db.release()

    def rows(
        self,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> list[ToolCallRecord]:
        """Rows matching every given id, oldest first."""
        where, values = row_filter("%s", session_id, run_id, tool_call_id, indexed_forms)
        self._group.flush()  # a read right after an append finds the row
        with self._connection() as conn:
            found = conn.execute(
                f"SELECT row::text FROM prism_tool_calls{where} ORDER BY seq", values
            ).fetchall()
        return exact_rows((text for (text,) in found), session_id, run_id, tool_call_id)

    @property
    def records(self) -> list[ToolCallRecord]:
        """Every row, oldest first."""
        return self.rows()

    def __len__(self) -> int:
        self._group.flush()
        with self._connection() as conn:
            (count,) = _one(conn.execute("SELECT count(*) FROM prism_tool_calls").fetchone())
        return int(count)

    def close(self) -> None:
        """Commits what this thread's event loop has queued, then closes the connection the
        ledger opened; a borrowed connection or pool stays open."""
        self._group.flush()
        self._db.close()

    def __enter__(self) -> PostgresRunLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _one(found: Any) -> Any:
    if found is None:
        raise RuntimeError("the database returned no row for an aggregate query")
    return found


__all__ = ["SCHEMA_VERSION", "ConnectionPoolLike", "PostgresRunLedger"]
