"""Tensor's in-place methods (add_, mul_, clamp_, __setitem__, relu_, ...), as torch's.

Outside the graph the result is written straight into the tensor's memory. When the result
needs a gradient (grad mode on and the tensor or an operand requires grad), the out-of-place op
runs on a stand-in holding a copy of the tensor's values and its node (so the nodes it records
read the values as they were, as torch saves `original self`), its result is written into the
tensor's memory, and the tensor takes the op's node: the graph is rebased as torch's. Either
way the bits are the out-of-place op's, detached aliases (detach(), .data) see the write, and
the version is bumped, so a node that saved the tensor refuses to run. A leaf that requires
grad is refused while grad mode is on, as by torch.

onemodel has no views: indexing, reshape and the like return copies (only detach() and .data
share memory, and they share the version counter), so a write through one of them never
reaches the tensor it came from.
"""
from __future__ import annotations

import builtins
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

from . import autograd
from ._ieee import quiet

if TYPE_CHECKING:
    from .tensor import Tensor

Compute = Callable[["Tensor"], "Tensor"]


class InplaceMethods:
    """Mixed into Tensor (which holds the slots used here)."""

    if not TYPE_CHECKING:  # (mypy would refuse the assignments to Tensor's slots below)
        __slots__ = ()
    _data: np.ndarray
    _requires_grad: bool
    _node: Optional[autograd.Node]
    _vc: list
    _version: int
    grad: Optional["Tensor"]

    def _check_inplace(self, op: str, writes: bool = True) -> None:
        """`writes`: the op changes values, not only the shape (unsqueeze_ and the like)."""
        if not (autograd.is_grad_enabled() and self._requires_grad):
            return
        node = self._node
        if node is None:
            raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an "
                               "in-place operation (a leaf tensor that requires grad; wrap the "
                               "update in onemodel.no_grad())")
        if not writes:  # a shape change reaches no other tensor; torch still refuses it on
            # a view of a leaf that requires grad
            if node.op in _VIEW_OPS and not isinstance(node.inputs[0], autograd.Node):
                raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is "
                                   "being used in an in-place operation")
            return
        # A "view" (a copy here) of a tensor something still holds: torch's write would reach
        # that tensor, ours would not. Refused rather than silently different.
        if node.op in _VIEW_OPS and sys.getrefcount(node.inputs[0]) > _HELD_BY_ONE:
            base = node.inputs[0]
            what = "a leaf Variable that requires grad" if not isinstance(base, autograd.Node) \
                else "a tensor still in use"
            raise RuntimeError(
                f"{op}: this tensor was made by {node.op} from {what}; in torch it would be a "
                "view sharing that tensor's memory, but onemodel's views are copies, so the "
                "write would not reach it. Write into that tensor (base[index] = value), or use "
                "the out-of-place op")

    def _in_graph(self, *operands: Any) -> bool:
        from .tensor import Tensor
        return autograd.is_grad_enabled() and (self._requires_grad or builtins.any(
            isinstance(o, Tensor) and o._requires_grad for o in operands))

    def _other(self, other: Any) -> Any:
        """The operand as numpy sees it: Python scalars stay weakly typed, so float32 data
        combined with a Python float is computed in float32 (as in PyTorch)."""
        from .tensor import Tensor
        if isinstance(other, Tensor):
            return other._data
        if isinstance(other, (bool, int, float)):
            return other
        return np.asarray(other)

    def _check_broadcast(self, op: str, other: Any) -> None:
        shape = np.shape(self._other(other))
        try:
            fits = np.broadcast_shapes(shape, self._data.shape) == self._data.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"{op}: operand of shape {shape} does not broadcast to "
                             f"{self._data.shape}")

    def _rebase(self, op: str, compute: Compute, *operands: Any,
                reshaped: bool = False) -> "Tensor":
        """self = compute(self), differentiable when it needs to be (the module's comment);
        `reshaped`: the result may have another shape (unsqueeze_, t_, ...)."""
        from .tensor import Tensor
        self._check_inplace(op, writes=not reshaped)
        store = self._restride if reshaped else self._store
        me: Tensor = self  # type: ignore[assignment]
        if not self._in_graph(*operands):
            return store(op, compute(me))
        former = Tensor._wrap(self._data.copy(), self._requires_grad)
        former._node = self._node
        result = compute(former)
        store(op, result)
        if result._node is not None:
            if former._node is not None and former._node.retained is not None:
                # retain_grad follows the tensor to its new node, as torch's
                result._node.retained, former._node.retained = former._node.retained, None
            self._node, self._requires_grad = result._node, True
        return me

    def _store(self, op: str, result: "Tensor") -> "Tensor":
        if result._data.shape != self._data.shape:
            raise ValueError(f"{op}: the result's shape {result._data.shape} does not match "
                             f"the tensor's {self._data.shape}")
        if result._data is not self._data:
            try:
                np.copyto(self._data, result._data, casting="same_kind")
            except TypeError:
                raise TypeError(f"{op}: cannot write a {result._data.dtype} result into a "
                                f"{self._data.dtype} tensor of shape {self._data.shape}"
                                ) from None
        self._version += 1
        return self  # type: ignore[return-value]

    def _restride(self, op: str, result: "Tensor") -> "Tensor":
        """self takes the result's shape: a reshape of self's array where the values keep
        their order (so detached aliases still share its memory, as torch's), else the
        result's array (onemodel's arrays are always C-contiguous)."""
        same_order = result._data is self._data or np.array_equal(
            result._data.ravel(), self._data.ravel(), equal_nan=True)
        self._data = self._data.reshape(result._data.shape) if same_order else result._data
        self._version += 1
        return self  # type: ignore[return-value]

    # -- in-place shape methods: torch changes the view's metadata, here the array's shape --
    def unsqueeze_(self, dim: int) -> "Tensor":
        """self takes unsqueeze(dim)'s shape, as `torch.Tensor.unsqueeze_`."""
        return self._rebase("unsqueeze_", lambda t: t.unsqueeze(dim), reshaped=True)

    def squeeze_(self, dim: Optional[int] = None) -> "Tensor":
        """self takes squeeze(dim)'s shape, as `torch.Tensor.squeeze_`."""
        return self._rebase("squeeze_", lambda t: t.squeeze(dim), reshaped=True)

    def transpose_(self, dim0: int, dim1: int) -> "Tensor":
        """self = transpose(dim0, dim1), as `torch.Tensor.transpose_`."""
        return self._rebase("transpose_", lambda t: t.transpose(dim0, dim1), reshaped=True)

    def t_(self) -> "Tensor":
        """self = t(), as `torch.Tensor.t_`."""
        return self._rebase("t_", lambda t: t.t(), reshaped=True)

    def resize_(self, *sizes: Any) -> "Tensor":
        """self takes the shape `sizes`, keeping its first values in row-major order; the
        elements past them are zeros (torch leaves them uninitialized). Not differentiable."""
        from .tensor import _shape_arg
        shape = _shape_arg(sizes, "resize_")
        if self._requires_grad:  # even under no_grad, as torch
            raise RuntimeError("resize_: cannot resize a tensor that requires grad")
        flat = self._data.reshape(-1)
        count = int(np.prod(shape, dtype=np.int64))
        if count > flat.size:
            flat = np.concatenate([flat, np.zeros(count - flat.size, flat.dtype)])
        self._data = flat[:count].reshape(shape)
        self._version += 1
        return self  # type: ignore[return-value]

    @quiet
    def _update(self, op: str, ufunc: np.ufunc, other: Any, alpha: Any = 1) -> "Tensor":
        """self = ufunc(self, alpha·other): straight into self's memory outside the graph (the
        bits of the out-of-place op), through the op when a gradient is needed."""
        self._check_inplace(op)
        self._check_broadcast(op, other)
        if self._in_graph(other):
            F = _functional()
            function = getattr(F, _BINARY[ufunc.__name__])
            operand = F.mul(other, alpha) if alpha != 1 else other  # rounded first, as add's
            return self._rebase(op, lambda t: function(t, operand), other)
        o = self._other(other)
        if alpha != 1:
            o = o * np.float32(alpha)
        try:
            ufunc(self._data, o, out=self._data, casting="same_kind")
        except TypeError:
            raise TypeError(f"{op}: cannot write a {np.result_type(self._data, o)} result "
                            f"into a {self._data.dtype} tensor of shape "
                            f"{self._data.shape}") from None
        self._version += 1
        return self  # type: ignore[return-value]

    def add_(self, other: Any, alpha: Any = 1) -> "Tensor":
        return self._update("add_", np.add, other, alpha)

    def sub_(self, other: Any, alpha: Any = 1) -> "Tensor":
        return self._update("sub_", np.subtract, other, alpha)

    def mul_(self, other: Any) -> "Tensor":
        return self._update("mul_", np.multiply, other)

    def div_(self, other: Any, *, rounding_mode: Optional[str] = None) -> "Tensor":
        if rounding_mode is not None:
            return self._rebase("div_", lambda t: _functional().div(
                t, other, rounding_mode=rounding_mode), other)
        return self._update("div_", np.true_divide, other)

    def __iadd__(self, other: Any) -> "Tensor":
        return self.add_(other)

    def __isub__(self, other: Any) -> "Tensor":
        return self.sub_(other)

    def __imul__(self, other: Any) -> "Tensor":
        return self.mul_(other)

    def __itruediv__(self, other: Any) -> "Tensor":
        return self.div_(other)

    def copy_(self, src: Any, non_blocking: bool = False) -> "Tensor":
        s = self._other(src)
        try:
            np.broadcast_to(s, self._data.shape)
        except ValueError:
            raise ValueError(f"copy_: source of shape {np.shape(s)} does not broadcast to "
                             f"{self._data.shape}") from None
        return self._assign("copy_", src)

    def zero_(self) -> "Tensor":
        return self._assign("zero_", 0)

    def fill_(self, value: Any) -> "Tensor":
        if np.ndim(self._other(value)) != 0:
            raise RuntimeError(f"fill_: only supports 0-dimension value tensor but got tensor "
                               f"with {np.ndim(self._other(value))} dimensions")
        return self._assign("fill_", value)

    def _assign(self, op: str, value: Any) -> "Tensor":
        """self = value broadcast, cast to self's dtype."""
        if self._in_graph(value):
            return self._rebase(op, lambda t: _constant(op, t, value), value)
        self._check_inplace(op)
        np.copyto(self._data, np.broadcast_to(self._other(value), self._data.shape),
                  casting="unsafe")
        self._version += 1
        return self  # type: ignore[return-value]

    def masked_fill_(self, mask: Any, value: Any) -> "Tensor":
        self._check_broadcast("masked_fill_", mask)
        return self._rebase("masked_fill_", lambda t: _functional().where(mask, value, t), value)

    def clamp_(self, min: Any = None, max: Any = None) -> "Tensor":
        return self._rebase("clamp_", lambda t: _functional().clamp(t, min, max), min, max)

    clip_ = clamp_

    def clamp_min_(self, min: Any) -> "Tensor":
        return self._rebase("clamp_min_", lambda t: _functional().clamp(t, min=min), min)

    def clamp_max_(self, max: Any) -> "Tensor":
        return self._rebase("clamp_max_", lambda t: _functional().clamp(t, max=max), max)

    def pow_(self, exponent: Any) -> "Tensor":
        return self._rebase("pow_", lambda t: _functional().pow(t, exponent), exponent)

    def __setitem__(self, index: Any, value: Any) -> None:
        self._check_inplace("__setitem__")
        if self._in_graph(value):
            self._rebase("__setitem__", lambda t: _put(t, index, value), value)
            return
        from .tensor import Tensor
        parts = index if isinstance(index, tuple) else (index,)
        self._data[tuple(p._data if isinstance(p, Tensor) else p for p in parts)] = \
            self._other(value)
        self._version += 1

    def uniform_(self, from_: float = 0.0, to: float = 1.0, *, generator: Any = None
                 ) -> "Tensor":
        """Fills self in place with Uniform(from_, to): nn.init.uniform_'s draws."""
        from .random import uniform_  # random names Tensor: imported where it runs
        return uniform_(self, from_, to, generator)  # type: ignore[arg-type]

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None
                ) -> "Tensor":
        """Fills self in place with N(mean, std²): nn.init.normal_'s draws."""
        from .random import normal_
        return normal_(self, mean, std, generator)  # type: ignore[arg-type]

    # -- autograd state ------------------------------------------------------------------
    def detach_(self) -> "Tensor":
        """Takes self out of the graph: a leaf that does not require grad."""
        self._node, self._requires_grad = None, False
        return self  # type: ignore[return-value]

    def register_hook(self, hook: Callable[["Tensor"], Optional["Tensor"]]) -> Any:
        """hook(grad) runs when self's gradient is computed; a tensor it returns replaces the
        gradient. Returns a handle with remove() (onemodel/_hooks.py)."""
        return _hooks.register_hook(self, hook)  # type: ignore[arg-type]

    def retain_grad(self) -> None:
        """A non-leaf keeps its gradient in .grad after backward, as torch's."""
        _hooks.retain_grad(self)  # type: ignore[arg-type]

    @property
    def retains_grad(self) -> bool:
        return _hooks.retains_grad(self)  # type: ignore[arg-type]


