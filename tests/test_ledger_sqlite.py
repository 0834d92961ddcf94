"""SqliteRunLedger: rows committed in order, redacted, queryable, surviving the process."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from tests.support import (
    OpenedConnections,
    check_a_killed_process_keeps_every_started_row,
    check_appends_from_threads,
    check_appends_not_awaited_are_written,
    check_rows_of_concurrent_calls_commit_together,
    check_text_no_column_can_hold_is_stored,
    check_values_json_cannot_write_are_stored,
    ledger_row,
    not_a_database,
)

from prism_tools import (
    ErrorInfo,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
    ledger_sqlite,
)
from prism_tools.ledger_sqlite import SCHEMA_VERSION, SqliteRunLedger

SECRET = "sk-live-ledger-0001"


def context(call_id: str, session: str = "s1", run: str = "r1") -> ToolExecutionContext:
    return ToolExecutionContext(session_id=session, run_id=run, tool_call_id=call_id)


async def echo(args: dict[str, Any], ctx: ToolExecutionContext) -> dict[str, Any]:
    return {"echo": args}


async def test_dispatch_rows_are_stored_in_order_and_redacted(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = SqliteRunLedger(path)
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    for number in range(3):
        await dispatch_tool_call(
            ToolCall(f"c{number}", "echo", {"token": SECRET, "n": number}),
            registry,
            context(f"c{number}", run="r1" if number < 2 else "r2"),
            ledger=ledger,
            secrets=[SECRET],
        )
    rows = ledger.rows()
    assert [(row.tool_call_id, row.status) for row in rows] == [
        ("c0", "started"),
        ("c0", "finished"),
        ("c1", "started"),
        ("c1", "finished"),
        ("c2", "started"),
        ("c2", "finished"),
    ]
    assert rows[1].result is not None
    assert rows[1].result.value == {"echo": {"token": "[REDACTED]", "n": 0}}
    assert [row.tool_call_id for row in ledger.rows(run_id="r2")] == ["c2", "c2"]
    assert len(ledger.rows(tool_call_id="c1")) == 2
    assert ledger.rows(session_id="nobody") == []
    ledger.close()
    assert not secret_on_disk(path)


async def test_text_holding_lone_surrogates_is_stored_with_replacement_characters(
    tmp_path: Path,
) -> None:
    # A JSON decoder turns a model's "\ud800" into a lone surrogate, which UTF-8 (and so the
    # file) cannot carry: the row keeps everything else and marks each one with U+FFFD.
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
        result = await dispatch_tool_call(
            ToolCall("c0", "echo", {"note\ud800": "a\udfff" + SECRET}),
            registry,
            context("c0"),
            ledger=ledger,
            secrets=[SECRET],
        )
        # What the model gets back keeps its surrogates; only the secret is gone.
        assert result.value == {"echo": {"note\ud800": "a\udfff[REDACTED]"}}
        rows = ledger.rows()
    assert [row.status for row in rows] == ["started", "finished"]
    assert rows[0].arguments == {"note\ufffd": "a\ufffd[REDACTED]"}
    assert rows[1].result is not None
    assert rows[1].result.value == {"echo": {"note\ufffd": "a\ufffd[REDACTED]"}}


async def test_ids_and_names_no_column_can_hold_are_stored(tmp_path: Path) -> None:
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        await check_text_no_column_can_hold_is_stored(ledger)


async def test_results_json_cannot_write_as_they_are_are_stored(tmp_path: Path) -> None:
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        await check_values_json_cannot_write_are_stored(ledger)


# Ids that differ only where a ledger column cannot: NUL, a lone surrogate, U+FFFD.
ALIKE_IN_COLUMNS = ("call\x00", "call\ud800", "call\ufffd")


async def test_rows_asked_for_by_id_are_those_of_that_id_alone(tmp_path: Path) -> None:
    # The columns hold NUL and a lone surrogate as U+FFFD, so the query found all three calls.
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        for call_id in ALIKE_IN_COLUMNS:
            await dispatch_tool_call(
                ToolCall(call_id, "echo", {}),
                registry,
                context(call_id, session=call_id),
                ledger=ledger,
            )
        assert [(row.tool_call_id, row.status) for row in ledger.rows(tool_call_id="call\x00")] == [
            ("call\x00", "started"),
            ("call\x00", "finished"),
        ]
        assert [row.session_id for row in ledger.rows(session_id="call\x00")] == ["call\x00"] * 2
        # A lone surrogate has no UTF-8 spelling: the row itself keeps it as U+FFFD, so those
        # two calls are one id to the ledger; never the call whose id holds NUL.
        surrogate = ledger.rows(tool_call_id="call\ud800")
        assert surrogate == ledger.rows(tool_call_id="call\ufffd")
        assert {row.tool_call_id for row in surrogate} == {"call\ufffd"}
        assert [row.status for row in surrogate] == ["started", "finished"] * 2


def secret_on_disk(path: Path) -> bool:
    """True when the secret is in the database file or its WAL side files."""
    files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    return any(SECRET.encode() in file.read_bytes() for file in files if file.exists())


async def test_rows_survive_reopening_and_the_schema_is_versioned(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with SqliteRunLedger(path, synchronous="NORMAL") as ledger:
        await dispatch_tool_call(ToolCall("c1", "echo", {}), registry, context("c1"), ledger=ledger)
    with SqliteRunLedger(path) as again:
        assert len(again) == 2
        assert again.records[0].status == "started"
    with closing(sqlite3.connect(path)) as db, db:
        assert db.execute("SELECT component, version FROM prism_schema_version").fetchall() == [
            ("ledger", SCHEMA_VERSION)
        ]
        db.execute("UPDATE prism_schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(RuntimeError, match="schema version"):
        SqliteRunLedger(path)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("status", "done"),
        ("started_at", 5),
        ("redacted", "no"),
        ("metadata", [1]),
        ("result", {"tool_call_id": "c1", "name": "echo", "error": {"message": "m", "code": [7]}}),
    ],
)
async def test_a_row_changed_outside_the_library_is_a_value_error_naming_it(
    tmp_path: Path, field: str, value: Any
) -> None:
    path = tmp_path / "ledger.db"
    with SqliteRunLedger(path) as ledger:
        ledger.append_tool_call(ledger_row("c1"))
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "UPDATE prism_tool_calls SET row = json_set(row, ?, json(?))",
            (f"$.{field}", json.dumps(value)),
        )
    with SqliteRunLedger(path) as again, pytest.raises(ValueError, match=f"field '{field}'"):
        again.rows(session_id="s1")


def test_a_refused_file_leaves_no_connection_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    newer = tmp_path / "newer.db"
    SqliteRunLedger(newer).close()
    with closing(sqlite3.connect(newer)) as db, db:
        db.execute("UPDATE prism_schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    unreadable = not_a_database(tmp_path / "notes.db")
    opened = OpenedConnections().install(monkeypatch)
    with pytest.raises(RuntimeError, match="schema version"):
        SqliteRunLedger(newer)
    with pytest.raises(sqlite3.DatabaseError):
        SqliteRunLedger(unreadable)
    assert len(opened.connections) == 2
    assert opened.still_open() == []


def test_appends_from_many_threads_all_land(tmp_path: Path) -> None:
    with SqliteRunLedger(tmp_path / "ledger.db", synchronous="NORMAL") as ledger:
        check_appends_from_threads(ledger, ledger_row)


async def test_rows_of_concurrent_calls_are_committed_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        await check_rows_of_concurrent_calls_commit_together(ledger, ledger_sqlite, monkeypatch)


async def test_appends_not_awaited_or_cancelled_are_still_written(tmp_path: Path) -> None:
    await check_appends_not_awaited_are_written(lambda: SqliteRunLedger(tmp_path / "ledger.db"))


async def test_a_call_cancelled_while_its_started_row_waits_is_closed_and_never_runs(
    tmp_path: Path,
) -> None:
    ran: list[str] = []

    async def record(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        ran.append(ctx.tool_call_id)

    registry = create_tool_registry([ToolDefinition("record", execute=record)])
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        tasks = [
            asyncio.create_task(
                dispatch_tool_call(
                    ToolCall(call_id, "record", {}), registry, context(call_id), ledger=ledger
                )
            )
            for call_id in ("gone", "kept")
        ]
        await asyncio.sleep(0)  # both started rows are queued for the next commit
        tasks[0].cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        rows = ledger.rows()
    assert isinstance(outcomes[0], asyncio.CancelledError)
    assert ran == ["kept"]
    # The queued started row was committed all the same, so the call is closed as cancelled.
    gone = [
        (row.status, row.result.error.code if row.result and row.result.error else None)
        for row in rows
        if row.tool_call_id == "gone"
    ]
    assert gone == [("started", None), ("error", "cancelled")]
    assert [row.status for row in rows if row.tool_call_id == "kept"] == ["started", "finished"]


def test_bad_options_and_rows_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteRunLedger(tmp_path / "x.db", synchronous="OFF")  # type: ignore[arg-type]
    with SqliteRunLedger(tmp_path / "y.db") as ledger, pytest.raises(TypeError, match="Record"):
        ledger.append_tool_call({"id": "x"})  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("calls", [1, 40])
def test_a_killed_process_never_loses_a_row_it_moved_past(tmp_path: Path, calls: int) -> None:
    # With 40 calls on one loop, their started rows are committed together (group commit).
    path = tmp_path / "ledger.db"
    check_a_killed_process_keeps_every_started_row(
        "sqlite", str(path), tmp_path, calls, lambda: SqliteRunLedger(path)
    )


async def test_the_ledger_and_the_effect_store_share_one_file(tmp_path: Path) -> None:
    from prism_tools.effect_stores import SqliteToolEffectStore
    from prism_tools.identity import Ownership

    path = tmp_path / "shared.db"
    with SqliteRunLedger(path) as ledger, SqliteToolEffectStore(path) as store:
        cutoff = "2020-01-01T00:00:00.000Z"
        assert await store.cleanup(ownership=Ownership("t1"), before=cutoff) == 0
        ledger.append_tool_call(ledger_row("c1"))
    with closing(sqlite3.connect(path)) as db:
        components = dict(db.execute("SELECT component, version FROM prism_schema_version"))
    assert set(components) == {"ledger", "tool_effects"}
    with SqliteRunLedger(path) as again:
        assert len(again) == 1


def _open_together(path: str, barrier: Any, number: int) -> None:
    barrier.wait()
    with SqliteRunLedger(path) as ledger:
        ledger.append_tool_call(ledger_row(f"p{number}"))
    os._exit(0)


def test_many_processes_opening_a_new_file_together_all_succeed(tmp_path: Path) -> None:
    # Switching a fresh file to WAL from several processes at once used to fail the losers with
    # "database is locked"; they now wait for the winner.
    path = str(tmp_path / "fresh.db")
    context = multiprocessing.get_context("fork")
    count = 6
    for attempt in range(5):
        barrier = context.Barrier(count)
        target = f"{path}.{attempt}"
        processes = [
            context.Process(target=_open_together, args=(target, barrier, n)) for n in range(count)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=60)
        assert [process.exitcode for process in processes] == [0] * count
        with SqliteRunLedger(target) as ledger:
            assert len(ledger) == count


@pytest.mark.parametrize(
    ("call_id", "name"),
    [("c2", 123), ("c3", None), (7, "echo")],
    ids=["int-name", "no-name", "int-id"],
)
async def test_rows_of_calls_with_odd_ids_or_names_read_back(
    tmp_path: Path, call_id: Any, name: Any
) -> None:
    ran: list[Any] = []

    async def echo(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        ran.append(context.tool_call_id)
        return "ok"

    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        await dispatch_tool_call(
            ToolCall(call_id, name, {}),
            registry,
            ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id="c"),
            ledger=ledger,
        )
        rows = ledger.rows(run_id="r1")
    assert rows
    assert all(row.tool_call_id == str(call_id) for row in rows)
    assert all(row.name == str(name) for row in rows)
    assert ran == ([call_id] if name == "echo" else [])  # a blocked call never runs


async def test_rows_are_found_by_the_id_that_is_not_text_they_were_written_with(
    tmp_path: Path,
) -> None:
    # A row stores such an id as its text; the query bound the id itself, which SQLite compared
    # as a number (True as 1) or could not bind at all (beyond 64 bits).
    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    call_ids: list[Any] = [5, 2**64, True]
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        for call_id in call_ids:
            await dispatch_tool_call(
                ToolCall(call_id, "echo", {}),
                registry,
                ToolExecutionContext(session_id=call_id, run_id="r1", tool_call_id=call_id),
                ledger=ledger,
            )
        for call_id in call_ids:
            text = str(call_id)
            found = ledger.rows(tool_call_id=call_id)
            assert [(row.tool_call_id, row.status) for row in found] == [
                (text, "started"),
                (text, "finished"),
            ]
            assert ledger.rows(session_id=call_id) == found
            assert ledger.rows(tool_call_id=text) == found


async def test_what_a_tool_hands_back_is_written_only_as_rows_that_read_back(
    tmp_path: Path,
) -> None:
    async def http_error(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        return ToolResult(context.tool_call_id, "http", error=ErrorInfo("not found", code=404))

    async def listed_metadata(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        return ToolResult(context.tool_call_id, "receipt", value="sent", metadata=["receipt"])  # type: ignore[arg-type]

    async def listed_progress(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        await context.progress(50, ["half"])  # type: ignore[arg-type]
        return "done"

    registry = create_tool_registry(
        [
            ToolDefinition("http", execute=http_error),
            ToolDefinition("receipt", execute=listed_metadata),
            ToolDefinition("progress", execute=listed_progress),
        ]
    )
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        results = [
            await dispatch_tool_call(
                ToolCall(f"c{n}", name, {}),
                registry,
                ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=f"c{n}"),
                ledger=ledger,
            )
            for n, name in enumerate(["http", "receipt", "progress"])
        ]
        rows = ledger.rows(run_id="r1")  # every row the ledger took reads back
    assert results[0].error is not None
    assert results[0].error.code == 404
    assert results[1].error is not None
    assert results[1].error.code == "invalid_tool_result"
    assert results[2].error is not None
    assert "progress metadata must be a mapping" in results[2].error.message
    assert [row.status for row in rows if row.tool_call_id == "c0"] == ["started", "finished"]


async def test_ids_of_other_kinds_are_stored_as_the_text_a_query_finds(tmp_path: Path) -> None:
    import enum

    class Ids(str, enum.Enum):  # noqa: UP042 - its str() is "Ids.FIRST", unlike a StrEnum
        FIRST = "c1"

    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    with SqliteRunLedger(tmp_path / "ledger.db") as ledger:
        for call_id in (Ids.FIRST, (1, 2)):
            await dispatch_tool_call(
                ToolCall(call_id, "echo", {}),  # type: ignore[arg-type]
                registry,
                ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=call_id),  # type: ignore[arg-type]
                ledger=ledger,
            )
        # A str subclass by its characters (not its __str__, "Ids.FIRST"); a tuple as JSON.
        assert [row.tool_call_id for row in ledger.rows(tool_call_id=Ids.FIRST)] == ["c1", "c1"]
        assert [row.tool_call_id for row in ledger.rows(tool_call_id="c1")] == ["c1", "c1"]
        found = ledger.rows(tool_call_id=(1, 2))  # type: ignore[arg-type]
        assert [row.tool_call_id for row in found] == ["[1, 2]", "[1, 2]"]


async def test_rows_an_earlier_version_stored_under_an_ids_str_are_still_found(
    tmp_path: Path,
) -> None:
    import enum

    class Ids(str, enum.Enum):  # noqa: UP042 - its str() is "Ids.FIRST", unlike a StrEnum
        FIRST = "c1"

    registry = create_tool_registry([ToolDefinition("echo", execute=echo)])
    path = tmp_path / "ledger.db"
    with SqliteRunLedger(path) as ledger:
        await dispatch_tool_call(
            ToolCall(Ids.FIRST, "echo", {}), registry, context(Ids.FIRST), ledger=ledger
        )
    # As the version before wrote such an id: by its str(), in the column and the row.
    with closing(sqlite3.connect(path)) as db, db:
        for seq, row in db.execute("SELECT seq, row FROM prism_tool_calls").fetchall():
            data = json.loads(row)
            data["tool_call_id"] = "Ids.FIRST"
            db.execute(
                "UPDATE prism_tool_calls SET tool_call_id = ?, row = ? WHERE seq = ?",
                ("Ids.FIRST", json.dumps(data), seq),
            )
    with SqliteRunLedger(path) as ledger:
        found = ledger.rows(tool_call_id=Ids.FIRST)
        assert [row.status for row in found] == ["started", "finished"]
