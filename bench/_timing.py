"""Timing shared by the benchmarks: the best of many runs, taken in turns.

The machine may be shared: other processes (or another engine's spinning OpenMP threads) slow
some calls and never speed one, so the minimum is the cost of the work itself. Several
functions run in turns so that a burst of load hits all of them alike. On a machine too busy
for that, ONEMODEL_BENCH_CLOCK=cpu times by the process's CPU time instead of the wall clock:
what one thread's work costs whatever else runs (at 2 threads it adds both threads' time, so
use it for 1-thread figures only).
"""
from __future__ import annotations

import os
import time
from typing import Callable, Sequence

_clock = time.process_time if os.environ.get("ONEMODEL_BENCH_CLOCK") == "cpu" else time.perf_counter


def best_seconds(fns: Sequence[Callable[[], object]], budget: float = 0.0,
                 min_runs: int = 3) -> list[float]:
    """Best time of each function after one untimed call, over at least `min_runs` turns and
    until `budget` seconds were spent."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    spent, runs = 0.0, 0
    while spent < budget or runs < min_runs:
        for i, fn in enumerate(fns):
            t0 = _clock()
            fn()
            dt = _clock() - t0
            best[i] = min(best[i], dt)
            spent += dt
        runs += 1
    return best


def best_of(fn: Callable[[], object], budget: float, min_runs: int = 3) -> float:
    """Best time of one function (see best_seconds)."""
    return best_seconds([fn], budget, min_runs)[0]
