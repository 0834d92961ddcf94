"""``SqliteRunLedger``: the audit ledger in a SQLite file that survives the process.

Each row is committed before its append is done, and dispatch waits for the append before it
moves past the row, so a crash never loses a row that dispatch had moved past. Rows that
concurrent calls on one event loop append in one turn of the loop are committed together (one
transaction, one flush to disk; see ``_group_commit``). Rows arrive already redacted when
dispatch has secrets or a redactor. The file is in WAL mode; ``synchronous="FULL"`` (the
default) also survives a power cut, ``"NORMAL"`` survives a crashed process only and commits
faster.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Awaitable
from functools import partial
from pathlib import Path
from typing import Final, Literal

from prism_tools._group_commit import RUN_ALONE, GroupCommit, Write, WriteOutcome
from prism_tools._sqlite import connect_prepared, create_versioned_tables, enable_wal, run_together
from prism_tools.ledger import StoredRow, exact_rows, record_from_dict, row_filter, stored_row
from prism_tools.types import ToolCallRecord

SCHEMA_VERSION: Final = 1
Synchronous = Literal["FULL", "NORMAL"]

_SCHEMA: Final = (
    # One row per component, so the ledger and the effect store can share a file.
    "CREATE TABLE IF NOT EXISTS prism_schema_version ("
    " component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS prism_tool_calls ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " row_id TEXT NOT NULL,"
    " session_id TEXT NOT NULL,"
    " run_id TEXT NOT NULL,"
    " tool_call_id TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " status TEXT NOT NULL,"
    " row TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS prism_tool_calls_session ON prism_tool_calls (session_id, seq)",
    "CREATE INDEX IF NOT EXISTS prism_tool_calls_run ON prism_tool_calls (run_id, seq)",
    "CREATE INDEX IF NOT EXISTS prism_tool_calls_call ON prism_tool_calls (tool_call_id, seq)",
)


_INSERT: Final = (
    "INSERT INTO prism_tool_calls (row_id, session_id, run_id, tool_call_id, name, status, row)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


class SqliteRunLedger:
    """Ledger rows in a SQLite file, each committed before its append is done, queryable by
    session, run and call.

    Safe to share between threads and tasks (one connection behind a lock). The schema is
    created on first use; ``prism_schema_version`` records its version for later migrations.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: Synchronous = "FULL") -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError("synchronous must be 'FULL' or 'NORMAL'")
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = connect_prepared(
            self.path,
            lambda db: self._prepare(db, synchronous),
            check_same_thread=False,
            isolation_level=None,
            timeout=30.0,
        )
        self._group = GroupCommit(self._commit_rows)

    def _prepare(self, db: sqlite3.Connection, synchronous: Synchronous) -> None:
        """WAL mode, the commit policy and the tables (created or checked), in one transaction."""
        enable_wal(db, 30.0)
        db.execute(f"PRAGMA synchronous={synchronous}")
        with self._lock:
            create_versioned_tables(
                db,
                _SCHEMA,
                "ledger",
                SCHEMA_VERSION,
                lambda found: (
                    f"ledger file {self.path} has schema version {found}; this version "
                    f"of prism-tools reads up to {SCHEMA_VERSION}"
                ),
            )

    def append_tool_call(self, record: ToolCallRecord) -> Awaitable[None] | None:
        """Stores one row.

        Outside an event loop the row is committed when this returns. Inside one, rows that
        concurrent calls append in one turn of the loop are committed together at the start of
        the next turn, and the awaitable returned finishes after that commit (the row is written
        even if the awaitable is never awaited or its waiter is cancelled); a caller appending
        alone mostly gets its row committed at once, and ``None``.
        """
        row = stored_row(record)
        loop = self._group.loop_to_queue_on()
        if loop is None:
            with self._lock:
                self._insert(row)
            return None
        # Shielded: a waiter cancelled before the commit must not take its row out of it. A
        # future, not a coroutine, so a caller that never awaits it gets no warning.
        return asyncio.shield(self._group.enqueue(loop, partial(self._insert, row)))

    def _insert(self, row: StoredRow) -> bool:
        self._db.execute(_INSERT, row)
        return True

    def _commit_rows(self, writes: list[Write]) -> list[WriteOutcome]:
        # Waits for the lock as a lone append does: the connection is only ever held briefly.
        with self._lock:
            outcomes = run_together(self._db, writes)
        # RUN_ALONE: another process held the file past the busy timeout, as a lone append
        # would have found it. Nothing was written; the append fails as a lone one would.
        return [
            sqlite3.OperationalError("database is locked") if outcome is RUN_ALONE else outcome
            for outcome in outcomes
        ]

    def rows(
        self,
        *,
        session_id: str | None = None,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> list[ToolCallRecord]:
        """Rows matching every given id, oldest first."""
        where, values = row_filter("?", session_id, run_id, tool_call_id)
        self._group.flush()  # a read right after an append finds the row
        with self._lock:
            found = self._db.execute(
                f"SELECT row FROM prism_tool_calls{where} ORDER BY seq", values
            ).fetchall()
        return exact_rows((text for (text,) in found), session_id, run_id, tool_call_id)

    @property
    def records(self) -> list[ToolCallRecord]:
        """Every row, oldest first."""
        return self.rows()

    def __len__(self) -> int:
        self._group.flush()
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM prism_tool_calls").fetchone()
        return int(count)

    def close(self) -> None:
        """Commits what this thread's event loop has queued, then closes the connection."""
        self._group.flush()
        with self._lock:
            self._db.close()

    def __enter__(self) -> SqliteRunLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["SCHEMA_VERSION", "SqliteRunLedger", "record_from_dict"]
