"""Kernels chosen by measurement where two give the same bits.

bfloat16 products on a CPU with AVX512_BF16 can run the dot-product instruction (VDPBF16PS) or
widen their operands to float32 for the FMA kernel: the same bits either way (csrc/gemm.c), but
which is faster depends on the core, not only on its flags (the instruction was measured 1.3-1.9x
slower than widening on Xeons that also have it). So at the first bfloat16 autocast of the process
the two are timed on one product at the thread count in force, turn about, best of a few (a
few milliseconds in all), and the faster is kept. A choice the caller made with
`_kernels._gemm.bf16_dot(on)` is kept as it is. `om.config()["kernel_choices"]` says which kernel
runs and why.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from . import _config
from ._kernels import _gemm

# The measured product: (M, K) @ (K, N) at bfloat16, about 10 MFLOP a call.
_SHAPE = (128, 256, 160)
_ROUNDS = 4

_reasons: dict[str, str] = {}


def _product_timer() -> Callable[[bool], float]:
    """A function timing one bfloat16 product with the dot-product kernel on or off."""
    m, k, n = _SHAPE
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    out = np.empty((m, n), np.float32)

    def run(dot: bool) -> float:
        _gemm.bf16_dot(dot)
        start = time.perf_counter()
        _gemm.gemm(a, b, out, False, False, _config.num_threads(), half=1)
        return time.perf_counter() - start

    return run


def pick(timer: Callable[[bool], float], rounds: int = _ROUNDS) -> tuple[bool, float, float]:
    """(whether the dot kernel is the faster, its best time, widening's best time): the two
    timed in turns, so a burst of load on a shared machine falls on both alike."""
    dot, wide = float("inf"), float("inf")
    for _ in range(rounds):
        dot = min(dot, timer(True))
        wide = min(wide, timer(False))
    return dot < wide, dot, wide


def choose_bf16_dot(timer: Callable[[bool], float] | None = None) -> None:
    """Sets the bfloat16 product kernel once per process (see the module notes)."""
    if "bf16_dot" in _reasons:
        return
    if not _gemm.bf16_dot_available():
        _reasons["bf16_dot"] = "widening: no AVX512_BF16 dot-product kernel on this CPU or build"
        return
    if _gemm.bf16_dot_chosen():
        kernel = "dot product" if _gemm.bf16_dot() else "widening"
        _reasons["bf16_dot"] = f"{kernel}: set by the caller"
        return
    faster, dot, wide = pick(timer or _product_timer())
    _gemm.bf16_dot(faster)
    m, k, n = _SHAPE
    ratio = wide / dot if faster else dot / wide
    _reasons["bf16_dot"] = (f"{'dot product' if faster else 'widening'}: {ratio:.2f}x faster "
                            f"than {'widening' if faster else 'the dot product'} on a "
                            f"({m}, {k}) @ ({k}, {n}) product at {_config.num_threads()} "
                            f"thread(s), measured at the first bfloat16 autocast")


def reasons() -> dict[str, str]:
    """Each measured choice and why ("not measured yet" before the first bfloat16 autocast)."""
    if "bf16_dot" not in _reasons and not _gemm.bf16_dot_available():
        choose_bf16_dot()  # nothing to measure
    return {"bf16_dot": _reasons.get("bf16_dot", "not measured yet (at the first bfloat16 "
                                     "autocast)")}
