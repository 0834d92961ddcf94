"""How dispatch claims, records and replays a tool's side effect (the effect store's client side).

``prepare_effect`` runs after validation: it resolves the tool's declaration, derives the key
the tool sees as ``context.idempotency_key``, and claims the effect in the store. A completed
duplicate comes back as its stored result (dispatch returns it with no events and no rows); a
claim that cannot be taken, or an outcome nobody knows, is a ``ToolEffectError`` that dispatch
turns into a blocked ``execution_denied`` result. Once ``mark_dispatched`` has been attempted,
any failure leaves the record ``unknown`` and the call is never run again by the harness: an
operator resolves it (``resolve_unknown``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, TypeGuard

from prism_tools.effects import (
    ERR_TOOL_EFFECT_COMPLETED,
    ERR_TOOL_EFFECT_CONFLICT,
    ERR_TOOL_EFFECT_PRE_DISPATCH,
    ERR_TOOL_EFFECT_REQUIRED,
    ERR_TOOL_EFFECT_UNKNOWN,
    MSG_CLAIM_UNKNOWN,
    MSG_COMPLETED_NO_RESULT,
    MSG_IDENTITY_REQUIRED,
    MSG_NEEDS_RECONCILIATION,
    MSG_NOT_DISPATCHABLE,
    MSG_STORE_REQUIRED,
    BaseToolEffectStore,
    ToolEffectError,
    ToolEffectKey,
    ToolEffectRecord,
    ToolEffectStore,
    classifier_context,
    resolve_effect,
    stored_result,
)
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.types import ErrorInfo, JSONValue, ToolDefinition, ToolExecutionContext, ToolResult

logger = logging.getLogger("prism_tools.effects")

UNKNOWN_OUTCOME = ErrorInfo(
    message=MSG_NEEDS_RECONCILIATION, code=ERR_TOOL_EFFECT_UNKNOWN, name="ToolEffectError"
)
"""The result error of a call whose side effect may or may not have happened."""

NOT_DISPATCHED_EFFECT = ErrorInfo(
    message="tool effect was not dispatched: its claim could not be marked, and the call may be "
    "retried",
    code=ERR_TOOL_EFFECT_PRE_DISPATCH,
    name="ToolEffectError",
)
"""The result error of a call whose dispatch mark failed before it landed: the tool did not run,
and its claim was released for another attempt."""


def _advances_held_claims(store: ToolEffectStore) -> TypeGuard[BaseToolEffectStore]:
    """Whether ``store`` can advance a claim from the record its holder keeps: a
    ``BaseToolEffectStore`` whose transitions are the shared ones (a subclass that overrides
    ``mark_dispatched`` or ``complete`` gets those called, as before)."""
    kind = type(store)
    return (
        isinstance(store, BaseToolEffectStore)
        and kind.mark_dispatched is BaseToolEffectStore.mark_dispatched
        and kind.complete is BaseToolEffectStore.complete
    )


class EffectClaim:
    """A claim held by one dispatch: the store, the key, and the record as this dispatch last
    wrote it (its claim token and version authorise the next transition). Keeping the record
    lets a ``BaseToolEffectStore`` advance the claim with one conditional write each time,
    without reading it back."""

    __slots__ = ("confirmed", "key", "record", "store", "token")

    def __init__(self, store: ToolEffectStore, key: ToolEffectKey, record: ToolEffectRecord):
        self.store = store
        # Without the run's signal: it stops a claim from being taken, but a claim already held
        # must still be marked, completed or released when the signal is set meanwhile, or it
        # would stay held (and its row open) until it expires.
        self.key = key if key.signal is None else dataclasses.replace(key, signal=None)
        self.record = record
        self.token = record.claim_token or ""
        self.confirmed = False  # mark_dispatched succeeded

    async def release(self) -> None:
        """Before the tool ran: the claim ends ``failed_terminal`` (errors ignored)."""
        await self._ended_before_dispatch(warn=True)

    async def _ended_before_dispatch(self, *, warn: bool = False, retryable: bool = False) -> bool:
        """Ends the claim as it was taken, ``failed_terminal`` (``failed_retryable`` with
        ``retryable``); False when that write failed."""
        try:
            await self.store.fail(
                self.key,
                claim_token=self.token,
                expected_version=self.record.version,
                status="failed_retryable" if retryable else "failed_terminal",
                failure={"code": ERR_TOOL_EFFECT_PRE_DISPATCH},
            )
        except Exception:
            if warn:
                logger.warning("could not release a tool effect claim", exc_info=True)
            return False
        return True

    async def dispatched(self) -> None:
        store = self.store
        if _advances_held_claims(store):
            record = await store.mark_dispatched_from(self.key, self.record)
        else:
            record = await store.mark_dispatched(
                self.key, claim_token=self.token, expected_version=self.record.version
            )
        self.record = record
        self.confirmed = True

    async def complete(self, result: ToolResult) -> ToolResult:
        """Stores the result; returns the stored copy, as a duplicate delivery reads it back
        (NaN as null, a date as its ISO text, a tuple as a list), so every delivery of the call
        gets the same result."""
        store = self.store
        if _advances_held_claims(store):
            record = await store.complete_from(self.key, self.record, result)
        else:
            record = await store.complete(
                self.key,
                claim_token=self.token,
                expected_version=self.record.version,
                result=result,
            )
        return stored_result(record.result if record.result is not None else result)

    async def abandon(self, *, retryable: bool = False) -> bool:
        """The tool did not run, but the mark of dispatch may have landed (the caller was
        cancelled while it was written, or the write failed): the claim is released if it did
        not (``failed_retryable`` with ``retryable``, else ``failed_terminal``), else marked
        unknown (dispatch counts as attempted). True when released. Store errors are
        swallowed."""
        if await self._ended_before_dispatch(retryable=retryable):
            return True
        await self.unknown()  # the mark landed (a newer version), or the store failed
        return False

    async def unknown(self) -> None:
        """The outcome is unknown: mark it so, using our claim if dispatched was confirmed, else
        the record's own if it is dispatched. Store errors are swallowed (the record then
        expires to ``unknown`` by itself)."""
        try:
            token, version = self.token, self.record.version
            if not self.confirmed:
                record = await self.store.get(self.key)
                # Only a mark this claim wrote: past its expiry another worker may hold a new
                # claim on the key, and its outcome is not this call's to judge.
                if record is None or record.status != "dispatched" or record.claim_token != token:
                    return
                version = record.version
            await self.store.mark_unknown(
                self.key,
                claim_token=token,
                expected_version=version,
                failure={"code": ERR_TOOL_EFFECT_UNKNOWN},
            )
        except Exception:
            logger.warning("could not mark a tool effect unknown", exc_info=True)


async def prepare_effect(
    tool: ToolDefinition,
    tool_call_id: str,
    arguments: dict[str, JSONValue],
    context: ToolExecutionContext,
    identity: AgentIdentity | None,
    ownership: Ownership | None,
    store: ToolEffectStore | None,
) -> ToolResult | tuple[ToolExecutionContext, EffectClaim | None] | None:
    """``None``: run unmanaged. A ``ToolResult``: a completed duplicate to return as is.
    Otherwise the context carrying the idempotency key, and the claim when one was taken.
    Raises ``ToolEffectError`` (or ``IdentityError``) when the call must not run."""
    effect = resolve_effect(tool.effect, arguments, classifier_context(context))
    if effect is None or not effect.managed:
        return None
    if identity is None:
        if effect.idempotency == "unsupported":
            return None
        raise ToolEffectError(ERR_TOOL_EFFECT_CONFLICT, MSG_IDENTITY_REQUIRED)
    key = ToolEffectKey.derive(
        identity,
        ownership,
        session_id=context.session_id,
        run_id=context.run_id,
        tool_call_id=tool_call_id,
        tool_name=tool.name,
        arguments=arguments,
        signal=context.signal,
    )
    keyed = dataclasses.replace(context, idempotency_key=key.key)
    if effect.idempotency in ("tool_managed", "unsupported"):
        return keyed, None  # the tool owns its recovery
    if store is None:
        if effect.idempotency == "required":
            raise ToolEffectError(ERR_TOOL_EFFECT_REQUIRED, MSG_STORE_REQUIRED)
        return keyed, None
    try:
        outcome = await store.begin(key)
    except ToolEffectError:
        raise
    except Exception as err:
        raise ToolEffectError(ERR_TOOL_EFFECT_UNKNOWN, MSG_CLAIM_UNKNOWN) from err
    record = outcome.record
    if outcome.outcome == "acquired":
        if not record.claim_token:
            raise ToolEffectError(ERR_TOOL_EFFECT_UNKNOWN, MSG_CLAIM_UNKNOWN)
        return keyed, EffectClaim(store, key, record)
    return _replay(record)


def _replay(record: Any) -> ToolResult:
    """An existing record: its stored result when completed; otherwise why it cannot run."""
    if record.status == "completed":
        if record.result is not None:
            result: ToolResult = record.result
            return result
        raise ToolEffectError(ERR_TOOL_EFFECT_COMPLETED, MSG_COMPLETED_NO_RESULT)
    if record.status in ("dispatched", "unknown"):
        raise ToolEffectError(ERR_TOOL_EFFECT_UNKNOWN, MSG_NEEDS_RECONCILIATION)
    raise ToolEffectError(ERR_TOOL_EFFECT_CONFLICT, MSG_NOT_DISPATCHABLE)


__all__ = ["NOT_DISPATCHED_EFFECT", "UNKNOWN_OUTCOME", "EffectClaim", "prepare_effect"]
