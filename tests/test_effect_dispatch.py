"""Dispatch with durable tool effects: keys, claims, replay, the unknown-outcome path, crashes."""

from __future__ import annotations

import asyncio
import datetime
import json
import multiprocessing
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from tests.support import EventLog

from prism_tools import (
    AgentIdentity,
    GuardrailDecision,
    Guardrails,
    InMemoryRunLedger,
    MiddlewareRegistry,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    create_tool_registry,
    dispatch_tool_call,
    guardrail,
)
from prism_tools.effect_stores import SqliteToolEffectStore
from prism_tools.effects import (
    BaseToolEffectStore,
    InMemoryToolEffectStore,
    ToolEffect,
    ToolEffectError,
    ToolEffectKey,
)

IDENTITY = AgentIdentity(principal_id="agent-1", tenant_id="t1")
SECRET = "sk-live-effects-01"


class Counter:
    """A tool body that counts its runs and remembers the keys it saw."""

    def __init__(self, output: Any = "sent", fail: bool = False) -> None:
        self.runs = 0
        self.keys: list[str | None] = []
        self.output = output
        self.fail = fail

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.runs += 1
        self.keys.append(context.idempotency_key)
        if self.fail:
            raise RuntimeError("smtp timeout")
        return self.output


def tool(body: Counter, effect: Any) -> ToolDefinition:
    return ToolDefinition("send_email", execute=body, effect=effect)


def context(call_id: str = "c1", **extra: Any) -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id=call_id, **extra)


async def send(
    definition: ToolDefinition,
    *,
    call_id: str = "c1",
    arguments: dict[str, Any] | None = None,
    **options: Any,
) -> ToolResult:
    options.setdefault("identity", IDENTITY)
    return await dispatch_tool_call(
        ToolCall(call_id, definition.name, {"to": "a@b.c"} if arguments is None else arguments),
        create_tool_registry([definition]),
        context(call_id),
        **options,
    )


REQUIRED = ToolEffect("external_mutation", "required")


def blocked_code(result: ToolResult) -> Any:
    assert result.metadata == {"blocked_reason": "execution_denied"}
    assert result.error is not None
    return result.error.code


async def test_a_tool_without_an_effect_runs_unmanaged_without_a_key() -> None:
    body = Counter()
    result = await send(tool(body, None), effect_store=InMemoryToolEffectStore())
    assert result.value == "sent"
    assert body.keys == [None]


@pytest.mark.parametrize(
    ("effect", "identity", "expect_key"),
    [
        (ToolEffect("none", "none"), IDENTITY, False),
        ({"kind": "local_mutation", "idempotency": "none"}, IDENTITY, False),
        (ToolEffect("external_mutation", "unsupported"), None, False),
        (ToolEffect("external_mutation", "unsupported"), IDENTITY, True),
        (ToolEffect("external_mutation", "tool_managed"), IDENTITY, True),
        (ToolEffect("local_mutation", "optional"), IDENTITY, True),
    ],
)
async def test_which_calls_get_a_key_and_which_run_unmanaged(
    effect: Any, identity: AgentIdentity | None, expect_key: bool
) -> None:
    body = Counter()
    store = InMemoryToolEffectStore()
    result = await send(tool(body, effect), identity=identity)
    assert result.value == "sent"
    assert body.runs == 1
    key = body.keys[0]
    assert (key is not None) is expect_key
    if key is not None:
        assert key.startswith("prism:tool-effect:v1:")
    # Without a store nothing is claimed, and tool-managed effects never touch one.
    if isinstance(effect, ToolEffect) and effect.idempotency == "tool_managed":
        await send(tool(body, effect), identity=identity, effect_store=store)
        assert body.runs == 2


@pytest.mark.parametrize("idempotency", ["optional", "required", "tool_managed"])
async def test_a_durable_effect_needs_a_verified_identity(idempotency: str) -> None:
    body = Counter()
    effect = ToolEffect("external_mutation", idempotency)  # type: ignore[arg-type]
    result = await send(tool(body, effect), identity=None, effect_store=InMemoryToolEffectStore())
    assert blocked_code(result) == "ERR_PRISM_TOOL_EFFECT_CONFLICT"
    assert result.error is not None
    assert result.error.message == "verified identity is required for a durable tool effect"
    assert body.runs == 0


async def test_a_required_effect_without_a_store_never_runs() -> None:
    body = Counter()
    result = await send(tool(body, REQUIRED))
    assert blocked_code(result) == "ERR_PRISM_TOOL_EFFECT_REQUIRED"
    assert body.runs == 0


async def test_a_completed_duplicate_returns_the_stored_result_silently() -> None:
    body = Counter(output={"message_id": "m-1"})
    store = InMemoryToolEffectStore()
    definition = tool(body, REQUIRED)
    first = await send(definition, effect_store=store)
    assert first.value == {"message_id": "m-1"}
    events, ledger = EventLog(), InMemoryRunLedger()
    again = await send(definition, effect_store=store, emit=events, ledger=ledger)
    assert again == first
    assert body.runs == 1
    assert events.events == []
    assert ledger.records == []
    # A new call id (a new model call) or new arguments is a new effect.
    await send(definition, effect_store=store, call_id="c2")
    await send(definition, effect_store=store, arguments={"to": "x@y.z"})
    assert body.runs == 3
    assert len(set(body.keys)) == 3


