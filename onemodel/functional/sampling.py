"""interpolate: resizing of (N, C, L), (N, C, H, W) and (N, C, D, H, W) as PyTorch's.

nearest / nearest-exact copy the input position PyTorch's CPU kernels pick (their float32
source-index arithmetic, reproduced here): one integer-array index per spatial axis.

linear / bilinear / bicubic / trilinear (and bilinear / bicubic with antialias) are separable:
each resized axis, innermost first, is a fixed list of taps (an index array and a float32
weight per output position), and the axis's result is tap0·w0 + tap1·w1 + ... added in tap
order. That is the order PyTorch's kernels nest their sums in (the innermost axis's blend inside
the outer one's), and it depends on the shapes alone. The taps are the ops index, mul and add,
so the backward pass is theirs: each weight times the output gradient, scatter-added into the
input in index order.

area is adaptive average pooling, as PyTorch's.

pixel_shuffle and pixel_unshuffle (Shi et al. 2016) only move values: a reshape, a permute
and a reshape, so their backward is those ops'.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..tensor import Tensor
from ._core import as_tensor, require_float
from .conv import adaptive_avg_pool2d
from .elementwise import add, mul
from .shape import clone, index, permute, reshape

MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
# The interpolating modes and the input rank each takes.
_RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
_F = np.float32
_CUBIC_A = _F(-0.75)  # PyTorch's bicubic; antialiasing uses Keys' -0.5, as PIL


def _per_axis(value: Any, name: str, spatial: int, kind: tuple[type, ...]) -> tuple:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,) * spatial
    if len(items) != spatial or any(isinstance(v, bool) or not isinstance(v, kind)
                                    for v in items):
        raise TypeError(f"interpolate: {name} must be one number or {spatial} (one per spatial "
                        f"dimension), got {value!r}")
    return items


def _nearest(out: int, size: int, scale: Optional[float], exact: bool) -> np.ndarray:
    """The input index each output index copies (ATen's nearest_idx / nearest_exact_idx)."""
    i = np.arange(out, dtype=np.int64)
    if not exact and out == size:
        return i
    if not exact and out == 2 * size:
        return i >> 1
    step = _F(1.0 / scale) if scale is not None and scale > 0 else _F(size) / _F(out)
    if exact:
        position = ((i + 0.5) * np.float64(step)).astype(_F)
    else:
        position = i.astype(_F) * step
    return np.minimum(np.floor(position).astype(np.int64), size - 1)


def _ratio(size: int, out: int, align_corners: bool, scale: Optional[float]) -> np.float32:
    """Input steps per output step, in float32 (ATen's area_pixel_compute_scale)."""
    if align_corners:
        return _F(size - 1) / _F(out - 1) if out > 1 else _F(0)
    return _F(1.0 / scale) if scale is not None and scale > 0 else _F(size) / _F(out)


def _real_index(out: int, ratio: np.float32, align_corners: bool) -> np.ndarray:
    """Each output position's source coordinate (ATen's area_pixel_compute_source_index)."""
    i = np.arange(out, dtype=_F)
    return ratio * i if align_corners else ratio * (i + _F(0.5)) - _F(0.5)


def _floor_and_fraction(real: np.ndarray, size: int) -> tuple:
    """ATen's guard_index_and_lambda: the floor, at most size - 1, and the fraction in [0, 1]."""
    base = np.minimum(np.floor(real).astype(np.int64), size - 1)
    return base, np.clip(real - base.astype(_F), _F(0), _F(1))


def _linear_taps(out: int, size: int, scale: Optional[float], align_corners: bool) -> list:
    real = _real_index(out, _ratio(size, out, align_corners, scale), align_corners)
    base, frac = _floor_and_fraction(np.maximum(real, _F(0)), size)
    return [(base, _F(1) - frac), (base + (base < size - 1), frac)]


def _cubic_convolution1(x: np.ndarray, a: np.float32) -> np.ndarray:
    return ((a + _F(2)) * x - (a + _F(3))) * x * x + _F(1)


def _cubic_convolution2(x: np.ndarray, a: np.float32) -> np.ndarray:
    return ((a * x - _F(5) * a) * x + _F(8) * a) * x - _F(4) * a


def _cubic_taps(out: int, size: int, scale: Optional[float], align_corners: bool) -> list:
    """Four taps at floor - 1 .. floor + 2, clamped to the input (PyTorch's border access)."""
    real = _real_index(out, _ratio(size, out, align_corners, scale), align_corners)
    base, t = _floor_and_fraction(real, size)
    weights = (_cubic_convolution2(t + _F(1), _CUBIC_A), _cubic_convolution1(t, _CUBIC_A),
               _cubic_convolution1(_F(1) - t, _CUBIC_A),
               _cubic_convolution2(_F(2) - t, _CUBIC_A))
    return [(np.clip(base + j - 1, 0, size - 1), w) for j, w in enumerate(weights)]


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < _F(1), _F(1) - x, _F(0)).astype(_F)


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    x, a = np.abs(x), _F(-0.5)
    near, far = _cubic_convolution1(x, a), _cubic_convolution2(x, a)
    return np.where(x < _F(1), near, np.where(x < _F(2), far, _F(0))).astype(_F)


