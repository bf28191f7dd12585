"""ZeRO stage 1: the optimizer state sharded over the workers (OptimizerShards), the
parameters all-gathered after each step."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from . import world as _world
from .world import broadcast_arrays, rank, wait, world_size


class OptimizerShards:
    """ZeRO stage 1: each worker updates, and keeps current, the
    optimizer state of its share of the parameters; then the parameters are all-gathered.

    The shares are whole parameters, each given in order to the worker with the fewest
    elements so far (torch's ZeroRedundancyOptimizer partitions the same way). The optimizer
    updates each element by the same operations whichever worker does it, so the parameters
    have the bits of the unsharded step; the clip norm is computed before, over every
    parameter's reduced gradient, which every worker holds. The state of other workers'
    parameters stays as it was loaded; `gather_state` brings every worker's state current
    (before a checkpoint, so rank 0 writes the unsharded format, which loads at any W).

    Memory: a worker holds the state of its own parameters only; the others' state arrays are
    read-only zero placeholders (zero-strided: no memory) until `materialise` (which
    gather_state and loading a checkpoint need) and again after `release` (the Trainer calls
    it once a checkpoint is written or loaded). An optimizer whose state is not swappable
    (Optimizer._state_lists) keeps its whole state on every worker."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        params = optimizer.params
        world = world_size()
        loads = [0] * world
        self.owner: list[int] = []
        for p in params:
            r = loads.index(min(loads))
            self.owner.append(r)
            loads[r] += int(np.prod(p.shape, dtype=np.int64))
        self.counts = loads
        self.displs = [sum(loads[:r]) for r in range(world)]
        self.mine = [i for i, r in enumerate(self.owner) if r == rank()]
        self.flat = np.empty(sum(loads), np.float32)
        self._state_of()  # refuses an optimizer with state of no parameter
        self.release()

    def _others(self) -> Iterator[tuple[list, int]]:
        """(state list, index) of every state array of another worker's parameter."""
        for states in self.optimizer._state_lists().values():
            for i, owner in enumerate(self.owner):
                if owner != rank() and states[i] is not None:
                    yield states, i

    def release(self) -> None:
        """Drops the state of other workers' parameters (placeholders of their shape)."""
        for states, i in self._others():
            a = states[i]
            states[i] = np.broadcast_to(np.zeros((), a.dtype), a.shape)

    def materialise(self) -> None:
        """Real (zero) arrays in place of the placeholders, to be written."""
        for states, i in self._others():
            a = states[i]
            if not a.flags.writeable:
                states[i] = np.zeros(a.shape, a.dtype)

    def _state_of(self) -> list[list[np.ndarray]]:
        """Per parameter, its optimizer state arrays (named `<kind>.<parameter index>`)."""
        state_of: list[list[np.ndarray]] = [[] for _ in self.owner]
        for name, array in self.optimizer.state_tensors().items():
            index = name.rsplit(".", 1)[-1]
            if not index.isdigit() or int(index) >= len(self.owner):
                raise ValueError(f"shard_optimizer: the optimizer's state {name!r} belongs "
                                 "to no parameter: it cannot be sharded")
            state_of[int(index)].append(array)
        return state_of

    def release_others(self) -> None:
        """Drops the gradients of other workers' parameters: the optimizer skips them."""
        for i, p in enumerate(self.optimizer.params):
            if self.owner[i] != rank():
                p.grad = None

    def gather(self, what: str = "gathering the parameters") -> None:
        """Every parameter from its owner, on every worker (one Allgatherv of float32)."""
        if _world._comm is None:
            return
        params = self.optimizer.params
        at = self.displs[rank()]
        for i in self.mine:
            a = params[i]._data.reshape(-1)
            self.flat[at:at + a.size] = a
            at += a.size
        wait([_world._comm.Iallgatherv(_world._MPI.IN_PLACE,
                                       [self.flat, self.counts, self.displs, _world._MPI.FLOAT])],
             what)
        next_of = [*self.displs]  # per rank: where its next parameter starts in flat
        for i, p in enumerate(params):
            r = self.owner[i]
            if r != rank():
                n = p._data.size
                p._data.reshape(-1)[...] = self.flat[next_of[r]:next_of[r] + n]
                p._version += 1
            next_of[r] += p._data.size

    def gather_state(self, what: str = "gathering the optimizer state") -> None:
        """Every parameter's optimizer state from its owner, on every worker (materialised:
        `release` drops it again)."""
        self.materialise()
        state_of = self._state_of()
        for r in range(world_size()):
            broadcast_arrays([a for i, owner in enumerate(self.owner) if owner == r
                              for a in state_of[i]], what, root=r)
