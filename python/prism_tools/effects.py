"""Recoverable tool effects: declarations, effect keys, claim records and effect stores.

A tool that changes the world declares an ``effect``. Before such a tool runs, dispatch claims
the call in a ``ToolEffectStore`` under a key derived from who is acting and what is being
called; a second delivery of the same call finds the claim and is answered from the record
instead of running the tool again. The guarantee is claim coordination, not exactly-once: a call
whose outcome is not known (the worker died after the claim was marked dispatched) is never run
again automatically; it stays ``unknown`` until an operator resolves it.

Canonical JSON (used for argument hashes and effect keys) is the text JavaScript's
``JSON.stringify`` would produce for the same value after object keys are sorted by UTF-16 code
units:

* allowed values are ``None``, ``str``, ``bool``, finite ``int``/``float``, ``list`` and ``dict``
  with ``str`` keys (exact types: tuples, sets, mappings of other classes and objects are
  refused with ``ERR_PRISM_TOOL_EFFECT_LIMIT`` "tool effect values must be JSON");
* no whitespace; arrays keep their order; object keys are sorted by UTF-16 code units, except
  that keys that are array indices (``"0"`` to ``"4294967294"`` without leading zeros) come
  first in numeric order and a ``"__proto__"`` key is left out, exactly as a JavaScript object
  built from the sorted keys would print;
* numbers are written as JavaScript writes a double: ``1.0`` is ``1``, ``-0.0`` is ``0``,
  ``1e21`` is ``1e+21``, ``1e-7`` is ``1e-7``, ``0.000001`` is ``0.000001``; an integer beyond
  2**53 is first rounded to the nearest double, as JavaScript would have parsed it;
* strings escape ``"``, ``\\``, ``\\b``, ``\\f``, ``\\n``, ``\\r``, ``\\t``, other control
  characters below U+0020 as ``\\u00xx`` and unpaired surrogates as ``\\udxxx`` (lowercase hex);
  everything else, including non-ASCII text, is written as is and hashed as UTF-8.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from hashlib import sha256
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from prism_tools import _json
from prism_tools.errors import PrismError
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.types import ErrorInfo, JSONValue, ToolResult

T = TypeVar("T")

# --- error codes -------------------------------------------------------------------------------

ERR_TOOL_EFFECT_REQUIRED: Final = "ERR_PRISM_TOOL_EFFECT_REQUIRED"
ERR_TOOL_EFFECT_CONFLICT: Final = "ERR_PRISM_TOOL_EFFECT_CONFLICT"
ERR_TOOL_EFFECT_UNKNOWN: Final = "ERR_PRISM_TOOL_EFFECT_UNKNOWN"
ERR_TOOL_EFFECT_COMPLETED: Final = "ERR_PRISM_TOOL_EFFECT_COMPLETED"
ERR_TOOL_EFFECT_LIMIT: Final = "ERR_PRISM_TOOL_EFFECT_LIMIT"
# Failure-record codes: stored in ``ToolEffectFailure.code``, never raised.
ERR_TOOL_EFFECT_EXPIRED: Final = "ERR_PRISM_TOOL_EFFECT_EXPIRED"
ERR_TOOL_EFFECT_PRE_DISPATCH: Final = "ERR_PRISM_TOOL_EFFECT_PRE_DISPATCH"

# Messages dispatch needs verbatim (prism-behaviour 2.5 and 2.6).
MSG_IDENTITY_REQUIRED: Final = "verified identity is required for a durable tool effect"
MSG_STORE_REQUIRED: Final = "durable tool effect store is required"
MSG_CLAIM_UNKNOWN: Final = "tool effect claim outcome is unknown"
MSG_NEEDS_RECONCILIATION: Final = "tool effect outcome requires reconciliation"
MSG_COMPLETED_NO_RESULT: Final = "tool effect already completed without replayable result"
MSG_NOT_DISPATCHABLE: Final = "tool effect is not dispatchable"
MSG_TRANSITION_CONFLICT: Final = "tool effect transition conflict"
MSG_DECLARATION_INVALID: Final = "tool effect declaration is invalid"
MSG_NOT_JSON: Final = "tool effect values must be JSON"


class ToolEffectError(PrismError):
    """A refused effect declaration, claim or transition. ``code`` is one of the
    ``ERR_PRISM_TOOL_EFFECT_*`` codes and differs from one instance to the next."""

    code = ERR_TOOL_EFFECT_CONFLICT
    name = "ToolEffectError"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message

    def to_error_info(self) -> ErrorInfo:
        """The error a blocked or failed tool result carries for this refusal."""
        return ErrorInfo(message=self.message, code=self.code, name=self.name)


def _limit(message: str) -> ToolEffectError:
    return ToolEffectError(ERR_TOOL_EFFECT_LIMIT, message)


def _conflict(message: str = MSG_TRANSITION_CONFLICT) -> ToolEffectError:
    return ToolEffectError(ERR_TOOL_EFFECT_CONFLICT, message)


# --- limits ------------------------------------------------------------------------------------

DEFAULT_CLAIM_TTL_MS: Final = 900_000
MAX_CLAIM_TTL_MS: Final = 3_600_000
DEFAULT_MAX_ATTEMPTS: Final = 3
MAX_ATTEMPTS: Final = 10
DEFAULT_CLEANUP_LIMIT: Final = 100
MAX_CLEANUP_LIMIT: Final = 500
MAX_KEY_BYTES: Final = 96
MAX_ID_BYTES: Final = 512
MAX_RESULT_BYTES: Final = 64 * 1024
MAX_REFERENCE_BYTES: Final = 1024
MAX_FAILURE_CODE_BYTES: Final = 128
MAX_RECORD_BYTES: Final = 128 * 1024

KEY_PREFIX: Final = "prism:tool-effect:v1:"
_HASH_RE: Final = re.compile(r"[a-f0-9]{64}")

# --- declarations ------------------------------------------------------------------------------

ToolEffectKind = Literal["none", "local_mutation", "external_mutation"]
ToolEffectIdempotency = Literal["none", "optional", "required", "tool_managed", "unsupported"]
EFFECT_KINDS: Final[tuple[ToolEffectKind, ...]] = ("none", "local_mutation", "external_mutation")
IDEMPOTENCY: Final[tuple[ToolEffectIdempotency, ...]] = (
    "none",
    "optional",
    "required",
    "tool_managed",
    "unsupported",
)


@dataclass(frozen=True, slots=True)
class ToolEffect:
    """What a tool changes (``kind``) and how a repeated call is kept safe (``idempotency``)."""

    kind: ToolEffectKind
    idempotency: ToolEffectIdempotency

    def __post_init__(self) -> None:
        if (
            not isinstance(self.kind, str)
            or not isinstance(self.idempotency, str)
            or self.kind not in EFFECT_KINDS
            or self.idempotency not in IDEMPOTENCY
            or (self.kind == "none" and self.idempotency != "none")
        ):
            raise _limit(MSG_DECLARATION_INVALID)

    @property
    def managed(self) -> bool:
        """False when the call needs no key at all (``kind`` or ``idempotency`` is ``none``)."""
        return self.kind != "none" and self.idempotency != "none"

    def to_dict(self) -> dict[str, JSONValue]:
        return {"kind": self.kind, "idempotency": self.idempotency}


@dataclass(frozen=True, slots=True)
class EffectClassifierContext:
    """The read-only view of a call an effect classifier receives (no identity, no key)."""

    session_id: str
    run_id: str
    tool_call_id: str
    signal: asyncio.Event | None = None
    metadata: Mapping[str, JSONValue] | None = None


def classifier_context(context: Any) -> EffectClassifierContext:
    """Build the classifier view from a ``ToolExecutionContext`` (or anything with its ids)."""
    metadata = getattr(context, "metadata", None)
    return EffectClassifierContext(
        session_id=context.session_id,
        run_id=context.run_id,
        tool_call_id=context.tool_call_id,
        signal=getattr(context, "signal", None),
        metadata=None if metadata is None else MappingProxyType(dict(metadata)),
    )


EffectClassifier: TypeAlias = Callable[[Any, Any], "ToolEffect | Mapping[str, Any]"]
EffectDeclaration: TypeAlias = "ToolEffect | Mapping[str, Any] | EffectClassifier"


def _coerce_effect(value: Any) -> ToolEffect:
    if isinstance(value, ToolEffect):
        return value
    if isinstance(value, Mapping):
        kind: Any = value.get("kind")
        idempotency: Any = value.get("idempotency")
        return ToolEffect(kind, idempotency)
    raise _limit(MSG_DECLARATION_INVALID)


def resolve_effect(declaration: Any, args: Any, context_view: Any) -> ToolEffect | None:
    """The effect of one call: ``None`` when the tool declares none, else a valid ``ToolEffect``.

    ``declaration`` is a ``ToolEffect``, a mapping ``{"kind", "idempotency"}`` or a synchronous
    classifier ``(args, context_view) -> ToolEffect | mapping``. An invalid declaration, a
    classifier that raises, an async classifier, or an invalid classification raises
    ``ToolEffectError`` (``ERR_PRISM_TOOL_EFFECT_LIMIT``, "tool effect declaration is invalid").
    """
    if declaration is None:
        return None
    if isinstance(declaration, ToolEffect | Mapping):
        return _coerce_effect(declaration)
    if not callable(declaration) or inspect.iscoroutinefunction(declaration):
        raise _limit(MSG_DECLARATION_INVALID)
    try:
        outcome = declaration(args, context_view)
    except Exception as err:
        raise _limit(MSG_DECLARATION_INVALID) from err
    if inspect.isawaitable(outcome):
        if inspect.iscoroutine(outcome):
            outcome.close()
        raise _limit(MSG_DECLARATION_INVALID)
    return _coerce_effect(outcome)


# --- canonical JSON ------------------------------------------------------------------------------

_MAX_SAFE_INT: Final = 2**53
_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESCAPE: Final = re.compile(r'["\\\x00-\x1f\ud800-\udfff]')
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    known = _ESCAPES.get(char)
    return known if known is not None else f"\\u{ord(char):04x}"


def _pair_surrogates(text: str) -> str:
    # Python may hold a high and a low surrogate as two code points; JavaScript sees the same
    # UTF-16 units as one character. Join such pairs and leave the unpaired ones for escaping.
    units = text.encode("utf-16-le", "surrogatepass")
    return units.decode("utf-16-le", "surrogatepass")


def _js_string(text: str) -> str:
    if _SURROGATE.search(text) is not None:
        text = _pair_surrogates(text)
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, text) + '"'


def _js_float(value: float) -> str:
    if value == 0:
        return "0"
    sign, digits_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digits_tuple)).rstrip("0")
    assert isinstance(exponent, int)
    exponent += len("".join(map(str, digits_tuple))) - len(digits)
    k = len(digits)
    n = k + exponent  # value = 0.digits * 10**n
    prefix = "-" if sign else ""
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        power = n - 1
        mark = "+" if power >= 0 else "-"
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{mark}{abs(power)}"
    return prefix + body


def _js_number(value: int | float) -> str:
    if type(value) is int:
        if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            return str(value)
        try:
            value = float(value)
        except OverflowError as err:
            raise _limit(MSG_NOT_JSON) from err
    if value != value or value in (float("inf"), float("-inf")):
        raise _limit(MSG_NOT_JSON)
    return _js_float(value)


def _utf16_key(text: str) -> bytes:
    return _pair_surrogates(text).encode("utf-16-be", "surrogatepass")


_ARRAY_INDEX: Final = re.compile(r"0|[1-9][0-9]{0,9}")
_MAX_ARRAY_INDEX: Final = 2**32 - 2


def _js_key_order(value: dict[str, Any]) -> list[str]:
    # The reference sorts the keys into a fresh object and stringifies it, so the engine's own
    # property order applies: array-index keys ("0" .. "4294967294") first, numerically; then
    # the other keys in sorted (UTF-16) order. A "__proto__" key sets the prototype of that
    # object instead of adding a property, so it never reaches the text; its value is still
    # checked.
    indices: list[tuple[int, str]] = []
    names: list[str] = []
    for key in value:
        if _ARRAY_INDEX.fullmatch(key) is not None and int(key) <= _MAX_ARRAY_INDEX:
            indices.append((int(key), key))
        elif key == "__proto__":
            _write(value[key], [])
        else:
            names.append(key)
    indices.sort()
    names.sort(key=_utf16_key)
    return [key for _number, key in indices] + names


def _write(value: Any, out: list[str]) -> None:
    kind = type(value)
    if value is None:
        out.append("null")
    elif kind is str:
        out.append(_js_string(value))
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int or kind is float:
        out.append(_js_number(value))
    elif kind is list:
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif kind is dict:
        if any(type(key) is not str for key in value):
            raise _limit(MSG_NOT_JSON)
        out.append("{")
        for index, key in enumerate(_js_key_order(value)):
            if index:
                out.append(",")
            out.append(_js_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    else:
        raise _limit(MSG_NOT_JSON)


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value`` (see the module docstring for the exact form)."""
    out: list[str] = []
    try:
        _write(value, out)
    except RecursionError as err:
        raise _limit(MSG_NOT_JSON) from err
    return "".join(out)


