"""The tool registry and exact-name filters.

The name table (name -> slot, in first-registration order) lives in the Rust core; this facade
keeps the ``ToolDefinition`` objects in a list indexed by slot. Replacing a tool keeps its slot,
so listings stay in first-registration order.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Literal, Protocol, TypeAlias

from prism_tools._core import Registry as _NameTable
from prism_tools._core import ToolFilter
from prism_tools.errors import UnknownToolError
from prism_tools.types import ToolDefinition

DuplicatePolicy = Literal["replace", "error"]
FilterSpec: TypeAlias = "ToolFilter | Mapping[str, Iterable[str] | None]"
FilterInput: TypeAlias = "FilterSpec | Sequence[FilterSpec]"

_FILTER_KEYS = frozenset(("allow", "deny"))


class ToolRegistry:
    """Tools an agent may use, by name, in registration order."""

    __slots__ = ("__weakref__", "_check_schemas", "_lock", "_names", "_tools")

    def __init__(
        self,
        tools: Iterable[ToolDefinition] = (),
        *,
        duplicate: DuplicatePolicy = "replace",
        check_schemas: bool | SchemaChecker = False,
    ) -> None:
        if not isinstance(duplicate, str):
            raise TypeError('duplicate must be "replace" or "error"')
        self._check_schemas: SchemaChecker | None = _schema_checker(check_schemas)
        self._names = _NameTable(duplicate)
        self._tools: list[ToolDefinition] = []
        self._lock = threading.Lock()
        if isinstance(tools, ToolDefinition):
            raise TypeError("tools must be a collection of ToolDefinition, not a single tool")
        for tool in tools:
            self.register(tool)

    @property
    def duplicate(self) -> DuplicatePolicy:
        """The duplicate policy: ``"replace"`` or ``"error"``."""
        return self._names.duplicate  # type: ignore[return-value]

    def register(self, tool: ToolDefinition) -> ToolDefinition:
        """Add ``tool``, or replace the tool of the same name in place (``"replace"`` policy).

        Raises ``DuplicateToolError`` under the ``"error"`` policy, and ``SchemaGuardError`` when
        the registry checks schemas and ``tool.parameters`` fails the guards.
        """
        if not isinstance(tool, ToolDefinition):
            raise TypeError(f"register expects a ToolDefinition, got {type(tool).__name__}")
        if self._check_schemas is not None and tool.parameters is not None:
            self._check_schemas.check_schema(tool.parameters)
        with self._lock:
            # Held until the lock is released: freeing a replaced tool may run its code, which
            # may list this registry.
            replaced = self.get(tool.name)
            # The name and its tool change in one call into the core: no exception raised in
            # between (a signal handler's, a timeout's) can leave them out of step.
            self._names.insert(tool.name, tool, self._tools)
        del replaced
        return tool

    def get(self, name: str) -> ToolDefinition | None:
        """The tool called ``name``, or None."""
        if not isinstance(name, str):
            return None
        slot = self._names.slot(name)
        return None if slot is None else self._tools[slot]

    def resolve(self, name: str) -> ToolDefinition:
        """The tool called ``name``; raises ``UnknownToolError`` (a ``LookupError``) if absent."""
        tool = self.get(name)
        if tool is None:
            raise UnknownToolError(name if isinstance(name, str) else repr(name))
        return tool

    def list(self) -> builtins.list[ToolDefinition]:
        """A new list of the tools in registration order."""
        # Under the lock: a replace appends the new tool before it takes the old one's place,
        # so an unlocked copy could hold both.
        with self._lock:
            return list(self._tools)

    def names(self) -> builtins.list[str]:
        """Tool names in registration order."""
        return self._names.names()

    def filter(self, filter: FilterInput | None) -> builtins.list[ToolDefinition]:
        """The tools a filter permits, in registration order (one crossing into the core)."""
        compiled = compile_filter(filter)
        if compiled is None:
            return self.list()
        tools = self._tools
        return [tools[slot] for slot in self._names.permitted_slots(compiled)]

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self.list())

    def __repr__(self) -> str:
        return f"ToolRegistry({len(self)} tools, duplicate={self.duplicate!r})"


def create_tool_registry(
    tools: Iterable[ToolDefinition] = (),
    *,
    duplicate: DuplicatePolicy = "replace",
    check_schemas: bool | SchemaChecker = False,
) -> ToolRegistry:
    """A registry holding ``tools``; ``duplicate="error"`` refuses a name registered twice;
    ``check_schemas=True`` (or a JSON Schema adapter) runs the schema guards on every
    registration, so one bad schema is refused before any request."""
    return ToolRegistry(tools, duplicate=duplicate, check_schemas=check_schemas)


class SchemaChecker(Protocol):
    """Anything with ``check_schema(schema)`` that raises on a schema it refuses."""

    def check_schema(self, schema: object) -> None: ...


def _schema_checker(check_schemas: bool | SchemaChecker) -> SchemaChecker | None:
    if check_schemas is False:
        return None
    if check_schemas is True:
        from prism_tools.validation import default_adapter

        return default_adapter()
    if not callable(getattr(check_schemas, "check_schema", None)):
        raise TypeError("check_schemas must be a bool or an object with check_schema(schema)")
    return check_schemas


def _compile_one(filter: object) -> ToolFilter:
    if isinstance(filter, ToolFilter):
        return filter
    if isinstance(filter, Mapping):
        unknown = set(filter) - _FILTER_KEYS
        if unknown:
            raise ValueError(
                f"a tool filter takes only 'allow' and 'deny', got {sorted(map(str, unknown))}"
            )
        return ToolFilter(allow=filter.get("allow"), deny=filter.get("deny"))
    raise TypeError(
        "a tool filter must be a ToolFilter or a mapping with allow/deny, "
        f"got {type(filter).__name__}"
    )


def compile_filter(filter: FilterInput | None) -> ToolFilter | None:
    """One compiled ``ToolFilter`` for any accepted filter input (None stays None).

    A ``ToolFilter`` is returned as is, so hosts that build their filters once pay nothing here.
    """
    if filter is None or isinstance(filter, ToolFilter):
        return filter
    if isinstance(filter, Mapping):
        return _compile_one(filter)
    if isinstance(filter, str | bytes):
        raise TypeError("a tool filter must be a ToolFilter, a mapping or a sequence of them")
    if isinstance(filter, Sequence):
        return ToolFilter.all_of([_compile_one(item) for item in filter])
    raise TypeError(
        "a tool filter must be a ToolFilter, a mapping or a sequence of them, "
        f"got {type(filter).__name__}"
    )


def filter_tools(
    tools: Iterable[ToolDefinition] | ToolRegistry, filter: FilterInput | None = None
) -> list[ToolDefinition]:
    """The tools that pass ``filter``, in input order. Never adds a tool.

    ``filter`` is a ``ToolFilter``, a mapping with ``allow``/``deny``, or a sequence of them: any
    deny wins, every non-empty allow must include the tool, names match exactly.
    """
    if isinstance(tools, ToolRegistry):
        return tools.filter(filter)
    listed = list(tools)
    compiled = compile_filter(filter)
    try:
        names = [tool.name for tool in listed]
    except AttributeError:
        for tool in listed:
            if not isinstance(tool, ToolDefinition):
                raise TypeError(
                    f"filter_tools expects ToolDefinition items, got {type(tool).__name__}"
                ) from None
        raise
    if compiled is None:
        return listed
    return [listed[index] for index in compiled.apply(names)]


class ContributedTools:
    """Tools offered by extensions. Inert: nothing here can be dispatched until a host registers
    the tool in a ``ToolRegistry``."""

    __slots__ = ("_tools",)

    def __init__(self) -> None:
        self._tools: dict[str, ToolDefinition] = {}

    def register(self, name: str, tool: ToolDefinition) -> ToolDefinition:
        if not isinstance(name, str) or not name:
            raise ValueError("a contributed tool needs a non-empty string name")
        if not isinstance(tool, ToolDefinition):
            raise TypeError(f"register expects a ToolDefinition, got {type(tool).__name__}")
        self._tools[name] = tool
        return tool

    def get(self, name: str) -> ToolDefinition | None:
        return self._tools.get(name) if isinstance(name, str) else None

    def resolve(self, name: str) -> ToolDefinition:
        tool = self.get(name)
        if tool is None:
            raise UnknownToolError(name if isinstance(name, str) else repr(name))
        return tool

    def list(self) -> builtins.list[ToolDefinition]:
        return builtins.list(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools


class ContributionRegistries:
    """What extensions contribute, kept apart from what a host activates."""

    __slots__ = ("tools",)

    def __init__(self) -> None:
        self.tools = ContributedTools()


def create_contribution_registries() -> ContributionRegistries:
    """Empty contribution registries."""
    return ContributionRegistries()
