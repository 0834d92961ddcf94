"""``dispatch_tool_call``: the one gate every tool call passes through.

Order (first block wins; a blocked call never reaches ``execute``):

1. charge the run's tool-call budget (``limit_tracker``), blocked calls included;
2. ``tool_call`` middleware; everything after sees the rewritten call;
3. ``tool_input`` guardrails (they see calls to unknown tools too);
4. lookup (``unknown_tool``), filters (``tool_denied``), ``arguments_error`` and non-object
   arguments (``invalid_arguments``) -- lookup and filter are one crossing into the Rust core;
5. identity, then trust, then permission (``permission_denied``);
6. ``validate`` (``validation_failed``);
7. ``before_execute`` (``execution_denied``);
8. ``tool_execution_started`` event and ``started`` row, then ``execute``; each progress report is
   a ``tool_execution_progress`` event and a ``started`` row with the progress fields;
9. a raising tool gives ``tool_execution_error``, an ``error`` row and an error result;
10. ``tool_result`` middleware, ``tool_output`` guardrails on the raw result, redaction, then
    ``tool_execution_finished`` and the ``finished`` row.

With ``secrets`` or a ``redactor``, nothing that leaves dispatch (result, error, event, row,
guardrail reason) carries a secret, on every path. Only a guardrail tripwire, a run-limit breach,
a middleware failure under ``error_policy="throw"``, a ledger that refuses a row, and cancellation
raise; everything else comes back as a ``ToolResult``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from types import CoroutineType
from typing import Any, Protocol, TypeVar, cast

from prism_tools._core import (
    CHECK_DENIED,
    CHECK_NOT_OBJECT,
    CHECK_UNKNOWN,
    SchemaValidator,
    ToolFilter,
    row_ids,
)
from prism_tools._frozen import builder, twin
from prism_tools._json import text_of
from prism_tools._options import check_option_types, has_method
from prism_tools.effect_dispatch import (
    NOT_DISPATCHED_EFFECT,
    UNKNOWN_OUTCOME,
    EffectClaim,
    prepare_effect,
)
from prism_tools.effects import ToolEffectStore
from prism_tools.errors import (
    ArgumentsError,
    GuardrailTripwire,
    LedgerWriteError,
    MiddlewareError,
    PermissionDeniedError,
    TrustDeniedError,
    error_text,
)
from prism_tools.guardrails import (
    TOOL_CALL_BLOCKED,
    TOOL_RESULT_BLOCKED,
    GuardrailContext,
    GuardrailRecord,
    Guardrails,
    blocked_message,
    evaluate_guardrails,
    tripwire_error,
)
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.ledger import RunLedger
from prism_tools.middleware import MiddlewareDiagnostic, MiddlewareRegistry
from prism_tools.policies import PermissionPolicy, PermissionRequest, TrustPolicy, TrustRequest
from prism_tools.redaction import (
    Redactor,
    effective_redactor,
    redact_json_text,
    redact_run_ledger_record,
)
from prism_tools.registry import FilterInput, ToolRegistry, compile_filter
from prism_tools.types import (
    AgentEvent,
    BlockedReason,
    ErrorInfo,
    EventSink,
    JSONValue,
    LedgerStatus,
    ToolCall,
    ToolCallRecord,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    ignore_progress,
)
from prism_tools.validation import ToolParameterValidator

logger = logging.getLogger("prism_tools.dispatch")
# Built in place on the hot paths (see _frozen.twin): the call that passes every field to a
# builder is about a third of the cost of a twenty-field row.
_ResultTwin = twin(ToolResult)
_ContextTwin = twin(ToolExecutionContext)
_EventTwin = twin(AgentEvent)
_RecordTwin = twin(ToolCallRecord)
_build_record = builder(ToolCallRecord)  # positional, every field in declaration order
# Default limits for argument text that reaches dispatch unparsed (1 MiB, 64 levels); hosts
# that want other limits parse first with prism_tools.parse_tool_arguments.
_argument_parser = SchemaValidator()
_NOT_CHECKED = object()  # no validation verdict computed ahead of the validation step

ARGUMENTS_NOT_OBJECT = "Tool arguments must be a JSON object"
_CANCELLED = ErrorInfo(message="Tool call cancelled", code="cancelled")
_STOPPED = ErrorInfo(message="Tool call was not run: the run was stopped", code="cancelled")
ToolValidator = Callable[[ToolDefinition, dict[str, JSONValue], ToolExecutionContext], Any]
BeforeExecute = Callable[[ToolCall, ToolDefinition, ToolExecutionContext], Any]

_inspect_isawaitable = inspect.isawaitable


def _isawaitable(value: Any) -> bool:
    # Most sinks return None and most awaitables are coroutines: answer both without inspect.
    if value is None:
        return False
    return type(value) is CoroutineType or _inspect_isawaitable(value)


class LimitTracker(Protocol):
    """What dispatch needs from a run's limit tracker: ``charge(limit)`` raises
    ``RunLimitError`` when the limit is exceeded."""

    def charge(self, limit: str) -> None: ...


def error_info(err: BaseException, redactor: Redactor | None = None) -> ErrorInfo:
    """An ``ErrorInfo`` for an exception: its message (redacted), stable code and class name."""
    message = error_text(err)
    try:
        code = getattr(err, "code", None)
    except Exception:  # a host exception's property; its error may quote what it holds
        code = None
    if isinstance(code, bool) or not isinstance(code, str | int):
        code = None
    info = ErrorInfo(message=message, code=code, name=type(err).__name__)
    return info if redactor is None else redactor.redact(info)


# [first nanosecond of the cached millisecond, first nanosecond after it, its stamp]: a check is
# two comparisons, no division of a nanosecond count.
_clock_cache: list[Any] = [0, 0, ""]
_time_ns = time.time_ns
_perf_counter_ns = time.perf_counter_ns


def now_iso() -> str:
    """UTC now as ISO 8601 with milliseconds and a ``Z`` suffix.

    Busy dispatchers stamp many rows within one millisecond; the string is built once per
    millisecond and reused, which keeps ledger rows cheap.
    """
    now = _time_ns()
    cache = _clock_cache
    if not cache[0] <= now < cache[1]:
        millis = now // 1_000_000
        seconds, fraction = divmod(millis, 1000)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        cache[2] = f"{stamp}.{fraction:03d}Z"
        cache[0] = millis * 1_000_000
        cache[1] = cache[0] + 1_000_000
    return cache[2]  # type: ignore[no-any-return]


# Row ids: a random per-process prefix plus a counter in hex. Unique across processes with
# overwhelming probability and an order of magnitude cheaper than a uuid4 per row. The core makes
# them a block at a time. Each id is taken from the shared block once, and a thread that finds
# it empty takes a fresh block: under threads an id may be skipped, never repeated.
_ROW_PREFIX = f"toolcall_{os.urandom(8).hex()}_"
_ROW_ID_BLOCK = 256
_row_id_blocks = itertools.count(1, _ROW_ID_BLOCK)
_row_ids: Iterator[str] = iter(())


def _next_row_id_block() -> str:
    global _row_ids
    block = iter(row_ids(_ROW_PREFIX, next(_row_id_blocks), _ROW_ID_BLOCK))
    _row_ids = block
    return next(block)


def new_row_id() -> str:
    """A fresh ledger row id (``toolcall_<16 hex>_<counter in hex>``)."""
    return next(_row_ids, None) or _next_row_id_block()


async def _await_sink(outcome: Awaitable[None], event_type: str) -> None:
    try:
        await outcome
    except Exception:
        logger.exception("event sink failed on %s", event_type)


def _ledger_error(record: ToolCallRecord) -> LedgerWriteError:
    return LedgerWriteError(
        f"the run ledger refused a {record.status} row for tool call {record.tool_call_id}",
        record.status,
    )


async def _await_ledger(outcome: Awaitable[None], record: ToolCallRecord) -> None:
    try:
        # To its end even when the call is cancelled meanwhile: a row cut short would leave the
        # call open in the ledger (the built-in ledgers finish a queued row anyway; another
        # asynchronous ledger's append would simply stop).
        await _to_the_end(outcome)
    except Exception as err:
        raise _ledger_error(record) from err


_NO_TENANT: tuple[None, None, None] = (None, None, None)
# What a tool_result middleware left when its result's error is not an ErrorInfo.
_UNREADABLE_RESULT = object()


class _Audit:
    """Per-call bookkeeping for events, ledger rows and redaction; built only when one is on.

    No ``__init__``: dispatch fills the slots itself, which costs a fraction of a constructor
    call on every audited call.
    """

    __slots__ = ("call", "context", "emit", "ledger", "redactor", "started_at", "t0", "tenant")

    call: ToolCall  # the call the tool runs with, for its progress reports
    context: ToolExecutionContext
    emit: EventSink | None
    ledger: RunLedger | None
    redactor: Redactor | None
    started_at: str
    t0: int  # perf_counter_ns() when dispatch began
    tenant: tuple[str | None, str | None, str | None]

    def scrub(self, value: Any) -> Any:
        return value if self.redactor is None else self.redactor.redact(value)

    def timing(self, status: str) -> dict[str, JSONValue]:
        elapsed = (_perf_counter_ns() - self.t0) // 1_000_000
        return {"duration_ms": elapsed if elapsed > 0 else 0, "status": status}

    # ``event`` and ``row`` are plain functions that return an awaitable only when the sink or
    # the ledger is asynchronous: with synchronous ones (the common case) no coroutine is made.

    def event(self, event: AgentEvent) -> Awaitable[None] | None:
        """Hand ``event`` (redacted) to the sink; a failing sink is logged, never raised."""
        if self.emit is None:
            return None
        if self.redactor is not None:
            event = self.redactor.redact(event)
        try:
            outcome = self.emit(event)
        except Exception:
            # An event sink must not change what dispatch does with the call.
            logger.exception("event sink failed on %s", event.type)
            return None
        if outcome is not None and _isawaitable(outcome):
            return _await_sink(outcome, event.type)
        return None

    def lifecycle(self, call: ToolCall, result: ToolResult | None) -> Awaitable[None] | None:
        """The ``tool_execution_started`` event and ``started`` row (``result`` None), or the
        ``tool_execution_finished`` event and ``finished`` row; either half may be off.

        The hot path of every audited call, so the event and the row are built in place here
        (see _frozen.twin): with a synchronous sink and ledger each transition is one call.
        """
        status: LedgerStatus = "started" if result is None else "finished"
        context = self.context
        if self.emit is not None:
            event = _EventTwin()
            event.session_id = context.session_id
            event.run_id = context.run_id
            if result is None:
                event.type = "tool_execution_started"
                event.call = call
                event.result = event.metadata = None
            else:
                elapsed = (_perf_counter_ns() - self.t0) // 1_000_000
                event.type = "tool_execution_finished"
                event.call = None
                event.result = result
                event.metadata = {"duration_ms": elapsed if elapsed > 0 else 0, "status": status}
            event.tool_call_id = event.name = event.error = event.reason = event.progress = None
            event.tool_name = event.record = event.data = None
            event.__class__ = AgentEvent
            # event(), record() and store() are written out here, not called: on every
            # transition of every audited call, the three calls cost about 5% of a transition.
            if self.redactor is not None:
                event = self.redactor.redact(event)
            try:
                outcome = self.emit(event)
            except Exception:
                logger.exception("event sink failed on %s", event.type)
                outcome = None
            if outcome is not None and _isawaitable(outcome):
                return self._row_after(_await_sink(outcome, event.type), call, status, result)
        ledger = self.ledger
        if ledger is None:
            return None
        record = _RecordTwin()
        record.id = next(_row_ids, None) or _next_row_id_block()  # new_row_id(), inline
        record.session_id = context.session_id
        record.run_id = context.run_id
        record.tool_call_id = call.id
        record.name = call.name
        record.arguments = call.arguments
        record.status = status
        record.started_at = self.started_at
        record.redacted = self.redactor is not None
        record.tenant_id, record.account_id, record.user_id = self.tenant
        if result is None:
            record.finished_at = None
        else:
            clock = _clock_cache  # now_iso(), inline while the cached stamp is current
            record.finished_at = clock[2] if clock[0] <= _time_ns() < clock[1] else now_iso()
        record.result = result
        record.reason = record.progress = record.progress_metadata = record.progress_at = None
        record.entry_id = record.metadata = None
        record.__class__ = ToolCallRecord
        if self.redactor is not None:
            record = redact_run_ledger_record(record, self.redactor)
        try:
            outcome = ledger.append_tool_call(record)
        except Exception as err:
            raise _ledger_error(record) from err
        if outcome is not None and _isawaitable(outcome):
            return _await_ledger(outcome, record)
        return None

    async def _row_after(
        self,
        pending: Awaitable[None],
        call: ToolCall,
        status: LedgerStatus,
        result: ToolResult | None,
    ) -> None:
        # An asynchronous sink: its event is delivered before the row is appended.
        try:
            await pending
        except asyncio.CancelledError:
            if status == "finished":
                # The tool is done: its row says so, and then the cancellation goes on.
                stored = self.row(call, status, result)
                if stored is not None:
                    await stored
            raise
        stored = self.row(call, status, result)
        if stored is not None:
            await stored

    def row(
        self,
        call: ToolCall,
        status: LedgerStatus,
        result: ToolResult | None = None,
        reason: str | None = None,
        progress: JSONValue = None,
        progress_metadata: Mapping[str, JSONValue] | None = None,
        progress_at: str | None = None,
    ) -> Awaitable[None] | None:
        """Append a ledger row (redacted); a refusal raises ``LedgerWriteError``."""
        if self.ledger is None:
            return None
        record = self.record(call, status, result, reason, progress, progress_metadata, progress_at)
        return self.store(record)

    def record(
        self,
        call: ToolCall,
        status: LedgerStatus,
        result: ToolResult | None,
        reason: str | None,
        progress: JSONValue = None,
        progress_metadata: Mapping[str, JSONValue] | None = None,
        progress_at: str | None = None,
    ) -> ToolCallRecord:
        """A ledger row for ``call`` on the paths other than the two lifecycle transitions
        (progress, blocked, error); ``lifecycle`` builds its rows in place."""
        context = self.context
        tenant_id, account_id, user_id = self.tenant
        # entry_id and metadata are set by session layers, never by dispatch.
        return _build_record(
            new_row_id(),
            context.session_id,
            context.run_id,
            call.id,
            call.name,
            call.arguments,
            status,
            self.started_at,
            self.redactor is not None,
            None,
            tenant_id,
            account_id,
            user_id,
            None if status == "started" else now_iso(),
            result,
            reason,
            progress,
            progress_metadata,
            progress_at,
            None,
        )

    def store(self, record: ToolCallRecord) -> Awaitable[None] | None:
        """Redact ``record`` if needed and append it to the ledger (which must be set)."""
        if self.redactor is not None:
            record = redact_run_ledger_record(record, self.redactor)
        try:
            outcome = self.ledger.append_tool_call(record)  # type: ignore[union-attr]
        except Exception as err:
            raise _ledger_error(record) from err
        if outcome is not None and _isawaitable(outcome):
            return _await_ledger(outcome, record)
        return None

    async def progress(
        self, value: JSONValue = None, metadata: Mapping[str, JSONValue] | None = None
    ) -> None:
        """The tool's ``context.progress`` under audit: the host's sink, then an event and a row.

        A bound method rather than a closure: it costs less to make on every audited call.
        """
        if metadata is not None and not isinstance(metadata, Mapping):
            # The tool's own mistake, raised in the tool: its row and event could not hold it.
            raise TypeError(
                f"progress metadata must be a mapping or None, got {type(metadata).__name__}"
            )
        context = self.context
        host = context.progress
        if host is not ignore_progress:
            outcome = host(value, metadata)
            if _isawaitable(outcome):
                await outcome
        call = self.call
        pending = self.event(
            AgentEvent(
                type="tool_execution_progress",
                session_id=context.session_id,
                run_id=context.run_id,
                tool_call_id=call.id,
                name=call.name,
                progress=value,
                metadata=metadata,
            )
        )
        if pending is not None:
            await pending
        if self.ledger is not None:
            pending = self.row(call, "started", None, None, value, metadata, now_iso())
            if pending is not None:
                await pending

    async def blocked(self, call: ToolCall, reason: BlockedReason, error: ErrorInfo) -> ToolResult:
        # The whole result, as on success: its call id and tool name may quote a secret too.
        result: ToolResult = self.scrub(_blocked_result(call, reason, error))
        error = cast(ErrorInfo, result.error)
        if self.redactor is not None and isinstance(call.arguments, str | bytes):
            call = _with_scrubbed_text(call, self.redactor)
        if self.emit is not None:
            pending = self.event(
                AgentEvent(
                    type="tool_execution_blocked",
                    session_id=self.context.session_id,
                    run_id=self.context.run_id,
                    tool_call_id=call.id,
                    name=call.name,
                    reason=reason,
                    error=error,
                    metadata=self.timing("blocked"),
                )
            )
            if pending is not None:
                await pending
        pending = self.row(call, "blocked", result, reason)
        if pending is not None:
            await pending
        return result

    async def failed(self, call: ToolCall, error: ErrorInfo) -> ToolResult:
        result: ToolResult = self.scrub(_error_result(call, error))
        error = cast(ErrorInfo, result.error)
        if self.emit is not None:
            pending = self.event(
                AgentEvent(
                    type="tool_execution_error",
                    session_id=self.context.session_id,
                    run_id=self.context.run_id,
                    call=call,
                    error=error,
                    metadata=self.timing("error"),
                )
            )
            if pending is not None:
                await pending
        pending = self.row(call, "error", result)
        if pending is not None:
            await pending
        return result


_RAN_BEFORE_CANCEL = "prism_tool_result"


def ran_before_cancel(error: BaseException) -> ToolResult | None:
    """The result of a call cancelled after its tool had run to its end and that end had been
    recorded (dispatch sets it on the ``CancelledError`` it raises), else None."""
    result = getattr(error, _RAN_BEFORE_CANCEL, None)
    return result if isinstance(result, ToolResult) else None


def _error_result(call: ToolCall, error: ErrorInfo) -> ToolResult:
    return ToolResult(tool_call_id=call.id, name=call.name, error=error)


def _scrubbed_tripwire(tripwire: GuardrailTripwire, redactor: Redactor) -> GuardrailTripwire:
    """A tool's own tripwire as it may leave dispatch: its message, record and code redacted."""
    code = tripwire.code
    return GuardrailTripwire(
        redactor.redact(error_text(tripwire)),
        record=redactor.redact(tripwire.record),
        code=redactor.redact(code) if isinstance(code, str) else None,
    )


