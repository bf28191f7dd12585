"""Activations composed of the exact ops: relu6, hardtanh, hardswish, mish, softsign,
logsigmoid and prelu, with PyTorch's arguments.

Their bits follow from the ops they are built of and their gradients come from autograd
(mish's from PyTorch's expression, see there). At a breakpoint PyTorch's gradient is that of
its scalar kernel, which a `where` on a mask reproduces: hardtanh's (and relu6's) passes
strictly between the bounds and at NaN, where clamp's would pass at the bounds too.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._ieee import quiet
from ..tensor import Tensor
from ._core import as_tensor, record, require_float
from .elementwise import _float_input, _vm, check_not_inplace, softplus, where
from .shape import reshape


def _hardtanh(op: str, input: Any, min_val: float, max_val: float, inplace: bool) -> Tensor:
    check_not_inplace(op, inplace)
    x = _float_input(input, op)
    if min_val > max_val:
        raise ValueError(f"{op}: min_val {min_val} cannot be greater than max_val {max_val}")
    a, lo, hi = x._data, np.float32(min_val), np.float32(max_val)
    return where((a <= lo) | (a >= hi), np.clip(a, lo, hi), x)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val]; the gradient passes strictly between them (and at NaN),
    as PyTorch's."""
    return _hardtanh("hardtanh", input, min_val, max_val, inplace)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """hardtanh(x, 0, 6): the gradient is 0 at 0 and at 6, as PyTorch's."""
    return _hardtanh("relu6", input, 0.0, 6.0, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x·min(max(x + 3, 0), 6) / 6 in PyTorch's order (Howard et al. 2019), so the same bits.
    The clamped factor is x + 3 only strictly inside (-3, 3), a constant elsewhere (6 at NaN),
    which gives PyTorch's gradient: 0 from -3 down, g from 3 up and at NaN, g·(2x + 3)/6 in
    between."""
    check_not_inplace("hardswish", inplace)
    x = _float_input(input, "hardswish")
    a = x._data
    outside = np.where(a <= -3, np.float32(0), np.float32(6))
    return x * where((a > -3) & (a < 3), x + 3.0, outside) / 6.0


@quiet
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x·tanh(softplus(x)) (Misra 2019), its gradient PyTorch's one expression
    t + x·σ(x)·(1 − t²), t = tanh(softplus(x)), by the exact kernels: as for silu, the chain
    rule through mul would give g·x·0 = NaN where g·x overflows."""
    check_not_inplace("mish", inplace)
    x = _float_input(input, "mish")
    a = x._data
    t, s = _vm("tanh", _vm("softplus", a)), _vm("sigmoid", a)
    return record("mish", a * t, (x,), lambda g: (g * (t + a * s * (1 - t * t)),), (x,))


def softsign(input: Tensor) -> Tensor:
    """x / (|x| + 1), PyTorch's expression (the gradient at 0 is 1)."""
    x = _float_input(input, "softsign")
    return x / (x.abs() + 1.0)


def logsigmoid(input: Tensor) -> Tensor:
    """log σ(x) = -softplus(-x), stable for any x; the gradient σ(-x)."""
    return -softplus(-_float_input(input, "logsigmoid"))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight·x (the gradient at 0 is weight's side, as PyTorch's); weight
    holds one value, or one per channel (dim 1 of an input of rank 2 or more)."""
    x = _float_input(input, "prelu")
    w = as_tensor(weight, "prelu")
    require_float(w, "prelu", "weight")
    if w.ndim > 1:
        raise ValueError(f"prelu: weight must be a scalar or 1-D, got shape {w.shape}")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w._data.size not in (1, channels):
        raise ValueError(f"prelu: {w._data.size} weights for input {x.shape} with {channels} "
                         "channels (dim 1): expected 1 or one per channel")
    w = reshape(w, () if w._data.size == 1 else (channels,) + (1,) * (x.ndim - 2))
    return where(x._data > 0, x, w * x)


__all__ = ["hardswish", "hardtanh", "logsigmoid", "mish", "prelu", "relu6", "softsign"]
