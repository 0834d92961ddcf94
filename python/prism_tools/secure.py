"""``create_secure_agent``: an agent that cannot be built, or run, without the safety parts.

It refuses to build without a redactor, permission and trust policies, a tool argument
validator, explicit limits, ownership, and a non-empty ``parameters`` schema on every tool
(names must be unique). Every tool round of its runs suspends for approval
(``interrupt_before_tool=True``, which a run cannot switch off), per-run ``validate`` and
``effect_store`` are refused, and per-run limits can only narrow the agent's. See
``docs/runtime.md`` ("Secure agents").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from prism_tools._options import has_method
from prism_tools.agent import Agent, LoopOptions, Skill
from prism_tools.checkpoints import CheckpointStore
from prism_tools.dispatch import ToolValidator
from prism_tools.effects import ToolEffectStore
from prism_tools.guardrails import Guardrails
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.ledger import RunLedger
from prism_tools.limits import LimitsInput, read_limits
from prism_tools.messages import Provider
from prism_tools.middleware import MiddlewareRegistry
from prism_tools.policies import PermissionPolicy, TrustPolicy
from prism_tools.redaction import Redactor
from prism_tools.registry import ToolRegistry, create_tool_registry
from prism_tools.scoping import Narrowing, ToolsDisclosure
from prism_tools.types import JSONValue, ToolDefinition
from prism_tools.validation import (
    ToolArgumentValidator,
    ToolParameterValidator,
    create_tool_parameter_validator,
)

PER_RUN_REFUSED: Final = "Secure agent defaults cannot be replaced per run"


class SecureAgent(Agent):
    """An agent built by :func:`create_secure_agent`. Its settings cannot be reassigned after
    it is built, and its runs cannot replace them."""

    _sealed = False

    def seal(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._sealed:
            raise AttributeError(f"Secure agent settings cannot be changed ({name})")
        super().__setattr__(name, value)

    def check_run_options(
        self,
        *,
        validate: ToolValidator | None,
        effect_store: ToolEffectStore | None,
        interrupt_before_tool: bool | None,
        guardrails: Guardrails | None = None,
        loop: LoopOptions | Mapping[str, Any] | None = None,
        scoping: Mapping[str, Any] | None = None,
    ) -> None:
        # Guardrails, the loop and the tool scoping (narrowing, disclosure, hidden calls) are
        # part of what was reviewed when the agent was built, so a run may not add to or replace
        # them either; a run's tool_names grant can only narrow, and stays allowed.
        replaced = (validate, effect_store, guardrails, loop)
        widened = any(
            name != "allow_hidden_tool_calls" or value is not False
            for name, value in (scoping or {}).items()
        )
        if any(option is not None for option in replaced) or interrupt_before_tool is False:
            raise TypeError(PER_RUN_REFUSED)
        if widened:
            raise TypeError(PER_RUN_REFUSED)


def _ownership_set(ownership: Any) -> bool:
    if not isinstance(ownership, Ownership):
        return False
    fields = (ownership.tenant_id, ownership.account_id, ownership.user_id)
    return any(isinstance(value, str) and value.strip() for value in fields)


def _strict_validator(validator: Any) -> ToolParameterValidator:
    """The validator, set to block a tool without a schema."""
    adapter: ToolArgumentValidator
    if isinstance(validator, ToolParameterValidator):
        adapter = validator.adapter
    elif has_method(validator, "validate"):
        adapter = validator
    else:
        raise TypeError("Secure agent requires a tool argument validator")
    return create_tool_parameter_validator(adapter, missing_schema="reject")


def create_secure_agent(
    *,
    model: str,
    provider: Provider,
    tools: ToolRegistry | Sequence[ToolDefinition],
    redactor: Redactor | None,
    permission: PermissionPolicy | None,
    trust: TrustPolicy | None,
    validator: ToolParameterValidator | ToolArgumentValidator | None,
    limits: LimitsInput,
    ownership: Ownership | None,
    identity: AgentIdentity | None = None,
    middleware: MiddlewareRegistry | None = None,
    ledger: RunLedger | None = None,
    guardrails: Guardrails | None = None,
    loop: LoopOptions | Mapping[str, Any] | None = None,
    skills: Iterable[Skill] = (),
    metadata: Mapping[str, JSONValue] | None = None,
    instructions: str | None = None,
    tool_narrowing: Narrowing | None = None,
    tools_disclosure: ToolsDisclosure = "all",
    tools_search: Mapping[str, Any] | None = None,
    effect_store: ToolEffectStore | None = None,
    checkpoints: CheckpointStore | None = None,
) -> SecureAgent:
    """A :class:`SecureAgent`. Each missing requirement is a ``TypeError`` with a fixed message
    (``Secure agent requires a redactor``, ... see ``docs/runtime.md``); a duplicate tool name
    is a ``DuplicateToolError``; an identity that is not active or does not match the
    ownership is an ``IdentityError``.

    ``validator`` is a ``create_json_schema_tool_argument_validator()`` result or any object
    with ``validate(schema, value)``; either way a tool without a schema is blocked. The tools
    are copied into a registry of the agent's own: registering into the registry passed in
    later does not reach the agent.
    """
    if not has_method(redactor, "redact"):
        raise TypeError("Secure agent requires a redactor")
    if not has_method(permission, "check"):
        raise TypeError("Secure agent requires a permission policy")
    if not has_method(trust, "check"):
        raise TypeError("Secure agent requires a trust policy")
    validate = _strict_validator(validator)
    if limits is None or not read_limits(limits):
        raise TypeError("Secure agent requires explicit limits")
    if not _ownership_set(ownership):
        raise TypeError("Secure agent requires non-empty ownership")
    if identity is not None:
        identity.check_active()
        identity.check_ownership(ownership)
    listed = tools.list() if isinstance(tools, ToolRegistry) else list(tools)
    for tool in listed:
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not name.strip():
            raise TypeError("Secure agent tool names must be non-empty")
        parameters = getattr(tool, "parameters", None)
        if not isinstance(parameters, Mapping) or not parameters:
            raise TypeError(f"Secure agent tool {name} requires a non-empty parameters schema")
    registry = create_tool_registry(listed, duplicate="error")
    agent = SecureAgent(
        model=model,
        provider=provider,
        tools=registry,
        validator=validate,
        permission=permission,
        trust=trust,
        middleware=middleware,
        redactor=redactor,
        ledger=ledger,
        guardrails=guardrails,
        limits=limits,
        loop=loop,
        skills=skills,
        metadata=metadata,
        ownership=ownership,
        identity=identity,
        instructions=instructions,
        tool_narrowing=tool_narrowing,
        tools_disclosure=tools_disclosure,
        tools_search=tools_search,
        allow_hidden_tool_calls=False,
        effect_store=effect_store,
        interrupt_before_tool=True,
        checkpoints=checkpoints,
    )
    agent.seal()
    return agent


__all__ = ["PER_RUN_REFUSED", "SecureAgent", "create_secure_agent"]
