"""Reverse-mode autodiff: graph nodes, no_grad, and the backward pass.

The graph is recorded as ops run (define-by-run). Each Node holds, per input, where that
input's gradient goes (the input's own node, or the leaf tensor itself; nothing for an input that
needs none) and a closure that maps the gradient of its output to theirs. A node never holds an
input's values: what a backward reads, its closure keeps, so an intermediate result nobody
needs for backward is freed as soon as the program drops it (as PyTorch's graph does), and each
node's closure is dropped as soon as it has run. Backward visits
nodes in decreasing creation order: a node is always created after the nodes of its inputs,
so this is a reverse topological order, and ties never arise, so the contributions that meet at
one tensor are always summed in the same order.

Saved tensors are protected by version counters: every in-place write bumps the tensor's
version, and a node whose saved tensor changed refuses to run.

A first walk counts, per leaf, the nodes that feed it; as soon as the last of them has run, the
leaf's gradient is complete and goes into .grad (as PyTorch's AccumulateGrad: a weight's gradient
is not held until the pass ends, so one of them at a time is alive beside .grad), its
post-accumulate-grad hooks (PyTorch's name) run, and backward goes on with the rest of the graph
(data parallelism starts reducing finished gradients there).

The same pass serves autograd.grad (_grad.py: it captures gradients instead of filling .grad),
runs the hooks of Tensor.register_hook and keeps retain_grad's gradients (_hooks.py);
autograd.Function is _function.py, and Tensor's in-place ops _inplace.py. What the pass may
write in place (a closure's incoming gradient, a leaf's .grad) and when a gradient becomes .grad
without a copy is _grad_buffers.py's.
"""
from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Sequence, Union

import numpy as np

from . import _grad_buffers
from ._hooks import RemovableHandle, _hooks_of, _leaf_hooks, _retain, _run_tensor_hooks, keyed_hooks
from ._ieee import quiet

if TYPE_CHECKING:
    from .tensor import Tensor


class AddableGrad:
    """A gradient a closure can hand back unmade. When it is the last thing a leaf waits for
    and the leaf's .grad is there to add into, backward has it added straight into .grad
    (add_into(held): no full-size array beside .grad, and a weight's gradient is the largest
    transient of a product's backward); otherwise it is made (make()). add_into must leave the
    bits of held + make()."""

    __slots__ = ("shape", "make", "add_into")

    def __init__(self, shape: tuple, make: Callable[[], np.ndarray],
                 add_into: Callable[[np.ndarray], None]) -> None:
        self.shape, self.make, self.add_into = shape, make, add_into


# Gradients inside the backward pass are plain float32 arrays; a closure returns one per input
# (None where that input gets no gradient), or an AddableGrad.
BackwardFn = Callable[[np.ndarray], Sequence[Union[np.ndarray, AddableGrad, None]]]


class _GradMode(threading.local):
    # A class attribute: every thread starts enabled, and reading it raises nothing inside
    # (getattr with a default costs an AttributeError per op in a thread that never set it).
    enabled = True
    inference = False


_state = _GradMode()
_sequence = itertools.count()


def is_grad_enabled() -> bool:
    return _state.enabled


@contextlib.contextmanager
def no_grad() -> Iterator[None]:
    """Ops inside the block record nothing, so their results need no gradient."""
    previous = is_grad_enabled()
    _state.enabled = False
    try:
        yield
    finally:
        _state.enabled = previous


class inference_mode:
    """torch.inference_mode(mode=True), as a context manager or a decorator (with or without
    parentheses): here as no_grad (nothing is recorded); is_inference_mode_enabled() tells."""

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode without ()
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)
        self._previous: list[tuple[bool, bool]] = []

    def __enter__(self) -> None:
        self._previous.append((_state.enabled, _state.inference))
        if self.mode:
            _state.enabled, _state.inference = False, True

    def __exit__(self, *exc: Any) -> None:
        _state.enabled, _state.inference = self._previous.pop()

    def __call__(self, function: Callable) -> Callable:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(self.mode):
                return function(*args, **kwargs)
        return run


def is_inference_mode_enabled() -> bool:
    return _state.inference


@contextlib.contextmanager
def enable_grad() -> Iterator[None]:
    """Turns gradient recording back on inside the block (for example within `no_grad`), as
    `torch.enable_grad`; the previous state is restored on leaving.
    """
    previous = is_grad_enabled()
    _state.enabled = True
    try:
        yield
    finally:
        _state.enabled = previous


