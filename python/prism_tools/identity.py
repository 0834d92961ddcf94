"""Who an agent acts for, and who owns the records it writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from prism_tools.errors import IdentityError


@dataclass(frozen=True, slots=True)
class Ownership:
    """The tenant (and optionally account and user) that owns a run's records."""

    tenant_id: str
    account_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """A verified principal an agent acts as. Dispatch refuses a call when the identity is revoked,
    expired, or belongs to another tenant, account or user than the ``Ownership`` given."""

    principal_id: str
    tenant_id: str
    account_id: str | None = None
    user_id: str | None = None
    expires_at: datetime | None = None
    revoked: bool = False

    def check_active(self, now: datetime | None = None) -> None:
        """Raise ``IdentityError`` unless the identity may act now."""
        if self.revoked:
            raise IdentityError("Agent identity is revoked")
        if self.expires_at is not None:
            moment = now or datetime.now(UTC)
            expires = self.expires_at
            # Either side without a time zone is UTC (as the effect stores read their clocks),
            # so a naive clock and an aware expiry compare instead of raising TypeError.
            # (A time zone whose utcoffset() is None leaves a time naive too.)
            if moment.utcoffset() is None:
                moment = moment.replace(tzinfo=UTC)
            if expires.utcoffset() is None:
                expires = expires.replace(tzinfo=UTC)
            if moment >= expires:
                raise IdentityError("Agent identity has expired")

    def check_ownership(self, ownership: Ownership | None) -> None:
        """Raise ``IdentityError`` when the identity conflicts with ``ownership``."""
        if ownership is None:
            return
        for field in ("tenant_id", "account_id", "user_id"):
            wanted = getattr(ownership, field)
            held = getattr(self, field)
            if wanted is not None and held != wanted:
                raise IdentityError(f"Agent identity does not match ownership ({field})")
