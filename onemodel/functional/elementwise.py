"""Elementwise arithmetic with numpy broadcasting: add, sub, mul, div, neg, pow, abs, sqrt, the
roundings, clamp, maximum, minimum and where.

+ − × ÷ and sqrt run in numpy float32: each is one correctly rounded IEEE operation, so the
bits are the same on every path; special values (inf - inf, x / 0) give NaN and inf without
numpy's warnings, as in PyTorch (_ieee.quiet). pow with a non-integer exponent is exp and log
by the project's own kernels (transcendental.py), never numpy's or libm's. Backward formulas
follow PyTorch's.

The transcendental functions (transcendental.py) and the activations written out with their
gradients (activation_basic.py) are importable from here too.
"""
from __future__ import annotations

import builtins
from typing import Any, Optional, Union

import numpy as np

from .._ieee import quiet
from .._kernels import _direct
from ..tensor import Tensor, float32
from ._core import as_tensor, dense_of_sparse, record, sum_to_shape
from .transcendental import (  # noqa: F401 (the public names are importable from here too)
    _cast,
    _float_input,
    _vm,
    cos,
    erf,
    exp,
    expm1,
    log,
    log1p,
    sin,
)

Number = Union[int, float]

_HALF = np.float32(0.5)
_ONE = np.float32(1.0)


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


def _record_add(out: Any, a: Tensor, b: Tensor) -> Tensor:
    sides = _sides(a, b)
    return record("add", out, (a, b), lambda g: _grads(lambda: g, lambda: g, sides))


def _record_sub(out: Any, a: Tensor, b: Tensor) -> Tensor:
    sides = _sides(a, b)
    return record("sub", out, (a, b), lambda g: _grads(lambda: g, lambda: -g, sides))


def _record_mul(out: Any, a: Tensor, b: Tensor) -> Tensor:
    sides = _sides(a, b)
    # Each side's gradient reads the other's values: keep only those a gradient needs.
    x = a._data if b._requires_grad else None
    y = b._data if a._requires_grad else None
    read = (a, b) if x is not None and y is not None else (a,) if x is not None else (b,)
    return record("mul", out, (a, b), lambda g: _grads(lambda: g * y, lambda: g * x, sides),
                  read)


def _record_div(out: Any, a: Tensor, b: Tensor) -> Tensor:
    sides = _sides(a, b)
    x, y = (a._data if b._requires_grad else None), b._data
    return record("div", out, (a, b),
                  lambda g: _grads(lambda: g / y, lambda: -g * (x / y / y), sides),
                  (a, b) if x is not None else (b,))


# Per op: the direct kernel's code, numpy's ufunc, and the recording of its graph node.
_ARITHMETIC = {"add": (_direct.ADD, np.add, _record_add),
               "sub": (_direct.SUB, np.subtract, _record_sub),
               "mul": (_direct.MUL, np.multiply, _record_mul),
               "div": (_direct.DIV, np.true_divide, _record_div)}


@quiet
def _numpy_arithmetic(op: str, a: Tensor, b: Tensor) -> Any:
    try:
        return _ARITHMETIC[op][1](a._data, b._data)
    except ValueError:
        raise _broadcast_error(op, a, b) from None


def _arithmetic(op: str, input: Any, other: Any) -> Tensor:
    """input op other: by the direct kernel when it applies (float32 operands of one shape, or
    a float32 tensor and a Python number: no numpy call, no error state to set), otherwise by
    numpy after PyTorch's promotion; the same bits either way."""
    code, _, record_op = _ARITHMETIC[op]
    out = _direct.binary(code, input, other)
    if type(out) is Tensor:
        return out
    if out is None:
        a, b = _operands(input, other, op, floating=op == "div")
        out = _numpy_arithmetic(op, a, b)
    else:  # the direct kernel's bare array: an operand requires gradients (a number becomes the
        # 0-d tensor _operands makes of it)
        a = input if isinstance(input, Tensor) else as_tensor(input, op, other)
        b = other if isinstance(other, Tensor) else as_tensor(other, op, input)
    return record_op(out, a, b)


def add(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """input + alpha·other (alpha·other rounded first, then the sum)."""
    if alpha != 1:
        return add(input, mul(other, alpha))
    return _arithmetic("add", input, other)


def sub(input: Any, other: Any, *, alpha: Number = 1) -> Tensor:
    """input − alpha·other (alpha·other rounded first, then the difference)."""
    if alpha != 1:
        return sub(input, mul(other, alpha))
    return _arithmetic("sub", input, other)


def mul(input: Any, other: Any) -> Tensor:
    """The product input * other, elementwise with broadcasting, as `torch.mul`.

    Parameters
    ----------
    input, other : Tensor or number
        The operands.
    """
    return _arithmetic("mul", input, other)


_ROUNDING_MODES = (None, "trunc", "floor")


def div(input: Any, other: Any, *, rounding_mode: Optional[str] = None) -> Tensor:
    """True division (integer operands give float32), or with rounding_mode "trunc" or
    "floor" the quotient rounded toward zero or down, in the operands' promoted dtype, as
    PyTorch: a rounded quotient has gradient 0, and integer division by zero raises."""
    if rounding_mode not in _ROUNDING_MODES:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}")
    if rounding_mode is not None:
        return _rounded_div(input, other, rounding_mode)
    return _arithmetic("div", input, other)


@quiet
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


# The activations, importable from here as before (imported last: they use the ops above).
from .activation_basic import (  # noqa: E402, F401
    elu,
    gelu,
    in_place,
    leaky_relu,
    relu,
    sigmoid,
    silu,
    softplus,
    tanh,
)