def _scrubbed_stop(stop: BaseException, redactor: Redactor) -> BaseException:
    """A tripwire or middleware error as it may leave dispatch under a redactor: redacted, and
    raised without the exception it was made from (a host's error may quote a secret)."""
    if isinstance(stop, GuardrailTripwire):
        return _scrubbed_tripwire(stop, redactor)
    return MiddlewareError(redactor.redact(error_text(stop)))


def _with_scrubbed_text(call: ToolCall, redactor: Redactor) -> ToolCall:
    """The call with its raw argument text, which its row keeps as sent, redacted literal by
    literal (a secret the model wrote with escapes of its choosing included)."""
    raw = call.arguments
    text = raw if isinstance(raw, str) else bytes(cast(bytes, raw)).decode("utf-8", "replace")
    scrubbed = redact_json_text(text, redactor)
    if scrubbed == text:
        return call
    return ToolCall(call.id, call.name, scrubbed, call.arguments_error)


def _blocked_result(call: ToolCall, reason: BlockedReason, error: ErrorInfo) -> ToolResult:
    # The reason rides along in metadata so a host can tell why without reading events.
    return ToolResult(
        tool_call_id=call.id, name=call.name, error=error, metadata={"blocked_reason": reason}
    )


async def _block(
    audit: _Audit | None, call: ToolCall, reason: BlockedReason, error: ErrorInfo
) -> ToolResult:
    if audit is None:
        return _blocked_result(call, reason, error)
    return await audit.blocked(call, reason, error)


