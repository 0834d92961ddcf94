"""Small test doubles and checks shared by several test modules."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from prism_tools import AgentEvent

# Any code point, lone surrogates (U+D800 to U+DFFF) included and drawn often: a JSON decoder
# turns a model's "\ud800" into such a string, and hypothesis leaves them out of text by default.
any_character = st.characters(exclude_categories=()) | st.sampled_from(
    ["\ud800", "\udbff", "\udc00", "\udc80", "\udfff"]
)


def any_text(*, min_size: int = 0, max_size: int | None = None) -> st.SearchStrategy[str]:
    """Text of any code points, lone surrogates included (joined from a list: ``st.text``
    leaves surrogates out whatever its alphabet draws)."""
    return st.lists(any_character, min_size=min_size, max_size=max_size).map("".join)


def small_json(*, max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Small JSON values of any shape: what a party outside the process may hand over where a
    decision or a field is expected."""
    leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6))
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


class EventLog:
    """An ``emit`` sink that keeps every event, in order."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]


def not_a_database(path: Path) -> Path:
    """A file at ``path`` that SQLite refuses to open as a database."""
    path.write_bytes(b"these are not the pages of a database" * 100)
    return path


class OpenedConnections:
    """Every ``sqlite3.connect`` made while installed (``install(monkeypatch)``), to check that
    code under test closes what it opened."""

    def __init__(self) -> None:
        self.connections: list[sqlite3.Connection] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> OpenedConnections:
        connect = sqlite3.connect

        def recording(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = connect(*args, **kwargs)
            self.connections.append(connection)
            return connection

        monkeypatch.setattr(sqlite3, "connect", recording)
        return self

    def still_open(self) -> list[sqlite3.Connection]:
        open_ones = []
        for connection in self.connections:
            try:
                connection.execute("SELECT 1")
            except sqlite3.ProgrammingError:
                continue  # "Cannot operate on a closed database"
            except sqlite3.Error:
                pass  # open, on a file it cannot read
            open_ones.append(connection)
        return open_ones


class WallClock:
    """``time.monotonic``, which both the event loop's clock and the run-limit tracker read, moved
    forward by hand while installed (``install(monkeypatch)``). A run given ``LIMIT_MS`` as its
    wall time runs out of it where the test calls ``use_up``, not wherever a loaded machine
    happens to stall it: no real stall comes near ten minutes."""

    LIMIT_MS = 600_000

    def __init__(self) -> None:
        self.offset = 0.0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> WallClock:
        monotonic = time.monotonic
        monkeypatch.setattr(time, "monotonic", lambda: monotonic() + self.offset)
        return self

    def use_up(self) -> None:
        """Moves the clock past the wall time of every run started so far. Every timer due by
        then (a sleep begun before this call too) fires on the event loop's next turn."""
        self.offset += self.LIMIT_MS / 1000 + 1