def _constant(op: str, t: "Tensor", value: Any) -> "Tensor":
    """`value` broadcast to t's shape and dtype: zeros flow back to t (as torch's), the sum
    of the broadcast gradient (in the engine's order) to a value that is a tensor."""
    from .functional._core import record, sum_to_shape
    from .tensor import Tensor
    source = value if isinstance(value, Tensor) else Tensor._wrap(np.asarray(value))
    out = np.array(np.broadcast_to(source._data, t.shape), dtype=t.dtype)
    shape = source.shape
    return record(op, out, (t, source),
                  lambda g: (np.zeros(g.shape, np.float32), sum_to_shape(g, shape)))


def _put(t: "Tensor", index: Any, value: Any) -> "Tensor":
    """t with t[index] = value, out of place: the gradient is g with the written entries
    zeroed for t, and those entries of g (summed over broadcasting) for value."""
    from .functional._core import as_tensor, record, sum_to_shape
    from .functional.shape import _index_parts
    v = as_tensor(value, "__setitem__", t)
    parts, _ = _index_parts(index, t.shape)
    out = t._data.copy()
    out[parts] = v._data
    shape = v.shape

    def backward(g: np.ndarray) -> tuple:
        rest = g.copy()
        rest[parts] = 0
        taken = g[parts]
        full = np.broadcast_to(taken, np.broadcast_shapes(taken.shape, shape))
        return rest, sum_to_shape(np.ascontiguousarray(full), shape)
    return record("__setitem__", out, (t, v), backward)


