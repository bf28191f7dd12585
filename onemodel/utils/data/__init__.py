"""torch.utils.data with torch's module layout: dataset, sampler, distributed, dataloader and
_utils. `onemodel.data` is this package too."""
from . import _utils
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import (
                      ChainDataset,
                      ConcatDataset,
                      Dataset,
                      IterableDataset,
                      StackDataset,
                      Subset,
                      TensorDataset,
                      random_split,
)
from .distributed import DistributedSampler
from .sampler import (
                      BatchSampler,
                      RandomSampler,
                      Sampler,
                      SequentialSampler,
                      SubsetRandomSampler,
                      WeightedRandomSampler,
                                        epoch_order,
)

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info",
           "ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "StackDataset",
           "Subset", "TensorDataset", "random_split", "DistributedSampler", "BatchSampler",
           "RandomSampler", "Sampler", "SequentialSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "epoch_order", "_utils"]