def append_from_threads(
    ledger: Any, make_row: Callable[[str], Any], prefix: str = "t", per_thread: int = 50
) -> None:
    """Four threads append ``per_thread`` rows each to ``ledger`` at once; thread ``n``'s calls
    are ``{prefix}{n}-0``, ``{prefix}{n}-1``, ... (``make_row(call_id)``)."""

    def writer(thread: int) -> None:
        for number in range(per_thread):
            ledger.append_tool_call(make_row(f"{prefix}{thread}-{number}"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def check_appends_from_threads(ledger: Any, make_row: Callable[[str], Any]) -> None:
    """``append_from_threads`` with fifty rows a thread: every row lands, and each thread's rows
    keep their order."""
    append_from_threads(ledger, make_row)
    rows = ledger.rows()
    assert len(rows) == 200
    for writer_number in range(4):
        prefix = f"t{writer_number}-"
        mine = [row.tool_call_id for row in rows if row.tool_call_id.startswith(prefix)]
        assert mine == [f"{prefix}{number}" for number in range(50)]


def ledger_row(call_id: str, arguments: Any = None) -> Any:
    """A ``started`` ledger row for ``call_id`` (session ``s1``, run ``r1``)."""
    from prism_tools import ToolCallRecord

    return ToolCallRecord(
        id=f"row-{call_id}",
        session_id="s1",
        run_id="r1",
        tool_call_id=call_id,
        name="echo",
        arguments={} if arguments is None else arguments,
        status="started",
        started_at="2026-01-01T00:00:00.000Z",
    )


async def dispatch_at_once(ledger: Any, tool: Any, calls: int) -> None:
    """``calls`` calls to ``tool`` (ids ``c0``, ``c1``, ..., arguments ``{"n": number}``)
    dispatched at once on the running loop, with ``ledger``."""
    import asyncio

    from prism_tools import ToolCall, ToolExecutionContext, create_tool_registry, dispatch_tool_call

    registry = create_tool_registry([tool])
    await asyncio.gather(
        *(
            dispatch_tool_call(
                ToolCall(f"c{n}", tool.name, {"n": n}),
                registry,
                ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=f"c{n}"),
                ledger=ledger,
            )
            for n in range(calls)
        )
    )


async def check_rows_of_concurrent_calls_commit_together(
    ledger: Any, module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fifty calls dispatched at once on one loop: their started rows are one batch for
    ``module.run_together`` (the ledger module's batch runner), their finished rows another,
    and the rows keep the order of the calls."""

    from prism_tools import (
        ToolDefinition,
    )

    batches: list[int] = []
    real = module.run_together

    def counted(db: Any, writes: list[Any], *how: Any) -> list[Any]:
        batches.append(len(writes))
        return real(db, writes, *how)  # type: ignore[no-any-return]

    monkeypatch.setattr(module, "run_together", counted)
    echo = ToolDefinition("echo", execute=lambda args, ctx: args)
    await dispatch_at_once(ledger, echo, 50)
    rows = ledger.rows()
    assert batches == [50, 50]
    assert [row.status for row in rows] == ["started"] * 50 + ["finished"] * 50
    assert [row.tool_call_id for row in rows[:50]] == [f"c{n}" for n in range(50)]


async def check_appends_not_awaited_are_written(open_ledger: Callable[[], Any]) -> None:
    """Appends made inside an event loop and never awaited are read back at once (``rows``,
    ``len``) and committed by ``close``; a waiter cancelled before the commit leaves its row in
    it. (Two or more appends in one turn of the loop are always queued, never written alone.)"""
    import asyncio

    with open_ledger() as ledger:
        cancelled = ledger.append_tool_call(ledger_row("c1"))
        awaited = ledger.append_tool_call(ledger_row("c2"))
        assert isinstance(cancelled, asyncio.Future)
        assert isinstance(awaited, asyncio.Future)
        cancelled.cancel()
        ledger.append_tool_call(ledger_row("c3"))
        assert [row.tool_call_id for row in ledger.rows()] == ["c1", "c2", "c3"]
        await awaited
        ledger.append_tool_call(ledger_row("c4"))
        ledger.append_tool_call(ledger_row("c5"))
        assert len(ledger) == 5
        ledger.append_tool_call(ledger_row("c6"))
        ledger.append_tool_call(ledger_row("c7"))
    with open_ledger() as again:
        assert [row.tool_call_id for row in again.rows()] == [f"c{n}" for n in range(1, 8)]


def _stuck_calls(kind: str, target: str, ready: str, calls: int) -> None:
    """A child process: ``calls`` calls at once on one loop to a tool that marks ``ready`` with
    its call id and then waits to be killed, with a ``kind`` ("sqlite" or "postgres") ledger."""
    import asyncio

    from prism_tools import (
        PostgresRunLedger,
        SqliteRunLedger,
        ToolDefinition,
        ToolExecutionContext,
    )

    def mark(call_id: str) -> None:
        with Path(ready).open("a") as marks:
            marks.write(f"{call_id}\n")

    async def stuck(args: dict[str, Any], ctx: ToolExecutionContext) -> None:
        mark(ctx.tool_call_id)
        await asyncio.sleep(60)

    async def main() -> None:
        ledger = SqliteRunLedger(target) if kind == "sqlite" else PostgresRunLedger(target)
        await dispatch_at_once(ledger, ToolDefinition("stuck", execute=stuck), calls)

    asyncio.run(main())


def check_a_killed_process_keeps_every_started_row(
    kind: str, target: str, tmp_path: Path, calls: int, open_ledger: Callable[[], Any]
) -> None:
    """Kill (SIGKILL) a process whose ``calls`` tools are all running: dispatch had moved past
    each started row, so every one must be in the ledger, seen from this process."""
    import multiprocessing
    import os
    import signal
    import time

    ready = tmp_path / "ready"
    process = multiprocessing.get_context("spawn").Process(
        target=_stuck_calls, args=(kind, target, str(ready), calls)
    )
    process.start()
    deadline = time.monotonic() + 60
    while not ready.exists() or len(ready.read_text().split()) < calls:
        assert time.monotonic() < deadline, "the child never started its tools"
        time.sleep(0.01)
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    assert process.exitcode == -signal.SIGKILL
    with open_ledger() as ledger:
        rows = ledger.rows()
    assert sorted((row.tool_call_id, row.status) for row in rows) == sorted(
        (call_id, "started") for call_id in ready.read_text().split()
    )


async def check_text_no_column_can_hold_is_stored(ledger: Any) -> None:
    """A model's call id and tool name holding NUL and lone surrogates (from "\\u0000" and
    "\\ud800") are written to ``ledger`` with U+FFFD in the indexed columns, found again by the
    same ids, and the rest of the row is kept."""
    from prism_tools import (
        ToolCall,
        ToolDefinition,
        ToolExecutionContext,
        create_tool_registry,
        dispatch_tool_call,
    )

    ran: list[Any] = []
    registry = create_tool_registry([ToolDefinition("echo", execute=lambda a, c: ran.append(a))])
    for call in (
        ToolCall("c\ud800\x00", "echo", {"note": "a\x00b"}),
        ToolCall("c2", "nope\udfff", {}),
    ):
        context = ToolExecutionContext(session_id="s\x00", run_id="r", tool_call_id=call.id)
        await dispatch_tool_call(call, registry, context, ledger=ledger)
    assert ran == [{"note": "a\x00b"}]
    rows = ledger.rows(session_id="s\x00")
    assert [(row.name, row.status) for row in rows] == [
        ("echo", "started"),
        ("echo", "finished"),
        ("nope\ufffd", "blocked"),
    ]
    assert rows[0].arguments == {"note": "a\x00b"}
    assert [row.status for row in ledger.rows(tool_call_id="c\ud800\x00")] == [
        "started",
        "finished",
    ]
    assert [row.reason for row in ledger.rows(tool_call_id="c2")] == ["unknown_tool"]


class Unprintable:
    """A host value whose ``str`` and ``repr`` raise with what it holds in the message."""

    def __init__(self, held: str) -> None:
        self.held = held

    def __str__(self) -> str:
        raise RuntimeError(f"cannot print {self.held}")

    __repr__ = __str__


class UnprintableError(ValueError):
    """A host exception whose message and ``code`` both raise, quoting what it holds."""

    def __str__(self) -> str:
        raise RuntimeError(f"cannot print {self.args}")

    @property
    def code(self) -> str:
        raise RuntimeError(f"no code for {self.args}")


class BrokenToDict:
    """A host value whose ``to_dict`` raises with what it holds in the message."""

    def __init__(self, held: str) -> None:
        self.held = held

    def to_dict(self) -> dict[str, Any]:
        raise RuntimeError(f"cannot convert {self.held}")


# More digits than Python writes in decimal (4,300 unless the host changes the limit).
TOO_LONG_FOR_DECIMAL = 7**6000


def odd_result(secret: str) -> dict[Any, Any]:
    """A tool's return value that no JSON writer takes as it is, quoting ``secret`` only in
    the errors its parts raise."""
    return {
        "big": TOO_LONG_FOR_DECIMAL,
        "odd": Unprintable(secret),
        Unprintable(secret): "keyed by an unprintable object",
        "broken": BrokenToDict(secret),
    }


def odd_result_as_stored() -> dict[str, Any]:
    """``odd_result`` as the lenient writer stores it."""
    return {
        "big": hex(TOO_LONG_FOR_DECIMAL),
        "odd": "[Unprintable Unprintable]",
        "[Unprintable Unprintable]": "keyed by an unprintable object",
        "broken": "[Unprintable BrokenToDict]",
    }


async def check_values_json_cannot_write_are_stored(ledger: Any) -> None:
    """A tool's result that JSON cannot hold as it is (``odd_result``) is written to ``ledger``
    with stand-ins, read back, and the secret its parts would quote is in no row."""
    from prism_tools import (
        ToolCall,
        ToolDefinition,
        ToolExecutionContext,
        create_tool_registry,
        dispatch_tool_call,
    )
    from prism_tools._json import dumps_lenient

    secret = "sk-odd-0123456789"
    registry = create_tool_registry(
        [ToolDefinition("odd", execute=lambda a, c: odd_result(secret))]
    )
    context = ToolExecutionContext(session_id="s-odd", run_id="r", tool_call_id="c1")
    result = await dispatch_tool_call(
        ToolCall("c1", "odd", {}), registry, context, ledger=ledger, secrets=[secret]
    )
    assert result.error is None
    rows = ledger.rows(session_id="s-odd")
    assert [row.status for row in rows] == ["started", "finished"]
    assert rows[1].result.value == odd_result_as_stored()
    assert secret not in dumps_lenient([row.to_dict() for row in rows]).decode()


def transcript_text() -> st.SearchStrategy[dict[str, str]]:
    """Text of any code points (lone surrogates included) for each piece of a transcript that
    the provider adapters send: instructions, a user's and the assistant's text, a call id, a
    tool name, an argument key, raw argument text, a result, an error message and a content
    part. Instructions, the assistant's text, ids and names are never empty."""
    never_empty = {"instructions", "said", "call_id", "name"}
    return st.fixed_dictionaries(
        {
            field: any_text(min_size=1 if field in never_empty else 0, max_size=6)
            for field in TRANSCRIPT_FIELDS
        }
    )


TRANSCRIPT_FIELDS = (
    "instructions",
    "user",
    "said",
    "call_id",
    "name",
    "key",
    "raw",
    "result",
    "error",
    "part",
)
# One transcript with a lone surrogate in every piece.
SURROGATE_IN_EVERY_PIECE = {
    "instructions": "\ud800",
    "user": "a\udfff",
    "said": "b\udbff",
    "call_id": "c\udc00",
    "name": "d\udc80",
    "key": "e\ud800",
    "raw": '{"f": "\ud800"}',
    "result": "g\ud800",
    "error": "h\ud800",
    "part": "i\ud800",
}
