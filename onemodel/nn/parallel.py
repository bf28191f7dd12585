"""torch.nn.parallel.DistributedDataParallel for a world of one process: the module wrapped
(`.module`, forward passed through, state_dict under "module."), as torch's DDP computes with
one rank, where the gradient average is the gradient itself. With more processes it is
refused: onemodel's data parallelism is the Trainer's exact gradient sum."""
from __future__ import annotations

from typing import Any

from .. import distributed  # noqa: F401  (first: it loads process_group when complete)
from .. import process_group as _pg
from .module import Module


class DistributedDataParallel(Module):
    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: Any = None, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: Any = None,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None,
                 skip_all_reduce_unused_params: bool = False, bucket_cap_mb_list: Any = None,
                 batched_grad_copy: bool = False, forward_sync_buffers: Any = None) -> None:
        """torch's arguments; with one process the bucketing and syncing ones have nothing to
        act on."""
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

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)


def _check_world(group: Any) -> None:
    if group is not None:
        raise NotImplementedError("DistributedDataParallel: only the default process group "
                                  "(process_group=None)")
    size = _pg.launched_world_size()
    if size > 1 and not _pg.is_initialized():
        raise ValueError("DistributedDataParallel: " + _pg.NOT_INITIALIZED)
    if size > 1:
        raise NotImplementedError(
            f"DistributedDataParallel: {size} processes: synchronising gradients across "
            "processes is not available yet; train with onemodel.train.Trainer, whose "
            "gradient sum over the ranks is exact")
