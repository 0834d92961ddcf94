"""Run limits: how many turns, tool rounds and tool calls a run may use, and for how long.

| limit | default | ceiling | on breach |
| --- | --- | --- | --- |
| ``max_turns`` | 16 | 64 | the run fails with ``RunLimitError`` |
| ``max_tool_rounds`` | 8 | 64 | the loop stops cleanly, ``finish_reason="turn_limit"`` |
| ``max_tool_calls`` | 32 | 256 | the run fails (charged by every dispatch, blocked calls too) |
| ``max_wall_time_ms`` | 120,000 | 1,800,000 | the run fails |

Merging: an agent's limits replace the defaults; a run's limits replace them too when the agent
set none, and otherwise can only narrow them (the smaller value wins).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from prism_tools.errors import RunLimitError

DEFAULTS: Final[Mapping[str, int]] = {
    "max_turns": 16,
    "max_tool_rounds": 8,
    "max_tool_calls": 32,
    "max_wall_time_ms": 120_000,
}
CEILINGS: Final[Mapping[str, int]] = {
    "max_turns": 64,
    "max_tool_rounds": 64,
    "max_tool_calls": 256,
    "max_wall_time_ms": 1_800_000,
}


@dataclass(frozen=True, slots=True)
class RunLimits:
    """The limits of one run; see the module doc for defaults, ceilings and breaches."""

    max_turns: int = DEFAULTS["max_turns"]
    max_tool_rounds: int = DEFAULTS["max_tool_rounds"]
    max_tool_calls: int = DEFAULTS["max_tool_calls"]
    max_wall_time_ms: int = DEFAULTS["max_wall_time_ms"]

    def __post_init__(self) -> None:
        for item in fields(self):
            _check(item.name, getattr(self, item.name))


LimitsInput = RunLimits | Mapping[str, Any] | None


def _check(name: str, value: Any) -> None:
    ceiling = CEILINGS[name]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= ceiling:
        raise TypeError(f"{name} must be an integer from 1 to {ceiling}, got {value!r}")


def read_limits(value: LimitsInput) -> dict[str, int]:
    """The limits a mapping or ``RunLimits`` sets, checked; unknown names are a ``TypeError``."""
    if value is None:
        return {}
    if isinstance(value, RunLimits):
        return {item.name: getattr(value, item.name) for item in fields(value)}
    if not isinstance(value, Mapping):
        raise TypeError(f"limits must be a mapping or RunLimits, got {type(value).__name__}")
    out: dict[str, int] = {}
    for name, limit in value.items():
        if name not in CEILINGS:
            raise TypeError(f"unknown run limit {name!r}; known: {', '.join(sorted(CEILINGS))}")
        _check(name, limit)
        out[name] = limit
    return out


def merge_limits(agent: LimitsInput, run: LimitsInput) -> RunLimits:
    """Defaults, then the agent's limits, then the run's (which only narrow once the agent set
    any)."""
    agent_values = read_limits(agent)
    run_values = read_limits(run)
    merged = replace(RunLimits(), **agent_values)
    if not run_values:
        return merged
    if agent is None:
        return replace(merged, **run_values)
    narrowed = {name: min(getattr(merged, name), value) for name, value in run_values.items()}
    return replace(merged, **narrowed)


class RunLimitTracker:
    """Counts what a run uses. ``charge(limit)`` raises ``RunLimitError`` past the maximum; the
    first breach is reported once through ``on_breach`` and every later charge re-raises it."""

    __slots__ = ("_breach", "_counts", "_on_breach", "_started", "limits")

    def __init__(
        self,
        limits: RunLimits,
        on_breach: Callable[[RunLimitError], None] | None = None,
    ) -> None:
        self.limits = limits
        self._counts: dict[str, int] = {}
        self._on_breach = on_breach
        self._breach: RunLimitError | None = None
        self._started = time.monotonic()

    @property
    def breach(self) -> RunLimitError | None:
        return self._breach

    def count(self, limit: str) -> int:
        return self._counts.get(limit, 0)

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self._started) * 1000.0

    def charge(self, limit: str) -> None:
        if self._breach is not None:
            raise self._breach
        observed = self._counts.get(limit, 0) + 1
        self._counts[limit] = observed
        maximum = getattr(self.limits, limit)
        if observed > maximum:
            self.fail(limit, maximum, observed)
        self.check_wall_time()

    def check_wall_time(self) -> None:
        if self._breach is not None:
            raise self._breach
        elapsed = self.elapsed_ms()
        if elapsed > self.limits.max_wall_time_ms:
            self.fail("max_wall_time_ms", self.limits.max_wall_time_ms, round(elapsed))

    def fail(self, limit: str, maximum: int, observed: int) -> None:
        """Records the first breach, reports it once, and raises it."""
        if self._breach is None:
            self._breach = RunLimitError(limit, maximum=maximum, observed=observed)
            if self._on_breach is not None:
                self._on_breach(self._breach)
        raise self._breach


__all__ = [
    "CEILINGS",
    "DEFAULTS",
    "LimitsInput",
    "RunLimitTracker",
    "RunLimits",
    "merge_limits",
    "read_limits",
]
