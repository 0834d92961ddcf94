"""The real PostgreSQL server for the tests, loaded as a plugin by ``tests/conftest.py``.

Tests that need the server are marked ``postgres`` and take the ``pg_schema`` fixture. The
server comes from ``PRISM_TOOLS_PG_DSN`` (``.ci/postgres.sh start`` prints it). Without it the
tests skip, except under ``CI=true``, where they fail; and under ``CI=true`` a session in which
any ``postgres`` test was skipped for whatever reason ends with a failing exit status.

Each test gets a schema of its own, dropped afterwards: the DSN it is given sets ``search_path``
to that schema, so every connection made from it, in this process or a child, sees only that
test's tables.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

DSN_VARIABLE = "PRISM_TOOLS_PG_DSN"
_skipped: list[str] = []


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def unavailable(reason: str) -> None:
    """Skips the test, or fails it under CI, where the PostgreSQL tests must run."""
    if in_ci():
        pytest.fail(f"PostgreSQL tests cannot run under CI: {reason}", pytrace=False)
    pytest.skip(reason)


def server_dsn() -> str:
    """The server's connection string, checked to be usable."""
    dsn = os.environ.get(DSN_VARIABLE, "")
    if not dsn:
        unavailable(f'{DSN_VARIABLE} is not set (eval "$(.ci/postgres.sh start)" sets it)')
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'psycopg[binary,pool]')")
    return dsn


def with_options(dsn: str, **params: Any) -> str:
    """``dsn`` with connection parameters added or replaced."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, **params)


@dataclass(frozen=True)
class PgSchema:
    """A fresh schema of the test server."""

    name: str
    dsn: str
    """Connects with ``search_path`` set to this schema alone."""
    sql: Any
    """An open autocommit ``psycopg.Connection`` on ``dsn``, for looking at the tables."""

    def scalar(self, query: str, *params: Any) -> Any:
        found = self.sql.execute(query, params or None).fetchone()
        assert found is not None
        return found[0]


@pytest.fixture
def pg_schema() -> Iterator[PgSchema]:
    dsn = server_dsn()
    import psycopg
    from psycopg import sql

    name = f"test_{uuid.uuid4().hex}"
    scoped = with_options(dsn, options=f"-c search_path={name}")
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        try:
            with psycopg.connect(scoped, autocommit=True) as conn:
                yield PgSchema(name=name, dsn=scoped, sql=conn)
        finally:
            admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"postgres: needs the real PostgreSQL server named by {DSN_VARIABLE}"
    )
    _skipped.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and "postgres" in report.keywords:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if in_ci() and _skipped:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(
                f"FAILED: {len(_skipped)} PostgreSQL test(s) skipped under CI: "
                + ", ".join(_skipped),
                red=True,
            )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
