"""Elementwise ops: arithmetic with numpy broadcasting, pow, and the activations.

+ − × ÷ and sqrt run in numpy float32: each is one correctly rounded IEEE operation, so the
bits are the same on every path; special values (inf - inf, x / 0) give NaN and inf without
numpy's warnings, as in PyTorch (_ieee.quiet). Every transcendental (exp, log, tanh, sigmoid,
erf, softplus, pow with a non-integer exponent) comes from the project's own kernels in
_kernels._vmath, never from numpy or libm. Backward formulas
follow PyTorch's.
"""
from __future__ import annotations

import builtins
from typing import Any, Callable, Optional, Union

import numpy as np

from .._ieee import quiet
from .._kernels import _vmath
from ..autograd import is_grad_enabled, may_overwrite
from ..tensor import Tensor, float32
from ._core import as_tensor, dense_of_sparse, record, require_float, sum_to_shape, threads

Number = Union[int, float]

_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
# Whether a kernel's backward reads the forward output (else the input).
_SAVES_OUTPUT = {op: _vmath.saves_output(op) for op in _vmath.OPS}


def _vm(op: _vmath.Op, x: np.ndarray) -> np.ndarray:
    """One transcendental over a C-contiguous float32 array, by the exact kernel."""
    out = np.empty(x.shape, float32)
    _vmath.unary(op, x, out, threads())
    return out


def _cast(t: Tensor, dtype: np.dtype) -> Tensor:
    return t if t._data.dtype == dtype else Tensor._wrap(t._data.astype(dtype))


def _operands(a: Any, b: Any, op: str, floating: bool = False) -> tuple:
    """Both operands as tensors of one dtype: float32 if either is float (or `floating`),
    otherwise numpy's integer promotion. Scalars take the other operand's dtype."""
    if type(a) is Tensor and type(b) is Tensor and a._data.dtype is b._data.dtype and (
            not floating or a._data.dtype is float32):
        return a, b
    if not isinstance(a, Tensor):
        a = as_tensor(a, op, b if isinstance(b, Tensor) else None)
    if not isinstance(b, Tensor):
        b = as_tensor(dense_of_sparse(b, a, op), op, a)
    da, db = a._data.dtype, b._data.dtype
    if floating or da == float32 or db == float32:
        dtype = float32
    else:
        dtype = np.result_type(da, db)
    return _cast(a, dtype), _cast(b, dtype)


def _broadcast_error(op: str, a: Tensor, b: Tensor) -> ValueError:
    return ValueError(f"{op}: shapes {a.shape} and {b.shape} cannot be broadcast together")


Sides = tuple  # per operand of a binary op: (requires_grad, shape), as recorded


def _sides(a: Tensor, b: Tensor) -> Sides:
    """What a binary op's backward needs to know of its operands besides their values (a
    closure holding the tensors would keep their values alive for nothing)."""
    return (a._requires_grad, a._data.shape), (b._requires_grad, b._data.shape)


def _grads(g_a: Any, g_b: Any, sides: Sides) -> tuple:
    """Each input's gradient reduced to its shape, computed only when that input needs it."""
    (need_a, shape_a), (need_b, shape_b) = sides
    return (sum_to_shape(g_a(), shape_a) if need_a else None,
            sum_to_shape(g_b(), shape_b) if need_b else None)


