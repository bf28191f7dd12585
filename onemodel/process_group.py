"""torch.distributed's process-group calls over onemodel's MPI world (onemodel.distributed
re-exports them): a single process is a group of one, as torch's with world_size=1; under
mpiexec the group is the MPI world (distributed.init). Collectives on tensors are not here:
data parallelism is onemodel.train's Trainer, whose gradient sum is exact."""
from __future__ import annotations

import datetime
from typing import Any, Optional

from . import distributed as _dist

_initialized = False
NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")
_BACKENDS = (None, "gloo", "mpi", "cpu:gloo")


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return _initialized


def launched_world_size() -> int:
    """The number of processes the launcher started (1 without mpiexec)."""
    return _dist._launcher_size()


def _require(group: Any, op: str) -> None:
    if group is not None:
        raise NotImplementedError(f"{op}: only the default group (group=None) exists")
    if not _initialized:
        raise ValueError(NOT_INITIALIZED)


def init_process_group(backend: Optional[str] = None, init_method: Optional[str] = None,
                       timeout: Optional[datetime.timedelta] = None, world_size: int = -1,
                       rank: int = -1, store: Any = None, group_name: str = "",
                       pg_options: Any = None, device_id: Any = None) -> None:
    """Joins the MPI world (one process without mpiexec); world_size and rank, when given,
    must be what the launcher made. The CPU backends only ("gloo", "mpi")."""
    global _initialized
    if _initialized:
        raise ValueError("init_process_group: trying to initialize the default process group "
                         "twice!")
    if backend not in _BACKENDS:
        raise ValueError(f"init_process_group: backend {backend!r} is not available; onemodel "
                         "runs on the CPU over MPI (use 'gloo', 'mpi' or None)")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"init_process_group: timeout must be a datetime.timedelta, got "
                        f"{timeout!r}")
    for name, value in (("world_size", world_size), ("rank", rank)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"init_process_group: {name} must be an integer, got {value!r}")
    size = launched_world_size()
    if world_size not in (-1, size):
        raise ValueError(f"init_process_group: world_size={world_size}, but the launcher "
                         f"started {size} process(es)")
    if rank != -1 and not 0 <= rank < size:
        raise ValueError(f"init_process_group: rank {rank} is outside a world of {size}")
    _dist.init(None if timeout is None else timeout.total_seconds())
    if rank not in (-1, _dist.rank()):
        raise ValueError(f"init_process_group: rank={rank}, but this process is rank "
                         f"{_dist.rank()} of the MPI world")
    _initialized = True


def destroy_process_group(group: Any = None) -> None:
    """Leaves the default group (the MPI world itself lasts as long as the process)."""
    global _initialized
    if group is None and not _initialized:
        raise ValueError(NOT_INITIALIZED)
    _require(group, "destroy_process_group")
    _initialized = False


def get_rank(group: Any = None) -> int:
    _require(group, "get_rank")
    return _dist.rank()


def get_world_size(group: Any = None) -> int:
    _require(group, "get_world_size")
    return _dist.world_size()


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> None:
    """Waits for every rank (nothing to wait for in one process). Also after distributed.init
    alone, onemodel's own way into the MPI world."""
    if group is not None or async_op:
        raise NotImplementedError("barrier: only the default group, synchronously")
    if not (_initialized or _dist._initialised):
        raise ValueError(NOT_INITIALIZED)
    if _dist._comm is not None:
        _dist.wait([_dist._comm.Ibarrier()], "at a barrier")
