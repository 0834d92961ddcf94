"""Identity, trust and permission checks in dispatch, and the static policy helpers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.support import EventLog

from prism_tools import (
    AgentIdentity,
    InMemoryRunLedger,
    MiddlewareRegistry,
    Ownership,
    PermissionDecision,
    PermissionRequest,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
    TrustDecision,
    TrustRequest,
    create_static_permission_policy,
    create_static_trust_policy,
    create_tool_registry,
    dispatch_tool_call,
)


def make_call(name: str = "echo") -> ToolCall:
    return ToolCall(id="call_1", name=name, arguments={"text": "hi"})


def make_context(**extra: Any) -> ToolExecutionContext:
    return ToolExecutionContext(session_id="s1", run_id="r1", tool_call_id="call_1", **extra)


def make_identity(**overrides: Any) -> AgentIdentity:
    fields: dict[str, Any] = {
        "principal_id": "agent-1",
        "tenant_id": "tenant-a",
        "account_id": "account-a",
        "user_id": "user-a",
    }
    return AgentIdentity(**{**fields, **overrides})


class CountingTool:
    """A tool body that records the context of every call it receives."""

    def __init__(self) -> None:
        self.contexts: list[ToolExecutionContext] = []

    @property
    def calls(self) -> int:
        return len(self.contexts)

    async def __call__(self, args: dict[str, Any], context: ToolExecutionContext) -> Any:
        self.contexts.append(context)
        return "ran"


class SpyTrust:
    """A trust policy that records its requests (into a shared ``journal``) and answers
    ``trusted``."""

    def __init__(self, journal: list[str] | None = None, trusted: bool = True) -> None:
        self.journal = [] if journal is None else journal
        self.requests: list[TrustRequest] = []
        self.trusted = trusted

    def check(self, request: TrustRequest) -> TrustDecision:
        self.journal.append("trust")
        self.requests.append(request)
        return TrustDecision(trusted=self.trusted)


class SpyPermission:
    """A permission policy that records its requests (into a shared ``journal``) and answers
    ``allowed``."""

    def __init__(self, journal: list[str] | None = None, allowed: bool = True) -> None:
        self.journal = [] if journal is None else journal
        self.requests: list[PermissionRequest] = []
        self.allowed = allowed

    def check(self, request: PermissionRequest) -> PermissionDecision:
        self.journal.append("permission")
        self.requests.append(request)
        return PermissionDecision(allowed=self.allowed)


class FixedPermission:
    """A permission policy that returns whatever it was given, for every request."""

    def __init__(self, decision: Any) -> None:
        self.decision = decision

    def check(self, request: PermissionRequest) -> Any:
        return self.decision


@dataclasses.dataclass
class Outcome:
    result: ToolResult
    tool: CountingTool
    log: EventLog
    ledger: InMemoryRunLedger


async def dispatch_echo(
    *, call: ToolCall | None = None, context: ToolExecutionContext | None = None, **options: Any
) -> Outcome:
    """Dispatch one call to a registered ``echo`` tool with events and a ledger attached."""
    tool, log, ledger = CountingTool(), EventLog(), InMemoryRunLedger()
    result = await dispatch_tool_call(
        make_call() if call is None else call,
        registry=create_tool_registry([ToolDefinition(name="echo", execute=tool)]),
        context=make_context() if context is None else context,
        emit=log,
        ledger=ledger,
        **options,
    )
    return Outcome(result, tool, log, ledger)


def assert_permission_denied(outcome: Outcome, *, code: str | None, message: str) -> None:
    assert outcome.tool.calls == 0, "a denied call must never reach execute"
    error = outcome.result.error
    assert error is not None
    assert error.message == message
    assert error.code == code
    assert outcome.log.types == ["tool_execution_blocked"]
    assert outcome.log.events[0].reason == "permission_denied"
    assert outcome.log.events[0].error == error
    assert [row.status for row in outcome.ledger.records] == ["blocked"]
    assert outcome.ledger.records[0].reason == "permission_denied"


def assert_ran(outcome: Outcome) -> None:
    assert outcome.tool.calls == 1
    assert outcome.result.error is None
    assert outcome.result.value == "ran"


# --- trust -------------------------------------------------------------------------------------


async def test_static_trust_false_blocks_as_untrusted() -> None:
    outcome = await dispatch_echo(trust=create_static_trust_policy(False))
    assert_permission_denied(outcome, code="ERR_PRISM_UNTRUSTED", message="Untrusted tool: echo")
    assert outcome.result.error is not None
    assert outcome.result.error.name == "TrustDeniedError"


async def test_a_trust_decision_reason_becomes_the_message() -> None:
    outcome = await dispatch_echo(
        trust=create_static_trust_policy(TrustDecision(trusted=False, reason="quarantined"))
    )
    assert_permission_denied(outcome, code="ERR_PRISM_UNTRUSTED", message="quarantined")


async def test_static_trust_true_lets_the_call_run() -> None:
    assert_ran(await dispatch_echo(trust=create_static_trust_policy(True)))
    assert_ran(await dispatch_echo(trust=create_static_trust_policy()))


def test_static_trust_policy_rejects_a_non_bool() -> None:
    with pytest.raises(TypeError):
        create_static_trust_policy("yes")  # type: ignore[arg-type]


# --- permission --------------------------------------------------------------------------------


async def test_static_permission_allow_list_denies_another_target() -> None:
    outcome = await dispatch_echo(
        permission=create_static_permission_policy(allow=["tool:other:execute"])
    )
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_PERMISSION_DENIED",
        message="Permission not allowed: tool:echo:execute",
    )
    assert outcome.result.error is not None
    assert outcome.result.error.name == "PermissionDeniedError"


async def test_static_permission_allow_list_admits_its_target() -> None:
    assert_ran(
        await dispatch_echo(permission=create_static_permission_policy(allow=["tool:echo:execute"]))
    )


async def test_static_permission_deny_key_denies() -> None:
    outcome = await dispatch_echo(
        permission=create_static_permission_policy(deny=["tool:echo:execute"])
    )
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_PERMISSION_DENIED",
        message="Permission denied: tool:echo:execute",
    )


async def test_static_permission_deny_wins_over_allow() -> None:
    outcome = await dispatch_echo(
        permission=create_static_permission_policy(
            allow=["tool:echo:execute"], deny=["tool:echo:execute"]
        )
    )
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_PERMISSION_DENIED",
        message="Permission denied: tool:echo:execute",
    )


async def test_static_permission_false_denies_everything() -> None:
    outcome = await dispatch_echo(permission=create_static_permission_policy(False))
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_PERMISSION_DENIED",
        message="Permission denied: tool:echo:execute",
    )


async def test_static_permission_with_empty_allow_allows() -> None:
    assert_ran(await dispatch_echo(permission=create_static_permission_policy(allow=[])))


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"allow": "tool:echo:execute"}, id="allow-as-string"),
        pytest.param({"deny": [42]}, id="non-string-key"),
        pytest.param({"allowed": "no"}, id="allowed-not-bool"),
    ],
)
def test_static_permission_policy_rejects_bad_arguments(options: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        create_static_permission_policy(**options)


async def test_a_denial_without_reason_uses_the_default_message() -> None:
    outcome = await dispatch_echo(permission=FixedPermission(PermissionDecision(allowed=False)))
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_PERMISSION_DENIED",
        message="Permission denied for tool:echo:execute",
    )


async def test_a_denial_reason_becomes_the_message() -> None:
    outcome = await dispatch_echo(
        permission=FixedPermission(PermissionDecision(allowed=False, reason="outside hours"))
    )
    assert_permission_denied(outcome, code="ERR_PRISM_PERMISSION_DENIED", message="outside hours")


@pytest.mark.parametrize(
    "decision",
    [
        pytest.param(None, id="none"),
        pytest.param({"allowed": True}, id="dict"),
        pytest.param(PermissionDecision(allowed=1), id="truthy-not-true"),  # type: ignore[arg-type]
    ],
)
async def test_a_malformed_permission_decision_denies(decision: Any) -> None:
    outcome = await dispatch_echo(permission=FixedPermission(decision))
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_PERMISSION_DENIED",
        message="Permission denied for tool:echo:execute",
    )


# --- order, requests, async, failures ----------------------------------------------------------


async def test_trust_is_consulted_before_permission() -> None:
    journal: list[str] = []
    outcome = await dispatch_echo(trust=SpyTrust(journal), permission=SpyPermission(journal))
    assert journal == ["trust", "permission"]
    assert_ran(outcome)


async def test_permission_is_not_consulted_when_trust_denies() -> None:
    journal: list[str] = []
    permission = SpyPermission(journal)
    outcome = await dispatch_echo(trust=SpyTrust(journal, trusted=False), permission=permission)
    assert journal == ["trust"]
    assert permission.requests == []
    assert_permission_denied(outcome, code="ERR_PRISM_UNTRUSTED", message="Untrusted tool: echo")


async def test_requests_carry_kind_target_capability_action_and_metadata() -> None:
    trust, permission = SpyTrust(), SpyPermission()
    metadata = {"tenant": "acme", "channel": "chat"}
    await dispatch_echo(context=make_context(metadata=metadata), trust=trust, permission=permission)

    assert trust.requests == [
        TrustRequest(kind="tool", target="echo", capability="execute", metadata=metadata)
    ]
    assert permission.requests == [
        PermissionRequest(kind="tool", action="execute", target="echo", metadata=metadata)
    ]
    assert permission.requests[0].key == "tool:echo:execute"


async def test_policies_see_the_name_after_middleware_renames_the_call() -> None:
    permission = SpyPermission()
    tool, other = CountingTool(), CountingTool()
    middleware = MiddlewareRegistry().use(
        "tool_call", lambda call, next_: dataclasses.replace(call, name="other")
    )
    await dispatch_tool_call(
        make_call("echo"),
        registry=create_tool_registry(
            [ToolDefinition(name="echo", execute=tool), ToolDefinition(name="other", execute=other)]
        ),
        context=make_context(),
        middleware=middleware,
        permission=permission,
    )
    assert [request.target for request in permission.requests] == ["other"]
    assert (tool.calls, other.calls) == (0, 1)


async def test_policies_are_not_consulted_for_an_unknown_tool() -> None:
    trust, permission = SpyTrust(), SpyPermission()
    outcome = await dispatch_echo(call=make_call("ghost"), trust=trust, permission=permission)
    assert outcome.result.error is not None
    assert outcome.result.error.message == "Unknown tool: ghost"
    assert trust.requests == []
    assert permission.requests == []


async def test_async_policies_are_awaited() -> None:
    journal: list[str] = []

    class AsyncTrust:
        async def check(self, request: TrustRequest) -> TrustDecision:
            journal.append("trust")
            return TrustDecision(trusted=True)

    class AsyncPermission:
        def __init__(self, allowed: bool) -> None:
            self.allowed = allowed

        async def check(self, request: PermissionRequest) -> PermissionDecision:
            journal.append("permission")
            return PermissionDecision(allowed=self.allowed, reason=None if self.allowed else "no")

    assert_ran(await dispatch_echo(trust=AsyncTrust(), permission=AsyncPermission(True)))
    assert journal == ["trust", "permission"]

    denied = await dispatch_echo(trust=AsyncTrust(), permission=AsyncPermission(False))
    assert_permission_denied(denied, code="ERR_PRISM_PERMISSION_DENIED", message="no")


class ExplodingTrust:
    def check(self, request: TrustRequest) -> TrustDecision:
        raise RuntimeError("trust backend failed with key sk-policy-9")


class ExplodingPermission:
    async def check(self, request: PermissionRequest) -> PermissionDecision:
        raise RuntimeError("permission backend failed with key sk-policy-9")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"trust": ExplodingTrust()}, "trust backend failed with key [REDACTED]", id="trust"
        ),
        pytest.param(
            {"permission": ExplodingPermission()},
            "permission backend failed with key [REDACTED]",
            id="permission",
        ),
    ],
)
async def test_a_raising_policy_blocks_with_its_message_scrubbed(
    options: dict[str, Any], message: str
) -> None:
    outcome = await dispatch_echo(secrets=["sk-policy-9"], **options)
    assert_permission_denied(outcome, code=None, message=message)
    assert outcome.result.error is not None
    assert outcome.result.error.name == "RuntimeError"
    assert "sk-policy-9" not in repr(outcome.log.events)
    assert "sk-policy-9" not in repr(outcome.ledger.records)


async def test_permission_is_checked_before_the_validator_and_before_execute() -> None:
    validated: list[str] = []
    prepared: list[str] = []

    def validator(tool: ToolDefinition, args: dict[str, Any], context: Any) -> None:
        validated.append(tool.name)

    def before_execute(call: ToolCall, tool: ToolDefinition, context: Any) -> None:
        prepared.append(call.name)

    outcome = await dispatch_echo(
        permission=create_static_permission_policy(False),
        validate=validator,
        before_execute=before_execute,
    )
    assert validated == []
    assert prepared == []
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_PERMISSION_DENIED",
        message="Permission denied: tool:echo:execute",
    )


# --- identity ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("identity", "message"),
    [
        pytest.param(make_identity(revoked=True), "Agent identity is revoked", id="revoked"),
        pytest.param(
            make_identity(expires_at=datetime.now(UTC) - timedelta(minutes=1)),
            "Agent identity has expired",
            id="expired",
        ),
        pytest.param(
            make_identity(expires_at=datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)),
            "Agent identity has expired",
            id="expired-naive-utc",
        ),
    ],
)
async def test_an_inactive_identity_is_denied(identity: AgentIdentity, message: str) -> None:
    outcome = await dispatch_echo(identity=identity)
    assert_permission_denied(outcome, code="ERR_PRISM_IDENTITY", message=message)
    assert outcome.result.error is not None
    assert outcome.result.error.name == "IdentityError"


@pytest.mark.parametrize(
    ("ownership", "field"),
    [
        pytest.param(Ownership(tenant_id="tenant-b"), "tenant_id", id="tenant"),
        pytest.param(
            Ownership(tenant_id="tenant-a", account_id="account-b"), "account_id", id="account"
        ),
        pytest.param(
            Ownership(tenant_id="tenant-a", account_id="account-a", user_id="user-b"),
            "user_id",
            id="user",
        ),
    ],
)
async def test_an_identity_that_conflicts_with_ownership_is_denied(
    ownership: Ownership, field: str
) -> None:
    outcome = await dispatch_echo(identity=make_identity(), ownership=ownership)
    assert_permission_denied(
        outcome,
        code="ERR_PRISM_IDENTITY",
        message=f"Agent identity does not match ownership ({field})",
    )


async def test_identity_from_the_context_is_used_when_none_is_passed() -> None:
    outcome = await dispatch_echo(context=make_context(identity=make_identity(revoked=True)))
    assert_permission_denied(
        outcome, code="ERR_PRISM_IDENTITY", message="Agent identity is revoked"
    )


async def test_an_explicit_identity_takes_precedence_over_the_context_identity() -> None:
    explicit = make_identity(principal_id="explicit")
    outcome = await dispatch_echo(
        context=make_context(identity=make_identity(revoked=True)), identity=explicit
    )
    assert_ran(outcome)
    assert outcome.tool.contexts[0].identity is explicit


async def test_a_valid_identity_passes_and_reaches_the_tool_context() -> None:
    identity = make_identity(expires_at=datetime.now(UTC) + timedelta(hours=1))
    outcome = await dispatch_echo(
        identity=identity,
        ownership=Ownership(tenant_id="tenant-a", account_id="account-a", user_id="user-a"),
    )
    assert_ran(outcome)
    assert outcome.tool.contexts[0].identity is identity


async def test_a_context_identity_reaches_the_tool_context() -> None:
    identity = make_identity()
    outcome = await dispatch_echo(context=make_context(identity=identity))
    assert_ran(outcome)
    assert outcome.tool.contexts[0].identity is identity


async def test_identity_is_checked_before_trust_and_permission() -> None:
    journal: list[str] = []
    outcome = await dispatch_echo(
        identity=make_identity(revoked=True),
        trust=SpyTrust(journal),
        permission=SpyPermission(journal),
    )
    assert journal == []
    assert_permission_denied(
        outcome, code="ERR_PRISM_IDENTITY", message="Agent identity is revoked"
    )
