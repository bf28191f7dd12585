"""Tensor.register_hook and Tensor.retain_grad, as torch's.

A hook on a tensor runs in every backward pass that computes the tensor's gradient, with that
gradient complete (every contribution summed), before it goes further: for a non-leaf, before
the node that made the tensor maps it to its inputs; for a leaf, before it is added to .grad.
A hook returning a tensor replaces the gradient. Hooks run in the order registered, and
retain_grad's copy into .grad is taken after them (torch runs its retains-grad hook last).
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor

Hook = Callable[["Tensor"], Optional["Tensor"]]

# Per hooked leaf, by id: a weak reference (its death drops the entry) and its hooks.
_leaf_hooks: dict[int, tuple[weakref.ref, list[Hook]]] = {}


class RemovableHandle:
    """Returned by the hook registrations: `remove()` takes the hook off."""

    def __init__(self, hooks: list, hook: Callable) -> None:
        self._hooks, self._hook = hooks, hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def keyed_hooks(table: dict[int, tuple[weakref.ref, list]], t: "Tensor") -> list:
    """t's list in a per-leaf table, made (and dropped when t dies) on first use."""
    key = id(t)
    entry = table.get(key)
    if entry is None or entry[0]() is not t:
        def forget(_: object, key: int = key, table: dict = table) -> None:
            table.pop(key, None)
        entry = (weakref.ref(t, forget), [])
        table[key] = entry
    return entry[1]


def register_hook(t: "Tensor", hook: Hook) -> RemovableHandle:
    if not t.requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't "
                           "require gradient")
    if not callable(hook):
        raise TypeError(f"register_hook: hook must be callable, got {hook!r}")
    if t._node is not None:
        if t._node.hooks is None:
            t._node.hooks = []
        hooks = t._node.hooks
    else:
        hooks = keyed_hooks(_leaf_hooks, t)
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def retain_grad(t: "Tensor") -> None:
    """A non-leaf keeps its gradient in .grad after backward (a leaf does anyway)."""
    if not t.requires_grad:
        raise RuntimeError("retain_grad: can't retain_grad on a Tensor that has "
                           "requires_grad=False")
    if t._node is not None:
        t._node.retained = weakref.ref(t)


def retains_grad(t: "Tensor") -> bool:
    node = t._node
    return node is not None and node.retained is not None and node.retained() is t


def _hooks_of(t: "Tensor") -> list[Hook]:
    entry = _leaf_hooks.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else []


def _run_tensor_hooks(hooks: list[Hook], g: np.ndarray) -> np.ndarray:
    from .autograd import no_grad
    from .tensor import Tensor
    for hook in list(hooks):
        with no_grad():
            # A copy: the gradient array may be shared or later overwritten by backward.
            replaced = hook(Tensor._wrap(np.array(g)))
        if replaced is not None:
            if not isinstance(replaced, Tensor) or replaced.shape != g.shape:
                raise RuntimeError(f"hook: a hook must return None or a tensor of the "
                                   f"gradient's shape {g.shape}, got {replaced!r}")
            g = np.array(replaced._data, dtype=np.float32)
    return g


def _retain(t: Optional["Tensor"], g: np.ndarray) -> None:
    from .tensor import Tensor
    if t is None:
        return
    if t.grad is None:
        t.grad = Tensor._wrap(np.array(g, dtype=np.float32))
    else:  # as torch's: a second backward adds to the retained gradient
        t.grad = Tensor._wrap(t.grad._data + g)