async def test_lone_surrogates_from_the_model_never_leave_an_effect_unknown() -> None:
    # A JSON decoder makes "\ud800" from a model's text; UTF-8 (and so the store) cannot carry it.
    body = Counter(output={"sent_to": "x\ud800"})
    store = InMemoryToolEffectStore()
    definition = tool(body, REQUIRED)
    first = await send(definition, effect_store=store, arguments={"to": "x\ud800"})
    assert first.value == {"sent_to": "x\ufffd"}  # the stored copy, as every delivery gets it
    again = await send(definition, effect_store=store, arguments={"to": "x\ud800"})
    assert again.value == first.value
    assert body.runs == 1
    # A call id holding one cannot key a record: refused before the tool runs.
    refused = await send(definition, effect_store=store, call_id="c\ud800")
    assert blocked_code(refused) == "ERR_PRISM_TOOL_EFFECT_LIMIT"
    assert refused.error is not None
    assert "tool call id must be Unicode text" in refused.error.message
    assert body.runs == 1


async def test_a_caller_supplied_key_is_never_trusted() -> None:
    body = Counter()
    definition = tool(body, REQUIRED)
    await dispatch_tool_call(
        ToolCall("c1", "send_email", {"to": "a"}),
        create_tool_registry([definition]),
        context(idempotency_key="chosen-by-the-model"),
        identity=IDENTITY,
        effect_store=InMemoryToolEffectStore(),
    )
    assert body.keys[0] != "chosen-by-the-model"
    plain = Counter()
    await dispatch_tool_call(
        ToolCall("c1", "plain", {}),
        create_tool_registry([ToolDefinition("plain", execute=plain)]),
        context(idempotency_key="chosen-by-the-model"),
    )
    assert plain.keys == [None]


async def test_a_failing_tool_leaves_an_unknown_outcome_that_is_never_replayed() -> None:
    body = Counter(fail=True)
    store = InMemoryToolEffectStore()
    definition = tool(body, REQUIRED)
    events = EventLog()
    result = await send(definition, effect_store=store, emit=events)
    assert result.error is not None
    assert (result.error.code, result.error.name) == (
        "ERR_PRISM_TOOL_EFFECT_UNKNOWN",
        "ToolEffectError",
    )
    assert result.error.message == "tool effect outcome requires reconciliation"
    assert "tool_execution_error" in events.types
    key = ToolEffectKey.derive(
        IDENTITY, None, session_id="s1", run_id="r1", tool_call_id="c1",
        tool_name="send_email", arguments={"to": "a@b.c"},
    )  # fmt: skip
    record = await store.get(key)
    assert record is not None
    assert record.status == "unknown"
    again = await send(definition, effect_store=store)
    assert blocked_code(again) == "ERR_PRISM_TOOL_EFFECT_UNKNOWN"
    assert body.runs == 1


async def test_an_error_result_and_a_guardrail_block_are_unknown_outcomes_too() -> None:
    store = InMemoryToolEffectStore()

    async def returns_error(args: dict[str, Any], ctx: ToolExecutionContext) -> ToolResult:
        from prism_tools import ErrorInfo

        return ToolResult(ctx.tool_call_id, "send_email", error=ErrorInfo(message="bounced"))

    result = await send(
        ToolDefinition("send_email", execute=returns_error, effect=REQUIRED), effect_store=store
    )
    assert result.error is not None
    assert result.error.code == "ERR_PRISM_TOOL_EFFECT_UNKNOWN"

    block = guardrail("no-out", "tool_output", lambda c: GuardrailDecision("block", "nope"))
    body = Counter()
    guarded = await send(
        tool(body, REQUIRED),
        call_id="c9",
        effect_store=store,
        guardrails=Guardrails(tool_output=[block]),
    )
    assert guarded.error is not None
    assert guarded.error.code == "ERR_PRISM_TOOL_EFFECT_UNKNOWN"
    assert body.runs == 1


async def test_a_refusal_before_dispatch_releases_the_claim_for_good() -> None:
    body = Counter()
    store = InMemoryToolEffectStore()
    definition = tool(body, REQUIRED)

    def refuse(call: ToolCall, tool: ToolDefinition, context: ToolExecutionContext) -> None:
        raise RuntimeError("change freeze")

    first = await send(definition, effect_store=store, before_execute=refuse)
    assert first.metadata == {"blocked_reason": "execution_denied"}
    assert body.runs == 0
    again = await send(definition, effect_store=store)
    assert blocked_code(again) == "ERR_PRISM_TOOL_EFFECT_CONFLICT"
    assert body.runs == 0


