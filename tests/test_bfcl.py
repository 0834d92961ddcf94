"""BFCL function schemas and ground truth through the JSON Schema adapter.

Data: ``bfcl/functions.jsonl`` (one function per line, ``id`` + ``index`` within the entry) and
``bfcl/answers.jsonl`` (per entry a list of calls ``{function: {argument: [options...]}}``), see
``bfcl/SOURCE.md``. A call is paired with the function of the same name among the functions of
the same entry ``id`` (names are unique within an entry).

The parameter schemas are rewritten by ``tests/bfcl_normalise.py`` (every rule is in its module
doc and in ``docs/validation-conformance.md``). Then:

- every one of the 8,726 normalised schemas passes ``check_schema`` with the default limits,
  while the raw ones are refused (``dict`` is not a JSON Schema type);
- the ground-truth calls, with the first acceptable value of each argument, validate at an exact
  count, and the calls that do not are sorted into committed categories, so any change in the
  data, the normalisation or the validator shows up here.

``python -m tests.test_bfcl`` prints the numbers kept in the doc.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.bfcl_normalise import (
    JSON_TYPES,
    OMIT,
    TYPE_NAMES,
    enum_type_conflicts,
    first_choice,
    normalise,
    options,
    type_names,
)
from tests.conftest import shared_data

from prism_tools import SchemaGuardError, check_schema, create_json_schema_adapter
from prism_tools.validation import JsonSchemaAdapter

FUNCTION_COUNT = 8726
CALL_COUNT = 3302
ANSWER_ENTRIES = 2501
# Calls whose first acceptable argument values validate against the normalised schema.
FIRST_CHOICE_VALID = 3101
# Calls for which some choice among the acceptable values (omission included) validates.
SOME_CHOICE_VALID = 3264

# Per category: (calls valid with the first choice, calls).
VALID_BY_CATEGORY: dict[str, tuple[int, int]] = {
    "simple_python": (399, 400),
    "simple_java": (90, 100),
    "simple_javascript": (42, 50),
    "multiple": (200, 200),
    "parallel": (538, 540),
    "parallel_multiple": (605, 607),
    "live_simple": (217, 258),
    "live_multiple": (922, 1053),
    "live_parallel": (38, 39),
    "live_parallel_multiple": (50, 55),
}

# Why the other calls fail, by (first-choice failure kind, whether another acceptable choice
# validates). Kinds, most telling first (a call takes the first kind any of its issues has):
# - missing_required: the ground truth leaves out an argument the schema requires;
# - source_expression: a string holding Java/JavaScript source (a variable name, a constant such
#   as ResultSet.CONCUR_READ_ONLY, a call) where the schema wants an array, object or integer;
# - string_for_typed: another string where the schema wants a non-string type (placeholders
#   such as "dontcare", Python expressions such as "data['sales']");
# - wrong_json_type: a non-string value of the wrong JSON type (false for a parameter typed as
#   a string with the enum ["True", "False", "dontcare"], an integer for a string enum);
# - outside_enum: a value of the right type that is not in the enum (often the schema's own
#   default, such as "N/A", or "dontcare");
# - null: null for a typed or enum parameter (BFCL's way to say "not given").
FAILURE_KINDS: dict[tuple[str, bool], int] = {
    ("missing_required", False): 4,
    ("source_expression", False): 18,
    ("string_for_typed", False): 2,
    ("string_for_typed", True): 11,
    ("wrong_json_type", False): 6,
    ("wrong_json_type", True): 12,
    ("outside_enum", False): 7,
    ("outside_enum", True): 33,
    ("null", False): 1,
    ("null", True): 107,
}
# Subschemas (over all 8,726 documents) whose `enum` has members their `type` does not allow.
ENUM_CONFLICTS_RAW = {"boolean": 70, "integer": 44, "array": 22}
ENUM_CONFLICTS_NORMALISED = {"boolean": 70, "integer": 44}
KIND_ORDER = (
    "missing_required",
    "source_expression",
    "string_for_typed",
    "wrong_json_type",
    "outside_enum",
    "null",
)
SOURCE_CODE_CATEGORIES = frozenset({"simple_java", "simple_javascript"})


@dataclass(frozen=True, slots=True)
class Function:
    entry: str
    index: int
    category: str
    name: str
    raw: dict[str, Any]
    schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    entry: str
    category: str
    position: int
    function: Function
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Bfcl:
    functions: list[Function]
    function_lines: int
    calls: list[Call]
    answer_entries: int


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load(root: Path) -> Bfcl:
    functions_path = root / "functions.jsonl"
    functions = [
        Function(
            entry=row["id"],
            index=row["index"],
            category=row["category"],
            name=row["function"]["name"],
            raw=row["function"]["parameters"],
            schema=normalise(row["function"]["parameters"]),
        )
        for row in _lines(functions_path)
    ]
    with functions_path.open("rb") as handle:
        function_lines = sum(1 for line in handle if line.strip())
    by_entry: dict[str, dict[str, Function]] = {}
    for function in functions:
        offered = by_entry.setdefault(function.entry, {})
        assert function.name not in offered, f"{function.entry}: {function.name} offered twice"
        offered[function.name] = function
    calls = []
    entries = 0
    for row in _lines(root / "answers.jsonl"):
        entries += 1
        for position, call in enumerate(row["ground_truth"]):
            ((name, arguments),) = call.items()
            offered = by_entry.get(row["id"], {})
            assert name in offered, f"{row['id']}: ground truth calls {name}, not offered"
            calls.append(Call(row["id"], row["category"], position, offered[name], arguments))
    return Bfcl(functions, function_lines, calls, entries)


@pytest.fixture(scope="module")
def bfcl() -> Bfcl:
    return load(shared_data("bfcl"))


@pytest.fixture(scope="module")
def adapter() -> JsonSchemaAdapter:
    # Default limits, except room for every distinct schema in the compiled cache.
    return create_json_schema_adapter(max_compiled_schemas=16384)


def _at(value: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        value = value[int(token)] if isinstance(value, list) else value[token]
    return value


def issue_kind(call: Call, instance: Mapping[str, Any], path: str, keyword: str) -> str:
    """The failure kind of one issue (see ``FAILURE_KINDS``)."""
    if keyword == "required":
        return "missing_required"
    value = _at(instance, path)
    if value is None:
        return "null"
    if keyword == "type":
        if isinstance(value, str):
            if call.category in SOURCE_CODE_CATEGORIES:
                return "source_expression"
            return "string_for_typed"
        return "wrong_json_type"
    if keyword == "enum":
        return "outside_enum"
    return f"other:{keyword}"


def some_choice(adapter: JsonSchemaAdapter, call: Call) -> dict[str, Any] | None:
    """Arguments built from acceptable options that validate, or None. Each argument takes its
    first option that its own property schema accepts (omission where it is not required);
    BFCL schemas tie properties together only through ``required``. Inside a dict argument the
    first choice is kept (alternatives are searched at the top level only)."""
    schema = call.function.schema
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    chosen: dict[str, Any] = {}
    for name, acceptable in call.arguments.items():
        for option in options(acceptable):
            if option is OMIT:
                if name not in required:
                    break
                continue
            subschema = properties.get(name)
            if subschema is None or adapter.is_valid(subschema, option):
                chosen[name] = option
                break
        else:
            return None
    return chosen if adapter.is_valid(schema, chosen) else None


@dataclass(frozen=True, slots=True)
class Outcome:
    valid_by_category: dict[str, tuple[int, int]]
    failures: Counter[tuple[str, bool]]
    some_choice_valid: int
    examples: dict[tuple[str, bool], list[str]]


def evaluate(adapter: JsonSchemaAdapter, data: Bfcl) -> Outcome:
    valid: Counter[str] = Counter()
    total: Counter[str] = Counter()
    failures: Counter[tuple[str, bool]] = Counter()
    examples: dict[tuple[str, bool], list[str]] = {}
    for call in data.calls:
        total[call.category] += 1
        instance = first_choice(call.arguments)
        issues = adapter.validate(call.function.schema, instance)
        if not issues:
            valid[call.category] += 1
            continue
        kinds = {issue_kind(call, instance, i.path, i.keyword) for i in issues}
        kind = min(kinds, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else -1)
        key = (kind, some_choice(adapter, call) is not None)
        failures[key] += 1
        examples.setdefault(key, []).append(f"{call.entry}#{call.position} {call.function.name}")
    return Outcome(
        valid_by_category={name: (valid[name], total[name]) for name in total},
        failures=failures,
        some_choice_valid=sum(valid.values()) + sum(n for (_, ok), n in failures.items() if ok),
        examples=examples,
    )


@pytest.fixture(scope="module")
def outcome(adapter: JsonSchemaAdapter, bfcl: Bfcl) -> Outcome:
    return evaluate(adapter, bfcl)


# --- the normalisation itself, without the data ---------------------------------------------


@pytest.mark.parametrize(
    ("bfcl_type", "json_type"),
    [
        ("dict", "object"),
        ("float", "number"),
        ("tuple", "array"),
        ("String", "string"),
        ("char", "string"),
        ("Boolean", "boolean"),
        ("Array", "array"),
        ("ArrayList", "array"),
        ("HashMap", "object"),
        ("long", "integer"),
        ("Integer", "integer"),
        ("int", "integer"),
        ("short", "integer"),
        ("byte", "integer"),
        ("double", "number"),
        ("integer", "integer"),
        ("string", "string"),
    ],
)
def test_type_names_are_mapped(bfcl_type: str, json_type: str) -> None:
    assert normalise({"type": bfcl_type}) == {"type": json_type}


@pytest.mark.parametrize("unconstrained", ["any", ""])
def test_any_and_empty_type_drop_the_constraint(unconstrained: str) -> None:
    assert normalise({"type": unconstrained, "description": "x"}) == {"description": "x"}
    assert normalise({"type": ["string", unconstrained]}) == {}


def test_normalisation_reaches_every_subschema_and_keeps_data() -> None:
    raw = {
        "type": "dict",
        "properties": {
            "point": {"type": "tuple", "items": {"type": "float"}, "optional": True},
            "pairs": {"type": "Array", "items": [{"type": "String"}, {"type": "long"}]},
            "mode": {"type": "String", "enum": ["dict", "any"], "default": "dict"},
        },
        "required": ["point"],
        "optional": ["mode"],
    }
    assert normalise(raw) == {
        "type": "object",
        "properties": {
            "point": {"type": "array", "items": {"type": "number"}},
            "pairs": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
            "mode": {"type": "string", "enum": ["dict", "any"], "default": "dict"},
        },
        "required": ["point"],
    }
    assert raw["type"] == "dict", "the input is not changed"


def test_an_enum_beside_an_array_type_lists_the_items() -> None:
    raw = {"type": "array", "items": {"type": "String"}, "enum": ["a", "b"], "default": ["a"]}
    assert normalise(raw) == {
        "type": "array",
        "items": {"type": "string", "enum": ["a", "b"]},
        "default": ["a"],
    }
    # An enum of arrays is a real enum of arrays; an items enum of its own is left alone.
    of_arrays = {"type": "array", "enum": [["a"], ["b"]]}
    assert normalise(of_arrays) == of_arrays
    both = {"type": "array", "items": {"enum": ["a"]}, "enum": ["b"]}
    assert normalise(both) == both


def test_unknown_type_names_fail_loudly() -> None:
    with pytest.raises(ValueError, match="Vector"):
        normalise({"type": "dict", "properties": {"v": {"type": "Vector"}}})


def test_first_choice_follows_the_answer_format() -> None:
    arguments = {
        "city": ["Paris", "paris"],
        "unit": ["", "celsius"],
        "days": [""],
        "filters": [{"limit": [5, 10], "tags": ["", ["a", "b"]], "skip": [""]}],
        "points": [[{"x": [1], "y": [2, 3]}]],
    }
    assert first_choice(arguments) == {
        "city": "Paris",
        "unit": "celsius",
        "filters": {"limit": 5, "tags": ["a", "b"]},
        "points": [{"x": 1, "y": 2}],
    }
    assert options(["", 1, {"k": ["", "v"]}]) == [OMIT, 1, {"k": "v"}]


# --- the data ------------------------------------------------------------------------------


def test_every_function_is_loaded_and_paired(bfcl: Bfcl) -> None:
    assert bfcl.function_lines == FUNCTION_COUNT
    assert len(bfcl.functions) == FUNCTION_COUNT
    indices: dict[str, list[int]] = {}
    for function in bfcl.functions:
        indices.setdefault(function.entry, []).append(function.index)
    assert all(found == list(range(len(found))) for found in indices.values())
    assert bfcl.answer_entries == ANSWER_ENTRIES
    assert len(bfcl.calls) == CALL_COUNT


def test_type_names_in_the_data_are_all_known(bfcl: Bfcl) -> None:
    seen = Counter(name for f in bfcl.functions for name in type_names(f.raw))
    assert set(seen) <= set(TYPE_NAMES) | JSON_TYPES, set(seen) - set(TYPE_NAMES) - JSON_TYPES
    after = {name for f in bfcl.functions for name in type_names(f.schema)}
    assert after <= JSON_TYPES
    assert not [f.entry for f in bfcl.functions if '"optional":' in json.dumps(f.schema)]


def test_enum_and_type_conflicts_are_counted(bfcl: Bfcl) -> None:
    raw = Counter(name for f in bfcl.functions for name in enum_type_conflicts(f.raw))
    normalised = Counter(name for f in bfcl.functions for name in enum_type_conflicts(f.schema))
    assert dict(raw) == ENUM_CONFLICTS_RAW
    assert dict(normalised) == ENUM_CONFLICTS_NORMALISED


def test_all_normalised_schemas_pass_check_schema_with_default_limits(bfcl: Bfcl) -> None:
    refused: dict[str, str] = {}
    passed = 0
    for function in bfcl.functions:
        try:
            check_schema(function.schema)
        except SchemaGuardError as err:
            refused[f"{function.entry}/{function.index}"] = f"{err.reason}: {err}"
        else:
            passed += 1
    assert not refused, dict(list(refused.items())[:10])
    assert passed == FUNCTION_COUNT


def test_raw_schemas_are_refused(adapter: JsonSchemaAdapter, bfcl: Bfcl) -> None:
    # As published, every schema declares `"type": "dict"` at the top: the compiler refuses it.
    reasons: Counter[str | None] = Counter()
    for function in bfcl.functions:
        with pytest.raises(SchemaGuardError) as caught:
            adapter.check_schema(function.raw)
        reasons[caught.value.reason] += 1
    assert reasons == {"schema_invalid": FUNCTION_COUNT}


def test_ground_truth_validates_at_the_exact_rate(outcome: Outcome) -> None:
    valid = sum(v for v, _ in outcome.valid_by_category.values())
    calls = sum(n for _, n in outcome.valid_by_category.values())
    assert (valid, calls) == (FIRST_CHOICE_VALID, CALL_COUNT)
    assert outcome.valid_by_category == VALID_BY_CATEGORY


def test_ground_truth_failures_fall_in_the_known_categories(outcome: Outcome) -> None:
    assert dict(outcome.failures) == FAILURE_KINDS, outcome.examples
    assert sum(FAILURE_KINDS.values()) == CALL_COUNT - FIRST_CHOICE_VALID
    assert outcome.some_choice_valid == SOME_CHOICE_VALID


def main() -> None:
    data = load(shared_data("bfcl"))
    adapter = create_json_schema_adapter(max_compiled_schemas=16384)
    raw_names = Counter(name for f in data.functions for name in type_names(f.raw))
    print("type names:", dict(raw_names.most_common()))
    print("functions:", len(data.functions), "calls:", len(data.calls))
    result = evaluate(adapter, data)
    print("valid by category:", result.valid_by_category)
    print("some choice valid:", result.some_choice_valid)
    for key in sorted(result.failures, key=lambda k: (KIND_ORDER.index(k[0]), not k[1])):
        print(key, result.failures[key], result.examples[key][:8])


if __name__ == "__main__":
    main()
