"""``check_catalog``: every problem of a catalog in one pass, in entry order."""

from __future__ import annotations

from typing import Any

import pytest

from prism_tools.catalog_check import CatalogFinding, check_catalog
from prism_tools.examples import example_tools
from prism_tools.types import ToolDefinition


def tool(name: str, parameters: dict[str, Any] | None = None) -> ToolDefinition:
    return ToolDefinition(name=name, parameters=parameters)


OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def test_the_example_catalog_passes() -> None:
    tools = example_tools()
    result = check_catalog(tools)
    assert result.ok, result.problems
    assert result.tools == len(tools)
    assert result.checked + result.without_schema == len(tools)
    assert result.checked > 0


def test_refused_schemas_carry_the_guard_reason_and_position() -> None:
    tools = [
        tool("fine", OBJECT),
        tool("remote", {"$ref": "https://example.com/schema.json"}),
        tool("deep", nested(100)),
        tool("proto", {"type": "object", "properties": {"__proto__": {"type": "string"}}}),
    ]
    result = check_catalog(tools)
    assert not result.ok
    assert result.checked == 1
    assert [(p.index, p.name, p.kind) for p in result.problems] == [
        (1, "remote", "refused_schema"),
        (2, "deep", "refused_schema"),
        (3, "proto", "refused_schema"),
    ]
    reasons = [p.reason for p in result.problems]
    assert all(reason and reason != "refused_schema" for reason in reasons), reasons
    assert "depth" in result.problems[1].message


def test_duplicates_point_at_the_first_entry() -> None:
    result = check_catalog([tool("a", OBJECT), tool("b", OBJECT), tool("a", OBJECT)])
    assert [(p.index, p.kind) for p in result.problems] == [(2, "duplicate_name")]
    assert "first at entry 0" in result.problems[0].message
    # The duplicate's schema is still checked.
    assert result.checked == 3


def test_missing_schemas_count_and_fail_only_when_required() -> None:
    tools = [tool("a"), tool("b", OBJECT)]
    lenient = check_catalog(tools)
    assert lenient.ok
    assert lenient.without_schema == 1
    strict = check_catalog(tools, require_schema=True)
    assert [(p.index, p.kind) for p in strict.problems] == [(0, "missing_schema")]


def test_load_problems_merge_in_entry_order_with_the_catalog_positions() -> None:
    # Entry 1 could not be loaded, so the tools sit at entries 0 and 2.
    dropped = CatalogFinding(1, None, "invalid_entry", "entry has no name", "invalid_entry")
    result = check_catalog(
        [tool("a", OBJECT), tool("a", {"$ref": "file:///etc/passwd"})],
        indexes=[0, 2],
        load_problems=[dropped],
    )
    assert [(p.index, p.kind) for p in result.problems] == [
        (1, "invalid_entry"),
        (2, "duplicate_name"),
        (2, "refused_schema"),
    ]
    data = result.to_dict()
    assert data["ok"] is False
    assert [problem["index"] for problem in data["problems"]] == [1, 2, 2]  # type: ignore[index,union-attr]


def test_indexes_must_match_the_tools() -> None:
    with pytest.raises(ValueError, match="one entry per tool"):
        check_catalog([tool("a")], indexes=[0, 1])


def test_progress_reports_every_tool() -> None:
    seen: list[tuple[int, int]] = []
    check_catalog(
        [tool(f"t{i}", OBJECT) for i in range(3)], progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]
