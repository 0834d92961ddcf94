"""JSON Schema validation of tool arguments, side by side with the Python validators a host could
use instead.

Peers: ``jsonschema_rs`` (``validator_for``, compiled once), ``fastjsonschema`` (``compile``, once)
and ``jsonschema`` (``Draft202012Validator``, built once). Where a case starts from the model's
argument text, every peer parses it with ``orjson.loads`` first and returns the parsed dict when it
is valid, so every row hands back the same thing: validated arguments.

Groups (``--benchmark-group-by=group`` puts each group's rows side by side):

* ``validation/text->validated dict, small schema (5 properties)`` and ``..., large schema (50
  properties, 4 levels, $ref)``: argument text to a validated dict. Target: ours at most 1.0x
  (small) and 0.8x (large) of ``orjson.loads`` + ``jsonschema_rs`` ``is_valid``.
* ``validation/dict, small schema`` and ``validation/dict, large schema``: arguments already
  parsed (for information; no target).
* ``validation/invalid arguments, 6 violations, full report``: every issue of an argument dict
  with six violations. Target: ours at most 0.3x ``jsonschema_rs`` collecting all errors.
* ``validation/compile + guards, new small schema`` and ``..., new large schema``: a schema never
  seen before, guarded and compiled. Every call gets a schema with its own ``description``, for
  us and for the peer alike, so no cache can answer. Target: ours at most 1.2x ``jsonschema_rs``
  ``validator_for``.
* ``validation/cache hit``: finding the compiled validator of a known schema, next to a small
  validation. Target: the lookup under 2% of the validation, measured as what it adds to a
  validation (one crossing that looks up and validates, against the same validation on the
  compiled schema in hand); the lookup as a call of its own is shown too.

Rows marked "piece" time one part of our path on its own, so the doc can say where the time goes.
Each row fixes its calls per round from a quick measurement (rounds of about 100 us, about one
second per row; see ``time_it``), so ``--benchmark-min-rounds`` and ``--benchmark-min-time`` do
not apply here; reported times are per call. Peer rows skip, with the reason, when the peer is not
installed. Nothing asserts on timing; the asserts before each timed call check that the row does
the work it claims (valid is valid, all six issues are found, a new schema is really compiled).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson
import pytest

from prism_tools import ErrorInfo, ToolDefinition
from prism_tools._core import SchemaValidator
from prism_tools.validation import (
    JsonSchemaAdapter,
    create_json_schema_adapter,
    create_json_schema_tool_argument_validator,
)
from timing import time_calibrated

try:
    import jsonschema_rs
except ImportError:  # pragma: no cover - depends on the bench venv
    jsonschema_rs = None
try:
    import fastjsonschema
except ImportError:  # pragma: no cover
    fastjsonschema = None
try:
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None

TEXT_GROUP = {
    "small": "validation/text->validated dict, small schema (5 properties)",
    "large": "validation/text->validated dict, large schema (50 properties, 4 levels, $ref)",
}
DICT_GROUP = {
    "small": "validation/dict, small schema",
    "large": "validation/dict, large schema",
}
COMPILE_GROUP = {
    "small": "validation/compile + guards, new small schema",
    "large": "validation/compile + guards, new large schema",
}
INVALID = "validation/invalid arguments, 6 violations, full report"
CACHE = "validation/cache hit"
CASES = ("small", "large")
VALID_FOUND = (None, ([], 0))
"""What ``CompiledSchema.validate`` answers for valid input (None since commit 8fc89dd)."""

ROUND_SECONDS = 100e-6
"""Target length of one timed round; fast rows make many calls per round."""
ROW_SECONDS = 1.0
"""Target timed length of one row (rounds x round length)."""
MIN_ROUNDS = 20
CALIBRATION_SECONDS = 2e-3

# ----------------------------------------------------------------------------------------- data

SMALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 100},
        "units": {"enum": ["metric", "imperial"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "include_hourly": {"type": "boolean"},
        "lang": {"type": "string", "pattern": "^[a-z]{2}$"},
    },
    "required": ["city", "units"],
    "additionalProperties": False,
}
SMALL_VALID: dict[str, Any] = {
    "city": "Paris",
    "units": "metric",
    "days": 3,
    "include_hourly": False,
    "lang": "fr",
}
# One violation per line: type, enum, maximum, type, pattern, additionalProperties.
SMALL_INVALID: dict[str, Any] = {
    "city": 42,
    "units": "kelvin",
    "days": 30,
    "include_hourly": "yes",
    "lang": "english",
    "verbose": True,
}
VIOLATIONS = 6


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_STRING = {"type": "string"}

# 50 properties in all (22 at the top, 28 below), four levels of objects (booking -> guests[] ->
# address -> geo) and local references into $defs. Keywords only from the common subset of
# drafts 7 and 2020-12 (fastjsonschema speaks draft 7), no `format`, no `$ref` siblings.
LARGE_SCHEMA: dict[str, Any] = {
    "$defs": {
        "geo": _obj(
            {
                "lat": {"type": "number", "minimum": -90, "maximum": 90},
                "lon": {"type": "number", "minimum": -180, "maximum": 180},
            },
            ["lat", "lon"],
        ),
        "address": _obj(
            {
                "street": {"type": "string", "maxLength": 200},
                "city": {"type": "string", "minLength": 1},
                "postal_code": {"type": "string", "pattern": "^[0-9A-Z -]{3,10}$"},
                "country": {"type": "string", "minLength": 2, "maxLength": 2},
                "geo": {"$ref": "#/$defs/geo"},
            },
            ["city", "country"],
        ),
        "person": _obj(
            {
                "name": {"type": "string", "minLength": 1},
                "email": {"type": "string", "pattern": "^[^@ ]+@[^@ ]+$"},
                "phone": _STRING,
                "role": {"enum": ["owner", "guest", "admin"]},
                "address": {"$ref": "#/$defs/address"},
            },
            ["name", "email"],
        ),
        "money": _obj(
            {
                "amount": {"type": "number", "minimum": 0},
                "currency": {"enum": ["EUR", "USD", "GBP", "JPY"]},
            },
            ["amount", "currency"],
        ),
        "date_range": _obj(
            {
                "start": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                "end": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                "flexible_days": {"type": "integer", "minimum": 0, "maximum": 7},
            },
            ["start", "end"],
        ),
    },
    **_obj(
        {
            "request_id": {"type": "string", "minLength": 8, "maxLength": 64},
            "query": {"type": "string", "maxLength": 500},
            "destination": {"$ref": "#/$defs/address"},
            "dates": {"$ref": "#/$defs/date_range"},
            "guests": {
                "type": "array",
                "items": {"$ref": "#/$defs/person"},
                "minItems": 1,
                "maxItems": 9,
            },
            "organizer": {"$ref": "#/$defs/person"},
            "budget": {"$ref": "#/$defs/money"},
            "max_price_per_night": {"$ref": "#/$defs/money"},
            "rooms": {"type": "integer", "minimum": 1, "maximum": 9},
            "room_type": {"enum": ["single", "double", "suite", "family"]},
            "amenities": {
                "type": "array",
                "items": {"enum": ["wifi", "pool", "gym", "parking", "spa", "breakfast"]},
                "uniqueItems": True,
            },
            "rating_min": {"type": "number", "minimum": 0, "maximum": 5},
            "sort_by": {"enum": ["price", "rating", "distance"]},
            "sort_order": {"enum": ["asc", "desc"]},
            "page": {"type": "integer", "minimum": 1},
            "page_size": {"type": "integer", "minimum": 1, "maximum": 100},
            "include_sold_out": {"type": "boolean"},
            "loyalty": _obj(
                {
                    "program": _STRING,
                    "member_id": {"type": "string", "pattern": "^[A-Z0-9]{6,12}$"},
                    "tier": {"enum": ["basic", "silver", "gold", "platinum"]},
                },
                ["program", "member_id"],
            ),
            "preferences": _obj(
                {
                    "smoking": {"type": "boolean"},
                    "floor": {"enum": ["low", "middle", "high"]},
                    "bed": {"enum": ["king", "queen", "twin"]},
                    "accessibility": {"type": "array", "items": _STRING, "maxItems": 10},
                    "notes": {"type": "string", "maxLength": 1000},
                },
                [],
            ),
            "payment": _obj(
                {
                    "method": {"enum": ["card", "invoice", "voucher"]},
                    "card_last4": {"type": "string", "pattern": "^[0-9]{4}$"},
                    "billing_address": {"$ref": "#/$defs/address"},
                },
                ["method"],
            ),
            "tags": {"type": "array", "items": _STRING, "maxItems": 20},
            "metadata": {"type": "object", "additionalProperties": _STRING},
        },
        ["request_id", "destination", "dates", "guests"],
    ),
}


def _address(city: str, country: str, lat: float, lon: float) -> dict[str, Any]:
    return {
        "street": "12 Rue de Rivoli",
        "city": city,
        "postal_code": "75001",
        "country": country,
        "geo": {"lat": lat, "lon": lon},
    }


LARGE_VALID: dict[str, Any] = {
    "request_id": "req-2024-000417",
    "query": "quiet hotel near the Louvre with breakfast",
    "destination": _address("Paris", "FR", 48.8606, 2.3376),
    "dates": {"start": "2025-05-02", "end": "2025-05-06", "flexible_days": 1},
    "guests": [
        {
            "name": "Ada Lovelace",
            "email": "ada@example.org",
            "phone": "+44 20 7946 0000",
            "role": "owner",
            "address": _address("London", "GB", 51.5072, -0.1276),
        },
        {
            "name": "Charles Babbage",
            "email": "charles@example.org",
            "role": "guest",
            "address": _address("London", "GB", 51.5155, -0.0922),
        },
    ],
    "organizer": {"name": "Ada Lovelace", "email": "ada@example.org", "role": "owner"},
    "budget": {"amount": 1800, "currency": "EUR"},
    "max_price_per_night": {"amount": 450.0, "currency": "EUR"},
    "rooms": 2,
    "room_type": "double",
    "amenities": ["wifi", "breakfast", "spa"],
    "rating_min": 4.5,
    "sort_by": "price",
    "sort_order": "asc",
    "page": 1,
    "page_size": 20,
    "include_sold_out": False,
    "loyalty": {"program": "Le Club", "member_id": "LC123456", "tier": "gold"},
    "preferences": {
        "smoking": False,
        "floor": "high",
        "bed": "king",
        "accessibility": ["step-free access"],
        "notes": "Late arrival, around 23:00.",
    },
    "payment": {
        "method": "card",
        "card_last4": "4242",
        "billing_address": _address("London", "GB", 51.5072, -0.1276),
    },
    "tags": ["business", "anniversary"],
    "metadata": {"source": "chat", "locale": "en-GB"},
}

SCHEMAS = {"small": SMALL_SCHEMA, "large": LARGE_SCHEMA}
VALID = {"small": SMALL_VALID, "large": LARGE_VALID}
TEXT = {case: orjson.dumps(value).decode() for case, value in VALID.items()}


def _count_properties(schema: Any) -> int:
    if isinstance(schema, dict):
        own = len(schema.get("properties", {}))
        return own + sum(_count_properties(value) for value in schema.values())
    if isinstance(schema, list):
        return sum(_count_properties(value) for value in schema)
    return 0


assert _count_properties(SMALL_SCHEMA) == 5
assert _count_properties(LARGE_SCHEMA) == 50

# ------------------------------------------------------------------------------------- helpers


def need(module: Any, name: str) -> Any:
    """The peer module, or a skip that says which package is missing."""
    if module is None:
        pytest.skip(f"peer {name} is not installed (pip install {name})")
    return module


def time_it(benchmark: Any, group: str, function: Callable[[], Any]) -> None:
    """Time ``function`` in calibrated rounds (see ``timing.py``) under this file's constants."""
    benchmark.group = group
    time_calibrated(
        benchmark,
        function,
        round_seconds=ROUND_SECONDS,
        row_seconds=ROW_SECONDS,
        min_rounds=MIN_ROUNDS,
        calibration_seconds=CALIBRATION_SECONDS,
    )


