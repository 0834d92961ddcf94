"""The built-in example catalog: names, schemas, and that every tool runs through dispatch."""

from __future__ import annotations

import asyncio
import copy
import inspect
import math
import re
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
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
from prism_tools.validation import (
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
)

TOOLS = example_tools()
# Examples per tool in the schema-driven property test: a few hundred tools share the budget of
# about 20 seconds on a small machine, and the edge sweep covers the boundaries every run.
PROPERTY_EXAMPLES = 12
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


# --------------------------------------------------------------------------------------------
# Arguments a schema accepts never make a tool raise anything but ValueError, and never give a
# result JSON cannot hold (NaN and the infinities, which JSON writers turn into null, integers
# beyond 64 bits, keys that are not strings).
# --------------------------------------------------------------------------------------------

ADAPTER = create_json_schema_adapter()
VALIDATOR = create_json_schema_tool_argument_validator()
HUGE = 1.7976931348623157e308
FAR_DATES = ("0001-01-01", "1899-12-31", "2101-01-01", "9999-12-31")


def non_finite(value: Any) -> bool:
    """Whether ``value`` holds a NaN or an infinity anywhere inside."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(non_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(non_finite(item) for item in value)
    return False


def call_tool(tool: ToolDefinition, arguments: Mapping[str, Any]) -> Any:
    """``tool.execute`` on a copy of ``arguments``, awaited when it is async."""
    assert tool.execute is not None
    result = tool.execute(copy.deepcopy(dict(arguments)), context_for("direct"))
    if inspect.isawaitable(result):

        async def finish() -> Any:
            return await result

        result = asyncio.run(finish())
    return result


def assert_clean_outcome(tool: ToolDefinition, arguments: Mapping[str, Any]) -> Any:
    """Run ``tool``: a ``ValueError`` with a short message (returned), or a result that JSON
    holds exactly (returned); anything else fails the test with the exception raised."""
    try:
        value = call_tool(tool, arguments)
    except ValueError as err:
        message = str(err)
        assert message, f"{tool.name} raised a ValueError without a message"
        assert len(message) <= 300, f"{tool.name}: long error message {message[:80]!r}..."
        return err
    except PermissionError:
        if tool.name == SECRET_ERROR_TOOL:  # refuses keys that are not live, by design
            return None
        raise
    assert not non_finite(value), f"{tool.name} returned a non-finite number: {value!r:.300}"
    _json.dumps(value)  # 64-bit integers and string keys only, or this raises
    return value


async def dispatch_validated(name: str, arguments: Mapping[str, Any]) -> Any:
    """Dispatch through the harness with the JSON Schema argument validator."""
    call = ToolCall(id="call_v", name=name, arguments=dict(arguments))
    return await dispatch_tool_call(
        call, registry=create_example_registry(), context=context_for(call.id), validate=VALIDATOR
    )


REPORTED_CASES: list[tuple[str, dict[str, Any]]] = [
    ("evaluate_arithmetic", {"expression": "(-1)**0.5"}),
    ("evaluate_arithmetic", {"expression": "10**400"}),
    ("evaluate_arithmetic", {"expression": "round(1e400)"}),
    ("evaluate_arithmetic", {"expression": "max()"}),
    ("evaluate_arithmetic", {"expression": "min(1)"}),
    ("evaluate_arithmetic", {"expression": "round(2.5, 400)"}),
    ("evaluate_arithmetic", {"expression": "1e308*10"}),
    ("evaluate_arithmetic", {"expression": "1e999-1e999"}),
    ("evaluate_arithmetic", {"expression": "9" * 400}),
    ("evaluate_arithmetic", {"expression": "1e20"}),
    ("evaluate_arithmetic", {"expression": "sqrt(-1)"}),
    ("get_weather_forecast", {"city": "Lisbon", "days": 3, "start_date": "9999-12-31"}),
    ("list_calendar_events", {"start_date": "9999-12-31", "end_date": "2025-03-14"}),
    ("add_business_days", {"start_date": "9999-12-31", "days": 10}),
    ("add_business_days", {"start_date": "0001-01-01", "days": -10}),
    ("days_between_dates", {"start_date": "9999-12-31", "end_date": "2025-04-01"}),
    (
        "convert_local_time",
        {"from_city": "Lisbon", "to_city": "Tokyo", "local_time": "9999-12-31T23:59:59Z"},
    ),
    (
        "book_doctor_appointment",
        {
            "specialty": "general_practice",
            "preferred_date": "9999-12-31T23:59:59Z",
            "reason": "Annual check-up",
        },
    ),
    (
        "request_time_off",
        {
            "employee": "lena.meyer@example.com",
            "leave_type": "vacation",
            "start_date": "2025-04-14",
            "end_date": "9999-12-31",
        },
    ),
    (
        "calculate_loan_payment",
        {"principal": 250000, "annual_rate_percent": 1e-300, "term_months": 360},
    ),
    ("calculate_loan_payment", {"principal": HUGE, "annual_rate_percent": 4.5, "term_months": 360}),
    (
        "get_amortization_schedule",
        {"principal": 20000, "annual_rate_percent": 1e-300, "term_months": 48},
    ),
    ("calculate_roi", {"cost": 1000, "final_value": 1450, "years": 1e-300}),
    ("calculate_roi", {"cost": 5e-324, "final_value": 1450}),
    ("split_bill", {"total": HUGE, "people": 3}),
    ("parse_csv_text", {"csv": "name,qty\nbolts,12,extra\n"}),
    ("parse_csv_text", {"csv": "name,qty\nbolts,12\nnuts,30\n", "delimiter": "0"}),
    # A lone carriage return inside a field, and a field past csv's size limit: csv.Error.
    ("parse_csv_text", {"csv": "a\rb\n1", "delimiter": "\t"}),
    ("parse_csv_text", {"csv": "a\n" + "x" * 200_000}),
    ("convert_currency", {"amount": HUGE, "from_currency": "EUR", "to_currency": "JPY"}),
    ("calculate_order_total", {"items": [{"unit_price": HUGE, "quantity": 2}]}),
    ("calculate_processing_fee", {"amount": HUGE, "method": "card"}),
    ("calculate_compound_interest", {"principal": HUGE, "annual_rate_percent": 5, "years": 10}),
    (
        "calculate_break_even",
        {"fixed_costs": 1e300, "unit_price": 25, "variable_cost_per_unit": 10},
    ),
    (
        "calculate_break_even",
        {"fixed_costs": 1e12, "unit_price": 10.000001, "variable_cost_per_unit": 10},
    ),
    ("calculate_error_budget", {"slo_percent": 99.9, "window_days": 30, "downtime_minutes": HUGE}),
    ("compute_summary_statistics", {"values": [3.5, HUGE]}),
    (
        "calculate_prorated_salary",
        {"annual_salary": HUGE, "start_date": "2025-03-17", "end_date": "2025-06-30"},
    ),
    ("calculate_overtime_pay", {"hours_worked": 46, "hourly_rate": HUGE}),
    ("calculate_running_pace", {"distance_km": HUGE, "duration_seconds": 3000}),
    ("calculate_running_pace", {"distance_km": 5e-324, "duration_seconds": 3000}),
    ("estimate_water_intake", {"weight_kg": 1e300}),
    (
        "scale_recipe",
        {
            "original_servings": 5e-324,
            "target_servings": 6,
            "ingredients": [{"name": "flour", "quantity": 250, "unit": "g"}],
        },
    ),
    ("convert_units", {"value": HUGE, "from_unit": "mm", "to_unit": "mm"}),
    ("convert_temperature", {"value": HUGE, "from_unit": "celsius", "to_unit": "fahrenheit"}),
    ("calculate_percent_change", {"old_value": 5e-324, "new_value": 92}),
    ("calculate_gcd_lcm", {"numbers": [1e300]}),
    ("calculate_gcd_lcm", {"numbers": [999_999_999_989, 999_999_999_959, 999_999_999_947]}),
    ("convert_number_base", {"value": "f" * 40, "from_base": 16, "to_base": 2}),
    ("optimize_route_order", {"stops": [f"s{index}" for index in range(4000)]}),
]


@pytest.mark.parametrize(
    ("name", "arguments"),
    REPORTED_CASES,
    ids=[f"{n}-{i}" for i, (n, _) in enumerate(REPORTED_CASES)],
)
def test_reported_arguments_give_a_clean_outcome(name: str, arguments: dict[str, Any]) -> None:
    """The probe's cases: a finite JSON result, or a ValueError the model reads as an error
    result, or (where a schema bound now excludes them) a blocked ``validation_failed``."""
    tool = by_name(name)
    valid = ADAPTER.is_valid(tool.parameters, arguments)
    if valid:
        assert_clean_outcome(tool, arguments)  # what a host without a validator sees
    result = asyncio.run(dispatch_validated(name, arguments))
    if result.error is None:
        assert not non_finite(result.value)
        _json.dumps(result.value)
    elif (result.metadata or {}).get("blocked_reason") == "validation_failed":
        assert not valid, result.error
    else:
        assert result.error.name == "ValueError", result.error
        assert result.error.message


@pytest.mark.parametrize(
    ("name", "field", "arguments"),
    [
        ("get_weather_forecast", "start_date",
         {"city": "Lisbon", "days": 3, "start_date": "9999-12-31"}),
        ("list_calendar_events", "start_date",
         {"start_date": "9999-12-31", "end_date": "2025-03-14"}),
        ("add_business_days", "start_date", {"start_date": "9999-12-31", "days": 10}),
        ("days_between_dates", "end_date", {"start_date": "2025-03-03", "end_date": "0001-01-01"}),
        ("convert_local_time", "local_time",
         {"from_city": "Lisbon", "to_city": "Tokyo", "local_time": "9999-12-31T23:59:59"}),
        ("book_doctor_appointment", "preferred_date",
         {"specialty": "general_practice", "preferred_date": "9999-12-31",
          "reason": "Annual check-up"}),
        ("create_task", "due_date", {"project": "WEB", "title": "Ship", "due_date": "1899-12-31"}),
        ("submit_expense_report", "expenses[1].date",
         {"employee": "lena.meyer@example.com",
          "expenses": [{"description": "Taxi", "amount": 23.5, "category": "travel",
                        "date": "2025-03-10"},
                       {"description": "Hotel", "amount": 90, "category": "lodging",
                        "date": "2101-01-01"}]}),
    ],
)  # fmt: skip
def test_dates_outside_the_supported_years_are_refused_naming_the_field(
    name: str, field: str, arguments: dict[str, Any]
) -> None:
    tool = by_name(name)
    assert ADAPTER.is_valid(tool.parameters, arguments)
    with pytest.raises(ValueError, match=re.escape(f"'{field}' must be a date from 1900-01-01")):
        call_tool(tool, arguments)


def test_every_date_field_says_which_years_are_supported() -> None:
    def walk(schema: Mapping[str, Any], where: str) -> list[str]:
        found: list[str] = []
        dated = schema.get("format") in ("date", "date-time")
        if dated and "Supported years: 1900-2100." not in schema.get("description", ""):
            found.append(where)
        for name, child in (schema.get("properties") or {}).items():
            found += walk(child, f"{where}.{name}")
        if isinstance(schema.get("items"), dict):
            found += walk(schema["items"], f"{where}[]")
        return found

    assert [spot for tool in TOOLS for spot in walk(tool.parameters, tool.name)] == []
    local_time = by_name("convert_local_time").parameters["properties"]["local_time"]
    assert "Supported years: 1900-2100." in local_time["description"]


def test_dates_at_the_edges_of_the_supported_years_work() -> None:
    later = call_tool(by_name("add_business_days"), {"start_date": "2100-12-31", "days": 3650})
    assert later["date"].startswith("2114-")
    first, last = date(1900, 1, 1), date(2100, 12, 31)
    walked = sum(1 for n in range((last - first).days) if (first + timedelta(n)).weekday() < 5)
    assert call_tool(
        by_name("days_between_dates"), {"start_date": str(first), "end_date": str(last)}
    ) == {"days": 73413, "weeks": 10487.57, "business_days": walked}
    forecast = call_tool(
        by_name("get_weather_forecast"), {"city": "Lisbon", "days": 14, "start_date": "2100-12-31"}
    )
    assert forecast["days"][-1]["date"] == "2101-01-13"


def test_business_days_are_counted_as_walking_the_calendar_would() -> None:
    days_between = by_name("days_between_dates")
    start = date(2025, 3, 3)
    for span in range(-30, 31):
        end = start + timedelta(days=span)
        step = 1 if span >= 0 else -1
        walked = step * sum(
            1 for offset in range(0, span, step) if (start + timedelta(offset)).weekday() < 5
        )
        got = call_tool(days_between, {"start_date": str(start), "end_date": str(end)})
        assert got["business_days"] == walked, span


def test_route_order_is_bounded_in_the_schema_and_in_the_code() -> None:
    tool = by_name("optimize_route_order")
    assert tool.parameters is not None
    assert tool.parameters["properties"]["stops"]["maxItems"] == 25
    stops = [city.split(",")[0] for city in ("Lisbon", "Madrid", "Paris", "Berlin")] * 6 + ["Rome"]
    assert len(call_tool(tool, {"stops": stops})["order"]) == 25
    with pytest.raises(ValueError, match="at most 25"):
        call_tool(tool, {"stops": [f"s{index}" for index in range(120_000)]})


def test_arithmetic_is_refused_in_plain_words_when_it_leaves_the_real_numbers() -> None:
    tool = by_name("evaluate_arithmetic")
    cases = {
        "(-1)**0.5": "not a real number",
        "10**400": "out of range",
        "1e308*10": "out of range",
        "1e999-1e999": "out of range",
        "max()": "takes 1 or more",
        "abs(1, 2)": "takes 1 argument",
        "round(2.5, 0.5)": "whole number",
        "sqrt(-1)": "undefined",
        "5 % 0": "division by zero",
    }
    for expression, words in cases.items():
        with pytest.raises(ValueError, match=re.escape(words)):
            call_tool(tool, {"expression": expression})
    assert call_tool(tool, {"expression": "min(1)"})["value"] == 1
    assert call_tool(tool, {"expression": "round(2.5, 400)"})["value"] == 2.5
    assert call_tool(tool, {"expression": "2 ** 53"})["value"] == 2**53
    assert call_tool(tool, {"expression": "1e20"})["value"] == 1e20  # a float, not a wide int


def test_csv_cells_past_the_header_go_under_an_extra_key() -> None:
    result = call_tool(by_name("parse_csv_text"), {"csv": "name,qty\nbolts,12,extra,more\n"})
    assert result["rows"] == [{"name": "bolts", "qty": "12", "_extra": ["extra", "more"]}]


def test_quartiles_stay_within_the_values() -> None:
    stats = call_tool(by_name("compute_summary_statistics"), {"values": [1, 2]})
    assert stats["min"] <= stats["q1"] <= stats["median"] <= stats["q3"] <= stats["max"]
    assert (stats["q1"], stats["q3"]) == (1.25, 1.75)


def test_tiny_rates_give_the_zero_rate_answer() -> None:
    tiny = call_tool(
        by_name("calculate_loan_payment"),
        {"principal": 1200, "annual_rate_percent": 1e-300, "term_months": 12},
    )
    assert tiny["monthly_payment"] == 100.0
    savings = call_tool(
        by_name("calculate_compound_interest"),
        {"principal": 0, "annual_rate_percent": 1e-300, "years": 1, "monthly_contribution": 100},
    )
    assert savings["future_value"] == 1200.0


def test_money_and_measure_fields_carry_bounds() -> None:
    """Every number a tool computes with is bounded above in its schema, and every list is
    bounded in length: the model sees the limits, and validation enforces them."""
    unbounded: list[str] = []

    def walk(schema: Any, where: str) -> None:
        kind = schema.get("type")
        if kind in ("number", "integer") and "maximum" not in schema:
            unbounded.append(where)
        if kind == "array":
            if "maxItems" not in schema:
                unbounded.append(f"{where} (length)")
            walk(schema["items"], f"{where}[]")
        for name, child in (schema.get("properties") or {}).items():
            walk(child, f"{where}.{name}")

    for tool in TOOLS:
        walk(tool.parameters, tool.name)
    assert unbounded == []


EDGE_NUMBERS: tuple[float, ...] = (
    0, 0.0, -0.0, 1, -1, 0.5, 1e-300, -1e-300, 5e-324, -5e-324, 1e300, -1e300, HUGE, -HUGE,
    99.999, 2**53 + 1, 2**63 - 1, -(2**63),
)  # fmt: skip
EDGE_STRINGS: tuple[str, ...] = (
    "", " ", "0", "-1", "1e999", "NaN", "x" * 3000, "ß😀\u202e\x00\x1b", ",", "/", "..",
    "9" * 400, "10**400", "(-1)**0.5", "max()", "a,b\n1,2,3", "MMMMCMXCIX", "ffffffffffffffffff",
    "2025-02-30", "not a date", *FAR_DATES, "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
)  # fmt: skip


def _number_edges(schema: Mapping[str, Any]) -> list[float]:
    low, high = schema.get("minimum"), schema.get("maximum")
    above = schema.get("exclusiveMinimum")
    edges = [*EDGE_NUMBERS]
    for bound in (low, high):
        if bound is not None:
            edges += [bound, math.nextafter(bound, math.inf), math.nextafter(bound, -math.inf)]
    if above is not None:
        edges += [math.nextafter(above, math.inf), above + 1e-9]
    if schema["type"] == "integer":
        edges = [int(edge) for edge in edges if float(edge).is_integer() and abs(edge) < 2**63]
        edges += [edge + step for edge in (low, high) if edge is not None for step in (-1, 1)]
    return edges


def _clip(schema: Mapping[str, Any], value: float) -> float:
    low = schema.get("minimum", schema.get("exclusiveMinimum", -math.inf))
    high = schema.get("maximum", math.inf)
    return min(max(value, low), high)


def values_for(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values for ``schema``, leaning on its boundaries: bounds and their neighbours, huge and
    tiny numbers, empty and long strings, far dates, the longest lists allowed. Most satisfy
    the schema; the test keeps only those its validator accepts."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "oneOf" in schema:
        return st.one_of([values_for(option) for option in schema["oneOf"]])
    kind = schema["type"]
    if kind == "object":
        properties = schema["properties"]
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {name: values_for(sub) for name, sub in properties.items() if name in required},
            optional={
                name: values_for(sub) for name, sub in properties.items() if name not in required
            },
        )
    if kind == "array":
        items = values_for(schema["items"])
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 1000)
        longest = items.map(lambda item: [copy.deepcopy(item) for _ in range(high)])
        return st.one_of(st.lists(items, min_size=low, max_size=min(high, low + 3)), longest)
    if kind == "boolean":
        return st.booleans()
    if kind in ("integer", "number"):
        edges = st.sampled_from(_number_edges(schema))
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum")
        if kind == "integer":
            whole = st.integers(
                min_value=-(2**63) if low is None else math.ceil(low),
                max_value=2**63 - 1 if high is None else math.floor(high),
            )
            return st.one_of(edges, whole)
        floats = st.floats(
            min_value=low,
            max_value=high,
            exclude_min="exclusiveMinimum" in schema,
            allow_nan=False,
            allow_infinity=False,
        )
        return st.one_of(edges, floats, edges.map(lambda edge: _clip(schema, edge * 0.999)))
    assert kind == "string", schema
    if "pattern" in schema:
        pattern = schema["pattern"]
        whole = pattern.startswith("^") and pattern.endswith("$")
        text = st.from_regex(pattern[1:-1] if whole else pattern, fullmatch=whole)
    else:
        fixed = list(EDGE_STRINGS)
        if schema.get("format") in ("date", "date-time"):
            fixed += ["1900-01-01", "2100-12-31", "2024-02-29", "2100-12-31T23:59:59+14:00"]
        text = st.one_of(
            st.sampled_from(fixed),
            st.text(max_size=30),
            st.dates().map(date.isoformat),
            st.datetimes().map(datetime.isoformat),
        )
    return text.filter(
        lambda value: schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", 10**9)
    )


def test_value_generator_covers_the_catalog_schemas() -> None:
    """The generator knows every keyword the catalog uses (a new one would go unexercised)."""
    known = {
        "type", "properties", "required", "additionalProperties", "items", "minItems",
        "maxItems", "minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength",
        "pattern", "format", "enum", "oneOf", "description", "default", "examples",
    }  # fmt: skip
    used: set[str] = set()

    def walk(schema: Any) -> None:
        if isinstance(schema, dict):
            used.update(schema)
            for key in ("items",):
                walk(schema.get(key))
            for child in (schema.get("properties") or {}).values():
                walk(child)
            for child in schema.get("oneOf") or []:
                walk(child)

    for tool in TOOLS:
        walk(tool.parameters)
    assert used <= known, used - known


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_tool_gives_a_finite_json_result_or_a_value_error_at_every_edge(
    tool: ToolDefinition,
) -> None:
    """Each top-level argument in turn at each of its edge values, the others as in the
    examples: a deterministic sweep of the boundaries the property test below samples."""
    assert tool.parameters is not None
    base = required_arguments(tool)
    for name, prop in tool.parameters["properties"].items():
        kind = prop.get("type")
        if kind in ("integer", "number"):
            edges: list[Any] = _number_edges(prop)
        elif kind == "string" and "enum" not in prop:
            edges = list(EDGE_STRINGS)
        elif kind == "array":
            item = sample(prop["items"])
            edges = [[item] * prop.get("maxItems", 1000), [item] * prop.get("minItems", 0)]
        else:
            continue
        for edge in edges:
            arguments = {**base, name: edge}
            if ADAPTER.is_valid(tool.parameters, arguments):
                assert_clean_outcome(tool, arguments)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_any_arguments_the_schema_accepts_give_a_finite_json_result_or_a_value_error(
    tool: ToolDefinition,
) -> None:
    assert tool.parameters is not None
    schema = tool.parameters

    @settings(
        max_examples=PROPERTY_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(values_for(schema))
    def check(arguments: dict[str, Any]) -> None:
        assume(ADAPTER.is_valid(schema, arguments))
        assert_clean_outcome(tool, arguments)

    check()
