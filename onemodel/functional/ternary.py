"""The SR4 layers' ops: the ternary weight and its products;
the layers are onemodel/nn/ternary.py.

Forward: the product x · Wᵀ runs from a plan of the packed state (csrc/sr4.h: one byte per pair
of weights, rebuilt only when q changed) and adds only: each output sums its pairs of signed
inputs, pair by pair in ascending order (zero weights contribute +0, so an infinite input meets
no 0 · inf). Then the scale and bias run through the ordinary differentiable ops. Backward is
straight-through: the gradient of W is that of a float weight, gᵀ · x, summed over the batch;
the gradient of x is g · W.

TernaryConv2d unfolds the input into its windows (im2col: data movement only) and runs the
same product, the depth in (channel, kernel row, kernel column) order; its backward is that of
a float convolution with the ternary weight (the conv kernels of functional.conv2d).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .._kernels import _conv, _sr4
from ..tensor import Tensor
from . import _core
from . import conv as _fconv
from .linalg import _product, _rows


class TernaryWeight(Tensor):
    """A float32 leaf of ternary values whose state is `packed` (two 4-bit q per byte).

    SR4 initialises `packed` and keeps the values current; gradients accumulate in `.grad`
    like a parameter's. `theta` is the dead zone the values are read with (SR4 sets it).
    """

    __slots__ = ("packed", "theta", "_plan", "_plan_of")
    packed: np.ndarray
    theta: int
    _plan: Optional[np.ndarray]
    _plan_of: Optional[tuple[int, np.ndarray]]  # (theta, q) the plan was built from

    @classmethod
    def zeros(cls, shape: tuple) -> "TernaryWeight":
        t = cls._wrap(np.zeros(shape, np.float32), True)
        n = t._data.size
        t.packed = np.zeros((n + 1) // 2, np.uint8)
        t.theta = 2
        t._plan, t._plan_of = None, None
        return t

    def plan(self, nthreads: int) -> np.ndarray:
        """The plan of the ternary product for the current q and theta (cached).

        The cache is keyed by a copy of q, not by a version counter: q may change under the
        layer (a checkpoint loads the optimizer's q in place), and comparing 4 bits per weight
        costs little next to one product. A rebuilt plan also rewrites the float values, so
        they follow q; graphs already recorded stay valid, as the values only repeat q.
        """
        plan = self._plan
        if plan is None or self._plan_of is None or self._plan_of[0] != self.theta \
                or not np.array_equal(self._plan_of[1], self.packed):
            n = self.shape[0]
            k = self._data.size // n
            if plan is None:
                plan = self._plan = np.empty(_sr4.plan_size(n, k), np.uint8)
            _sr4.ternary_plan(self.packed, n, k, self.theta, plan, nthreads)
            _sr4.materialize(self.packed, self._data.reshape(-1), self.theta, nthreads)
            self._plan_of = (self.theta, self.packed.copy())
        return plan

    def __repr__(self) -> str:
        return "TernaryWeight containing:\n" + super().__repr__()


def ternary_matmul(x: Tensor, w: TernaryWeight) -> Tensor:
    """x · Wᵀ for x (..., in_features) and a TernaryWeight W (out_features, in_features)."""
    x = _core.as_tensor(x, "ternary_matmul")
    _core.require_float(x, "ternary_matmul", "input")
    if not isinstance(w, TernaryWeight) or w.ndim != 2:
        raise TypeError(f"ternary_matmul: weight must be a 2-D TernaryWeight, got "
                        f"{type(w).__name__} of shape {getattr(w, 'shape', None)}")
    n_out, n_in = w.shape
    if x.ndim == 0 or x.shape[-1] != n_in:
        raise ValueError(f"ternary_matmul: input of shape {x.shape} and weight of shape "
                         f"{w.shape}: the last dimension of the input must be {n_in}")
    x_rows = np.ascontiguousarray(x._data.reshape(_rows(x.shape[:-1]), n_in))
    nthreads = _core.threads()
    plan = w.plan(nthreads)
    out = np.empty((x_rows.shape[0], n_out), np.float32)
    _sr4.ternary_matmul(x_rows, plan, n_out, out, nthreads)

    def backward(g: np.ndarray):
        g_rows = g.reshape(x_rows.shape[0], n_out)
        gx = _product(g_rows, w._data).reshape(x.shape) if x.requires_grad else None
        gw = _product(g_rows, x_rows, trans_a=True) if w.requires_grad else None
        return gx, gw

    return _core.record("ternary_matmul", out.reshape(x.shape[:-1] + (n_out,)), (x, w),
                        backward, (x, w))


def ternary_conv2d(x: Tensor, w: TernaryWeight, stride=1, padding=0, dilation=1) -> Tensor:
    """Cross-correlation of x (N, C, H, W) or (C, H, W) with a TernaryWeight (O, C, kh, kw),
    as functional.conv2d with groups 1 and integer padding, by the ternary product."""
    op = "ternary_conv2d"
    x = _fconv._image(x, op)
    if not isinstance(w, TernaryWeight) or w.ndim != 4:
        raise TypeError(f"{op}: weight must be a 4-D TernaryWeight, got {type(w).__name__} of "
                        f"shape {getattr(w, 'shape', None)}")
    stride = _fconv._pair(stride, "stride", op, 1)
    padding = _fconv._pair(padding, "padding", op, 0)
    dilation = _fconv._pair(dilation, "dilation", op, 1)
    n_out, c, kh, kw = w.shape
    batched = x.ndim == 4
    xs = x.shape if batched else (1,) + x.shape
    oh = _fconv._out_size(xs[2], kh, stride[0], padding[0], dilation[0])
    ow = _fconv._out_size(xs[3], kw, stride[1], padding[1], dilation[1])
    if xs[1] != c or oh < 1 or ow < 1:
        raise ValueError(f"{op}: input {x.shape} and weight {w.shape} with stride {stride}, "
                         f"padding {padding}, dilation {dilation}: the input needs {c} "
                         f"channels and room for the dilated kernel")
    x4 = np.ascontiguousarray(x._data.reshape(xs))
    padded = np.pad(x4, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    spans = (dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1)
    windows = np.lib.stride_tricks.sliding_window_view(padded, spans, axis=(2, 3))
    windows = windows[:, :, ::stride[0], ::stride[1], ::dilation[0], ::dilation[1]]
    cols = np.ascontiguousarray(windows.transpose(0, 2, 3, 1, 4, 5)).reshape(-1, c * kh * kw)
    nthreads = _core.threads()
    plan = w.plan(nthreads)
    out = np.empty((cols.shape[0], n_out), np.float32)
    _sr4.ternary_matmul(cols, plan, n_out, out, nthreads)
    y = np.ascontiguousarray(out.reshape(xs[0], oh, ow, n_out).transpose(0, 3, 1, 2))

    def backward(g: np.ndarray):
        gx = np.empty(xs, np.float32) if x.requires_grad else None
        gw = np.empty(w.shape, np.float32) if w.requires_grad else None
        _conv.conv2d_backward(x4, w._data, np.ascontiguousarray(g.reshape(y.shape)), gx, gw,
                              None, stride, padding, dilation, 1, _core.threads())
        return (None if gx is None else gx.reshape(x.shape)), gw

    return _core.record(op, y if batched else y[0], (x, w), backward, (x, w))
