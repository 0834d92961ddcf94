"""Calibrated benchmark rounds, shared by the benchmark files.

pytest-benchmark's own calibration settles on a single call per round for some sub-microsecond
rows and not for others, and a one-call round carries the timer's own cost (100-200 ns here),
enough to move a ratio by a third. Fixing the calls per round from a quick measurement makes
every row pay the same, negligible, per-call overhead. Reported times are per call
(pytest-benchmark divides by the calls per round).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def time_calibrated(
    benchmark: Any,
    function: Callable[[], Any],
    *,
    round_seconds: float,
    row_seconds: float,
    min_rounds: int,
    calibration_seconds: float,
) -> None:
    """Time ``function`` in rounds of about ``round_seconds``, for about ``row_seconds`` in all
    (at least ``min_rounds`` rounds)."""
    if getattr(benchmark, "disabled", False):
        benchmark(function)
        return
    function()
    calls, elapsed = 1, 0.0
    while calls < 1 << 20:
        started = time.perf_counter()
        for _ in range(calls):
            function()
        elapsed = time.perf_counter() - started
        if elapsed >= calibration_seconds:
            break
        calls *= 2
    per_call = elapsed / calls
    iterations = max(1, round(round_seconds / per_call))
    rounds = max(min_rounds, int(row_seconds / (iterations * per_call)))
    benchmark.extra_info["calls_per_round"] = iterations
    benchmark.pedantic(function, iterations=iterations, rounds=rounds, warmup_rounds=1)
