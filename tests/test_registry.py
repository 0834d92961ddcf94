from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import threading
from types import FrameType
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from prism_tools import (
    DuplicateToolError,
    PrismError,
    ToolCall,
    ToolDefinition,
    ToolExecutionContext,
    ToolRegistry,
    UnknownToolError,
    create_tool_registry,
    dispatch_tool_call,
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


def test_the_core_insert_puts_the_tool_in_its_slot_in_the_same_call() -> None:
    table = Registry()
    tools: list[Any] = []
    first, second, replacement = tool("a", 1), tool("b", 2), tool("a", 3)
    assert table.insert("a", first, tools) == (0, False)
    assert table.insert("b", second, tools) == (1, False)
    assert [id(held) for held in tools] == [id(first), id(second)]
    assert table.insert("a", replacement, tools) == (0, True)
    assert [id(held) for held in tools] == [id(replacement), id(second)]
    assert table.names() == ["a", "b"]
    assert (table.slot("a"), table.slot("b"), len(table)) == (0, 1, 2)


def test_the_core_insert_refuses_a_tool_list_out_of_step_and_changes_neither() -> None:
    table = Registry()
    tools: list[Any] = []
    table.insert("a", tool("a"), tools)
    table.insert("b", tool("b"), tools)
    for wrong in ([tools[0]], [*tools, tool("x")], []):
        held = list(wrong)
        for name in ("a", "c"):  # a replacement and an addition
            with pytest.raises(RuntimeError, match="the tool list does not match the name table"):
                table.insert(name, tool(name), wrong)
            assert [id(item) for item in wrong] == [id(item) for item in held]
            assert table.names() == ["a", "b"]
            assert len(table) == 2
    assert [item.name for item in tools] == ["a", "b"]


def test_a_name_the_core_refuses_leaves_the_tool_list_as_it_was() -> None:
    # The list is appended to before the name table changes; a refusal takes the tool out again.
    strict = Registry("error")
    tools: list[Any] = []
    first = tool("a")
    strict.insert("a", first, tools)
    refusals: list[tuple[type[Exception], str]] = [
        (DuplicateToolError, "a"),
        (ValueError, "x" * 5000),
        (ValueError, "a\ud800"),
    ]
    for error, name in refusals:
        with pytest.raises(error):
            strict.insert(name, tool("b"), tools)
        assert tools == [first]
        assert strict.names() == ["a"]


def test_a_replaced_tool_that_looks_a_tool_up_when_freed_does_not_hang() -> None:
    # Freeing the replaced tool runs its code. Were the name table still locked for writing, the
    # lookup would wait for it forever with the GIL held: so in a child process, with a timeout.
    script = textwrap.dedent(
        """
        from prism_tools._core import Registry

        table, tools, seen = Registry(), [], []

        class LooksUp:
            def __del__(self):
                seen.append((table.slot("a"), table.names(), len(table), "a" in table))
                seen.append([type(item).__name__ for item in tools])

        table.insert("a", LooksUp(), tools)
        table.insert("b", "kept", tools)
        print(table.insert("a", "replacement", tools))
        print(seen)
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert child.returncode == 0, child.stderr
    assert child.stderr == ""
    assert child.stdout.splitlines() == ["(0, True)", "[(0, ['a', 'b'], 2, True), ['str', 'str']]"]


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


class Interrupted(BaseException):
    """What a signal handler (Ctrl-C, a timeout) raises at whatever instruction is running."""


def register_interrupted_at(registry: ToolRegistry, definition: ToolDefinition, step: int) -> bool:
    """``registry.register(definition)`` with ``Interrupted`` raised before the instruction of
    ``register`` numbered ``step`` (from 0, in the order they run), as a signal handler could
    raise it; whether the registration got that far (if not, it ran to its end)."""
    code = ToolRegistry.register.__code__
    ran = 0

    def instruction(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal ran
        if event == "opcode":
            ran += 1
            if ran == step + 1:
                raise Interrupted
        return instruction

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is not code:
            return None
        frame.f_trace_opcodes = True
        return instruction

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        registry.register(definition)
    except Interrupted:
        pass
    finally:
        sys.settrace(previous)
    if registry._lock.locked():
        # Raised between the end of the with block and its __exit__ call, a gap no Python code
        # can close: the lock is given back here so the rest can be checked.
        registry._lock.release()
    return ran > step


def assert_in_step(registry: ToolRegistry) -> None:
    names = registry.names()
    assert [definition.name for definition in registry.list()] == names
    assert len(registry.list()) == len(registry)
    for name in names:
        found = registry.get(name)
        assert found is not None
        assert found.name == name


async def test_a_registration_interrupted_at_any_instruction_leaves_names_and_tools_in_step() -> (
    None
):
    ran: list[str] = []

    def runs(name: str, description: str = "") -> ToolDefinition:
        return ToolDefinition(name, execute=lambda a, c: ran.append(name), description=description)

    deny = {"deny": ["delete_all"]}
    for step in itertools.count():
        assert step < 1000, "register never ran to its end"
        reached = False
        for name in ("a", "new"):  # a replacement and an addition
            registry = create_tool_registry([runs("a"), runs("b")])
            reached |= register_interrupted_at(registry, runs(name, "interrupted"), step)
            assert_in_step(registry)
            assert registry.names() in (["a", "b"], ["a", "b", "new"])
            # Registrations after the interrupted one resolve to their own tools.
            for later in ("read_file", "delete_all", "noop"):
                registry.register(runs(later))
            assert_in_step(registry)
            assert "delete_all" not in [definition.name for definition in registry.filter(deny)]
            for target in registry.names():
                ran.clear()
                context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c")
                result = await dispatch_tool_call(
                    ToolCall("c", target, {}), registry, context, filter=deny
                )
                if target == "delete_all":
                    assert result.metadata == {"blocked_reason": "tool_denied"}
                    assert ran == []
                else:
                    assert result.error is None, (step, name, target)
                    assert ran == [target], (step, name, target)
        if not reached:
            break


def test_a_replaced_tool_that_lists_the_registry_when_freed_does_not_hang() -> None:
    # register holds the registry's lock while it replaces; the replaced tool is freed after it
    # is released, so its code may list the registry. A hang would hold the GIL: a child process.
    script = textwrap.dedent(
        """
        from prism_tools import ToolDefinition, create_tool_registry

        registry = create_tool_registry()

        class Body:
            def __call__(self, arguments, context):
                return 1

            def __del__(self):
                print([tool.name for tool in registry.list()], [tool.name for tool in registry])

        registry.register(ToolDefinition("a", execute=Body()))
        registry.register(ToolDefinition("a", execute=lambda arguments, context: 2))
        print("registered")
        """
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["['a'] ['a']", "registered"]


def test_the_core_insert_takes_an_exact_list_only() -> None:
    # A list subclass's own methods would run while the name table is locked.
    class Watched(list[Any]):
        def __delitem__(self, index: Any) -> None:
            raise AssertionError("ran under the lock")

    table = Registry()
    with pytest.raises(TypeError, match="tools must be a list"):
        table.insert("a", tool("a"), Watched())
    assert len(table) == 0