def _unary(name: str) -> Callable[[InplaceMethods], "Tensor"]:
    def method(self: InplaceMethods) -> "Tensor":
        return self._rebase(name + "_", getattr(_functional(), name))
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"self = {name}(self), in place (differentiable as torch's {name}_)."
    return method


# In-place forms of the unary ops that torch programs call as methods.
_UNARY = ("neg", "exp", "log", "sqrt", "rsqrt", "abs", "relu", "sigmoid", "tanh", "square",
          "reciprocal", "sin", "cos", "erf", "expm1", "log1p", "floor", "ceil", "round",
          "trunc", "sign")
for _name in _UNARY:
    setattr(InplaceMethods, _name + "_", _unary(_name))

# The ops whose results torch returns as views of their input.
_VIEW_OPS = frozenset(("index", "reshape", "permute"))
# What sys.getrefcount says of an object only one tuple holds, asked as _check_inplace asks.
def _held_by_one() -> int:
    holder = (object(),)
    return sys.getrefcount(holder[0])


_HELD_BY_ONE = _held_by_one()

# The out-of-place op of each ufunc _update applies.
_BINARY = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div"}


def _functional() -> Any:
    # onemodel.functional imports tensor.py, which imports this module: looked up when used.
    from . import functional
    return functional


from . import _hooks  # noqa: E402
