"""Autocast's state and rules, below functional: onemodel.amp re-exports
`autocast` beside GradScaler.

autocast("bf16" | "fp16") makes matmul, linear (onemodel/functional/linalg.py) and the
convolutions (functional/conv.py), which read `half_code()`, run with both operands rounded to
bfloat16 or float16, round-to-nearest-even, by the kernel's packing step (no pass of its own
over the data), and a float32-accumulating product; the output stays float32. The product of two
such operands is exact in float32, so the result is the float32 product of the rounded operands
(bfloat16 products and convolutions follow the dot-product instruction's rule: csrc/gemm.c).
In backward the incoming gradient is rounded the same way, so gradients flow in low precision
into float32 buffers (that is what makes float16 gradients underflow, and loss scaling useful).
What a product keeps for its backward is, for an intermediate operand, the 2-byte copy its
forward packing wrote (uint16 storage, widened by the backward's packing); the graph never holds
an input's values, so the float32 tensor can then be freed; a leaf (a parameter, an input) is
alive anyway and is rounded again, to the same bits. Batch norm (functional/conv.py) reads its
input rounded to 2 bytes, as torch's reads a convolution's bfloat16 output, and keeps the
2-byte copy for its backward; its arithmetic is float32's. Everything else (reductions, other
norms, softmax, losses), master weights, gradients and optimizer state stay float32.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator, Optional

import numpy as np

from . import _kernel_choice
from .tensor import ReducedFloat, Tensor

_DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16"}
# The kernels' code for the operand type (_gemm.gemm's half).
_HALF_CODES = {None: 0, "bf16": 1, "fp16": 2}


class _AutocastState(threading.local):
    dtype: Optional[str] = None  # a class default: reading it never raises

    def __init__(self) -> None:
        # id(tensor) -> (weakref to it, its version, half code, the 2-byte copy of its values a
        # product's packing wrote): the next product of the same values (q, k and v of one
        # input) keeps that copy for its backward instead of a copy of its own. An entry goes
        # with its tensor, and all of them when the outermost autocast ends.
        self.copies: dict[int, tuple] = {}


_state = _AutocastState()


def operand_dtype() -> Optional[str]:
    """"bf16", "fp16" inside autocast (in this thread), else None."""
    return _state.dtype


def half_code() -> int:
    """The kernels' operand type in force: 0 (float32), 1 (bfloat16) or 2 (float16)."""
    return _HALF_CODES[_state.dtype]


def dtype_name(dtype: Any) -> str:
    """"bf16" or "fp16" for any accepted spelling (onemodel.bfloat16 and onemodel.float16
    too); TypeError or ValueError otherwise."""
    if isinstance(dtype, (np.dtype, ReducedFloat)):
        dtype = dtype.name
    if not isinstance(dtype, str):
        raise TypeError(f"autocast: dtype must be the string 'bf16' or 'fp16', got "
                        f"{type(dtype).__name__} {dtype!r}")
    if dtype == "cpu":
        raise ValueError("autocast: 'cpu' is a device, and the first argument is the dtype: "
                         "autocast('bf16'), or torch's autocast(device_type='cpu', dtype=...)")
    if dtype not in _DTYPES:
        raise ValueError(f"autocast: dtype must be 'bf16' or 'fp16', got {dtype!r}")
    return _DTYPES[dtype]


@contextlib.contextmanager
def autocast(dtype: Any = "bf16", enabled: bool = True, *,
             device_type: Optional[str] = None) -> Iterator[None]:
    """Runs matrix products with `dtype` operands inside the block (nesting restores).
    device_type is torch's first argument, taken by keyword: the CPU, the one there is."""
    if device_type is not None and device_type != "cpu":
        raise ValueError(f"autocast: onemodel runs on the CPU only, got device_type "
                         f"{device_type!r}")
    name = dtype_name(dtype)
    if name == "bf16" and enabled:
        _kernel_choice.choose_bf16_dot()  # once per process: the faster of two same-bit kernels
    previous = operand_dtype()
    _state.dtype = name if enabled else None
    try:
        yield
    finally:
        _state.dtype = previous
        if previous is None:
            _state.copies.clear()


class Operands:
    """The operands of one product (matmul, linear, a convolution, batch norm) under the autocast
    in force: for each, what its backward keeps and the uint16 array the kernel's packing fills
    with its rounded bits (or None); then which inputs an in-place write must leave alone. An op
    reads: keep() per operand, the kernel given `saves`, packed(), _core.record(...,
    protected(inputs)). The backward closures read the keeps, never this object: it holds the
    input tensors, and a tensor whose values went into a 2-byte copy must be free to go."""

    __slots__ = ("half", "saves", "_copied", "_operands")

    def __init__(self, half: int) -> None:
        self.half = half  # the op reads half_code() once: its backward rounds as its forward did
        self.saves: list[Optional[np.ndarray]] = []
        self._copied: set[int] = set()  # the operands kept as a 2-byte copy, by position
        self._operands: list[tuple[Tensor, np.ndarray]] = []

    def keep(self, t: Tensor, data: np.ndarray, needed: bool) -> Optional[np.ndarray]:
        """What the backward reads for the next operand t, whose values the kernel reads as
        `data`: nothing when no gradient needs it; the float32 data outside autocast and for a
        leaf (alive anyway); else a 2-byte copy: the one an earlier product's packing wrote of
        the same values, or a new one the kernel fills (appended to saves)."""
        keep: Optional[np.ndarray] = None
        save: Optional[np.ndarray] = None
        if needed and self.half and t._node is not None:
            entry = _state.copies.get(id(t))
            if (entry is not None and entry[0]() is t and entry[1:3] == (t._version, self.half)
                    and _whole(t, data)):
                keep = entry[3].reshape(data.shape)
            else:
                keep = save = np.empty(data.shape, np.uint16)
            self._copied.add(len(self.saves))
        elif needed:
            keep = data
        self._operands.append((t, data))
        self.saves.append(save)
        return keep

    def packed(self, out: np.ndarray) -> None:
        """After the kernel wrote `out`: offers each 2-byte copy its packing filled to the next
        product of the same values while the tensor lives at the same version (q, k and v of
        one input keep one copy). An empty output packed nothing."""
        if out.size:
            for (t, data), save in zip(self._operands, self.saves):
                if save is not None and _whole(t, data):
                    _offer(t, save, self.half)

    def protected(self, inputs: tuple) -> tuple:
        """The tensors of `inputs` (the operands first, in keep()'s order, then any other the
        backward reads) whose values the backward reads from the tensor itself, not from a
        2-byte copy: those an in-place write must not change."""
        copied = self._copied
        if not copied:
            return inputs
        return tuple(t for i, t in enumerate(inputs) if i not in copied)


def _whole(t: Tensor, data: np.ndarray) -> bool:
    """Whether data holds t's values in their C order (t's own memory, contiguous)."""
    held = t._data
    return (data.flags.c_contiguous and held.flags.c_contiguous and data.size == held.size
            and data.size > 0 and data.ctypes.data == held.ctypes.data)


def _offer(t: Tensor, save: np.ndarray, half: int) -> None:
    """Makes save, the 2-byte copy of t's values, the one the next product of them keeps."""
    key, copies = id(t), _state.copies
    copies[key] = (weakref.ref(t, lambda _: copies.pop(key, None)), t._version, half,
                   save.reshape(-1))
