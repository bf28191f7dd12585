"""Mixed precision: autocast for matrix products, the dynamic loss scaler.

autocast("bf16" | "fp16") runs the matrix products and convolutions inside it with bfloat16 or
float16 operands (its state and the products' rules: onemodel/_autocast.py, below functional).

GradScaler follows torch.amp.GradScaler's rules: scale(loss) multiplies by S; unscale_(opt)
multiplies every gradient by float32(1/S) (exact: S is a power of two unless the factors say
otherwise) and notes whether any is inf or NaN; step(opt) skips opt.step() then, so neither the
parameters nor the step count (hence the schedule) advance; update() multiplies S by
backoff_factor after a skipped step and by growth_factor after growth_interval clean steps in a
row. state_dict() holds S as its float32 bit pattern and the clean-step counter: integers, for a
checkpoint's extra.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping

import numpy as np

from ._autocast import autocast, dtype_name, half_code, operand_dtype
from .tensor import Tensor

__all__ = ["GradScaler", "autocast", "dtype_name", "half_code", "operand_dtype"]


def _positive(owner: str, name: str, value: Any, low: float, low_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
            or not math.isfinite(value) or (value <= low if low_open else value < low):
        raise ValueError(f"{owner}: {name} must be finite and {'>' if low_open else '>='} "
                         f"{low:g}, got {value!r}")
    return float(value)


class GradScaler:
    """Dynamic loss scaling (see the module notes); with enabled=False every method passes
    through (scale returns the loss, step calls opt.step()). device is torch's first argument:
    "cpu" (onemodel's default: its autocast runs here; torch's default is "cuda") scales;
    "cuda" disables the scaler with torch's warning, as torch's does without CUDA."""

    def __init__(self, device: str = "cpu", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        owner = "GradScaler"
        if not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"{owner}: device must be 'cpu' or 'cuda', got {device!r}")
        self._scale = np.float32(_positive(owner, "init_scale", init_scale, 0.0))
        self.growth_factor = _positive(owner, "growth_factor", growth_factor, 1.0)
        self.backoff_factor = _positive(owner, "backoff_factor", backoff_factor, 0.0)
        if self.backoff_factor >= 1.0:
            raise ValueError(f"{owner}: backoff_factor must be < 1, got {backoff_factor!r}")
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) \
                or growth_interval < 1:
            raise ValueError(f"{owner}: growth_interval must be an integer >= 1, "
                             f"got {growth_interval!r}")
        self.growth_interval = growth_interval
        if enabled and device.startswith("cuda"):
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", UserWarning, stacklevel=2)
            enabled = False
        self.enabled = bool(enabled)
        self._growth_tracker = 0
        self._found_inf: dict[int, bool] = {}  # per optimizer, since the last update()

    def get_scale(self) -> float:
        return float(self._scale) if self.enabled else 1.0

    def is_enabled(self) -> bool:
        return self.enabled

    def scale(self, loss: Tensor) -> Tensor:
        return loss * self._scale if self.enabled else loss

    def unscale_(self, optimizer: Any) -> None:
        """Divides the gradients of optimizer.params by S (once per step, before clipping)."""
        if not self.enabled:
            return
        if id(optimizer) in self._found_inf:
            raise RuntimeError("GradScaler.unscale_: already called on this optimizer since "
                               "the last update()")
        inverse = np.float32(1.0 / float(self._scale))
        found_inf = False
        for p in optimizer.params:
            if p.grad is None:
                continue
            g = p.grad._data
            if g.flags.writeable:  # in place, as torch's: no second copy of the gradients
                np.multiply(g, inverse, out=g)
                p.grad._version += 1
            else:  # a read-only gradient (a broadcast view) is replaced
                g = g * inverse
                p.grad = Tensor._wrap(g)
            # min and max are NaN if any element is, and hold any infinity: two passes and
            # no temporary, where isfinite(g).all() would allocate a mask of g's size.
            found_inf = found_inf or (g.size > 0 and not (math.isfinite(g.min())
                                                          and math.isfinite(g.max())))
        self._found_inf[id(optimizer)] = found_inf

    def step(self, optimizer: Any) -> bool:
        """optimizer.step() unless a gradient is inf or NaN; returns whether it stepped."""
        if not self.enabled:
            optimizer.step()
            return True
        if id(optimizer) not in self._found_inf:
            self.unscale_(optimizer)
        if self._found_inf[id(optimizer)]:
            return False
        optimizer.step()
        return True

    def update(self) -> None:
        """Backs off after an overflow, grows after growth_interval clean steps."""
        if not self.enabled:
            return
        if not self._found_inf:
            raise RuntimeError("GradScaler.update: no unscale_() or step() since the last "
                               "update()")
        if any(self._found_inf.values()):
            self._scale = np.float32(self._scale * np.float32(self.backoff_factor))
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self.growth_interval:
                grown = np.float32(self._scale * np.float32(self.growth_factor))
                if math.isfinite(grown):  # as torch: a scale never grows to inf
                    self._scale = grown
                self._growth_tracker = 0
        self._found_inf.clear()

    def state_dict(self) -> dict[str, int]:
        """{"scale_bits": float32 bit pattern of S, "growth_tracker": clean steps}."""
        return {"scale_bits": int(self._scale.view(np.uint32)),
                "growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        def integer(name: str, high: int) -> int:
            value = state.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or not 0 <= value < high:
                raise ValueError(f"GradScaler.load_state_dict: {name} = {value!r} is not an "
                                 f"integer in [0, {high})")
            return int(value)

        bits = integer("scale_bits", 1 << 32)
        tracker = integer("growth_tracker", self.growth_interval)
        scale = np.uint32(bits).view(np.float32)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"GradScaler.load_state_dict: scale {float(scale)!r} is not "
                             "finite and > 0")
        self._scale, self._growth_tracker = scale, int(tracker)
        self._found_inf.clear()