class FlakyStore(InMemoryToolEffectStore):
    """An in-memory store whose chosen step fails as if the database went away."""

    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing = failing

    async def begin(self, key: Any, **options: Any) -> Any:
        if self.failing == "begin":
            raise ConnectionError("database down")
        return await super().begin(key, **options)

    async def mark_dispatched(self, key: Any, **options: Any) -> Any:
        if self.failing == "mark_dispatched":
            raise ConnectionError("database down")
        return await super().mark_dispatched(key, **options)

    async def complete(self, key: Any, **options: Any) -> Any:
        if self.failing == "complete":
            raise ConnectionError("database down")
        return await super().complete(key, **options)


@pytest.mark.parametrize(
    ("failing", "runs", "code"),
    [
        ("begin", 0, "ERR_PRISM_TOOL_EFFECT_UNKNOWN"),
        ("mark_dispatched", 0, "ERR_PRISM_TOOL_EFFECT_PRE_DISPATCH"),
        ("complete", 1, "ERR_PRISM_TOOL_EFFECT_UNKNOWN"),
    ],
)
async def test_store_failures_are_never_a_silent_success_or_a_second_run(
    failing: str, runs: int, code: str
) -> None:
    body = Counter()
    store = FlakyStore(failing)
    definition = tool(body, REQUIRED)
    result = await send(definition, effect_store=store)
    assert result.error is not None
    assert result.error.code == code
    assert body.runs == runs
    store.failing = ""
    again = await send(definition, effect_store=store)
    if failing in ("begin", "mark_dispatched"):
        # Nothing ran: nothing was claimed, or the claim was released when its mark failed
        # before it landed. The redelivery claims and runs it once.
        assert (again.value, body.runs) == ("sent", 1)
    else:
        # The effect may have happened: it never runs again.
        assert again.error is not None
        assert body.runs == runs


class LostMarkStore(InMemoryToolEffectStore):
    """An in-memory store whose dispatched mark, made from the held record, raises before it is
    written, as when the connection is lost."""

    async def mark_dispatched_from(self, key: Any, held: Any) -> Any:
        raise RuntimeError("connection lost")


@pytest.mark.parametrize(
    "store_type",
    [lambda: FlakyStore("mark_dispatched"), LostMarkStore],
    ids=["mark_dispatched", "mark_dispatched_from"],
)
async def test_a_dispatched_mark_that_fails_never_leaves_the_claim_pending_and_held(
    store_type: Any,
) -> None:
    # The tool did not run and the mark did not land: the claim is released for another
    # attempt (as its expiry would release it), never left pending with its token, and the
    # call is closed saying it was not dispatched. A redelivery runs it, once.
    body = Counter()
    store = store_type()
    ledger = InMemoryRunLedger()
    result = await send(tool(body, REQUIRED), effect_store=store, ledger=ledger)
    assert body.runs == 0
    assert result.error is not None
    assert result.error.code == "ERR_PRISM_TOOL_EFFECT_PRE_DISPATCH"
    assert [row.status for row in ledger.records] == ["started", "error"]
    record = await store.get(stored_key())
    assert record is not None
    assert record.status == "failed_retryable"
    assert record.claim_token is None
    if isinstance(store, FlakyStore):
        store.failing = ""
    else:
        store.mark_dispatched_from = super(LostMarkStore, store).mark_dispatched_from  # type: ignore[method-assign]
    again = await send(tool(body, REQUIRED), effect_store=store)
    assert again.value == "sent"
    assert body.runs == 1
    third = await send(tool(body, REQUIRED), effect_store=store)
    assert third.value == "sent"  # the stored result, replayed
    assert body.runs == 1


class CountingStore(InMemoryToolEffectStore):
    """Counts the store's storage calls; the ``fail_write``-th conditional write raises as if
    the database went away. Its transitions are the shared ones, so dispatch advances its
    claims from the record it holds."""

    def __init__(self, fail_write: int = 0) -> None:
        super().__init__()
        self.fail_write = fail_write
        self.calls: list[str] = []

    def _transact(self, slot: Any, step: Any) -> Any:
        self.calls.append("read-check-write")
        return super()._transact(slot, step)

    def _insert(self, slot: Any, record: Any, blob: bytes) -> bool:
        self.calls.append("insert")
        return super()._insert(slot, record, blob)

    def _swap(self, slot: Any, record: Any, blob: bytes, version: int, token: str) -> bool:
        self.calls.append("swap")
        if self.calls.count("swap") == self.fail_write:
            raise ConnectionError("database down")
        return super()._swap(slot, record, blob, version, token)


async def test_a_clean_durable_call_writes_its_claim_three_times_and_never_reads() -> None:
    body = Counter()
    store = CountingStore()
    result = await send(tool(body, REQUIRED), effect_store=store)
    assert (result.value, body.runs) == ("sent", 1)
    assert store.calls == ["insert", "swap", "swap"]
    record = await store.get(stored_key())
    assert record is not None
    assert (record.status, record.version) == ("completed", 3)


def stored_key(call_id: str = "c1") -> ToolEffectKey:
    """The key ``send`` claims for ``call_id``."""
    return ToolEffectKey.derive(
        IDENTITY,
        None,
        session_id="s1",
        run_id="r1",
        tool_call_id=call_id,
        tool_name="send_email",
        arguments={"to": "a@b.c"},
    )


