"""torch.distributed's process-group calls over onemodel's MPI world (onemodel.distributed
re-exports them): a single process is a group of one, as torch's with world_size=1; under
mpiexec the group is the MPI world (distributed.init). Every backend name ("mpi", "gloo",
"nccl") is that one engine.

What is exact: all_reduce's SUM and AVG of float32 tensors are the exact sum of every rank's
values (the integer sum of distributed.ExactSum, on a grid 2^(P - 54) where P is the exponent
of the largest element over all ranks plus the bits of the rank count), divided by 1 or W and
rounded once to float32: the result does not depend on the order MPI adds in, nor on which
rank holds which value, and it is the same on every rank. Elements more than 2^31 times
smaller than a tensor's largest are rounded to that grid first. Integer SUM (wrapping as
int64's), MIN and MAX are exact anyway; PRODUCT multiplies in rank order."""
from __future__ import annotations

import datetime
import enum
import os
import socket
from typing import Any, Optional, Sequence

import numpy as np

from . import distributed as _dist
from .distributed import world as _world
from .tensor import Tensor

_initialized = False
NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")
_BACKENDS = (None, "gloo", "mpi", "nccl", "cpu:gloo", "cuda:nccl", "cpu:gloo,cuda:nccl")


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
                         "runs on the CPU over MPI (use 'mpi', 'gloo', 'nccl' or None)")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"init_process_group: timeout must be a datetime.timedelta, got "
                        f"{timeout!r}")
    for name, value in (("world_size", world_size), ("rank", rank)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"init_process_group: {name} must be an integer, got {value!r}")
    size = launched_world_size()
    announced = os.environ.get("WORLD_SIZE", "")
    if size == 1 and init_method in (None, "env://") and announced.isdigit() \
            and int(announced) > 1:
        raise ValueError(f"init_process_group: WORLD_SIZE={announced} in the environment, but "
                         f"MPI started one process: launch with onemodel-run -n {announced} "
                         "(mpiexec), not torchrun")
    if world_size not in (-1, size):
        raise ValueError(f"init_process_group: world_size={world_size}, but the launcher "
                         f"started {size} process(es)")
    if rank != -1 and not 0 <= rank < size:
        raise ValueError(f"init_process_group: rank {rank} is outside a world of {size}")
    _dist.init(None if timeout is None else timeout.total_seconds())
    if rank not in (-1, _dist.rank()):
        raise ValueError(f"init_process_group: rank={rank}, but this process is rank "
                         f"{_dist.rank()} of the MPI world")
    _set_launcher_environment()
    _initialized = True


def _set_launcher_environment() -> None:
    """RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE as torch's launchers set them, from
    the MPI world, and MASTER_ADDR/MASTER_PORT where unset; destroy_process_group restores
    what was there before (so that processes started later do not inherit them)."""
    local_rank, local_size, master = 0, 1, "127.0.0.1"
    if _world._comm is not None:
        node = _world._comm.Split_type(_world._MPI.COMM_TYPE_SHARED)
        local_rank, local_size = node.Get_rank(), node.Get_size()
        node.Free()
        master = _dist.broadcast_bytes(socket.gethostname().encode(),
                                       "agreeing on MASTER_ADDR").decode()
    values = {"RANK": _dist.rank(), "WORLD_SIZE": _dist.world_size(), "LOCAL_RANK": local_rank,
              "LOCAL_WORLD_SIZE": local_size, "MASTER_ADDR": os.environ.get("MASTER_ADDR", master),
              "MASTER_PORT": os.environ.get("MASTER_PORT", 29500)}
    _environment_before.clear()
    for name, value in values.items():
        _environment_before[name] = os.environ.get(name)
        os.environ[name] = str(value)


_environment_before: dict[str, Optional[str]] = {}


def destroy_process_group(group: Any = None) -> None:
    """Leaves the default group (the MPI world itself lasts as long as the process)."""
    global _initialized
    if group is None and not _initialized:
        raise ValueError(NOT_INITIALIZED)
    _require(group, "destroy_process_group")
    for name, value in _environment_before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _environment_before.clear()
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
    if not (_initialized or _world._initialised):
        raise ValueError(NOT_INITIALIZED)
    if _world._comm is not None:
        _dist.wait([_world._comm.Ibarrier()], "at a barrier")


