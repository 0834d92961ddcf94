"""Trust and permission policies consulted by dispatch before a tool runs.

A policy is any object with ``check(request) -> decision`` (sync or async). Dispatch asks trust
first (``TrustRequest(kind="tool", target=<name>, capability="execute")``), then permission
(``PermissionRequest(kind="tool", action="execute", target=<name>)``). A negative decision, or a
policy that raises, blocks the call with ``permission_denied``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from prism_tools.types import JSONValue


@dataclass(frozen=True, slots=True)
class TrustRequest:
    kind: str
    target: str
    capability: str | None = None
    metadata: Mapping[str, JSONValue] | None = None


@dataclass(frozen=True, slots=True)
class TrustDecision:
    trusted: bool
    reason: str | None = None
    metadata: Mapping[str, JSONValue] | None = None


@dataclass(frozen=True, slots=True)
class PermissionRequest:
    kind: str
    action: str
    target: str
    metadata: Mapping[str, JSONValue] | None = None

    @property
    def key(self) -> str:
        """``<kind>:<target>:<action>``, e.g. ``tool:send_email:execute``."""
        return f"{self.kind}:{self.target}:{self.action}"


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    allowed: bool
    reason: str | None = None
    metadata: Mapping[str, JSONValue] | None = None


class TrustPolicy(Protocol):
    def check(self, request: TrustRequest) -> TrustDecision | Awaitable[TrustDecision]: ...


class PermissionPolicy(Protocol):
    def check(
        self, request: PermissionRequest
    ) -> PermissionDecision | Awaitable[PermissionDecision]: ...


@dataclass(frozen=True, slots=True)
class StaticTrustPolicy:
    """Returns the same decision for every request."""

    decision: TrustDecision

    def check(self, request: TrustRequest) -> TrustDecision:
        return self.decision


def create_static_trust_policy(trusted: bool | TrustDecision = True) -> StaticTrustPolicy:
    """A trust policy that answers every request the same way."""
    if isinstance(trusted, TrustDecision):
        return StaticTrustPolicy(trusted)
    if not isinstance(trusted, bool):
        raise TypeError("trusted must be a bool or a TrustDecision")
    return StaticTrustPolicy(TrustDecision(trusted=trusted))


@dataclass(frozen=True, slots=True)
class StaticPermissionPolicy:
    """Exact-key allow/deny over ``<kind>:<target>:<action>`` keys; deny wins, an empty allow
    list allows everything not denied."""

    allow: frozenset[str]
    deny: frozenset[str]
    default: bool = True

    def check(self, request: PermissionRequest) -> PermissionDecision:
        key = request.key
        if key in self.deny:
            return PermissionDecision(False, f"Permission denied: {key}")
        if self.allow and key not in self.allow:
            return PermissionDecision(False, f"Permission not allowed: {key}")
        if not self.default:
            return PermissionDecision(False, f"Permission denied: {key}")
        return PermissionDecision(True)


def _keys(value: Iterable[str] | None, field: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        raise TypeError(f"{field} must be a collection of permission keys, not a single string")
    keys = frozenset(value)
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"{field} keys must be strings, got {type(key).__name__}")
    return keys


def create_static_permission_policy(
    allowed: bool | None = None,
    *,
    allow: Iterable[str] | None = None,
    deny: Iterable[str] | None = None,
) -> StaticPermissionPolicy:
    """A permission policy from fixed keys such as ``tool:send_email:execute``.

    ``allowed=False`` denies everything; ``deny`` keys are always denied; a non-empty ``allow``
    denies every key not in it.
    """
    if allowed is not None and not isinstance(allowed, bool):
        raise TypeError("allowed must be a bool or None")
    return StaticPermissionPolicy(
        allow=_keys(allow, "allow"), deny=_keys(deny, "deny"), default=allowed is not False
    )
