"""torch.cuda.amp as torch 2.13 has it on a machine without CUDA: deprecated (a FutureWarning
naming torch.amp's spelling) and disabled with torch's UserWarning, so a script written for a
GPU runs in float32 here; onemodel's own mixed precision is onemodel.amp (autocast("bf16"))."""
from __future__ import annotations

import warnings
from typing import Any, Callable

from .. import amp as _amp


def _deprecated(name: str) -> None:
    warnings.warn(f"`torch.cuda.amp.{name}(args...)` is deprecated. Please use "
                  f"`torch.amp.{name}('cuda', args...)` instead.", FutureWarning, stacklevel=3)


def GradScaler(init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
               backoff_factor: float = 0.5, growth_interval: int = 2000,
               enabled: bool = True) -> _amp.GradScaler:
    """amp.GradScaler('cuda', ...): disabled, with torch's warnings (scale() returns the loss,
    step() calls optimizer.step(), get_scale() is 1.0)."""
    _deprecated("GradScaler")
    return _amp.GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                           enabled)


class autocast:
    """A block (or a decorated function) that runs as written: CUDA's autocast disables
    itself without CUDA, with torch's warnings."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True
                 ) -> None:
        _deprecated("autocast")
        if enabled:
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          UserWarning, stacklevel=2)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, fn: Callable) -> Callable:
        return fn
