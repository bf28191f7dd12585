"""Running statistics whose bits do not depend on the worker count: `running_updates(model)`.

A training step of M micro-batches spread over W workers (global index i on worker i mod W)
leaves the batch-norm running statistics as one process running the M micro-batches in order
would: inside the context each batch-norm module in training mode records, instead of updating
running_mean, running_var and num_batches_tracked, its batch mean and unbiased variance (float32,
as the running update reads them; None for an empty batch, which counts but has no statistics),
under the global index given to `begin`. On leaving, the workers all-gather their records and
each applies every record in global order, micro-batch by micro-batch: num_batches_tracked + 1,
then running = (1 - momentum)·running + momentum·batch in double rounded once (momentum None:
1 / num_batches_tracked), the arithmetic of an immediate update, so the same bits for every W
and as without the context. A module run twice in a micro-batch records twice, in order.

The modules are BatchNorm1d and BatchNorm2d (every _BatchNorm with PyTorch's batch statistics);
InstanceNorm with track_running_stats keeps updating at once, on each worker (its update
averages per-sample statistics, which it does not record). The model's other buffers are rank
0's on leaving, as DistributedDataParallel's broadcast_buffers. The Trainer uses this for its
steps; DistributedDataParallel keeps torch's rule (rank 0's buffers broadcast before each
synchronised forward), so its statistics are rank 0's micro-batches'.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import numpy as np

from .. import distributed as _dist
from ..distributed import world as _world
from ..functional.conv import update_running
from .conv import _BatchNorm
from .module import Module
from .normalization import _InstanceNorm

Record = Optional[tuple[np.ndarray, np.ndarray]]  # batch mean, unbiased variance; None: empty


class RunningUpdates:
    """The records of one step: per global micro-batch index, per module, its records."""

    def __init__(self, model: Module) -> None:
        if not isinstance(model, Module):
            raise TypeError(f"running_updates: model must be an nn.Module, got "
                            f"{type(model).__name__}")
        self.model = model
        self.modules = [m for m in model.modules()
                        if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm)]
        self.records: dict[int, list[list[Record]]] = {}

    def begin(self, index: int) -> None:
        """The micro-batch of global index `index` starts (again: a forward run over discards
        what it recorded before)."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
            raise ValueError(f"RunningUpdates.begin: index must be an int >= 0, got {index!r}")
        lists: list[list[Record]] = [[] for _ in self.modules]
        self.records[int(index)] = lists
        for module, records in zip(self.modules, lists):
            module._deferred = records

    def detach(self) -> None:
        """The modules update at once again."""
        for module in self.modules:
            module._deferred = None

    def apply(self, what: str = "gathering the running statistics") -> None:
        """Gathers every worker's records and applies them all in global order; the other
        buffers become rank 0's."""
        parts = [self.records]
        if _world._comm is not None and _world._comm.Get_size() > 1:
            if self.modules:  # the same model on every worker: all gather, or none
                parts = [self._unpack(part) for part in _allgather_bytes(self._pack(), what)]
            mine = {id(b) for m in self.modules for b in m.buffers()}
            _dist.broadcast_arrays([b._data for b in self.model.buffers() if id(b) not in mine],
                                   "broadcasting rank 0's buffers")
        gathered: dict[int, list[list[Record]]] = {}
        for part in parts:
            for index, lists in part.items():
                if index in gathered:
                    raise ValueError(f"RunningUpdates.apply: micro-batch {index} was recorded "
                                     "by two workers")
                gathered[index] = lists
        for index in sorted(gathered):
            for module, records in zip(self.modules, gathered[index]):
                for record in records:
                    momentum = module._count()
                    if record is not None:
                        update_running(module.running_mean, record[0], momentum)
                        update_running(module.running_var, record[1], momentum)
        self.records = {}


    def _pack(self) -> np.ndarray:
        """The records as bytes: the int64 header (its length; the number of micro-batches;
        per micro-batch its index, then per module its number of records and whether each
        has statistics), then every statistic's float32 values in that order."""
        head: list[int] = [len(self.records)]
        data: list[np.ndarray] = [np.zeros(0, np.float32)]
        for index, lists in self.records.items():
            head.append(index)
            for records in lists:
                head += [len(records)] + [r is not None for r in records]
                data += [a for r in records if r is not None for a in r]
        return np.concatenate([np.array([len(head)] + head, np.int64).view(np.uint8),
                               np.concatenate(data).view(np.uint8)])

    def _unpack(self, packed: np.ndarray) -> dict[int, list[list[Record]]]:
        length = int(packed[:8].view(np.int64)[0])
        head = iter(packed[8:8 * (length + 1)].view(np.int64).tolist())
        data = packed[8 * (length + 1):].view(np.float32)
        at, found = 0, {}
        for _ in range(next(head)):
            index, lists = next(head), []
            for module in self.modules:
                records: list[Record] = []
                c = module.num_features
                for has in [next(head) for _ in range(next(head))]:
                    records.append((data[at:at + c], data[at + c:at + 2 * c]) if has else None)
                    at += 2 * c if has else 0
                lists.append(records)
            found[index] = lists
        return found


@contextlib.contextmanager
def running_updates(model: Module) -> Iterator[RunningUpdates]:
    """Collects the running-statistics updates of `model`'s batch norms from each `begin`
    on; leaving without an exception gathers and applies them (RunningUpdates.apply), with
    one discards them."""
    updates = RunningUpdates(model)
    try:
        yield updates
    finally:
        updates.detach()
    updates.apply()


def _allgather_bytes(mine: np.ndarray, what: str) -> list[np.ndarray]:
    """Every worker's bytes `mine` (uint8), in rank order (lengths all-gathered first)."""
    comm, mpi = _world._comm, _world._MPI
    sizes = np.zeros(comm.Get_size(), np.int64)
    _world.wait([comm.Iallgather(np.array([mine.size], np.int64), sizes)], what)
    buf = np.empty(int(sizes.sum()), np.uint8)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    _world.wait([comm.Iallgatherv(mine, [buf, sizes.tolist(), starts.tolist(), mpi.BYTE])],
                what)
    return [buf[s:s + n].copy() for s, n in zip(starts.tolist(), sizes.tolist())]  # aligned