class Node:
    """One recorded op: where its inputs' gradients go and how to map the output gradient to
    theirs."""

    __slots__ = ("seq", "op", "shape", "inputs", "backward_fn", "saved", "saved_versions",
                 "hooks", "retained")

    def __init__(self, op: str, shape: tuple, inputs: Sequence["Tensor"],
                 backward_fn: BackwardFn, saved: Sequence["Tensor"] = ()) -> None:
        self.seq = next(_sequence)
        self.op = op
        self.shape = shape  # of the output: what the gradient sent here must have
        # Per input: its node, the leaf itself if it requires grad, else None (as PyTorch, an
        # input that needed no gradient when the op ran gets none). A loop: for the one to
        # three inputs of an op it costs less than a comprehension.
        targets = []
        for t in inputs:
            targets.append(t._node or (t if t._requires_grad else None))
        self.inputs: tuple[Union["Node", "Tensor", None], ...] = tuple(targets)
        self.backward_fn: Optional[BackwardFn] = backward_fn
        self.saved = saved = tuple(saved)
        # _vc[0] is _version without the property call: this runs for every recorded op.
        self.saved_versions = tuple([t._vc[0] for t in saved]) if saved else ()
        # register_hook's hooks on the output, and the output whose .grad retain_grad() keeps
        self.hooks: Optional[list[Callable]] = None
        self.retained: Optional[weakref.ref] = None

    def __lt__(self, other: "Node") -> bool:  # heap order: newest first
        return self.seq > other.seq

    def run(self, upstream: np.ndarray) -> Sequence[Union[np.ndarray, AddableGrad, None]]:
        if self.backward_fn is None:
            raise RuntimeError(
                f"{self.op}: trying to backward through the graph a second time (its saved "
                "tensors were freed); call backward(retain_graph=True) the first time")
        for t, version in zip(self.saved, self.saved_versions):
            if t._version != version:
                raise RuntimeError(
                    f"{self.op}: a tensor of shape {tuple(t.shape)} saved for the backward pass "
                    "was modified by an in-place operation (one of the variables needed for "
                    "gradient computation has been modified by an inplace operation: it is at "
                    f"version {t._version}; expected version {version} instead)")
        return self.backward_fn(upstream)

    def release(self) -> None:
        self.backward_fn = None
        self.saved = ()
        self.saved_versions = ()


# Per hooked leaf, by id: a weak reference (its death drops the entry) and the hooks.
_post_hooks: dict[int, tuple[weakref.ref, list[Callable[["Tensor"], None]]]] = {}


def zero_grads(params: "Iterable[Tensor]", set_to_none: bool = True) -> None:
    """PyTorch's zero_grad over params: drops each .grad (its default), or with
    set_to_none=False fills each existing one with zeros in place."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad._data[...] = 0.0
            p.grad._version += 1


def register_post_accumulate_grad_hook(t: "Tensor", hook: Callable[["Tensor"], None]
                                       ) -> RemovableHandle:
    """Runs hook(t) in every backward pass once leaf t's gradient is complete in .grad."""
    if t._node is not None or not t.requires_grad:
        raise RuntimeError("register_post_accumulate_grad_hook: hooks go on leaf tensors that "
                           f"require grad (got a tensor of shape {tuple(t.shape)}, "
                           f"{'not a leaf' if t._node is not None else 'no grad required'})")
    if not callable(hook):
        raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got "
                        f"{hook!r}")
    hooks = keyed_hooks(_post_hooks, t)
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


def _leaf_feeds(root: "Tensor") -> dict[int, int]:
    """Per leaf that needs a gradient reachable from root (by id): how many node inputs feed
    it."""
    feeds: dict[int, int] = {}
    if root._node is None:
        return feeds
    seen = {root._node}
    stack = [root._node]
    while stack:
        for target in stack.pop().inputs:
            if isinstance(target, Node):
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
            elif target is not None and target._requires_grad:
                key = id(target)
                feeds[key] = feeds.get(key, 0) + 1
    return feeds


def _run_hooks(t: "Tensor") -> None:
    entry = _post_hooks.get(id(t))
    if entry is not None and entry[0]() is t:
        for hook in list(entry[1]):
            hook(t)


class _Pass(threading.local):
    capturing = False  # whether the running backward pass is autograd.grad's


_pass = _Pass()


def is_capturing() -> bool:
    """Whether the backward pass running now fills no .grad (autograd.grad's)."""
    return _pass.capturing


