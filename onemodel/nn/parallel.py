"""torch.nn.parallel.DistributedDataParallel over onemodel's MPI world.

At construction rank 0's parameters and buffers are broadcast (init_sync) and every rank checks
by a hash that its replica is rank 0's. After a backward of an output computed outside
no_sync(), every parameter's .grad is the mean over the ranks of what each rank accumulated
since the last synchronised backward, as torch's, but summed exactly (process_group.exact_mean):
each backward's gradient of each rank is one term of an exact integer sum, divided by the
world size and rounded once. So a step whose M micro-batches are spread over the W ranks (rank r
taking micro-batches r, r + W, ..., each loss divided by M / W, a power of two) gives .grad the
same bits for every such W; the local float sum torch keeps under no_sync() is in .grad too,
for reading. The terms of a window are kept until it synchronises (one gradient's memory per
backward). In one process without init_process_group the wrapper does the same with W = 1.
Buffers keep torch's rule: rank 0's are broadcast before each synchronised forward
(broadcast_buffers), so batch-norm statistics are rank 0's micro-batches'; the Trainer's
statistics do not depend on W (nn.running_stats).
"""
from __future__ import annotations

import contextlib
import hashlib
import weakref
from typing import Any, Callable, Iterator, Optional

import numpy as np

from .. import autograd
from .. import distributed as _dist
from .. import process_group as _pg
from ..tensor import Tensor
from .module import Module


class DistributedDataParallel(Module):
    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: Any = None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None,
                 skip_all_reduce_unused_params: bool = False, bucket_cap_mb_list: Any = None,
                 batched_grad_copy: bool = False, forward_sync_buffers: Any = None) -> None:
        """torch's arguments; the bucketing ones have nothing to act on (the sum is exact
        whatever the buckets)."""
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got "
                            f"{type(module).__name__}")
        for name, ids in (("device_ids", device_ids), ("output_device", output_device)):
            if ids not in (None, [], "cpu") and ids != ["cpu"]:
                raise ValueError(f"DistributedDataParallel: {name}={ids!r}: onemodel runs on "
                                 "the CPU only (leave it None)")
        _check_world(process_group)
        self.module = module
        self.device_ids, self.output_device, self.dim = None, None, dim
        self.find_unused_parameters = find_unused_parameters
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        params = [p for p in module.parameters() if p.requires_grad]
        if init_sync:
            _dist.broadcast_arrays([t._data for t in self._replica()],
                                   "broadcasting rank 0's parameters and buffers")
        self._check_replicas()
        # The window's terms per parameter, and the synchronising backward's progress.
        self._terms: list[list[np.ndarray]] = [[] for _ in params]
        self._armed = False
        self._expected: set[int] = set()
        self._done: set[int] = set()
        ref = weakref.ref(self)
        for k, p in enumerate(params):
            p.register_hook(_calling(ref, DistributedDataParallel._take, k))
            p.register_post_accumulate_grad_hook(_calling(ref, DistributedDataParallel._complete,
                                                          k))
        self._params = params  # a plain list: not registered again

    def _replica(self) -> list[Tensor]:
        return list(self.module.parameters()) + list(self.module.buffers())

    def _check_replicas(self) -> None:
        sha = hashlib.sha256()
        for t in self._replica():
            sha.update(np.ascontiguousarray(t._data).tobytes())
        mine = sha.digest()
        if _dist.broadcast_bytes(mine, "comparing the replicas") != mine:
            raise RuntimeError(f"DistributedDataParallel: rank {_dist.rank()}'s parameters and "
                               "buffers differ from rank 0's after the broadcast (init_sync="
                               "False with replicas that differ?)")

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards of forwards run inside accumulate locally, without synchronising."""
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module's forward; its backward synchronises the gradients unless run inside
        no_sync() (rank 0's buffers are broadcast first when broadcast_buffers)."""
        if self._armed and self._done and self._expected - self._done:
            missing = sorted(self._expected - self._done)
            raise RuntimeError(
                "DistributedDataParallel: Expected to have finished reduction in the prior "
                "iteration before starting a new one: parameters with indices "
                f"{missing} received no gradient in the last backward; pass "
                "find_unused_parameters=True when some parameters do not take part in the loss")
        if self.broadcast_buffers and self.require_backward_grad_sync:
            _dist.broadcast_arrays([b._data for b in self.module.buffers()],
                                   "broadcasting rank 0's buffers")
        out = self.module(*args, **kwargs)
        self._armed = autograd.is_grad_enabled() and self.require_backward_grad_sync
        self._done = set()
        self._expected = set(range(len(self._params)))
        if self._armed and self.find_unused_parameters:
            reached: set[int] = set()
            for t in _tensors(out):
                if t._node is not None:
                    reached.update(autograd._leaf_feeds(t))
            self._expected = {k for k, p in enumerate(self._params) if id(p) in reached}
        return out

    def _take(self, k: int, grad: Tensor) -> None:
        """Parameter k's gradient of this backward, before it is added into .grad: a term
        (autograd.grad's gradients go to the caller, not into .grad: not one)."""
        if autograd._pass.capturing:
            return
        p, terms = self._params[k], self._terms[k]
        if p.grad is None:
            terms.clear()  # zeroed since (set to None): the window starts again
        elif not terms:  # a gradient from before the window takes part, as in torch's sum
            terms.append(np.array(p.grad._data, np.float32))
        terms.append(grad._data)

    def _complete(self, k: int, _: Tensor) -> None:
        if not self._armed:
            return
        self._done.add(k)
        if self._done >= self._expected:
            self._armed = False
            self._synchronise()

    def _synchronise(self) -> None:
        sizes = [p._data.size for p in self._params]
        means = _pg.exact_mean(self._terms, sizes, _dist.world_size(),
                               "reducing the gradients in DistributedDataParallel")
        for p, terms, mean in zip(self._params, self._terms, means):
            terms.clear()
            p.grad = None if mean is None else Tensor._wrap(mean.reshape(p.shape))


def _calling(ref: "weakref.ref[DistributedDataParallel]",
             method: Callable[[DistributedDataParallel, int, Tensor], None], k: int
             ) -> Callable[[Tensor], None]:
    """Parameter k's hook, holding the wrapper weakly (the parameters may outlive it)."""
    def hook(grad_or_param: Tensor) -> None:
        ddp = ref()
        if ddp is not None:
            method(ddp, k, grad_or_param)
    return hook


def _tensors(out: Any) -> Iterator[Tensor]:
    """The tensors in a forward's output (nested tuples, lists and dicts)."""
    if isinstance(out, Tensor):
        yield out
    elif isinstance(out, (tuple, list)):
        for item in out:
            yield from _tensors(item)
    elif isinstance(out, dict):
        for item in out.values():
            yield from _tensors(item)


def _check_world(group: Optional[Any]) -> None:
    if group is not None:
        raise NotImplementedError("DistributedDataParallel: only the default process group "
                                  "(process_group=None)")
    if _pg.launched_world_size() > 1 and not _pg.is_initialized():
        raise ValueError("DistributedDataParallel: " + _pg.NOT_INITIALIZED)
