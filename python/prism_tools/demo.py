"""A scripted tour of ``dispatch_tool_call`` over the example catalog.

One host configuration (a filter, a permission policy, a validator, a pre-execution hook, a
guardrail, secrets, an event sink and a ledger) is applied to every call; each scripted call is
chosen to end in a different outcome: success with progress, each of the seven blocked
reasons, a corrected retry, a failing tool whose error quotes a secret, and a concurrent batch
in which an exclusive tool waits to run alone. ``run_demo`` returns everything as data;
``format_report`` and ``report_json`` render it for people and for machines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from prism_tools import ToolFilter, __version__, _json
from prism_tools.dispatch import dispatch_tool_call
from prism_tools.examples import (
    EXCLUSIVE_TOOL,
    PROGRESS_TOOL,
    SECRET_ERROR_TOOL,
    create_example_registry,
    example_domains,
)
from prism_tools.guardrails import GuardrailContext, GuardrailDecision, Guardrails, guardrail
from prism_tools.ledger import InMemoryRunLedger
from prism_tools.policies import create_static_permission_policy
from prism_tools.redaction import create_secret_redactor
from prism_tools.registry import ToolRegistry
from prism_tools.types import (
    AgentEvent,
    JSONValue,
    ToolCall,
    ToolCallRecord,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)
from prism_tools.validation import create_json_schema_tool_argument_validator

SESSION_ID = "demo-session"
RUN_ID = "demo-run"

DEMO_SECRET = "prism-demo-key-4d1f9a7c2b"
"""A stand-in for a leaked credential. It is passed to dispatch as a secret, so no result,
event or ledger row may carry it; the demo output never shows it either."""

DENIED_TOOL = "create_payout"
PERMISSION_DENIED_TOOL = "send_email"
FROZEN_SERVICE_ENVIRONMENT = "production"
LEGAL_HOLD_PREFIX = "/legal/hold/"


Dispatch = Callable[[ToolCall], Awaitable[ToolResult]]
"""Dispatch one call with the demo's host configuration."""


class ChangeFreezeError(Exception):
    """Raised by the demo's ``before_execute`` hook during a change freeze."""

    code = "change_freeze"


# --------------------------------------------------------------------------------------------
# The host's checks
# --------------------------------------------------------------------------------------------


def change_freeze(call: ToolCall, tool: ToolDefinition, context: ToolExecutionContext) -> None:
    """A ``before_execute`` hook: production deploys are frozen."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    if tool.name == "deploy_service" and arguments.get("environment") == FROZEN_SERVICE_ENVIRONMENT:
        raise ChangeFreezeError(
            "Change freeze: production deploys are paused until 2025-03-10. "
            "Deploy to staging, or ask the release manager for an exception."
        )


def protect_legal_hold(context: GuardrailContext) -> GuardrailDecision:
    """A ``tool_input`` guardrail: files under legal hold cannot be deleted or moved."""
    call = context.value
    arguments = call.arguments if isinstance(call, ToolCall) else None
    path = arguments.get("path") if isinstance(arguments, dict) else None
    if (
        isinstance(call, ToolCall)
        and call.name in ("delete_file", "move_file", "rename_file")
        and isinstance(path, str)
        and path.startswith(LEGAL_HOLD_PREFIX)
    ):
        return GuardrailDecision(
            "block", reason=f"{path} is under legal hold; it cannot be deleted, moved or renamed."
        )
    return GuardrailDecision("allow")


# --------------------------------------------------------------------------------------------
# The script
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scripted call. ``expect`` is ``"ok"``, ``"error"`` or a blocked reason; scenarios
    that share a ``batch`` name are dispatched together with ``asyncio.gather``."""

    title: str
    call: ToolCall
    expect: str
    batch: str | None = None


