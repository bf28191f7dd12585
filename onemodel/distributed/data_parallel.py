"""The data-parallel step over micro-batches: which global indices this worker computes
(local_indices), its gradients (gradients), and their exact mean over every worker
(all_reduce_gradients)."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

import numpy as np

from ..tensor import Tensor
from . import world as _world
from .exact import ExactSum, max_exponent
from .world import _allreduce, rank, world_size


def local_indices(micro_batches: int, rank_: Optional[int] = None,
                  world_size_: Optional[int] = None) -> range:
    """The global micro-batch indices this worker computes: rank, rank + W, ..."""
    r = rank() if rank_ is None else rank_
    w = world_size() if world_size_ is None else world_size_
    if micro_batches % w:
        raise ValueError(f"local_indices: {micro_batches} micro-batches do not divide among "
                         f"{w} workers")
    return range(r, micro_batches, w)


def gradients(params: Iterable[Tensor]) -> list[Optional[np.ndarray]]:
    """The current gradients of params (the arrays, or None), to hand to all_reduce_gradients
    for one micro-batch; take them before the next backward, after zero_grad."""
    return [None if p.grad is None else p.grad._data for p in params]


def all_reduce_gradients(params: Iterable[Tensor],
                         micro_batches: Sequence[tuple],
                         average: bool = True) -> None:
    """Sets every parameter's .grad to the exact sum over all workers' micro-batches (the mean
    when `average`: over the samples when counts are given, else over the micro-batches).

    `micro_batches` lists this worker's (global index, gradients) or (global index, gradients,
    sample count) tuples, the gradients as from `gradients(params)`; together the workers must
    hold 0 .. M-1 once each. A parameter without a gradient in some micro-batch counts as zero
    there, and keeps None only if it has none anywhere. The grid of each parameter comes from
    the largest element over all micro-batches (an integer MAX all-reduce), so the result is
    the same for any split of the micro-batches among workers."""
    params = list(params)
    local = []
    for m in micro_batches:
        i, grads = int(m[0]), list(m[1])
        n = int(m[2]) if len(m) > 2 else 1
        if len(grads) != len(params):
            raise ValueError(f"all_reduce_gradients: micro-batch {i} has {len(grads)} "
                             f"gradients for {len(params)} parameters")
        local.append((i, grads, n))
    top = np.array([max([i + 1 for i, _, _ in local], default=0)], np.int64)
    _allreduce(top, "counting micro-batches", _world._MPI.MAX if _world._comm else None)
    m_total = int(top[0])
    seen = np.zeros((max(m_total, 1), 2), np.int64)
    for i, _, n in local:
        if 0 <= i < m_total:
            seen[i] += (1, n)
    lowest = min([i for i, _, _ in local], default=0)
    if lowest < 0:
        seen[0, 0] += 2  # a negative index: reported below on every worker
    # The grids: each parameter's largest exponent over every micro-batch (order-free MAX).
    exps = np.full(len(params), -(1 << 40), np.int64)
    for _, grads, n in local:
        for k, g in enumerate(grads):
            e = None if g is None else max_exponent(np.asarray(g, np.float32))
            if e is not None:
                exps[k] = max(exps[k], e + (int(n) - 1).bit_length())
    _allreduce(exps, "agreeing on the grids", _world._MPI.MAX if _world._comm else None)
    _allreduce(seen, "counting micro-batches")
    if m_total == 0 or not (seen[:, 0] == 1).all():
        raise ValueError(f"all_reduce_gradients: the micro-batch indices must be 0 .. M-1 "
                         f"once each over all workers, got counts {seen[:, 0].tolist()}")
    acc = ExactSum([int(np.prod(p.shape, dtype=np.int64)) for p in params])
    acc.exponents = [int(e) + m_total.bit_length() if e > -(1 << 40) else 0 for e in exps]
    for _, grads, n in sorted(local, key=lambda m: m[0]):
        acc.add([None if g is None else np.asarray(g, np.float32) for g in grads], n)
    acc.reduce()
    total = int(seen[:, 1].sum()) if average else 1
    for p, r in zip(params, acc.results(total, update_priors=False)):
        p.grad = None if r is None else Tensor._wrap(r.reshape(p.shape))
