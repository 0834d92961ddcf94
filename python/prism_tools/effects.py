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
from functools import lru_cache
from hashlib import sha256
from json.encoder import encode_basestring as _encode_basestring
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, TypeAlias, TypeVar, runtime_checkable

from prism_tools import _json
from prism_tools._stored import StoredFields
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
    # Without surrogates, the C writer of the json module escapes exactly as JSON.stringify
    # does: the two-character escapes, \u00xx (lowercase) for other controls, nothing else.
    if not _json.holds_lone_surrogate(text):
        return _encode_basestring(text)
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, _pair_surrogates(text)) + '"'


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


def _js_key_order(value: dict[Any, Any]) -> list[str]:
    """The keys of ``value`` in the order JavaScript prints them (refusing non-string keys)."""
    keys = list(value)
    plain = True
    for key in keys:
        if type(key) is not str:
            raise _limit(MSG_NOT_JSON)
        if plain and (not key.isascii() or key.isdigit() or key == "__proto__"):
            plain = False
    if not plain:
        return _js_key_order_slow(value)
    # ASCII keys that are not all digits: UTF-16 order is code point order, no array indices.
    keys.sort()
    return keys


def _js_key_order_slow(value: dict[str, Any]) -> list[str]:
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
    if kind is str:
        out.append(_js_string(value))
    elif kind is dict:
        separator = "{"
        for key in _js_key_order(value):
            out.append(separator + _js_string(key) + ":")
            separator = ","
            _write(value[key], out)
        out.append("}" if separator == "," else "{}")
    elif kind is list:
        separator = "["
        for item in value:
            out.append(separator)
            separator = ","
            _write(item, out)
        out.append("]" if separator == "," else "[]")
    elif value is None:
        out.append("null")
    elif kind is bool:
        out.append("true" if value else "false")
    elif kind is int or kind is float:
        out.append(_js_number(value))
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
    values = (
        identity.account_id,
        arguments_hash,
        identity.principal_id,
        run_id,
        session_id,
        identity.tenant_id,
        tool_call_id,
        tool_name,
        identity.user_id,
    )
    if all(value is None or type(value) is str for value in values):
        # canonical_json of the object, written directly: its names are fixed and _KEY_NAMES
        # lists them in canonical order, so only the values need writing.
        text = (
            "{"
            + ",".join(
                name + ("null" if value is None else _js_string(value))
                for name, value in zip(_KEY_FIELDS, values, strict=True)
            )
            + "}"
        )
    else:
        text = canonical_json(dict(zip(_KEY_NAMES, values, strict=True)))
    return KEY_PREFIX + _sha256_hex(text)


_KEY_NAMES: Final = (
    "accountId",
    "argumentsHash",
    "principalId",
    "runId",
    "sessionId",
    "tenantId",
    "toolCallId",
    "toolName",
    "userId",
)
_KEY_FIELDS: Final = tuple(f'"{name}":' for name in _KEY_NAMES)


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
        return _record_data(self, None)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolEffectRecord:
        """Rebuild a record from ``to_dict`` output. A store's rows can be changed outside this
        library, so each field is checked, not coerced: a missing or wrong one is a
        ``ValueError`` naming it (fields this version does not know are ignored)."""
        field = StoredFields(data, _RECORD)
        return cls(
            **{name: field.text(name) for name in _RECORD_TEXTS},
            **{name: field.text(name, optional=True) for name in _RECORD_OPTIONS},
            # Read as times here, so a changed one is refused naming its field (and not quoted)
            # rather than failing the first comparison that reads it.
            **{name: field.read(name, _ISO_TIME, _is_iso_time) for name in _RECORD_TIMES},
            expires_at=field.read("expires_at", _ISO_TIME, _is_iso_time, None),
            status=field.choice("status", EFFECT_STATUSES),
            attempt=field.read("attempt", "a positive integer", _is_positive_int),
            version=field.read("version", "a positive integer", _is_positive_int),
            result=field.result(),
            failure=_stored_failure(field.get("failure")),
        )