def _antialias_taps(out: int, size: int, scale: Optional[float], align_corners: bool,
                    support: float, kernel: Callable) -> list:
    """PyTorch's (and PIL's) antialiased weights: when shrinking, the filter widens by the
    ratio; each output reads the inputs [first, first + count) with weights normalised to sum
    1. Outputs with fewer inputs than the widest are padded with weight-0 taps."""
    ratio = _ratio(size, out, align_corners, scale)
    if ratio >= 1:
        reach, inverse = _F(support) * ratio, _F(1.0 / float(ratio))
    else:
        reach, inverse = _F(support), _F(1)
    # float32 sums with a double + 0.5 after them, as ATen's mixed-precision expressions.
    center = (ratio * (np.arange(out) + 0.5)).astype(_F)
    first = np.maximum(((center - reach).astype(np.float64) + 0.5).astype(np.int64), 0)
    count = np.minimum(((center + reach).astype(np.float64) + 0.5).astype(np.int64),
                       size) - first
    j = np.arange(int(count.max()))[:, None]
    offset = ((j + first).astype(_F) - center).astype(np.float64) + 0.5
    w = np.where(j < count, kernel((offset * np.float64(inverse)).astype(_F)), _F(0))
    total = w[0].copy()
    for row in w[1:]:  # the normaliser in tap order
        total += row
    w = np.where(total != 0, w / np.where(total != 0, total, _F(1)), w).astype(_F)
    return [(np.minimum(first + k, size - 1), w[k]) for k in range(w.shape[0])]


def _blend(x: Tensor, axis: int, taps: list) -> Tensor:
    """Σ_k x[..., idx_k, ...] · w_k along `axis`, the terms added in tap order."""
    lead = (slice(None),) * axis
    trail = (1,) * (x.ndim - 1 - axis)
    out: Optional[Tensor] = None
    for idx, w in taps:
        term = mul(index(x, lead + (idx,)), Tensor._wrap(np.ascontiguousarray(
            w, _F).reshape((-1,) + trail)))
        out = term if out is None else add(out, term)
    assert out is not None  # every output has at least one tap
    return out


def _area(x: Tensor, sizes: tuple) -> Tensor:
    """Adaptive average pooling: a 1-D input as a 2-D one of height 1; a 3-D one pools (H, W)
    per depth slice, then (D, 1) over the columns (OH·OW): one mean of equal-weight means."""
    if x.ndim == 3:
        return reshape(adaptive_avg_pool2d(reshape(x, x.shape[:2] + (1, x.shape[2])),
                                           (1, sizes[0])), x.shape[:2] + sizes)
    if x.ndim == 4:
        return adaptive_avg_pool2d(x, sizes)
    n, c, d, h, w = x.shape
    planes = adaptive_avg_pool2d(reshape(x, (n * c * d, h, w)), sizes[1:])
    columns = reshape(planes, (n * c, d, sizes[1] * sizes[2]))
    pooled = adaptive_avg_pool2d(columns, (sizes[0], sizes[1] * sizes[2]))
    return reshape(pooled, (n, c) + sizes)


