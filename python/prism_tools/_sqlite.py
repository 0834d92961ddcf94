"""What the SQLite-backed components share: opening a file they can use, and nothing left open
when they cannot; WAL mode safely under contention."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any


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


__all__ = ["connect_prepared", "enable_wal"]
