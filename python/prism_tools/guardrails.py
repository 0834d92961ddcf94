"""Guardrails: host checks that can allow, block, trip or interrupt at four stages.

Dispatch runs the ``tool_input`` stage on the call after ``tool_call`` middleware and before the
registry is consulted (so guardrails see calls to unknown tools too), and the ``tool_output`` stage
on the raw result before redaction. ``block`` turns into a blocked ``ToolResult``
(``guardrail_blocked``); ``tripwire`` and ``interrupt`` raise ``GuardrailTripwire``. The run-level
stages (``input``, ``output``) belong to the agent runtime.

Evaluation fails closed: a malformed guardrail, a malformed decision or a guardrail that raises
counts as a ``tripwire`` (reasons ``guardrail_invalid``, ``guardrail_invalid_decision``,
``guardrail_failed``). Guardrails are claimed in declaration order by up to ``max_concurrency``
workers; the first non-``allow`` record stops further claims, and one ``guardrail_decision`` event
per kept record is emitted in declaration order.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from prism_tools import _json
from prism_tools.errors import GuardrailTripwire, error_text
from prism_tools.types import JSONValue, items_of

GuardrailStage = Literal["input", "output", "tool_input", "tool_output"]
GuardrailAction = Literal["allow", "block", "tripwire", "interrupt"]

STAGES: frozenset[str] = frozenset(("input", "output", "tool_input", "tool_output"))
ACTIONS: frozenset[str] = frozenset(("allow", "block", "tripwire", "interrupt"))
MAX_NAME_BYTES = 128
MAX_REASON_BYTES = 4096
MAX_METADATA_BYTES = 16_384
MAX_CONCURRENCY = 16
MAX_PACK_MESSAGE_BYTES = 200

TOOL_CALL_BLOCKED = "Tool call blocked by guardrail"
TOOL_RESULT_BLOCKED = "Tool result blocked by guardrail"


@dataclass(frozen=True, slots=True)
class GuardrailDecision:
    action: GuardrailAction
    reason: str | None = None
    metadata: Mapping[str, JSONValue] | None = None


@dataclass(frozen=True, slots=True)
class GuardrailContext:
    """What a guardrail sees. ``value`` is the ``ToolCall`` at ``tool_input`` and the raw
    ``ToolResult`` at ``tool_output``."""

    stage: GuardrailStage
    value: Any
    session_id: str
    run_id: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    metadata: Mapping[str, JSONValue] | None = None
    signal: asyncio.Event | None = None


@dataclass(frozen=True, slots=True)
class GuardrailRecord:
    """The outcome of one guardrail, as it appears on ``guardrail_decision`` events."""

    guardrail: str
    stage: str
    action: GuardrailAction
    reason: str | None = None
    metadata: Mapping[str, JSONValue] | None = None
    pack: str | None = None

    def to_dict(self) -> dict[str, JSONValue]:
        out: dict[str, JSONValue] = {
            "guardrail": self.guardrail,
            "stage": self.stage,
            "action": self.action,
        }
        if self.pack is not None:
            out["pack"] = self.pack
        if self.reason is not None:
            out["reason"] = self.reason
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        return out


class Guardrail(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def stage(self) -> str: ...

    def evaluate(
        self, context: GuardrailContext
    ) -> GuardrailDecision | Awaitable[GuardrailDecision]: ...


@dataclass(frozen=True, slots=True)
class FunctionGuardrail:
    """A guardrail made from a plain function ``fn(context) -> GuardrailDecision``."""

    name: str
    stage: GuardrailStage
    fn: Callable[[GuardrailContext], Any]

    def evaluate(self, context: GuardrailContext) -> Any:
        return self.fn(context)


def guardrail(
    name: str, stage: GuardrailStage, fn: Callable[[GuardrailContext], Any]
) -> FunctionGuardrail:
    """Wrap ``fn(context) -> GuardrailDecision`` (sync or async) as a guardrail."""
    return FunctionGuardrail(name, stage, fn)


@dataclass(frozen=True, slots=True)
class PackRule:
    """One rule of a ``GuardrailRulePack``, named ``<pack>/<rule>`` on records and events."""

    pack: str
    rule: Guardrail

    @property
    def name(self) -> str:
        return f"{self.pack}/{getattr(self.rule, 'name', 'invalid')}"

    @property
    def stage(self) -> str:
        return str(getattr(self.rule, "stage", ""))

    def evaluate(self, context: GuardrailContext) -> Any:
        return self.rule.evaluate(context)


@dataclass(frozen=True, slots=True)
class GuardrailRulePack:
    """A named set of guardrails a host adopts as one (a policy, a compliance profile).

    A block by one of its rules reads ``Blocked by guardrail rule pack:<pack>/<rule>``, plus
    ``: <reason>`` when the rule gave one (redacted, at most 200 bytes), so the model and the
    operator both see which policy refused.
    """

    name: str
    rules: Sequence[Guardrail]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ValueError("GuardrailRulePack.name must be a non-empty string without '/'")
        rules = tuple(self.rules)
        for position, rule in enumerate(rules):
            _check_pack_rule(self.name, position, rule)
        object.__setattr__(self, "rules", rules)

    def for_stage(self, stage: GuardrailStage) -> tuple[PackRule, ...]:
        # Every rule's stage was read and checked when the pack was built.
        return tuple(PackRule(self.name, rule) for rule in self.rules if rule.stage == stage)


def _check_pack_rule(pack: str, position: int, rule: Any) -> None:
    """A pack's rule is picked by its stage: one whose stage is misspelled or missing would
    never run at all, so the pack refuses it where a stage list would record a tripwire."""
    where = f"GuardrailRulePack {pack!r} rule {position}"
    try:
        name, stage = getattr(rule, "name", None), getattr(rule, "stage", None)
        evaluate = getattr(rule, "evaluate", None)
    except Exception as err:
        raise TypeError(f"{where}: its attributes cannot be read ({type(err).__name__})") from None
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_BYTES:
        raise TypeError(f"{where} needs a non-empty name of at most {MAX_NAME_BYTES} characters")
    if not isinstance(stage, str) or stage not in STAGES:
        known = ", ".join(sorted(STAGES))
        raise TypeError(f"{where} ({name!r}) has stage {stage!r}, not one of {known}")
    if not callable(evaluate):
        raise TypeError(f"{where} ({name!r}) has no evaluate method")


@dataclass(frozen=True, slots=True)
class Guardrails:
    """Guardrails per stage, evaluated in declaration order; rule packs after the stage lists."""

    input: Sequence[Guardrail] = ()
    output: Sequence[Guardrail] = ()
    tool_input: Sequence[Guardrail] = ()
    tool_output: Sequence[Guardrail] = ()
    max_concurrency: int | None = None
    packs: Sequence[GuardrailRulePack] = ()

    def __post_init__(self) -> None:
        # Checked when built, so a wrong list fails where it was written, not at some later call.
        # Guardrails are duck-typed (a malformed one fails closed when evaluated); packs are not.
        for stage in ("input", "output", "tool_input", "tool_output"):
            object.__setattr__(
                self, stage, items_of(getattr(self, stage), None, f"Guardrails.{stage}")
            )
        object.__setattr__(
            self, "packs", items_of(self.packs, GuardrailRulePack, "Guardrails.packs")
        )
        if self.max_concurrency is not None:
            _check_concurrency(self.max_concurrency)

    @property
    def concurrency(self) -> int:
        """``max_concurrency``, 1 when unset (a run's unset value keeps the agent's)."""
        return 1 if self.max_concurrency is None else self.max_concurrency

    def for_stage(self, stage: GuardrailStage) -> Sequence[Guardrail]:
        own = tuple(getattr(self, stage))
        if not self.packs:
            return own
        return own + tuple(rule for pack in self.packs for rule in pack.for_stage(stage))


def _check_concurrency(value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_CONCURRENCY:
        raise ValueError(
            f"Guardrail max_concurrency must be an integer from 1 to {MAX_CONCURRENCY}, "
            f"got {value!r}"
        )


def blocked_message(plain: str, record: GuardrailRecord) -> str:
    """The text a block shows: the plain text, or the pack and rule for a rule-pack block."""
    if record.pack is None:
        return plain
    text = f"Blocked by guardrail rule pack:{record.guardrail}"
    if record.reason:
        text = f"{text}: {record.reason}"
    return cut_utf8(text, MAX_PACK_MESSAGE_BYTES)


def cut_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, at a character boundary."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


Scrub = Callable[[Any], Any]


def _bounded_metadata(metadata: Any, scrub: Scrub) -> Mapping[str, JSONValue] | None:
    if not isinstance(metadata, Mapping):
        return None
    try:
        blob = _json.dumps(scrub(dict(metadata)))
    except Exception:
        return {"invalid": True}
    if len(blob) > MAX_METADATA_BYTES:
        return {"truncated": True}
    plain = _json.loads(blob)
    return plain if isinstance(plain, dict) else {"invalid": True}


def _record(
    name: str,
    stage: str,
    action: GuardrailAction,
    reason: Any,
    metadata: Any,
    scrub: Scrub,
    pack: str | None = None,
) -> GuardrailRecord:
    bounded_reason = cut_utf8(scrub(reason), MAX_REASON_BYTES) if isinstance(reason, str) else None
    return GuardrailRecord(
        guardrail=cut_utf8(name, MAX_NAME_BYTES),
        stage=stage,
        action=action,
        reason=bounded_reason,
        metadata=_bounded_metadata(metadata, scrub),
        pack=pack,
    )


async def _evaluate_one(
    guard: Any, stage: str, context: GuardrailContext, scrub: Scrub
) -> GuardrailRecord:
    try:
        name = getattr(guard, "name", None)
        evaluate = getattr(guard, "evaluate", None)
        of_stage = getattr(guard, "stage", None) == stage
    except Exception:  # attributes are the host's code: one that raises fails closed
        name, evaluate, of_stage = None, None, False
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_NAME_BYTES
        or not of_stage
        or not callable(evaluate)
    ):
        label = str.__str__(name) if isinstance(name, str) and name else "invalid"
        return _record(label, stage, "tripwire", "guardrail_invalid", None, scrub)
    name = str.__str__(name)
    try:
        decision = evaluate(context)
        if inspect.isawaitable(decision):
            decision = await decision
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise  # this evaluation is being cancelled: the caller's cancellation goes on
        # The guard awaited something that was cancelled elsewhere (a shared request): that is
        # the guard failing, and it fails closed like any other failure.
        return _record(name, stage, "tripwire", "guardrail_failed", {"error": "cancelled"}, scrub)
    except Exception as err:
        message = cut_utf8(scrub(error_text(err)), MAX_REASON_BYTES)
        return _record(name, stage, "tripwire", "guardrail_failed", {"error": message}, scrub)
    try:
        # Read once, inside the fail-closed net: a decision's attributes are the host's code.
        action = getattr(decision, "action", None)
        if isinstance(action, str):
            # Its characters as a plain str (a str enum gives its value): a subclass cannot
            # hash or compare as another action.
            action = str.__str__(action)
        reason = getattr(decision, "reason", None)
        if isinstance(reason, str):
            reason = str.__str__(reason)  # plain text: a subclass's own encode is not called
        metadata = getattr(decision, "metadata", None)
        well_formed = (
            isinstance(action, str)
            and action in ACTIONS
            and (isinstance(decision, GuardrailDecision) or hasattr(decision, "reason"))
        )
    except Exception:
        well_formed = False
    if not well_formed:
        return _record(name, stage, "tripwire", "guardrail_invalid_decision", None, scrub)
    return _record(
        name,
        stage,
        action,  # type: ignore[arg-type]
        reason,
        metadata,
        scrub,
        pack=guard.pack if isinstance(guard, PackRule) else None,
    )


async def evaluate_guardrails(
    stage: GuardrailStage,
    guards: Sequence[Any],
    context: GuardrailContext,
    *,
    max_concurrency: int = 1,
    scrub: Scrub = lambda value: value,
) -> tuple[list[GuardrailRecord], GuardrailRecord | None]:
    """Evaluate one stage; returns the kept records (declaration order) and the terminal one."""
    if not guards:
        return [], None
    _check_concurrency(max_concurrency)
    results: dict[int, GuardrailRecord] = {}
    if max_concurrency == 1:
        for index, guard in enumerate(guards):
            record = await _evaluate_one(guard, stage, context, scrub)
            results[index] = record
            if record.action != "allow":
                break
    else:
        queue = iter(enumerate(guards))
        stopped = False

        async def worker() -> None:
            nonlocal stopped
            while not stopped:
                claimed = next(queue, None)
                if claimed is None:
                    return
                index, guard = claimed
                record = await _evaluate_one(guard, stage, context, scrub)
                if stopped:
                    return  # a record produced after the stop is discarded
                results[index] = record
                if record.action != "allow":
                    stopped = True

        async with asyncio.TaskGroup() as group:
            for _ in range(min(max_concurrency, len(guards))):
                group.create_task(worker())
    kept = [results[index] for index in sorted(results)]
    terminal = next((record for record in kept if record.action != "allow"), None)
    return kept, terminal


def tripwire_error(record: GuardrailRecord) -> GuardrailTripwire:
    """The exception a ``tripwire`` or ``interrupt`` outside a durable input stage raises."""
    if record.action == "interrupt":
        return GuardrailTripwire(
            f'Guardrail interruption is unavailable at stage "{record.stage}"; '
            "interrupt suspends only at the input stage of durable runs",
            record=record,
            code="ERR_PRISM_GUARDRAIL_INTERRUPT_UNAVAILABLE",
        )
    return GuardrailTripwire(blocked_message("Guardrail blocked run", record), record=record)
