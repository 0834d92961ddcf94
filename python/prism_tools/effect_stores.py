"""Durable effect stores. ``SqliteToolEffectStore`` keeps claims in a SQLite file (stdlib
``sqlite3``), safe across threads and processes on one machine."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

from prism_tools._sqlite import enable_wal
from prism_tools.effects import (
    BaseToolEffectStore,
    Clock,
    Owner,
    Slot,
    Step,
    ToolEffectError,
    decode_record,
    encode_record,
    finish_step,
    ms_from_iso,
)

T = TypeVar("T")

SCHEMA_VERSION: Final = 1

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


class SqliteToolEffectStore(BaseToolEffectStore):
    """Effect claims in a SQLite database file.

    The file is opened in WAL mode with ``synchronous=FULL`` (a committed transition survives a
    power cut). Every transition is one ``BEGIN IMMEDIATE`` transaction: read the record, check
    it, then write it with ``INSERT ... ON CONFLICT DO NOTHING`` (a new claim) or an ``UPDATE``
    conditional on the version and claim token read, checking the row count. Two processes
    racing ``begin`` on one key therefore see exactly one acquisition. The schema is created on
    first use and recorded in ``prism_schema_version``. Blocking calls run in a worker thread
    (``asyncio.to_thread``); one connection per store is shared under a lock.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        now: Clock | None = None,
        *,
        busy_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(now)
        self._path = os.fspath(path)
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    # connection ----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        db = sqlite3.connect(
            self._path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            enable_wal(db, self._busy_timeout_s)
            db.execute("PRAGMA synchronous=FULL")
            db.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_s * 1000)}")
            db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA:
                    db.execute(statement)
                row = db.execute(
                    "SELECT version FROM prism_schema_version WHERE component = 'tool_effects'"
                ).fetchone()
                if row is None:
                    db.execute(
                        "INSERT INTO prism_schema_version (component, version)"
                        " VALUES ('tool_effects', ?)",
                        (SCHEMA_VERSION,),
                    )
                elif row[0] > SCHEMA_VERSION:
                    raise RuntimeError(
                        f"tool effect schema version {row[0]} is newer than this library"
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

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
        return await asyncio.to_thread(fn)

    # storage -------------------------------------------------------------------------------

    def _transact(self, slot: Slot, step: Step) -> Any:
        with self._lock:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    f"SELECT version, claim_token, record FROM prism_tool_effects"
                    f" WHERE {_WHERE_SLOT}",
                    slot,
                ).fetchone()
                current = None if row is None else decode_record(row[2])
                written, value = step(current)
                if written is not None:
                    blob = encode_record(written)
                    updated = ms_from_iso(written.updated_at)
                    if row is None:
                        cursor = db.execute(
                            "INSERT INTO prism_tool_effects (tenant_id, account_id, user_id,"
                            " principal_id, effect_key, status, version, claim_token,"
                            " updated_ms, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                            " ON CONFLICT DO NOTHING",
                            (
                                *slot,
                                written.status,
                                written.version,
                                written.claim_token,
                                updated,
                                blob,
                            ),
                        )
                    else:
                        cursor = db.execute(
                            "UPDATE prism_tool_effects SET status = ?, version = ?,"
                            " claim_token = ?, updated_ms = ?, record = ?"
                            f" WHERE {_WHERE_SLOT} AND version = ? AND claim_token IS ?",
                            (
                                written.status,
                                written.version,
                                written.claim_token,
                                updated,
                                blob,
                                *slot,
                                row[0],
                                row[1],
                            ),
                        )
                    if cursor.rowcount != 1:
                        raise ToolEffectError(
                            "ERR_PRISM_TOOL_EFFECT_CONFLICT", "tool effect transition conflict"
                        )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return finish_step(value)

    def _cleanup(self, owner: Owner, before_ms: int, limit: int) -> int:
        with self._lock:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                cursor = db.execute(
                    "DELETE FROM prism_tool_effects WHERE rowid IN ("
                    " SELECT rowid FROM prism_tool_effects"
                    " WHERE tenant_id = ? AND account_id = ? AND user_id = ?"
                    " AND status IN ('completed', 'failed_terminal') AND updated_ms < ?"
                    " ORDER BY updated_ms LIMIT ?)",
                    (*owner, before_ms, limit),
                )
                deleted = cursor.rowcount
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return deleted


__all__ = ["SCHEMA_VERSION", "SqliteToolEffectStore"]
