"""Dropout with a counter-based mask.

Draw d of seed s: stream = mix(s + d·G) and element i (row-major, from 0) has
bits = mix(stream + (i+1)·G), u = float32((bits >> 40) / 2^24), G = 0x9E3779B97F4A7C15, all
unsigned 64-bit wrapping. Element i is kept, times float32(1/(1-p)), when u >= float32(p), else
zeroed. These are the outputs of a SplitMix64 generator whose state is `stream`; the kernel
(csrc/dropout.c) draws them and multiplies in one pass. The mask depends on nothing but
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
from .._kernels import _dropout
from ..tensor import Tensor
from ._core import as_tensor, record, require_float, threads
from .elementwise import in_place


def _check_p(p: float, op: str) -> float:
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: probability p must be in [0, 1], got {p}")
    return p


def _draw(p: float, seed: int, draw: int) -> tuple[int, int, float]:
    """(stream, threshold, multiplier) of draw `draw`: element i is kept when
    mix(stream + (i+1)·G) >> 40 >= threshold, times the multiplier float32(1/(1-p))."""
    # u = k / 2^24 with k = bits >> 40, so u >= float32(p) exactly when k >= ceil(p32·2^24)
    # (p32·2^24 is exact in double). p that rounds to 1 in float32 gives 2^24: nothing is kept.
    threshold = math.ceil(float(np.float32(p)) * 2.0 ** 24)
    scale = 0.0 if threshold >= 1 << 24 else float(np.float32(1.0 / (1.0 - p)))
    stream = random.mix(random.advanced(int(seed), int(draw)))
    return stream, threshold, scale


def dropout_mask(shape: Sequence[int], p: float, seed: int, draw: int) -> np.ndarray:
    """The float32 multiplier of draw `draw`: float32(1/(1-p)) where kept, 0 where dropped."""
    p = _check_p(p, "dropout_mask")
    shape = tuple(int(s) for s in shape)
    stream, threshold, scale = _draw(p, seed, draw)
    multiplier = np.empty(shape, np.float32)  # 1 times the multiplier: its bits
    _dropout.forward(stream, threshold, scale, np.ones(shape, np.float32), multiplier,
                     np.empty(shape, np.uint8), threads())
    return multiplier


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


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              seed: Optional[int] = None, draw: int = 0) -> Tensor:
    """Channel dropout of (N, C, D, H, W) or unbatched (C, D, H, W) input, as
    torch.nn.functional.dropout3d: the mask is over (N, C), or C. Other ranks warn as
    PyTorch's and are read as unbatched (the mask over the first dimension)."""
    x = _float(input, "dropout3d")
    if x.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {x.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch "
                      "dimension (i.e. 4D or 5D inputs).", UserWarning, stacklevel=2)
    return _masked("dropout3d", x, p, training, inplace, seed, draw, 2 if x.ndim == 5 else 1)


def _float(x: Any, op: str) -> Tensor:
    x = as_tensor(x, op)
    require_float(x, op)
    return x


@quiet
def _masked(op: str, x: Any, p: float, training: bool, inplace: bool, seed: Optional[int],
            draw: int, lead: Optional[int]) -> Tensor:
    """x times a mask over its first `lead` axes (every axis for None), broadcast over the
    rest."""
    if inplace:
        return in_place(op, x, lambda t: _masked(op, t, p, training, False, seed, draw, lead))
    x = _float(x, op)
    p = _check_p(p, op)
    if not training or p == 0.0:
        return x
    if seed is None:
        seed = random.default_generator.next_u64()
    stream, threshold, scale = _draw(p, seed, draw)
    shape = x.shape
    keep = np.empty(shape if lead is None else shape[:lead], np.uint8)
    out = np.empty(shape, np.float32)
    _dropout.forward(stream, threshold, scale, np.ascontiguousarray(x._data), out, keep,
                     threads())

    def backward(g: np.ndarray) -> tuple[np.ndarray]:
        grad = np.empty(shape, np.float32)
        _dropout.backward(keep, scale, np.ascontiguousarray(g, np.float32), grad, threads())
        return (grad,)
    return record(op, out, (x,), backward)
