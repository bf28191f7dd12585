"""Activations composed of the exact ops: relu6, hardtanh, hardswish, hardsigmoid, mish,
softsign, logsigmoid, prelu, selu, celu, glu, softmin, threshold, tanhshrink, softshrink and
hardshrink, with PyTorch's arguments.

Their bits follow from the ops they are built of and their gradients come from autograd
(mish's from PyTorch's expression, see there). At a breakpoint PyTorch's gradient is that of
its scalar kernel, which a `where` on a mask reproduces: hardtanh's (and relu6's) passes
strictly between the bounds and at NaN, where clamp's would pass at the bounds too.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .._ieee import quiet
from ..tensor import Tensor
from ._core import as_tensor, normalize_dim, record, require_float
from .elementwise import _float_input, _vm, elu, in_place, sigmoid, softplus, tanh, where
from .nn import _softmax, implicit_dim
from .shape import narrow, reshape


def _hardtanh(op: str, input: Any, min_val: float, max_val: float, inplace: bool) -> Tensor:
    if inplace:
        return in_place(op, input, lambda t: _hardtanh(op, t, min_val, max_val, False))
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
    if inplace:
        return in_place("hardswish", input, hardswish)
    x = _float_input(input, "hardswish")
    a = x._data
    outside = np.where(a <= -3, np.float32(0), np.float32(6))
    return x * where((a > -3) & (a < 3), x + 3.0, outside) / 6.0


@quiet
def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x + 3, 0), 6) / 6, PyTorch's expression; the gradient g/6 passes strictly inside
    (-3, 3) only (0 at the bounds and at NaN), as PyTorch's."""
    if inplace:
        return in_place("hardsigmoid", input, hardsigmoid)
    x = _float_input(input, "hardsigmoid")
    a = x._data
    return where((a > -3) & (a < 3), x + 3.0, np.clip(a + 3, 0, 6)) / 6.0


@quiet
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x·tanh(softplus(x)) (Misra 2019), its gradient PyTorch's one expression
    t + x·σ(x)·(1 − t²), t = tanh(softplus(x)), by the exact kernels: as for silu, the chain
    rule through mul would give g·x·0 = NaN where g·x overflows."""
    if inplace:
        return in_place("mish", input, mish)
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


# Klambauer et al. 2017's constants, as PyTorch's.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = np.float32(1.0507009873554804934193349852946)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale·elu(x, alpha) with Klambauer et al.'s constants (PyTorch's convention at 0 and NaN
    is elu's)."""
    if inplace:
        return in_place("selu", input, selu)
    return elu(_float_input(input, "selu"), _SELU_ALPHA) * _SELU_SCALE


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0 (and at NaN), else alpha·(exp(x·(1/alpha)) − 1), PyTorch's arithmetic
    (Barron 2017). Built on elu's exponential side, which takes only x·(1/alpha) <= 0, so alpha
    must be positive (PyTorch refuses only 0)."""
    if inplace:
        return in_place("celu", input, lambda t: celu(t, alpha))
    x = _float_input(input, "celu")
    if not alpha > 0:
        raise ValueError(f"celu: alpha must be positive, got {alpha}")
    return where(x._data <= 0, elu(x * np.float32(1.0 / alpha), alpha), x)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a·σ(b), a and b the halves of input along dim (Dauphin et al. 2017)."""
    x = _float_input(input, "glu")
    if x.ndim == 0:
        raise ValueError("glu: input must have at least one dimension to halve, got a scalar")
    d = normalize_dim(dim, x.ndim, "glu")
    half, odd = divmod(x.shape[d], 2)
    if odd:
        raise ValueError(f"glu: dimension {dim} of input {x.shape} has odd size {x.shape[d]}; "
                         "it must be halved")
    return narrow(x, d, 0, half) * sigmoid(narrow(x, d, half, half))


def softmin(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3,
            dtype: Any = None) -> Tensor:
    """softmax(-x) along dim, as PyTorch's; without dim, its deprecated implicit choice."""
    x = as_tensor(input, "softmin")
    if dim is None:
        dim = implicit_dim("softmin", x.ndim, _stacklevel)
    return _softmax("softmin", -x, dim, False, dtype)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """value where x <= threshold, else x (NaN passes, with its gradient), as PyTorch's."""
    if inplace:
        return in_place("threshold", input, lambda t: _threshold(t, threshold, value))
    return _threshold(input, threshold, value)


def _threshold(input: Any, threshold: float, value: float) -> Tensor:
    x = _float_input(input, "threshold")
    return where(x._data <= np.float32(threshold), np.float32(value), x)


def tanhshrink(input: Tensor) -> Tensor:
    """x − tanh(x), PyTorch's composition."""
    x = _float_input(input, "tanhshrink")
    return x - tanh(x)


def _shrink_band(op: str, input: Any, lambd: float) -> tuple:
    """(x, its array, lambd as float32, where |x| <= lambd): PyTorch's shrinks give zero there,
    and a zero gradient (also at ±lambd; NaN is outside)."""
    x = _float_input(input, op)
    a, lam = x._data, np.float32(lambd)
    return x, a, lam, (a >= -lam) & (a <= lam)


@quiet
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x − lambd above lambd, x + lambd below −lambd, 0 (x·0, signed) between, as PyTorch's."""
    if not lambd >= 0:
        raise ValueError(f"softshrink: lambd must be >= 0, got {lambd}")
    x, a, lam, band = _shrink_band("softshrink", input, lambd)
    return where(band, a * np.float32(0), x - np.where(a > lam, lam, -lam))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0, as PyTorch's (a negative lambd keeps every x)."""
    x, _, _, band = _shrink_band("hardshrink", input, lambd)
    return where(band, np.float32(0), x)


__all__ = ["celu", "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "logsigmoid",
           "mish", "prelu", "relu6", "selu", "softmin", "softshrink", "softsign", "tanhshrink",
           "threshold"]
