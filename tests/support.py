"""Small test doubles shared by the dispatch-level test modules."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from prism_tools import AgentEvent


class EventLog:
    """An ``emit`` sink that keeps every event, in order."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]


class OpenedConnections:
    """Every ``sqlite3.connect`` made while installed (``install(monkeypatch)``), to check that
    code under test closes what it opened."""

    def __init__(self) -> None:
        self.connections: list[sqlite3.Connection] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> OpenedConnections:
        connect = sqlite3.connect

        def recording(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            connection = connect(*args, **kwargs)
            self.connections.append(connection)
            return connection

        monkeypatch.setattr(sqlite3, "connect", recording)
        return self

    def still_open(self) -> list[sqlite3.Connection]:
        open_ones = []
        for connection in self.connections:
            try:
                connection.execute("SELECT 1")
            except sqlite3.ProgrammingError:
                continue  # "Cannot operate on a closed database"
            except sqlite3.Error:
                pass  # open, on a file it cannot read
            open_ones.append(connection)
        return open_ones
