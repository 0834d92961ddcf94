"""Shared test setup: hypothesis profiles and the location of the external test data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The PostgreSQL fixture, the `postgres` marker and the CI guard against skipping them.
pytest_plugins = ["tests.pg"]

settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

SHARED_DATA = Path(
    os.environ.get("PRISM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def shared_data(*parts: str) -> Path:
    """Path into the external test data; skips outside CI when absent, fails under CI=true."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"external test data missing under CI: {path}")
        pytest.skip(f"external test data not present at {path} (set PRISM_SHARED_DATA)")
    return path
