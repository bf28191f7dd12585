"""sort and topk: values with their int64 indices, the gradient put back at those indices.

The order is stable (ties keep their index order), and NaN counts as larger than every number,
as in PyTorch: NaN comes last ascending and first descending.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any, Optional

import numpy as np

from ..tensor import Tensor, float32
from ._core import as_tensor, normalize_dim, record

# torch.return_types.sort / topk: named pairs, also unpackable as tuples.
# torch's type names, which their repr shows: sort(values=..., indices=...).
SortResult = namedtuple("sort", ["values", "indices"])  # type: ignore[name-match]
TopkResult = namedtuple("topk", ["values", "indices"])  # type: ignore[name-match]


def _order(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The stable sorting permutation of a along axis."""
    moved = np.moveaxis(a, axis, -1)
    nan = np.isnan(moved) if moved.dtype.kind == "f" else np.zeros(moved.shape, bool)
    if descending:
        # Negating bools or unsigned values would not reverse them: rank by the inverted order.
        key = -moved if moved.dtype.kind == "f" else -moved.astype(np.int64)
        order = np.lexsort((key, ~nan), axis=-1)
    else:
        order = np.lexsort((moved, nan), axis=-1)
    return np.moveaxis(order, -1, axis)


def _pick(op: str, x: Tensor, axis: int, idx: np.ndarray) -> tuple[Tensor, Tensor]:
    """(values, indices) of x at idx along axis, differentiable in the values."""
    values = np.take_along_axis(x._data, idx, axis)
    shape = x.shape

    def backward(g: np.ndarray) -> tuple:
        grad = np.zeros(shape, float32)
        np.put_along_axis(grad, idx, g, axis)  # the indices are distinct: nothing adds up
        return (grad,)

    return record(op, values, (x,), backward), Tensor._wrap(np.require(idx, np.int64, "C"))


def _operand(input: Any, op: str, dim: int) -> tuple:
    """(x with at least one axis, the axis, whether x was 0-d)."""
    x = as_tensor(input, op)
    if x.ndim == 0:
        normalize_dim(dim, 1, op)
        return x.reshape(1), 0, True
    return x, normalize_dim(dim, x.ndim, op), False


def _result(kind: Any, values: Tensor, indices: Tensor, scalar: bool) -> Any:
    if scalar:
        values, indices = values.reshape(()), indices.reshape(())
    return kind(values, indices)


def sort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
    """(values, indices) sorted along dim, as torch.sort (always stable here)."""
    x, axis, scalar = _operand(input, "sort", dim)
    return _result(SortResult, *_pick("sort", x, axis, _order(x._data, axis, bool(descending))),
                   scalar)


def topk(input: Tensor, k: int, dim: Optional[int] = None, largest: bool = True,
         sorted: bool = True) -> Any:
    """The k largest (or smallest) values along dim (the last by default) and their indices,
    as torch.topk; the values come in sorted order whether or not `sorted` is set."""
    dim = -1 if dim is None else dim
    x, axis, scalar = _operand(input, "topk", dim)
    size = x.shape[axis]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= size:
        raise ValueError(f"topk: k must be an integer in [0, {size}] (the size of dim {dim} of "
                         f"input of shape {() if scalar else x.shape}), got {k!r}")
    order = _order(x._data, axis, bool(largest))
    idx = np.take(order, np.arange(int(k)), axis=axis)
    return _result(TopkResult, *_pick("topk", x, axis, idx), scalar)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, *,
            stable: bool = False) -> Tensor:
    """The indices that sort input along dim, as torch.argsort (stable here)."""
    return sort(input, dim, descending, stable=stable)[1]
