"""Reductions: sum, mean, max and min over axes, and argmax and argmin.

Float sums go through the engine's one summation kernel (_core.sum_axis), so their association
order depends on the shape alone: the reduced axes are grouped into runs of adjacent axes, each
run is merged into one axis, and the runs are reduced one at a time, innermost first. A sum over
the whole tensor is therefore one reduction along the flattened vector. Integer sums are exact in
any order and use numpy.
"""
from __future__ import annotations

import math
import warnings
from collections import namedtuple
from typing import Any, Optional, Sequence, Union

import numpy as np

from .._kernels import _direct
from ..tensor import Tensor, float32, int32, int64
from ..tensor import _dtype_arg as dtype_arg
from ._core import as_tensor, normalize_dim, record, sum_axis, threads
from .elementwise import maximum, minimum

Dim = Union[None, int, Sequence[int]]

# torch.return_types.max (and .min): a named pair, also unpackable as a tuple.
MaxResult = namedtuple("max", ["values", "indices"])  # type: ignore[name-match]
MinResult = namedtuple("min", ["values", "indices"])  # type: ignore[name-match]


def _axes(dim: Dim, ndim: int, op: str) -> tuple:
    """The reduced axes, sorted; None or () means every axis, as PyTorch."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int) and ndim:
        return (normalize_dim(dim, ndim, op),)
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    axes = [normalize_dim(d, ndim, op) for d in dims]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: dim {tuple(dims)} names an axis more than once "
                         f"(tensor of rank {ndim})")
    if not axes:
        return tuple(range(ndim))
    return tuple(sorted(a for a in axes if a < ndim))


def _kept_shape(shape: tuple, axes: tuple) -> tuple:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _sum_float(a: np.ndarray, axes: tuple) -> np.ndarray:
    """Σ of float32 `a` over `axes` (dropped) in the engine's fixed order."""
    if len(axes) == a.ndim:
        return sum_axis(a.reshape(-1), 0)
    if len(axes) == 1:
        return sum_axis(a, axes[0])
    merged: list[int] = []
    reduced: list[int] = []
    previous = None
    for i, size in enumerate(a.shape):
        r = i in axes
        if r is previous:
            merged[-1] *= size
        else:
            merged.append(size)
            if r:
                reduced.append(len(merged) - 1)
        previous = r
    x = a.reshape(merged)
    for axis in reversed(reduced):
        x = sum_axis(x, axis)
    return x.reshape(tuple(s for i, s in enumerate(a.shape) if i not in axes))


def _expand(g: np.ndarray, shape: tuple, axes: tuple) -> np.ndarray:
    """A reduced gradient broadcast back over the reduced axes (a fresh contiguous array)."""
    return np.broadcast_to(g.reshape(_kept_shape(shape, axes)), shape).copy()