def scenarios() -> list[Scenario]:
    """The scripted calls, in order."""
    calls: list[tuple[str, str, JSONValue, str, str | None]] = [
        ("Success, with progress reports", PROGRESS_TOOL,
         {"collection": "help-center", "batches": 4}, "ok", None),
        ("Unknown tool (a typo in the name)", "get_wether", {"city": "Lisbon"},
         "unknown_tool", None),
        (f"Tool denied by the host's filter (deny {DENIED_TOOL})", DENIED_TOOL,
         {"amount": 1200, "currency": "EUR"}, "tool_denied", None),
        ("Invalid arguments: the model's JSON did not parse", "get_current_weather",
         '{"city": "Lisbon"', "invalid_arguments", None),
        ("Invalid arguments: a JSON array instead of an object", "get_current_weather",
         ["Lisbon", "metric"], "invalid_arguments", None),
        (f"Permission denied (tool:{PERMISSION_DENIED_TOOL}:execute)", PERMISSION_DENIED_TOOL,
         {"to": ["lena.meyer@example.com"], "subject": "Q1 numbers", "body": "Attached."},
         "permission_denied", None),
        ("Validation failed: a required argument is missing", "get_weather_forecast",
         {"city": "Lisbon"}, "validation_failed", None),
        ("The same call, corrected with the missing argument", "get_weather_forecast",
         {"city": "Lisbon", "days": 3}, "ok", None),
        ("Execution denied by before_execute (change freeze)", "deploy_service",
         {"service": "checkout", "version": "v2.14.1", "environment": "production"},
         "execution_denied", None),
        ("Blocked by a tool_input guardrail (legal hold)", "delete_file",
         {"path": "/legal/hold/contract-2019.pdf"}, "guardrail_blocked", None),
        ("A failing tool whose error quotes a secret", SECRET_ERROR_TOOL,
         {"partner": "Harbor Supply Co", "api_key": DEMO_SECRET}, "error", None),
        ("Concurrent: weather in Lisbon", "get_current_weather", {"city": "Lisbon"}, "ok",
         "batch"),
        ("Concurrent: weather in Tokyo", "get_current_weather", {"city": "Tokyo"}, "ok",
         "batch"),
        ("Concurrent: currency conversion", "convert_currency",
         {"amount": 250, "from_currency": "EUR", "to_currency": "JPY"}, "ok", "batch"),
        ("Concurrent: exclusive migration (waits, then runs alone)", EXCLUSIVE_TOOL,
         {"database": "orders", "target_version": 42}, "ok", "batch"),
        ("Concurrent: distance Lisbon to Berlin", "calculate_distance",
         {"origin": "Lisbon", "destination": "Berlin"}, "ok", "batch"),
        ("Concurrent: stock quote", "get_stock_quote", {"symbol": "ACME"}, "ok", "batch"),
    ]  # fmt: skip
    out: list[Scenario] = []
    for index, (title, name, arguments, expect, batch) in enumerate(calls, start=1):
        call_id = f"call_{index:02d}"
        # Argument text (a string) goes to dispatch as the provider handed it over: the core
        # parses it, and text that is not one JSON object blocks the call.
        out.append(Scenario(title, ToolCall(call_id, name, arguments), expect, batch))
    return out


# --------------------------------------------------------------------------------------------
# Running it
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What one scripted call came to. ``arguments`` are already scrubbed of the secret."""

    number: int
    title: str
    call_id: str
    tool: str
    arguments: JSONValue
    expect: str
    outcome: str
    reason: str | None
    result: ToolResult
    batch: str | None = None

    @property
    def as_expected(self) -> bool:
        """True when the call ended as the script says it should."""
        actual = self.reason if self.outcome == "blocked" else self.outcome
        return actual == self.expect


@dataclass(slots=True)
class DemoReport:
    """Everything the demo produced: the steps, every event and every ledger row."""

    version: str
    tool_count: int
    domain_count: int
    steps: list[StepOutcome] = field(default_factory=list)
    events: list[AgentEvent] = field(default_factory=list)
    rows: list[ToolCallRecord] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every step ended as scripted."""
        return all(step.as_expected for step in self.steps)


def event_call_id(event: AgentEvent) -> str | None:
    """The tool call an event belongs to, wherever that event type keeps it."""
    if event.tool_call_id is not None:
        return event.tool_call_id
    if event.call is not None:
        return event.call.id
    if event.result is not None:
        return event.result.tool_call_id
    return None


