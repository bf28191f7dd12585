"""affine_grid and grid_sample (2-D), as torch.nn.functional's, built from the library's ops so
their gradients come from the graph.

Exact mode: grid_sample gathers the four corners (nw, ne, sw, se) of every output in one
index op and adds their weighted values with the library's sum over the corner axis, whose
order is fixed whatever the threads. The input's gradient is the
index op's: np.add.at, which adds in index order (corner by corner, then output position), a
fixed order (tests/ops/test_grid.py checks it against that order). Coordinates are unnormalized,
clipped and reflected with torch's formulas in float32 (+ - * /, fabs, fmod and floor, all
exact or correctly rounded); affine_grid is a batched product of the base grid and thetaᵀ.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np

from ..tensor import Tensor, float32, linspace
from . import _core
from .elementwise import add, div, mul, sub
from .linalg import matmul
from .reduction import sum as _sum
from .shape import index, permute, reshape, stack, transpose, unsqueeze

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


def _align(align_corners: Optional[bool]) -> bool:
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def _base_line(steps: int, align_corners: bool) -> np.ndarray:
    """torch's linspace(-1, 1) over `steps` points, scaled by (steps - 1) / steps when the
    corners are not aligned (the points are then the pixels' centres)."""
    line = linspace(-1, 1, steps)._data if steps > 1 else np.zeros(steps, float32)
    return line if align_corners else line * np.float32((steps - 1) / steps)


def affine_grid(theta: Tensor, size: Any, align_corners: Optional[bool] = None) -> Tensor:
    """The (N, H, W, 2) sampling grid of the affine maps theta (N, 2, 3) for an output of size
    (N, C, H, W): grid[n, h, w] = theta[n] · (x_w, y_h, 1)."""
    align = _align(align_corners)
    theta = _core.as_tensor(theta, "affine_grid")
    _core.require_float(theta, "affine_grid", "theta")
    size = tuple(int(s) for s in size)
    if len(size) != 4:
        raise NotImplementedError(f"affine_grid: only 4-D sizes (2-D affine maps) are "
                                  f"supported, got size {size}")
    n, _, h, w = size
    if theta.shape != (n, 2, 3):
        raise ValueError(f"affine_grid: expected a batch of 2D affine matrices of shape "
                         f"({n}, 2, 3) for size {size}, got theta of shape {theta.shape}")
    if min(size) <= 0:
        raise ValueError(f"affine_grid: size must be positive, got {size}")
    base = np.ones((h, w, 3), float32)
    base[..., 0] = _base_line(w, align)
    base[..., 1] = _base_line(h, align)[:, None]
    grid = matmul(Tensor._wrap(base.reshape(1, h * w, 3)), transpose(theta, 1, 2))
    return reshape(grid, (n, h, w, 2))


def _moved(coord: Tensor, value: np.ndarray, slope: np.ndarray, op: str) -> Tensor:
    """A coordinate mapped to `value`, whose derivative is `slope` (clipping, reflection)."""
    return _core.record(op, value.astype(float32), (coord,),
                        lambda g: ((g * slope).astype(float32),))


def _clip(coord: Tensor, size: int) -> Tensor:
    """Into [0, size - 1]; torch's gradient is 0 at and beyond the ends."""
    c = coord._data
    inside = (c > 0) & (c < size - 1)
    return _moved(coord, np.clip(c, 0, size - 1), inside.astype(float32), "grid_clip")


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """Reflected at the ends of [twice_low / 2, twice_high / 2], as torch's
    reflect_coordinates (in float32)."""
    c = coord._data
    if twice_low == twice_high:
        return _moved(coord, np.zeros_like(c), np.zeros_like(c), "grid_reflect")
    low = np.float32(twice_low / 2)
    span = np.float32((twice_high - twice_low) / 2)
    shifted = c - low
    sign = np.where(shifted < 0, np.float32(-1), np.float32(1))
    dist = np.abs(shifted)
    extra = np.fmod(dist, span)
    odd = (np.floor(dist / span) % 2).astype(bool)
    value = np.where(odd, span - extra + low, extra + low)
    return _moved(coord, value, np.where(odd, -sign, sign), "grid_reflect")


def _source(coord: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    """A normalized coordinate in [-1, 1] as a pixel coordinate of an axis of `size`."""
    if align:
        pixel = mul(div(add(coord, 1.0), 2.0), float(size - 1))
    else:
        pixel = div(sub(mul(add(coord, 1.0), float(size)), 1.0), 2.0)
    if padding_mode == "border":
        return _clip(pixel, size)
    if padding_mode == "reflection":
        twice = (0, 2 * (size - 1)) if align else (-1, 2 * size - 1)
        return _clip(_reflect(pixel, *twice), size)
    return pixel


def _check(input: Any, grid: Any, mode: str, padding_mode: str) -> tuple[Tensor, Tensor]:
    x = _core.as_tensor(input, "grid_sample")
    g = _core.as_tensor(grid, "grid_sample")
    _core.require_float(x, "grid_sample", "input")
    _core.require_float(g, "grid_sample", "grid")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"grid_sample: expected mode to be 'bilinear', 'nearest' or "
                         f"'bicubic', but got: {mode!r}")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode='bicubic' is not supported "
                                  "('bilinear' and 'nearest' are)")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: {padding_mode!r}")
    if x.ndim != 4:
        raise NotImplementedError(f"grid_sample: only 4-D (N, C, H, W) input is supported, "
                                  f"got shape {x.shape}")
    if g.ndim != 4 or g.shape[0] != x.shape[0] or g.shape[3] != 2:
        raise ValueError(f"grid_sample: grid must be (N, H_out, W_out, 2) with N = "
                         f"{x.shape[0]} as the input's, got shape {g.shape}")
    return x, g


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: Optional[bool] = None) -> Tensor:
    """input (N, C, H, W) sampled at grid (N, H_out, W_out, 2) of (x, y) in [-1, 1]:
    (N, C, H_out, W_out), with gradients for both (the grid's is 0 in 'nearest' mode)."""
    x, g = _check(input, grid, mode, padding_mode)
    align = _align(align_corners)
    n, c, h, w = x.shape
    ix = _source(index(g, (Ellipsis, 0)), w, padding_mode, align)
    iy = _source(index(g, (Ellipsis, 1)), h, padding_mode, align)
    if mode == "nearest":
        cols, rows = np.rint(ix._data), np.rint(iy._data)  # half to even, as nearbyint
        cols, rows = cols[None], rows[None]
        weights = None
    else:
        x0, y0 = np.floor(ix._data), np.floor(iy._data)
        cols = np.stack([x0, x0 + 1, x0, x0 + 1])  # nw, ne, sw, se
        rows = np.stack([y0, y0, y0 + 1, y0 + 1])
        # Each corner's weight is the area of the rectangle opposite it, as torch's.
        far_x = [Tensor._wrap(cols[3 - k]) for k in range(4)]
        far_y = [Tensor._wrap(rows[3 - k]) for k in range(4)]
        weights = [mul(sub(far_x[k], ix) if k % 2 == 0 else sub(ix, far_x[k]),
                       sub(far_y[k], iy) if k < 2 else sub(iy, far_y[k])) for k in range(4)]
    inside = (cols >= 0) & (cols <= w - 1) & (rows >= 0) & (rows <= h - 1)
    batch = np.broadcast_to(np.arange(n).reshape(1, n, 1, 1), cols.shape)
    # (corners, N, H_out, W_out, C): out-of-range corners read pixel 0 and weigh 0.
    values = index(x, (batch, slice(None), np.where(inside, rows, 0).astype(np.int64),
                       np.where(inside, cols, 0).astype(np.int64)))
    mask = inside.astype(float32)
    if weights is None:
        # The nearest pixel is a step function of the grid: a zero gradient, as torch's.
        grid_shape = g.shape
        corner_weights = _core.record("grid_nearest", mask, (g,),
                                      lambda _: (np.zeros(grid_shape, float32),))
    else:
        corner_weights = mul(stack(weights, 0), Tensor._wrap(mask))
    out = _sum(mul(values, unsqueeze(corner_weights, -1)), 0)
    return permute(out, (0, 3, 1, 2))