def run_backward(roots: Sequence[tuple["Tensor", np.ndarray]], retain_graph: bool = False,
                 capture: Optional[Sequence["Tensor"]] = None
                 ) -> dict[int, np.ndarray]:
    """Backward from each root with its gradient. Without `capture`, gradients accumulate into
    the .grad of every reachable leaf; with it (autograd.grad), no .grad changes and the
    gradient of each tensor in `capture` is returned, by id (missing if nothing reached it)."""
    previous = _pass.capturing
    _pass.capturing = capture is not None
    try:
        return _run_backward(roots, retain_graph, capture)
    finally:
        _pass.capturing = previous


@quiet
def _run_backward(roots: Sequence[tuple["Tensor", np.ndarray]], retain_graph: bool,
                  capture: Optional[Sequence["Tensor"]]) -> dict[int, np.ndarray]:

    leaf_grads: dict[int, tuple[Tensor, np.ndarray]] = {}
    capturing = capture is not None
    wanted_leaves = {id(t) for t in capture or () if t._node is None}
    wanted_nodes = {t._node: id(t) for t in capture or () if t._node is not None}
    captured: dict[int, np.ndarray] = {}

    def send(target: Union[Node, Tensor], g: np.ndarray) -> None:
        if isinstance(target, Node):
            if target in pending:
                pending[target] = pending[target] + g
            else:
                pending[target] = g
                heapq.heappush(heap, target)
        elif id(target) in wanted_leaves if capturing else target.requires_grad:
            key = id(target)
            leaf_grads[key] = (target, leaf_grads[key][1] + g) if key in leaf_grads \
                else (target, g)

    def deliver(node: Node, input_grads: Sequence[Union[np.ndarray, AddableGrad, None]]) -> None:
        # A function of its own, so that no local keeps a finished gradient alive while the
        # next node runs.
        for target, gi in zip(node.inputs, input_grads):
            if target is None:
                continue
            key = id(target)
            if isinstance(gi, AddableGrad):
                held = None
                if not isinstance(target, Node) and key not in leaf_grads \
                        and feeds.get(key) == 1 and target.requires_grad \
                        and key not in _leaf_hooks:
                    held = _grad_buffers.addable(target, gi.shape)
                if held is None:
                    gi = gi.make()
                else:  # the leaf's last feed, and nothing else waiting: straight into .grad
                    assert not isinstance(target, Node) and target.grad is not None
                    gi.add_into(held)
                    target.grad._version += 1
                    del feeds[key]
                    if _post_hooks:
                        _run_hooks(target)
                    continue
            if gi is not None:
                shape = target.shape
                if gi.shape != shape:
                    raise RuntimeError(f"{node.op}: internal error: gradient shape {gi.shape} "
                                       f"for an input of shape {shape}")
                send(target, np.asarray(gi, dtype=np.float32))
            if not isinstance(target, Node) and key in feeds:
                left = feeds[key] = feeds[key] - 1
                if not left and key in leaf_grads:  # complete: finish it
                    del feeds[key]
                    _, complete = leaf_grads.pop(key)
                    if _leaf_hooks:
                        complete = _run_tensor_hooks(_hooks_of(target), complete)
                    adoption.early(target, complete)
                    if _post_hooks:
                        _run_hooks(target)

    pending: dict[Node, np.ndarray] = {}
    heap: list[Node] = []
    # Leaves are finished early only when accumulating into .grad, from a single root.
    feeds = _leaf_feeds(roots[0][0]) if len(roots) == 1 and not capturing else {}
    adoption = _grad_buffers.Adoption(g for _, g in roots)
    for root, root_grad in roots:
        send(root._node if root._node is not None else root, root_grad)
    while heap:
        node = heapq.heappop(heap)
        g = pending.pop(node)
        if node.hooks:
            g = _run_tensor_hooks(node.hooks, g)
        if node.retained is not None:
            _retain(node.retained(), g)
        watched = node in wanted_nodes
        if watched:
            captured[wanted_nodes[node]] = g
        _grad_buffers.offer(g, watched)  # (never one left by a closure that raised)
        input_grads = node.run(g)
        _grad_buffers.withdraw()
        del g
        if not retain_graph:
            node.release()  # what its backward read can go now, not after the whole pass
        deliver(node, input_grads)
        del input_grads
    if _leaf_hooks:
        for key, (t, g) in list(leaf_grads.items()):
            leaf_grads[key] = (t, _run_tensor_hooks(_hooks_of(t), g))
    if capturing:
        captured.update((key, g) for key, (_, g) in leaf_grads.items())
        return captured
    adoption.last(leaf_grads.values())
    if _post_hooks:
        for t, _ in leaf_grads.values():
            _run_hooks(t)
    return captured


# The torch.autograd names built on the engine above (imported last: they use it).
from ._function import Function, FunctionCtx  # noqa: E402, F401
from ._grad import backward, grad  # noqa: E402, F401