def event_tool(event: AgentEvent) -> str | None:
    """The tool name of an event, wherever that event type keeps it."""
    for candidate in (
        event.name,
        event.tool_name,
        None if event.call is None else event.call.name,
        None if event.result is None else event.result.name,
    ):
        if isinstance(candidate, str):
            return candidate
    return None


def _outcome(result: ToolResult, events: Sequence[AgentEvent]) -> tuple[str, str | None]:
    # The result carries the error text; the reason a call was blocked lives on its event.
    if result.error is None:
        return "ok", None
    for event in events:
        if event.type == "tool_execution_blocked" and event_call_id(event) == result.tool_call_id:
            return "blocked", event.reason
    return "error", None


async def run_demo(registry: ToolRegistry | None = None) -> DemoReport:
    """Dispatch the scripted calls and collect results, events and ledger rows."""
    registry = registry if registry is not None else create_example_registry()
    events: list[AgentEvent] = []
    ledger = InMemoryRunLedger()
    tool_filter = ToolFilter(deny=[DENIED_TOOL])
    permission = create_static_permission_policy(deny=[f"tool:{PERMISSION_DENIED_TOOL}:execute"])
    guardrails = Guardrails(
        tool_input=[guardrail("protect_legal_hold", "tool_input", protect_legal_hold)]
    )
    secrets = [DEMO_SECRET]

    async def emit(event: AgentEvent) -> None:
        events.append(event)
        # Yield like a real sink writing to a queue or socket would, so that the events of
        # concurrent calls interleave (each call's own events stay in order).
        await asyncio.sleep(0)

    # Every tool's arguments are checked against its JSON Schema in the Rust core; a tool without
    # a schema would be refused.
    validate_arguments = create_json_schema_tool_argument_validator(missing_schema="reject")

    async def dispatch(call: ToolCall) -> ToolResult:
        context = ToolExecutionContext(session_id=SESSION_ID, run_id=RUN_ID, tool_call_id=call.id)
        return await dispatch_tool_call(
            call,
            registry=registry,
            context=context,
            filter=tool_filter,
            validate=validate_arguments,
            before_execute=change_freeze,
            emit=emit,
            secrets=secrets,
            ledger=ledger,
            guardrails=guardrails,
            permission=permission,
        )

    script = scenarios()
    results: dict[str, ToolResult] = {}
    index = 0
    while index < len(script):
        batch = script[index].batch
        if batch is None:
            results[script[index].call.id] = await dispatch(script[index].call)
            index += 1
            continue
        members = []
        while index < len(script) and script[index].batch == batch:
            members.append(script[index])
            index += 1
        results.update(await _run_batch(registry, [member.call for member in members], dispatch))

    scrub = create_secret_redactor(secrets)
    report = DemoReport(
        version=__version__,
        tool_count=len(registry),
        domain_count=len(example_domains()),
        events=events,
        rows=ledger.records,
    )
    for number, scenario in enumerate(script, start=1):
        result = results[scenario.call.id]
        outcome, reason = _outcome(result, events)
        report.steps.append(
            StepOutcome(
                number=number,
                title=scenario.title,
                call_id=scenario.call.id,
                tool=scenario.call.name,
                arguments=scrub.redact(scenario.call.arguments),
                expect=scenario.expect,
                outcome=outcome,
                reason=reason,
                result=result,
                batch=scenario.batch,
            )
        )
    return report