_RECORD: Final = "stored tool effect record"
_RECORD_TEXTS: Final = (
    "key",
    "session_id",
    "run_id",
    "tool_call_id",
    "tool_name",
    "arguments_hash",
    "tenant_id",
)
_RECORD_OPTIONS: Final = ("account_id", "user_id", "claim_token", "result_ref")
_RECORD_TIMES: Final = ("created_at", "updated_at")
_ISO_TIME: Final = "an ISO 8601 time"


def _is_iso_time(value: Any) -> bool:
    """An ISO 8601 time as the stores write them (any that ``datetime`` reads)."""
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_positive_int(value: Any) -> bool:
    return type(value) is int and value >= 1


def _stored_failure(value: Any) -> ToolEffectFailure | None:
    if value is None:
        return None
    if (
        not isinstance(value, Mapping)
        or set(value) - {"code", "reference"}
        or not isinstance(value.get("code"), str)
        or not isinstance(value.get("reference", ""), str | None)
    ):
        raise ValueError(
            f"{_RECORD} field 'failure' must hold a string 'code' and an optional 'reference'"
        )
    return ToolEffectFailure(value["code"], value.get("reference"))


def _record_data(
    record: ToolEffectRecord, result_data: dict[str, JSONValue] | None
) -> dict[str, JSONValue]:
    """``record.to_dict()``; ``result_data``, when given, is ``record.result.to_dict()``."""
    out: dict[str, JSONValue] = {
        "key": record.key,
        "session_id": record.session_id,
        "run_id": record.run_id,
        "tool_call_id": record.tool_call_id,
        "tool_name": record.tool_name,
        "arguments_hash": record.arguments_hash,
        "status": record.status,
        "attempt": record.attempt,
        "version": record.version,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "tenant_id": record.tenant_id,
    }
    # The optional fields, in a fixed order, only when set.
    if record.account_id is not None:
        out["account_id"] = record.account_id
    if record.user_id is not None:
        out["user_id"] = record.user_id
    if record.claim_token is not None:
        out["claim_token"] = record.claim_token
    if record.expires_at is not None:
        out["expires_at"] = record.expires_at
    if record.result is not None:
        out["result"] = record.result.to_dict() if result_data is None else result_data
    if record.result_ref is not None:
        out["result_ref"] = record.result_ref
    if record.failure is not None:
        out["failure"] = record.failure.to_dict()
    return out


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
    if moment.utcoffset() is None:  # naive (or a zone that gives no offset): read as UTC
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@lru_cache(maxsize=64)
def _iso_second(second: int) -> str:
    # A busy store stamps many records within one second (and their deadlines within another).
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def iso_from_ms(ms: int) -> str:
    """JavaScript ``toISOString`` form of a millisecond timestamp."""
    second, milli = divmod(ms, 1000)
    return f"{_iso_second(second)}.{milli:03d}Z"


def stored_columns(record: ToolEffectRecord) -> tuple[str, int, str | None, int]:
    """The columns the SQL stores keep beside a record's JSON, in their statements' order:
    status, version, claim token, and the update time in milliseconds."""
    return (record.status, record.version, record.claim_token, ms_from_iso(record.updated_at))


def ms_from_iso(text: str) -> int:
    return _to_ms(datetime.fromisoformat(text))


