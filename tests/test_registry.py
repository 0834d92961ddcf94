from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from prism_tools import (
    DuplicateToolError,
    PrismError,
    ToolDefinition,
    ToolRegistry,
    UnknownToolError,
    create_tool_registry,
)
from prism_tools._core import Registry


def tool(name: str, marker: Any = None) -> ToolDefinition:
    return ToolDefinition(name=name, execute=lambda args, ctx: marker, metadata={"marker": marker})


def test_register_get_resolve_list() -> None:
    echo, read = tool("echo"), tool("read")
    registry = create_tool_registry([echo])
    assert registry.register(read) is read
    assert registry.get("echo") is echo
    assert registry.resolve("read") is read
    assert registry.list() == [echo, read]
    assert registry.names() == ["echo", "read"]
    assert len(registry) == 2
    assert "echo" in registry
    assert "missing" not in registry
    assert registry.get("missing") is None


def test_resolve_unknown_raises_lookup_error_with_exact_text() -> None:
    registry = create_tool_registry()
    with pytest.raises(UnknownToolError, match=r"^Unknown tool: missing$") as caught:
        registry.resolve("missing")
    assert isinstance(caught.value, LookupError)
    assert isinstance(caught.value, PrismError)
    assert caught.value.code == "ERR_PRISM_UNKNOWN_TOOL"


def test_replace_keeps_original_position() -> None:
    first, second, replacement = tool("a", 1), tool("b", 2), tool("a", 3)
    registry = create_tool_registry([first, second])
    registry.register(replacement)
    assert registry.list() == [replacement, second]
    assert registry.resolve("a") is replacement


def test_error_policy_refuses_duplicates_on_register_and_in_constructor() -> None:
    registry = create_tool_registry([tool("echo")], duplicate="error")
    with pytest.raises(DuplicateToolError, match=r"^Duplicate tool: echo$") as caught:
        registry.register(tool("echo"))
    assert caught.value.code == "ERR_PRISM_DUPLICATE_TOOL"
    assert len(registry) == 1
    with pytest.raises(DuplicateToolError, match=r"^Duplicate tool: echo$"):
        create_tool_registry([tool("echo"), tool("echo")], duplicate="error")


def test_list_returns_a_fresh_list() -> None:
    registry = create_tool_registry([tool("a")])
    listed = registry.list()
    listed.clear()
    assert len(registry.list()) == 1


def test_parameters_pass_through_by_identity() -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    definition = ToolDefinition(name="echo", parameters=schema)
    registry = create_tool_registry([definition])
    assert registry.resolve("echo").parameters is schema


@pytest.mark.parametrize("policy", ["", "REPLACE", "ignore"])
def test_bad_duplicate_policy_is_a_value_error(policy: str) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        create_tool_registry(duplicate=policy)  # type: ignore[arg-type]


def test_non_tool_registration_is_a_type_error() -> None:
    registry = create_tool_registry()
    with pytest.raises(TypeError, match="ToolDefinition"):
        registry.register({"name": "echo"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="single tool"):
        create_tool_registry(tool("echo"))  # type: ignore[arg-type]


def test_bad_names_are_refused_at_definition() -> None:
    with pytest.raises(ValueError, match="empty"):
        ToolDefinition(name="")
    with pytest.raises(TypeError, match="string"):
        ToolDefinition(name=42)  # type: ignore[arg-type]


def test_oversized_name_is_refused_by_the_core() -> None:
    registry = create_tool_registry()
    with pytest.raises(ValueError, match="4096"):
        registry.register(tool("x" * 5000))
    assert len(registry) == 0
    assert registry.list() == []


def test_non_string_lookups_do_not_raise() -> None:
    registry = create_tool_registry([tool("1")])
    assert registry.get(1) is None  # type: ignore[arg-type]
    assert 1 not in registry
    with pytest.raises(UnknownToolError):
        registry.resolve(None)  # type: ignore[arg-type]


def test_a_name_holding_a_lone_surrogate_is_refused_and_never_found() -> None:
    # A JSON decoder turns a model's "\ud800" into a lone surrogate, which UTF-8 cannot carry.
    registry = create_tool_registry([tool("a")])
    with pytest.raises(ValueError, match="lone surrogate"):
        registry.register(tool("a\ud800"))
    # The core's name table refuses it too, whatever made the definition.
    with pytest.raises(ValueError, match="Invalid tool name: the name holds a lone surrogate"):
        Registry().insert("a\ud800", tool("b"), [])
    assert registry.names() == ["a"]
    assert registry.get("a\ud800") is None
    assert "a\ud800" not in registry
    with pytest.raises(UnknownToolError):
        registry.resolve("a\ud800")


class RegistryModel(RuleBasedStateMachine):
    """The registry behaves like an insertion-ordered dict under the replace policy."""

    def __init__(self) -> None:
        super().__init__()
        self.registry = ToolRegistry()
        self.model: dict[str, ToolDefinition] = {}

    @rule(name=st.sampled_from(["a", "b", "c", "d", "é", "a.b", "x-y"]), marker=st.integers())
    def register(self, name: str, marker: int) -> None:
        definition = tool(name, marker)
        self.registry.register(definition)
        self.model[name] = definition

    @rule(name=st.text(max_size=3))
    def lookup(self, name: str) -> None:
        assert self.registry.get(name) is self.model.get(name)
        assert (name in self.registry) == (name in self.model)

    @invariant()
    def same_order_and_size(self) -> None:
        assert self.registry.list() == list(self.model.values())
        assert self.registry.names() == list(self.model)
        assert len(self.registry) == len(self.model)


TestRegistryModel = RegistryModel.TestCase


def test_a_listing_taken_while_another_thread_replaces_a_tool_holds_each_name_once() -> None:
    registry = create_tool_registry([ToolDefinition(name) for name in "abc"])
    stop = threading.Event()

    def replace_forever() -> None:
        while not stop.is_set():
            registry.register(ToolDefinition("a", description="again"))

    writer = threading.Thread(target=replace_forever)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often, so a listing lands mid-replace
    writer.start()
    try:
        listings = [[tool.name for tool in registry.list()] for _ in range(20_000)]
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(interval)
    assert all(names == ["a", "b", "c"] for names in listings)
