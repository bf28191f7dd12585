"""Mixed precision: autocast for matrix products, the dynamic loss scaler (docs/spec/engine.md 5).

autocast("bf16" | "fp16") makes matmul and linear (onemodel/functional/linalg.py reads
`half_code()`) run with both operands rounded to bfloat16 or float16, round-to-nearest-even,
by the kernel's packing step (no pass of its own over the data), and a float32-accumulating
product; the output stays float32. The product of two such operands is exact in float32, so
the result is the float32 product of the rounded operands. In backward the incoming gradient
is rounded the same way, so gradients flow in low precision into float32 buffers (that is what
makes float16 gradients underflow, and loss scaling useful). What a product keeps for its
backward is, for an intermediate operand, the 2-byte copy its forward packing wrote (uint16
storage, widened by the backward's packing); the graph never holds an input's values, so the
float32 tensor can then be freed; a leaf (a parameter, an input) is alive anyway and is
rounded again, to the same bits. Everything else (reductions, norms, softmax, losses), master
weights, gradients and optimizer state stay float32.

GradScaler follows torch.amp.GradScaler's rules: scale(loss) multiplies by S; unscale_(opt)
multiplies every gradient by float32(1/S) (exact: S is a power of two unless the factors say
otherwise) and notes whether any is inf or NaN; step(opt) skips opt.step() then, so neither the
parameters nor the step count (hence the schedule) advance; update() multiplies S by
backoff_factor after a skipped step and by growth_factor after growth_interval clean steps in a
row. state_dict() holds S as its float32 bit pattern and the clean-step counter: integers, for a
checkpoint's extra.
"""
from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Iterator, Mapping, Optional

import numpy as np

from .tensor import Tensor

_DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16"}
# The kernels' code for the operand type (_gemm.gemm's half).
_HALF_CODES = {None: 0, "bf16": 1, "fp16": 2}


class _AutocastState(threading.local):
    dtype: Optional[str] = None  # a class default: reading it never raises


_state = _AutocastState()


def operand_dtype() -> Optional[str]:
    """"bf16", "fp16" inside autocast (in this thread), else None."""
    return _state.dtype


def half_code() -> int:
    """The kernels' operand type in force: 0 (float32), 1 (bfloat16) or 2 (float16)."""
    return _HALF_CODES[_state.dtype]


def dtype_name(dtype: str) -> str:
    """"bf16" or "fp16" for any accepted spelling; TypeError or ValueError otherwise."""
    if not isinstance(dtype, str):
        raise TypeError(f"autocast: dtype must be the string 'bf16' or 'fp16', got "
                        f"{type(dtype).__name__} {dtype!r}")
    if dtype not in _DTYPES:
        raise ValueError(f"autocast: dtype must be 'bf16' or 'fp16', got {dtype!r}")
    return _DTYPES[dtype]


@contextlib.contextmanager
def autocast(dtype: str = "bf16", enabled: bool = True) -> Iterator[None]:
    """Runs matrix products with `dtype` operands inside the block (nesting restores)."""
    name = dtype_name(dtype)
    previous = operand_dtype()
    _state.dtype = name if enabled else None
    try:
        yield
    finally:
        _state.dtype = previous


def saved_operand(t: Tensor, data: np.ndarray, half: int,
                  needed: bool) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """(what a product's backward reads for operand t, whose values are `data`; the uint16
    array the forward packing fills with their rounded bits, or None). Nothing when no gradient
    needs it; the float32 data outside autocast and for a leaf; else the 2-byte copy."""
    if not needed:
        return None, None
    if not half or t._node is None:
        return data, None
    copy = np.empty(data.shape, np.uint16)
    return copy, copy


def protected(inputs: tuple, saves: tuple) -> tuple:
    """The inputs of a product whose values its backward reads from the tensor itself (not
    from the 2-byte copy saves[i]): those an in-place write must not change."""
    return tuple(t for i, t in enumerate(inputs) if i >= len(saves) or saves[i] is None)


def _positive(owner: str, name: str, value: Any, low: float, low_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
            or not math.isfinite(value) or (value <= low if low_open else value < low):
        raise ValueError(f"{owner}: {name} must be finite and {'>' if low_open else '>='} "
                         f"{low:g}, got {value!r}")
    return float(value)


class GradScaler:
    """Dynamic loss scaling (see the module notes); with enabled=False every method passes
    through (scale returns the loss, step calls opt.step())."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        owner = "GradScaler"
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
            g = p.grad._data * inverse
            found_inf = found_inf or not bool(np.isfinite(g).all())
            p.grad = Tensor._wrap(g)
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
        bits, tracker = state.get("scale_bits"), state.get("growth_tracker")
        for name, value, high in (("scale_bits", bits, 1 << 32),
                                  ("growth_tracker", tracker, self.growth_interval)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or not 0 <= value < high:
                raise ValueError(f"GradScaler.load_state_dict: {name} = {value!r} is not an "
                                 f"integer in [0, {high})")
        scale = np.uint32(bits).view(np.float32)
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"GradScaler.load_state_dict: scale {float(scale)!r} is not "
                             "finite and > 0")
        self._scale, self._growth_tracker = scale, int(tracker)
        self._found_inf.clear()
