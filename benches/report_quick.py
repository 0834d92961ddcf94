"""pytest plugin for ``benches/report.py --quick``: shortens every row to a few rounds.

The suites fix their rounds from module constants (``ROW_SECONDS``, ``MIN_ROUNDS``) rather than
from pytest-benchmark's options, so a quick run lowers those constants on every collected module
before any row runs. Only a smoke test of the pipeline: the numbers are not meant to be read.
"""

from __future__ import annotations

from typing import Any

QUICK_CONSTANTS = {"ROW_SECONDS": 0.05, "MIN_ROUNDS": 3}


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    modules = {id(module): module for item in items if (module := getattr(item, "module", None))}
    for module in modules.values():
        for name, value in QUICK_CONSTANTS.items():
            if hasattr(module, name):
                setattr(module, name, value)
