from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.reference.filter import permits

from prism_tools import ToolDefinition, ToolFilter, create_tool_registry, filter_tools


def tools(*names: str) -> list[ToolDefinition]:
    return [ToolDefinition(name=name) for name in names]


def names(listed: list[ToolDefinition]) -> list[str]:
    return [item.name for item in listed]


def test_no_filter_returns_everything_in_order() -> None:
    listed = tools("a", "b")
    assert filter_tools(listed) == listed
    assert filter_tools(listed) is not listed


def test_deny_removes_and_allow_for_unknown_names_creates_nothing() -> None:
    listed = tools("read", "write")
    assert names(filter_tools(listed, {"deny": ["write"]})) == ["read"]
    assert names(filter_tools(listed, {"allow": ["read", "ghost"]})) == ["read"]


def test_matching_is_exact() -> None:
    listed = tools("read", "read_file", "Read")
    assert names(filter_tools(listed, ToolFilter(allow=["read"]))) == ["read"]
    assert names(filter_tools(listed, ToolFilter(deny=["read"]))) == ["read_file", "Read"]


def test_several_filters_compose() -> None:
    listed = tools("a", "b", "c", "d")
    filters = [{"allow": ["a", "b", "c"]}, ToolFilter(allow=["b", "c", "d"], deny=["c"]), {}]
    assert names(filter_tools(listed, filters)) == ["b"]


def test_empty_allow_restricts_nothing() -> None:
    listed = tools("a", "b")
    assert names(filter_tools(listed, ToolFilter(allow=[]))) == ["a", "b"]
    assert ToolFilter(allow=[]).allow is None
    assert ToolFilter().is_permissive()


def test_registry_filter_is_in_registration_order() -> None:
    registry = create_tool_registry(tools("z", "a", "m"))
    assert names(filter_tools(registry, ToolFilter(allow=["a", "z"]))) == ["z", "a"]


def test_filter_is_hashable_and_equal_by_meaning() -> None:
    one = ToolFilter(allow=["b", "a", "a"], deny=["x"])
    two = ToolFilter(allow=("a", "b"), deny={"x"})
    assert one == two
    assert hash(one) == hash(two)
    assert len({one, two, ToolFilter(allow=["a"])}) == 2
    assert one != "not a filter"
    assert one.allow == frozenset({"a", "b"})
    assert one.deny == frozenset({"x"})


def test_all_of_intersects_allows_and_unions_denies() -> None:
    combined = ToolFilter.all_of(
        [ToolFilter(allow=["a", "b"]), ToolFilter(allow=["b", "c"], deny=["d"])]
    )
    assert combined.allow == frozenset({"b"})
    assert combined.deny == frozenset({"d"})
    disjoint = ToolFilter.all_of([ToolFilter(allow=["a"]), ToolFilter(allow=["b"])])
    assert disjoint.allow == frozenset()
    assert filter_tools(tools("a", "b"), disjoint) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"allow": [1]},
        {"deny": ["ok", None]},
        {"allow": "echo"},
        {"allow": 5},
    ],
)
def test_non_string_names_are_type_errors(bad: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        filter_tools(tools("echo"), bad)  # type: ignore[arg-type]


def test_a_filter_name_holding_a_lone_surrogate_is_refused_not_dropped() -> None:
    # Dropping it would turn allow=["x\ud800"] (nothing passes) into no restriction at all.
    for field in ("allow", "deny"):
        with pytest.raises(ValueError, match=f"{field} names must be Unicode text"):
            ToolFilter(**{field: ["ok", "x\ud800"]})


def test_a_name_holding_a_lone_surrogate_passes_only_where_no_allow_list_restricts() -> None:
    # No list can hold such a name: it passes a deny list and fails every allow list.
    assert ToolFilter(deny=["a"]).permits("a\ud800")
    assert not ToolFilter(allow=["a"]).permits("a\ud800")
    assert ToolFilter(allow=["a"]).apply(["a", "a\ud800"]) == [0]
    assert ToolFilter(deny=["a"]).apply(["a", "a\ud800"]) == [1]


def test_unknown_filter_keys_and_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="allow"):
        filter_tools(tools("a"), {"allowed": ["a"]})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        filter_tools(tools("a"), "a")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        filter_tools(tools("a"), 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        filter_tools([{"name": "a"}], None)  # type: ignore[list-item]


name_strategy = st.sampled_from(["a", "b", "c", "d", "e"])
spec_strategy = st.tuples(st.lists(name_strategy, max_size=4), st.lists(name_strategy, max_size=3))


@given(st.lists(spec_strategy, max_size=4), st.lists(name_strategy, max_size=8, unique=True))
def test_filter_matches_the_reference(
    specs: list[tuple[list[str], list[str]]], tool_names: list[str]
) -> None:
    listed = tools(*tool_names)
    compiled = [ToolFilter(allow=allow, deny=deny) for allow, deny in specs]
    expected = [name for name in tool_names if permits(name, specs)]
    assert names(filter_tools(listed, compiled)) == expected
    assert names(filter_tools(create_tool_registry(listed), compiled)) == expected
