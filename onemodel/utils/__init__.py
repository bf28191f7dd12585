"""torch.utils's path for ported imports: `from onemodel.utils.data import DataLoader,
TensorDataset, Dataset` is onemodel.data."""
import sys

from .. import data
from . import checkpoint  # noqa: F401  (onemodel.utils.checkpoint)

sys.modules[__name__ + ".data"] = data

__all__ = ["data"]
