"""The built-in example catalog: names, schemas, and that every tool runs through dispatch."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from prism_tools import (
    AgentEvent,
    InMemoryRunLedger,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolRegistry,
    _json,
    dispatch_tool_call,
)
from prism_tools.examples import (
    EXCLUSIVE_TOOL,
    PROGRESS_TOOL,
    SECRET_ERROR_TOOL,
    create_example_registry,
    example_domains,
    example_tools,
)
from prism_tools.types import TOOL_KINDS

TOOLS = example_tools()
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")
FORMAT_SAMPLES = {
    "date": "2025-03-14",
    "date-time": "2025-03-14T09:30:00Z",
    "email": "ana.ribeiro@example.com",
}


def sample(schema: Mapping[str, Any]) -> Any:
    """A value that satisfies ``schema``, preferring its own examples and defaults."""
    if schema.get("examples"):
        return schema["examples"][0]
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    if "oneOf" in schema:
        return sample(schema["oneOf"][0])
    kind = schema["type"]
    if kind == "object":
        return {name: sample(schema["properties"][name]) for name in schema.get("required", [])}
    if kind == "array":
        return [sample(schema["items"]) for _ in range(max(1, schema.get("minItems", 1)))]
    if kind == "string":
        text = FORMAT_SAMPLES.get(schema.get("format", ""), "example")
        return text.ljust(schema.get("minLength", 0), "x")
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1)
        return max(low, min(1, schema.get("maximum", 1)))
    if kind == "boolean":
        return True
    raise AssertionError(f"no sample for schema {schema}")


def required_arguments(tool: ToolDefinition) -> dict[str, Any]:
    """Arguments built from the tool schema's required properties only."""
    assert tool.parameters is not None
    arguments = sample(tool.parameters)
    assert isinstance(arguments, dict)
    return arguments


def context_for(call_id: str) -> ToolExecutionContext:
    return ToolExecutionContext(session_id="catalog-test", run_id="run", tool_call_id=call_id)


def by_name(name: str) -> ToolDefinition:
    return next(tool for tool in TOOLS if tool.name == name)


def test_catalog_has_a_few_hundred_uniquely_named_tools() -> None:
    names = [tool.name for tool in TOOLS]
    assert 250 <= len(names) <= 400
    assert len(set(names)) == len(names)
    assert [name for name in names if not SNAKE_CASE.fullmatch(name)] == []