async def record_refusal(
    call: ToolCall,
    context: ToolExecutionContext,
    reason: BlockedReason,
    error: ErrorInfo,
    *,
    emit: EventSink | None = None,
    redactor: Redactor | None = None,
    ledger: RunLedger | None = None,
    ownership: Ownership | None = None,
) -> ToolResult:
    """Audits a call the harness answers without dispatching it (a rejected approval): the
    ``tool_execution_blocked`` event and ``blocked`` row dispatch writes for its own refusals,
    redacted alike, so the ledger shows every call a model asked for. Returns the blocked
    result (redacted)."""
    if emit is None and ledger is None:
        result = _blocked_result(call, reason, error)
        return result if redactor is None else redactor.redact(result)
    audit = _Audit()
    audit.call = call
    audit.context = context
    audit.emit = emit
    audit.ledger = ledger
    audit.redactor = redactor
    audit.tenant = (
        _NO_TENANT
        if ownership is None
        else (ownership.tenant_id, ownership.account_id, ownership.user_id)
    )
    audit.t0 = _perf_counter_ns()
    audit.started_at = "" if ledger is None else now_iso()
    return await audit.blocked(call, reason, error)


async def _guard(
    stage: str,
    guardrails: Guardrails,
    value: Any,
    call: ToolCall,
    context: ToolExecutionContext,
    audit: _Audit | None,
) -> GuardrailRecord | None:
    guards = guardrails.for_stage("tool_input" if stage == "tool_input" else "tool_output")
    if not guards:
        return None
    guard_context = GuardrailContext(
        stage=stage,  # type: ignore[arg-type]
        value=value,
        session_id=context.session_id,
        run_id=context.run_id,
        tool_call_id=call.id,
        tool_name=call.name if isinstance(call.name, str) else None,
        metadata=context.metadata or {},
        signal=context.signal,
    )
    scrub = audit.scrub if audit is not None and audit.redactor is not None else (lambda v: v)
    records, terminal = await evaluate_guardrails(
        stage,  # type: ignore[arg-type]
        guards,
        guard_context,
        max_concurrency=guardrails.concurrency,
        scrub=scrub,
    )
    if audit is not None:
        for record in records:
            pending = audit.event(
                AgentEvent(
                    type="guardrail_decision",
                    session_id=context.session_id,
                    run_id=context.run_id,
                    tool_call_id=call.id,
                    tool_name=guard_context.tool_name,
                    record=record,
                )
            )
            if pending is not None:
                await pending
    if terminal is not None and terminal.action != "block":
        raise tripwire_error(terminal)
    return terminal


