"""Timing shared by the benchmarks: the best of many runs, taken in turns.

The machine may be shared: other processes (or another engine's spinning OpenMP threads) slow
some calls and never speed one, so the minimum is the cost of the work itself. Several
functions run in turns so that a burst of load hits all of them alike.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence


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
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            best[i] = min(best[i], dt)
            spent += dt
        runs += 1
    return best


def best_of(fn: Callable[[], object], budget: float, min_runs: int = 3) -> float:
    """Best time of one function (see best_seconds)."""
    return best_seconds([fn], budget, min_runs)[0]
