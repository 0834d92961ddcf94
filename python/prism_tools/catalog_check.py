"""Checking a tool catalog before any request reaches it: what ``prism-tools check`` reports.

Every tool's ``parameters`` go through the same guards and compile step that dispatch uses
(``check_schema`` with the default limits), names are checked for duplicates, and the problems
the catalog loader found in entries it could not turn into tools are carried along, so one run
lists everything wrong with a catalog rather than stopping at the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from prism_tools.errors import SchemaGuardError
from prism_tools.types import ToolDefinition, tool_definitions
from prism_tools.validation import create_json_schema_adapter

ProblemKind = Literal["invalid_entry", "duplicate_name", "refused_schema", "missing_schema"]


@dataclass(frozen=True, slots=True)
class CatalogFinding:
    """One thing wrong with a catalog entry: ``index`` is its position in the catalog (0-based),
    ``name`` its tool name when it has one, ``reason`` a stable machine-readable word (a guard
    reason such as ``schema_too_deep``, or the kind itself)."""

    index: int
    name: str | None
    kind: ProblemKind
    message: str
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.reason:
            object.__setattr__(self, "reason", self.kind)

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "kind": self.kind,
            "reason": self.reason,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class CatalogCheck:
    """The outcome of checking a catalog: ``tools`` counts the entries that became tools,
    ``checked`` those whose schema passed, ``problems`` everything else in entry order."""

    tools: int
    checked: int
    without_schema: int
    problems: tuple[CatalogFinding, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "tools": self.tools,
            "checked": self.checked,
            "without_schema": self.without_schema,
            "problems": [problem.to_dict() for problem in self.problems],
        }


def check_catalog(
    tools: Sequence[ToolDefinition],
    *,
    indexes: Sequence[int] | None = None,
    load_problems: Iterable[CatalogFinding] = (),
    require_schema: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> CatalogCheck:
    """Check ``tools`` (in catalog order): duplicate names, then each schema against the default
    guard limits. ``indexes`` maps each tool to its entry position in the catalog when entries
    were dropped while loading (default: the tool's position). ``require_schema`` turns a tool
    with no ``parameters`` into a problem. ``progress(done, total)`` is called as tools are
    checked, for a caller that shows progress."""
    tools = tool_definitions(tools)
    if indexes is not None and len(indexes) != len(tools):
        raise ValueError("indexes must have one entry per tool")
    positions = list(indexes) if indexes is not None else list(range(len(tools)))
    problems = list(load_problems)
    # A fresh adapter: the catalog's schemas must not count against, or evict, a host's cache.
    adapter = create_json_schema_adapter()
    # Keyed by the tool's own place in the list: one catalog entry may hold several tools (a
    # Gemini tool object declares many functions), so two of them share an entry position.
    first_at: dict[str, tuple[int, int]] = {}
    checked = without_schema = 0
    for done, (position, tool) in enumerate(zip(positions, tools, strict=True), start=1):
        first, earlier = first_at.setdefault(tool.name, (done, position))
        if first != done:
            problems.append(
                CatalogFinding(
                    position,
                    tool.name,
                    "duplicate_name",
                    f"duplicate tool name {tool.name!r} (first at entry {earlier})",
                    "duplicate_name",
                )
            )
        if tool.parameters is None:
            without_schema += 1
            if require_schema:
                problems.append(
                    CatalogFinding(
                        position,
                        tool.name,
                        "missing_schema",
                        "no parameters schema",
                        "missing_schema",
                    )
                )
        else:
            try:
                adapter.check_schema(tool.parameters)
            except SchemaGuardError as err:
                problems.append(
                    CatalogFinding(
                        position,
                        tool.name,
                        "refused_schema",
                        str(err),
                        err.reason or "refused_schema",
                    )
                )
            else:
                checked += 1
        if progress is not None:
            progress(done, len(tools))
    problems.sort(key=lambda problem: problem.index)
    return CatalogCheck(len(tools), checked, without_schema, tuple(problems))


__all__ = ["CatalogCheck", "CatalogFinding", "ProblemKind", "check_catalog"]