def fresh_adapter(schema: Any) -> JsonSchemaAdapter:
    """An adapter that has compiled ``schema`` already (the steady state of a host)."""
    adapter = create_json_schema_adapter()
    adapter.check_schema(schema)
    return adapter


def varied(schema: dict[str, Any], label: str) -> Iterator[dict[str, Any]]:
    """Copies of ``schema``, each with its own ``description``: no cache has seen any of them.
    Both sides draw from one of these, so making the copy costs both the same."""
    for n in itertools.count():
        yield {**schema, "description": f"{label} {n}"}


# ------------------------------------------------------------- text -> validated dict (targets)


@pytest.mark.parametrize("case", CASES)
def test_text_ours(benchmark: Any, case: str) -> None:
    """ours: ``adapter.parse_and_validate(schema, text)``, one crossing into Rust."""
    schema, text = SCHEMAS[case], TEXT[case]
    adapter = fresh_adapter(schema)
    assert adapter.parse_and_validate(schema, text) == (VALID[case], [])
    time_it(benchmark, TEXT_GROUP[case], lambda: adapter.parse_and_validate(schema, text))


@pytest.mark.parametrize("case", CASES)
def test_text_ours_tool_validator(benchmark: Any, case: str) -> None:
    """ours as dispatch uses it: ``ToolParameterValidator.parse_checked(tool, text)``."""
    schema, text = SCHEMAS[case], TEXT[case]
    tool = ToolDefinition(name="book", parameters=schema)
    validator = create_json_schema_tool_argument_validator()
    assert validator.parse_checked(tool, text) == (VALID[case], None)
    time_it(benchmark, TEXT_GROUP[case], lambda: validator.parse_checked(tool, text))


