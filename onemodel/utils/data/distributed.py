"""torch.utils.data.distributed.DistributedSampler: each of num_replicas ranks takes every
num_replicas-th index of one order, padded (by repeating its start) or cut to a multiple of
num_replicas, as torch's. The shuffled order is om.randperm from Generator(seed + epoch), so
it is the same on every machine (not torch's); set_epoch(e) chooses the epoch.

Without num_replicas or rank, the MPI launcher's environment gives them (what
onemodel.distributed.init() will find), one process outside mpiexec.
"""
from __future__ import annotations

import math
import os
from typing import Any, Iterator, Optional

import numpy as np

from ...random import Generator, randperm
from .dataset import check_integer
from .sampler import Sampler

_LAUNCHER = (("PMI_SIZE", "PMI_RANK"), ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
             ("PMIX_SIZE", "PMIX_RANK"))


def _launcher_world() -> tuple[int, int]:
    """(world size, rank) from an MPI launcher's environment; (1, 0) outside one."""
    for size, rank in _LAUNCHER:
        if os.environ.get(size, "").isdigit() and os.environ.get(rank, "").isdigit():
            return int(os.environ[size]), int(os.environ[rank])
    return 1, 0


class DistributedSampler(Sampler):
    def __init__(self, dataset: Any, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False) -> None:
        world, own = _launcher_world()
        owner = "DistributedSampler"
        self.num_replicas = check_integer(owner, "num_replicas",
                                          world if num_replicas is None else num_replicas, 1)
        rank = own if rank is None else rank
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not (
                0 <= rank < self.num_replicas):
            raise ValueError(f"{owner}: invalid rank {rank!r}, rank should be in the interval "
                             f"[0, {self.num_replicas - 1}]")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"{owner}: seed must be an integer, got {seed!r}")
        self.rank, self.seed, self.epoch = int(rank), int(seed), 0
        self.dataset, self.shuffle, self.drop_last = dataset, bool(shuffle), bool(drop_last)
        n = len(dataset)
        if self.drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        indices = (randperm(n, generator=Generator(self.seed + self.epoch)).tolist()
                   if self.shuffle else list(range(n)))
        if self.drop_last:
            indices = indices[:self.total_size]
        elif indices:  # pad with the start of the order, repeated as often as needed
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next pass takes (shuffle=True)."""
        self.epoch = check_integer("DistributedSampler.set_epoch", "epoch", epoch, 0)
