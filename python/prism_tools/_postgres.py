"""Where the PostgreSQL-backed components (the ledger, the effect store) get their connections.

A component takes a connection string (it opens and owns one connection, and opens a new one
before its next operation if that one was lost), an open ``psycopg.Connection`` in autocommit
mode (borrowed: closing the component leaves it open), or a pool with a ``connection()`` context
manager such as ``psycopg_pool.ConnectionPool`` (borrowed too; each operation takes a connection
from it). psycopg is imported only when a component is made, so ``import prism_tools`` never
needs it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from prism_tools._group_commit import Write, WriteOutcome

if TYPE_CHECKING:
    import psycopg


SCHEMA_LOCK_SQL: Final = "SELECT pg_advisory_xact_lock(hashtext('prism_tools:schema'))"
"""Taken while a component creates or checks its tables, so workers starting together queue."""


class ConnectionPoolLike(Protocol):
    """What a component needs of a pool, such as ``psycopg_pool.ConnectionPool``."""

    def connection(
        self, timeout: float | None = None
    ) -> AbstractContextManager[psycopg.Connection[Any]]: ...


def import_psycopg(component: str) -> Any:
    try:
        import psycopg
    except ImportError as err:
        raise ImportError(
            f"{component} needs psycopg 3: pip install 'prism-tools[postgres]'"
        ) from err
    return psycopg


# One lock per borrowed connection, shared by every component given it: a ledger and an effect
# store on one connection, used from two threads, would otherwise interleave their statements,
# transactions and pipelines on it (psycopg's pipeline mode is not thread-safe).
_BORROWED_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_BORROWED_LOCKS_GUARD: Final = threading.Lock()


def _borrowed_lock(conn: Any) -> threading.RLock:
    with _BORROWED_LOCKS_GUARD:
        lock = _BORROWED_LOCKS.get(conn)
        if lock is None:
            lock = _BORROWED_LOCKS[conn] = threading.RLock()
        return lock


class PostgresConnections:
    """One component's connections: owned (from a DSN), borrowed, or pooled."""

    def __init__(self, source: Any, component: str) -> None:
        pg = import_psycopg(component)
        self._pg = pg
        self._component = component
        # Reentrant: an operation run on the calling thread holds it (see hold_if_free) while
        # it enters connection().
        self._lock = threading.RLock()
        self._closed = False
        self._dsn: str | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._pool: ConnectionPoolLike | None = None
        # While run_together plans a batch on a thread: the statements its writes would run.
        self._planned = threading.local()
        if isinstance(source, str):
            self._dsn = source
            self._conn = pg.connect(source, autocommit=True)
        elif isinstance(source, pg.Connection):
            if source.closed:
                raise ValueError(f"the connection given to {component} is closed")
            if not source.autocommit:
                raise ValueError(
                    f"{component} needs a connection in autocommit mode, so that each write is "
                    "committed on its own (psycopg.connect(..., autocommit=True))"
                )
            self._conn = source
            self._lock = _borrowed_lock(source)
        elif callable(getattr(source, "connection", None)):
            self._pool = cast("ConnectionPoolLike", source)
        else:
            raise TypeError(
                f"{component} takes a connection string, a psycopg.Connection or a "
                f"connection pool, got {type(source).__name__}"
            )

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one operation; what it wrote is committed when the block ends."""
        if self._pool is not None:
            if self._closed:
                raise RuntimeError(f"the {self._component} is closed")
            # A pooled connection may not be in autocommit mode: then the operation is one
            # transaction, committed before the connection goes back to the pool.
            with (
                self._pool.connection() as conn,
                conn.transaction() if not conn.autocommit else nullcontext(),
            ):
                yield conn
            return
        with self._lock:
            if self._closed or self._conn is None:
                raise RuntimeError(f"the {self._component} is closed")
            if self._dsn is not None and (self._conn.closed or self._conn.broken):
                # The connection was lost during an earlier operation, which failed. Opening a
                # new one before this operation's first statement is safe; a statement that
                # failed mid-flight is never retried, since its write may or may not be in.
                self._conn.close()
                self._conn = self._pg.connect(self._dsn, autocommit=True)
            yield self._conn

    def write_once(self, sql: str, values: Sequence[Any]) -> bool:
        """Run one statement and commit it (or, while ``plan`` runs on this thread, only record
        it); whether it touched exactly one row."""
        planned: list[tuple[str, Sequence[Any]]] | None = getattr(self._planned, "statements", None)
        if planned is not None:
            planned.append((sql, values))
            return False
        with self.connection() as conn:
            return conn.execute(sql, values).rowcount == 1

    def plan(self, writes: Sequence[Write]) -> list[tuple[str, Sequence[Any]]]:
        """The statement each of ``writes`` runs through ``write_once``, in order, without
        running any; a ``RuntimeError`` when one runs no statement or two."""
        statements: list[tuple[str, Sequence[Any]]] = []
        self._planned.statements = statements
        try:
            for count, write in enumerate(writes, 1):
                write()
                if len(statements) != count:
                    raise RuntimeError("a batched write must run exactly one statement")
        finally:
            self._planned.statements = None
        return statements

    def hold_if_free(self) -> bool:
        """Take this component's own connection for an operation on the calling thread, if
        that costs no wait: True when the component has a connection of its own (not a pool)
        that no other thread is using and that is open. The caller then runs the operation
        (``connection()`` inside it gets that connection) and calls ``release``. A pool, a
        connection in use, or one that would have to be reopened is left to a worker thread."""
        if self._pool is not None or not self._lock.acquire(blocking=False):
            return False
        conn = self._conn
        if self._closed or conn is None or conn.closed or conn.broken:
            self._lock.release()
            return False
        return True

    def release(self) -> None:
        """End what ``hold_if_free`` started."""
        self._lock.release()

    @property
    def psycopg(self) -> Any:
        """The psycopg module (for its error classes)."""
        return self._pg

    def close(self) -> None:
        """Closes the connection this component opened; a borrowed connection or pool stays
        open."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._dsn is not None and self._conn is not None:
                self._conn.close()


def run_together(connections: PostgresConnections, writes: Sequence[Write]) -> list[WriteOutcome]:
    """Run ``writes`` (each one ``connections.write_once``) on the component's own connection,
    which the caller holds (``hold_if_free``): several in one transaction, sent as one pipeline
    of statements (one round trip and one flush of the server's WAL), one alone.

    Each write first only records its statement; then all are sent, and each one's row count is
    read once the pipeline has synced (inside it psycopg does not know it yet). A write that
    records no statement or two cannot be matched to its count, and a transaction that was
    rolled back wrote nothing: either way each write then runs alone for its own outcome. A
    transaction cut off from the server may or may not have been committed: every write in it
    fails and none is run again.
    """
    if len(writes) > 1:
        with connections.connection() as conn:
            try:
                with conn.transaction():
                    statements = connections.plan(writes)
                    with conn.pipeline():
                        cursors = [conn.execute(sql, values) for sql, values in statements]
                    written: list[WriteOutcome] = [cursor.rowcount == 1 for cursor in cursors]
            except Exception as err:
                if conn.closed or conn.broken:
                    return [err] * len(writes)
            else:
                return written
    return [run_alone(write) for write in writes]


def run_alone(write: Write) -> WriteOutcome:
    """One write's outcome: what it returned, or the error it raised."""
    try:
        return write()
    except Exception as err:
        return err


__all__ = [
    "SCHEMA_LOCK_SQL",
    "ConnectionPoolLike",
    "PostgresConnections",
    "import_psycopg",
    "run_alone",
    "run_together",
]