@quiet
def add(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """input + alpha·other (alpha·other rounded first, then the sum)."""
    if alpha != 1:
        return add(input, mul(other, alpha))
    a, b = _operands(input, other, "add")
    try:
        out = a._data + b._data
    except ValueError:
        raise _broadcast_error("add", a, b) from None
    sides = _sides(a, b)
    return record("add", out, (a, b), lambda g: _grads(lambda: g, lambda: g, sides))


@quiet
def sub(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """input − alpha·other (alpha·other rounded first, then the difference)."""
    if alpha != 1:
        return sub(input, mul(other, alpha))
    a, b = _operands(input, other, "sub")
    try:
        out = a._data - b._data
    except ValueError:
        raise _broadcast_error("sub", a, b) from None
    sides = _sides(a, b)
    return record("sub", out, (a, b), lambda g: _grads(lambda: g, lambda: -g, sides))


@quiet
def mul(input: Any, other: Any) -> Tensor:
    """The product input * other, elementwise with broadcasting, as `torch.mul`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.
    """
    a, b = _operands(input, other, "mul")
    try:
        out = a._data * b._data
    except ValueError:
        raise _broadcast_error("mul", a, b) from None
    sides = _sides(a, b)
    # Each side's gradient reads the other's values: keep only those a gradient needs.
    x = a._data if b._requires_grad else None
    y = b._data if a._requires_grad else None
    read = (a, b) if x is not None and y is not None else (a,) if x is not None else (b,)
    return record("mul", out, (a, b), lambda g: _grads(lambda: g * y, lambda: g * x, sides),
                  read)


_ROUNDING_MODES = (None, "trunc", "floor")


@quiet
def div(input: Any, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    """True division (integer operands give float32), or with rounding_mode "trunc" or
    "floor" the quotient rounded toward zero or down, in the operands' promoted dtype, as
    PyTorch: a rounded quotient has gradient 0, and integer division by zero raises."""
    if rounding_mode not in _ROUNDING_MODES:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}")
    if rounding_mode is not None:
        return _rounded_div(input, other, rounding_mode)
    a, b = _operands(input, other, "div", floating=True)
    try:
        out = a._data / b._data
    except ValueError:
        raise _broadcast_error("div", a, b) from None
    sides = _sides(a, b)
    x, y = (a._data if b._requires_grad else None), b._data
    return record("div", out, (a, b),
                  lambda g: _grads(lambda: g / y, lambda: -g * (x / y / y), sides),
                  (a, b) if x is not None else (b,))


def _rounded_div(input: Any, other: Any, mode: str) -> Tensor:
    a, b = _operands(input, other, "div")
    x, y = a._data, b._data
    if x.dtype == np.bool_ or y.dtype == np.bool_:
        raise TypeError(f"div: rounding_mode={mode!r} is not defined for bool tensors (shapes "
                        f"{a.shape} and {b.shape})")
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise _broadcast_error("div", a, b) from None
    if x.dtype.kind in "iu":
        if (y == 0).any():
            raise ZeroDivisionError(f"div: integer division by zero (rounding_mode={mode!r}, "
                                    f"shapes {a.shape} and {b.shape})")
        out = x // y  # numpy's integer // is floor division
        if mode == "trunc":
            inexact = (x - out * y) != 0
            out = out + (inexact & ((x < 0) != (y < 0)))
        return Tensor._wrap(np.asarray(out, x.dtype))
    if mode == "trunc":
        out = np.trunc(x / y)
    else:
        out = _floor_divide(x, y)
    zero = np.zeros(shape, float32)
    sides = _sides(a, b)
    return record("div", np.asarray(out, float32), (a, b),
                  lambda g: _grads(lambda: zero, lambda: zero, sides))


def _floor_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """PyTorch's float floor division (c10 div_floor_floating), every step an exact or one
    correctly rounded float32 operation: from the exact remainder fmod(x, y), (x - mod) / y
    is near an integer, rounded to the nearest; y = 0 gives the IEEE quotient x / y."""
    mod = np.fmod(x, y)
    div = (x - mod) / y
    div = div - ((mod != 0) & ((y < 0) != (mod < 0))).astype(float32)
    floor = np.floor(div)
    floor = floor + (div - floor > _HALF).astype(float32)
    out = np.where(div != 0, floor, np.copysign(np.float32(0), x / y))
    return np.where(y == 0, x / y, out)


def neg(input: Tensor) -> Tensor:
    """The negation -input, elementwise, as `torch.neg` (bool tensors refused: use ~).

    Parameters
    ----------
    input : Tensor
        A float or integer tensor.
    """
    x = as_tensor(input, "neg")
    if x._data.dtype == np.bool_:
        raise TypeError(f"neg: not defined for bool tensors (shape {x.shape}); use ~ instead")
    return record("neg", -x._data, (x,), lambda g: (-g,))


def _ipow(x: np.ndarray, n: int) -> np.ndarray:
    """x ** n for an integer n by right-to-left binary exponentiation in float32."""
    k = builtins.abs(n)
    result: Optional[np.ndarray] = None
    base = x
    while k:
        if k & 1:
            result = base if result is None else result * base
        k >>= 1
        if k:
            base = base * base
    if result is None:
        return np.ones(x.shape, float32)
    if n < 0:
        return _ONE / result
    return result.copy() if result is x else result


def _pow_general(b: np.ndarray, e: np.ndarray) -> np.ndarray:
    """b ** e as exp(e·log|b|) by the exact kernels, with IEEE pow's special cases: a negative
    base gives a real result only for an integer exponent (negated when it is odd), and
    x ** 0 = 1 ** y = 1 for every x and y, NaN included."""
    # np.asarray: arithmetic on 0-d arrays gives numpy scalars.
    out = _vm("exp", np.asarray(e * _vm("log", np.asarray(np.abs(b)))))
    out = np.broadcast_to(out, np.broadcast_shapes(b.shape, e.shape)).copy()
    # The sign bit, not b < 0: (-0) ** 3 is -0 and (-0) ** -3 is -inf, as IEEE pow.
    negative = np.signbit(b) & ~np.isnan(b)
    if negative.any():
        integral = np.floor(e) == e
        odd = integral & (np.abs(np.fmod(e, np.float32(2))) == 1)
        # (-inf) ** e and (-0) ** e are ±inf or ±0, never NaN.
        out = np.where((b < 0) & ~integral & (b != -np.inf), np.float32(np.nan), out)
        out = np.where(negative & odd, -out, out).astype(float32, copy=False)
    out[np.broadcast_to((e == 0) | (b == 1), out.shape)] = 1
    return out


def _int_pow(b: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Integer b ** e elementwise, wrapping on overflow as PyTorch (and C) do.

    Binary exponentiation: products modulo 2^bits do not depend on their order, so the result
    is PyTorch's. A negative exponent gives 1 ** e = 1, (-1) ** e = ±1 and 0 otherwise, as
    PyTorch's integer pow."""
    b, e = np.broadcast_arrays(b, e)
    result = np.ones(b.shape, b.dtype)
    base = b.copy()
    k = np.maximum(e, 0)
    while k.any():
        odd = (k & 1).astype(bool)
        np.multiply(result, base, out=result, where=odd)
        k >>= 1
        np.multiply(base, base, out=base)
    odd_e = (e & 1).astype(bool)
    small = np.where(b == 1, 1, np.where(b == -1, np.where(odd_e, -1, 1), 0)).astype(b.dtype)
    return np.where(e < 0, small, result)


@quiet
def pow(input: Any, exponent: Any) -> Tensor:
    """input ** exponent; either may be a tensor or a number.

    Integer operands give an exact integer result (as PyTorch); otherwise float32. A number
    exponent of 2 multiplies, 0.5 takes the square root, other integers use binary
    exponentiation; everything else is exp(exponent · log input)."""
    if isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        if isinstance(exponent, (bool, np.bool_)) or not isinstance(
                exponent, (int, float, np.integer, np.floating)):
            raise TypeError(f"pow: exponent must be a number or a tensor, got "
                            f"{type(exponent).__name__}")
        if input._data.dtype.kind in "iu" and isinstance(exponent, (int, np.integer)):
            if exponent < 0:
                raise ValueError(f"pow: integers to negative integer powers are not allowed "
                                 f"({input.dtype} input of shape {input.shape}, exponent "
                                 f"{exponent})")
            return Tensor._wrap(_int_pow(input._data, np.asarray(exponent, input.dtype)))
        x = _cast(input, float32)
        return _pow_scalar_exponent(x, float(exponent))
    base, expo = _operands(input, exponent, "pow")
    b, e = base._data, expo._data
    if b.dtype.kind in "biu":
        if b.dtype == np.bool_:
            raise TypeError(f"pow: not defined for bool tensors (shapes {base.shape} and "
                            f"{expo.shape})")
        try:
            return Tensor._wrap(_int_pow(b, e))
        except ValueError:
            raise _broadcast_error("pow", base, expo) from None
    try:
        out = _pow_general(b, e)
    except ValueError:
        raise _broadcast_error("pow", base, expo) from None

    def backward(g: np.ndarray) -> tuple:
        def grad_base() -> np.ndarray:
            # x ** 0 is constant: gradient 0 even where x ** -1 is infinite, as PyTorch.
            return np.where(e == 0, np.float32(0), g * (e * _pow_general(b, e - _ONE)))

        def grad_exponent() -> np.ndarray:
            # log of a negative base is NaN, as PyTorch; 0 ** e with e >= 0 has gradient 0.
            log_b = np.where(b < 0, np.float32(np.nan), _vm("log", np.asarray(np.abs(b))))
            gx = g * (out * log_b)
            return np.where((b == 0) & (e >= 0), np.float32(0), gx)

        return _grads(grad_base, grad_exponent, _sides(base, expo))

    return record("pow", out, (base, expo), backward, (base, expo))


def _pow_scalar_exponent(x: Tensor, e: float) -> Tensor:
    a = x._data
    e32 = np.float32(e)
    if e == 2.0:
        out = a * a
        slope = lambda: a * np.float32(2)  # noqa: E731
    elif e == 0.5:
        out = np.sqrt(a)
        slope = lambda: _HALF / out  # noqa: E731
    elif e.is_integer() and builtins.abs(e) < 2 ** 31:
        n = int(e)
        out = _ipow(a, n)
        slope = lambda: e32 * _ipow(a, n - 1)  # noqa: E731
    else:
        out = _pow_general(a, np.asarray(e32))
        slope = lambda: e32 * _pow_general(a, np.asarray(np.float32(e - 1)))  # noqa: E731

    def backward(g: np.ndarray) -> tuple:
        if e == 0.0:
            return (np.zeros(g.shape, float32),)
        return (g * slope(),)

    return record("pow", out, (x,), backward, (x,))


def abs(input: Tensor) -> Tensor:
    """|x|; the gradient is sign(x): 0 at ±0 and at NaN, as PyTorch."""
    x = as_tensor(input, "abs")
    a = x._data
    return record("abs", np.abs(a), (x,),
                  lambda g: (np.where(a > 0, g, np.where(a < 0, -g, np.float32(0))),), (x,))


def _float_input(input: Any, op: str, promote: bool = False) -> Tensor:
    """input as a float32 tensor; with `promote`, integers and bools become float32 (PyTorch
    computes sqrt, exp, log, tanh, sigmoid and erf of them so), otherwise they are refused."""
    x = as_tensor(input, op)
    if promote and x._data.dtype.kind in "biu":
        return _cast(x, float32)
    require_float(x, op)
    return x


def _stepwise(op: str, fn: Any, input: Any) -> Tensor:
    """A function that is constant between its steps: exact in numpy, and its gradient is
    zero (as PyTorch's), so nothing flows back through it."""
    x = as_tensor(input, op)
    return record(op, fn(x._data), (x,), lambda g: (np.zeros_like(g),))


def _rounding(op: str, ufunc: np.ufunc) -> Any:
    """torch.round (halves to even: numpy's rint), floor, ceil and trunc."""
    def rounded(input: Any) -> Tensor:
        return _stepwise(op, ufunc, input)

    rounded.__name__ = rounded.__qualname__ = op
    rounded.__doc__ = f"`torch.{op}` of a Tensor, elementwise; its gradient is zero."
    return rounded


round, floor, ceil, trunc = (_rounding(op, ufunc) for op, ufunc in (
    ("round", np.rint), ("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc)))


def sign(input: Any) -> Tensor:
    """(x > 0) − (x < 0): -1, 0 or 1, and +0 for ±0 and NaN, as torch.sign."""
    return _stepwise("sign", lambda a: np.subtract(a > 0, a < 0, dtype=a.dtype), input)


def square(input: Any) -> Tensor:
    """x·x, as torch.square."""
    x = as_tensor(input, "square")
    return mul(x, x)


def reciprocal(input: Any) -> Tensor:
    """1/x, one rounding, as torch.reciprocal."""
    return div(1.0, _float_input(input, "reciprocal", promote=True))


def rsqrt(input: Any) -> Tensor:
    """1/sqrt(x), each rounded (two roundings), as torch.rsqrt."""
    return reciprocal(sqrt(input))


@quiet
def sqrt(input: Tensor) -> Tensor:
    """The square root (correctly rounded), elementwise, as `torch.sqrt`.

    Parameters
    ----------
    input : Tensor
        A float tensor; integers and bools are computed as float32.

    Returns
    -------
    Tensor
        A float32 tensor of the input's shape.
    """
    x = _float_input(input, "sqrt", promote=True)
    out = np.sqrt(x._data)
    return record("sqrt", out, (x,), lambda g: (g / (out + out),))


def _transcendental(op: str, input: Any, kernel: _vmath.Op, promote: bool = False) -> Tensor:
    """An op of _vmath: forward and backward by the exact kernels."""
    x = _float_input(input, op, promote)
    out = _vm(kernel, x._data)
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


Bound = Union[Number, Tensor, None]


def clamp(input: Tensor, min: Bound = None, max: Bound = None) -> Tensor:
    """min(max(x, min), max), the bounds numbers or tensors broadcast with x (NaN anywhere
    gives NaN). Gradients as PyTorch's: x's passes where min <= x <= max; min's where
    x < min < max; max's where x > max or max < min (then max is the result)."""
    x = as_tensor(input, "clamp")
    if min is None and max is None:
        raise ValueError(f"clamp: at least one of min and max must be given (shape {x.shape})")
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and (isinstance(bound, (bool, np.bool_)) or not isinstance(
                bound, (Tensor, int, float, np.integer, np.floating))):
            raise TypeError(f"clamp: {name} must be a number or a tensor, got "
                            f"{type(bound).__name__}")
    dtype = x._data.dtype
    for bound in (min, max):
        if isinstance(bound, (float, np.floating)) or (
                isinstance(bound, Tensor) and bound._data.dtype == float32):
            dtype = float32
        elif isinstance(bound, Tensor) and dtype != float32:
            dtype = np.result_type(dtype, bound._data.dtype)
    x = _cast(x, dtype)
    lo = None if min is None else _cast(as_tensor(min, "clamp", x), dtype)
    hi = None if max is None else _cast(as_tensor(max, "clamp", x), dtype)
    a = x._data
    try:
        out = a if lo is None else np.maximum(a, lo._data)
        out = out if hi is None else np.minimum(out, hi._data)
    except ValueError:
        shapes = ", ".join(f"{n} {t.shape}" for n, t in (("min", lo), ("max", hi))
                           if t is not None)
        raise ValueError(f"clamp: input {x.shape}, {shapes} cannot be broadcast "
                         "together") from None
    keep = None
    if lo is not None:
        keep = a >= lo._data
    if hi is not None:
        keep = a <= hi._data if keep is None else keep & (a <= hi._data)
    assert keep is not None  # min or max is given (checked above)
    bounds = tuple(t for t in (lo, hi) if t is not None)

    def backward(g: np.ndarray) -> tuple:
        grads = [sum_to_shape(np.where(keep, g, 0), a.shape) if x._requires_grad else None]
        if lo is not None:
            wins = a < lo._data if hi is None else (a < lo._data) & (lo._data < hi._data)
            grads.append(sum_to_shape(np.where(wins, g, 0), lo.shape)
                         if lo._requires_grad else None)
        if hi is not None:
            wins = a > hi._data if lo is None else (a > hi._data) | (hi._data < lo._data)
            grads.append(sum_to_shape(np.where(wins, g, 0), hi.shape)
                         if hi._requires_grad else None)
        return tuple(grads)

    return record("clamp", out, (x,) + bounds, backward, (x,) + bounds)


def clamp_min(input: Tensor, min: Union[Number, Tensor]) -> Tensor:
    """clamp(input, min=min): max(input, min) elementwise, as `torch.clamp_min`.

    Parameters
    ----------
    input : Tensor
        The tensor to clamp.
    min : number or Tensor
        The lower bound, broadcast against the input.
    """
    return clamp(input, min=min)


def clamp_max(input: Tensor, max: Union[Number, Tensor]) -> Tensor:
    """clamp(input, max=max): min(input, max) elementwise, as `torch.clamp_max`.

    Parameters
    ----------
    input : Tensor
        The tensor to clamp.
    max : number or Tensor
        The upper bound, broadcast against the input.
    """
    return clamp(input, max=max)


def _extremum(op: str, input: Any, other: Any, pick: np.ufunc, loses: np.ufunc) -> Tensor:
    """The elementwise larger (or smaller) of two broadcast operands, NaN if either is NaN.
    The gradient is PyTorch's: g to the one that wins, g/2 to each on a tie, and g to both
    where a NaN makes neither win."""
    a, b = _operands(input, other, op)
    try:
        out = pick(a._data, b._data)
    except ValueError:
        raise _broadcast_error(op, a, b) from None

    def backward(g: np.ndarray) -> tuple:
        x, y = a._data, b._data
        share = np.where(x == y, g * _HALF, g)
        return _grads(lambda: np.where(loses(x, y), 0, share),
                      lambda: np.where(loses(y, x), 0, share), _sides(a, b))

    return record(op, out, (a, b), backward, (a, b))


@quiet
def maximum(input: Any, other: Any) -> Tensor:
    """The larger of input and other (NaN if either is), elementwise with broadcasting, as
    `torch.maximum`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.
    """
    return _extremum("maximum", input, other, np.maximum, np.less)


@quiet
def minimum(input: Any, other: Any) -> Tensor:
    """The smaller of input and other (NaN if either is), elementwise with broadcasting, as
    `torch.minimum`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.
    """
    return _extremum("minimum", input, other, np.minimum, np.greater)


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """input where condition holds, other elsewhere, all three broadcast together."""
    c = condition._data if isinstance(condition, Tensor) else np.asarray(condition)
    if c.dtype != np.bool_:
        raise TypeError(f"where: condition must be a bool tensor, got {c.dtype} "
                        f"(shape {c.shape})")
    a, b = _operands(input, other, "where")
    try:
        out = np.where(c, a._data, b._data)
    except ValueError:
        raise ValueError(f"where: condition {c.shape}, input {a.shape} and other {b.shape} "
                         "cannot be broadcast together") from None

    sides = _sides(a, b)

    def backward(g: np.ndarray) -> tuple:
        return _grads(lambda: np.where(c, g, 0), lambda: np.where(c, 0, g), sides)

    return record("where", out, (a, b), backward)


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
