"""A conformance suite every ``ToolEffectStore`` must pass (prism-behaviour 2.3).

Subclass ``EffectStoreConformance`` in a ``test_*`` module and provide a ``make_store`` fixture
returning a factory ``(now) -> store``; every test of the class then runs against that store.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from prism_tools.effects import (
    ERR_TOOL_EFFECT_CONFLICT,
    ERR_TOOL_EFFECT_EXPIRED,
    ERR_TOOL_EFFECT_LIMIT,
    ToolEffectError,
    ToolEffectFailure,
    ToolEffectKey,
    ToolEffectRecord,
    ToolEffectStore,
)
from prism_tools.errors import IdentityError
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.types import ToolResult

START = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
IDENTITY = AgentIdentity(principal_id="agent-1", tenant_id="t1", account_id="a1", user_id="u1")
OWNERSHIP = Ownership("t1", "a1", "u1")
CONFLICT = "tool effect transition conflict"


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime = START) -> None:
        self.moment = start

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, ms: int) -> None:
        self.moment += timedelta(milliseconds=ms)


StoreFactory = Callable[[Callable[[], datetime]], Any]


def make_key(
    call_id: str = "call-1",
    arguments: Any = None,
    *,
    identity: AgentIdentity = IDENTITY,
    ownership: Ownership | None = OWNERSHIP,
    tool_name: str = "send_email",
    session_id: str = "session-1",
    run_id: str = "run-1",
    signal: asyncio.Event | None = None,
) -> ToolEffectKey:
    return ToolEffectKey.derive(
        identity,
        ownership,
        session_id=session_id,
        run_id=run_id,
        tool_call_id=call_id,
        tool_name=tool_name,
        arguments={"to": "a@example.com"} if arguments is None else arguments,
        signal=signal,
    )


def result_for(key: ToolEffectKey, value: Any = "sent") -> ToolResult:
    return ToolResult(tool_call_id=key.tool_call_id, name=key.tool_name, value=value)


def raises_effect(code: str, message: str) -> Any:
    """``pytest.raises`` for a ``ToolEffectError`` with this exact code and message."""

    class _Check:
        def __enter__(self) -> None:
            self._ctx = pytest.raises(ToolEffectError)
            self._info = self._ctx.__enter__()

        def __exit__(self, *exc: Any) -> bool:
            handled = self._ctx.__exit__(*exc)
            assert self._info.value.code == code
            assert str(self._info.value) == message
            assert self._info.value.name == "ToolEffectError"
            return bool(handled)

    return _Check()


def conflict() -> Any:
    return raises_effect(ERR_TOOL_EFFECT_CONFLICT, CONFLICT)


def limit(message: str) -> Any:
    return raises_effect(ERR_TOOL_EFFECT_LIMIT, message)


class EffectStoreConformance:
    """The shared rows of the 2.3 table, the state machine, expiry, limits and cleanup."""

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock()

    @pytest.fixture
    def store(self, make_store: StoreFactory, clock: ManualClock) -> Any:
        return make_store(clock)

    async def dispatched(self, store: ToolEffectStore, key: ToolEffectKey) -> ToolEffectRecord:
        claim = (await store.begin(key)).record
        assert claim.claim_token is not None
        return await store.mark_dispatched(
            key, claim_token=claim.claim_token, expected_version=claim.version
        )

    async def unknown(self, store: ToolEffectStore, key: ToolEffectKey) -> ToolEffectRecord:
        record = await self.dispatched(store, key)
        assert record.claim_token is not None
        return await store.mark_unknown(
            key, claim_token=record.claim_token, expected_version=record.version
        )

    # protocol shape ------------------------------------------------------------------------

    def test_is_a_tool_effect_store(self, store: Any) -> None:
        assert isinstance(store, ToolEffectStore)

    # begin ---------------------------------------------------------------------------------

    async def test_get_of_an_absent_record_is_none(self, store: Any) -> None:
        assert await store.get(make_key()) is None

    async def test_begin_acquires_an_absent_effect(self, store: Any) -> None:
        key = make_key()
        outcome = await store.begin(key, claim_ttl_ms=5000)
        record = outcome.record
        assert outcome.outcome == "acquired"
        assert record.status == "pending"
        assert (record.attempt, record.version) == (1, 1)
        assert record.claim_token is not None
        assert len(record.claim_token) == 32
        assert record.created_at == record.updated_at == "2026-01-02T03:04:05.678Z"
        assert record.expires_at == "2026-01-02T03:04:10.678Z"
        assert (record.key, record.session_id, record.run_id) == (key.key, "session-1", "run-1")
        assert (record.tool_call_id, record.tool_name) == ("call-1", "send_email")
        assert record.arguments_hash == key.arguments_hash
        assert (record.tenant_id, record.account_id, record.user_id) == ("t1", "a1", "u1")
        assert record.result is None
        assert record.failure is None
        assert await store.get(key) == record

    async def test_default_claim_ttl_is_fifteen_minutes(self, store: Any) -> None:
        record = (await store.begin(make_key())).record
        assert record.expires_at == "2026-01-02T03:19:05.678Z"

    async def test_second_begin_reports_the_existing_pending_claim(self, store: Any) -> None:
        key = make_key()
        first = (await store.begin(key)).record
        second = await store.begin(key)
        assert second.outcome == "existing"
        assert second.record == first

    async def test_claim_tokens_differ_between_effects(self, store: Any) -> None:
        one = (await store.begin(make_key("a"))).record
        two = (await store.begin(make_key("b"))).record
        assert one.claim_token != two.claim_token

    # the happy path ------------------------------------------------------------------------

    async def test_pending_dispatched_completed(self, store: Any, clock: ManualClock) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        clock.advance(10)
        sent = await store.mark_dispatched(key, claim_token=claim.claim_token, expected_version=1)
        assert sent.status == "dispatched"
        assert sent.version == 2
        assert sent.claim_token == claim.claim_token
        assert sent.expires_at == claim.expires_at
        assert sent.updated_at == "2026-01-02T03:04:05.688Z"
        assert sent.created_at == claim.created_at
        done = await store.complete(
            key,
            claim_token=claim.claim_token,
            expected_version=2,
            result=result_for(key, {"id": 7}),
            result_ref="mail://7",
        )
        assert done.status == "completed"
        assert done.version == 3
        assert done.claim_token is None
        assert done.expires_at is None
        assert done.result == result_for(key, {"id": 7})
        assert done.result_ref == "mail://7"
        again = await store.begin(key)
        assert again.outcome == "existing"
        assert again.record == done
        assert await store.get(key) == done

    async def test_complete_without_result(self, store: Any) -> None:
        key = make_key()
        sent = await self.dispatched(store, key)
        done = await store.complete(key, claim_token=sent.claim_token, expected_version=2)
        assert done.status == "completed"
        assert done.result is None

    # the claim holder's transitions (mark_dispatched_from, complete_from) ------------------

    async def test_a_held_claim_advances_to_completed(self, store: Any, clock: ManualClock) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        clock.advance(10)
        sent = await store.mark_dispatched_from(key, claim)
        assert (sent.status, sent.version, sent.attempt) == ("dispatched", 2, 1)
        assert (sent.claim_token, sent.expires_at) == (claim.claim_token, claim.expires_at)
        assert sent.updated_at == "2026-01-02T03:04:05.688Z"
        assert await store.get(key) == sent
        clock.advance(10)
        done = await store.complete_from(key, sent, result_for(key, {"id": 7}))
        assert (done.status, done.version) == ("completed", 3)
        assert (done.claim_token, done.expires_at, done.failure) == (None, None, None)
        assert done.result == result_for(key, {"id": 7})
        assert done.updated_at == "2026-01-02T03:04:05.698Z"
        assert done.created_at == claim.created_at
        assert await store.get(key) == done
        assert (await store.begin(key)).record == done

    async def test_a_held_record_of_the_wrong_kind_is_a_type_error(self, store: Any) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        for wrong in (None, claim.to_dict()):
            with pytest.raises(TypeError, match="held must be the ToolEffectRecord of the claim"):
                await store.mark_dispatched_from(key, wrong)
            with pytest.raises(TypeError, match="held must be the ToolEffectRecord of the claim"):
                await store.complete_from(key, wrong, result_for(key))
        assert await store.get(key) == claim  # nothing written

    async def test_a_held_claim_matches_the_public_transitions(self, store: Any) -> None:
        # The same call through both paths stores the same records (apart from the tokens).
        held, public = make_key("held"), make_key("public")
        claim = (await store.begin(held)).record
        done = await store.complete_from(
            held, await store.mark_dispatched_from(held, claim), result_for(held)
        )
        other = await self.dispatched(store, public)
        other_done = await store.complete(
            public, claim_token=other.claim_token, expected_version=2, result=result_for(public)
        )

        def comparable(record: ToolEffectRecord) -> dict[str, Any]:
            fields = record.to_dict()
            for name in ("key", "tool_call_id", "result"):
                fields.pop(name)
            return fields

        assert comparable(done) == comparable(other_done)
        assert done.result is not None
        assert other_done.result is not None
        assert done.result.value == other_done.result.value

    async def test_an_expired_held_claim_is_expired_not_advanced(
        self, store: Any, clock: ManualClock
    ) -> None:
        key = make_key()
        claim = (await store.begin(key, claim_ttl_ms=1000)).record
        clock.advance(1000)
        with conflict():
            await store.mark_dispatched_from(key, claim)
        expired = await store.get(key)
        assert expired is not None
        assert (expired.status, expired.version) == ("failed_retryable", 2)
        assert expired.failure == ToolEffectFailure(ERR_TOOL_EFFECT_EXPIRED)

        key = make_key("dispatched")
        claim = (await store.begin(key, claim_ttl_ms=1000)).record
        sent = await store.mark_dispatched_from(key, claim)
        clock.advance(1000)
        with conflict():
            await store.complete_from(key, sent, result_for(key))
        lost = await store.get(key)
        assert lost is not None
        assert (lost.status, lost.version, lost.result) == ("unknown", 3, None)

    async def test_a_stale_held_record_never_overwrites(self, store: Any) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        sent = await store.mark_dispatched(key, claim_token=claim.claim_token, expected_version=1)
        with conflict():
            await store.mark_dispatched_from(key, claim)  # dispatched by someone else already
        failed = await store.fail(
            key,
            claim_token=sent.claim_token,
            expected_version=2,
            status="failed_retryable",
            failure={"code": "E"},
        )
        with conflict():
            await store.complete_from(key, sent, result_for(key))
        assert await store.get(key) == failed
        # A new claim of the same key has a new token: the old holder cannot advance it.
        again = (await store.begin(key)).record
        assert (again.status, again.version, again.attempt) == ("pending", 4, 2)
        with conflict():
            await store.mark_dispatched_from(key, dataclasses.replace(claim, version=4))
        assert await store.get(key) == again

    async def test_a_held_record_of_another_key_changes_nothing(self, store: Any) -> None:
        mine, theirs = make_key("mine"), make_key("theirs")
        claim = (await store.begin(mine)).record
        other = (await store.begin(theirs)).record
        with conflict():
            await store.mark_dispatched_from(theirs, claim)
        assert await store.get(theirs) == other
        assert await store.get(mine) == claim

    async def test_held_transitions_check_identity_signal_and_result(
        self, store: Any, clock: ManualClock
    ) -> None:
        expiring = dataclasses.replace(IDENTITY, expires_at=START + timedelta(seconds=1))
        key = make_key(identity=expiring)
        claim = (await store.begin(key)).record
        clock.advance(1000)
        with pytest.raises(IdentityError):
            await store.mark_dispatched_from(key, claim)

        signal = asyncio.Event()
        key = make_key("signalled", signal=signal)
        claim = (await store.begin(key)).record
        signal.set()
        with pytest.raises(asyncio.CancelledError):
            await store.mark_dispatched_from(key, claim)

        key = make_key("big")
        sent = await store.mark_dispatched_from(key, (await store.begin(key)).record)
        with limit("tool result exceeds limits"):
            await store.complete_from(key, sent, result_for(key, "x" * 70_000))
        with conflict():
            await store.complete_from(key, sent, result_for(make_key("other")))
        assert await store.get(key) == sent

    # refused transitions -------------------------------------------------------------------

    async def test_stale_transitions_conflict(self, store: Any) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        token = claim.claim_token
        with conflict():
            await store.mark_dispatched(key, claim_token=token, expected_version=2)
        with conflict():
            await store.mark_dispatched(key, claim_token="0" * 32, expected_version=1)
        with conflict():
            await store.complete(key, claim_token=token, expected_version=1)
        with conflict():
            await store.mark_unknown(key, claim_token=token, expected_version=1)
        with conflict():
            await store.resolve_unknown(key, expected_version=1, status="completed")
        sent = await store.mark_dispatched(key, claim_token=token, expected_version=1)
        with conflict():
            await store.mark_dispatched(key, claim_token=token, expected_version=1)
        with conflict():
            await store.mark_dispatched(key, claim_token=token, expected_version=2)
        with conflict():
            await store.complete(key, claim_token=token, expected_version=1)
        assert await store.get(key) == sent

    async def test_transitions_on_an_absent_record_conflict(self, store: Any) -> None:
        key = make_key()
        with conflict():
            await store.mark_dispatched(key, claim_token="x" * 32, expected_version=1)
        with conflict():
            await store.fail(
                key,
                claim_token="x",
                expected_version=1,
                status="failed_terminal",
                failure={"code": "E"},
            )
        with conflict():
            await store.resolve_unknown(key, expected_version=1, status="failed_terminal")
        assert await store.get(key) is None

    async def test_completed_and_failed_terminal_are_final(self, store: Any) -> None:
        key = make_key("done")
        sent = await self.dispatched(store, key)
        token = sent.claim_token
        await store.complete(key, claim_token=token, expected_version=2)
        for version in (2, 3):
            with conflict():
                await store.fail(
                    key,
                    claim_token=token,
                    expected_version=version,
                    status="failed_retryable",
                    failure={"code": "E"},
                )
            with conflict():
                await store.mark_unknown(key, claim_token=token, expected_version=version)
        with conflict():
            await store.resolve_unknown(key, expected_version=3, status="failed_retryable")
        key = make_key("terminal")
        claim = (await store.begin(key)).record
        failed = await store.fail(
            key,
            claim_token=claim.claim_token,
            expected_version=1,
            status="failed_terminal",
            failure=ToolEffectFailure("ERR_X", "ref-1"),
        )
        assert failed.status == "failed_terminal"
        assert failed.failure == ToolEffectFailure("ERR_X", "ref-1")
        assert failed.claim_token is None
        assert failed.expires_at is None
        outcome = await store.begin(key, max_attempts=10)
        assert outcome.outcome == "existing"
        assert outcome.record == failed

    async def test_fail_from_pending_and_from_dispatched(self, store: Any) -> None:
        key = make_key("p")
        claim = (await store.begin(key)).record
        failed = await store.fail(
            key,
            claim_token=claim.claim_token,
            expected_version=1,
            status="failed_retryable",
            failure={"code": "ERR_PRISM_TOOL_EFFECT_PRE_DISPATCH"},
        )
        assert (failed.status, failed.version) == ("failed_retryable", 2)
        assert failed.failure == ToolEffectFailure("ERR_PRISM_TOOL_EFFECT_PRE_DISPATCH")
        key = make_key("d")
        sent = await self.dispatched(store, key)
        failed = await store.fail(
            key,
            claim_token=sent.claim_token,
            expected_version=2,
            status="failed_terminal",
            failure={"code": "E", "reference": "why"},
        )
        assert (failed.status, failed.version) == ("failed_terminal", 3)

    async def test_fail_refuses_other_statuses(self, store: Any) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        for status in ("completed", "unknown", "pending", "bogus"):
            with limit("tool effect status is invalid"):
                await store.fail(
                    key,
                    claim_token=claim.claim_token,
                    expected_version=1,
                    status=status,
                    failure={"code": "E"},
                )

    async def test_mark_unknown_only_from_dispatched(self, store: Any) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        with conflict():
            await store.mark_unknown(key, claim_token=claim.claim_token, expected_version=1)
        sent = await store.mark_dispatched(key, claim_token=claim.claim_token, expected_version=1)
        lost = await store.mark_unknown(
            key,
            claim_token=sent.claim_token,
            expected_version=2,
            failure={"code": "ERR_PRISM_TOOL_EFFECT_UNKNOWN"},
        )
        assert (lost.status, lost.version) == ("unknown", 3)
        assert lost.claim_token is None
        assert lost.expires_at is None
        assert lost.failure == ToolEffectFailure("ERR_PRISM_TOOL_EFFECT_UNKNOWN")
        outcome = await store.begin(key)
        assert outcome.outcome == "existing"
        assert outcome.record == lost

    # retries -------------------------------------------------------------------------------

    async def test_failed_retryable_is_reacquired_while_attempts_remain(
        self, store: Any, clock: ManualClock
    ) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        failed = await store.fail(
            key,
            claim_token=claim.claim_token,
            expected_version=1,
            status="failed_retryable",
            failure={"code": "E"},
        )
        clock.advance(1000)
        again = await store.begin(key, claim_ttl_ms=1000)
        assert again.outcome == "acquired"
        record = again.record
        assert (record.status, record.attempt, record.version) == ("pending", 2, 3)
        assert record.claim_token not in (None, claim.claim_token)
        assert record.created_at == claim.created_at
        assert record.updated_at == "2026-01-02T03:04:06.678Z"
        assert record.expires_at == "2026-01-02T03:04:07.678Z"
        assert record.failure is None
        assert failed.version == 2

    async def test_attempts_run_out(self, store: Any) -> None:
        key = make_key()
        for attempt in (1, 2):
            outcome = await store.begin(key, max_attempts=2)
            assert outcome.outcome == "acquired"
            assert outcome.record.attempt == attempt
            record = outcome.record
            await store.fail(
                key,
                claim_token=record.claim_token,
                expected_version=record.version,
                status="failed_retryable",
                failure={"code": "E"},
            )
        exhausted = await store.begin(key, max_attempts=2)
        assert exhausted.outcome == "existing"
        assert exhausted.record.status == "failed_retryable"
        assert (await store.begin(key, max_attempts=3)).outcome == "acquired"
        with limit("effect attempts exceed limits"):
            await store.begin(key, max_attempts=11)

    async def test_default_max_attempts_is_three(self, store: Any) -> None:
        key = make_key()
        for _ in range(3):
            outcome = await store.begin(key)
            assert outcome.outcome == "acquired"
            record = outcome.record
            await store.fail(
                key,
                claim_token=record.claim_token,
                expected_version=record.version,
                status="failed_retryable",
                failure={"code": "E"},
            )
        assert (await store.begin(key)).outcome == "existing"

    # operator resolution -------------------------------------------------------------------

    async def test_resolve_unknown_to_completed_replays(self, store: Any) -> None:
        key = make_key()
        lost = await self.unknown(store, key)
        with conflict():
            await store.resolve_unknown(key, expected_version=lost.version - 1, status="completed")
        done = await store.resolve_unknown(
            key, expected_version=lost.version, status="completed", result=result_for(key)
        )
        assert (done.status, done.version) == ("completed", lost.version + 1)
        assert done.result == result_for(key)
        outcome = await store.begin(key)
        assert outcome.outcome == "existing"
        assert outcome.record == done

    async def test_resolve_unknown_to_failed_retryable_reopens(self, store: Any) -> None:
        key = make_key()
        lost = await self.unknown(store, key)
        reopened = await store.resolve_unknown(
            key,
            expected_version=lost.version,
            status="failed_retryable",
            failure={"code": "OPERATOR"},
        )
        assert reopened.failure == ToolEffectFailure("OPERATOR")
        outcome = await store.begin(key)
        assert outcome.outcome == "acquired"
        assert outcome.record.attempt == 2

    async def test_resolve_unknown_to_failed_terminal(self, store: Any) -> None:
        key = make_key()
        lost = await self.unknown(store, key)
        final = await store.resolve_unknown(
            key, expected_version=lost.version, status="failed_terminal"
        )
        assert final.status == "failed_terminal"
        assert (await store.begin(key)).outcome == "existing"
        with conflict():
            await store.resolve_unknown(key, expected_version=final.version, status="completed")

    async def test_resolve_unknown_refuses_other_statuses(self, store: Any) -> None:
        key = make_key()
        lost = await self.unknown(store, key)
        for status in ("pending", "dispatched", "unknown", "nope"):
            with limit("tool effect status is invalid"):
                await store.resolve_unknown(key, expected_version=lost.version, status=status)

    async def test_only_one_of_two_concurrent_resolutions_succeeds(self, store: Any) -> None:
        key = make_key()
        lost = await self.unknown(store, key)
        outcomes = await asyncio.gather(
            store.resolve_unknown(key, expected_version=lost.version, status="failed_terminal"),
            store.resolve_unknown(key, expected_version=lost.version, status="completed"),
            return_exceptions=True,
        )
        wins = [item for item in outcomes if isinstance(item, ToolEffectRecord)]
        losses = [item for item in outcomes if isinstance(item, ToolEffectError)]
        assert len(wins) == 1
        assert len(losses) == 1
        assert losses[0].code == ERR_TOOL_EFFECT_CONFLICT

    async def test_only_one_of_concurrent_begins_acquires(self, store: Any) -> None:
        key = make_key()
        outcomes = await asyncio.gather(*(store.begin(key) for _ in range(8)))
        assert [item.outcome for item in outcomes].count("acquired") == 1
        tokens = {item.record.claim_token for item in outcomes}
        assert len(tokens) == 1

    # lazy expiry ---------------------------------------------------------------------------

    async def test_expired_pending_becomes_failed_retryable(
        self, store: Any, clock: ManualClock
    ) -> None:
        key = make_key()
        claim = (await store.begin(key, claim_ttl_ms=1000)).record
        clock.advance(999)
        assert (await store.get(key)) == claim
        clock.advance(1)
        expired = await store.get(key)
        assert expired is not None
        assert (expired.status, expired.version) == ("failed_retryable", 2)
        assert expired.failure == ToolEffectFailure(ERR_TOOL_EFFECT_EXPIRED)
        assert expired.claim_token is None
        assert expired.expires_at is None
        assert expired.updated_at == "2026-01-02T03:04:06.678Z"
        assert await store.get(key) == expired
        with conflict():
            await store.mark_dispatched(key, claim_token=claim.claim_token, expected_version=1)
        again = await store.begin(key)
        assert again.outcome == "acquired"
        assert (again.record.attempt, again.record.version) == (2, 3)

    async def test_expired_dispatched_becomes_unknown(self, store: Any, clock: ManualClock) -> None:
        key = make_key()
        claim = (await store.begin(key, claim_ttl_ms=1000)).record
        sent = await store.mark_dispatched(key, claim_token=claim.claim_token, expected_version=1)
        clock.advance(1000)
        with conflict():
            await store.mark_unknown(key, claim_token=sent.claim_token, expected_version=2)
        with conflict():
            await store.complete(key, claim_token=sent.claim_token, expected_version=2)
        lost = await store.get(key)
        assert lost is not None
        assert (lost.status, lost.version) == ("unknown", 3)
        assert lost.failure == ToolEffectFailure(ERR_TOOL_EFFECT_EXPIRED)
        assert lost.claim_token is None
        clock.advance(10**10)
        assert await store.get(key) == lost
        assert (await store.begin(key)).record == lost

    async def test_expiry_is_applied_by_begin(self, store: Any, clock: ManualClock) -> None:
        key = make_key()
        await store.begin(key, claim_ttl_ms=5)
        clock.advance(5)
        outcome = await store.begin(key)
        assert outcome.outcome == "acquired"
        assert outcome.record.attempt == 2

    # limits --------------------------------------------------------------------------------

    @pytest.mark.parametrize("ttl", [0, -1, 3_600_001, True, 1.5, "10"])
    async def test_claim_ttl_bounds(self, store: Any, ttl: Any) -> None:
        with limit("claim TTL exceeds limits"):
            await store.begin(make_key(), claim_ttl_ms=ttl)
        assert await store.get(make_key()) is None

    async def test_claim_ttl_extremes_are_allowed(self, store: Any) -> None:
        assert (await store.begin(make_key("a"), claim_ttl_ms=1)).outcome == "acquired"
        assert (await store.begin(make_key("b"), claim_ttl_ms=3_600_000)).outcome == "acquired"

    async def test_limits_are_checked_when_a_record_exists(self, store: Any) -> None:
        key = make_key()
        await store.begin(key)
        with limit("claim TTL exceeds limits"):
            await store.begin(key, claim_ttl_ms=0)
        with limit("effect attempts exceed limits"):
            await store.begin(key, max_attempts=0)

    @pytest.mark.parametrize("attempts", [0, 11, False, 2.0])
    async def test_attempt_bounds(self, store: Any, attempts: Any) -> None:
        with limit("effect attempts exceed limits"):
            await store.begin(make_key(), max_attempts=attempts)

    @pytest.mark.parametrize(
        ("field", "value", "label"),
        [
            ("key", "k" * 97, "effect key"),
            ("key", "", "effect key"),
            ("key", "   ", "effect key"),
            ("session_id", "s" * 513, "session id"),
            ("session_id", "", "session id"),
            ("run_id", "é" * 257, "run id"),
            ("tool_call_id", "c" * 513, "tool call id"),
            ("tool_call_id", 7, "tool call id"),
            ("tool_name", "n" * 513, "tool name"),
            ("tool_name", "\t", "tool name"),
        ],
    )
    async def test_key_fields_are_bounded(
        self, store: Any, field: str, value: Any, label: str
    ) -> None:
        key = dataclasses.replace(make_key(), **{field: value})
        with limit(f"{label} is required and bounded"):
            await store.begin(key)
        with limit(f"{label} is required and bounded"):
            await store.get(key)

    @pytest.mark.parametrize(
        ("field", "label"),
        [
            ("session_id", "session id"),
            ("tool_call_id", "tool call id"),
            ("tool_name", "tool name"),
        ],
    )
    async def test_key_fields_holding_a_lone_surrogate_are_refused(
        self, store: Any, field: str, label: str
    ) -> None:
        # A JSON decoder makes "c\ud800" from a model's call id; no record may be keyed by it.
        key = dataclasses.replace(make_key(), **{field: "x\ud800"})
        message = f"{label} must be Unicode text: it holds a lone surrogate"
        with limit(message):
            await store.begin(key)
        with limit(message):
            await store.get(key)

    async def test_a_result_holding_a_lone_surrogate_is_stored_with_a_replacement(
        self, store: Any
    ) -> None:
        # The tool has run: its result is kept (U+FFFD where UTF-8 cannot go), not refused.
        key = make_key()
        sent = await self.dispatched(store, key)
        done = await store.complete(
            key,
            claim_token=sent.claim_token,
            expected_version=sent.version,
            result=result_for(key, {"sent_to": "x\ud800", "k\udfff": 1}),
        )
        assert done.status == "completed"
        stored = await store.get(key)
        assert stored.status == "completed"
        assert stored.result is not None
        assert stored.result.value == {"sent_to": "x\ufffd", "k\ufffd": 1}

    async def test_key_fields_at_their_bounds_are_accepted(self, store: Any) -> None:
        key = dataclasses.replace(
            make_key(), key="k" * 96, session_id="s" * 512, tool_name="é" * 256
        )
        assert (await store.begin(key)).outcome == "acquired"

    @pytest.mark.parametrize("digest", ["A" * 64, "a" * 63, "a" * 65, "g" * 64, "", None])
    async def test_arguments_hash_is_checked(self, store: Any, digest: Any) -> None:
        key = dataclasses.replace(make_key(), arguments_hash=digest)
        with limit("arguments hash is invalid"):
            await store.begin(key)

    async def test_result_limits(self, store: Any) -> None:
        key = make_key()
        sent = await self.dispatched(store, key)
        token = sent.claim_token
        with limit("tool result exceeds limits"):
            await store.complete(
                key, claim_token=token, expected_version=2, result=result_for(key, "x" * 65536)
            )
        with conflict():
            await store.complete(
                key,
                claim_token=token,
                expected_version=2,
                result=ToolResult(tool_call_id="other", name=key.tool_name, value=1),
            )
        with conflict():
            await store.complete(
                key,
                claim_token=token,
                expected_version=2,
                result=ToolResult(tool_call_id=key.tool_call_id, name="other", value=1),
            )
        with limit("tool result must be JSON serializable"):
            await store.complete(
                key, claim_token=token, expected_version=2, result=result_for(key, object())
            )
        with limit("effect reference is required and bounded"):
            await store.complete(key, claim_token=token, expected_version=2, result_ref="r" * 1025)
        assert await store.get(key) == sent
        done = await store.complete(
            key,
            claim_token=token,
            expected_version=2,
            result=result_for(key, "x" * 65000),
            result_ref="r" * 1024,
        )
        assert done.status == "completed"

    async def test_failure_limits(self, store: Any) -> None:
        key = make_key()
        claim = (await store.begin(key)).record
        token = claim.claim_token
        bounded = "effect failure code is required and bounded"
        for failure, message in (
            ({"code": "c" * 129}, bounded),
            ({"code": ""}, bounded),
            ({}, bounded),
            ("E", bounded),
            (None, bounded),
            (
                {"code": "smtp\ud800"},
                "effect failure code must be Unicode text: it holds a lone surrogate",
            ),
        ):
            with limit(message):
                await store.fail(
                    key,
                    claim_token=token,
                    expected_version=1,
                    status="failed_terminal",
                    failure=failure,
                )
        with limit("effect reference is required and bounded"):
            await store.fail(
                key,
                claim_token=token,
                expected_version=1,
                status="failed_terminal",
                failure={"code": "E", "reference": "r" * 1025},
            )
        record = await store.fail(
            key,
            claim_token=token,
            expected_version=1,
            status="failed_terminal",
            failure={"code": "c" * 128, "reference": "r" * 1024},
        )
        assert record.failure == ToolEffectFailure("c" * 128, "r" * 1024)

    # identity and ownership ----------------------------------------------------------------

    async def test_ownership_is_required(self, store: Any) -> None:
        for ownership in (Ownership(""), Ownership("  "), None):
            key = dataclasses.replace(make_key(), ownership=ownership)
            with raises_effect(ERR_TOOL_EFFECT_CONFLICT, "tool effect ownership is required"):
                await store.begin(key)

    async def test_ownership_fields_are_bounded(self, store: Any) -> None:
        identity = AgentIdentity("p", "t1", account_id="")
        key = make_key(identity=identity, ownership=Ownership("t1", ""))
        with limit("ownership is required and bounded"):
            await store.begin(key)

    async def test_ownership_must_equal_the_identity(self, store: Any) -> None:
        key = dataclasses.replace(make_key(), ownership=Ownership("t1", "a1"))
        with conflict():
            await store.begin(key)
        key = dataclasses.replace(make_key(), ownership=Ownership("t2", "a1", "u1"))
        with pytest.raises(IdentityError):
            await store.begin(key)

    async def test_identity_must_be_active(self, store: Any, clock: ManualClock) -> None:
        revoked = dataclasses.replace(IDENTITY, revoked=True)
        with pytest.raises(IdentityError):
            await store.begin(make_key(identity=revoked))
        expiring = dataclasses.replace(IDENTITY, expires_at=START + timedelta(seconds=1))
        key = make_key(identity=expiring)
        assert (await store.begin(key)).outcome == "acquired"
        clock.advance(1000)
        with pytest.raises(IdentityError):
            await store.get(key)

    async def test_a_mismatched_existing_record_conflicts(self, store: Any) -> None:
        key = make_key()
        await store.begin(key)
        for change in (
            {"session_id": "session-2"},
            {"run_id": "run-2"},
            {"tool_call_id": "call-2"},
            {"tool_name": "other"},
            {"arguments_hash": "0" * 64},
        ):
            with conflict():
                await store.begin(dataclasses.replace(key, **change))
            with conflict():
                await store.get(dataclasses.replace(key, **change))

    async def test_principals_and_owners_are_separate(self, store: Any) -> None:
        key = make_key()
        other_principal = dataclasses.replace(
            key, identity=dataclasses.replace(IDENTITY, principal_id="agent-2")
        )
        other_user = dataclasses.replace(
            key,
            identity=dataclasses.replace(IDENTITY, user_id="u2"),
            ownership=Ownership("t1", "a1", "u2"),
        )
        assert (await store.begin(key)).outcome == "acquired"
        assert (await store.begin(other_principal)).outcome == "acquired"
        assert (await store.begin(other_user)).outcome == "acquired"
        assert (await store.begin(key)).outcome == "existing"

    async def test_an_aborted_signal_stops_the_call(self, store: Any) -> None:
        signal = asyncio.Event()
        signal.set()
        with pytest.raises(asyncio.CancelledError):
            await store.begin(make_key(signal=signal))
        with pytest.raises(asyncio.CancelledError):
            await store.cleanup(ownership=OWNERSHIP, before=START, signal=signal)
        assert await store.get(make_key()) is None

    # cleanup -------------------------------------------------------------------------------

    async def _one_of_each(self, store: Any) -> dict[str, ToolEffectKey]:
        keys = {name: make_key(name) for name in ("completed", "failed_terminal")}
        keys.update({name: make_key(name) for name in ("pending", "dispatched", "unknown")})
        keys["failed_retryable"] = make_key("failed_retryable")
        sent = await self.dispatched(store, keys["completed"])
        await store.complete(keys["completed"], claim_token=sent.claim_token, expected_version=2)
        for name in ("failed_terminal", "failed_retryable"):
            claim = (await store.begin(keys[name])).record
            await store.fail(
                keys[name],
                claim_token=claim.claim_token,
                expected_version=1,
                status=name,
                failure={"code": "E"},
            )
        await store.begin(keys["pending"], claim_ttl_ms=3_600_000)
        await self.dispatched(store, keys["dispatched"])
        await self.unknown(store, keys["unknown"])
        return keys

    async def test_cleanup_deletes_only_old_terminal_records(
        self, store: Any, clock: ManualClock
    ) -> None:
        keys = await self._one_of_each(store)
        clock.advance(60_000)
        # boundary equal to updated_at keeps the record (strictly before)
        assert await store.cleanup(ownership=OWNERSHIP, before=START) == 0
        deleted = await store.cleanup(ownership=OWNERSHIP, before=clock() + timedelta(hours=2))
        assert deleted == 2
        assert await store.get(keys["completed"]) is None
        assert await store.get(keys["failed_terminal"]) is None
        for name in ("pending", "dispatched", "unknown", "failed_retryable"):
            assert await store.get(keys[name]) is not None, name
        assert await store.cleanup(ownership=OWNERSHIP, before="2100-01-01T00:00:00Z") == 0

    async def test_cleanup_respects_ownership_and_limit(self, store: Any) -> None:
        others = AgentIdentity("agent-1", "t1", "a1")
        for index in range(5):
            key = make_key(f"c{index}")
            sent = await self.dispatched(store, key)
            await store.complete(key, claim_token=sent.claim_token, expected_version=2)
        foreign = make_key("foreign", identity=others, ownership=Ownership("t1", "a1"))
        sent = await self.dispatched(store, foreign)
        await store.complete(foreign, claim_token=sent.claim_token, expected_version=2)
        later = START + timedelta(days=1)
        assert await store.cleanup(ownership=OWNERSHIP, before=later, limit=2) == 2
        assert await store.cleanup(ownership=OWNERSHIP, before=later.isoformat(), limit=2) == 2
        assert await store.cleanup(ownership=OWNERSHIP, before=later) == 1
        assert await store.cleanup(ownership=OWNERSHIP, before=later) == 0
        assert await store.get(foreign) is not None
        assert await store.cleanup(ownership=Ownership("t1", "a1"), before=later) == 1

    @pytest.mark.parametrize("count", [0, 501, True, 2.0])
    async def test_cleanup_limit_bounds(self, store: Any, count: Any) -> None:
        with limit("cleanup limit exceeds limits"):
            await store.cleanup(ownership=OWNERSHIP, before=START, limit=count)

    @pytest.mark.parametrize("before", ["yesterday", "", 123, None])
    async def test_cleanup_boundary_must_be_a_date(self, store: Any, before: Any) -> None:
        with limit("cleanup boundary is invalid"):
            await store.cleanup(ownership=OWNERSHIP, before=before)

    async def test_cleanup_needs_ownership(self, store: Any) -> None:
        with raises_effect(ERR_TOOL_EFFECT_CONFLICT, "tool effect ownership is required"):
            await store.cleanup(ownership=Ownership(" "), before=START)

    # snapshots -----------------------------------------------------------------------------

    async def test_returned_records_are_immutable_snapshots(self, store: Any) -> None:
        key = make_key()
        sent = await self.dispatched(store, key)
        value = {"items": [1, 2], "nested": {"a": 1}}
        done = await store.complete(
            key, claim_token=sent.claim_token, expected_version=2, result=result_for(key, value)
        )
        with pytest.raises(dataclasses.FrozenInstanceError):
            done.status = "pending"  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            done.result.value = None  # type: ignore[misc, union-attr]
        value["items"].append(3)
        done.result.value["nested"]["a"] = 2  # type: ignore[union-attr]
        fresh = await store.get(key)
        assert fresh is not None
        assert fresh.result is not None
        assert fresh.result.value == {"items": [1, 2], "nested": {"a": 1}}

    async def test_records_round_trip_through_dicts(self, store: Any) -> None:
        key = make_key()
        sent = await self.dispatched(store, key)
        done = await store.complete(
            key,
            claim_token=sent.claim_token,
            expected_version=2,
            result=ToolResult(
                tool_call_id=key.tool_call_id,
                name=key.tool_name,
                value={"ok": True},
                metadata={"m": 1},
            ),
        )
        assert ToolEffectRecord.from_dict(done.to_dict()) == done
        assert "claim_token" not in done.to_dict()


def race_worker(path: str, barrier: Any, rounds: int, queue: Any) -> None:
    """Child process body for the cross-process race: ``begin`` each round's key once."""
    from prism_tools.effect_stores import SqliteToolEffectStore

    async def main() -> list[str]:
        store = SqliteToolEffectStore(path)
        outcomes = []
        for index in range(rounds):
            await asyncio.to_thread(barrier.wait)
            outcomes.append((await store.begin(make_key(f"race-{index}"))).outcome)
        store.close()
        return outcomes

    queue.put(asyncio.run(main()))
