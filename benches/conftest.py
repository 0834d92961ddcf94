"""Collection and config glue for the benchmark suites.

* Benchmark files are named ``bench_*.py``, which pytest's default ``python_files`` does not match,
  so they are collected here; nothing under ``benches/`` is collected by the default ``pytest`` run
  (``testpaths = ["tests"]``).
* ``pyproject.toml`` sets ``timeout`` under ``--strict-config``; that option belongs to
  pytest-timeout, which a bench-only venv may not have. Register a placeholder so the suite still
  starts (pytest-timeout, when installed, registers the real option and this does nothing).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    if importlib.util.find_spec("pytest_timeout") is None:
        parser.addini("timeout", "placeholder: pytest-timeout is not installed")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Where prism_tools was imported from and which peer versions are installed."""
    import prism_tools
    from prism_tools import _core

    versions = []
    for dist in ("openai-agents", "pydantic-ai-slim", "langchain-core"):
        try:
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    return [
        f"prism_tools {prism_tools.__version__} from {Path(prism_tools.__file__).parent}",
        f"core: {Path(_core.__file__).name}, {Path(_core.__file__).stat().st_size} bytes",
        f"{platform.python_implementation()} {platform.python_version()}; peers: "
        + ", ".join(versions),
    ]


def pytest_collect_file(file_path: Path, parent: Any) -> pytest.Module | None:
    # Named on the command line, pytest collects the file itself; collect it only once.
    if parent.session.isinitpath(file_path):
        return None
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