def _guard_error(message: str, record: GuardrailRecord) -> ErrorInfo:
    # The fixed message keeps the model from probing guardrails; the host sees which one and why.
    details: dict[str, JSONValue] = {"guardrail": record.guardrail}
    if record.reason is not None:
        details["reason"] = record.reason
    return ErrorInfo(message=blocked_message(message, record), details=details)


def _middleware_reporter(
    audit: _Audit | None,
) -> Callable[[MiddlewareDiagnostic], Awaitable[None]] | None:
    if audit is None:
        return None

    async def report(diagnostic: MiddlewareDiagnostic) -> None:
        pending = audit.event(
            AgentEvent(
                type="extension_error",
                session_id=audit.context.session_id,
                run_id=audit.context.run_id,
                error=ErrorInfo(
                    message=diagnostic.message, code="ERR_PRISM_MIDDLEWARE", name="MiddlewareError"
                ),
                data={"hook": diagnostic.hook, "index": diagnostic.index},
            )
        )
        if pending is not None:
            await pending

    return report


async def _authorize(
    name: str,
    context: ToolExecutionContext,
    identity: AgentIdentity | None,
    ownership: Ownership | None,
    trust: TrustPolicy | None,
    permission: PermissionPolicy | None,
) -> None:
    if identity is not None:
        identity.check_active()
        identity.check_ownership(ownership)
    if trust is not None:
        decision: Any = trust.check(
            TrustRequest(kind="tool", target=name, capability="execute", metadata=context.metadata)
        )
        if _isawaitable(decision):
            decision = await decision
        if getattr(decision, "trusted", False) is not True:
            raise TrustDeniedError(getattr(decision, "reason", None) or f"Untrusted tool: {name}")
    if permission is not None:
        decision = permission.check(
            PermissionRequest(kind="tool", action="execute", target=name, metadata=context.metadata)
        )
        if _isawaitable(decision):
            decision = await decision
        if getattr(decision, "allowed", False) is not True:
            raise PermissionDeniedError(
                getattr(decision, "reason", None) or f"Permission denied for tool:{name}:execute"
            )


