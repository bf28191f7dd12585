"""The activations whose forward and backward are written here, with PyTorch's arguments, bits
and gradients: tanh, sigmoid, softplus, gelu and relu by the exact kernels of _kernels._vmath,
silu, leaky_relu and elu; and in_place, PyTorch's inplace=True, which these, activation.py's and
dropout's take. activation.py holds the activations composed of these and of the arithmetic.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._grad_buffers import may_overwrite
from .._ieee import quiet
from .._kernels import _direct, _vmath
from ..autograd import is_grad_enabled
from ..tensor import Tensor, float32
from ._core import as_tensor, record, threads
from .elementwise import _ONE, mul, where
from .transcendental import KERNEL, _float_input, _transcendental, _vm


def tanh(input: Tensor) -> Tensor:
    """The hyperbolic tangent, elementwise, as `torch.tanh`. onemodel's own kernel: the same bits
    on every machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("tanh", input, "tanh", promote=True)


def sigmoid(input: Tensor) -> Tensor:
    """The logistic function 1 / (1 + exp(-x)), elementwise, as `torch.sigmoid`. onemodel's own
    kernel: the same bits on every machine and instruction set.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    return _transcendental("sigmoid", input, "sigmoid", promote=True)


@quiet
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta·x)) / beta, and x itself where beta·x > threshold, as PyTorch.

    With the defaults the cut changes nothing (past 17, softplus(x) rounds to x in float32),
    so the kernel alone serves."""
    if beta == 1.0 and threshold >= 20.0:
        return _transcendental("softplus", input, "softplus")
    x = _float_input(input, "softplus")
    a = x._data
    b32 = np.float32(beta)
    z = np.asarray(a * b32)
    linear = z > np.float32(threshold)
    out = np.where(linear, a, _vm("softplus", z) / b32)

    def backward(g: np.ndarray) -> tuple:
        dz = np.empty(g.shape, float32)
        _vmath.unary_backward("softplus", z, np.asarray(g, float32, order="C"), dz, threads())
        return (np.where(linear, g, dz),)

    return record("softplus", out, (x,), backward, (x,))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x·Φ(x) with the exact normal CDF ("none") or PyTorch's tanh approximation ("tanh")."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _transcendental("gelu", input, "gelu" if approximate == "none" else "gelu_tanh")