def _sha256_hex(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


def arguments_hash(args: Any) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of a call's arguments."""
    return _sha256_hex(canonical_json(args))


def effect_key(
    identity: AgentIdentity,
    *,
    session_id: str,
    run_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments_hash: str,
) -> str:
    """The effect key of one call: ``prism:tool-effect:v1:`` + SHA-256 of a canonical object.

    The object uses the reference's field names (``tenantId``, ``accountId``, ``userId``,
    ``principalId``, ``sessionId``, ``runId``, ``toolCallId``, ``toolName``, ``argumentsHash``);
    ownership is taken from the verified identity, absent account and user are ``null``.
    """
    material = {
        "tenantId": identity.tenant_id,
        "accountId": identity.account_id,
        "userId": identity.user_id,
        "principalId": identity.principal_id,
        "sessionId": session_id,
        "runId": run_id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "argumentsHash": arguments_hash,
    }
    return KEY_PREFIX + _sha256_hex(canonical_json(material))


# --- records -------------------------------------------------------------------------------------

ToolEffectStatus = Literal[
    "pending", "dispatched", "completed", "failed_retryable", "failed_terminal", "unknown"
]
EFFECT_STATUSES: Final[tuple[ToolEffectStatus, ...]] = (
    "pending",
    "dispatched",
    "completed",
    "failed_retryable",
    "failed_terminal",
    "unknown",
)
_CLAIMED: Final = frozenset(("pending", "dispatched"))
_TERMINAL: Final = frozenset(("completed", "failed_terminal"))
_RESOLUTIONS: Final = frozenset(("completed", "failed_retryable", "failed_terminal"))
_FAILURES: Final = frozenset(("failed_retryable", "failed_terminal"))


@dataclass(frozen=True, slots=True)
class ToolEffectFailure:
    """Why a claim failed: a short ``code`` and an optional opaque ``reference``."""

    code: str
    reference: str | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {"code": self.code}
        if self.reference is not None:
            out["reference"] = self.reference
        return out


@dataclass(frozen=True, slots=True)
class ToolEffectRecord:
    """One claimed call as the store holds it. Times are ISO-8601 UTC strings with milliseconds
    (``2026-01-02T03:04:05.678Z``); ``claim_token`` and ``expires_at`` are set only while the
    claim is ``pending`` or ``dispatched``. Every read returns a fresh snapshot: changing the
    nested values of a returned ``result`` never changes the store."""

    key: str
    session_id: str
    run_id: str
    tool_call_id: str
    tool_name: str
    arguments_hash: str
    status: ToolEffectStatus
    attempt: int
    version: int
    created_at: str
    updated_at: str
    tenant_id: str
    account_id: str | None = None
    user_id: str | None = None
    claim_token: str | None = None
    expires_at: str | None = None
    result: ToolResult | None = None
    result_ref: str | None = None
    failure: ToolEffectFailure | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "key": self.key,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments_hash": self.arguments_hash,
            "status": self.status,
            "attempt": self.attempt,
            "version": self.version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "tenant_id": self.tenant_id,
        }
        optional: dict[str, Any] = {
            "account_id": self.account_id,
            "user_id": self.user_id,
            "claim_token": self.claim_token,
            "expires_at": self.expires_at,
            "result": None if self.result is None else self.result.to_dict(),
            "result_ref": self.result_ref,
            "failure": None if self.failure is None else self.failure.to_dict(),
        }
        out.update((name, item) for name, item in optional.items() if item is not None)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolEffectRecord:
        """Rebuild a record from ``to_dict`` output."""
        result = data.get("result")
        failure = data.get("failure")
        return cls(
            key=data["key"],
            session_id=data["session_id"],
            run_id=data["run_id"],
            tool_call_id=data["tool_call_id"],
            tool_name=data["tool_name"],
            arguments_hash=data["arguments_hash"],
            status=data["status"],
            attempt=data["attempt"],
            version=data["version"],
            created_at=data["created_at"],
            updated_at=data["updated_at"],
            tenant_id=data["tenant_id"],
            account_id=data.get("account_id"),
            user_id=data.get("user_id"),
            claim_token=data.get("claim_token"),
            expires_at=data.get("expires_at"),
            result=None if result is None else ToolResult.from_dict(result),
            result_ref=data.get("result_ref"),
            failure=None if failure is None else ToolEffectFailure(**failure),
        )


