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
from prism_tools.effects import ToolEffectError, arguments_hash
from prism_tools.errors import PrismError
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
    ``arguments_hash`` (SHA-256 hex of their canonical JSON) identifies them, and the call is in
    the transcript."""

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
    """``arguments_hash`` of a call's arguments; arguments canonical JSON cannot hold (only a
    host-made call has them) hash their ``repr``."""
    try:
        return arguments_hash(arguments)
    except (TypeError, ValueError, ToolEffectError):
        return hashlib.sha256(repr(arguments).encode("utf-8", "surrogatepass")).hexdigest()


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
        }

    @classmethod
    def from_dict(cls, data: Any) -> Suspension:
        if not isinstance(data, Mapping):
            raise ValueError("session state 'suspension' must be an object")
        try:
            sticky: dict[str, StickyRule] = {}
            for name, rule in dict(data.get("sticky") or {}).items():
                if rule["action"] not in ("allow_for_run", "reject_for_run"):
                    raise ValueError(f"unknown sticky action {rule['action']!r}")
                sticky[str(name)] = StickyRule(rule["action"], rule.get("reason"))
            suspension = cls(
                run_id=str(data["run_id"]),
                call_ids=tuple(str(item) for item in data["call_ids"]),
                pending=tuple(PendingDecision.from_dict(item) for item in data["pending"]),
                grant=tuple(str(item) for item in data["grant"]),
                granted_everything=bool(data["granted_everything"]),
                rounds=int(data["rounds"]),
                turns=int(data["turns"]),
                limits={str(k): int(v) for k, v in dict(data["limits"]).items()},
                counts={str(k): int(v) for k, v in dict(data["counts"]).items()},
                sticky=sticky,
                metadata=dict(data.get("metadata") or {}),
                decided={
                    str(call_id): read_decision(item)
                    for call_id, item in dict(data.get("decided") or {}).items()
                },
            )
        except (KeyError, TypeError, ApprovalError) as err:
            raise ValueError(f"session state 'suspension' is malformed: {err}") from err
        if not suspension.outstanding:
            raise ValueError("session state 'suspension' has no pending decisions")
        if not set(suspension.decided) <= {item.tool_call_id for item in suspension.pending}:
            raise ValueError("session state 'suspension' has decisions for calls it does not hold")
        return suspension


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
