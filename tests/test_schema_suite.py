"""The official JSON Schema Test Suite (draft 2020-12) through ``create_json_schema_adapter()``.

Every test case of every required file (``draft2020-12/*.json``, not ``optional/``) must either
give the validity the suite expects, or - only for a schema that needs something the harness
refuses by design - be refused by ``check_schema`` with ``SchemaGuardError``. Refusal is allowed
for: a ``$ref``/``$dynamicRef`` that is not fragment-local (remote, ``urn:``, absolute path, or a
relative reference resolved against an ``$id``), a custom meta-schema named by ``$schema`` (which
would have to be fetched), and the refused keys ``__proto__``/``constructor``/``prototype``.

The refused groups are listed in ``REFUSED_GROUPS`` with the guard reason each must be refused
with; the module fails when the set of refused groups changes in either direction. A wrong answer
is always a failure: there is no allowlist for wrong answers.

The ``optional/`` folder is not asserted here (``format`` is an annotation: format assertions are
off in the adapter). ``python -m tests.test_schema_suite`` prints the per-file results of
``optional/`` as the Markdown table kept in ``docs/validation-conformance.md``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from tests.conftest import shared_data

from prism_tools import SchemaGuardError, create_json_schema_adapter
from prism_tools.validation import JsonSchemaAdapter

SUITE = ("jsonschema-suite", "draft2020-12")

REF = "schema_ref_not_allowed"
KEY = "schema_forbidden_key"
META = (
    "schema_unsupported_draft"  # `$schema` names a custom meta-schema that would have to be fetched
)

# (file relative to draft2020-12/, group description) -> the guard reason it is refused with.
REFUSED_GROUPS: dict[tuple[str, str], str] = {
    ("anchor.json", "Location-independent identifier with absolute URI"): REF,
    ("anchor.json", "Location-independent identifier with base URI change in subschema"): REF,
    ("anchor.json", "same $anchor with different base uri"): REF,
    ("defs.json", "validate definition against metaschema"): REF,
    (
        "dynamicRef.json",
        "A $dynamicRef resolves to the first $dynamicAnchor still in scope that is encountered"
        " when the schema is evaluated",
    ): REF,
    ("dynamicRef.json", "A $dynamicRef without anchor in fragment behaves identical to $ref"): REF,
    (
        "dynamicRef.json",
        "A $dynamicRef with intermediate scopes that don't include a matching $dynamicAnchor"
        " does not affect dynamic scope resolution",
    ): REF,
    (
        "dynamicRef.json",
        "An $anchor with the same name as a $dynamicAnchor is not used for dynamic scope"
        " resolution",
    ): REF,
    (
        "dynamicRef.json",
        "A $dynamicRef without a matching $dynamicAnchor in the same schema resource behaves"
        " like a normal $ref to $anchor",
    ): REF,
    (
        "dynamicRef.json",
        "A $dynamicRef with a non-matching $dynamicAnchor in the same schema resource behaves"
        " like a normal $ref to $anchor",
    ): REF,
    (
        "dynamicRef.json",
        "A $dynamicRef that initially resolves to a schema with a matching $dynamicAnchor"
        " resolves to the first $dynamicAnchor in the dynamic scope",
    ): REF,
    (
        "dynamicRef.json",
        "A $dynamicRef that initially resolves to a schema without a matching $dynamicAnchor"
        " behaves like a normal $ref to $anchor",
    ): REF,
    ("dynamicRef.json", "multiple dynamic paths to the $dynamicRef keyword"): REF,
    ("dynamicRef.json", "after leaving a dynamic scope, it is not used by a $dynamicRef"): REF,
    ("dynamicRef.json", "strict-tree schema, guards against misspelled properties"): REF,
    ("dynamicRef.json", "tests for implementation dynamic anchor and reference link"): REF,
    ("dynamicRef.json", "$ref and $dynamicAnchor are independent of order - $defs first"): REF,
    ("dynamicRef.json", "$ref and $dynamicAnchor are independent of order - $ref first"): REF,
    ("dynamicRef.json", "$ref to $dynamicRef finds detached $dynamicAnchor"): REF,
    ("dynamicRef.json", "$dynamicRef skips over intermediate resources - direct reference"): REF,
    (
        "dynamicRef.json",
        "$dynamicRef avoids the root of each schema, but scopes are still registered",
    ): REF,
    ("properties.json", "properties whose names are Javascript object property names"): KEY,
    ("ref.json", "remote ref, containing refs itself"): REF,
    ("ref.json", "Recursive references between schemas"): REF,
    ("ref.json", "refs with relative uris and defs"): REF,
    ("ref.json", "relative refs with absolute uris and defs"): REF,
    ("ref.json", "$id must be resolved against nearest parent, not just immediate parent"): REF,
    ("ref.json", "order of evaluation: $id and $ref"): REF,
    ("ref.json", "order of evaluation: $id and $ref on nested schema"): REF,
    ("ref.json", "simple URN base URI with $ref via the URN"): REF,
    ("ref.json", "URN base URI with URN and JSON pointer ref"): REF,
    ("ref.json", "URN base URI with URN and anchor ref"): REF,
    ("ref.json", "URN ref with nested pointer ref"): REF,
    ("ref.json", "ref to if"): REF,
    ("ref.json", "ref to then"): REF,
    ("ref.json", "ref to else"): REF,
    ("ref.json", "ref with absolute-path-reference"): REF,
    ("refRemote.json", "remote ref"): REF,
    ("refRemote.json", "fragment within remote ref"): REF,
    ("refRemote.json", "anchor within remote ref"): REF,
    ("refRemote.json", "ref within remote ref"): REF,
    ("refRemote.json", "base URI change"): REF,
    ("refRemote.json", "base URI change - change folder"): REF,
    ("refRemote.json", "base URI change - change folder in subschema"): REF,
    ("refRemote.json", "root ref in remote ref"): REF,
    ("refRemote.json", "remote ref with ref to defs"): REF,
    ("refRemote.json", "Location-independent identifier in remote ref"): REF,
    ("refRemote.json", "retrieved nested refs resolve relative to their URI not $id"): REF,
    ("refRemote.json", "remote HTTP ref with different $id"): REF,
    ("refRemote.json", "remote HTTP ref with different URN $id"): REF,
    ("refRemote.json", "remote HTTP ref with nested absolute ref"): REF,
    ("refRemote.json", "$ref to $ref finds detached $anchor"): REF,
    ("unevaluatedItems.json", "unevaluatedItems with $dynamicRef"): REF,
    ("unevaluatedProperties.json", "unevaluatedProperties with $dynamicRef"): REF,
    ("vocabulary.json", "schema that uses custom metaschema with with no validation vocabulary"): (
        META
    ),
    ("vocabulary.json", "ignore unrecognized optional vocabulary"): META,
}


@dataclass(frozen=True, slots=True)
class Group:
    """One schema of the suite with its test cases."""

    file: str
    description: str
    schema: Any
    tests: tuple[dict[str, Any], ...]

    @property
    def key(self) -> tuple[str, str]:
        return (self.file, self.description)


def _locate(*parts: str) -> Path | None:
    """The data directory, or None when absent. Collection never stops here: without the data,
    one placeholder test asks ``shared_data`` again, which skips, or fails under CI=true."""
    try:
        return shared_data(*parts)
    except (pytest.skip.Exception, pytest.fail.Exception):
        return None


def load_groups(root: Path, *, optional: bool) -> list[Group]:
    """Every group of the required files (or of ``optional/`` and its subfolders)."""
    files = sorted(root.rglob("*.json")) if optional else sorted(root.glob("*.json"))
    groups: list[Group] = []
    for path in files:
        relative = path.relative_to(root).as_posix()
        if optional and not relative.startswith("optional/"):
            continue
        groups.extend(
            Group(relative, group["description"], group["schema"], tuple(group["tests"]))
            for group in json.loads(path.read_text(encoding="utf-8"))
        )
    return groups


@cache
def _required_groups() -> tuple[Group, ...]:
    root = _locate(*SUITE)
    return () if root is None else tuple(load_groups(root, optional=False))


@cache
def _adapter() -> JsonSchemaAdapter:
    return create_json_schema_adapter()


def refusal(adapter: JsonSchemaAdapter, group: Group) -> str | None:
    """The guard reason ``check_schema`` refuses the group's schema with, or None."""
    try:
        adapter.check_schema(group.schema)
    except SchemaGuardError as err:
        return err.reason or "(no reason)"
    return None


