"""Activation checkpointing, as torch.utils.checkpoint: checkpoint and checkpoint_sequential.

The forward of a checkpointed function runs without recording, keeping only its inputs; the
backward pass runs it again, recording, and back-propagates through that. Randomness is
replayed: the default generator's state and the draw counters of the Dropout modules the
function holds are put back as they were before the first run (and then as they were before
the second), so dropout draws the same masks and the gradients have the bits of a run without
checkpointing.

Both `use_reentrant` modes run this one mechanism (gradients of the parameters inside the
function go into their .grad during the backward pass); as torch's, use_reentrant=True gives
no gradient to anything when no input requires grad (with torch's warning), and None means
True with torch's warning to pass it explicitly.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Iterable, Optional

import numpy as np

from .. import _grad, autograd, random
from .._function import Function
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


class _RandomState:
    """The default generator's state and the draw counters of some Dropout modules."""

    def __init__(self, modules: list[Any]) -> None:
        self.generator = random.default_generator.state
        self.counters = [(m.draws, int(m.draws._data)) for m in modules]

    def restore(self) -> None:
        random.default_generator.state = self.generator
        for counter, value in self.counters:
            counter._data[...] = value
            counter._version += 1


def _dropouts(function: Any, args: tuple) -> list[Any]:
    """The Dropout modules (anything with a `draws` counter) inside the modules the function
    is, is bound to, closes over or is given."""
    from ..nn import Module
    found: dict[int, Any] = {}
    seen: set[int] = set()

    def visit(obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, Module):
            for m in obj.modules():
                if isinstance(getattr(m, "draws", None), Tensor):
                    found[id(m)] = m
        elif isinstance(obj, _Run):
            visit(obj.layers)
        elif isinstance(obj, functools.partial):
            for part in (obj.func, *obj.args, *obj.keywords.values()):
                visit(part)
        elif isinstance(obj, (list, tuple)):
            for part in obj:
                visit(part)
        elif callable(obj):
            visit(getattr(obj, "__self__", None))
            for cell in getattr(obj, "__closure__", None) or ():
                try:
                    visit(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass

    visit(function)
    visit(args)
    return list(found.values())


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx: Any, function: Callable, preserve: bool, kwargs: dict,
                anchor: Optional[Tensor], *args: Any) -> Any:
        ctx.function, ctx.kwargs, ctx.args = function, kwargs, args
        ctx.dropouts = _dropouts(function, args)
        ctx.before = _RandomState(ctx.dropouts) if preserve else None
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return function(*args, **kwargs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        if autograd.is_capturing():  # the recomputation's backward fills parameters' .grad
            raise RuntimeError("checkpoint: not compatible with autograd.grad() or "
                               "backward(inputs=...); use backward() without inputs")
        inputs = tuple(a.detach().requires_grad_(a.requires_grad)
                       if isinstance(a, Tensor) else a for a in ctx.args)
        after = _RandomState(ctx.dropouts) if ctx.before is not None else None
        if ctx.before is not None:
            ctx.before.restore()
        try:
            with autograd.enable_grad():
                outputs = ctx.function(*inputs, **ctx.kwargs)
        finally:
            if after is not None:
                after.restore()
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            _grad.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None, None) + tuple(
            a.grad if isinstance(a, Tensor) else None for a in inputs)


def checkpoint(function: Callable, *args: Any, use_reentrant: Optional[bool] = None,
               context_fn: Any = None, determinism_check: str = "default", debug: bool = False,
               early_stop: bool = True, preserve_rng_state: bool = True, **kwargs: Any) -> Any:
    """function(*args, **kwargs), its activations recomputed in the backward pass instead of
    kept (the module's comment)."""
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed "
                      "explicitly. use_reentrant=False is recommended; use_reentrant=True is "
                      "the current default.", stacklevel=2)
        use_reentrant = True
    if use_reentrant and (kwargs or context_fn is not None or debug):
        raise ValueError("checkpoint: keyword arguments for the function, context_fn and debug "
                         "are only supported with use_reentrant=False (unexpected keyword "
                         f"arguments: {', '.join(kwargs) or 'none'})")
    if context_fn is not None or debug:
        raise NotImplementedError("checkpoint: context_fn and debug are not supported")
    anchor = None
    if use_reentrant:
        if autograd.is_grad_enabled() and not any(
                isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                          stacklevel=2)
    else:  # a node in the graph whatever the inputs, so the parameters inside get gradients
        anchor = Tensor._wrap(np.zeros(0, np.float32), True)
    return _Checkpoint.apply(function, bool(preserve_rng_state), kwargs, anchor, *args)


def checkpoint_sequential(functions: Any, segments: int, input: Any,
                          use_reentrant: Optional[bool] = None, **kwargs: Any) -> Any:
    """Runs the modules (a Sequential or a list) in order, the first segments - 1 of
    `segments` equal groups checkpointed, as torch's."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant "
                      "parameter should be passed explicitly. use_reentrant=False is "
                      "recommended.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("checkpoint_sequential: unexpected keyword arguments: "
                         + ",".join(kwargs))
    from ..nn import Sequential
    layers = list(functions.children()) if isinstance(functions, Sequential) else list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive integer, got "
                         f"{segments!r}")
    size = len(layers) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(_Run(layers[start:end + 1]), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return _Run(layers[end + 1:])(input)


class _Run:
    """Layers applied in order (its `layers` are what _dropouts looks into)."""

    def __init__(self, layers: Iterable[Callable]) -> None:
        self.layers = list(layers)

    def __call__(self, input: Any) -> Any:
        for layer in self.layers:
            input = layer(input)
        return input

