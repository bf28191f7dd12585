"""Elementwise comparisons and tests (bool results, no gradient), numpy's broadcasting and
promotion; allclose and equal answer with one bool."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..tensor import Tensor
from ._core import as_tensor, normalize_dim


def _compare(op: str, ufunc: np.ufunc, input: Any, other: Any) -> Tensor:
    x = as_tensor(input, op)
    # Python scalars stay weakly typed: float32 data against 0.1 compares in float32, as PyTorch.
    o = other._data if isinstance(other, Tensor) else (
        other if isinstance(other, (bool, int, float)) else np.asarray(other))
    try:
        return Tensor._wrap(np.require(ufunc(x._data, o), requirements="C"))
    except ValueError:
        raise ValueError(f"{op}: shapes {x.shape} and {np.shape(o)} cannot be broadcast "
                         "together") from None


def eq(input: Any, other: Any) -> Tensor:
    """input == other, elementwise with broadcasting, as `torch.eq`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.

    Returns
    -------
    Tensor
        A bool tensor, outside the autograd graph.
    """
    return _compare("eq", np.equal, input, other)


def ne(input: Any, other: Any) -> Tensor:
    """input != other, elementwise with broadcasting, as `torch.ne`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.

    Returns
    -------
    Tensor
        A bool tensor, outside the autograd graph.
    """
    return _compare("ne", np.not_equal, input, other)


def lt(input: Any, other: Any) -> Tensor:
    """input < other, elementwise with broadcasting, as `torch.lt`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.

    Returns
    -------
    Tensor
        A bool tensor, outside the autograd graph.
    """
    return _compare("lt", np.less, input, other)


def le(input: Any, other: Any) -> Tensor:
    """input <= other, elementwise with broadcasting, as `torch.le`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.

    Returns
    -------
    Tensor
        A bool tensor, outside the autograd graph.
    """
    return _compare("le", np.less_equal, input, other)


def gt(input: Any, other: Any) -> Tensor:
    """input > other, elementwise with broadcasting, as `torch.gt`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.

    Returns
    -------
    Tensor
        A bool tensor, outside the autograd graph.
    """
    return _compare("gt", np.greater, input, other)


def ge(input: Any, other: Any) -> Tensor:
    """input >= other, elementwise with broadcasting, as `torch.ge`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.

    Returns
    -------
    Tensor
        A bool tensor, outside the autograd graph.
    """
    return _compare("ge", np.greater_equal, input, other)


def _classifier(ufunc: np.ufunc) -> Callable[[Any], Tensor]:
    """torch.isnan and its kin: numpy's test of the same name, elementwise, as a bool tensor."""
    op = ufunc.__name__

    def test(input: Any) -> Tensor:
        return Tensor._wrap(np.require(ufunc(as_tensor(input, op)._data), requirements="C"))

    test.__name__ = test.__qualname__ = op
    test.__doc__ = f"`torch.{op}`: a bool tensor of the input's shape (input: a Tensor)."
    return test


isnan, isinf, isfinite = _classifier(np.isnan), _classifier(np.isinf), _classifier(np.isfinite)


def allclose(input: Any, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """|input - other| <= atol + rtol |other| everywhere (broadcasting), as torch.allclose."""
    a, b = as_tensor(input, "allclose")._data, as_tensor(other, "allclose")._data
    try:
        return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
    except ValueError:
        raise ValueError(f"allclose: shapes {a.shape} and {b.shape} cannot be broadcast "
                         "together") from None


def equal(input: Any, other: Any) -> bool:
    """Same shape and the same values, as torch.equal."""
    a, b = as_tensor(input, "equal")._data, as_tensor(other, "equal")._data
    return a.shape == b.shape and bool(np.array_equal(a, b))


def _truth(op: str, fn: Any, input: Any, dim: Any, keepdim: bool) -> Tensor:
    x = as_tensor(input, op)
    axis = None if dim is None else tuple(normalize_dim(d, x.ndim, op) for d in (
        dim if isinstance(dim, (tuple, list)) else (dim,)))
    return Tensor._wrap(np.require(fn(x._data, axis=axis, keepdims=keepdim), requirements="C"))


def any(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether any element (along dim) is nonzero, as torch.any: a bool tensor."""
    return _truth("any", np.any, input, dim, keepdim)


def all(input: Any, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Whether every element (along dim) is nonzero, as torch.all: a bool tensor."""
    return _truth("all", np.all, input, dim, keepdim)