@pytest.mark.parametrize("case", CASES)
def test_text_ours_compiled_piece(benchmark: Any, case: str) -> None:
    """piece: ``CompiledSchema.parse_and_validate`` without the adapter's Python glue."""
    schema, text = SCHEMAS[case], TEXT[case]
    compiled = fresh_adapter(schema).compiled(schema)
    arguments, found = compiled.parse_and_validate(text, 256)
    assert arguments == VALID[case]
    assert found in VALID_FOUND
    time_it(benchmark, TEXT_GROUP[case], lambda: compiled.parse_and_validate(text, 256))


@pytest.mark.parametrize("case", CASES)
def test_text_ours_parse_piece(benchmark: Any, case: str) -> None:
    """piece: our parser alone (``SchemaValidator.parse``: guards, then text to Python)."""
    text = TEXT[case]
    core = SchemaValidator()
    assert core.parse(text) == VALID[case]
    time_it(benchmark, TEXT_GROUP[case], lambda: core.parse(text))


@pytest.mark.parametrize("case", CASES)
def test_text_orjson_piece(benchmark: Any, case: str) -> None:
    """piece: ``orjson.loads`` alone, the parse every peer row pays."""
    text = TEXT[case]
    time_it(benchmark, TEXT_GROUP[case], lambda: orjson.loads(text))