def sum(input: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
    """Σ over `dim` (an int, a tuple, or None for all); integers and bools sum to int64."""
    if not keepdim:  # a float32 tensor without a graph over one axis or all: the kernel directly
        direct = _direct.reduce(_direct.SUM, input, dim, threads())
        if direct is not None:
            return direct
    x = as_tensor(input, "sum")
    a = x._data
    shape = a.shape
    axes = _axes(dim, a.ndim, "sum")
    if a.dtype == float32:
        out = _sum_float(a, axes) if axes else a.copy()
    else:
        out = np.asarray(np.sum(a, axis=axes, dtype=int64))
    if keepdim:
        out = out.reshape(_kept_shape(shape, axes))
    return record("sum", out, (x,), lambda g: (_expand(g, shape, axes),))


def mean(input: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
    """The float32 sum divided by the element count (NaN over no elements, as PyTorch)."""
    x = as_tensor(input, "mean")
    a = x._data
    if a.dtype != float32:
        raise TypeError(f"mean: input must be float32, got {a.dtype} (shape {a.shape}); "
                        "convert it with .float()")
    shape = a.shape
    axes = _axes(dim, a.ndim, "mean")
    count = np.float32(math.prod(shape[i] for i in axes))
    # Over no elements: 0/0 = NaN forward, and a gradient for no elements at all.
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (_sum_float(a, axes) if axes else a.copy()) / count
    if keepdim:
        out = out.reshape(_kept_shape(shape, axes))

    def backward(g: np.ndarray) -> tuple:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (_expand(g / count, shape, axes),)

    return record("mean", out, (x,), backward)


def var(input: Tensor, dim: Dim = None, *, correction: float = 1, keepdim: bool = False,
        unbiased: Optional[bool] = None) -> Tensor:
    """Σ (x − mean)² / max(0, N − correction), as torch.var (unbiased=False, the older spelling,
    is correction 0); composed of mean, sub, mul and sum, so its bits and gradient are theirs.
    With no degrees of freedom left (N <= correction) it is NaN, or inf where the entries
    differ, and warns, as torch."""
    return _variance(input, dim, correction, keepdim, unbiased, "var")


def std(input: Tensor, dim: Dim = None, *, correction: float = 1, keepdim: bool = False,
        unbiased: Optional[bool] = None) -> Tensor:
    """sqrt(var), as torch.std."""
    return _variance(input, dim, correction, keepdim, unbiased, "std").sqrt()


def _variance(input: Tensor, dim: Dim, correction: float, keepdim: bool,
              unbiased: Optional[bool], name: str) -> Tensor:
    x = as_tensor(input, name)
    axes = _axes(dim, x.ndim, name)
    c = correction if unbiased is None else int(unbiased)
    freedom = math.prod(x.shape[i] for i in axes) - c
    if freedom <= 0:  # torch divides by zero then: 0/0 = NaN, a positive sum over 0 = inf
        warnings.warn(f"{name}(): degrees of freedom is <= 0: the correction {c} is not less "
                      f"than the {freedom + c} entries reduced", UserWarning, stacklevel=3)
        freedom = 0
    d = x - mean(x, axes, keepdim=True)
    return sum(d * d, axes, keepdim) / float(freedom)


def norm(input: Tensor, p: Any = "fro", dim: Dim = None, keepdim: bool = False) -> Tensor:
    """The 2-norm ("fro", 2; its gradient 0 where the norm is 0, as torch's), the 1-norm or the
    largest |x| (inf) over dim or the whole tensor, as torch.norm."""
    x = as_tensor(input, "norm")
    if p == 1:
        return sum(x.abs(), dim, keepdim)
    if p == math.inf:
        return amax(x.abs(), dim, keepdim)
    if p not in ("fro", 2):
        raise ValueError(f"norm: p must be 'fro', 2, 1 or inf, got {p!r}")
    if x._data.dtype != float32:
        raise TypeError(f"norm: input must be float32, got {x._data.dtype} (shape {x.shape})")
    a = x._data
    axes = _axes(dim, a.ndim, "norm")
    out = np.sqrt(_sum_float(a * a, axes) if axes else a * a)
    if keepdim:
        out = out.reshape(_kept_shape(a.shape, axes))

    def backward(g: np.ndarray) -> tuple:
        kept = out.reshape(_kept_shape(a.shape, axes))
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(kept == 0, np.float32(0), g.reshape(kept.shape) / kept)
        return (a * scale,)

    return record("norm", out, (x,), backward, (x,))


def _extreme_over(op: str, input: Tensor, dim: Dim, keepdim: bool) -> Tensor:
    """torch.amax / amin: the largest (smallest) value over dims (all for None or ()), the
    gradient shared equally among ties; the reduced axes are moved last and merged into one."""
    x = as_tensor(input, op)
    axes = _axes(dim, x.ndim, op)
    kept = [i for i in range(x.ndim) if i not in axes]
    flat = x.permute(kept + list(axes)).reshape(tuple(x.shape[i] for i in kept) + (-1,))
    if flat.shape[-1] == 0:
        raise ValueError(f"{op}: dims {dim} of shape {x.shape} hold no elements")
    out = (max if op == "amax" else min)(flat, -1)[0]
    return out.reshape(_kept_shape(x.shape, axes)) if keepdim else out


def amax(input: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
    """The maximum of the elements over `dim`, as `torch.amax`; the gradient is shared evenly among
    tied elements.

    Parameters
    ----------
    input : Tensor
        The tensor to reduce.
    dim : int or tuple of int, optional
        The dimensions to reduce (default: all).
    keepdim : bool, optional
        Keep the reduced dimensions with size 1 (default False).
    """
    return _extreme_over("amax", input, dim, keepdim)


def amin(input: Tensor, dim: Dim = None, keepdim: bool = False) -> Tensor:
    """The minimum of the elements over `dim`, as `torch.amin`; the gradient is shared evenly among
    tied elements.

    Parameters
    ----------
    input : Tensor
        The tensor to reduce.
    dim : int or tuple of int, optional
        The dimensions to reduce (default: all).
    keepdim : bool, optional
        Keep the reduced dimensions with size 1 (default False).
    """
    return _extreme_over("amin", input, dim, keepdim)


def logsumexp(input: Tensor, dim: Dim, keepdim: bool = False) -> Tensor:
    """log Σ exp(x) over dim, shifted by the largest value (0 where that is infinite) so that
    nothing overflows, as torch.logsumexp; composed of the exact ops."""
    x = as_tensor(input, "logsumexp")
    m = amax(x, dim, keepdim=True).detach()
    m = m.where(m.isfinite(), 0.0)
    out = (x - m).exp().sum(dim, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(s for i, s in enumerate(x.shape)
                                                 if i not in _axes(dim, x.ndim, "logsumexp")))


def max(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """max(x): the largest element (NaN if any), its gradient shared equally among ties as
    torch.amax. max(x, dim): (values, indices) of the first largest along dim, the gradient
    going to that index, as torch.max. max(x, other) with a tensor other: maximum(x, other)."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    return _extreme("max", input, dim, keepdim, np.max, np.argmax)


def min(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The smallest element, or (values, indices) along dim, or minimum(x, other): as max."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    return _extreme("min", input, dim, keepdim, np.min, np.argmin)


def _extreme(op: str, input: Tensor, dim: Optional[int], keepdim: bool, pick: Any,
             arg: Any) -> Any:
    x = as_tensor(input, op)
    a = x._data
    if dim is None:
        if a.size == 0:
            raise ValueError(f"{op}: input of shape {a.shape} is empty; give dim for an empty "
                             "tensor")
        value = pick(a)
        out = np.asarray(value)

        def backward(g: np.ndarray) -> tuple:
            ties = np.isnan(a) if np.isnan(value) else a == value
            return (np.where(ties, g / np.float32(np.count_nonzero(ties)), np.float32(0)),)

        return record(op, out, (x,), backward, (x,))

    axis = normalize_dim(dim, a.ndim, op)
    work = a.reshape(a.shape or (1,))
    if work.shape[axis] == 0:
        raise ValueError(f"{op}: dim {dim} of input of shape {a.shape} has size 0")
    idx = np.expand_dims(arg(work, axis=axis), axis)
    values = np.take_along_axis(work, idx, axis)
    out_shape = work.shape[:axis] + work.shape[axis + 1:] if a.ndim and not keepdim \
        else (idx.shape if a.ndim else ())

    def along_backward(g: np.ndarray) -> tuple:
        grad = np.zeros(work.shape, float32)
        np.put_along_axis(grad, idx, g.reshape(idx.shape), axis)
        return (grad.reshape(a.shape),)

    indices = Tensor._wrap(idx.reshape(out_shape).astype(int64))
    result = MaxResult if op == "max" else MinResult
    return result(record(op, values.reshape(out_shape), (x,), along_backward), indices)


def prod(input: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """The product over the flattened tensor or along dim, each factor multiplied in after the
    previous one (sequential, so the same bits everywhere); integers and bools give int64, as
    torch.prod. The gradient of factor i is g times the product of all the others, taken as the
    running products before and after it, so a zero factor gets the others' product, as torch's.
    """
    x = as_tensor(input, "prod")
    if dim is None:
        out = prod(x.reshape(-1), 0)
        return out.reshape((1,) * x.ndim) if keepdim else out
    a = x._data
    axis = normalize_dim(dim, a.ndim, "prod")
    if a.dtype != float32:
        return Tensor._wrap(np.require(np.prod(a, axis=axis, keepdims=keepdim, dtype=int64),
                                       requirements="C"))
    if a.ndim == 0:
        return record("prod", a.copy(), (x,), lambda g: (g,))
    n = a.shape[axis]
    one = np.ones(a.shape[:axis] + (1,) + a.shape[axis + 1:], float32)
    before = np.concatenate([one, np.multiply.accumulate(a, axis=axis)], axis=axis)
    out = np.take(before, n, axis=axis)

    def backward(g: np.ndarray) -> tuple:
        after = np.flip(np.multiply.accumulate(np.flip(a, axis), axis=axis), axis)
        after = np.concatenate([after, one], axis=axis)
        others = np.take(before, range(n), axis=axis) * np.take(after, range(1, n + 1), axis=axis)
        return (others * np.expand_dims(g.reshape(out.shape), axis),)

    return record("prod", np.expand_dims(out, axis) if keepdim else out, (x,), backward)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Running sums along dim, each one float32 add after the previous (sequential, so the
    same bits everywhere); integers and bools give int64, as PyTorch. dtype converts the input
    first, as torch's (int32 keeps int32)."""
    x = as_tensor(input, "cumsum")
    target = None if dtype is None else dtype_arg(dtype, "cumsum")
    if target is not None and target != x.dtype:
        x = Tensor._wrap(x._data.astype(target))
    a = x._data
    axis = normalize_dim(dim, a.ndim, "cumsum")
    if a.ndim == 0:
        return record("cumsum", a.copy() if a.dtype == float32 else a.astype(int64), (x,),
                      lambda g: (g,))
    if a.dtype != float32:
        return Tensor._wrap(np.cumsum(a, axis=axis, dtype=target if target == int32 else int64))
    out = np.add.accumulate(a, axis=axis)

    def backward(g: np.ndarray) -> tuple:
        # d out_j / d x_i = 1 for j >= i: the gradient's running sums taken from the end.
        reversed_g = np.flip(g, axis)
        return (np.ascontiguousarray(np.flip(np.add.accumulate(reversed_g, axis=axis), axis)),)

    return record("cumsum", out, (x,), backward)


def _index_of(op: str, fn: Any, input: Tensor, dim: Optional[int], keepdim: bool) -> Tensor:
    x = as_tensor(input, op)
    if x._data.size == 0:
        raise ValueError(f"{op}: the tensor of shape {x.shape} has no elements")
    if dim is None:
        index = np.asarray(fn(x._data), dtype=int64)
        return Tensor._wrap(index.reshape((1,) * x.ndim) if keepdim else index)
    axis = normalize_dim(dim, x.ndim, op)
    return Tensor._wrap(np.require(fn(x._data, axis=axis, keepdims=keepdim), int64, "C"))


def argmax(input: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """The index of the largest value (the first, as PyTorch on CPU; NaN counts as the
    largest) over the flattened tensor or along dim; int64."""
    return _index_of("argmax", np.argmax, input, dim, keepdim)


def argmin(input: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """The index of the smallest value, as argmax."""
    return _index_of("argmin", np.argmin, input, dim, keepdim)
