"""Autocast's state and rules (docs/spec/engine.md 5), below functional: onemodel.amp re-exports
`autocast` beside GradScaler.

autocast("bf16" | "fp16") makes matmul, linear (onemodel/functional/linalg.py) and the
convolutions (functional/conv.py), which read `half_code()`, run with both operands rounded to
bfloat16 or float16, round-to-nearest-even, by the kernel's packing step (no pass of its own
over the data), and a float32-accumulating product; the output stays float32. The product of two
such operands is exact in float32, so the result is the float32 product of the rounded operands.
In backward the incoming gradient is rounded the same way, so gradients flow in low precision
into float32 buffers (that is what makes float16 gradients underflow, and loss scaling useful).
What a product keeps for its backward is, for an intermediate operand, the 2-byte copy its
forward packing wrote (uint16 storage, widened by the backward's packing); the graph never holds
an input's values, so the float32 tensor can then be freed; a leaf (a parameter, an input) is
alive anyway and is rounded again, to the same bits. Everything else (reductions, norms,
softmax, losses), master weights, gradients and optimizer state stay float32.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional

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