def _case_params() -> list[Any]:
    params = [
        pytest.param(
            group,
            index,
            id=f"{group.file.removesuffix('.json')} / {group.description} / {case['description']}",
        )
        for group in _required_groups()
        for index, case in enumerate(group.tests)
    ]
    # Without the data, one placeholder that skips (or fails under CI) through shared_data.
    return params or [pytest.param(None, 0, id="suite-data-missing")]


def _require_data() -> None:
    shared_data(*SUITE)


@pytest.mark.parametrize(("group", "index"), _case_params())
def test_suite_case(group: Group | None, index: int) -> None:
    if group is None:
        _require_data()
        return
    case = group.tests[index]
    adapter = _adapter()
    reason = refusal(adapter, group)
    if reason is not None:
        listed = REFUSED_GROUPS.get(group.key)
        assert listed is not None, (
            f"{group.file} / {group.description}: refused ({reason}) but not in REFUSED_GROUPS"
        )
        assert reason == listed, f"refused with {reason}, REFUSED_GROUPS expects {listed}"
        return
    assert group.key not in REFUSED_GROUPS, "listed in REFUSED_GROUPS but the schema compiles"
    got = adapter.is_valid(group.schema, case["data"])
    assert got is case["valid"], (
        f"{group.file} / {group.description} / {case['description']}: "
        f"expected valid={case['valid']}, got valid={got}"
    )
    # The full issue list agrees with the yes/no answer.
    assert (not adapter.validate(group.schema, case["data"])) is got


