"""Exceptions prism-tools raises on purpose. Each has a stable ``code``.

Blocked and failed tool calls are not exceptions: dispatch returns them as ``ToolResult.error``.
These are for misuse of the API (a duplicate name, an unknown name) and for the few conditions that
must stop a run (a guardrail tripwire, a run limit, cancellation).
"""

from __future__ import annotations

from typing import Any

from prism_tools._core import (
    ArgumentsError,
    DuplicateToolError,
    PrismError,
    SchemaGuardError,
    ToolSearchCapacityError,
)
from prism_tools._json import text_of

PrismError.code = "ERR_PRISM"
DuplicateToolError.code = "ERR_PRISM_DUPLICATE_TOOL"
# The core raises these two with args (message, reason); `reason` names the guard or parse
# failure (e.g. "schema_ref_not_allowed", "arguments_too_deep", "invalid_json").
SchemaGuardError.code = "ERR_PRISM_SCHEMA_GUARD"
ArgumentsError.code = "invalid_json_arguments"
ToolSearchCapacityError.code = "ERR_PRISM_SEARCH_CAPACITY"


def error_text(err: BaseException) -> str:
    """What an exception says, for an error a model or a host reads: ``str(err)``, its class
    name when that is empty, ``"[Unprintable <class>]"`` when its ``__str__`` raises."""
    return text_of(err) or type(err).__name__


def _reason(self: BaseException) -> str | None:
    return self.args[1] if len(self.args) > 1 and isinstance(self.args[1], str) else None


def _message(self: BaseException) -> str:
    return str(self.args[0]) if self.args else ""


for _cls in (SchemaGuardError, ArgumentsError):
    setattr(_cls, "reason", property(_reason))  # noqa: B010 - the stub declares the property
    setattr(_cls, "__str__", _message)  # noqa: B010 - show the message, not the args tuple


class UnknownToolError(PrismError, LookupError):
    """``resolve`` of a name that is not registered."""

    code = "ERR_PRISM_UNKNOWN_TOOL"

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool: {name}")
        self.name = name


class ToolScopeError(PrismError):
    """A run asked for tools outside what the host registered."""

    code = "ERR_PRISM_TOOL_SCOPE"


class IdentityError(PrismError):
    """An agent identity is inactive or does not match the ownership of the call."""

    code = "ERR_PRISM_IDENTITY"


class TrustDeniedError(PrismError):
    """The trust policy does not trust the tool."""

    code = "ERR_PRISM_UNTRUSTED"


class PermissionDeniedError(PrismError):
    """The permission policy does not allow the call."""

    code = "ERR_PRISM_PERMISSION_DENIED"


class MiddlewareError(PrismError):
    """A middleware failed (raised under ``error_policy="throw"``) or misused ``next``."""

    code = "ERR_PRISM_MIDDLEWARE"


class GuardrailTripwire(PrismError):
    """A guardrail tripped (or asked for an interruption that the stage cannot serve).

    ``record`` is the guardrail's ``GuardrailRecord``.
    """

    code = "ERR_PRISM_GUARDRAIL_BLOCKED"

    def __init__(self, message: str, *, record: Any = None, code: str | None = None) -> None:
        super().__init__(message)
        self.record = record
        if code is not None:
            self.code = code


class RunLimitError(PrismError):
    """A run limit was exceeded; ``breach`` says which, its maximum and what was observed."""

    code = "ERR_PRISM_RUN_LIMIT"

    def __init__(
        self, limit: str, *, maximum: int | float | None = None, observed: int | float | None = None
    ) -> None:
        super().__init__(f"Run limit exceeded: {limit}")
        self.limit = limit
        self.breach = {"limit": limit, "maximum": maximum, "observed": observed}


class LedgerWriteError(PrismError):
    """The ledger refused a row. If it was the call's ``started`` row, the tool did not run;
    if it was a later row (``finished``, ``error``), the tool has already run: a host that
    retries the call then runs it again. ``status`` names the refused row's status."""

    code = "ERR_PRISM_LEDGER_WRITE"

    def __init__(self, message: str, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


__all__ = [
    "ArgumentsError",
    "DuplicateToolError",
    "GuardrailTripwire",
    "IdentityError",
    "LedgerWriteError",
    "MiddlewareError",
    "PermissionDeniedError",
    "PrismError",
    "RunLimitError",
    "SchemaGuardError",
    "ToolScopeError",
    "ToolSearchCapacityError",
    "TrustDeniedError",
    "UnknownToolError",
]