def _bounded(value: Any, label: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _limit(f"{label} is required and bounded")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        # A lone surrogate (a JSON decoder makes one from a model's "\ud800"): an id that
        # decides which record is which is refused, never rewritten into another id.
        raise _limit(f"{label} must be Unicode text: it holds a lone surrogate") from None
    if size > limit:
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
    _checked_result_data(result, key)
    return result  # type: ignore[no-any-return]


def _checked_result_data(result: Any, key: ToolEffectKey) -> dict[str, JSONValue] | None:
    """Check a result to store for ``key``; its ``to_dict`` (reused to encode the record)."""
    if result is None:
        return None
    if not isinstance(result, ToolResult):
        raise _limit("tool result must be JSON serializable")
    if result.tool_call_id != key.tool_call_id or result.name != key.tool_name:
        raise _conflict()
    data = result.to_dict()
    try:
        size = len(_strict_json(data))
        ToolResult.from_dict(data)  # stored only if it reads back: a duplicate replays it
    except (_json.JSONEncodeError, TypeError, ValueError) as err:
        raise _limit("tool result must be JSON serializable") from err
    if size > MAX_RESULT_BYTES:
        raise _limit("tool result exceeds limits")
    return data


def _strict_json(data: dict[str, JSONValue]) -> bytes:
    """The stored JSON of plain record or result data. A result is the tool's output and the
    tool has already run, so a string holding a lone surrogate (which UTF-8 cannot carry) is
    stored with U+FFFD for it rather than leaving the record ``unknown``; anything else JSON
    cannot hold is still refused."""
    try:
        return _json.dumps(data)
    except (_json.JSONEncodeError, TypeError):
        return _json.dumps(_json.without_lone_surrogates(data))


def stored_result(result: ToolResult) -> ToolResult:
    """``result`` as a store holds it and a duplicate delivery reads it back: its JSON (see
    ``_strict_json``) read again."""
    return ToolResult.from_dict(_json.loads(_strict_json(result.to_dict())))


def _check_version(value: Any) -> int:
    if type(value) is not int or value < 1:
        raise _conflict()
    return value


def encode_record(
    record: ToolEffectRecord, result_data: dict[str, JSONValue] | None = None
) -> bytes:
    """The stored JSON of a record; refuses a record over 128 KiB. ``result_data`` is
    ``record.result.to_dict()`` when the caller has it already."""
    try:
        blob = _strict_json(_record_data(record, result_data))
    except (_json.JSONEncodeError, TypeError) as err:
        raise _limit("tool effect record must be JSON serializable") from err
    if len(blob) > MAX_RECORD_BYTES:
        raise _limit("tool effect record exceeds limits")
    return blob


def decode_record(blob: bytes | str) -> ToolEffectRecord:
    return ToolEffectRecord.from_dict(_json.loads(blob))


Step: TypeAlias = Callable[["ToolEffectRecord | None"], "tuple[ToolEffectRecord | None, Any]"]


def _new_claim(key: ToolEffectKey, now_ms: int, ttl_ms: int) -> ToolEffectRecord:
    """The first claim of ``key``: ``pending``, attempt 1, version 1, a fresh token."""
    stamp = iso_from_ms(now_ms)
    ownership = key.ownership
    return ToolEffectRecord(
        key=key.key,
        session_id=key.session_id,
        run_id=key.run_id,
        tool_call_id=key.tool_call_id,
        tool_name=key.tool_name,
        arguments_hash=key.arguments_hash,
        status="pending",
        attempt=1,
        version=1,
        created_at=stamp,
        updated_at=stamp,
        tenant_id=ownership.tenant_id,
        account_id=ownership.account_id,
        user_id=ownership.user_id,
        claim_token=uuid.uuid4().hex,
        expires_at=iso_from_ms(now_ms + ttl_ms),
    )


# The two transitions of every call are built field by field: ``dataclasses.replace`` costs
# several times as much, and these run on every dispatch.


def _advanced(
    record: ToolEffectRecord,
    status: ToolEffectStatus,
    stamp: str,
    claim_token: str | None,
    expires_at: str | None,
    result: ToolResult | None,
    result_ref: str | None,
    failure: ToolEffectFailure | None,
) -> ToolEffectRecord:
    """``record`` one version on, in ``status``; identity, ownership and attempt stay."""
    return ToolEffectRecord(
        key=record.key,
        session_id=record.session_id,
        run_id=record.run_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        arguments_hash=record.arguments_hash,
        status=status,
        attempt=record.attempt,
        version=record.version + 1,
        created_at=record.created_at,
        updated_at=stamp,
        tenant_id=record.tenant_id,
        account_id=record.account_id,
        user_id=record.user_id,
        claim_token=claim_token,
        expires_at=expires_at,
        result=result,
        result_ref=result_ref,
        failure=failure,
    )


def _dispatched(record: ToolEffectRecord, stamp: str) -> ToolEffectRecord:
    """``pending`` -> ``dispatched``; the token and the deadline stay."""
    return _advanced(
        record,
        "dispatched",
        stamp,
        record.claim_token,
        record.expires_at,
        record.result,
        record.result_ref,
        record.failure,
    )


def _completed(
    record: ToolEffectRecord, stamp: str, result: ToolResult | None, ref: str | None
) -> ToolEffectRecord:
    """``dispatched`` -> ``completed``: the claim ends, the result is kept."""
    return _advanced(record, "completed", stamp, None, None, result, ref, None)


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

    Two writes skip the read: ``_insert(slot, record, blob)`` stores a new claim unless the slot
    holds a record, and ``_swap(slot, record, blob, version, token)`` replaces the record only
    while the stored one still has that version and claim token. A durable store makes each of
    them one conditional statement (the defaults go through ``_transact``); ``_call_write(fn)``
    runs one (a store may commit those of concurrent calls together, see ``GroupCommit``).
    ``begin`` inserts first, and a claim holder advances its claim with ``mark_dispatched_from``
    and ``complete_from``: so a call that runs without surprises writes three times and reads
    never. Every write bumps ``version`` and a claim's token is fresh for every claim, so a
    record whose version and token are still the ones the holder wrote is exactly the record it
    holds.
    """

    def __init__(self, now: Clock | None = None) -> None:
        if now is not None and not callable(now):
            raise TypeError(
                f"now must be a function that returns a datetime, got {type(now).__name__}"
            )
        self._now: Clock = now or _utc_now

    # storage hooks -------------------------------------------------------------------------

    @abstractmethod
    def _transact(self, slot: Slot, step: Step) -> Any: ...

    @abstractmethod
    def _cleanup(self, owner: Owner, before_ms: int, limit: int) -> int: ...

    async def _call(self, fn: Callable[[], T]) -> T:
        return fn()

    async def _call_write(self, fn: Callable[[], bool]) -> bool:
        """Run one conditional write (``_insert`` or ``_swap``); a store may commit the writes
        of concurrent calls together."""
        return await self._call(fn)

    def _insert(self, slot: Slot, record: ToolEffectRecord, blob: bytes) -> bool:
        """Store ``record`` (``blob`` is its JSON) if the slot holds no record; False if it
        holds one."""

        def step(current: ToolEffectRecord | None) -> tuple[ToolEffectRecord | None, bool]:
            return (record, True) if current is None else (None, False)

        return bool(self._transact(slot, step))

    def _swap(
        self, slot: Slot, record: ToolEffectRecord, blob: bytes, version: int, token: str
    ) -> bool:
        """Replace the stored record by ``record`` if it has this version and claim token;
        False (nothing written) otherwise."""

        def step(current: ToolEffectRecord | None) -> tuple[ToolEffectRecord | None, bool]:
            if current is None or current.version != version or current.claim_token != token:
                return None, False
            return record, True

        return bool(self._transact(slot, step))

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
        slot = self._slot(key)
        # Most calls are new: try to insert the claim without reading first. If a record is
        # there, nothing was written and the read-check-write path below decides.
        fresh = _new_claim(key, self._now_ms(), ttl)
        blob = encode_record(fresh)
        if await self._call_write(lambda: self._insert(slot, fresh, blob)):
            return BeginOutcome("acquired", fresh)

        def action(
            record: ToolEffectRecord | None, now_ms: int
        ) -> tuple[ToolEffectRecord | None, Any]:
            if record is None:
                fresh = _new_claim(key, now_ms, ttl)
                return fresh, BeginOutcome("acquired", fresh)
            if record.status == "failed_retryable" and record.attempt < attempts:
                again = replace(
                    record,
                    status="pending",
                    attempt=record.attempt + 1,
                    version=record.version + 1,
                    updated_at=iso_from_ms(now_ms),
                    claim_token=uuid.uuid4().hex,
                    expires_at=iso_from_ms(now_ms + ttl),
                    result=None,
                    result_ref=None,
                    failure=None,
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
            change=_dispatched,
        )
        return record

    async def mark_dispatched_from(
        self, key: ToolEffectKey, held: ToolEffectRecord
    ) -> ToolEffectRecord:
        """``mark_dispatched`` for the holder of a claim: ``held`` is the record ``begin``
        returned for ``key``. One conditional write, no read, while the stored record is still
        ``held`` and unexpired; otherwise exactly what ``mark_dispatched(key,
        claim_token=held.claim_token, expected_version=held.version)`` does."""
        record: ToolEffectRecord = await self._advance(
            key,
            held,
            "pending",
            _dispatched,
            lambda: self.mark_dispatched(
                key, claim_token=held.claim_token or "", expected_version=held.version
            ),
        )
        return record

    async def complete_from(
        self, key: ToolEffectKey, held: ToolEffectRecord, result: ToolResult | None
    ) -> ToolEffectRecord:
        """``complete`` for the holder of a claim: ``held`` is the record
        ``mark_dispatched_from`` returned. One conditional write, no read, while the stored
        record is still ``held`` and unexpired; otherwise exactly what ``complete(key,
        claim_token=held.claim_token, expected_version=held.version, result=result)`` does."""
        data = _checked_result_data(result, key) if isinstance(key, ToolEffectKey) else None
        record: ToolEffectRecord = await self._advance(
            key,
            held,
            "dispatched",
            lambda rec, stamp: _completed(rec, stamp, result, None),
            lambda: self.complete(
                key,
                claim_token=held.claim_token or "",
                expected_version=held.version,
                result=result,
            ),
            data,
        )
        return record

    async def _advance(
        self,
        key: ToolEffectKey,
        held: ToolEffectRecord,
        status: ToolEffectStatus,
        change: Callable[[ToolEffectRecord, str], ToolEffectRecord],
        otherwise: Callable[[], Awaitable[ToolEffectRecord]],
        result_data: dict[str, JSONValue] | None = None,
    ) -> ToolEffectRecord:
        if type(held) is not ToolEffectRecord and not isinstance(held, ToolEffectRecord):
            raise TypeError(
                f"held must be the ToolEffectRecord of the claim, got {type(held).__name__}"
            )
        token = held.claim_token
        if (
            type(key) is ToolEffectKey
            and type(held) is ToolEffectRecord
            and held.status == status
            and held.key == key.key
            and token is not None
            and held.expires_at is not None
        ):
            # The checks of _slot that depend on the moment; the rest held when the claim was
            # taken, for the same (immutable) key.
            _check_signal(key.signal)
            now = self._now()
            key.identity.check_active(now)
            now_ms = _to_ms(now)
            if ms_from_iso(held.expires_at) > now_ms:  # expired: the full path expires it
                written = change(held, iso_from_ms(now_ms))
                blob = encode_record(written, result_data)
                ownership = key.ownership
                slot = (
                    ownership.tenant_id,
                    ownership.account_id or "",
                    ownership.user_id or "",
                    key.identity.principal_id,
                    key.key,
                )

                def swap() -> bool:
                    return self._swap(slot, written, blob, held.version, token)

                if await self._call_write(swap):
                    return written
        # Something changed under the holder (or the claim expired): read, check and write.
        return await otherwise()

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
            change=lambda rec, stamp: _completed(rec, stamp, stored, ref),
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
        # slot -> (status, updated ms, record JSON, version, claim token)
        self._rows: dict[Slot, tuple[str, int, bytes, int, str | None]] = {}

    @staticmethod
    def _row(record: ToolEffectRecord, blob: bytes) -> tuple[str, int, bytes, int, str | None]:
        return (
            record.status,
            ms_from_iso(record.updated_at),
            blob,
            record.version,
            record.claim_token,
        )

    def _transact(self, slot: Slot, step: Step) -> Any:
        with self._lock:
            row = self._rows.get(slot)
            current = None if row is None else decode_record(row[2])
            written, value = step(current)
            if written is not None:
                self._rows[slot] = self._row(written, encode_record(written))
        return finish_step(value)

    def _insert(self, slot: Slot, record: ToolEffectRecord, blob: bytes) -> bool:
        with self._lock:
            if slot in self._rows:
                return False
            self._rows[slot] = self._row(record, blob)
        return True

    def _swap(
        self, slot: Slot, record: ToolEffectRecord, blob: bytes, version: int, token: str
    ) -> bool:
        with self._lock:
            row = self._rows.get(slot)
            if row is None or row[3] != version or row[4] != token:
                return False
            self._rows[slot] = self._row(record, blob)
        return True

    def _cleanup(self, owner: Owner, before_ms: int, limit: int) -> int:
        with self._lock:
            doomed = sorted(
                (updated, slot)
                for slot, (status, updated, *_stored) in self._rows.items()
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
    "stored_result",
]
