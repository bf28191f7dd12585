"""Data parallelism whose bits do not depend on the number of workers (engine.md section 6).

A global step is cut into M micro-batches with global indices 0 .. M-1; each worker computes
the gradients of its own micro-batches (rank r of W takes indices r, r + W, r + 2W, ...: see
`local_indices`, which matches the DataLoader's sharding). `all_reduce_gradients` then sums the
gradients over the micro-batch index in one fixed tree, on every worker:

    level by level, neighbours are added left + right: (g0 + g1), (g2 + g3), ...; an odd last
    element moves up unchanged; repeat until one remains

and divides by M (the mean of the micro-batch means). The tree depends only on M, so 1 worker
accumulating M micro-batches, 2 workers with M/2 each, or M workers give the same bits.

Across processes it runs on MPI through mpi4py (`mpiexec -n W python train.py`): every worker
gathers all the micro-batch gradients (an allgather: W times the traffic of a ring all-reduce,
the price of a sum whose order does not depend on W) and adds them in the same tree. Without
mpi4py, or outside mpiexec, there is one worker: rank 0 of 1.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

import numpy as np

from .tensor import Tensor

_comm: Any = None
_initialised = False


def init() -> tuple[int, int]:
    """Joins the MPI world if mpi4py is installed and it has more than one process; returns
    (rank, world_size). Safe to call more than once."""
    global _comm, _initialised
    if not _initialised:
        _initialised = True
        try:
            from mpi4py import MPI
        except ImportError:
            MPI = None
        if MPI is not None and MPI.COMM_WORLD.Get_size() > 1:
            _comm = MPI.COMM_WORLD
    return rank(), world_size()


def rank() -> int:
    return _comm.Get_rank() if _comm is not None else 0


def world_size() -> int:
    return _comm.Get_size() if _comm is not None else 1


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


def tree_sum(values: Sequence[np.ndarray]) -> np.ndarray:
    """Sum in the fixed tree of the module notes (new array; the inputs are not changed)."""
    level = list(values)
    if not level:
        raise ValueError("tree_sum: nothing to add")
    if len(level) == 1:
        return np.array(level[0], dtype=np.float32)
    while len(level) > 1:
        pairs = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        level = pairs + level[len(pairs) * 2:]
    return level[0]


def all_reduce_gradients(params: Iterable[Tensor],
                         micro_batches: Sequence[tuple[int, Sequence[Optional[np.ndarray]]]],
                         average: bool = True) -> None:
    """Sets every parameter's .grad to the tree sum over all workers' micro-batches (the mean
    when `average`). `micro_batches` lists this worker's (global index, gradients) pairs, the
    gradients as from `gradients(params)`; together the workers must hold 0 .. M-1 once each.
    A parameter without a gradient in some micro-batch counts as zero there, and keeps None
    only if it has none anywhere."""
    params = list(params)
    local = [(int(i), list(g)) for i, g in micro_batches]
    for i, grads in local:
        if len(grads) != len(params):
            raise ValueError(f"all_reduce_gradients: micro-batch {i} has {len(grads)} "
                             f"gradients for {len(params)} parameters")
    everything = local if _comm is None else [m for part in _comm.allgather(local)
                                              for m in part]
    indices = sorted(i for i, _ in everything)
    if indices != list(range(len(indices))) or not indices:
        raise ValueError(f"all_reduce_gradients: the micro-batch indices must be 0 .. M-1 "
                         f"once each over all workers, got {indices}")
    by_index = dict(everything)
    count = np.float32(len(indices))
    for k, p in enumerate(params):
        column = [by_index[i][k] for i in indices]
        if all(g is None for g in column):
            p.grad = None
            continue
        zeros = np.zeros(p.shape, np.float32)
        total = tree_sum([zeros if g is None else np.asarray(g, np.float32) for g in column])
        if average:
            total /= count
        p.grad = Tensor._wrap(np.ascontiguousarray(total, dtype=np.float32))
