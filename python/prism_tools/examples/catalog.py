"""The built-in example catalog: a few hundred realistic, offline tools across many domains.

Every tool has a JSON Schema (draft 2020-12) for its arguments and an ``execute`` that computes
a deterministic answer from them: no network, no files, no clock, no randomness. The catalog is
meant for demos, tests and benchmarks of the harness, not as a library of real integrations.

A few tools exist for the demo in particular:

* ``reindex_search_collection`` reports progress through ``context.progress`` per batch;
* ``sync_partner_inventory`` raises an error that quotes the API key it was given, unless the
  key is a live partner key, so secret scrubbing has something to scrub;
* ``run_database_migration`` (and a few other operations tools) are ``exclusive``.
"""

from __future__ import annotations

from functools import cache

from prism_tools.examples import (
    business,
    devops,
    files,
    geo,
    lifestyle,
    money,
    people,
    productivity,
    search,
    utilities,
    weather,
)
from prism_tools.examples._build import Spec
from prism_tools.registry import ToolRegistry, create_tool_registry
from prism_tools.types import ToolDefinition

_MODULES = (
    weather, productivity, files, business, money, devops, search, geo, people, lifestyle,
    utilities,
)  # fmt: skip

PROGRESS_TOOL = "reindex_search_collection"
"""The catalog tool that reports progress while it runs."""
SECRET_ERROR_TOOL = "sync_partner_inventory"
"""The catalog tool whose error message repeats the API key it was given."""
EXCLUSIVE_TOOL = "run_database_migration"
"""The catalog tool that must run alone."""


@cache
def _specs() -> tuple[Spec, ...]:
    specs = tuple(spec for module in _MODULES for spec in module.SPECS)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise RuntimeError(f"example catalog defines {spec.name!r} twice")
        seen.add(spec.name)
    return specs


@cache
def _definitions() -> tuple[ToolDefinition, ...]:
    return tuple(spec.definition() for spec in _specs())


def example_tools(domain: str | None = None) -> list[ToolDefinition]:
    """The example tools in catalog order, optionally only those of one ``domain``.

    Definitions are built once and shared: they are immutable, so handing the same objects to
    several registries is safe.
    """
    tools = _definitions()
    if domain is None:
        return list(tools)
    return [tool for tool in tools if tool.metadata and tool.metadata.get("domain") == domain]


def example_domains() -> list[str]:
    """The catalog's domains, in catalog order."""
    return list(dict.fromkeys(spec.domain for spec in _specs()))


def create_example_registry() -> ToolRegistry:
    """A new registry holding every example tool (names are unique, so nothing is replaced)."""
    return create_tool_registry(example_tools(), duplicate="error")
