"""Small test doubles shared by the dispatch-level test modules."""

from __future__ import annotations

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
