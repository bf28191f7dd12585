"""ZeRO stage 1: the optimizer state sharded over the workers (OptimizerShards), the
parameters all-gathered after each step."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import world as _world
from .world import broadcast_arrays, rank, wait, world_size


class OptimizerShards:
    """ZeRO stage 1: each worker updates, and keeps the optimizer state of, its share of the
    parameters' elements; then the parameters are all-gathered.

    The shares are balanced by elements: the parameters' elements in order, as one flat run,
    cut into W contiguous pieces whose sizes differ by at most one, so a parameter may be split
    between workers. The optimizer steps a worker's piece of each parameter as a flat view of
    the parameter and its gradient (Optimizer._pieces); it updates each element by the same
    operations whichever worker does it, so the parameters have the bits of the unsharded
    step. The clip norm is computed before, over every parameter's reduced gradient, which
    every worker holds. The all-gather writes into the parameters' own arrays (one in-place
    Allgatherv per parameter: no gathering buffer).

    Memory: a worker's state arrays are its pieces alone (a parameter it holds whole keeps
    its shape, a piece of one is flat), allocated at the first step (optim.lazy_state); the
    others' are read-only zero placeholders (zero-strided: no memory). `gather_state` brings
    every worker's whole state current (before a checkpoint, so rank 0 writes the unsharded
    format, which loads at any W), `materialise` gives the whole shapes for loading one, and
    `release` (the Trainer calls it once a checkpoint is written or loaded; `release_others`
    does before a step) goes back to the pieces. An optimizer whose state is not updated
    element by element (empty Optimizer._state_lists) is not sharded: every worker steps all
    of it, the same bits."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        params = optimizer.params
        world, me = world_size(), rank()
        self.shapes = [tuple(p.shape) for p in params]
        sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        total = sum(sizes)
        bounds = [total * r // world for r in range(world + 1)]
        # Per parameter: each worker's element count and start inside it (Allgatherv's).
        self.counts: list[list[int]] = []
        self.displs: list[list[int]] = []
        start = 0
        for size in sizes:
            lows = [min(max(bounds[r] - start, 0), size) for r in range(world + 1)]
            self.counts.append([lows[r + 1] - lows[r] for r in range(world)])
            self.displs.append(lows[:world])
            start += size
        # The first worker holding part of each parameter: its 0-d state's source.
        self.owner = [next((r for r in range(world) if c[r]), 0) for c in self.counts]
        self.pieces = {i: (d[me], d[me] + c[me]) for i, (c, d) in
                       enumerate(zip(self.counts, self.displs)) if c[me]}
        self.sharded = world > 1 and bool(optimizer._state_lists())
        self._whole = True  # the state lists hold whole shapes (gather_state, materialise)
        if self.sharded:
            optimizer._pieces = self.pieces
            self.release()

    def _entries(self) -> list[tuple[list, int]]:
        """(state list, parameter index) of every per-element state array."""
        return [(states, i) for states in self.optimizer._state_lists().values()
                for i, a in enumerate(states) if a is not None and a.ndim]

    def release(self) -> None:
        """Each state array back to this worker's piece (a copy of it), or a placeholder."""
        if not self.sharded or not self._whole:
            return
        for states, i in self._entries():
            a = states[i]
            start, end = self.pieces.get(i, (0, 0))
            if end - start == a.size:
                continue  # held whole
            if start == end:  # none of it here
                states[i] = np.broadcast_to(np.zeros((), a.dtype), a.shape)
            elif not a.flags.writeable:  # not allocated yet: a lazy piece of the same value
                states[i] = np.broadcast_to(np.array(a.flat[0], a.dtype), (end - start,))
            else:
                states[i] = a.reshape(-1)[start:end].copy()
        self._whole = False

    def materialise(self) -> None:
        """Whole, writable state arrays (this worker's pieces in place, zeros elsewhere), to
        be written: by gather_state, or by loading a checkpoint."""
        if not self.sharded:
            return
        for states, i in self._entries():
            a = states[i]
            if a.shape != self.shapes[i] or not a.flags.writeable:
                whole = np.zeros(self.shapes[i], a.dtype)
                start, end = self.pieces.get(i, (0, 0))
                if a.shape != self.shapes[i]:
                    whole.reshape(-1)[start:end] = a
                elif start < end:  # held whole, not allocated yet
                    whole[...] = a
                states[i] = whole
        self._whole = True

    def release_others(self) -> None:
        """Before a step: back to the pieces (after gather_state), and the gradients of
        parameters with no element here dropped (the optimizer skips them anyway)."""
        if not self.sharded:
            return
        self.release()
        for i, p in enumerate(self.optimizer.params):
            if i not in self.pieces:
                p.grad = None

    def gather(self, what: str = "gathering the parameters") -> None:
        """Every parameter's pieces from their workers, into its own array, on every worker
        (one in-place Allgatherv of float32 per parameter)."""
        if not self.sharded:
            return
        comm, me = _world._comm, rank()
        params = self.optimizer.params
        wait([comm.Iallgatherv(_world._MPI.IN_PLACE, [p._data.reshape(-1), self.counts[i],
                                                      self.displs[i], _world._MPI.FLOAT])
              for i, p in enumerate(params)], what)
        for i, p in enumerate(params):
            if self.counts[i][me] < p._data.size:
                p._version += 1

    def gather_state(self, what: str = "gathering the optimizer state") -> None:
        """Every parameter's whole optimizer state from its workers, on every worker (`release`
        drops it again)."""
        if not self.sharded:
            return
        self.materialise()
        comm = _world._comm
        types = _world._MPI._typedict  # numpy type code -> MPI datatype
        wait([comm.Iallgatherv(_world._MPI.IN_PLACE, [states[i].reshape(-1), self.counts[i],
                                                      self.displs[i], types[states[i].dtype.char]])
              for states, i in self._entries()], what)
        scalars = [(states, i) for states in self.optimizer._state_lists().values()
                   for i, a in enumerate(states) if a is not None and not a.ndim]
        for r in range(world_size()):
            broadcast_arrays([states[i] for states, i in scalars if self.owner[i] == r], what,
                             root=r)
