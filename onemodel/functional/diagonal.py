"""Diagonals, as torch's: `diagonal` reads one (a view's values, copied), `diag_embed` writes
a last dimension onto one, `diag` is either for a vector or a matrix. No arithmetic: the
gradients move values back to where they came from (zeros elsewhere), so their bits are the
output gradient's."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import _core


def _positions(rows: int, cols: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of diagonal `offset` (above the main one when positive) of a
    rows x cols matrix."""
    length = max(min(rows + min(offset, 0), cols - max(offset, 0)), 0)
    i = np.arange(length)
    return i + max(-offset, 0), i + max(offset, 0)


def _int_arg(value: object, op: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, got {value!r}")
    return int(value)


def _two_dims(dim1: int, dim2: int, ndim: int, op: str) -> tuple[int, int]:
    d1, d2 = _core.normalize_dim(dim1, ndim, op), _core.normalize_dim(dim2, ndim, op)
    if d1 == d2:
        raise ValueError(f"{op}: dim1 and dim2 cannot be the same dimension, got {dim1} "
                         f"and {dim2}")
    return d1, d2


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal `offset` of the matrices spanned by dim1 and dim2, as a last dimension."""
    x = _core.as_tensor(input, "diagonal")
    offset = _int_arg(offset, "diagonal", "offset")
    if x.ndim < 2:
        raise ValueError(f"diagonal: expected a tensor of at least 2 dimensions, got shape "
                         f"{x.shape}")
    d1, d2 = _two_dims(dim1, dim2, x.ndim, "diagonal")
    shape = x.shape
    rows, cols = _positions(shape[d1], shape[d2], offset)
    out = np.moveaxis(x._data, (d1, d2), (-2, -1))[..., rows, cols]

    def backward(g: np.ndarray) -> tuple:
        gx = np.zeros(shape, np.float32)
        np.moveaxis(gx, (d1, d2), (-2, -1))[..., rows, cols] = g
        return (gx,)
    return _core.record("diagonal", out, (x,), backward)


_diagonal = diagonal  # for diag, whose argument `diagonal` shadows the function


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A tensor whose matrices over (dim1, dim2) hold input's last dimension on diagonal
    `offset` and zeros elsewhere."""
    x = _core.as_tensor(input, "diag_embed")
    offset = _int_arg(offset, "diag_embed", "offset")
    if x.ndim < 1:
        raise ValueError("diag_embed: expected a tensor of at least 1 dimension, got a 0-d one")
    d1, d2 = _two_dims(dim1, dim2, x.ndim + 1, "diag_embed")
    side = x.shape[-1] + abs(offset)
    rows, cols = _positions(side, side, offset)
    out = np.zeros(x.shape[:-1] + (side, side), x.dtype)
    out[..., rows, cols] = x._data
    out = np.moveaxis(out, (-2, -1), (d1, d2))

    def backward(g: np.ndarray) -> tuple:
        return (np.moveaxis(g, (d1, d2), (-2, -1))[..., rows, cols],)
    return _core.record("diag_embed", out, (x,), backward)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A vector -> the square matrix with it on diagonal `diagonal`; a matrix -> that
    diagonal, as torch.diag."""
    x = _core.as_tensor(input, "diag")
    if x.ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if x.ndim == 2:
        return _diagonal(x, diagonal)
    raise ValueError(f"diag: expected a 1-D or 2-D tensor, got shape {x.shape}")