@dataclass(frozen=True, slots=True)
class ToolEffectKey:
    """Everything a store call needs to find and check one claim."""

    identity: AgentIdentity
    ownership: Ownership
    key: str
    session_id: str
    run_id: str
    tool_call_id: str
    tool_name: str
    arguments_hash: str
    signal: asyncio.Event | None = None

    @classmethod
    def derive(
        cls,
        identity: AgentIdentity,
        ownership: Ownership | None,
        *,
        session_id: str,
        run_id: str,
        tool_call_id: str,
        tool_name: str,
        arguments: Any,
        signal: asyncio.Event | None = None,
    ) -> ToolEffectKey:
        """Hash the arguments and derive the key; ``ownership`` defaults to the identity's."""
        digest = arguments_hash(arguments)
        return cls(
            identity=identity,
            ownership=ownership
            or Ownership(identity.tenant_id, identity.account_id, identity.user_id),
            key=effect_key(
                identity,
                session_id=session_id,
                run_id=run_id,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                arguments_hash=digest,
            ),
            session_id=session_id,
            run_id=run_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            arguments_hash=digest,
            signal=signal,
        )


EffectKeyInput = ToolEffectKey


@dataclass(frozen=True, slots=True)
class BeginOutcome:
    """What ``begin`` did: ``acquired`` a claim (``record`` is pending, holds the token) or found
    an ``existing`` record it left unchanged."""

    outcome: Literal["acquired", "existing"]
    record: ToolEffectRecord