def test_refused_groups_are_exactly_the_listed_ones() -> None:
    _require_data()
    adapter = _adapter()
    refused = {
        group.key: reason
        for group in _required_groups()
        if (reason := refusal(adapter, group)) is not None
    }
    unexpected = {key: refused[key] for key in refused.keys() - REFUSED_GROUPS.keys()}
    missing = sorted(REFUSED_GROUPS.keys() - refused.keys())
    assert not unexpected, f"refused but not listed: {unexpected}"
    assert not missing, f"listed but no longer refused: {missing}"
    assert refused == REFUSED_GROUPS


def test_every_required_file_is_run() -> None:
    root = shared_data(*SUITE)
    files = {path.name for path in root.glob("*.json")}
    groups = _required_groups()
    assert {group.file for group in groups} == files
    # The pinned suite commit: 46 files, 383 groups, 1,299 cases (docs/validation-conformance.md).
    assert (len(files), len(groups), sum(len(group.tests) for group in groups)) == (46, 383, 1299)
    # Refusals only ever come from the three reasons the module doc allows.
    assert set(REFUSED_GROUPS.values()) <= {REF, KEY, META}


class OptionalRow(NamedTuple):
    """Results of one ``optional/`` file: cases answered as the suite expects (passed),
    answered otherwise (failed), and cases whose schema ``check_schema`` refused."""

    file: str
    cases: int
    passed: int
    failed: int
    refused: int


def optional_report(root: Path) -> list[OptionalRow]:
    """One row per ``optional/`` file, in file order."""
    adapter = create_json_schema_adapter()
    counts: dict[str, Counter[str]] = {}
    for group in load_groups(root, optional=True):
        tally = counts.setdefault(group.file.removeprefix("optional/"), Counter())
        if refusal(adapter, group) is not None:
            tally["refused"] += len(group.tests)
            continue
        for case in group.tests:
            right = adapter.is_valid(group.schema, case["data"]) is case["valid"]
            tally["passed" if right else "failed"] += 1
    return [
        OptionalRow(name, tally.total(), tally["passed"], tally["failed"], tally["refused"])
        for name, tally in sorted(counts.items())
    ]


def main() -> None:
    root = shared_data(*SUITE)
    groups = load_groups(root, optional=False)
    adapter = create_json_schema_adapter()
    refused = [group for group in groups if refusal(adapter, group) is not None]
    cases = sum(len(group.tests) for group in groups)
    refused_cases = sum(len(group.tests) for group in refused)
    print(
        f"required: {len({g.file for g in groups})} files, {len(groups)} groups, {cases} cases;"
        f" refused {len(refused)} groups / {refused_cases} cases;"
        f" evaluated {cases - refused_cases} cases"
    )
    rows = optional_report(root)
    print("\n| file | cases | passed | failed | refused |\n|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| `{row.file}` | {row.cases} | {row.passed} | {row.failed} | {row.refused} |")
    totals = [sum(column) for column in list(zip(*rows, strict=True))[1:]]
    print("| **total** | " + " | ".join(f"**{value}**" for value in totals) + " |")


if __name__ == "__main__":
    main()