@pytest.mark.parametrize("case", CASES)
def test_text_jsonschema_rs(benchmark: Any, case: str) -> None:
    """reference: ``orjson.loads`` + ``jsonschema_rs`` ``is_valid``."""
    peer = need(jsonschema_rs, "jsonschema-rs")
    schema, text = SCHEMAS[case], TEXT[case]
    validator = peer.validator_for(schema)
    loads, is_valid = orjson.loads, validator.is_valid

    def run() -> Any:
        arguments = loads(text)
        return arguments if is_valid(arguments) else None

    assert run() == VALID[case]
    time_it(benchmark, TEXT_GROUP[case], run)


@pytest.mark.parametrize("case", CASES)
def test_text_fastjsonschema(benchmark: Any, case: str) -> None:
    """``orjson.loads`` + a ``fastjsonschema`` compiled validator (raises when invalid)."""
    peer = need(fastjsonschema, "fastjsonschema")
    schema, text = SCHEMAS[case], TEXT[case]
    validate = peer.compile(schema)
    loads = orjson.loads

    def run() -> Any:
        return validate(loads(text))

    assert run() == VALID[case]
    time_it(benchmark, TEXT_GROUP[case], run)


@pytest.mark.parametrize("case", CASES)
def test_text_jsonschema(benchmark: Any, case: str) -> None:
    """``orjson.loads`` + ``jsonschema.Draft202012Validator(schema).is_valid`` (built once)."""
    peer = need(jsonschema, "jsonschema")
    schema, text = SCHEMAS[case], TEXT[case]
    is_valid = peer.Draft202012Validator(schema).is_valid
    loads = orjson.loads

    def run() -> Any:
        arguments = loads(text)
        return arguments if is_valid(arguments) else None

    assert run() == VALID[case]
    time_it(benchmark, TEXT_GROUP[case], run)