FailureInput: TypeAlias = "ToolEffectFailure | Mapping[str, Any]"


@runtime_checkable
class ToolEffectStore(Protocol):
    """Durable claims for effectful tool calls (prism-behaviour 2.3)."""

    async def get(self, key: ToolEffectKey) -> ToolEffectRecord | None: ...

    async def begin(
        self,
        key: ToolEffectKey,
        *,
        claim_ttl_ms: int | None = None,
        max_attempts: int | None = None,
    ) -> BeginOutcome: ...

    async def mark_dispatched(
        self, key: ToolEffectKey, *, claim_token: str, expected_version: int
    ) -> ToolEffectRecord: ...

    async def complete(
        self,
        key: ToolEffectKey,
        *,
        claim_token: str,
        expected_version: int,
        result: ToolResult | None = None,
        result_ref: str | None = None,
    ) -> ToolEffectRecord: ...

    async def fail(
        self,
        key: ToolEffectKey,
        *,
        claim_token: str,
        expected_version: int,
        status: Literal["failed_retryable", "failed_terminal"],
        failure: FailureInput,
    ) -> ToolEffectRecord: ...

    async def mark_unknown(
        self,
        key: ToolEffectKey,
        *,
        claim_token: str,
        expected_version: int,
        failure: FailureInput | None = None,
    ) -> ToolEffectRecord: ...

    async def resolve_unknown(
        self,
        key: ToolEffectKey,
        *,
        expected_version: int,
        status: Literal["completed", "failed_retryable", "failed_terminal"],
        result: ToolResult | None = None,
        result_ref: str | None = None,
        failure: FailureInput | None = None,
    ) -> ToolEffectRecord: ...

    async def cleanup(
        self,
        *,
        ownership: Ownership,
        before: datetime | str,
        limit: int | None = None,
        signal: asyncio.Event | None = None,
    ) -> int: ...


