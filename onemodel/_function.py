"""onemodel.autograd.Function: custom differentiable operations, as torch.autograd.Function.

A subclass defines `forward(ctx, *args)` (or torch 2's `forward(*args)` with
`setup_context(ctx, inputs, output)`) and `backward(ctx, *grad_outputs)`, both static, and is
called through `apply`. forward runs without recording; each differentiable output is then
linked into the graph by a node of its own, all of them feeding one node for the call, so
backward runs once per pass with the gradient of every output (zeros, or None after
`ctx.set_materialize_grads(False)`, for an output no gradient reached).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from . import autograd

if TYPE_CHECKING:
    from .tensor import Tensor


class FunctionCtx:
    """The `ctx` handed to forward/setup_context and backward."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self.to_save: tuple = ()
        self.non_differentiable: set[int] = set()
        self.dirty: set[int] = set()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        from .tensor import Tensor
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward: argument {i} must be a Tensor or None, "
                                f"got {type(t).__name__}; keep other values as ctx "
                                "attributes")
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        # (the node that calls backward checks their versions, and refuses to run twice
        # unless the graph was retained)
        return self.to_save

    def mark_non_differentiable(self, *tensors: "Tensor") -> None:
        self.non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors: "Tensor") -> None:
        self.dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class Function:
    """Subclass with static forward and backward; call `YourFunction.apply(*args)`."""

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Function: a subclass must implement forward")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple, output: Any) -> Any:
        raise NotImplementedError("Function: setup_context is not overridden")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("Function: a subclass must implement backward to be "
                                  "differentiated")

    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        from .tensor import Tensor
        grad_on = autograd.is_grad_enabled()
        needs = tuple(grad_on and isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with autograd.no_grad():
            if cls.setup_context is not Function.setup_context:  # torch 2's style
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        if any(needs):
            outputs = _link(cls, ctx, args, outputs)
        return outputs[0] if single else outputs


def _link(cls: type[Function], ctx: FunctionCtx, args: tuple, outputs: tuple) -> tuple:
    """The outputs, each made a non-leaf of a node feeding one node for the call."""
    from .tensor import Tensor
    inputs = [a for a in args if isinstance(a, Tensor)]
    linked: list[Any] = []
    for out in outputs:
        if isinstance(out, Tensor) and (out.requires_grad or any(out is a for a in inputs)) \
                and id(out) not in ctx.dirty:
            # an input handed back (or a tensor already in the graph) is aliased, as torch's
            alias = Tensor._wrap(out._data)
            alias._vc = out._vc
            out = alias
        linked.append(out)
    differentiable = [isinstance(o, Tensor) and o.dtype == np.float32
                      and id(o) not in ctx.non_differentiable for o in outputs]
    shapes = [tuple(o.shape) if isinstance(o, Tensor) else () for o in outputs]
    sizes = [int(np.prod(s, dtype=np.int64)) if d else 0 for s, d in zip(shapes, differentiable)]
    starts = np.concatenate(([0], np.cumsum(sizes))).astype(int).tolist()
    arrived = [False] * len(outputs)
    name = f"{cls.__name__}Backward"
    saved = tuple(t for t in ctx.to_save if t is not None)

    def run_call(flat: np.ndarray) -> list[Optional[np.ndarray]]:
        grads: list[Any] = []
        for i, shape in enumerate(shapes):
            if arrived[i] or (ctx.materialize_grads and isinstance(outputs[i], Tensor)):
                piece = flat[starts[i]:starts[i + 1]] if differentiable[i] else \
                    np.zeros(int(np.prod(shape, dtype=np.int64)), np.float32)
                grads.append(Tensor._wrap(np.array(piece, np.float32).reshape(shape)))
            else:
                grads.append(None)
        with autograd.no_grad():
            returned = cls.backward(ctx, *grads)
        return _input_grads(name, args, ctx.needs_input_grad, returned)

    call = autograd.Node(name, (starts[-1],), inputs, run_call, saved)
    for i, out in enumerate(linked):
        if not differentiable[i]:
            continue

        def to_call(g: np.ndarray, i: int = i) -> tuple[np.ndarray]:
            arrived[i] = True
            if sizes[i] == starts[-1]:  # the one differentiable output: no padding
                return (g.reshape(-1),)
            flat = np.zeros(starts[-1], np.float32)
            flat[starts[i]:starts[i + 1]] = g.reshape(-1)
            return (flat,)
        node = autograd.Node(name, shapes[i], (), to_call)
        node.inputs = (call,)
        out._node, out._requires_grad = node, True
    return tuple(linked)


def _input_grads(name: str, args: tuple, needs: tuple[bool, ...], returned: Any
                 ) -> list[Optional[np.ndarray]]:
    """backward's return value as one gradient array per tensor input, checked as torch's."""
    from .functional._core import sum_to_shape
    from .tensor import Tensor
    grads = list(returned) if isinstance(returned, tuple) else [returned]
    if len(grads) < len(args) or any(g is not None for g in grads[len(args):]):
        raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                           f"(expected {len(args)}, got {len(grads)})")
    out: list[Optional[np.ndarray]] = []
    for i, (a, g) in enumerate(zip(args, grads)):
        if not isinstance(a, Tensor):
            if g is not None:
                raise RuntimeError(f"function {name} returned a gradient different than None "
                                   f"at position {i + 1}, but the corresponding forward input "
                                   "was not a Tensor")
            continue
        if g is None or not needs[i]:
            out.append(None)
            continue
        array = np.asarray(g._data if isinstance(g, Tensor) else g, np.float32)
        if array.shape != a.shape:
            try:
                np.broadcast_shapes(array.shape, a.shape)
                array = sum_to_shape(np.broadcast_to(array, np.broadcast_shapes(
                    array.shape, a.shape)), a.shape)
            except ValueError:
                raise RuntimeError(f"function {name} returned an invalid gradient at index "
                                   f"{i} - got {list(array.shape)} but expected shape "
                                   f"compatible with {list(a.shape)}") from None
        out.append(array)
    return out
