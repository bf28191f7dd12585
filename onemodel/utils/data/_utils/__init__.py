"""torch.utils.data._utils: collate (default_collate, default_convert) and worker
(get_worker_info, the worker processes)."""
from . import collate, worker

__all__ = ["collate", "worker"]
