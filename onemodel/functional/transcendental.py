"""The transcendental functions by the project's own kernels (_kernels._vmath): exp, log, erf,
expm1, log1p, sin and cos, forward and backward, never numpy's or libm's, so the bits are the
same on every machine and instruction set. Also what every op on those kernels shares (here, in
elementwise.py and in activation_basic.py): _vm runs one kernel over an array, _transcendental
makes an op of one, and _float_input takes the input as float32.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels import _direct, _vmath
from ..tensor import Tensor, float32
from ._core import as_tensor, record, require_float, threads

# Whether a kernel's backward reads the forward output (else the input).
_SAVES_OUTPUT = {op: _vmath.saves_output(op) for op in _vmath.OPS}
# Each kernel's number, as _direct.unary takes it.
KERNEL = {op: i for i, op in enumerate(_vmath.OPS)}


def _vm(op: _vmath.Op, x: np.ndarray) -> np.ndarray:
    """One transcendental over a C-contiguous float32 array, by the exact kernel."""
    out = np.empty(x.shape, float32)
    _vmath.unary(op, x, out, threads())
    return out


def _cast(t: Tensor, dtype: np.dtype) -> Tensor:
    return t if t._data.dtype == dtype else Tensor._wrap(t._data.astype(dtype))


def _float_input(input: Any, op: str, promote: bool = False) -> Tensor:
    """input as a float32 tensor; with `promote`, integers and bools become float32 (PyTorch
    computes sqrt, exp, log, tanh, sigmoid and erf of them so), otherwise they are refused."""
    x = as_tensor(input, op)
    if promote and x._data.dtype.kind in "biu":
        return _cast(x, float32)
    require_float(x, op)
    return x


def _transcendental(op: str, input: Any, kernel: _vmath.Op, promote: bool = False) -> Tensor:
    """An op of _vmath: forward and backward by the exact kernels (a float32 tensor's forward
    by _direct.unary, which skips the checks and the array calls)."""
    out = _direct.unary(KERNEL[kernel], input, threads(), True)
    if type(out) is Tensor:
        return out
    if out is None:
        x = _float_input(input, op, promote)
        out = _vm(kernel, x._data)
    else:  # the bare output of a float32 tensor that requires gradients
        x = input
    saved = out if _SAVES_OUTPUT[kernel] else x._data

    def backward(g: np.ndarray) -> tuple:
        dx = np.empty(g.shape, float32)
        _vmath.unary_backward(kernel, saved, np.asarray(g, float32, order="C"), dx, threads())
        return (dx,)

    return record(op, out, (x,), backward, () if _SAVES_OUTPUT[kernel] else (x,))


def exp(input: Tensor) -> Tensor:
    """The exponential, elementwise, as `torch.exp`. onemodel's own kernel: the same bits on every
    machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("exp", input, "exp", promote=True)


def log(input: Tensor) -> Tensor:
    """The natural logarithm, elementwise, as `torch.log`. onemodel's own kernel: the same bits on
    every machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("log", input, "log", promote=True)


def erf(input: Tensor) -> Tensor:
    """The error function, elementwise, as `torch.erf`. onemodel's own kernel: the same bits on
    every machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("erf", input, "erf", promote=True)


def expm1(input: Tensor) -> Tensor:
    """exp(x) - 1, accurate near 0, elementwise, as `torch.expm1`. onemodel's own kernel: the same
    bits on every machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("expm1", input, "expm1", promote=True)


def log1p(input: Tensor) -> Tensor:
    """log(1 + x), accurate near 0, elementwise, as `torch.log1p`. onemodel's own kernel: the same
    bits on every machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("log1p", input, "log1p", promote=True)


def sin(input: Tensor) -> Tensor:
    """The sine, elementwise, as `torch.sin`. onemodel's own kernel: the same bits on every machine
    and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("sin", input, "sin", promote=True)


def cos(input: Tensor) -> Tensor:
    """The cosine, elementwise, as `torch.cos`. onemodel's own kernel: the same bits on every
    machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("cos", input, "cos", promote=True)