@pytest.mark.parametrize(
    ("fail_write", "code", "runs", "again_runs"),
    [
        # The mark fails before it lands: the tool did not run, the claim is released, and a
        # redelivery runs it once.
        (1, "ERR_PRISM_TOOL_EFFECT_PRE_DISPATCH", 0, 1),
        # Storing the result fails after the tool ran: the outcome is unknown, never run again.
        (2, "ERR_PRISM_TOOL_EFFECT_UNKNOWN", 1, 1),
    ],
)
async def test_a_failed_write_of_a_held_claim_is_never_a_success_or_a_second_run(
    fail_write: int, code: str, runs: int, again_runs: int
) -> None:
    body = Counter()
    store = CountingStore(fail_write)
    definition = tool(body, REQUIRED)
    result = await send(definition, effect_store=store)
    assert result.error is not None
    assert result.error.code == code
    assert body.runs == runs
    await send(definition, effect_store=store)
    assert body.runs == again_runs


async def test_invalid_declarations_and_raising_classifiers_deny_execution() -> None:
    body = Counter()
    invalid = await send(tool(body, {"kind": "none", "idempotency": "required"}))
    assert blocked_code(invalid) == "ERR_PRISM_TOOL_EFFECT_LIMIT"

    def classify(args: dict[str, Any], ctx: Any) -> ToolEffect:
        raise ValueError("cannot tell")

    raising = await send(tool(body, classify))
    assert raising.metadata == {"blocked_reason": "execution_denied"}
    assert body.runs == 0


async def test_a_classifier_decides_per_call() -> None:
    body = Counter()
    store = InMemoryToolEffectStore()

    def classify(args: dict[str, Any], ctx: Any) -> ToolEffect:
        dry = args.get("dry_run", False)
        return ToolEffect("none", "none") if dry else REQUIRED

    definition = tool(body, classify)
    await send(definition, effect_store=store, arguments={"dry_run": True})
    await send(definition, effect_store=store, arguments={"dry_run": True})
    assert body.keys == [None, None]
    await send(definition, effect_store=store, call_id="c5", arguments={"dry_run": False})
    await send(definition, effect_store=store, call_id="c5", arguments={"dry_run": False})
    assert body.runs == 3


async def test_the_stored_result_is_redacted() -> None:
    body = Counter(output={"token": SECRET})
    store = InMemoryToolEffectStore()
    result = await send(tool(body, REQUIRED), effect_store=store, secrets=[SECRET])
    assert SECRET not in repr(result)
    replay = await send(tool(body, REQUIRED), effect_store=store, secrets=[SECRET])
    assert SECRET not in repr(replay)
    assert body.runs == 1


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("status", "done"),
        ("attempt", "1"),
        ("version", True),
        ("tool_name", None),
        ("result", {"tool_call_id": 5}),
        ("failure", {"code": 7}),
        ("updated_at", "garbage"),
        ("created_at", "2026-13-45"),
        ("expires_at", "not a time"),
    ],
)
async def test_a_stored_record_changed_outside_the_library_never_reruns_the_tool(
    tmp_path: Path, column: str, value: Any
) -> None:
    # A row edited by hand (or by another program) is not read as a record: the redelivered call
    # fails closed as an unknown outcome, and reading the row names the field.
    body = Counter()
    db = tmp_path / "effects.db"
    with SqliteToolEffectStore(db) as store:
        first = await send(tool(body, REQUIRED), effect_store=store)
    assert first.value == "sent"
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "UPDATE prism_tool_effects SET record = json_set(record, ?, json(?))",
            (f"$.{column}", json.dumps(value)),
        )

    with SqliteToolEffectStore(db) as store:
        again = await send(tool(body, REQUIRED), effect_store=store)
        with pytest.raises(ValueError, match=f"stored tool effect record field '{column}'"):
            await store.get(stored_key())

    assert body.runs == 1  # the tool did not run again
    assert blocked_code(again) == "ERR_PRISM_TOOL_EFFECT_UNKNOWN"


# -- crashes -------------------------------------------------------------------------------------