# ----------------------------------------------------------------- dict validation (information)


@pytest.mark.parametrize("case", CASES)
def test_dict_ours_validate(benchmark: Any, case: str) -> None:
    """ours: ``adapter.validate(schema, args)`` (returns ``[]`` when valid)."""
    schema, args = SCHEMAS[case], VALID[case]
    adapter = fresh_adapter(schema)
    assert adapter.validate(schema, args) == []
    time_it(benchmark, DICT_GROUP[case], lambda: adapter.validate(schema, args))


@pytest.mark.parametrize("case", CASES)
def test_dict_ours_found(benchmark: Any, case: str) -> None:
    """ours: ``adapter.found(schema, args)`` (raw issues and their count)."""
    schema, args = SCHEMAS[case], VALID[case]
    adapter = fresh_adapter(schema)
    assert adapter.found(schema, args) == ([], 0)
    time_it(benchmark, DICT_GROUP[case], lambda: adapter.found(schema, args))


@pytest.mark.parametrize("case", CASES)
def test_dict_ours_tool_validator(benchmark: Any, case: str) -> None:
    """ours as dispatch's ``validate=`` hook: ``validator(tool, args)`` (None when valid)."""
    schema, args = SCHEMAS[case], VALID[case]
    tool = ToolDefinition(name="book", parameters=schema)
    validator = create_json_schema_tool_argument_validator()
    assert validator(tool, args) is None
    time_it(benchmark, DICT_GROUP[case], lambda: validator(tool, args))


@pytest.mark.parametrize("case", CASES)
def test_dict_ours_compiled_piece(benchmark: Any, case: str) -> None:
    """piece: ``CompiledSchema.validate(args, 256)`` without the adapter's Python glue."""
    schema, args = SCHEMAS[case], VALID[case]
    compiled = fresh_adapter(schema).compiled(schema)
    assert compiled.validate(args, 256) in VALID_FOUND
    time_it(benchmark, DICT_GROUP[case], lambda: compiled.validate(args, 256))


@pytest.mark.parametrize("case", CASES)
def test_dict_jsonschema_rs(benchmark: Any, case: str) -> None:
    peer = need(jsonschema_rs, "jsonschema-rs")
    schema, args = SCHEMAS[case], VALID[case]
    is_valid = peer.validator_for(schema).is_valid
    assert is_valid(args)
    time_it(benchmark, DICT_GROUP[case], lambda: is_valid(args))


@pytest.mark.parametrize("case", CASES)
def test_dict_fastjsonschema(benchmark: Any, case: str) -> None:
    peer = need(fastjsonschema, "fastjsonschema")
    schema, args = SCHEMAS[case], VALID[case]
    validate = peer.compile(schema)
    assert validate(args) == args
    time_it(benchmark, DICT_GROUP[case], lambda: validate(args))


