"""Dropout with a counter-based mask (training.txt 1.2, clarifications.md).

Draw d of seed s: stream = mix(s + d·G) and element i (row-major, from 0) has
bits = mix(stream + (i+1)·G), u = float32((bits >> 40) / 2^24), G = 0x9E3779B97F4A7C15, all
unsigned 64-bit wrapping. Element i is kept, times float32(1/(1-p)), when u >= float32(p), else
zeroed. These are the outputs of a SplitMix64 generator whose state is `stream`, so the mask is
computed in numpy uint64 arithmetic with no per-element Python. It depends on nothing but
(seed, draw, p, the element count): the same on every platform, ISA path and thread count.
The mask multiplies the input through `mul`, so the backward pass is the mask itself.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from .. import random
from ..tensor import Tensor
from ._core import as_tensor, require_float
from .elementwise import mul


def _check_p(p: float, op: str) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: probability p must be in [0, 1], got {p}")
    return p


def dropout_mask(shape: Sequence[int], p: float, seed: int, draw: int) -> np.ndarray:
    """The float32 multiplier of draw `draw`: float32(1/(1-p)) where kept, 0 where dropped."""
    p = _check_p(p, "dropout_mask")
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape, dtype=np.int64))
    # u = k / 2^24 with k = bits >> 40, so u >= float32(p) exactly when k >= ceil(p32·2^24)
    # (p32·2^24 is exact in double), that is when bits >= that integer << 40.
    threshold = math.ceil(float(np.float32(p)) * 2.0 ** 24)
    if threshold >= 1 << 24:  # p rounds to 1 in float32: nothing is kept
        return np.zeros(shape, np.float32)
    cut = np.uint64(threshold << 40)
    scale = np.float32(1.0 / (1.0 - p))
    stream = random.mix((int(seed) + int(draw) * random.GOLDEN) & random.MASK64)
    out = np.empty(n, np.float32)
    for start, bits in random.splitmix_blocks(stream, n):
        np.multiply(bits >= cut, scale, out=out[start:start + len(bits)])
    return out.reshape(shape)


def dropout(x: Tensor, p: float = 0.5, training: bool = True, *, seed: Optional[int] = None,
            draw: int = 0) -> Tensor:
    """x times the mask of (seed, draw); x itself when not training or when p = 0.

    Without `seed`, each call that draws a mask takes its seed from the default generator's
    next output, so calls differ (as PyTorch's) and a program seeded once repeats them.
    The `Dropout` module keeps `draw` in its `draws` buffer and advances it on every call.
    """
    x = as_tensor(x, "dropout")
    require_float(x, "dropout")
    p = _check_p(p, "dropout")
    if not training or p == 0.0:
        return x
    if seed is None:
        seed = random.default_generator.next_u64()
    return mul(x, Tensor._wrap(dropout_mask(x.shape, p, seed, draw)))