def _effect_child(db: str, side: str, ready: str) -> None:
    async def send_money(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        with closing(sqlite3.connect(side)) as conn, conn:
            conn.execute("INSERT INTO transfers (call) VALUES (?)", (ctx.tool_call_id,))
        mark(ready)
        await asyncio.sleep(60)
        return "done"

    async def main() -> None:
        definition = ToolDefinition("send_money", execute=send_money, effect=REQUIRED)
        await dispatch_tool_call(
            ToolCall("c1", "send_money", {"amount": 5}),
            create_tool_registry([definition]),
            context(),
            identity=IDENTITY,
            effect_store=SqliteToolEffectStore(db),
        )

    asyncio.run(main())


def mark(path: str) -> None:
    Path(path).write_text("ready")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_call_killed_mid_effect_is_never_run_again(tmp_path: Path) -> None:
    db, side, ready = tmp_path / "effects.db", tmp_path / "side.db", tmp_path / "ready"
    with closing(sqlite3.connect(side)) as conn, conn:
        conn.execute("CREATE TABLE transfers (call TEXT)")
    process = multiprocessing.get_context("spawn").Process(
        target=_effect_child, args=(str(db), str(side), str(ready))
    )
    process.start()
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline, "the child never reached its side effect"
        time.sleep(0.01)
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join()

    ran: list[str] = []

    async def send_money(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        ran.append(ctx.tool_call_id)
        return "done"

    definition = ToolDefinition("send_money", execute=send_money, effect=REQUIRED)
    with SqliteToolEffectStore(db) as store:
        redelivered = asyncio.run(
            dispatch_tool_call(
                ToolCall("c1", "send_money", {"amount": 5}),
                create_tool_registry([definition]),
                context(),
                identity=IDENTITY,
                effect_store=store,
            )
        )
    assert ran == []
    assert redelivered.error is not None
    assert redelivered.error.code == "ERR_PRISM_TOOL_EFFECT_UNKNOWN"
    with closing(sqlite3.connect(side)) as conn, conn:
        assert conn.execute("SELECT COUNT(*) FROM transfers").fetchone() == (1,)


async def test_the_runtime_passes_its_store_and_identity_to_every_call() -> None:
    from prism_tools import ProviderResponse, ScriptedProvider, create_agent

    body = Counter()
    store = InMemoryToolEffectStore()
    provider = ScriptedProvider(
        [
            ProviderResponse(tool_calls=(ToolCall("c1", "send_email", {"to": "a"}),)),
            ProviderResponse(text="sent"),
        ]
    )
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[tool(body, REQUIRED)],
        identity=IDENTITY,
        effect_store=store,
    )
    result = await agent.session("sess-1").run("mail a")
    assert body.runs == 1
    key = body.keys[0]
    assert key is not None
    assert key.startswith("prism:tool-effect:v1:")
    derived = ToolEffectKey.derive(
        IDENTITY,
        None,
        session_id="sess-1",
        run_id=result.run_id,
        tool_call_id="c1",
        tool_name="send_email",
        arguments={"to": "a"},
    )
    record = await store.get(derived)
    assert record is not None
    assert record.status == "completed"

    # Without an identity the same tool never runs: a durable effect needs one.
    bare = create_agent(
        model="m",
        provider=ScriptedProvider(
            [
                ProviderResponse(tool_calls=(ToolCall("c1", "send_email", {"to": "a"}),)),
                ProviderResponse(text="could not"),
            ]
        ),
        tools=[tool(body, REQUIRED)],
        effect_store=store,
    )
    refused = await bare.session().run("mail a")
    row = next(message for message in refused.messages if message.role == "tool")
    assert row.error is not None
    assert row.error.code == "ERR_PRISM_TOOL_EFFECT_CONFLICT"
    assert body.runs == 1


# --- cancellation, redaction, replay ------------------------------------------------------------


class GatedStore(InMemoryToolEffectStore):
    """Holds one of the claim holder's writes until the test lets it land (or cancels the
    call waiting on it), as a group commit does."""

    def __init__(self, step: str) -> None:
        super().__init__()
        self.step = step
        self.waiting = asyncio.Event()
        self.land = asyncio.Event()

    async def mark_dispatched_from(self, key: Any, held: Any) -> Any:
        return await self._gated("dispatched", super().mark_dispatched_from(key, held))

    async def complete_from(self, key: Any, held: Any, result: Any) -> Any:
        return await self._gated("complete", super().complete_from(key, held, result))

    async def _gated(self, step: str, write: Any) -> Any:
        record = await write  # the write lands; its waiter is what gets cancelled
        if step == self.step:
            self.waiting.set()
            await self.land.wait()
        return record


@pytest.mark.parametrize(
    ("step", "runs", "statuses"),
    [("dispatched", 0, {"failed_terminal", "unknown"}), ("complete", 1, {"completed"})],
)
async def test_a_call_cancelled_while_its_claim_is_written_is_closed_and_not_left_held(
    step: str, runs: int, statuses: set[str]
) -> None:
    body = Counter()
    store = GatedStore(step)
    ledger = InMemoryRunLedger()
    task = asyncio.create_task(send(tool(body, REQUIRED), effect_store=store, ledger=ledger))
    await store.waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert body.runs == runs
    assert [row.status for row in ledger.records] == ["started", "error"]
    closing_row = ledger.records[-1].result
    assert closing_row is not None
    assert closing_row.error is not None
    assert closing_row.error.code == "cancelled"
    record = await store.get(stored_key())
    assert record is not None
    assert record.status in statuses
    assert record.claim_token is None  # no claim left held until its expiry


class TwiceGatedStore(GatedStore):
    """A ``GatedStore`` whose writes that end a cancelled call's claim (``fail``, which releases
    it, and ``mark_unknown``) wait for the test too, so that the call can be cancelled a second
    time while dispatch closes it."""

    def __init__(self, step: str) -> None:
        super().__init__(step)
        self.ending = asyncio.Event()
        self.end = asyncio.Event()

    async def fail(self, key: Any, **options: Any) -> Any:
        await self._ending()
        return await super().fail(key, **options)

    async def mark_unknown(self, key: Any, **options: Any) -> Any:
        await self._ending()
        return await super().mark_unknown(key, **options)

    async def _ending(self) -> None:
        self.ending.set()
        await self.end.wait()


@pytest.mark.parametrize(
    ("step", "runs", "statuses"),
    [("dispatched", 0, {"failed_terminal", "unknown"}), ("complete", 1, {"completed"})],
)
async def test_a_call_cancelled_again_while_it_is_being_closed_is_still_closed(
    step: str, runs: int, statuses: set[str]
) -> None:
    body = Counter()
    store = TwiceGatedStore(step)
    ledger = InMemoryRunLedger()
    task = asyncio.create_task(send(tool(body, REQUIRED), effect_store=store, ledger=ledger))
    await store.waiting.wait()
    task.cancel()
    await store.ending.wait()  # dispatch is ending the claim of the cancelled call
    task.cancel()
    await asyncio.sleep(0.01)
    assert not task.done()  # the second cancellation waits for the call to be closed
    store.end.set()
    with pytest.raises(asyncio.CancelledError):
        await task  # then it reaches the caller

    rows = list(ledger.records)  # already there when the caller sees the cancellation
    assert [row.status for row in rows] == ["started", "error"]
    assert rows[-1].result is not None
    assert rows[-1].result.error is not None
    assert rows[-1].result.error.code == "cancelled"
    assert body.runs == runs
    record = await store.get(stored_key())
    assert record is not None
    assert record.status in statuses
    assert record.claim_token is None  # no claim left held until its expiry


@pytest.fixture(params=["memory", "sqlite"])
def durable_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseToolEffectStore]:
    """An in-memory and a SQLite effect store."""
    if request.param == "memory":
        yield InMemoryToolEffectStore()
        return
    with SqliteToolEffectStore(tmp_path / "effects.db") as store:
        yield store


