"""torch.nn.utils's gradient clipping under its PyTorch names (onemodel.optim.clip)."""
from ..optim.clip import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