@pytest.mark.parametrize("case", CASES)
def test_dict_jsonschema(benchmark: Any, case: str) -> None:
    peer = need(jsonschema, "jsonschema")
    schema, args = SCHEMAS[case], VALID[case]
    is_valid = peer.Draft202012Validator(schema).is_valid
    assert is_valid(args)
    time_it(benchmark, DICT_GROUP[case], lambda: is_valid(args))


# ----------------------------------------------------------- invalid arguments, every issue found


def test_invalid_ours_tool_validator(benchmark: Any) -> None:
    """ours, the full compact report: ``validator(tool, args)`` returns the ``ErrorInfo`` a
    model sees (message with every issue, structured issues in ``details``)."""
    tool = ToolDefinition(name="weather", parameters=SMALL_SCHEMA)
    validator = create_json_schema_tool_argument_validator()
    problem = validator(tool, SMALL_INVALID)
    assert isinstance(problem, ErrorInfo)
    assert problem.details is not None
    assert problem.details["count"] == VIOLATIONS
    assert len(problem.details["issues"]) == VIOLATIONS
    time_it(benchmark, INVALID, lambda: validator(tool, SMALL_INVALID))


def test_invalid_ours_found(benchmark: Any) -> None:
    """ours: ``adapter.found(schema, args)``, every issue as ``(path, keyword, message)``."""
    adapter = fresh_adapter(SMALL_SCHEMA)
    issues, total = adapter.found(SMALL_SCHEMA, SMALL_INVALID)
    assert (len(issues), total) == (VIOLATIONS, VIOLATIONS)
    time_it(benchmark, INVALID, lambda: adapter.found(SMALL_SCHEMA, SMALL_INVALID))


def test_invalid_ours_validate(benchmark: Any) -> None:
    """ours: ``adapter.validate(schema, args)``, every issue as an ``ArgumentIssue``."""
    adapter = fresh_adapter(SMALL_SCHEMA)
    assert len(adapter.validate(SMALL_SCHEMA, SMALL_INVALID)) == VIOLATIONS
    time_it(benchmark, INVALID, lambda: adapter.validate(SMALL_SCHEMA, SMALL_INVALID))


def test_invalid_jsonschema_rs(benchmark: Any) -> None:
    """reference: ``list(validator.iter_errors(args))`` of a ``jsonschema_rs`` validator."""
    peer = need(jsonschema_rs, "jsonschema-rs")
    iter_errors = peer.validator_for(SMALL_SCHEMA).iter_errors
    assert len(list(iter_errors(SMALL_INVALID))) == VIOLATIONS
    time_it(benchmark, INVALID, lambda: list(iter_errors(SMALL_INVALID)))


def test_invalid_jsonschema(benchmark: Any) -> None:
    """``list(Draft202012Validator(schema).iter_errors(args))``, validator built once."""
    peer = need(jsonschema, "jsonschema")
    iter_errors = peer.Draft202012Validator(SMALL_SCHEMA).iter_errors
    assert len(list(iter_errors(SMALL_INVALID))) == VIOLATIONS
    time_it(benchmark, INVALID, lambda: list(iter_errors(SMALL_INVALID)))


# fastjsonschema stops at the first error, so it has no row here.


# ------------------------------------------------------------------ compile + guards, new schema


@pytest.mark.parametrize("case", CASES)
def test_compile_ours(benchmark: Any, case: str) -> None:
    """ours: ``SchemaValidator().compile(schema)`` (guards, compile, LRU insert) on one core; every
    schema is new to it."""
    core = SchemaValidator()
    schemas = varied(SCHEMAS[case], "ours")
    compiled = core.compile(next(schemas))
    assert compiled.validate(VALID[case], 1) in VALID_FOUND
    core.compile(next(schemas))
    assert core.cache_info()[:2] == (0, 2), "every round must compile"
    time_it(benchmark, COMPILE_GROUP[case], lambda: core.compile(next(schemas)))
    assert core.cache_info()[0] == 0


