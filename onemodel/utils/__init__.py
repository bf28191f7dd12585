"""torch.utils's path for ported imports: onemodel.utils.data is torch.utils.data's
counterpart (onemodel.data is the same package); onemodel.utils.checkpoint is activation
checkpointing."""
from . import checkpoint, data

__all__ = ["checkpoint", "data"]