def interpolate(input: Tensor, size: Union[int, Sequence[int], None] = None,
                scale_factor: Union[float, Sequence[float], None] = None,
                mode: str = "nearest", align_corners: Optional[bool] = None,
                recompute_scale_factor: Optional[bool] = None,
                antialias: bool = False) -> Tensor:
    """Resizes the spatial axes to `size`, or by `scale_factor` (output floor(size · factor)),
    as torch.nn.functional.interpolate: modes nearest, nearest-exact, linear (3-D input),
    bilinear and bicubic (4-D), trilinear (5-D) and area. Unless recompute_scale_factor=True,
    a given factor, not the size ratio, places the source positions, as PyTorch."""
    op = "interpolate"
    x = as_tensor(input, op)
    require_float(x, op)
    if mode not in MODES:
        raise ValueError(f"{op}: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode not in _RANK and align_corners is not None:
        raise ValueError(f"{op}: align_corners applies only to the interpolating modes "
                         f"(linear, bilinear, bicubic, trilinear), not to mode {mode!r}")
    if x.ndim not in (3, 4, 5):
        raise ValueError(f"{op}: input must be (N, C, L), (N, C, H, W) or (N, C, D, H, W), got "
                         f"shape {x.shape}")
    if mode in _RANK and x.ndim != _RANK[mode]:
        raise ValueError(f"{op}: mode {mode!r} needs a {_RANK[mode]}-D input, got shape "
                         f"{x.shape}")
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ValueError(f"{op}: antialias applies only to modes 'bilinear' and 'bicubic', "
                         f"not to mode {mode!r}")
    spatial = x.ndim - 2
    sizes_in = x.shape[2:]
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size and scale_factor must be given (input "
                         f"{x.shape})")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError(f"{op}: recompute_scale_factor applies only with scale_factor, "
                             f"got size {size!r}")
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
    if min(sizes_in) < 1:
        raise ValueError(f"{op}: input {x.shape} has an empty spatial dimension")
    if mode == "area":
        return _area(x, sizes)
    corners = bool(align_corners)
    y = x
    # The innermost axis first: PyTorch blends it inside each tap of the outer ones.
    for axis in reversed(range(spatial)):
        out, n, scale = sizes[axis], sizes_in[axis], scales[axis]
        if mode in ("nearest", "nearest-exact"):
            src = _nearest(out, n, scale, mode == "nearest-exact")
            if out != n or not np.array_equal(src, np.arange(n)):
                y = index(y, (slice(None),) * (axis + 2) + (src,))
            continue
        if out == n and (mode != "bicubic" or antialias):
            continue  # ATen copies such an axis rather than interpolating it
        if antialias:
            taps = _antialias_taps(out, n, scale, corners, *(
                (1.0, _triangle) if mode == "bilinear" else (2.0, _keys_cubic)))
        elif mode == "bicubic":
            taps = _cubic_taps(out, n, scale, corners)
        else:
            taps = _linear_taps(out, n, scale, corners)
        y = _blend(y, axis + 2, taps)
    return clone(y) if y is x else y  # a new tensor, as PyTorch's, even for no resizing


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C·r², H, W) -> (*, C, H·r, W·r): channel c·r² + i·r + j goes to row h·r + i, column
    w·r + j, as PyTorch's."""
    return _shuffle("pixel_shuffle", "upscale_factor", input, upscale_factor)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H·r, W·r) -> (*, C·r², H, W), the inverse of pixel_shuffle."""
    return _shuffle("pixel_unshuffle", "downscale_factor", input, downscale_factor)


def _shuffle(op: str, name: str, input: Any, r: Any) -> Tensor:
    x = as_tensor(input, op)
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise ValueError(f"{op}: {name} must be a positive integer, got {r!r}")
    if x.ndim < 3:
        raise ValueError(f"{op}: input must have at least 3 dimensions (*, C, H, W), got shape "
                         f"{x.shape}")
    *batch, c, h, w = x.shape
    if op == "pixel_shuffle":
        if c % (r * r):
            raise ValueError(f"{op}: channels {c} of input {x.shape} must be divisible by "
                             f"upscale_factor² = {r * r}")
        split, order = (c // (r * r), r, r, h, w), (0, 3, 1, 4, 2)  # (C, H, r, W, r)
        out = (c // (r * r), h * r, w * r)
    else:
        if h % r or w % r:
            raise ValueError(f"{op}: height {h} and width {w} of input {x.shape} must be "
                             f"divisible by downscale_factor {r}")
        split, order = (c, h // r, r, w // r, r), (0, 2, 4, 1, 3)  # (C, r, r, H, W)
        out = (c * r * r, h // r, w // r)
    n = len(batch)
    moved = permute(reshape(x, (*batch, *split)), tuple(range(n)) + tuple(n + i for i in order))
    return reshape(moved, (*batch, *out))