@pytest.mark.parametrize("case", CASES)
def test_compile_ours_adapter(benchmark: Any, case: str) -> None:
    """ours through the adapter: ``adapter.compiled(schema)`` (adds the identity memo)."""
    adapter = create_json_schema_adapter()
    schemas = varied(SCHEMAS[case], "adapter")
    adapter.compiled(next(schemas))
    time_it(benchmark, COMPILE_GROUP[case], lambda: adapter.compiled(next(schemas)))
    assert adapter.cache_info().hits == 0


@pytest.mark.parametrize("case", CASES)
def test_compile_jsonschema_rs(benchmark: Any, case: str) -> None:
    """reference: ``jsonschema_rs.validator_for(schema)``."""
    peer = need(jsonschema_rs, "jsonschema-rs")
    schemas = varied(SCHEMAS[case], "peer")
    validator_for = peer.validator_for
    assert validator_for(next(schemas)).is_valid(VALID[case])
    time_it(benchmark, COMPILE_GROUP[case], lambda: validator_for(next(schemas)))


@pytest.mark.parametrize("case", CASES)
def test_compile_schema_copy_piece(benchmark: Any, case: str) -> None:
    """piece: making the next varied schema alone, included in both rows above."""
    schemas = varied(SCHEMAS[case], "copy")
    time_it(benchmark, COMPILE_GROUP[case], lambda: next(schemas))


# -------------------------------------------------------------------------------------- cache hit


def test_cache_hit_ours(benchmark: Any) -> None:
    """ours: ``adapter.compiled(schema)`` on a schema compiled before (the core's identity memo)."""
    adapter = fresh_adapter(SMALL_SCHEMA)
    before = adapter.cache_info()
    assert adapter.compiled(SMALL_SCHEMA) is adapter.compiled(SMALL_SCHEMA)
    time_it(benchmark, CACHE, lambda: adapter.compiled(SMALL_SCHEMA))
    assert adapter.cache_info().misses == before.misses


def test_cache_hit_core_lru(benchmark: Any) -> None:
    """ours, the core's LRU: ``SchemaValidator.compile`` of an equal schema that is a new object
    (read into Rust, serialised, hashed, found)."""
    core = SchemaValidator()
    core.compile(SMALL_SCHEMA)
    twin = copy.deepcopy(SMALL_SCHEMA)
    core.compile(twin)
    assert core.cache_info()[:2] == (1, 1)
    time_it(benchmark, CACHE, lambda: core.compile(twin))


def test_cache_small_validation(benchmark: Any) -> None:
    """the yardstick: ``adapter.validate(schema, small_valid_args)``, lookup included."""
    adapter = fresh_adapter(SMALL_SCHEMA)
    assert adapter.validate(SMALL_SCHEMA, SMALL_VALID) == []
    time_it(benchmark, CACHE, lambda: adapter.validate(SMALL_SCHEMA, SMALL_VALID))


def lookup_row() -> tuple[SchemaValidator, Callable[[], Any]]:
    """``SchemaValidator.validate_with(schema, args)`` on a schema compiled before: the compiled
    schema found by the schema object's identity, then the small validation, in one crossing.
    Shared with ``instructions.py``; the call's names are bound once, as in ``compiled_row``, so
    the two rows differ by the schema argument and its lookup only."""
    core = SchemaValidator()
    core.compiled(SMALL_SCHEMA)
    validate_with, schema, args = core.validate_with, SMALL_SCHEMA, SMALL_VALID
    return core, lambda: validate_with(schema, args)


def compiled_row() -> Callable[[], Any]:
    """``CompiledSchema.validate(args)`` with the compiled schema in hand: the same validation as
    ``lookup_row``, no lookup. Shared with ``instructions.py``."""
    validate, args = SchemaValidator().compiled(SMALL_SCHEMA).validate, SMALL_VALID
    return lambda: validate(args)


