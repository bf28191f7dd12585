"""What every op shares: argument checks, recording a graph node, reducing broadcast gradients.

An op validates its arguments (raising ValueError/TypeError that name the op and the shapes
before any kernel runs), computes its output array, and calls `record` with a closure that
maps the output gradient to its inputs' gradients.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _config, autograd
from .._kernels import _direct, _reduce
from ..tensor import Tensor, _as_array, float32

_direct.bind(Tensor, autograd.Node, autograd._state)

threads = _config.num_threads  # the thread count kernels use, read at every call


def as_tensor(x: Any, op: str, like: Optional[Tensor] = None) -> Tensor:
    """A Tensor for x; Python and numpy scalars take the dtype of `like` (float32 otherwise)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float, np.number)) or (isinstance(x, np.ndarray)
                                                        and x.ndim == 0):
        dtype = like._data.dtype if like is not None and like._data.dtype != np.bool_ \
            else float32
        if isinstance(x, float) and dtype.kind != "f":
            dtype = float32
        return Tensor._wrap(np.asarray(x, dtype=dtype))
    if isinstance(x, (np.ndarray, list, tuple)):
        return Tensor._wrap(_as_array(x, None))  # (Tensor(x) would make it float32)
    raise TypeError(f"{op}: expected a Tensor or a number, got {type(x).__name__}")


def dense_of_sparse(x: Any, like: Any, op: str) -> Any:
    """A sparse COO right operand as its dense tensor, as torch's dense-sparse add and product
    answer a dense tensor; anything else unchanged. The dense result's sums are the dense op's."""
    if op not in ("add", "sub", "matmul", "mm") or isinstance(x, Tensor) or not getattr(
            x, "is_sparse", False):
        return x
    if op in ("add", "sub") and isinstance(like, Tensor) and like.shape != tuple(x.shape):
        raise ValueError(f"{op}: a sparse other must have the input's size (no broadcasting), "
                         f"got {tuple(x.shape)} and {like.shape}")
    return x.to_dense()


def require_float(t: Tensor, op: str, name: str = "input") -> None:
    # Identity first: arrays share numpy's float32 descriptor, and `is` skips a rich compare.
    if t._data.dtype is not float32 and t._data.dtype != float32:
        raise TypeError(f"{op}: {name} must be float32, got {t._data.dtype} "
                        f"(shape {t.shape})")


def normalize_dim(dim: int, ndim: int, op: str) -> int:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an integer, got {dim!r}")
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise ValueError(f"{op}: dim {dim} out of range for a tensor of rank {ndim}")
    return int(dim) % rank


def broadcast_shape(a: tuple, b: tuple, op: str) -> tuple:
    if a == b:  # the common case, without np.broadcast_shapes' microseconds
        return a
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        raise ValueError(f"{op}: shapes {a} and {b} cannot be broadcast together") from None


# record(op, out, inputs, backward, saved=()) wraps `out` in a Tensor and, when gradients are
# needed, links it into the graph: backward(g) returns one gradient per input (None where not
# needed), and `saved` lists the tensors whose values it reads, protected against in-place
# writes. In Cython: every recorded op calls it.
record = _direct.record


def sum_axis(x: np.ndarray, axis: int, keepdims: bool = False) -> np.ndarray:
    """Sum of float32 x over one axis in the engine's fixed order (_kernels/csrc/reduce.c)."""
    shape = x.shape
    out = np.empty(shape[:axis] + ((1,) if keepdims else ()) + shape[axis + 1:], np.float32)
    # math.prod on the int shape: np.prod costs microseconds per call.
    _reduce.sum_axis(np.ascontiguousarray(x, dtype=np.float32), out, math.prod(shape[:axis]),
                     shape[axis], math.prod(shape[axis + 1:]), threads())
    return out


def sum_to_shape(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Reduces a broadcast gradient back to `shape`: leading axes first, then size-1 axes."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.reshape((math.prod(g.shape[:lead]),) + g.shape[lead:])
        g = sum_axis(g, 0)
    for axis, size in enumerate(shape):
        if size == 1 and g.shape[axis] != 1:
            g = sum_axis(g, axis, keepdims=True)
    return g.reshape(shape)
