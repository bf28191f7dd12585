"""What the backward pass may do with gradient arrays it did not make itself: its buffer policy
(autograd.py runs the pass and asks these questions; nothing else there writes a gradient).

- A node's incoming gradient: its closure may write its result into it (may_overwrite, for an
  elementwise backward) only when the pass offered it (offer): nothing but the pass refers to
  it. That is a reference count, not a mark the pass could set on arrays it made: the array
  came from a closure (one of hundreds of built-in ones, or a user's autograd.Function, which
  may keep what it returns) or from the caller (the root's gradient), either may hold it or a
  view of it (a view holds its base), and most arrays worth overwriting are a closure's fresh
  results; the count sees every holder. (Hooks and retain_grad are given copies.)
- A leaf's .grad: added into in place (addable), as torch's AccumulateGrad does, so a reference
  to .grad taken before a second backward sees the sum, as in torch.
- A finished gradient becomes .grad without a copy only if its memory is the pass's alone:
  Adoption counts, per pass, which arrays own the memory of each gradient, the caller's root
  gradients, and the .grad already made; a closure may hand one array to several inputs (add
  passes g to both sides), and no two .grad (nor the caller) may share storage.
"""
from __future__ import annotations

import collections
import sys
import threading
from typing import TYPE_CHECKING, Iterable, Optional

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor


class _Offered(threading.local):
    grad_id = 0  # id() of the gradient the running closure may overwrite, or 0


_offered = _Offered()


def _count_in_call(g: np.ndarray, watched: bool) -> int:
    return sys.getrefcount(g)


def _sole_count() -> int:
    # What sys.getrefcount says, inside a call made as the pass calls offer, of an array only
    # the caller's local refers to (interpreters differ in what a call adds).
    local = np.empty(0)
    return _count_in_call(local, False)


_SOLE = _sole_count()


def offer(g: np.ndarray, watched: bool) -> None:
    """Before a node's closure runs on g, which the pass holds in one local: lets the closure
    overwrite g if nothing else refers to it (watched: autograd.grad returns it), it owns its
    memory, and it is C-contiguous, writeable float32."""
    sole = (not watched and sys.getrefcount(g) == _SOLE and g.base is None
            and g.flags.writeable and g.flags.c_contiguous and g.dtype == np.float32)
    _offered.grad_id = id(g) if sole else 0


def withdraw() -> None:
    """After the closure ran (or raised): no array may be overwritten."""
    _offered.grad_id = 0


def may_overwrite(g: np.ndarray) -> bool:
    """Whether g is the gradient backward just handed to the running closure and nothing else
    refers to it (no view, no other input's gradient, not the caller's), C-contiguous float32:
    an elementwise backward can then write its result into g instead of a new array."""
    return id(g) == _offered.grad_id


def addable(t: "Tensor", shape: tuple) -> Optional[np.ndarray]:
    """t.grad's array if a gradient of this shape can be added into it in place."""
    if t.grad is None:
        return None
    held = t.grad._data
    ok = held.dtype == np.float32 and held.shape == shape and held.flags.writeable
    return held if ok else None


def owner(a: np.ndarray) -> int:
    """Identity of the array that owns a's memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return id(a) if a.base is None else id(a.base)


def _accumulate(t: "Tensor", g: np.ndarray, fresh: bool) -> None:
    """g into t.grad: added in place where addable; else t.grad becomes g itself where `fresh`
    (its memory the pass's alone) and contiguous, or a copy."""
    from .tensor import Tensor
    if t.grad is None:
        t.grad = Tensor._wrap(g if fresh and g.flags.c_contiguous
                              else np.array(g, dtype=np.float32, order="C"))
        return
    held = addable(t, g.shape)
    if held is not None:
        np.add(held, g, out=held)
        t.grad._version += 1
    else:
        t.grad = Tensor._wrap(t.grad._data + g)


class Adoption:
    """One backward pass's finished gradients going into .grad, each adopted without a copy
    only where no other gradient, .grad or root gradient shares its memory."""

    __slots__ = ("_taken",)

    def __init__(self, root_grads: Iterable[np.ndarray]) -> None:
        self._taken = {owner(g) for g in root_grads}  # memory a .grad may not share

    def early(self, t: "Tensor", g: np.ndarray) -> None:
        """g, t's complete gradient while the pass goes on, into t.grad."""
        key = owner(g)
        _accumulate(t, g, key not in self._taken)
        self._taken.add(key)

    def last(self, pairs: Iterable[tuple["Tensor", np.ndarray]]) -> None:
        """The (leaf, gradient) pairs left when the pass ends, into their .grad."""
        pairs = list(pairs)
        owners = collections.Counter(owner(g) for _, g in pairs)
        owners.update(self._taken)
        for t, g in pairs:
            _accumulate(t, g, owners[owner(g)] == 1)
