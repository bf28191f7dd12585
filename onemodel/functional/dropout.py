"""Dropout with a counter-based mask (docs/spec/training.txt 1.2, docs/spec/clarifications.md).

Draw d of seed s: stream = mix(s + d·G) and element i (row-major, from 0) has
bits = mix(stream + (i+1)·G), u = float32((bits >> 40) / 2^24), G = 0x9E3779B97F4A7C15, all
unsigned 64-bit wrapping. Element i is kept, times float32(1/(1-p)), when u >= float32(p), else
zeroed. These are the outputs of a SplitMix64 generator whose state is `stream`, so the mask is
computed in numpy uint64 arithmetic with no per-element Python. It depends on nothing but
(seed, draw, p, the element count): the same on every platform, ISA path and thread count.
The output is the input times the float32 multiplier (1/(1-p) or 0: the bits of a product by
it, -0 and NaN included), and so is the gradient; the graph keeps only which elements were kept
(one byte each), not the input nor a float32 mask.
dropout1d and dropout2d draw it over the (N, C) axes alone and broadcast it over the rest.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from .. import random
from .._ieee import quiet
from ..tensor import Tensor
from ._core import as_tensor, record, require_float
from .elementwise import check_not_inplace


def _check_p(p: float, op: str) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: probability p must be in [0, 1], got {p}")
    return p


def _kept(shape: tuple, p: float, seed: int, draw: int) -> tuple[np.ndarray, np.float32]:
    """(which elements draw `draw` keeps, as bool, and their multiplier float32(1/(1-p)))."""
    n = math.prod(shape)
    # u = k / 2^24 with k = bits >> 40, so u >= float32(p) exactly when k >= ceil(p32·2^24)
    # (p32·2^24 is exact in double), that is when bits >= that integer << 40.
    threshold = math.ceil(float(np.float32(p)) * 2.0 ** 24)
    keep = np.zeros(n, np.bool_)
    if threshold >= 1 << 24:  # p rounds to 1 in float32: nothing is kept
        return keep.reshape(shape), np.float32(0)
    cut = np.uint64(threshold << 40)
    stream = random.mix((int(seed) + int(draw) * random.GOLDEN) & random.MASK64)
    for start, bits in random.splitmix_blocks(stream, n):
        np.greater_equal(bits, cut, out=keep[start:start + len(bits)])
    return keep.reshape(shape), np.float32(1.0 / (1.0 - p))


def _multiplier(keep: np.ndarray, scale: np.float32) -> np.ndarray:
    return np.multiply(keep, scale, dtype=np.float32)


def dropout_mask(shape: Sequence[int], p: float, seed: int, draw: int) -> np.ndarray:
    """The float32 multiplier of draw `draw`: float32(1/(1-p)) where kept, 0 where dropped."""
    p = _check_p(p, "dropout_mask")
    return _multiplier(*_kept(tuple(int(s) for s in shape), p, seed, draw))


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
            seed: Optional[int] = None, draw: int = 0) -> Tensor:
    """input times the mask of (seed, draw); input itself when not training or when p = 0.

    Without `seed`, each call that draws a mask takes its seed from the default generator's
    next output, so calls differ (as PyTorch's) and a program seeded once repeats them.
    The `Dropout` module keeps `draw` in its `draws` buffer and advances it on every call.
    """
    return _masked("dropout", input, p, training, inplace, seed, draw, None)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              seed: Optional[int] = None, draw: int = 0) -> Tensor:
    """Channel dropout of (N, C, L) or (C, L) input, as torch.nn.functional.dropout1d: each
    channel is kept whole (times 1/(1-p)) or zeroed, by the mask of (seed, draw) over (N, C)
    or (C,); seeds as dropout's."""
    x = _float(input, "dropout1d")
    if x.ndim not in (2, 3):
        raise ValueError(f"dropout1d: input must be (N, C, L) or (C, L), got shape {x.shape}")
    return _masked("dropout1d", x, p, training, inplace, seed, draw, x.ndim - 1)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              seed: Optional[int] = None, draw: int = 0) -> Tensor:
    """Channel dropout of (N, C, H, W) input, as torch.nn.functional.dropout2d: the mask is over
    (N, C). A 3-D input is read as (N, C, L) with PyTorch's warning (PyTorch's behaviour: not
    as an unbatched (C, H, W))."""
    x = _float(input, "dropout2d")
    if x.ndim not in (3, 4):
        raise ValueError(f"dropout2d: input must be (N, C, H, W) (or (N, C, L)), got shape "
                         f"{x.shape}")
    if x.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim.", UserWarning, stacklevel=2)
    return _masked("dropout2d", x, p, training, inplace, seed, draw, 2)


def _float(x: Any, op: str) -> Tensor:
    x = as_tensor(x, op)
    require_float(x, op)
    return x


@quiet
def _masked(op: str, x: Any, p: float, training: bool, inplace: bool, seed: Optional[int],
            draw: int, lead: Optional[int]) -> Tensor:
    """x times a mask over its first `lead` axes (every axis for None), broadcast over the
    rest."""
    x = _float(x, op)
    p = _check_p(p, op)
    check_not_inplace(op, inplace)
    if not training or p == 0.0:
        return x
    if seed is None:
        seed = random.default_generator.next_u64()
    shape = x.shape if lead is None else x.shape[:lead]
    keep, scale = _kept(shape, p, seed, draw)
    keep = keep.reshape(shape + (1,) * (x.ndim - len(shape)))
    out = np.multiply(x._data, _multiplier(keep, scale))
    return record(op, out, (x,), lambda g: (np.multiply(g, _multiplier(keep, scale)),))
