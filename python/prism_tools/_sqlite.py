"""What the SQLite-backed components share: opening a file in WAL mode safely under contention."""

from __future__ import annotations

import sqlite3
import time


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


__all__ = ["enable_wal"]
