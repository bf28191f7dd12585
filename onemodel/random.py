"""Generator: SplitMix64 (Steele, Lea and Flood 2014), the source of every initial weight.

training.txt 1.1 and clarifications.md: each draw adds the golden-ratio increment to the state
and returns mix(state); next_single() is float32((u >> 40) / 2^24), exact; uniform(a, b) is
a + (b - a)·u with a, b float32 and each operation one float32 IEEE operation. Bulk draws are
vectorised in numpy uint64 arithmetic, which wraps modulo 2^64 as the definition does.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .tensor import Tensor

GOLDEN = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TWO_M24 = np.float32(2.0 ** -24)


def mix(z: int) -> int:
    """The SplitMix64 output function alone, on one unsigned 64-bit integer."""
    z &= MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def mix_array(z: np.ndarray) -> np.ndarray:
    """mix() on every element of a uint64 array (overwrites and returns it)."""
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def splitmix_outputs(state: int, n: int) -> np.ndarray:
    """The n outputs mix(state + k·GOLDEN), k = 1..n, as a uint64 array."""
    z = np.arange(1, n + 1, dtype=np.uint64)
    z *= np.uint64(GOLDEN)
    z += np.uint64(state & MASK64)
    return mix_array(z)


def singles(bits: np.ndarray) -> np.ndarray:
    """float32((bits >> 40) / 2^24) elementwise: the top 24 bits, exactly, in [0, 1)."""
    return (bits >> np.uint64(40)).astype(np.float32) * _TWO_M24


def _seed_int(seed: Any, what: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{what}: seed must be an integer, got {type(seed).__name__}")
    return int(seed) & MASK64


class Generator:
    """SplitMix64 generator; the seed is taken modulo 2^64 (so -1 is 2^64 - 1)."""

    def __init__(self, seed: int = 0) -> None:
        self._state = _seed_int(seed, "Generator")

    @property
    def state(self) -> int:
        """The 64-bit state; setting it resumes the stream from that point."""
        return self._state

    @state.setter
    def state(self, value: int) -> None:
        self._state = _seed_int(value, "Generator.state")

    def next_u64(self) -> int:
        self._state = (self._state + GOLDEN) & MASK64
        return mix(self._state)

    def next_single(self) -> float:
        """The next draw as a float32 in [0, 1), returned as the Python float of that value."""
        return float(np.float32(self.next_u64() >> 40) * _TWO_M24)

    def next_u64_array(self, n: int) -> np.ndarray:
        """The next n outputs, in order, as a uint64 array."""
        if n < 0:
            raise ValueError(f"Generator: negative draw count {n}")
        out = splitmix_outputs(self._state, n)
        self._state = (self._state + n * GOLDEN) & MASK64
        return out

    def uniform(self, a: float, b: float, shape: Any = ()) -> Tensor:
        """A float32 tensor of the given shape filled in row-major order with a + (b - a)·u."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(
            int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"Generator.uniform: negative dimension in shape {shape}")
        lo, hi = np.float32(a), np.float32(b)
        u = singles(self.next_u64_array(int(np.prod(shape, dtype=np.int64))))
        # Three separate float32 ufuncs: one rounding each, no fused multiply-add.
        values = lo + (hi - lo) * u
        return Tensor._wrap(values.astype(np.float32, copy=False).reshape(shape))

    def __repr__(self) -> str:
        return f"Generator(state=0x{self._state:016x})"
