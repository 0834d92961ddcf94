"""Human approval of tool calls: pending decisions, the decisions a host gives back, and the
record a suspended run leaves in its session state.

With ``interrupt_before_tool=True`` a run stops before a tool round's side effects and returns
``RunResult(status="suspended", pending=...)``; ``await session.resume(decisions)`` answers every
pending call and continues the run. See ``docs/runtime.md`` ("Approval and resume").
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from prism_tools import _json
from prism_tools._core import SEARCH_MAX_TOP_K
from prism_tools._stored import StoredFields, is_bool, is_mapping, is_name, is_object
from prism_tools.errors import PrismError
from prism_tools.limits import CEILINGS, read_limits
from prism_tools.scoping import read_disclosure, read_search_top_k
from prism_tools.types import JSONValue

ApprovalAction = Literal["approve", "reject_once", "allow_for_run", "reject_for_run"]
APPROVAL_ACTIONS: Final[tuple[str, ...]] = get_args(ApprovalAction)
APPROVING: Final = frozenset({"approve", "allow_for_run"})

APPROVAL_REJECTED: Final = "approval_rejected"
"""Error code of the tool row a rejected call gets."""

MAX_REASON_CHARS: Final = 1000
"""Longest ``Decision.reason`` accepted."""

MAX_PENDING_DECISIONS: Final = 32
"""Most calls one suspension may wait on; a round that would need more fails the run."""

SCOPE_OPTIONS: Final = ("tools_disclosure", "tools_search", "allow_hidden_tool_calls")
"""The run options a suspension keeps so its resumed round is scoped as the run was."""


class ApprovalError(PrismError, ValueError):
    """Decisions that do not answer a suspended run's pending calls exactly, or a resume of a
    session with nothing pending. Nothing has run when it is raised."""

    code = "ERR_PRISM_APPROVAL"


class DecisionLimitError(ApprovalError):
    """A tool round would suspend with more than ``MAX_PENDING_DECISIONS`` pending calls."""

    code = "ERR_PRISM_DECISION_LIMIT"


@dataclass(frozen=True, slots=True)
class PendingDecision:
    """One tool call waiting for approval. The arguments themselves are not repeated here:
    ``arguments_hash`` (SHA-256 hex of their JSON, keys sorted, every digit kept; see
    ``call_arguments_hash``) identifies them, and the call is in the transcript."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    arguments_hash: str

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "approval_id": self.approval_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments_hash": self.arguments_hash,
        }

    @classmethod
    def from_dict(cls, data: Any) -> PendingDecision:
        if not isinstance(data, Mapping):
            raise ValueError("a pending decision must be an object")
        values = [data.get(name) for name in cls.__dataclass_fields__]
        strings = [value for value in values if isinstance(value, str) and value]
        if len(strings) != len(values):
            raise ValueError("a pending decision needs four non-empty strings")
        return cls(*strings)


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one pending call.

    ``approve`` runs it once; ``allow_for_run`` runs it and lets later calls to the same tool in
    this run through without asking; ``reject_once`` answers it with an ``approval_rejected``
    error; ``reject_for_run`` does so for every later call to the same tool in this run too.
    ``arguments`` (approving actions only) replaces the model's arguments; they are validated
    again like any call's. ``reason`` is the rejection message the model sees.
    """

    action: ApprovalAction
    arguments: JSONValue = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.action not in APPROVAL_ACTIONS:
            raise ApprovalError(
                f"Unknown decision action {self.action!r}; use one of {', '.join(APPROVAL_ACTIONS)}"
            )
        if self.arguments is not None and self.action not in APPROVING:
            raise ApprovalError("Only approve and allow_for_run decisions may change arguments")
        if self.reason is not None:
            if not isinstance(self.reason, str):
                raise ApprovalError("Decision.reason must be a string")
            if len(self.reason) > MAX_REASON_CHARS:
                raise ApprovalError(f"Decision.reason is longer than {MAX_REASON_CHARS} characters")

    @property
    def approves(self) -> bool:
        return self.action in APPROVING

    def to_dict(self) -> dict[str, JSONValue]:
        return {"action": self.action, "arguments": self.arguments, "reason": self.reason}

    def rejection_message(self) -> str:
        if self.reason:
            return self.reason
        return "Rejected for this run" if self.action == "reject_for_run" else "Rejected"


def read_decision(value: Decision | str | Mapping[str, Any]) -> Decision:
    """A ``Decision``, an action name, or a mapping with ``action``/``arguments``/``reason``."""
    if isinstance(value, Decision):
        return value
    if isinstance(value, str):
        return Decision(value)  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        unknown = set(value) - {"action", "arguments", "reason"}
        if unknown:
            raise ApprovalError(f"Unknown decision fields: {', '.join(sorted(map(str, unknown)))}")
        return Decision(value.get("action"), value.get("arguments"), value.get("reason"))  # type: ignore[arg-type]
    raise ApprovalError(f"A decision must be a Decision, an action or a mapping, not {value!r}")


def match_decisions(pending: Sequence[PendingDecision], decisions: Any) -> dict[str, Decision]:
    """Decisions keyed by tool call id for some or all of ``pending``; keys may be approval ids
    or tool call ids. Raises ``ApprovalError`` for an empty batch and for unknown or repeated
    keys; calls left out stay pending."""
    if not isinstance(decisions, Mapping) or not decisions:
        raise ApprovalError("decisions must be a non-empty mapping of approval id to Decision")
    by_approval = {item.approval_id: item for item in pending}
    by_call = {item.tool_call_id: item for item in pending}
    chosen: dict[str, Decision] = {}
    for key, value in decisions.items():
        item = by_approval.get(key) if isinstance(key, str) else None
        if item is None and isinstance(key, str):
            item = by_call.get(key)
        if item is None:
            raise ApprovalError(f"Unknown approval id: {key!r}")
        if item.tool_call_id in chosen:
            raise ApprovalError(f"More than one decision for tool call {item.tool_call_id!r}")
        chosen[item.tool_call_id] = read_decision(value)
    return chosen


def call_arguments_hash(arguments: Any) -> str:
    """``arguments_hash`` of a call's arguments: SHA-256 hex of their ``_json.fingerprint``,
    which keeps every key (``__proto__`` too) and every digit, so two argument sets that differ
    as JSON never share a hash (the effect key's canonical JSON, which follows the reference's,
    drops ``__proto__`` keys and rounds integers beyond 2**53). Arguments JSON cannot hold (only
    a host-made call has them) hash their ``repr``."""
    try:
        text = _json.fingerprint(arguments)
    except (TypeError, ValueError, RecursionError):
        text = repr(arguments)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class StickyRule:
    """An ``allow_for_run`` or ``reject_for_run`` decision, applied to later calls of a tool."""

    action: Literal["allow_for_run", "reject_for_run"]
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Suspension:
    """What a suspended run needs to continue, in any process: its id, the round's calls (by id;
    the calls are in the transcript), the pending decisions, the sticky rules, the run's grant,
    limits and counters, and its JSON metadata."""

    run_id: str
    call_ids: tuple[str, ...]
    pending: tuple[PendingDecision, ...]
    grant: tuple[str, ...]
    granted_everything: bool
    rounds: int
    turns: int
    limits: Mapping[str, int]
    counts: Mapping[str, int]
    sticky: Mapping[str, StickyRule] = field(default_factory=dict)
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    decided: Mapping[str, Decision] = field(default_factory=dict)
    """Decisions already given for some pending calls, by tool call id; the round runs once
    every pending call has one."""
    scope: Mapping[str, JSONValue] = field(default_factory=dict)
    """The run's own ``tools_disclosure``, ``tools_search`` and ``allow_hidden_tool_calls``,
    those it was given (the others are the agent's): the resumed round is scoped as the run
    was, unless the resume passes its own."""

    @property
    def outstanding(self) -> tuple[PendingDecision, ...]:
        """The pending calls still without a decision."""
        return tuple(item for item in self.pending if item.tool_call_id not in self.decided)

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "run_id": self.run_id,
            "call_ids": list(self.call_ids),
            "pending": [item.to_dict() for item in self.pending],
            "grant": list(self.grant),
            "granted_everything": self.granted_everything,
            "rounds": self.rounds,
            "turns": self.turns,
            "limits": dict(self.limits),
            "counts": dict(self.counts),
            "sticky": {
                name: {"action": rule.action, "reason": rule.reason}
                for name, rule in self.sticky.items()
            },
            "metadata": _json.loads(_json.dumps_lenient(dict(self.metadata))),
            "decided": {call_id: item.to_dict() for call_id, item in self.decided.items()},
            **({"scope": dict(self.scope)} if self.scope else {}),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Suspension:
        """The inverse of ``to_dict``, read exactly as it writes: a session state lives outside
        the process, and coercing it (``"false"`` read as true, ``1.9`` as 1, a negative count)
        would change what the resumed run may do. Anything else is a ``ValueError``."""
        field = StoredFields(data, _SUSPENSION)
        call_ids = _names(field, "call_ids")
        if len(set(call_ids)) != len(call_ids):
            raise ValueError(f"{_SUSPENSION} names a tool call twice in 'call_ids'")
        pending = field.read("pending", "a list of pending decisions", _is_list)
        if not 1 <= len(pending) <= MAX_PENDING_DECISIONS:
            raise ValueError(
                f"{_SUSPENSION} must hold 1 to {MAX_PENDING_DECISIONS} pending decisions"
            )
        try:
            suspension = cls(
                run_id=field.read("run_id", "a non-empty string", is_name),
                call_ids=call_ids,
                pending=tuple(PendingDecision.from_dict(item) for item in pending),
                grant=_names(field, "grant"),
                granted_everything=field.read("granted_everything", "true or false", is_bool),
                rounds=_count(field, "rounds", CEILINGS["max_tool_rounds"]),
                turns=_count(field, "turns", CEILINGS["max_turns"]),
                limits=read_limits(field.read("limits", "an object", is_mapping)),
                counts=_counts(field),
                sticky=_sticky(field),
                metadata=field.read("metadata", "an object", is_object, default={}),
                decided={
                    call_id: read_decision(item)
                    for call_id, item in field.read(
                        "decided", "an object", is_object, default={}
                    ).items()
                },
                scope=_scope(field),
            )
        except (TypeError, ApprovalError) as err:
            # A limit out of range (TypeError from read_limits) or a decision that is not one.
            raise ValueError(f"{_SUSPENSION} is malformed: {err}") from err
        pending_ids = [item.tool_call_id for item in suspension.pending]
        if len(set(pending_ids)) != len(pending_ids) or not set(pending_ids) <= set(call_ids):
            raise ValueError(f"{_SUSPENSION} holds pending decisions for calls not in its round")
        if not suspension.outstanding:
            raise ValueError(f"{_SUSPENSION} has no pending decisions")
        if not set(suspension.decided) <= set(pending_ids):
            raise ValueError(f"{_SUSPENSION} has decisions for calls it does not hold")
        return suspension


_SUSPENSION: Final = "session state 'suspension'"


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _names(field: StoredFields, name: str) -> tuple[str, ...]:
    values = field.read(name, "a list of non-empty strings", _is_list)
    if not all(is_name(item) for item in values):
        raise ValueError(f"{field.what} field {name!r} must be a list of non-empty strings")
    return tuple(values)


def _count(field: StoredFields, name: str, ceiling: int) -> int:
    value: int = field.read(
        name,
        f"an integer from 0 to {ceiling}",
        lambda value: type(value) is int and 0 <= value <= ceiling,
    )
    return value


def _counts(field: StoredFields) -> dict[str, int]:
    counts = field.read("counts", "an object", is_object)
    for name, value in counts.items():
        ceiling = CEILINGS.get(name)
        if ceiling is None:
            raise ValueError(f"{field.what} counts an unknown run limit {name!r}")
        if type(value) is not int or not 0 <= value <= ceiling:
            raise ValueError(
                f"{field.what} count of {name!r} must be an integer from 0 to {ceiling}"
            )
    return dict(counts)


def _sticky(field: StoredFields) -> dict[str, StickyRule]:
    rules: dict[str, StickyRule] = {}
    for name, rule in field.read("sticky", "an object", is_object, default={}).items():
        if (
            not is_name(name)
            or not isinstance(rule, Mapping)
            or set(rule) - {"action", "reason"}
            or rule.get("action") not in ("allow_for_run", "reject_for_run")
        ):
            raise ValueError(
                f"{field.what} sticky rules must map tool names to an 'action' of "
                "allow_for_run or reject_for_run and an optional 'reason'"
            )
        reason = rule.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS):
            raise ValueError(
                f"{field.what} sticky reasons must be strings of at most "
                f"{MAX_REASON_CHARS} characters"
            )
        rules[name] = StickyRule(rule["action"], reason)
    return rules


def _scope(field: StoredFields) -> dict[str, JSONValue]:
    """The run's own scoping options, each checked as ``run`` checks it."""
    scope: dict[str, JSONValue] = dict(field.read("scope", "an object", is_object, default={}))
    unknown = set(scope) - set(SCOPE_OPTIONS)
    if unknown:
        raise ValueError(
            f"{field.what} scope holds unknown options: {', '.join(sorted(map(str, unknown)))}"
        )
    disclosure = scope.get("tools_disclosure")
    if "tools_disclosure" in scope:
        read_disclosure(disclosure)
    search = scope.get("tools_search")
    if "tools_search" in scope and (
        not isinstance(search, Mapping) or read_search_top_k(search) != search.get("top_k")
    ):
        raise ValueError(
            f"{field.what} scope field 'tools_search' must be {{'top_k': <1 to "
            f"{SEARCH_MAX_TOP_K}>}}"
        )
    if "allow_hidden_tool_calls" in scope and not is_bool(scope["allow_hidden_tool_calls"]):
        raise ValueError(
            f"{field.what} scope field 'allow_hidden_tool_calls' must be true or false"
        )
    return scope


__all__ = [
    "APPROVAL_ACTIONS",
    "APPROVAL_REJECTED",
    "MAX_PENDING_DECISIONS",
    "MAX_REASON_CHARS",
    "ApprovalAction",
    "ApprovalError",
    "Decision",
    "DecisionLimitError",
    "PendingDecision",
]