# --- shared store logic --------------------------------------------------------------------

Clock: TypeAlias = Callable[[], datetime]
Slot: TypeAlias = tuple[str, str, str, str, str]
"""Where a record lives: (tenant, account or "", user or "", principal id, key)."""
Owner: TypeAlias = tuple[str, str, str]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _to_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def iso_from_ms(ms: int) -> str:
    """JavaScript ``toISOString`` form of a millisecond timestamp."""
    moment = datetime.fromtimestamp(ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def ms_from_iso(text: str) -> int:
    return _to_ms(datetime.fromisoformat(text))


def _bounded(value: Any, label: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value.encode("utf-8")) > limit:
        raise _limit(f"{label} is required and bounded")
    return value


def _optional_reference(value: Any) -> str | None:
    if value is None:
        return None
    return _bounded(value, "effect reference", MAX_REFERENCE_BYTES)


def _check_signal(signal: asyncio.Event | None) -> None:
    if signal is not None and signal.is_set():
        raise asyncio.CancelledError("tool effect store call cancelled")


def _check_ownership(ownership: Any) -> Owner:
    if (
        not isinstance(ownership, Ownership)
        or not isinstance(ownership.tenant_id, str)
        or not ownership.tenant_id.strip()
    ):
        raise _conflict("tool effect ownership is required")
    for value in (ownership.tenant_id, ownership.account_id, ownership.user_id):
        if value is not None:
            _bounded(value, "ownership", MAX_ID_BYTES)
    return (ownership.tenant_id, ownership.account_id or "", ownership.user_id or "")


def _check_ttl(value: Any) -> int:
    if value is None:
        return DEFAULT_CLAIM_TTL_MS
    if type(value) is not int or not 1 <= value <= MAX_CLAIM_TTL_MS:
        raise _limit("claim TTL exceeds limits")
    return value


def _check_attempts(value: Any) -> int:
    if value is None:
        return DEFAULT_MAX_ATTEMPTS
    if type(value) is not int or not 1 <= value <= MAX_ATTEMPTS:
        raise _limit("effect attempts exceed limits")
    return value


def _check_failure(value: Any) -> ToolEffectFailure:
    if isinstance(value, Mapping):
        code, reference = value.get("code"), value.get("reference")
    elif isinstance(value, ToolEffectFailure):
        code, reference = value.code, value.reference
    else:
        raise _limit("effect failure code is required and bounded")
    return ToolEffectFailure(
        _bounded(code, "effect failure code", MAX_FAILURE_CODE_BYTES),
        _optional_reference(reference),
    )


def _check_result(result: Any, key: ToolEffectKey) -> ToolResult | None:
    if result is None:
        return None
    if not isinstance(result, ToolResult):
        raise _limit("tool result must be JSON serializable")
    if result.tool_call_id != key.tool_call_id or result.name != key.tool_name:
        raise _conflict()
    try:
        size = len(_json.dumps(result.to_dict()))
    except (_json.JSONEncodeError, TypeError) as err:
        raise _limit("tool result must be JSON serializable") from err
    if size > MAX_RESULT_BYTES:
        raise _limit("tool result exceeds limits")
    return result


def _check_version(value: Any) -> int:
    if type(value) is not int or value < 1:
        raise _conflict()
    return value


def encode_record(record: ToolEffectRecord) -> bytes:
    """The stored JSON of a record; refuses a record over 128 KiB."""
    try:
        blob = _json.dumps(record.to_dict())
    except (_json.JSONEncodeError, TypeError) as err:
        raise _limit("tool effect record must be JSON serializable") from err
    if len(blob) > MAX_RECORD_BYTES:
        raise _limit("tool effect record exceeds limits")
    return blob


def decode_record(blob: bytes | str) -> ToolEffectRecord:
    return ToolEffectRecord.from_dict(_json.loads(blob))


Step: TypeAlias = Callable[["ToolEffectRecord | None"], "tuple[ToolEffectRecord | None, Any]"]


@dataclass(frozen=True, slots=True)
class _Raise:
    """A step outcome that commits the step's write (lazy expiry) and then raises."""

    error: BaseException


class BaseToolEffectStore(ABC):
    """The state machine every store shares. A subclass supplies atomic storage:

    ``_transact(slot, step)`` runs ``step(current)`` with the slot locked; ``step`` returns
    ``(new_record_or_None, value)``; the store writes the new record (insert when there was
    none, else a conditional update on the old version and token), then returns ``value``, or
    raises it when it is a ``_Raise``. ``_cleanup(owner, before_ms, limit)`` deletes terminal
    records. ``_call(fn)`` runs blocking work (directly, or in a worker thread).
    """

    def __init__(self, now: Clock | None = None) -> None:
        self._now: Clock = now or _utc_now

    # storage hooks -------------------------------------------------------------------------

    @abstractmethod
    def _transact(self, slot: Slot, step: Step) -> Any: ...

    @abstractmethod
    def _cleanup(self, owner: Owner, before_ms: int, limit: int) -> int: ...

    async def _call(self, fn: Callable[[], T]) -> T:
        return fn()

    # checks --------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return _to_ms(self._now())

    def _slot(self, key: Any) -> Slot:
        if not isinstance(key, ToolEffectKey):
            raise _conflict(MSG_IDENTITY_REQUIRED)
        _check_signal(key.signal)
        identity = key.identity
        if not isinstance(identity, AgentIdentity):
            raise _conflict(MSG_IDENTITY_REQUIRED)
        identity.check_active(self._now())
        owner = _check_ownership(key.ownership)
        ownership = key.ownership
        identity.check_ownership(ownership)
        if (ownership.tenant_id, ownership.account_id, ownership.user_id) != (
            identity.tenant_id,
            identity.account_id,
            identity.user_id,
        ):
            raise _conflict()
        principal = _bounded(identity.principal_id, "principal id", MAX_ID_BYTES)
        _bounded(key.key, "effect key", MAX_KEY_BYTES)
        _bounded(key.session_id, "session id", MAX_ID_BYTES)
        _bounded(key.run_id, "run id", MAX_ID_BYTES)
        _bounded(key.tool_call_id, "tool call id", MAX_ID_BYTES)
        _bounded(key.tool_name, "tool name", MAX_ID_BYTES)
        if (
            not isinstance(key.arguments_hash, str)
            or _HASH_RE.fullmatch(key.arguments_hash) is None
        ):
            raise _limit("arguments hash is invalid")
        return (*owner, principal, key.key)

    @staticmethod
    def _check_matches(record: ToolEffectRecord, key: ToolEffectKey) -> None:
        ownership = key.ownership
        if (
            record.key != key.key
            or record.session_id != key.session_id
            or record.run_id != key.run_id
            or record.tool_call_id != key.tool_call_id
            or record.tool_name != key.tool_name
            or record.arguments_hash != key.arguments_hash
            or record.tenant_id != ownership.tenant_id
            or record.account_id != ownership.account_id
            or record.user_id != ownership.user_id
        ):
            raise _conflict()

    @staticmethod
    def _expire(record: ToolEffectRecord, now_ms: int) -> ToolEffectRecord:
        if (
            record.status not in _CLAIMED
            or record.expires_at is None
            or ms_from_iso(record.expires_at) > now_ms
        ):
            return record
        return replace(
            record,
            status="failed_retryable" if record.status == "pending" else "unknown",
            version=record.version + 1,
            updated_at=iso_from_ms(now_ms),
            claim_token=None,
            expires_at=None,
            failure=ToolEffectFailure(ERR_TOOL_EFFECT_EXPIRED),
        )

    def _keyed(
        self,
        key: ToolEffectKey,
        action: Callable[[ToolEffectRecord | None, int], tuple[ToolEffectRecord | None, Any]],
    ) -> Awaitable[Any]:
        slot = self._slot(key)

        def step(current: ToolEffectRecord | None) -> tuple[ToolEffectRecord | None, Any]:
            now_ms = self._now_ms()
            if current is None:
                return action(None, now_ms)
            self._check_matches(current, key)
            fresh = self._expire(current, now_ms)
            try:
                written, value = action(fresh, now_ms)
            except ToolEffectError as err:
                return (fresh if fresh is not current else None), _Raise(err)
            if written is None and fresh is not current:
                written = fresh
            return written, value

        return self._call(lambda: self._transact(slot, step))

    # protocol ------------------------------------------------------------------------------

    async def get(self, key: ToolEffectKey) -> ToolEffectRecord | None:
        """The current record (after lazy expiry), or ``None``."""

        def action(
            record: ToolEffectRecord | None, now_ms: int
        ) -> tuple[ToolEffectRecord | None, Any]:
            return None, record

        result: ToolEffectRecord | None = await self._keyed(key, action)
        return result

    async def begin(
        self,
        key: ToolEffectKey,
        *,
        claim_ttl_ms: int | None = None,
        max_attempts: int | None = None,
    ) -> BeginOutcome:
        """Claim the call, or report the record that already exists (unchanged)."""
        ttl = _check_ttl(claim_ttl_ms)
        attempts = _check_attempts(max_attempts)

        def action(
            record: ToolEffectRecord | None, now_ms: int
        ) -> tuple[ToolEffectRecord | None, Any]:
            stamp = iso_from_ms(now_ms)
            claim = {
                "status": "pending",
                "claim_token": uuid.uuid4().hex,
                "expires_at": iso_from_ms(now_ms + ttl),
                "updated_at": stamp,
            }
            if record is None:
                ownership = key.ownership
                fresh = ToolEffectRecord(
                    key=key.key,
                    session_id=key.session_id,
                    run_id=key.run_id,
                    tool_call_id=key.tool_call_id,
                    tool_name=key.tool_name,
                    arguments_hash=key.arguments_hash,
                    attempt=1,
                    version=1,
                    created_at=stamp,
                    tenant_id=ownership.tenant_id,
                    account_id=ownership.account_id,
                    user_id=ownership.user_id,
                    **claim,  # type: ignore[arg-type]
                )
                return fresh, BeginOutcome("acquired", fresh)
            if record.status == "failed_retryable" and record.attempt < attempts:
                again = replace(
                    record,
                    attempt=record.attempt + 1,
                    version=record.version + 1,
                    result=None,
                    result_ref=None,
                    failure=None,
                    **claim,  # type: ignore[arg-type]
                )
                return again, BeginOutcome("acquired", again)
            return None, BeginOutcome("existing", record)

        outcome: BeginOutcome = await self._keyed(key, action)
        return outcome

    def _transition(
        self,
        key: ToolEffectKey,
        *,
        allowed: frozenset[str],
        claim_token: str | None,
        expected_version: Any,
        change: Callable[[ToolEffectRecord, str], ToolEffectRecord],
    ) -> Awaitable[Any]:
        version = _check_version(expected_version)
        if claim_token is not None and not isinstance(claim_token, str):
            raise _conflict()

        def action(
            record: ToolEffectRecord | None, now_ms: int
        ) -> tuple[ToolEffectRecord | None, Any]:
            if (
                record is None
                or record.status not in allowed
                or record.version != version
                or (claim_token is not None and record.claim_token != claim_token)
            ):
                raise _conflict()
            written = change(record, iso_from_ms(now_ms))
            return written, written

        return self._keyed(key, action)

    async def mark_dispatched(
        self, key: ToolEffectKey, *, claim_token: str, expected_version: int
    ) -> ToolEffectRecord:
        """``pending`` -> ``dispatched``; the token and the deadline stay."""
        if not isinstance(claim_token, str):
            raise _conflict()
        record: ToolEffectRecord = await self._transition(
            key,
            allowed=frozenset(("pending",)),
            claim_token=claim_token,
            expected_version=expected_version,
            change=lambda rec, stamp: replace(
                rec, status="dispatched", version=rec.version + 1, updated_at=stamp
            ),
        )
        return record

    async def complete(
        self,
        key: ToolEffectKey,
        *,
        claim_token: str,
        expected_version: int,
        result: ToolResult | None = None,
        result_ref: str | None = None,
    ) -> ToolEffectRecord:
        """``dispatched`` -> ``completed`` with the result to replay (or a reference to it)."""
        if not isinstance(claim_token, str):
            raise _conflict()
        self._slot(key)
        stored = _check_result(result, key)
        ref = _optional_reference(result_ref)
        record: ToolEffectRecord = await self._transition(
            key,
            allowed=frozenset(("dispatched",)),
            claim_token=claim_token,
            expected_version=expected_version,
            change=lambda rec, stamp: replace(
                rec,
                status="completed",
                version=rec.version + 1,
                updated_at=stamp,
                claim_token=None,
                expires_at=None,
                result=stored,
                result_ref=ref,
                failure=None,
            ),
        )
        return record

    async def fail(
        self,
        key: ToolEffectKey,
        *,
        claim_token: str,
        expected_version: int,
        status: Literal["failed_retryable", "failed_terminal"],
        failure: FailureInput,
    ) -> ToolEffectRecord:
        """``pending``/``dispatched`` -> ``failed_retryable``/``failed_terminal``."""
        if not isinstance(claim_token, str):
            raise _conflict()
        if status not in _FAILURES:
            raise _limit("tool effect status is invalid")
        stored = _check_failure(failure)
        record: ToolEffectRecord = await self._transition(
            key,
            allowed=_CLAIMED,
            claim_token=claim_token,
            expected_version=expected_version,
            change=lambda rec, stamp: replace(
                rec,
                status=status,
                version=rec.version + 1,
                updated_at=stamp,
                claim_token=None,
                expires_at=None,
                failure=stored,
            ),
        )
        return record

    async def mark_unknown(
        self,
        key: ToolEffectKey,
        *,
        claim_token: str,
        expected_version: int,
        failure: FailureInput | None = None,
    ) -> ToolEffectRecord:
        """``dispatched`` -> ``unknown``: the call may or may not have happened."""
        if not isinstance(claim_token, str):
            raise _conflict()
        stored = None if failure is None else _check_failure(failure)
        record: ToolEffectRecord = await self._transition(
            key,
            allowed=frozenset(("dispatched",)),
            claim_token=claim_token,
            expected_version=expected_version,
            change=lambda rec, stamp: replace(
                rec,
                status="unknown",
                version=rec.version + 1,
                updated_at=stamp,
                claim_token=None,
                expires_at=None,
                failure=rec.failure if stored is None else stored,
            ),
        )
        return record

    async def resolve_unknown(
        self,
        key: ToolEffectKey,
        *,
        expected_version: int,
        status: Literal["completed", "failed_retryable", "failed_terminal"],
        result: ToolResult | None = None,
        result_ref: str | None = None,
        failure: FailureInput | None = None,
    ) -> ToolEffectRecord:
        """Operator resolution of an ``unknown`` record (no claim token needed)."""
        if status not in _RESOLUTIONS:
            raise _limit("tool effect status is invalid")
        self._slot(key)
        stored_result = _check_result(result, key)
        ref = _optional_reference(result_ref)
        stored_failure = None if failure is None else _check_failure(failure)
        record: ToolEffectRecord = await self._transition(
            key,
            allowed=frozenset(("unknown",)),
            claim_token=None,
            expected_version=expected_version,
            change=lambda rec, stamp: replace(
                rec,
                status=status,
                version=rec.version + 1,
                updated_at=stamp,
                result=rec.result if stored_result is None else stored_result,
                result_ref=rec.result_ref if ref is None else ref,
                failure=rec.failure if stored_failure is None else stored_failure,
            ),
        )
        return record

    async def cleanup(
        self,
        *,
        ownership: Ownership,
        before: datetime | str,
        limit: int | None = None,
        signal: asyncio.Event | None = None,
    ) -> int:
        """Delete up to ``limit`` ``completed``/``failed_terminal`` records of exactly this
        ownership last updated before ``before``; returns how many were deleted."""
        _check_signal(signal)
        owner = _check_ownership(ownership)
        if isinstance(before, datetime):
            before_ms = _to_ms(before)
        elif isinstance(before, str):
            try:
                before_ms = ms_from_iso(before)
            except ValueError as err:
                raise _limit("cleanup boundary is invalid") from err
        else:
            raise _limit("cleanup boundary is invalid")
        if limit is None:
            count = DEFAULT_CLEANUP_LIMIT
        elif type(limit) is not int or not 1 <= limit <= MAX_CLEANUP_LIMIT:
            raise _limit("cleanup limit exceeds limits")
        else:
            count = limit
        return await self._call(lambda: self._cleanup(owner, before_ms, count))


def finish_step(outcome: Any) -> Any:
    """Return a step's value, or raise it when the step asked to (used by store subclasses)."""
    if isinstance(outcome, _Raise):
        raise outcome.error
    return outcome


class InMemoryToolEffectStore(BaseToolEffectStore):
    """Effect claims held in this process only (tests, single-process hosts).

    Records are kept as JSON snapshots; a lock makes every transition atomic, also between
    threads, so only one of two concurrent ``begin`` calls acquires.
    """

    def __init__(self, now: Clock | None = None) -> None:
        super().__init__(now)
        self._lock = threading.Lock()
        self._rows: dict[Slot, tuple[str, int, bytes]] = {}

    def _transact(self, slot: Slot, step: Step) -> Any:
        with self._lock:
            blob = self._rows.get(slot)
            current = None if blob is None else decode_record(blob[2])
            written, value = step(current)
            if written is not None:
                self._rows[slot] = (
                    written.status,
                    ms_from_iso(written.updated_at),
                    encode_record(written),
                )
        return finish_step(value)

    def _cleanup(self, owner: Owner, before_ms: int, limit: int) -> int:
        with self._lock:
            doomed = sorted(
                (updated, slot)
                for slot, (status, updated, _blob) in self._rows.items()
                if slot[:3] == owner and status in _TERMINAL and updated < before_ms
            )[:limit]
            for _updated, slot in doomed:
                del self._rows[slot]
        return len(doomed)

    def __len__(self) -> int:
        return len(self._rows)


def run_sync(awaitable: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (the in-memory store's methods) to its result."""
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    awaitable.close()
    raise RuntimeError("the coroutine suspended; run it in an event loop instead")


__all__ = [
    "DEFAULT_CLAIM_TTL_MS",
    "DEFAULT_CLEANUP_LIMIT",
    "DEFAULT_MAX_ATTEMPTS",
    "EFFECT_KINDS",
    "EFFECT_STATUSES",
    "ERR_TOOL_EFFECT_COMPLETED",
    "ERR_TOOL_EFFECT_CONFLICT",
    "ERR_TOOL_EFFECT_EXPIRED",
    "ERR_TOOL_EFFECT_LIMIT",
    "ERR_TOOL_EFFECT_PRE_DISPATCH",
    "ERR_TOOL_EFFECT_REQUIRED",
    "ERR_TOOL_EFFECT_UNKNOWN",
    "IDEMPOTENCY",
    "KEY_PREFIX",
    "MSG_CLAIM_UNKNOWN",
    "MSG_COMPLETED_NO_RESULT",
    "MSG_IDENTITY_REQUIRED",
    "MSG_NEEDS_RECONCILIATION",
    "MSG_NOT_DISPATCHABLE",
    "MSG_STORE_REQUIRED",
    "BaseToolEffectStore",
    "BeginOutcome",
    "EffectClassifierContext",
    "EffectKeyInput",
    "InMemoryToolEffectStore",
    "ToolEffect",
    "ToolEffectError",
    "ToolEffectFailure",
    "ToolEffectKey",
    "ToolEffectRecord",
    "ToolEffectStatus",
    "ToolEffectStore",
    "arguments_hash",
    "canonical_json",
    "classifier_context",
    "effect_key",
    "resolve_effect",
]