async def send_with_signal(
    definition: ToolDefinition, signal: asyncio.Event, **options: Any
) -> ToolResult:
    """``send`` in a run whose signal is ``signal``."""
    return await dispatch_tool_call(
        ToolCall("c1", definition.name, {"to": "a@b.c"}),
        create_tool_registry([definition]),
        context(signal=signal),
        identity=IDENTITY,
        **options,
    )


async def test_a_run_signal_set_while_a_durable_tool_runs_still_stores_its_result(
    durable_store: BaseToolEffectStore,
) -> None:
    # The signal stops a claim from being taken; a claim already held is still completed.
    signal = asyncio.Event()
    runs: list[str] = []

    async def body(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        runs.append(ctx.tool_call_id)
        signal.set()  # the host stops the run while the tool is under way
        return "sent"

    definition = ToolDefinition("send_email", execute=body, effect=REQUIRED)
    ledger = InMemoryRunLedger()
    result = await send_with_signal(definition, signal, effect_store=durable_store, ledger=ledger)
    assert (result.value, result.error) == ("sent", None)
    assert [row.status for row in ledger.records] == ["started", "finished"]
    record = await durable_store.get(stored_key())
    assert record is not None
    assert record.status == "completed"
    assert record.claim_token is None
    # A later delivery (a new run without the signal) gets the stored result.
    again = await send(definition, effect_store=durable_store)
    assert again.value == "sent"
    assert runs == ["c1"]


async def test_a_tool_that_stops_on_the_run_signal_is_closed_and_not_left_held(
    durable_store: BaseToolEffectStore,
) -> None:
    signal = asyncio.Event()

    async def body(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        signal.set()
        raise asyncio.CancelledError  # the tool sees the signal and stops

    ledger = InMemoryRunLedger()
    with pytest.raises(asyncio.CancelledError):
        await send_with_signal(
            ToolDefinition("send_email", execute=body, effect=REQUIRED),
            signal,
            effect_store=durable_store,
            ledger=ledger,
        )
    assert [row.status for row in ledger.records] == ["started", "error"]
    closing_row = ledger.records[-1].result
    assert closing_row is not None
    assert closing_row.error is not None
    assert closing_row.error.code == "cancelled"
    record = await durable_store.get(stored_key())
    assert record is not None
    assert record.status == "unknown"  # the tool ran: its outcome is for a person to settle
    assert record.claim_token is None


async def test_a_run_signal_set_before_the_dispatched_mark_never_leaves_the_claim_held(
    durable_store: BaseToolEffectStore,
) -> None:
    signal = asyncio.Event()
    body = Counter()

    def stop_the_run(call: ToolCall, tool_def: ToolDefinition, ctx: ToolExecutionContext) -> None:
        signal.set()  # after the claim was taken, before the tool is marked dispatched

    ledger = InMemoryRunLedger()
    result = await send_with_signal(
        tool(body, REQUIRED),
        signal,
        effect_store=durable_store,
        ledger=ledger,
        before_execute=stop_the_run,
    )
    # The run was stopped before the tool ran: it does not run, the claim ends, and the call
    # is closed (the run itself stops at its next safe point).
    assert body.runs == 0
    assert result.error is not None
    assert result.error.code == "cancelled"
    record = await durable_store.get(stored_key())
    assert record is not None
    assert (record.status, record.claim_token) == ("failed_terminal", None)
    assert [row.status for row in ledger.records] == ["started", "error"]


class RefusingLedger(InMemoryRunLedger):
    """A ledger that refuses the started row, as a full disk would."""

    def append_tool_call(self, record: Any) -> None:
        if record.status == "started":
            raise OSError("disk full")
        super().append_tool_call(record)


async def test_a_refused_started_row_ends_the_claim_and_the_tool_does_not_run(
    durable_store: BaseToolEffectStore,
) -> None:
    from prism_tools import LedgerWriteError

    body = Counter()
    with pytest.raises(LedgerWriteError):
        await send(tool(body, REQUIRED), effect_store=durable_store, ledger=RefusingLedger())
    assert body.runs == 0
    record = await durable_store.get(stored_key())
    assert record is not None
    assert (record.status, record.claim_token) == ("failed_terminal", None)


async def test_a_call_closed_as_a_coroutine_is_still_closed_by_the_loop() -> None:
    # coroutine.close() (a framework tearing a task down) raises GeneratorExit inside the tool's
    # await: nothing can be awaited there, so the loop closes the call's row and claim after.
    gate = asyncio.Event()

    async def waits(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        await gate.wait()
        return "sent"

    async def sink(event: Any) -> None:
        await asyncio.sleep(0)  # an event sink that yields, as a real one does

    store = InMemoryToolEffectStore()
    ledger = InMemoryRunLedger()
    definition = ToolDefinition("send_email", execute=waits, effect=REQUIRED)
    call = send(definition, effect_store=store, ledger=ledger, emit=sink)
    step = call.send(None)  # runs until the tool waits
    while not gate.is_set() and len(ledger.records) < 1:
        step = call.send(None)
    call.close()
    for _ in range(20):
        await asyncio.sleep(0)
    assert [row.status for row in ledger.records] == ["started", "error"]
    record = await store.get(stored_key())
    assert record is not None
    assert record.claim_token is None
    del step


async def test_the_runtime_closes_a_durable_call_when_the_run_signal_is_set_during_it() -> None:
    from prism_tools import (
        AgentRunError,
        ProviderResponse,
        RunCancelledError,
        ScriptedProvider,
        create_agent,
    )

    signal = asyncio.Event()
    runs: list[str] = []

    async def send_money(args: dict[str, Any], ctx: ToolExecutionContext) -> dict[str, Any]:
        runs.append(ctx.tool_call_id)
        signal.set()  # the host stops the run while the transfer is under way
        await asyncio.sleep(0.01)
        return {"sent": args["amount"]}

    store = InMemoryToolEffectStore()
    ledger = InMemoryRunLedger()
    provider = ScriptedProvider(
        [
            ProviderResponse(tool_calls=(ToolCall("call_1", "send_money", {"amount": 5}),)),
            ProviderResponse(text="done"),
        ]
    )
    agent = create_agent(
        model="m",
        provider=provider,
        tools=[ToolDefinition("send_money", execute=send_money, effect=REQUIRED)],
        ledger=ledger,
        identity=IDENTITY,
        effect_store=store,
    )
    session = agent.session("sess")
    with pytest.raises(AgentRunError) as caught:
        await session.run("pay", signal=signal)
    assert isinstance(caught.value.__cause__, RunCancelledError)
    assert runs == ["call_1"]
    # The call that was running finished: its result is its row, its claim completed.
    assert [row.status for row in ledger.records] == ["started", "finished"]
    key = ToolEffectKey.derive(
        IDENTITY,
        None,
        session_id="sess",
        run_id=ledger.records[0].run_id,
        tool_call_id="call_1",
        tool_name="send_money",
        arguments={"amount": 5},
    )
    record = await store.get(key)
    assert record is not None
    assert record.status == "completed"
    assert record.claim_token is None
    row = next(message for message in session.messages if message.role == "tool")
    assert row.error is None
    assert row.content == {"sent": 5}


SECRET_ID = "call_hunter2_1"  # a call id a secret ("hunter2") matches


async def send_with_secret_id(body: Counter, store: InMemoryToolEffectStore) -> ToolResult:
    return await send(
        tool(body, REQUIRED), effect_store=store, call_id=SECRET_ID, secrets=["hunter2"]
    )


async def test_a_redactor_that_matches_the_call_id_never_turns_a_success_unknown() -> None:
    body = Counter()
    store = InMemoryToolEffectStore()
    result = await send_with_secret_id(body, store)
    assert result.error is None
    assert result.value == "sent"
    assert result.tool_call_id == "call_[REDACTED]_1"  # what leaves dispatch is redacted
    record = await store.get(stored_key(SECRET_ID))
    assert record is not None
    assert record.status == "completed"
    assert body.runs == 1


async def test_every_delivery_of_a_completed_call_gets_the_same_stored_result() -> None:
    output = {"price": float("nan"), "limit": float("inf"), "at": datetime.date(2024, 1, 2)}
    body = Counter(output=output)
    store = InMemoryToolEffectStore()
    first = await send(tool(body, REQUIRED), effect_store=store)
    again = await send(tool(body, REQUIRED), effect_store=store)
    assert body.runs == 1
    assert first.value == again.value == {"price": None, "limit": None, "at": "2024-01-02"}


async def test_a_stale_claim_never_marks_the_claim_that_replaced_it_unknown() -> None:
    clock = [datetime.datetime.now(datetime.UTC)]
    store = InMemoryToolEffectStore(now=lambda: clock[0])
    in_tool, release = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    async def body(args: dict[str, Any], context: ToolExecutionContext) -> Any:
        runs.append(context.tool_call_id)
        in_tool.set()
        await release.wait()
        return "sent"

    definition = ToolDefinition("send_email", execute=body, effect=REQUIRED)
    redelivery: asyncio.Task[ToolResult] | None = None

    async def stall(call: ToolCall, tool_def: ToolDefinition, ctx: ToolExecutionContext) -> None:
        nonlocal redelivery
        clock[0] += datetime.timedelta(minutes=16)  # past the claim's expiry
        redelivery = asyncio.create_task(send(definition, effect_store=store))
        await in_tool.wait()  # the redelivery took a new claim and runs the tool

    stale = await send(definition, effect_store=store, before_execute=stall)
    assert stale.error is not None  # its claim expired: an unknown outcome for this delivery
    record = await store.get(stored_key())
    assert record is not None
    assert record.status == "dispatched"  # the live claim is left alone
    release.set()
    assert redelivery is not None
    fresh = await redelivery
    assert fresh.value == "sent"
    assert runs == ["c1"]
    record = await store.get(stored_key())
    assert record is not None
    assert record.status == "completed"


async def test_a_call_cancelled_in_its_before_execute_hook_releases_its_claim() -> None:
    body = Counter()
    store = InMemoryToolEffectStore()
    waiting = asyncio.Event()

    async def approval_gate(
        call: ToolCall, tool_def: ToolDefinition, ctx: ToolExecutionContext
    ) -> None:
        waiting.set()
        await asyncio.sleep(60)

    task = asyncio.create_task(
        send(tool(body, REQUIRED), effect_store=store, before_execute=approval_gate)
    )
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert body.runs == 0
    record = await store.get(stored_key())
    assert record is not None
    assert record.status == "failed_terminal"
    assert record.claim_token is None


async def test_a_replayed_duplicate_is_redacted_as_the_first_delivery_was() -> None:
    body = Counter()
    store = InMemoryToolEffectStore()
    first = await send_with_secret_id(body, store)
    again = await send_with_secret_id(body, store)
    assert body.runs == 1
    assert again == first
    assert "hunter2" not in again.tool_call_id


async def test_a_store_refuses_a_result_it_could_not_read_back() -> None:
    store = InMemoryToolEffectStore()
    key = stored_key()
    began = await store.begin(key)
    held = await store.mark_dispatched_from(key, began.record)
    odd = ToolResult("c1", "send_email", value="sent", metadata=["receipt"])  # type: ignore[arg-type]
    with pytest.raises(ToolEffectError):
        await store.complete_from(key, held, odd)
    record = await store.get(key)
    assert record is not None
    assert record.status == "dispatched"  # still readable, and still the claim's to settle


async def test_a_run_signal_set_before_the_claim_runs_nothing_and_claims_nothing(
    durable_store: BaseToolEffectStore,
) -> None:
    # A host pressing stop while a middleware or guardrail ran: the store would refuse the claim
    # with CancelledError, for a task nobody cancelled.
    signal = asyncio.Event()
    body = Counter()
    ledger = InMemoryRunLedger()

    async def stop(call: ToolCall, next: Any) -> Any:
        signal.set()
        return await next(call)

    middleware = MiddlewareRegistry()
    middleware.use("tool_call", stop)
    result = await send_with_signal(
        tool(body, REQUIRED),
        signal,
        effect_store=durable_store,
        ledger=ledger,
        middleware=middleware,
    )
    assert body.runs == 0
    assert result.error is not None
    assert result.error.code == "cancelled"
    assert result.metadata == {"blocked_reason": "execution_denied"}
    assert [row.status for row in ledger.records] == ["blocked"]
    assert await durable_store.get(stored_key()) is None


class RefusingErrorRows(InMemoryRunLedger):
    """A ledger that refuses the error row of a cancelled call, as a failing disk would."""

    def append_tool_call(self, record: Any) -> None:
        if record.status == "error":
            raise OSError("disk full")
        super().append_tool_call(record)


async def test_a_cancelled_call_ends_cancelled_even_when_its_error_row_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = asyncio.Event()

    async def waits(args: dict[str, Any], ctx: ToolExecutionContext) -> str:
        await gate.wait()
        return "sent"

    definition = ToolDefinition("send_email", execute=waits)
    task = asyncio.create_task(send(definition, ledger=RefusingErrorRows()))
    for _ in range(5):
        await asyncio.sleep(0)
    with caplog.at_level("WARNING", logger="prism_tools.dispatch"):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()
    assert "closing a cancelled tool call failed: LedgerWriteError" in caplog.text
    assert "disk full" not in caplog.text
