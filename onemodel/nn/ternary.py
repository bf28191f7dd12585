"""TernaryLinear: the SR4 layer (spec/sr4.txt sections 2 and 5).

    Z = scale ⊙ (x · Wᵀ) + bias,   W (out_features, in_features) in {-1, 0, +1}

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
"""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .._kernels import _sr4
from ..functional import _core
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
            n, k = self.shape
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


def ternary_weights(module: Module) -> list[TernaryWeight]:
    """The TernaryWeight of every TernaryLinear in `module`, in module order (for SR4)."""
    return [m.weight for m in module.modules() if isinstance(m, TernaryLinear)]
