"""TernaryLinear and TernaryConv2d: the SR4 layers (docs/spec/sr4.txt sections 2 and 5).

    Z = scale ⊙ (x · Wᵀ) + bias,   W (out_features, in_features) in {-1, 0, +1}

and the same for a convolution, with one scale and bias per output channel.

W is the materialisation of a packed 4-bit state q that the SR4 optimizer owns and updates; the
layer holds it as `weight`, a TernaryWeight. The weight is deliberately not a module parameter:
its training state is SR4's (`q.<i>` in the optimizer's state, 4 bits per weight), so
`model.parameters()` lists the float32 scales and biases (trained by SGD at their own rates)
and `ternary_weights(model)` lists the weights to hand to SR4. A checkpoint of the model with
its SR4 optimizer therefore stores each weight once, as 4 bits.

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

import numpy as np

from .. import functional as F
from .._kernels import _conv, _sr4
from ..functional import _core
from ..functional import conv as _fconv
from ..functional.linalg import _product, _rows
from ..tensor import Tensor
from .init import fan_in_bound
from .layers import _positive
from .module import Module, Parameter


class TernaryWeight(Tensor):
    """A float32 leaf of ternary values whose state is `packed` (two 4-bit q per byte).

    SR4 initialises `packed` and keeps the values current; gradients accumulate in `.grad`
    like a parameter's. `theta` is the dead zone the values are read with (SR4 sets it).
    """

    __slots__ = ("packed", "theta", "_plan", "_plan_of")

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
        if self._plan_of is None or self._plan_of[0] != self.theta \
                or not np.array_equal(self._plan_of[1], self.packed):
            n = self.shape[0]
            k = self._data.size // n
            if self._plan is None:
                self._plan = np.empty(_sr4.plan_size(n, k), np.uint8)
            _sr4.ternary_plan(self.packed, n, k, self.theta, self._plan, nthreads)
            _sr4.materialize(self.packed, self._data.reshape(-1), self.theta, nthreads)
            self._plan_of = (self.theta, self.packed.copy())
        return self._plan

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


class TernaryLinear(Module):
    """Z = scale ⊙ (x · Wᵀ) + bias with ternary W; scale starts at 1/√in_features, bias at 0.

    Until an SR4 optimizer takes `weight`, every weight is 0.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features = _positive(in_features, "in_features", "TernaryLinear")
        self.out_features = _positive(out_features, "out_features", "TernaryLinear")
        # A plain attribute, not a registered parameter (see the module note).
        self.weight = TernaryWeight.zeros((self.out_features, self.in_features))
        self.scale = Parameter(np.full(self.out_features, fan_in_bound(self.in_features),
                                       np.float32))
        if bias:
            self.bias = Parameter(np.zeros(self.out_features, np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        z = F.mul(ternary_matmul(x, self.weight), self.scale)
        return z if self.bias is None else F.add(z, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class TernaryConv2d(Module):
    """Z = scale ⊙ conv2d(x, W) + bias per output channel, W (out, in, kh, kw) ternary; groups
    1, zero padding. scale starts at 1/√(in·kh·kw), bias at 0; every weight is 0 until an SR4
    optimizer takes `weight` (see TernaryLinear)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, bias: bool = True) -> None:
        super().__init__()
        layer = "TernaryConv2d"
        self.in_channels = _positive(in_channels, "in_channels", layer)
        self.out_channels = _positive(out_channels, "out_channels", layer)
        self.kernel_size = _fconv._pair(kernel_size, "kernel_size", layer, 1)
        self.stride = _fconv._pair(stride, "stride", layer, 1)
        self.padding = _fconv._pair(padding, "padding", layer, 0)
        self.dilation = _fconv._pair(dilation, "dilation", layer, 1)
        self.weight = TernaryWeight.zeros((self.out_channels, self.in_channels)
                                          + self.kernel_size)
        fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        self.scale = Parameter(np.full(self.out_channels, fan_in_bound(fan_in), np.float32))
        if bias:
            self.bias = Parameter(np.zeros(self.out_channels, np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        z = ternary_conv2d(x, self.weight, self.stride, self.padding, self.dilation)
        z = F.mul(z, self.scale.reshape(-1, 1, 1))
        return z if self.bias is None else F.add(z, self.bias.reshape(-1, 1, 1))

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"bias={self.bias is not None}")


def ternary_weights(module: Module) -> list[TernaryWeight]:
    """The TernaryWeight of every ternary layer in `module`, in module order (for SR4)."""
    return [m.weight for m in module.modules() if isinstance(m, (TernaryLinear, TernaryConv2d))]
