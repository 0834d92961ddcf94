"""Example tools for demos, tests and benchmarks; see ``prism_tools.examples.catalog``."""

from __future__ import annotations

from prism_tools.examples.catalog import (
    EXCLUSIVE_TOOL,
    PROGRESS_TOOL,
    SECRET_ERROR_TOOL,
    create_example_registry,
    example_domains,
    example_tools,
)

__all__ = [
    "EXCLUSIVE_TOOL",
    "PROGRESS_TOOL",
    "SECRET_ERROR_TOOL",
    "create_example_registry",
    "example_domains",
    "example_tools",
]
