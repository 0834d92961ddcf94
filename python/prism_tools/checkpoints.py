"""Where suspended sessions wait for their approvals: a ``CheckpointStore`` keeps one session
state (the JSON of ``session.state``) per session id.

``create_agent(..., checkpoints=store)`` saves a session when a run suspends, replaces it when a
resume answers or consumes its approvals, and deletes it when that resumed run ends;
``agent.resume_session(session_id)`` loads it. See ``docs/runtime.md``.

A replace is conditional: it stores the new state only while the store still holds the one the
session read. Two workers that loaded the same suspended session (a double-clicked approval, a
retried request) can then not both run its approved calls: the second finds the state changed
and is refused before anything runs.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from contextlib import suppress
from os import PathLike
from typing import Any, Protocol, runtime_checkable

from prism_tools._json import fingerprint, holds_lone_surrogate, loads_stored
from prism_tools._sqlite import connect_prepared
from prism_tools.types import JSONValue


@runtime_checkable
class CheckpointStore(Protocol):
    """Session states by session id. ``save`` replaces, ``load`` returns ``None`` for an unknown
    id, ``delete`` of an unknown id does nothing. ``replace`` stores ``state`` only if the store
    holds ``expected`` (equal as JSON: key order and a number's spelling do not count) for the
    id, and says whether it did, as one atomic step:
    it is what keeps one set of approvals from being used twice."""

    def save(self, session_id: str, state: Mapping[str, JSONValue]) -> None: ...

    def replace(
        self,
        session_id: str,
        expected: Mapping[str, JSONValue],
        state: Mapping[str, JSONValue],
    ) -> bool: ...

    def load(self, session_id: str) -> dict[str, JSONValue] | None: ...

    def delete(self, session_id: str) -> None: ...


def _check_id(session_id: str) -> None:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("session_id must be a non-empty string")
    if holds_lone_surrogate(session_id):
        # Refused, not rewritten to U+FFFD: two different ids would then share a checkpoint.
        raise ValueError("session_id holds a lone surrogate, which is not Unicode text")


def _replacement(
    session_id: str, expected: Mapping[str, JSONValue], state: Mapping[str, JSONValue]
) -> tuple[str, str]:
    """A replace's two texts: the fingerprint of the state the store must still hold, and the
    state it then holds."""
    _check_id(session_id)
    return _fingerprint(expected), _dumps(state)


def _fingerprint(state: Any) -> str:
    """A state as JSON compares it (see ``_json.fingerprint``), so a state that went through
    another JSON writer (a database's JSON column, another language) still matches the one
    stored."""
    try:
        return fingerprint(state)
    except RecursionError:
        pass  # raised below, so the error does not keep the deep traceback as its context
    raise ValueError("the checkpoint state nests too deeply to be compared")


def _holds(stored: str | None, fingerprint: str) -> bool:
    return stored is not None and _fingerprint(_loads(stored)) == fingerprint


def _dumps(state: Mapping[str, JSONValue]) -> str:
    try:
        return json.dumps(dict(state))
    except RecursionError:
        pass  # raised below, so the error does not keep the deep traceback as its context
    raise ValueError("the checkpoint state nests too deeply to be stored")


class InMemoryCheckpointStore:
    """A process-local store (states are copied through JSON, so later changes to a saved
    mapping do not reach the store)."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._lock = threading.Lock()

    def save(self, session_id: str, state: Mapping[str, JSONValue]) -> None:
        _check_id(session_id)
        text = _dumps(state)
        with self._lock:
            self._states[session_id] = text

    def replace(
        self,
        session_id: str,
        expected: Mapping[str, JSONValue],
        state: Mapping[str, JSONValue],
    ) -> bool:
        held, text = _replacement(session_id, expected, state)
        with self._lock:
            if not _holds(self._states.get(session_id), held):
                return False
            self._states[session_id] = text
        return True

    def load(self, session_id: str) -> dict[str, JSONValue] | None:
        _check_id(session_id)
        with self._lock:
            text = self._states.get(session_id)
        return None if text is None else _loads(text)

    def delete(self, session_id: str) -> None:
        _check_id(session_id)
        with self._lock:
            self._states.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._states)


class SqliteCheckpointStore:
    """One SQLite table ``prism_checkpoints(session_id PRIMARY KEY, state TEXT, updated_at)``;
    every ``save``, ``replace`` and ``delete`` is its own committed transaction, so a replace is
    atomic across connections and processes sharing the file."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self._lock = threading.Lock()
        self._db = connect_prepared(
            path, _create_table, check_same_thread=False, isolation_level=None
        )

    def save(self, session_id: str, state: Mapping[str, JSONValue]) -> None:
        _check_id(session_id)
        text = _dumps(state)
        with self._lock:
            self._db.execute(
                "INSERT INTO prism_checkpoints (session_id, state) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET state = excluded.state, "
                "updated_at = CURRENT_TIMESTAMP",
                (session_id, text),
            )

    def replace(
        self,
        session_id: str,
        expected: Mapping[str, JSONValue],
        state: Mapping[str, JSONValue],
    ) -> bool:
        held, text = _replacement(session_id, expected, state)
        with self._lock:
            # Read, compare and write in one transaction that holds the file's write lock from
            # its start, so no other connection or process writes in between.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT state FROM prism_checkpoints WHERE session_id = ?", (session_id,)
                ).fetchone()
                if not _holds(None if row is None else row[0], held):
                    self._db.execute("ROLLBACK")
                    return False
                self._db.execute(
                    "UPDATE prism_checkpoints SET state = ?, updated_at = CURRENT_TIMESTAMP "
                    "WHERE session_id = ?",
                    (text, session_id),
                )
                self._db.execute("COMMIT")
            except BaseException:
                with suppress(sqlite3.Error):  # the failure may have ended the transaction
                    self._db.execute("ROLLBACK")
                raise
        return True

    def load(self, session_id: str) -> dict[str, JSONValue] | None:
        _check_id(session_id)
        with self._lock:
            row = self._db.execute(
                "SELECT state FROM prism_checkpoints WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else _loads(row[0])

    def delete(self, session_id: str) -> None:
        _check_id(session_id)
        with self._lock:
            self._db.execute("DELETE FROM prism_checkpoints WHERE session_id = ?", (session_id,))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SqliteCheckpointStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _create_table(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE IF NOT EXISTS prism_checkpoints ("
        "session_id TEXT PRIMARY KEY, state TEXT NOT NULL, "
        "updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
    )


def _loads(text: str) -> dict[str, JSONValue]:
    value: Any = loads_stored(text)
    if not isinstance(value, dict):
        raise ValueError("a stored checkpoint is not a JSON object")
    return value


__all__ = ["CheckpointStore", "InMemoryCheckpointStore", "SqliteCheckpointStore"]