def _validator_error(outcome: Any) -> ErrorInfo | None:
    # By type and identity only: the outcome is the host's object, and its own == or bool
    # may raise or lie.
    if outcome is None or outcome is False:
        return None
    if isinstance(outcome, ErrorInfo):
        return outcome
    if isinstance(outcome, str):
        text = str.__str__(outcome)
        return ErrorInfo(message=text) if text else None
    return ErrorInfo(message="Tool arguments failed validation", details=None)


def _arguments_refusal(error: Any) -> ErrorInfo:
    """``ToolCall.arguments_error`` as the blocked call's error: an ``ErrorInfo`` as is, a string
    as its message, anything else as a plain refusal."""
    if isinstance(error, ErrorInfo):
        return error
    if isinstance(error, str):
        return ErrorInfo(message=str.__str__(error), code="invalid_arguments")
    return ErrorInfo(message="Tool arguments could not be read", code="invalid_arguments")


# The options are not keyword-only on purpose: CPython fills missing keyword-only parameters from
# a dict on every call, which cost about 0.2 us here, a fifth of a whole dispatch. Pass them by
# keyword anyway; their order is not part of the API.
async def dispatch_tool_call(
    call: ToolCall,
    registry: ToolRegistry,
    context: ToolExecutionContext,
    filter: FilterInput | None = None,
    middleware: MiddlewareRegistry | None = None,
    validate: ToolValidator | None = None,
    before_execute: BeforeExecute | None = None,
    emit: EventSink | None = None,
    secrets: Iterable[str] = (),
    redactor: Redactor | None = None,
    ledger: RunLedger | None = None,
    ownership: Ownership | None = None,
    identity: AgentIdentity | None = None,
    guardrails: Guardrails | None = None,
    trust: TrustPolicy | None = None,
    permission: PermissionPolicy | None = None,
    effect_store: ToolEffectStore | None = None,
    limit_tracker: LimitTracker | None = None,
) -> ToolResult:
    """Check one tool call and run it if every check passes; see the module doc for the order."""
    try:
        if limit_tracker is not None:
            limit_tracker.charge("max_tool_calls")
        audit: _Audit | None = None
        if emit is not None or ledger is not None or secrets or redactor is not None:
            # Refused before any event or row: a wrong sink or redactor would otherwise fail only
            # once the tool has run, a wrong ledger after the first event.
            if (
                (emit is not None and not callable(emit))
                or (ledger is not None and not callable(getattr(ledger, "append_tool_call", None)))
                or (redactor is not None and not has_method(redactor, "redact"))
            ):
                check_option_types(emit=emit, ledger=ledger, redactor=redactor)
            if secrets:
                redactor = effective_redactor(secrets, redactor)
            # Slot by slot: a constructor call would cost several times as much (see _Audit).
            audit = _Audit()
            audit.context = context
            audit.emit = emit
            audit.ledger = ledger
            audit.redactor = redactor
            audit.tenant = (
                _NO_TENANT
                if ownership is None
                else (ownership.tenant_id, ownership.account_id, ownership.user_id)
            )
            audit.t0 = _perf_counter_ns()
            if ledger is None:
                audit.started_at = ""
            else:
                # now_iso(), inline while the cached stamp is current (most calls).
                clock = _clock_cache
                audit.started_at = clock[2] if clock[0] <= _time_ns() < clock[1] else now_iso()

        if middleware is not None and middleware.has("tool_call"):
            scrubbed_stop: BaseException | None = None
            try:
                call = await middleware.run("tool_call", call, report=_middleware_reporter(audit))
            except MiddlewareError as stop:
                if audit is None or audit.redactor is None:
                    raise
                scrubbed_stop = _scrubbed_stop(stop, audit.redactor)
            if scrubbed_stop is not None:
                # Raised outside the handler, so it does not keep the original as its context.
                raise scrubbed_stop

        if guardrails is not None:
            verdict = await _guard("tool_input", guardrails, call, call, context, audit)
            if verdict is not None:
                return await _block(
                    audit,
                    call,
                    "guardrail_blocked",
                    _guard_error(TOOL_CALL_BLOCKED, verdict),
                )

        name = call.name
        if type(name) is not str:
            if not isinstance(name, str):
                # text_of: a name whose __str__ raises must not fail the dispatch.
                refusal = ErrorInfo(message=f"Unknown tool: {text_of(name)}")
                return await _block(audit, call, "unknown_tool", refusal)
            # A str subclass (a StrEnum member) names the tool its characters spell; the call
            # goes on with a plain str, so nothing later runs the subclass's own methods.
            call = dataclasses.replace(call, name=str.__str__(name))
            name = call.name
        if filter is not None and type(filter) is not ToolFilter:
            filter = compile_filter(filter)
        arguments = call.arguments
        # Lookup, filter and the argument shape in one crossing into the core.
        slot = registry._names.check_call(name, filter, arguments)
        early_verdict: Any = _NOT_CHECKED
        is_object = True
        if slot < 0:
            if slot == CHECK_UNKNOWN:
                return await _block(
                    audit, call, "unknown_tool", ErrorInfo(message=f"Unknown tool: {name}")
                )
            if slot == CHECK_DENIED:
                return await _block(
                    audit, call, "tool_denied", ErrorInfo(message=f"Tool denied: {name}")
                )
            slot = CHECK_NOT_OBJECT - slot  # permitted, but the arguments are not a JSON object
            is_object = False
        tool = registry._tools[slot]
        if call.arguments_error is not None:
            refusal = call.arguments_error
            if type(refusal) is not ErrorInfo:
                refusal = _arguments_refusal(refusal)
            return await _block(audit, call, "invalid_arguments", refusal)
        if not is_object:
            # A dict with a non-string key is not a JSON object either.
            if type(arguments) is not str and type(arguments) is not bytes:
                return await _block(
                    audit, call, "invalid_arguments", ErrorInfo(message=ARGUMENTS_NOT_OBJECT)
                )
            # Raw argument text, as OpenAI-style providers hand it over: parsed in the core, size
            # and depth guarded before the parser runs. With the JSON Schema validator, the text is
            # parsed under its limits and checked in the same crossing; the verdict waits for the
            # validation step below.
            try:
                checked = (
                    validate.parse_checked(tool, arguments)
                    if type(validate) is ToolParameterValidator
                    else None
                )
                if checked is None:
                    arguments = _argument_parser.parse(arguments)
                else:
                    arguments, early_verdict = checked
            except ArgumentsError as err:
                refusal = ErrorInfo(
                    message=str(err), code=ArgumentsError.code, name="ArgumentsError"
                )
                return await _block(audit, call, "invalid_arguments", refusal)
            call = ToolCall(call.id, name, arguments, None)

        acting = identity if identity is not None else context.identity
        if (
            audit is None
            and context.tool_call_id == call.id
            and acting is context.identity
            and context.progress is ignore_progress
            and context.idempotency_key is None
        ):
            run_context = context  # nothing to wrap: the tool sees the caller's context as is
        else:
            if audit is None:
                progress = _progress_reporter(context)
            else:
                audit.call = call
                progress = audit.progress
            built = _ContextTwin()
            built.session_id = context.session_id
            built.run_id = context.run_id
            built.tool_call_id = call.id
            built.signal = context.signal
            built.metadata = context.metadata
            built.progress = progress
            built.identity = acting
            # No idempotency key: a key from the caller is never trusted (dispatch derives its own).
            built.idempotency_key = None
            built.__class__ = ToolExecutionContext
            run_context = built

        if acting is not None or trust is not None or permission is not None:
            try:
                await _authorize(name, context, acting, ownership, trust, permission)
            except Exception as err:
                # A policy of the wrong kind is the host's mistake, not a refusal to report.
                check_option_types(
                    identity=acting, ownership=ownership, trust=trust, permission=permission
                )
                return await _block(audit, call, "permission_denied", error_info(err))

        if early_verdict is not _NOT_CHECKED:
            if early_verdict is not None:
                return await _block(audit, call, "validation_failed", early_verdict)
        elif validate is not None:
            try:
                outcome = validate(tool, arguments, run_context)
                if _isawaitable(outcome):
                    outcome = await outcome
            except Exception as err:
                check_option_types(validate=validate)
                return await _block(audit, call, "validation_failed", error_info(err))
            problem = _validator_error(outcome)
            if problem is not None:
                return await _block(audit, call, "validation_failed", problem)

        claim: EffectClaim | None = None
        if tool.effect is not None:
            signal = run_context.signal
            if signal is not None and signal.is_set():
                # The run was stopped before the claim: nothing is claimed and nothing runs (the
                # store would refuse the claim by raising CancelledError for a task that was
                # not cancelled); the run stops at its next safe point.
                return await _block(audit, call, "execution_denied", _STOPPED)
            try:
                prepared = await prepare_effect(
                    tool, call.id, arguments, run_context, acting, ownership, effect_store
                )
            except Exception as err:
                check_option_types(ownership=ownership, effect_store=effect_store)
                return await _block(audit, call, "execution_denied", error_info(err))
            if type(prepared) is ToolResult:
                # A completed duplicate: its stored result, no events, no rows; redacted as the
                # first delivery's was (the store keeps the call's own id and tool name).
                if audit is not None and audit.redactor is not None:
                    return audit.redactor.redact(prepared)
                return prepared
            if prepared is not None:
                run_context, claim = cast(tuple[ToolExecutionContext, EffectClaim | None], prepared)

        if before_execute is not None:
            try:
                outcome = before_execute(call, tool, run_context)
                if _isawaitable(outcome):
                    await outcome
            except Exception as err:
                check_option_types(before_execute=before_execute)
                if claim is not None:
                    await claim.release()
                return await _block(audit, call, "execution_denied", error_info(err))
            except asyncio.CancelledError:
                # Nothing ran and no row was written yet: the claim ends, the call is gone.
                if claim is not None:
                    await _to_the_end(claim.release())
                raise

        execute = tool.execute
        if execute is None:
            if claim is not None:
                await claim.release()
            return await _block(
                audit,
                call,
                "execution_denied",
                ErrorInfo(
                    message=f"Tool {name} has no execute function bound", code="tool_not_bound"
                ),
            )

        if audit is not None:
            try:
                pending = audit.lifecycle(call, None)
                if pending is not None:
                    await pending
            except asyncio.CancelledError:
                # The durable ledgers write a queued row even when its waiter is cancelled: the
                # started row stands, so close it as a cancelled tool's call is closed.
                await _close_cancelled(audit, call, None if claim is None else claim.release)
                raise
            except Exception:
                # The started row was refused (LedgerWriteError): the tool does not run, and its
                # claim ends rather than wait for its expiry.
                if claim is not None:
                    await _to_the_end(claim.release())
                raise

        if claim is not None:
            signal = run_context.signal
            if signal is not None and signal.is_set():
                # The run was stopped after the claim was taken: the tool does not run, the
                # claim ends, and the call is closed; the run stops at its next safe point.
                return await _to_the_end(_stopped_before_dispatch(audit, call, claim))
            try:
                await claim.dispatched()
            except asyncio.CancelledError:
                # The tool did not run; the mark may have landed all the same (a group commit
                # writes it): the claim is released or marked unknown, the call closed.
                await _close_cancelled(audit, call, claim.abandon)
                raise
            except Exception:
                # The mark failed and the tool did not run: released for a retry if the mark did
                # not land (as the claim's expiry would release it), else the outcome is unknown.
                return await _to_the_end(_mark_failed(audit, call, claim))

        try:
            output = execute(arguments, run_context)
            if output is not None and (type(output) is CoroutineType or _isawaitable(output)):
                output = await output
        except GuardrailTripwire as tripwire:
            # A tripwire the tool raised itself (a nested run's guardrail) fails the run as the
            # harness's own would, once the call's rows are closed and its text scrubbed.
            if claim is not None:
                await claim.unknown()
            if audit is not None:
                await audit.failed(call, error_info(tripwire))
                if audit.redactor is not None:
                    # Its context is suppressed, so no traceback shows the original: raising it
                    # outside this handler would cost a check on every call's path.
                    raise _scrubbed_tripwire(tripwire, audit.redactor) from None
            raise
        except BaseException as err:
            if not isinstance(err, Exception):
                # Cancellation (and interpreter exits) propagate; the audit still records the end.
                if isinstance(err, GeneratorExit):
                    _close_later(audit, call, claim)  # a coroutine being closed cannot await
                    raise
                await _close_cancelled(
                    audit,
                    call,
                    None if claim is None else claim.unknown,
                    shield=isinstance(err, asyncio.CancelledError),
                )
                raise
            return await _failed(audit, call, claim, error_info(err))

        if type(output) is ToolResult:
            result = output
            if (result.error is not None or result.metadata is not None) and not _readable(result):
                return await _failed(audit, call, claim, _unreadable_error(name, result))
        else:
            made = _ResultTwin()
            made.tool_call_id = call.id
            made.name = name
            made.value = output
            made.content = made.error = made.metadata = None
            made.__class__ = ToolResult
            result = made

        after: GuardrailRecord | object | None = None
        try:
            if middleware is not None and middleware.has("tool_result"):
                result = await middleware.run(
                    "tool_result", result, report=_middleware_reporter(audit)
                )
                if (result.error is not None or result.metadata is not None) and not _readable(
                    result
                ):
                    after = _UNREADABLE_RESULT
            if guardrails is not None and after is None:
                after = await _guard("tool_output", guardrails, result, call, context, audit)
        except (GuardrailTripwire, MiddlewareError, asyncio.CancelledError) as stop:
            # The tool ran: its started row is closed, and a claim marked unknown, before the
            # stop reaches the caller.
            stopped = isinstance(stop, asyncio.CancelledError)
            if stopped:
                await _close_cancelled(audit, call, None if claim is None else claim.unknown)
                raise
            if claim is not None:
                await claim.unknown()
            if audit is not None:
                await audit.failed(call, error_info(stop))
            if audit is None or audit.redactor is None:
                raise
            after = _scrubbed_stop(stop, audit.redactor)
        if after is not None:
            if isinstance(after, BaseException):
                raise after  # outside the handler: it does not keep the original as context
            if after is _UNREADABLE_RESULT:
                return await _failed(audit, call, claim, _unreadable_error(name, result))
            if claim is not None:
                return await _unknown_outcome(audit, call, claim)
            return await _block(
                audit,
                call,
                "guardrail_blocked",
                _guard_error(TOOL_RESULT_BLOCKED, cast(GuardrailRecord, after)),
            )

        if claim is not None:
            if result.error is not None:
                return await _unknown_outcome(audit, call, claim)
            if audit is not None:
                scrubbed = cast(ToolResult, audit.scrub(result))
                if scrubbed.tool_call_id != result.tool_call_id or scrubbed.name != result.name:
                    # The store holds the result under the call's own id and tool name (they are
                    # its key, kept unredacted there anyway); what leaves is redacted below.
                    scrubbed = dataclasses.replace(
                        scrubbed, tool_call_id=result.tool_call_id, name=result.name
                    )
                result = scrubbed
            try:
                result = await claim.complete(result)
            except asyncio.CancelledError:
                # The tool ran; whether its result was stored is not known here.
                await _close_cancelled(audit, call, claim.unknown)
                raise
            except Exception:
                return await _unknown_outcome(audit, call, claim)

        if audit is None:
            return result
        if redactor is not None:
            result = redactor.redact(result)
        pending = audit.lifecycle(call, result)
        if pending is not None:
            try:
                await pending
            except asyncio.CancelledError as stop:
                # The tool ran to its end and its end is recorded (an asynchronous sink or
                # ledger ran on to finish it): the cancellation goes on, carrying the result,
                # so a caller such as the agent loop does not report a done call as cancelled.
                setattr(stop, _RAN_BEFORE_CANCEL, result)
                raise
        return result
    except AttributeError:
        # Costs nothing until raised. A host object of the wrong kind shows up here as a
        # missing attribute; name the argument instead. Anything else is re-raised as it came.
        check_option_types(
            call=call,
            registry=registry,
            context=context,
            middleware=middleware,
            guardrails=guardrails,
            ownership=ownership,
            identity=identity,
            effect_store=effect_store,
            limit_tracker=limit_tracker,
        )
        raise


