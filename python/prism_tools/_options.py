"""What each option of dispatch, an agent and a run must be, and the check that names a wrong one.

A wrong object handed as an option would otherwise fail far from where it was given (an
``AttributeError`` deep in dispatch, or after the tool already ran); the check refuses it with a
``TypeError`` that names the option and what it must be.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from prism_tools.effects import ToolEffectStore
from prism_tools.guardrails import Guardrails
from prism_tools.identity import AgentIdentity, Ownership
from prism_tools.middleware import MiddlewareRegistry
from prism_tools.registry import ToolRegistry
from prism_tools.types import ToolCall, ToolExecutionContext


def has_method(value: Any, name: str) -> bool:
    """Whether ``value`` is given and has a callable attribute ``name``."""
    return value is not None and callable(getattr(value, name, None))


def _has_method(name: str) -> Callable[[Any], bool]:
    return lambda value: has_method(value, name)


def _is(kind: type) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, kind)


_FUNCTION_OF_CALL = "a function (tool, args, context)"
_POLICY = "a policy with a check(request) method"

# When an option is given (None leaves it off): a test and the words of the TypeError.
_OPTION_TYPES: Final[dict[str, tuple[Callable[[Any], bool], str]]] = {
    "call": (_is(ToolCall), "a ToolCall"),
    "registry": (_is(ToolRegistry), "a ToolRegistry"),
    "context": (_is(ToolExecutionContext), "a ToolExecutionContext"),
    "validator": (callable, _FUNCTION_OF_CALL),
    "validate": (callable, _FUNCTION_OF_CALL),
    "before_execute": (callable, "a function (call, tool, context)"),
    "emit": (callable, "a function that takes an AgentEvent"),
    "permission": (_has_method("check"), _POLICY),
    "trust": (_has_method("check"), _POLICY),
    "middleware": (_is(MiddlewareRegistry), "a MiddlewareRegistry"),
    "redactor": (_has_method("redact"), "a redactor with a redact(value) method"),
    "ledger": (_has_method("append_tool_call"), "a ledger with an append_tool_call method"),
    "guardrails": (_is(Guardrails), "a Guardrails"),
    "metadata": (_is(Mapping), "a mapping"),
    "ownership": (_is(Ownership), "an Ownership"),
    "identity": (_is(AgentIdentity), "an AgentIdentity"),
    "instructions": (_is(str), "a string"),
    "effect_store": (_is(ToolEffectStore), "a ToolEffectStore"),
    "limit_tracker": (_has_method("charge"), "a limit tracker with a charge(limit) method"),
    # A run polls is_set() and awaits wait(): an asyncio.Event, or anything with both.
    "signal": (
        lambda value: has_method(value, "is_set") and has_method(value, "wait"),
        "an asyncio.Event (is_set() and wait())",
    ),
    # Switches that widen or narrow what runs take True or False only: a truthy stranger such
    # as the string "false" must not turn one on.
    "allow_hidden_tool_calls": (_is(bool), "True or False"),
    "interrupt_before_tool": (_is(bool), "True or False"),
}


# The arguments every dispatch needs: None is as wrong for them as any other stranger.
_REQUIRED: Final = frozenset({"call", "registry", "context"})


def check_option_types(**options: Any) -> None:
    """Refuses, with a ``TypeError`` naming it, the first given option that is not what it must
    be (see ``_OPTION_TYPES``)."""
    for name, value in options.items():
        if value is None and name not in _REQUIRED:
            continue
        test, expected = _OPTION_TYPES[name]
        if not test(value):
            raise TypeError(f"{name} must be {expected}, got {type(value).__name__}")
