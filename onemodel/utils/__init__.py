"""torch.utils's path for ported imports: onemodel.utils.data is torch.utils.data's
counterpart (onemodel.data is the same package)."""
from . import data

__all__ = ["data"]
