"""onemodel.autograd.grad and onemodel.autograd.backward, as torch's.

grad() runs the same backward pass as Tensor.backward (autograd.run_backward), capturing the
gradients of the tensors asked for instead of adding into any .grad, so its bits are those
.grad would have received from the same pass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor

Tensors = Union["Tensor", Sequence["Tensor"]]


def _as_list(value: Any, op: str, name: str) -> list:
    from .tensor import Tensor
    items = [value] if isinstance(value, Tensor) else list(value)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name}[{i}] must be a Tensor, got {type(t).__name__}")
    return items


def _roots(op: str, outputs: Tensors, grad_outputs: Any) -> list[tuple["Tensor", np.ndarray]]:
    """(output, its gradient as a float32 array) for each output, checked as torch's."""
    from .tensor import Tensor
    outs = _as_list(outputs, op, "outputs")
    if grad_outputs is None:
        grads: list = [None] * len(outs)
    else:
        grads = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
    if len(grads) != len(outs):
        raise RuntimeError(f"{op}: got {len(grads)} gradients for {len(outs)} outputs")
    roots = []
    for i, (out, g) in enumerate(zip(outs, grads)):
        if not out.requires_grad:
            raise RuntimeError(f"{op}: element {i} of tensors does not require grad and does "
                               "not have a grad_fn")
        if g is None:
            if out.numel() != 1:
                raise RuntimeError(f"{op}: grad can be implicitly created only for scalar "
                                   f"outputs (output {i} has shape {tuple(out.shape)})")
            array = np.ones(out.shape, np.float32)
        else:
            array = np.require(g._data if isinstance(g, Tensor) else g, np.float32, "C")
            if array.shape != out.shape:
                raise RuntimeError(f"{op}: mismatch in shape: grad_output[{i}] has a shape of "
                                   f"{array.shape} and output[{i}] has a shape of "
                                   f"{tuple(out.shape)}")
        roots.append((out, array))
    return roots


def _refuse_create_graph(op: str, create_graph: bool) -> None:
    if create_graph:
        raise NotImplementedError(
            f"{op}: create_graph=True (higher-order gradients) is not supported: onemodel's "
            "backward functions compute on arrays outside the graph")


def grad(outputs: Tensors, inputs: Tensors, grad_outputs: Any = None,
         retain_graph: Optional[bool] = None, create_graph: bool = False,
         only_inputs: bool = True, allow_unused: Optional[bool] = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """The gradients of the outputs (weighted by grad_outputs) with respect to each input, as
    torch.autograd.grad: no .grad changes. An input the outputs do not depend on raises, or
    gives None with allow_unused=True (zeros with materialize_grads=True)."""
    from . import autograd
    from .tensor import Tensor
    _refuse_create_graph("grad", create_graph)
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched=True is not supported")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("grad: expected allow_unused to be True or not passed when "
                         "materialize_grads=True")
    wrt = _as_list(inputs, "grad", "inputs")
    if not wrt:
        raise RuntimeError("grad: grad requires non-empty inputs.")
    for t in wrt:
        if not t.requires_grad:
            raise RuntimeError("grad: One of the differentiated Tensors does not require grad")
    roots = _roots("grad", outputs, grad_outputs)
    found = autograd.run_backward(roots, bool(retain_graph), capture=wrt)
    results: list[Optional[Tensor]] = []
    for i, t in enumerate(wrt):
        g = found.get(id(t))
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: The differentiated Tensor at index {i} appears to not "
                               "have been used in the graph. Set allow_unused=True if this is "
                               "the desired behavior.")
        if g is None:
            results.append(Tensor._wrap(np.zeros(t.shape, np.float32))
                           if materialize_grads else None)
        else:  # a copy: the array may be shared with another input's gradient
            results.append(Tensor._wrap(np.array(g, np.float32)))
    return tuple(results)


def backward(tensors: Tensors, grad_tensors: Any = None, retain_graph: Optional[bool] = None,
             create_graph: bool = False, inputs: Optional[Tensors] = None) -> None:
    """torch.autograd.backward: one pass from several outputs at once, adding into .grad (of
    `inputs` alone when given)."""
    from . import autograd
    _refuse_create_graph("backward", create_graph)
    roots = _roots("backward", tensors, grad_tensors)
    if inputs is None:
        autograd.run_backward(roots, bool(retain_graph))
        return
    from .tensor import Tensor
    wrt = _as_list(inputs, "backward", "inputs")
    found = autograd.run_backward(roots, bool(retain_graph), capture=wrt)
    for t in wrt:
        g = found.get(id(t))
        if g is not None:
            t.grad = Tensor._wrap(np.array(g, np.float32)) if t.grad is None \
                else Tensor._wrap(t.grad._data + g)
