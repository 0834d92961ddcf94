"""What the SQLite-backed components share: opening a file they can use, and nothing left open
when they cannot; WAL mode safely under contention."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from prism_tools._group_commit import RUN_ALONE, Write, WriteOutcome


def connect_prepared(
    path: str | os.PathLike[str], prepare: Callable[[sqlite3.Connection], None], **options: Any
) -> sqlite3.Connection:
    """``sqlite3.connect(path, **options)``, set up by ``prepare``. When ``prepare`` refuses the
    file (not a database, a newer schema version, ...), the connection is closed before the
    error propagates: Python 3.13 and later warn about a connection collected while open."""
    db: sqlite3.Connection = sqlite3.connect(path, **options)
    try:
        prepare(db)
    except BaseException:
        db.close()
        raise
    return db


def create_versioned_tables(
    db: sqlite3.Connection,
    statements: Sequence[str],
    component: str,
    version: int,
    newer: Callable[[int], str],
) -> None:
    """In one immediate transaction: run the component's ``CREATE ... IF NOT EXISTS``
    ``statements`` (the ``prism_schema_version`` table among them), then record ``component``'s
    schema ``version``, or refuse a file that a newer version wrote (``RuntimeError`` with
    ``newer(found_version)``)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in statements:
            db.execute(statement)
        found = db.execute(
            "SELECT version FROM prism_schema_version WHERE component = ?", (component,)
        ).fetchone()
        if found is None:
            db.execute(
                "INSERT INTO prism_schema_version (component, version) VALUES (?, ?)",
                (component, version),
            )
        elif found[0] > version:
            raise RuntimeError(newer(found[0]))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def enable_wal(db: sqlite3.Connection, timeout_s: float) -> None:
    """Switch ``db`` to WAL mode. Two processes opening a new file together can both try to
    switch it; the loser gets ``database is locked`` at once (the busy handler does not cover a
    journal-mode change), so it retries until the winner is done or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            continue
        if mode is not None and str(mode[0]).lower() == "wal":
            return
        raise sqlite3.OperationalError(f"could not switch the database to WAL mode ({mode!r})")


__all__ = ["connect_prepared", "create_versioned_tables", "enable_wal"]


def run_together(db: sqlite3.Connection, writes: list[Write]) -> list[WriteOutcome]:
    """Run ``writes`` on ``db`` (a connection in autocommit mode): several in one transaction,
    one alone. When the transaction fails nothing of it was written, and each write runs again
    on its own to get its own outcome; a write that met another connection's lock comes back as
    ``RUN_ALONE``."""
    if len(writes) > 1:
        try:
            db.execute("BEGIN IMMEDIATE")
            written: list[WriteOutcome] = [write() for write in writes]
            db.execute("COMMIT")
        except Exception as err:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if is_busy(err):
                return [RUN_ALONE] * len(writes)
            # Nothing of the batch was written: give each write its own outcome.
        else:
            return written
    outcomes: list[WriteOutcome] = []
    for write in writes:
        try:
            outcomes.append(write())
        except Exception as err:
            if db.in_transaction:
                db.execute("ROLLBACK")
            outcomes.append(RUN_ALONE if is_busy(err) else err)
    return outcomes


def is_busy(err: Exception) -> bool:
    """Whether ``err`` is SQLite's "the database is locked by another connection"."""
    # An error raised by SQLite carries its code; one made elsewhere may not.
    code = getattr(err, "sqlite_errorcode", None)
    return (
        isinstance(err, sqlite3.OperationalError)
        and isinstance(code, int)
        and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )
