"""torch.version's names, for programs that print or check them."""
from typing import Optional

__version__ = "0.1.0"
git_version = "Unknown"  # torch's value when the build does not know its commit
debug = False
cuda: Optional[str] = None  # CPU only: no CUDA, ROCm (hip) or XPU build
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