_RELU_MASKED = 1 << 16


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """x < 0 ? 0 : x (-0 and NaN pass), its gradient g where the output is > 0 or NaN, as
    PyTorch; float32 by the vmath kernel (one pass each way), integers by numpy.

    The backward needs only where the gradient passes: from _RELU_MASKED elements on, the
    graph keeps that as one bit per element (not the float32 output, which the next op may
    not need to keep), and the kernel reads it widened to 1.0 / 0.0; below, the output itself
    (the mask's passes would cost more time than its memory is worth)."""
    if inplace:
        return in_place("relu", input, relu)
    # Without a graph, any size by the kernel directly (the backward's choice is moot).
    direct = _direct.unary(KERNEL["relu"], input, threads(), False)
    if direct is not None:
        return direct
    x = as_tensor(input, "relu")
    if x._data.dtype != float32:
        return Tensor._wrap(np.maximum(x._data, 0))
    if x._data.size < _RELU_MASKED:
        return _transcendental("relu", x, "relu")
    out = _vm("relu", x._data)
    flat_out = out.reshape(-1)
    # Where the gradient stops (a NaN output passes it), packed 8 to a byte a block at a time
    # (blocks of whole bytes: no full-size byte mask beside the output either).
    stops = np.empty((out.size + 7) // 8, np.uint8)
    for i in range(0, out.size, _RELU_MASKED):
        stops[i // 8:(i + _RELU_MASKED) // 8] = np.packbits(
            np.less_equal(flat_out[i:i + _RELU_MASKED], 0))

    def backward(g: np.ndarray) -> tuple:
        # The mask is widened a block at a time: a widened copy of all of it would be as large
        # as the gradient, alive beside it and dx at the peak of a convnet's backward.
        dx = g if may_overwrite(g) else np.empty(g.shape, float32)
        flat_g, flat_dx = np.asarray(g, float32, order="C").reshape(-1), dx.reshape(-1)
        for i in range(0, dx.size, _RELU_MASKED):
            n = min(_RELU_MASKED, dx.size - i)
            block_stops = np.unpackbits(stops[i // 8:(i + n + 7) // 8], count=n)
            _vmath.unary_backward("relu", np.subtract(_ONE, block_stops, dtype=float32),
                                  flat_g[i:i + n], flat_dx[i:i + n], threads())
        return (dx,)

    return record("relu", out, (x,), backward)


def in_place(op: str, input: Any, function: Callable[[Tensor], Tensor]) -> Tensor:
    """torch's inplace=True: input itself, now holding function(input), its version bumped (a
    node that saved input refuses to run, as torch's). Outside the graph the values are
    written into input's memory. In it, function runs on a stand-in for input as it was (its
    array, node and version counter), and input then takes the result's array and node, as
    torch's graph rebases an in-place op: the nodes function made read the former array, so
    no gradient reads overwritten values. A leaf that requires grad is refused, as by torch."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: inplace=True needs a Tensor input, got {type(input).__name__}")
    if not (is_grad_enabled() and input._requires_grad):
        result = function(input)
        if result is not input:
            np.copyto(input._data, result._data)
            input._version += 1
        return input
    if input._node is None:
        raise RuntimeError(f"{op}: a leaf tensor that requires grad is used in an in-place "
                           "operation; pass inplace=False or wrap it in onemodel.no_grad()")
    former = Tensor._wrap(input._data, True)
    former._node, former._vc = input._node, input._vc
    result = function(former)
    if result is not former:
        input._data, input._node, input._vc = result._data, result._node, [input._vc[0] + 1]
    return input


@quiet
def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x·sigmoid(x) (Ramachandran et al. 2017's swish), its gradient PyTorch's one product
    s·(1 + x·(1 − s)): the chain rule through mul and sigmoid would give g·x·0 = NaN where
    g·x overflows."""
    if inplace:
        return in_place("silu", input, silu)
    x = _float_input(input, "silu")
    a = x._data
    s = _vm("sigmoid", a)
    return record("silu", a * s, (x,), lambda g: (g * (s * (_ONE + a * (_ONE - s))),), (x,))


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope·x; the gradient at 0 is the slope, as PyTorch."""
    if inplace:
        return in_place("leaky_relu", input, lambda t: leaky_relu(t, negative_slope))
    x = _float_input(input, "leaky_relu")
    return where(x > 0, x, mul(x, np.float32(negative_slope)))


@quiet
def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha·(exp(x) − 1); the gradient there is alpha·exp(x), as PyTorch.

    exp(x) − 1 cancels for small |x|; Kahan's (e − 1)·x / log(e), e = exp(x), restores the
    digits (PyTorch calls expm1) using only the exact exp and log kernels."""
    if inplace:
        return in_place("elu", input, lambda t: elu(t, alpha))
    x = _float_input(input, "elu")
    a = x._data
    neg = np.minimum(a, np.float32(0))  # exp of the positive side would overflow unused
    e = _vm("exp", np.asarray(neg))
    em1 = e - _ONE
    kahan = em1 * neg / _vm("log", np.asarray(e))
    em1 = np.where(e == _ONE, neg, np.where(em1 == -_ONE, em1, kahan))
    a32 = np.float32(alpha)
    # x <= 0 picks the exponential side, so NaN takes the linear one (gradient g), as PyTorch.
    negative = a <= 0
    out = np.where(negative, a32 * em1, a)
    return record("elu", out, (x,), lambda g: (np.where(negative, g * (a32 * e), g),), (x,))
