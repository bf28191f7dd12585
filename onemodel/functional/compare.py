"""Elementwise comparisons (bool results, no gradient), numpy's broadcasting and promotion."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor
from ._core import as_tensor


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
    return _compare("eq", np.equal, input, other)


def ne(input: Any, other: Any) -> Tensor:
    return _compare("ne", np.not_equal, input, other)


def lt(input: Any, other: Any) -> Tensor:
    return _compare("lt", np.less, input, other)


def le(input: Any, other: Any) -> Tensor:
    return _compare("le", np.less_equal, input, other)


def gt(input: Any, other: Any) -> Tensor:
    return _compare("gt", np.greater, input, other)


def ge(input: Any, other: Any) -> Tensor:
    return _compare("ge", np.greater_equal, input, other)