def test_catalog_spans_many_domains() -> None:
    domains = example_domains()
    assert len(domains) >= 12
    for expected in ("weather", "calendar", "email", "files", "crm", "payments", "devops",
                     "search", "maps", "travel", "hr", "finance"):  # fmt: skip
        assert expected in domains
        assert example_tools(expected), expected
    assert sum(len(example_tools(domain)) for domain in domains) == len(TOOLS)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_tool_is_described_and_its_schema_is_valid(tool: ToolDefinition) -> None:
    assert tool.description.strip()
    assert tool.execute is not None
    assert tool.kind in TOOL_KINDS
    schema = tool.parameters
    assert schema is not None
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{tool.name}.{name} has no description"
        assert "type" in prop or "oneOf" in prop, f"{tool.name}.{name} has no type"


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
async def test_tool_runs_through_dispatch_with_its_required_arguments(
    tool: ToolDefinition,
) -> None:
    arguments = required_arguments(tool)
    validator = Draft202012Validator(
        dict(tool.parameters or {}), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    assert [error.message for error in validator.iter_errors(arguments)] == []

    registry = ToolRegistry([tool])
    call = ToolCall(id="call_1", name=tool.name, arguments=arguments)
    result = await dispatch_tool_call(call, registry=registry, context=context_for(call.id))

    assert result.error is None, result.error
    assert result.value is not None
    _json.dumps(result.value)  # plain JSON data, nothing opaque
    again = await dispatch_tool_call(call, registry=registry, context=context_for(call.id))
    assert again.value == result.value  # deterministic


def test_registry_holds_every_tool_in_catalog_order() -> None:
    registry = create_example_registry()
    assert registry.names() == [tool.name for tool in TOOLS]
    assert create_example_registry() is not registry


def test_fake_data_depends_on_the_arguments() -> None:
    weather = by_name("get_current_weather")
    assert weather.execute is not None
    lisbon = weather.execute({"city": "Lisbon", "units": "metric"}, context_for("a"))
    tokyo = weather.execute({"city": "Tokyo", "units": "metric"}, context_for("b"))
    assert lisbon["city"] == "Lisbon"
    assert tokyo["city"] == "Tokyo"
    assert lisbon != tokyo


def test_computing_tools_give_exact_answers() -> None:
    def run(name: str, **arguments: Any) -> Any:
        tool = by_name(name)
        assert tool.execute is not None
        return tool.execute(arguments, context_for("x"))

    assert run("convert_temperature", value=100, from_unit="celsius", to_unit="fahrenheit") == {
        "value": 212.0,
        "unit": "fahrenheit",
    }
    loan = run("calculate_loan_payment", principal=1200, annual_rate_percent=0, term_months=12)
    assert loan["monthly_payment"] == 100.0
    assert run("convert_roman_numeral", value=1990)["roman"] == "MCMXC"
    assert run("convert_roman_numeral", value="MCMXC")["number"] == 1990
    assert run("evaluate_arithmetic", expression="2 ** 10 - 24")["value"] == 1000
    assert run("days_between_dates", start_date="2025-03-03", end_date="2025-03-10") == {
        "days": 7,
        "weeks": 1.0,
        "business_days": 5,
    }
    assert run("validate_card_number", number="4242 4242 4242 4242")["valid"] is True
    assert run("validate_card_number", number="4242 4242 4242 4241")["valid"] is False


def test_arithmetic_tool_refuses_anything_but_arithmetic() -> None:
    tool = by_name("evaluate_arithmetic")
    assert tool.execute is not None
    with pytest.raises(ValueError, match="unsupported"):
        tool.execute({"expression": "__import__('os').getcwd()"}, context_for("x"))


async def test_progress_tool_reports_progress_events_in_order() -> None:
    events: list[AgentEvent] = []
    call = ToolCall("call_p", PROGRESS_TOOL, {"collection": "docs", "batches": 3})
    result = await dispatch_tool_call(
        call,
        registry=create_example_registry(),
        context=context_for(call.id),
        emit=events.append,
    )
    assert result.ok
    assert [event.type for event in events] == [
        "tool_execution_started",
        *["tool_execution_progress"] * 3,
        "tool_execution_finished",
    ]
    assert [event.progress for event in events[1:4]] == [0.3333, 0.6667, 1.0]


async def test_progress_tool_accepts_a_plain_function_as_progress_sink() -> None:
    seen: list[Any] = []
    call = ToolCall("call_p", PROGRESS_TOOL, {"collection": "docs", "batches": 2})
    context = ToolExecutionContext(
        session_id="s", run_id="r", tool_call_id=call.id, progress=lambda v, m: seen.append(v)
    )
    result = await dispatch_tool_call(call, registry=create_example_registry(), context=context)
    assert result.ok
    assert seen == [0.5, 1.0]


async def test_secret_error_tool_quotes_its_key_unless_dispatch_scrubs_it() -> None:
    key = "leaky-key-0123456789"
    call = ToolCall("call_s", SECRET_ERROR_TOOL, {"partner": "Acme", "api_key": key})
    registry = create_example_registry()

    raw = await dispatch_tool_call(call, registry=registry, context=context_for(call.id))
    assert raw.error is not None
    assert key in raw.error.message

    ledger = InMemoryRunLedger()
    events: list[AgentEvent] = []
    scrubbed = await dispatch_tool_call(
        call,
        registry=registry,
        context=context_for(call.id),
        secrets=[key],
        emit=events.append,
        ledger=ledger,
    )
    assert scrubbed.error is not None
    assert "[REDACTED]" in scrubbed.error.message
    assert key not in repr(scrubbed)
    assert key not in repr(events)
    assert key not in repr(ledger.records)


def test_exclusive_tools_are_marked() -> None:
    exclusive = [tool.name for tool in TOOLS if tool.exclusive]
    assert EXCLUSIVE_TOOL in exclusive
    assert 1 <= len(exclusive) <= 5
