"""torch.utils's path for ported imports: `from onemodel.utils.data import DataLoader,
TensorDataset, Dataset` is onemodel.data."""
import sys

from .. import data

sys.modules[__name__ + ".data"] = data

__all__ = ["data"]
