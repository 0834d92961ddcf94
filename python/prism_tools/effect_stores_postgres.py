"""``PostgresToolEffectStore``: durable effect claims in PostgreSQL, shared by many processes on
many machines.

How a transition is made safe. The state machine lives in ``BaseToolEffectStore``, which hands
the store a read-modify-write step: given the current record it returns the record to write.
This store runs that step optimistically, without holding a lock while Python runs:

1. read the row (one ``SELECT``);
2. run the step on it;
3. write with one statement that only succeeds if nobody wrote in between: ``INSERT ... ON
   CONFLICT DO NOTHING`` when there was no row, else ``UPDATE ... WHERE version = %s AND
   claim_token IS NOT DISTINCT FROM %s`` with the version and token that were read;
4. if that statement changed no row, another writer got there first, so nothing of ours was
   written: read again and run the step again on what is there now.

Every record write bumps ``version``, so the conditional write is a compare-and-swap and each
transition is as atomic as a ``SELECT ... FOR UPDATE`` transaction would make it, across
processes and machines, while keeping each write a single autocommitted statement and no row
lock held during a round trip. Two ``begin`` calls racing on one key therefore see one
``acquired`` and one ``existing`` (the loser's second read finds the winner's claim); two
transitions racing on one version see one success and one conflict. A lazily expired claim is
written back the same way, before the call returns or raises.

A call that runs without surprises skips the read (step 1): ``begin`` first tries the ``INSERT``
of a new claim, and the claim holder's ``mark_dispatched_from`` and ``complete_from`` write the
next record with the ``UPDATE`` on the version and token it holds. Only when such a statement
changes no row does the transition take the path above. So a clean call is three statements.

A call that loses its connection fails with psycopg's error and is never retried behind the
caller's back: an ``INSERT`` or ``UPDATE`` cut off in flight may or may not have been committed,
and for a claim that is what the claim TTL is for (an unconfirmed ``pending`` claim expires to
``failed_retryable``). A store that opened its own connection opens a new one before its next
call.

Records are stored as ``json`` (not ``jsonb``: jsonb refuses the ``\\u0000`` escape a result may
hold) next to the columns the store queries. PostgreSQL ``text`` cannot hold a NUL character, so
ownership ids, principal ids and keys containing one are refused.

The schema version lives in ``prism_schema_version (component, version)``, row
``tool_effects``, beside the ledger's ``ledger`` row, as on SQLite.

psycopg 3 is an optional dependency (``pip install 'prism-tools[postgres]'``); it is imported when
a store is made, never by ``import prism_tools``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final, TypeVar

from prism_tools._group_commit import GroupCommit, Write, WriteOutcome
from prism_tools._postgres import (
    SCHEMA_LOCK_SQL,
    ConnectionPoolLike,
    PostgresConnections,
    run_together,
)
from prism_tools.effects import (
    ERR_TOOL_EFFECT_CONFLICT,
    ERR_TOOL_EFFECT_LIMIT,
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

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")

SCHEMA_VERSION: Final = 1
COMPONENT: Final = "tool_effects"

# How often a transition re-reads after losing a write race before it gives up with a conflict.
# Each lost race means another writer committed a new version of the same record, so reaching
# this bound needs that many writes to one key during one call.
MAX_WRITE_RACES: Final = 100

# The same lock key as the PostgreSQL ledger: every prism component creates or checks its tables
# under it, so processes opening a fresh database together never race on CREATE TABLE.

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS prism_schema_version ("
    " component TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS prism_tool_effects ("
    " tenant_id TEXT NOT NULL, account_id TEXT NOT NULL, user_id TEXT NOT NULL,"
    " principal_id TEXT NOT NULL, effect_key TEXT NOT NULL,"
    " status TEXT NOT NULL, version INTEGER NOT NULL, claim_token TEXT,"
    " updated_ms BIGINT NOT NULL,"
    # json, not jsonb: jsonb refuses \u0000, which a stored result may contain.
    " record JSON NOT NULL,"
    " PRIMARY KEY (tenant_id, account_id, user_id, principal_id, effect_key))",
    "CREATE INDEX IF NOT EXISTS prism_tool_effects_cleanup"
    " ON prism_tool_effects (tenant_id, account_id, user_id, status, updated_ms)",
)

_TABLES_PRESENT_SQL: Final = (
    "SELECT current_schema(), count(*) FROM pg_catalog.pg_tables"
    " WHERE schemaname = current_schema()"
    " AND tablename IN ('prism_schema_version', 'prism_tool_effects')"
)

_WHERE_SLOT: Final = (
    "tenant_id = %s AND account_id = %s AND user_id = %s AND principal_id = %s AND effect_key = %s"
)

_SELECT_SQL: Final = (
    f"SELECT version, claim_token, record::text FROM prism_tool_effects WHERE {_WHERE_SLOT}"
)
_INSERT_SQL: Final = (
    "INSERT INTO prism_tool_effects (tenant_id, account_id, user_id, principal_id, effect_key,"
    " status, version, claim_token, updated_ms, record)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::json) ON CONFLICT DO NOTHING"
)
_UPDATE_SQL: Final = (
    "UPDATE prism_tool_effects SET status = %s, version = %s, claim_token = %s,"
    " updated_ms = %s, record = %s::json"
    f" WHERE {_WHERE_SLOT} AND version = %s AND claim_token IS NOT DISTINCT FROM %s"
)
_CLEANUP_SQL: Final = (
    "DELETE FROM prism_tool_effects"
    " WHERE (tenant_id, account_id, user_id, principal_id, effect_key) IN ("
    " SELECT tenant_id, account_id, user_id, principal_id, effect_key FROM prism_tool_effects"
    " WHERE tenant_id = %s AND account_id = %s AND user_id = %s"
    " AND status IN ('completed', 'failed_terminal') AND updated_ms < %s"
    " ORDER BY updated_ms LIMIT %s)"
    " AND status IN ('completed', 'failed_terminal') AND updated_ms < %s"
)


class _LostRace(Exception):
    """The conditional write changed no row: another writer committed first."""


class PostgresToolEffectStore(BaseToolEffectStore):
    """Effect claims in PostgreSQL, safe across threads, processes and machines.

    ``source`` is a connection string (the store opens and owns one connection, and opens a new
    one before the next call if it was lost), an open ``psycopg.Connection`` in autocommit mode
    (borrowed: ``close`` leaves it open), or a pool with a ``connection()`` context manager such
    as ``psycopg_pool.ConnectionPool`` (borrowed too; each attempt at a call takes a connection
    from it, and calls run in parallel). The tables live in the first schema on the connection's
    ``search_path``; they are created when the store is made, and a database whose
    ``tool_effects`` schema version is newer than this library is refused there.

    A call on the store's own connection (from a DSN or borrowed) runs on the calling thread
    when that connection is free and open, as ``PostgresRunLedger`` runs its appends: one
    statement is one round trip, cheaper than a hop to a worker thread. A pool, a connection
    another thread is using, or one that must be reopened is used from a worker thread
    (``asyncio.to_thread``). On its own connection, the conditional writes of concurrent calls
    on one event loop are committed together (``GroupCommit``): one transaction, one WAL flush,
    and every caller resumes only after the commit.
    """

    def __init__(
        self,
        source: str | psycopg.Connection[Any] | ConnectionPoolLike,
        /,
        now: Clock | None = None,
    ) -> None:
        super().__init__(now)
        self._db = PostgresConnections(source, "PostgresToolEffectStore")
        self._group = GroupCommit(self._commit_together, self._call)
        try:
            self._create_schema()
        except BaseException:
            self.close()
            raise

    # connection ----------------------------------------------------------------------------

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A connection for one operation; what it wrote is committed when the block ends."""
        return self._db.connection()

    def _create_schema(self) -> None:
        with self._connection() as conn, conn.transaction():
            conn.execute(SCHEMA_LOCK_SQL)
            schema, present = _one(conn.execute(_TABLES_PRESENT_SQL).fetchone())
            if schema is None:
                raise RuntimeError(
                    "no schema to hold the tool effect tables: the connection's search_path "
                    "names no existing schema"
                )
            if present < 2:
                # Checked first so that opening an existing store runs no DDL, which would
                # briefly lock out other processes' transitions.
                for statement in _SCHEMA:
                    conn.execute(statement)
            found = conn.execute(
                "SELECT version FROM prism_schema_version WHERE component = %s", (COMPONENT,)
            ).fetchone()
            if found is None:
                conn.execute(
                    "INSERT INTO prism_schema_version (component, version) VALUES (%s, %s)",
                    (COMPONENT, SCHEMA_VERSION),
                )
            elif found[0] > SCHEMA_VERSION:
                raise RuntimeError(
                    f"tool effect schema version {found[0]} in schema {schema!r} of database "
                    f"{conn.info.dbname!r} is newer than this library, which reads up to "
                    f"{SCHEMA_VERSION}"
                )

    def close(self) -> None:
        """Close the connection the store opened; a borrowed connection or pool stays open."""
        self._db.close()

    def __enter__(self) -> PostgresToolEffectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _call(self, fn: Callable[[], T]) -> T:
        # A statement on the store's own free connection is one round trip: run it here, as
        # PostgresRunLedger runs its appends, rather than pay for a hop to a worker thread.
        if self._db.hold_if_free():
            try:
                return fn()
            finally:
                self._db.release()
        return await asyncio.to_thread(fn)

    async def _call_write(self, fn: Callable[[], bool]) -> bool:
        return await self._group.write(fn)

    def _commit_together(self, writes: list[Write]) -> list[WriteOutcome] | None:
        """Run ``writes`` on the store's own connection if it is free: several in one
        transaction (one flush of the server's WAL), one alone. ``None`` for a pool or a busy
        connection (each write then runs on its own)."""
        if not self._db.hold_if_free():
            return None
        try:
            return run_together(self._db, writes)
        finally:
            self._db.release()

    # storage -------------------------------------------------------------------------------

    def _insert(self, slot: Slot, record: ToolEffectRecord, blob: bytes) -> bool:
        _check_text(slot)
        values = (*slot, *stored_columns(record), blob.decode("utf-8"))
        return self._write_once(_INSERT_SQL, values)

    def _swap(
        self, slot: Slot, record: ToolEffectRecord, blob: bytes, version: int, token: str
    ) -> bool:
        _check_text(slot)
        values = (*stored_columns(record), blob.decode("utf-8"), *slot, version, token)
        return self._write_once(_UPDATE_SQL, values)

    def _write_once(self, sql: str, values: tuple[Any, ...]) -> bool:
        """One conditional statement (committed on its own, or with the batch of
        _commit_together it runs in); whether it wrote a row."""
        try:
            return self._db.write_once(sql, values)
        except self._db.psycopg.errors.SerializationFailure:
            # A pooled connection at REPEATABLE READ or above: another writer got there first.
            return False

    def _transact(self, slot: Slot, step: Step) -> Any:
        _check_text(slot)
        for _ in range(MAX_WRITE_RACES):
            try:
                with self._connection() as conn:
                    value = self._attempt(conn, slot, step)
            except _LostRace:
                continue
            except self._db.psycopg.errors.SerializationFailure:
                # Only a pooled connection at REPEATABLE READ or above gets here: the same lost
                # race, reported by the server instead of by the row count.
                continue
            return finish_step(value)
        raise ToolEffectError(ERR_TOOL_EFFECT_CONFLICT, MSG_TRANSITION_CONFLICT)

    @staticmethod
    def _attempt(conn: psycopg.Connection[Any], slot: Slot, step: Step) -> Any:
        row = conn.execute(_SELECT_SQL, slot).fetchone()
        current = None if row is None else decode_record(row[2])
        written, value = step(current)
        if written is None:
            return value
        blob = encode_record(written).decode("utf-8")
        columns = stored_columns(written)
        if row is None:
            cursor = conn.execute(_INSERT_SQL, (*slot, *columns, blob))
        else:
            cursor = conn.execute(_UPDATE_SQL, (*columns, blob, *slot, row[0], row[1]))
        if cursor.rowcount != 1:
            raise _LostRace
        return value

    def _cleanup(self, owner: Owner, before_ms: int, limit: int) -> int:
        if any("\x00" in part for part in owner):
            return 0
        with self._connection() as conn:
            cursor = conn.execute(_CLEANUP_SQL, (*owner, before_ms, limit, before_ms))
            return int(cursor.rowcount)


def _check_text(slot: Slot) -> None:
    if any("\x00" in part for part in slot):
        raise ToolEffectError(
            ERR_TOOL_EFFECT_LIMIT, "tool effect ids must not contain NUL characters"
        )


def _one(found: Any) -> Any:
    if found is None:
        raise RuntimeError("the database returned no row for an aggregate query")
    return found


__all__ = ["COMPONENT", "SCHEMA_VERSION", "ConnectionPoolLike", "PostgresToolEffectStore"]