async def _failed(
    audit: _Audit | None, call: ToolCall, claim: EffectClaim | None, error: ErrorInfo
) -> ToolResult:
    """The tool ran and failed: an error result, or for a claimed effect an unknown outcome."""
    if claim is not None:
        return await _unknown_outcome(audit, call, claim)
    return await _ended_with(audit, call, error)


async def _ended_with(audit: _Audit | None, call: ToolCall, error: ErrorInfo) -> ToolResult:
    """The call's error result, after its ``error`` row when the call is audited."""
    if audit is None:
        return _error_result(call, error)
    return await audit.failed(call, error)


def _readable(result: ToolResult) -> bool:
    """A result whose ``error`` is an ``ErrorInfo`` with fields of the kinds readers expect (text,
    a text or integer code) and whose ``metadata`` is a mapping or None: a ``ToolResult`` is
    built without checks, so a tool may hand over anything, and a ledger, an effect store or a
    stored session would write what it could not read back."""
    error, metadata = result.error, result.metadata
    return (metadata is None or isinstance(metadata, Mapping)) and (
        error is None
        or (
            isinstance(error, ErrorInfo)
            and type(error.message) is str
            and (error.code is None or type(error.code) in (str, int))
            and (error.name is None or type(error.name) is str)
        )
    )


