"""interpolate: nearest-neighbour resizing of (N, C, L), (N, C, H, W) and (N, C, D, H, W).

Each output position copies the input position PyTorch's CPU kernels pick (their float32
source-index arithmetic, reproduced here), so the forward values are PyTorch's exactly. It is
one integer-array index per spatial axis, so the backward pass adds the gradients of the
copies of an element in index order.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Union

import numpy as np

from ..tensor import Tensor
from ._core import as_tensor, require_float
from .shape import clone, index

_MODES = ("nearest", "nearest-exact")


def _per_axis(value: Any, name: str, spatial: int, kind: type) -> tuple:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,) * spatial
    if len(items) != spatial or any(isinstance(v, bool) or not isinstance(v, kind)
                                    for v in items):
        raise TypeError(f"interpolate: {name} must be one number or {spatial} (one per spatial "
                        f"dimension), got {value!r}")
    return items


def _source(out: int, size: int, scale: Optional[float], exact: bool) -> np.ndarray:
    """The input index each output index copies (ATen's nearest_idx / nearest_exact_idx)."""
    i = np.arange(out, dtype=np.int64)
    if not exact and out == size:
        return i
    if not exact and out == 2 * size:
        return i >> 1
    step = np.float32(1.0 / scale) if scale is not None and scale > 0 else (
        np.float32(size) / np.float32(out))
    if exact:
        position = ((i + 0.5) * np.float64(step)).astype(np.float32)
    else:
        position = i.astype(np.float32) * step
    return np.minimum(np.floor(position).astype(np.int64), size - 1)


def interpolate(input: Tensor, size: Union[int, Sequence[int], None] = None,
                scale_factor: Union[float, Sequence[float], None] = None,
                mode: str = "nearest", align_corners: Optional[bool] = None,
                recompute_scale_factor: Optional[bool] = None,
                antialias: bool = False) -> Tensor:
    """Resizes the spatial axes to `size`, or by `scale_factor` (output floor(size · factor)),
    as torch.nn.functional.interpolate with mode "nearest" or "nearest-exact". With
    recompute_scale_factor=True the source indices follow the output size rather than the
    factor, as PyTorch."""
    op = "interpolate"
    x = as_tensor(input, op)
    require_float(x, op)
    if mode not in _MODES:
        raise ValueError(f"{op}: mode {mode!r} is not supported; use 'nearest' or "
                         "'nearest-exact'")
    if align_corners is not None or antialias:
        raise ValueError(f"{op}: align_corners and antialias apply only to the interpolating "
                         f"modes, not to mode {mode!r}")
    if x.ndim not in (3, 4, 5):
        raise ValueError(f"{op}: input must be (N, C, L), (N, C, H, W) or (N, C, D, H, W), got "
                         f"shape {x.shape}")
    spatial = x.ndim - 2
    sizes_in = x.shape[2:]
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size and scale_factor must be given (input "
                         f"{x.shape})")
    if size is not None:
        sizes = tuple(int(s) for s in _per_axis(size, "size", spatial, (int, np.integer)))
        scales: tuple = (None,) * spatial
    else:
        factors = tuple(float(f) for f in _per_axis(scale_factor, "scale_factor", spatial,
                                                    (int, float, np.integer, np.floating)))
        sizes = tuple(math.floor(s * f) for s, f in zip(sizes_in, factors))
        scales = (None,) * spatial if recompute_scale_factor else factors
    if min(sizes) < 1:
        raise ValueError(f"{op}: output size {sizes} must be positive (input {x.shape}, size "
                         f"{size!r}, scale_factor {scale_factor!r})")
    y = x
    for axis, (out, n, scale) in enumerate(zip(sizes, sizes_in, scales)):
        src = _source(out, n, scale, mode == "nearest-exact")
        if out != n or not np.array_equal(src, np.arange(n)):
            y = index(y, (slice(None),) * (axis + 2) + (src,))
    return clone(y) if y is x else y  # a new tensor, as PyTorch's, even for no resizing
