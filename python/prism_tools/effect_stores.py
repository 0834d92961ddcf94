"""Durable effect stores. ``SqliteToolEffectStore`` keeps claims in a SQLite file (stdlib
``sqlite3``), safe across threads and processes on one machine."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

from prism_tools._group_commit import GroupCommit, Write, WriteOutcome
from prism_tools._sqlite import (
    connect_prepared,
    create_versioned_tables,
    enable_wal,
    is_busy,
    run_together,
)
from prism_tools.effects import (
    ERR_TOOL_EFFECT_CONFLICT,
    MSG_TRANSITION_CONFLICT,
    BaseToolEffectStore,
    Clock,
    Owner,
    Slot,
    Step,
    ToolEffectError,
    ToolEffectRecord,
    decode_record,
    encode_record,
    finish_step,
    stored_columns,
)

T = TypeVar("T")

SCHEMA_VERSION: Final = 1
# SQLite keeps its busy timeout in int milliseconds; a day is far past any wait worth making.
MAX_BUSY_TIMEOUT_S: Final = 86_400

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS prism_schema_version ("
    " component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS prism_tool_effects ("
    " tenant_id TEXT NOT NULL, account_id TEXT NOT NULL, user_id TEXT NOT NULL,"
    " principal_id TEXT NOT NULL, effect_key TEXT NOT NULL,"
    " status TEXT NOT NULL, version INTEGER NOT NULL, claim_token TEXT,"
    " updated_ms INTEGER NOT NULL, record BLOB NOT NULL,"
    " PRIMARY KEY (tenant_id, account_id, user_id, principal_id, effect_key))",
    "CREATE INDEX IF NOT EXISTS prism_tool_effects_cleanup"
    " ON prism_tool_effects (tenant_id, account_id, user_id, status, updated_ms)",
)
_WHERE_SLOT: Final = (
    "tenant_id = ? AND account_id = ? AND user_id = ? AND principal_id = ? AND effect_key = ?"
)
_INSERT_SQL: Final = (
    "INSERT INTO prism_tool_effects (tenant_id, account_id, user_id, principal_id, effect_key,"
    " status, version, claim_token, updated_ms, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT DO NOTHING"
)
# A compare-and-swap: every write bumps the version, so a row with the version (and token) the
# writer started from is exactly the record it started from.
_UPDATE_SQL: Final = (
    "UPDATE prism_tool_effects SET status = ?, version = ?, claim_token = ?, updated_ms = ?,"
    f" record = ? WHERE {_WHERE_SLOT} AND version = ? AND claim_token IS ?"
)


class SqliteToolEffectStore(BaseToolEffectStore):
    """Effect claims in a SQLite database file.

    The file is opened in WAL mode with ``synchronous=FULL`` (a committed transition survives a
    power cut). The transitions of a call that runs without surprises are one conditional
    statement each: ``begin`` inserts the claim with ``INSERT ... ON CONFLICT DO NOTHING``, and
    the claim holder's ``mark_dispatched_from`` and ``complete_from`` write with an ``UPDATE``
    conditional on the version and claim token it holds; the row count says whether the write
    happened. Anything else (a record already there, a public transition, ``get``) is one
    ``BEGIN IMMEDIATE`` transaction: read the record, check it, write it with the same
    conditional statements. Two processes racing ``begin`` on one key therefore see exactly one
    acquisition. The schema is created on first use and recorded in ``prism_schema_version``.

    One connection per store, shared under a lock. A call runs on the calling thread when that
    lock is free and the database takes the write at once (a statement and its commit, as a
    ``SqliteRunLedger`` append does); if another connection holds the write lock, it runs in a
    worker thread (``asyncio.to_thread``) that waits up to ``busy_timeout_s``. A statement that
    could not get the lock wrote nothing, so running it again there is safe.

    The conditional writes of concurrent calls on one event loop are committed together: those
    made in one turn of the loop run at the start of the next in one transaction, with one
    fsync, and every caller resumes only after that commit. A lone write is committed alone.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        now: Clock | None = None,
        *,
        busy_timeout_s: float = 30.0,
    ) -> None:
        if (
            isinstance(busy_timeout_s, bool)
            or not isinstance(busy_timeout_s, int | float)
            or not 0 <= busy_timeout_s <= MAX_BUSY_TIMEOUT_S
        ):
            raise ValueError(
                f"busy_timeout_s must be a number of seconds from 0 to {MAX_BUSY_TIMEOUT_S}, "
                f"got {busy_timeout_s!r}"
            )
        super().__init__(now)
        self._path = os.fspath(path)
        if self._path in (":memory:", ""):
            # Checked here: the database opens on first use, where WAL mode, which an in-memory
            # database cannot take, would fail every claim as an unknown outcome.
            raise ValueError(
                "SqliteToolEffectStore needs a database file (an in-memory SQLite database "
                "cannot use WAL mode); use InMemoryToolEffectStore for claims kept in memory"
            )
        self._busy_timeout_s = busy_timeout_s
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._group = GroupCommit(self._commit_together, self._call)

    # connection ----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        self._db = connect_prepared(
            self._path,
            self._prepare,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        return self._db

    def _prepare(self, db: sqlite3.Connection) -> None:
        """WAL mode, the commit policy and the tables (created or checked), in one transaction."""
        enable_wal(db, self._busy_timeout_s)
        db.execute("PRAGMA synchronous=FULL")
        db.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
        create_versioned_tables(
            db,
            _SCHEMA,
            "tool_effects",
            SCHEMA_VERSION,
            lambda found: f"tool effect schema version {found} is newer than this library",
        )
        # Calls on the calling thread must not wait for another writer; the worker-thread
        # path sets the timeout for the duration of its call.
        db.execute("PRAGMA busy_timeout=0")

    def close(self) -> None:
        """Close the connection (a later call opens it again)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> SqliteToolEffectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._db is not None and self._lock.acquire(blocking=False):
            try:
                return fn()
            except sqlite3.OperationalError as err:
                if not is_busy(err):
                    raise
                # Another connection holds the write lock: nothing was written (a transaction
                # left open is rolled back), so wait for the lock in a worker thread.
                if self._db is not None and self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            finally:
                self._lock.release()
        return await asyncio.to_thread(self._call_waiting, fn)

    async def _call_write(self, fn: Callable[[], bool]) -> bool:
        return await self._group.write(fn)

    def _commit_together(self, writes: list[Write]) -> list[WriteOutcome] | None:
        """Run ``writes`` on the calling thread if the connection is free: several in one
        transaction, one alone. A write that would have to wait for another connection's lock
        comes back as ``RUN_ALONE`` (nothing of it was written)."""
        if self._db is None or not self._lock.acquire(blocking=False):
            return None
        try:
            return run_together(self._db, writes)
        finally:
            self._lock.release()

    def _call_waiting(self, fn: Callable[[], T]) -> T:
        with self._lock:
            db = self._connect()
            db.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            try:
                return fn()
            finally:
                db.execute("PRAGMA busy_timeout=0")

    # storage: run by _call, which holds the lock and has connected ----------------------------

    def _held_connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("SqliteToolEffectStore storage ran outside _call")
        return self._db

    @staticmethod
    def _write(
        db: sqlite3.Connection,
        slot: Slot,
        record: ToolEffectRecord,
        blob: bytes,
        old: tuple[int, str | None] | None,
    ) -> bool:
        """Insert ``record`` if ``old`` is None, else update the row that still has ``old``'s
        version and claim token; whether a row was written."""
        columns = stored_columns(record)
        if old is None:
            cursor = db.execute(_INSERT_SQL, (*slot, *columns, blob))
        else:
            cursor = db.execute(_UPDATE_SQL, (*columns, blob, *slot, *old))
        return cursor.rowcount == 1

    def _insert(self, slot: Slot, record: ToolEffectRecord, blob: bytes) -> bool:
        return self._write(self._held_connection(), slot, record, blob, None)

    def _swap(
        self, slot: Slot, record: ToolEffectRecord, blob: bytes, version: int, token: str
    ) -> bool:
        return self._write(self._held_connection(), slot, record, blob, (version, token))

    def _transact(self, slot: Slot, step: Step) -> Any:
        db = self._held_connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute(
                f"SELECT version, claim_token, record FROM prism_tool_effects WHERE {_WHERE_SLOT}",
                slot,
            ).fetchone()
            current = None if row is None else decode_record(row[2])
            written, value = step(current)
            if written is not None:
                old = None if row is None else (row[0], row[1])
                # The write lock is held since BEGIN IMMEDIATE: the row cannot have changed.
                if not self._write(db, slot, written, encode_record(written), old):
                    raise ToolEffectError(ERR_TOOL_EFFECT_CONFLICT, MSG_TRANSITION_CONFLICT)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return finish_step(value)

    def _cleanup(self, owner: Owner, before_ms: int, limit: int) -> int:
        cursor = self._held_connection().execute(
            "DELETE FROM prism_tool_effects WHERE rowid IN ("
            " SELECT rowid FROM prism_tool_effects"
            " WHERE tenant_id = ? AND account_id = ? AND user_id = ?"
            " AND status IN ('completed', 'failed_terminal') AND updated_ms < ?"
            " ORDER BY updated_ms LIMIT ?)",
            (*owner, before_ms, limit),
        )
        return int(cursor.rowcount)


__all__ = ["SCHEMA_VERSION", "SqliteToolEffectStore"]