def _unreadable_error(name: str, result: ToolResult) -> ErrorInfo:
    error, metadata = result.error, result.metadata
    if metadata is not None and not isinstance(metadata, Mapping):
        what = f"whose metadata is a {type(metadata).__name__}, not a mapping"
    elif isinstance(error, ErrorInfo):
        what = "whose error has a message, code or name of another kind"
    else:
        what = f"whose error is a {type(error).__name__}, not an ErrorInfo"
    return ErrorInfo(
        message=f"Tool {name} returned a ToolResult {what}",
        code="invalid_tool_result",
        name="TypeError",
    )


T = TypeVar("T")


async def _to_the_end(step: Awaitable[T]) -> T:
    """Awaits ``step``, which closes a call (its row, its claim), to its end even when the
    caller is cancelled again meanwhile (a second ``cancel()``, a cancel scope that cancels at
    every await): a cancellation that arrives during it is raised once it is done. Only the end
    of the event loop, which cancels the step itself, cuts it short."""
    task = asyncio.ensure_future(step)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                raise  # the step itself was cancelled: the loop is shutting down
            cancelled = True
        except Exception as error:
            if not cancelled:
                raise
            # The cancellation wins: a caller that was cancelled must see CancelledError.
            _closing_failed(error)
            break
    if cancelled:
        raise asyncio.CancelledError
    return result