async def _run_batch(
    registry: ToolRegistry,
    calls: Sequence[ToolCall],
    dispatch: Dispatch,
) -> dict[str, ToolResult]:
    # Non-exclusive calls run together; each exclusive tool then runs on its own, which is the
    # contract ``ToolDefinition.exclusive`` asks of a scheduler.
    def is_exclusive(call: ToolCall) -> bool:
        tool = registry.get(call.name)
        return tool is not None and tool.exclusive

    shared = [call for call in calls if not is_exclusive(call)]
    alone = [call for call in calls if is_exclusive(call)]
    gathered = await asyncio.gather(*(dispatch(call) for call in shared))
    results = {call.id: result for call, result in zip(shared, gathered, strict=True)}
    for call in alone:
        results[call.id] = await dispatch(call)
    return results


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _compact(value: JSONValue, limit: int = 110) -> str:
    text = _json.dumps_lenient(value).decode("utf-8")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _event_detail(event: AgentEvent) -> str:
    metadata = event.metadata or {}
    if event.type == "tool_execution_blocked":
        return str(event.reason)
    if event.type == "tool_execution_progress":
        return f"progress {event.progress} {_compact(dict(metadata), 60)}"
    if event.type == "guardrail_decision" and event.record is not None:
        record = event.record
        detail = f"{record.action} by {record.guardrail}"
        return f"{detail}: {record.reason}" if record.reason else detail
    if event.type == "extension_error" and event.error is not None:
        return event.error.message
    status = metadata.get("status")
    return "" if status is None else str(status)


def _duration(event: AgentEvent) -> str:
    duration = (event.metadata or {}).get("duration_ms")
    return "" if duration is None else f"{duration} ms"


def _heading(title: str) -> list[str]:
    return ["", title, "-" * len(title)]


def format_report(report: DemoReport) -> str:
    """The report as readable text: the steps, then one line per event, then the ledger."""
    lines = [
        f"prism-tools {report.version} demo: {report.tool_count} example tools in "
        f"{report.domain_count} domains",
        *_heading(f"Calls ({len(report.steps)})"),
    ]
    batch_open = False
    for step in report.steps:
        if step.batch and not batch_open:
            lines.append(
                "  -- dispatched together with asyncio.gather; exclusive tools wait and run "
                "alone; results in call order --"
            )
            batch_open = True
        lines.append(f"{step.number:>3}. {step.title}")
        lines.append(f"     call    {step.call_id} {step.tool} {_compact(step.arguments)}")
        if step.outcome == "ok":
            lines.append(f"     ok      {_compact(step.result.value)}")
        else:
            error = step.result.error
            message = "" if error is None else error.message
            label = f"blocked ({step.reason})" if step.outcome == "blocked" else "error"
            lines.append(f"     {label}: {message}")
        if not step.as_expected:
            lines.append(f"     !! expected {step.expect}")
    lines += _heading(f"Events ({len(report.events)}): call, type, tool, reason or status, time")
    for event in report.events:
        lines.append(
            f"  {event_call_id(event) or '-':<8} {event.type:<24} {event_tool(event) or '-':<26} "
            f"{_event_detail(event):<20} {_duration(event)}".rstrip()
        )
    lines += _heading(f"Ledger rows ({len(report.rows)}): call, status, tool, reason")
    for row in report.rows:
        extra = row.reason or ("" if row.progress is None else f"progress {row.progress}")
        lines.append(f"  {row.tool_call_id:<8} {row.status:<9} {row.name:<26} {extra}".rstrip())
    summary = (
        f"All {len(report.steps)} calls ended as scripted."
        if report.ok
        else "Some calls did not end as scripted (marked !! above)."
    )
    lines += ["", summary]
    return "\n".join(lines) + "\n"


def report_data(report: DemoReport) -> dict[str, JSONValue]:
    """The report as plain JSON-ready data."""
    return {
        "version": report.version,
        "tools": report.tool_count,
        "domains": report.domain_count,
        "ok": report.ok,
        "steps": [
            {
                "step": step.number,
                "title": step.title,
                "call_id": step.call_id,
                "tool": step.tool,
                "arguments": step.arguments,
                "expect": step.expect,
                "outcome": step.outcome,
                "reason": step.reason,
                "result": step.result.to_dict(),
            }
            for step in report.steps
        ],
        "events": [event.to_dict() for event in report.events],
        "rows": [row.to_dict() for row in report.rows],
    }


def report_json(report: DemoReport) -> str:
    """The report as one JSON object on one line."""
    return _json.dumps(report_data(report)).decode("utf-8")