class ReduceOp(enum.Enum):
    """torch.distributed.ReduceOp's reductions that all_reduce offers."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


def _check_tensor(op: str, name: str, tensor: Any) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(tensor).__name__}")


def _collective(op: str, group: Any, async_op: bool) -> None:
    _require(group, op)
    if async_op:
        raise NotImplementedError(f"{op}: async_op=True is not available (the call waits)")


def _write(tensor: Tensor, values: np.ndarray) -> None:
    """Puts the result into the tensor in place (an in-place write, as torch's)."""
    tensor._data[...] = values.reshape(tensor._data.shape)
    tensor._version += 1


def exact_mean(contributions: Sequence[Sequence[np.ndarray]], sizes: Sequence[int],
               divisor: int, what: str) -> list[Optional[np.ndarray]]:
    """Per slot k, the float32 of (the sum of every rank's arrays contributions[k]) / divisor,
    rounded once (flat; None where no rank has any): the exact sum of the module notes, its
    grid from the largest element over all ranks and the number of arrays over all ranks, so
    the result depends on the arrays only, not on the ranks holding them."""
    lowest = -(1 << 40)
    exps = np.full(len(sizes), lowest, np.int64)
    for k, arrays in enumerate(contributions):
        for a in arrays:
            e = _dist.max_exponent(a)
            if e is not None:
                exps[k] = max(exps[k], e)
    local = max(map(len, contributions), default=0)
    counts = np.array([local], np.int64)
    _dist._allreduce(exps, what, _world._MPI.MAX if _world._comm else None)
    _dist._allreduce(counts, what)
    total = int(counts[0])
    acc = _dist.ExactSum(sizes)
    acc.exponents = [int(e) + total.bit_length() if e > lowest else 0 for e in exps]
    for j in range(local):
        acc.add([arrays[j].reshape(-1) if j < len(arrays) else None
                 for arrays in contributions])
    acc.reduce(what=what)
    return acc.results(divisor, update_priors=False)


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None,
               async_op: bool = False) -> None:
    """Reduces the tensor over every rank, in place on each (see the module notes for what is
    exact): float32 with any op, integers with SUM, MIN, MAX, PRODUCT."""
    _collective("all_reduce", group, async_op)
    _check_tensor("all_reduce", "tensor", tensor)
    if not isinstance(op, ReduceOp):
        raise ValueError(f"all_reduce: op must be a ReduceOp, got {op!r}")
    data = tensor._data
    floating = data.dtype == np.float32
    if not floating and (data.dtype.kind not in "iu" or op is ReduceOp.AVG):
        raise TypeError(f"all_reduce: {op.name} of a {data.dtype} tensor is not available "
                        "(float32 with any op, integers without AVG)")
    what = f"in all_reduce({op.name})"
    if floating and op in (ReduceOp.SUM, ReduceOp.AVG):
        divisor = _dist.world_size() if op is ReduceOp.AVG else 1
        result = exact_mean([[data]], [data.size], divisor, what)[0]
        _write(tensor, np.zeros(data.shape, np.float32) if result is None else result)
    elif op is ReduceOp.PRODUCT:  # gathered, then multiplied in rank order
        rows = _gather(data, what)
        product = rows[0].copy()
        for row in rows[1:]:
            product *= row
        _write(tensor, product)
    elif _world._comm is not None:
        mpi_op = {ReduceOp.SUM: _world._MPI.SUM, ReduceOp.MIN: _world._MPI.MIN,
                  ReduceOp.MAX: _world._MPI.MAX}[op]
        _write(tensor, _dist._allreduce(np.ascontiguousarray(data).copy(), what, mpi_op))


def _gather(data: np.ndarray, what: str) -> np.ndarray:
    """Every rank's array, stacked in rank order."""
    mine = np.ascontiguousarray(data)
    rows = np.empty((_dist.world_size(),) + mine.shape, mine.dtype)
    if _world._comm is None:
        rows[0] = mine
    elif mine.size:
        _dist.wait([_world._comm.Iallgather(mine, rows)], what)
    return rows


def broadcast(tensor: Tensor, src: Optional[int] = None, group: Any = None,
              async_op: bool = False, group_src: Optional[int] = None) -> None:
    """Rank src's values into the tensor on every rank, in place (group_src is the same rank:
    the one group is the world)."""
    _collective("broadcast", group, async_op)
    _check_tensor("broadcast", "tensor", tensor)
    if (src is None) == (group_src is None):
        raise ValueError("broadcast: give exactly one of src and group_src")
    src = group_src if src is None else src
    if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < _dist.world_size():
        raise ValueError(f"broadcast: src must be a rank in [0, {_dist.world_size()}), "
                         f"got {src!r}")
    values = np.ascontiguousarray(tensor._data).copy()
    _write(tensor, _dist.broadcast_buffer(values, "in broadcast", src))


def all_gather(tensor_list: list, tensor: Tensor, group: Any = None,
               async_op: bool = False) -> None:
    """tensor_list[r] receives rank r's tensor (every rank's of the same shape and dtype)."""
    _collective("all_gather", group, async_op)
    _check_tensor("all_gather", "tensor", tensor)
    world = _dist.world_size()
    if not isinstance(tensor_list, list) or len(tensor_list) != world:
        raise ValueError(f"all_gather: tensor_list must be a list of {world} tensors, got "
                         f"{tensor_list!r}")
    for r, out in enumerate(tensor_list):
        _check_tensor("all_gather", f"tensor_list[{r}]", out)
        if out.shape != tensor.shape or out._data.dtype != tensor._data.dtype:
            raise ValueError(f"all_gather: tensor_list[{r}] has shape {tuple(out.shape)} and "
                             f"dtype {out._data.dtype}, the tensor {tuple(tensor.shape)} and "
                             f"{tensor._data.dtype}")
    for out, row in zip(tensor_list, _gather(tensor._data, "in all_gather")):
        _write(out, row)