def _closing_failed(error: Exception) -> None:
    # The type only: a ledger's or store's message may quote what it holds.
    logger.warning("closing a cancelled tool call failed: %s", type(error).__name__)


# Closings a coroutine being closed (``GeneratorExit``) hands to the loop, as it cannot await
# them itself; held here until they end, as the loop keeps only weak references to tasks.
_LATER_CLOSINGS: set[asyncio.Future[Any]] = set()


def _close_later(audit: _Audit | None, call: ToolCall, claim: EffectClaim | None) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # closed outside any loop (by the garbage collector): nothing can write now
    task = loop.create_task(_close_cancelled(audit, call, None if claim is None else claim.unknown))
    _LATER_CLOSINGS.add(task)
    task.add_done_callback(_LATER_CLOSINGS.discard)


async def _close_cancelled(
    audit: _Audit | None,
    call: ToolCall,
    end_claim: Callable[[], Awaitable[object]] | None,
    *,
    shield: bool = True,
) -> None:
    """Closes a call that was cancelled: the claim ended by ``end_claim``, then the ``error``
    row with code ``cancelled``; with ``shield``, both run to their end (``_to_the_end``)."""

    async def close() -> None:
        try:
            if end_claim is not None:
                await end_claim()
            if audit is not None:
                await audit.failed(call, _CANCELLED)
        except Exception as error:
            # The caller re-raises its cancellation: a row the ledger refused is logged, not
            # raised in its place (a cancelled task must end cancelled).
            _closing_failed(error)

    await (_to_the_end(close()) if shield else close())


async def _stopped_before_dispatch(
    audit: _Audit | None, call: ToolCall, claim: EffectClaim
) -> ToolResult:
    await claim.release()
    return await _ended_with(audit, call, _STOPPED)


async def _mark_failed(audit: _Audit | None, call: ToolCall, claim: EffectClaim) -> ToolResult:
    error = NOT_DISPATCHED_EFFECT if await claim.abandon(retryable=True) else UNKNOWN_OUTCOME
    return await _ended_with(audit, call, error)


async def _unknown_outcome(audit: _Audit | None, call: ToolCall, claim: EffectClaim) -> ToolResult:
    """The side effect may have happened: record ``unknown`` and never run the call again."""
    await claim.unknown()
    return await _ended_with(audit, call, UNKNOWN_OUTCOME)


def _progress_reporter(context: ToolExecutionContext) -> Callable[..., Awaitable[None]]:
    """The tool's ``context.progress`` without audit (``_Audit.progress`` with it): always
    awaitable, whatever the host's sink is."""
    host = context.progress

    async def progress(
        value: JSONValue = None, metadata: Mapping[str, JSONValue] | None = None
    ) -> None:
        if host is not ignore_progress:
            outcome = host(value, metadata)
            if _isawaitable(outcome):
                await outcome

    return progress