def test_cache_validate_through_lookup(benchmark: Any) -> None:
    """ours, lookup and validation in one crossing (``lookup_row``)."""
    core, call = lookup_row()
    assert call() is None
    hits = core.cache_info()[0]
    time_it(benchmark, CACHE, call)
    assert core.cache_info()[0] > hits, "every call must find the schema by identity"


def test_cache_validate_compiled(benchmark: Any) -> None:
    """ours, the same validation with the compiled schema in hand (``compiled_row``). Its gap to
    the row above is the lookup."""
    call = compiled_row()
    assert call() is None
    time_it(benchmark, CACHE, call)


def test_cache_noop_floor(benchmark: Any) -> None:
    """floor: a Python function that returns its argument, what any timed call costs here."""
    schema = SMALL_SCHEMA

    def noop() -> Any:
        return schema

    time_it(benchmark, CACHE, noop)


# ------------------------------------------------------------------------------------- ratios

TEXT_TARGETS = {"small": 1.0, "large": 0.8}
"""Ours / (``orjson.loads`` + jsonschema-rs ``is_valid``) from argument text, at most."""
INVALID_TARGET = 0.3
"""Ours' full report / jsonschema-rs collecting every error, at most."""
COMPILE_TARGET = 1.2
"""Ours' compile and guards / ``jsonschema_rs.validator_for``, at most."""
CACHE_TARGET = 0.02
"""What the lookup adds to a small validation, as a share of it, under."""
CACHE_GAP_ROWS = ("test_cache_validate_through_lookup", "test_cache_validate_compiled")
"""The rows whose gap is what the lookup adds: lookup and validation, validation alone."""


def per_call_micros(reports: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Microseconds per call of every row, keyed by test name with its parameter
    (``test_text_ours[small]``): each row's lowest median over the loaded ``--benchmark-json``
    documents (``time_it`` rounds already report per call)."""
    groups = {*TEXT_GROUP.values(), *DICT_GROUP.values(), *COMPILE_GROUP.values(), INVALID, CACHE}
    best: dict[str, float] = {}
    for report in reports:
        for bench in report["benchmarks"]:
            if bench.get("group") not in groups:
                continue
            micros = bench["stats"]["median"] * 1e6
            best[bench["name"]] = min(micros, best.get(bench["name"], float("inf")))
    return best


def target_ratios(best: dict[str, float]) -> dict[str, float | None]:
    """The ratios the targets speak of (None: a row is missing): ``text small``/``text large``,
    ``invalid``, ``compile small``/``compile large``, ``cache`` (what the lookup adds to a small
    validation: one crossing that looks up and validates, less the same validation on the
    compiled schema in hand, over that validation), ``cache call`` (the lookup as a call of its
    own, over a small validation through the adapter) and ``cache call above floor`` (both with
    the no-op call floor taken off); the last two for information."""

    def ratio(top: str, bottom: str, floor: float = 0.0) -> float | None:
        if top in best and bottom in best and best[bottom] - floor > 0:
            return (best[top] - floor) / (best[bottom] - floor)
        return None

    ratios: dict[str, float | None] = {}
    for case in CASES:
        ratios[f"text {case}"] = ratio(
            f"test_text_ours[{case}]", f"test_text_jsonschema_rs[{case}]"
        )
    ratios["invalid"] = ratio("test_invalid_ours_tool_validator", "test_invalid_jsonschema_rs")
    for case in CASES:
        ratios[f"compile {case}"] = ratio(
            f"test_compile_ours[{case}]", f"test_compile_jsonschema_rs[{case}]"
        )
    with_lookup = ratio(*CACHE_GAP_ROWS)
    ratios["cache"] = None if with_lookup is None else with_lookup - 1
    ratios["cache call"] = ratio("test_cache_hit_ours", "test_cache_small_validation")
    floor = best.get("test_cache_noop_floor")
    ratios["cache call above floor"] = (
        None
        if floor is None
        else ratio("test_cache_hit_ours", "test_cache_small_validation", floor)
    )
    return ratios
