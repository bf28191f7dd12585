"""torch.nn's reflection, replication and circular padding layers over functional.pad (whose
gradients add each padded position's gradient back to the element it copies)."""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np

from ..functional import pad
from ..tensor import Tensor
from .module import Module


class _PadNd(Module):
    """F.pad with `_mode`; padding is an int for every side or (left, right, top, bottom)."""

    _sides = 0
    _mode = ""

    def __init__(self, padding: Union[int, Sequence[int]]) -> None:
        super().__init__()
        sides = (int(padding),) * self._sides if isinstance(padding, (int, np.integer)) \
            else tuple(padding)
        if len(sides) != self._sides:
            raise ValueError(f"{type(self).__name__}: padding must be an int or {self._sides} "
                             f"ints, got {padding!r}")
        self.padding = sides

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    _sides, _mode = 2, "reflect"


class ReflectionPad2d(_PadNd):
    _sides, _mode = 4, "reflect"


class ReplicationPad1d(_PadNd):
    _sides, _mode = 2, "replicate"


class ReplicationPad2d(_PadNd):
    _sides, _mode = 4, "replicate"


class CircularPad1d(_PadNd):
    _sides, _mode = 2, "circular"


class CircularPad2d(_PadNd):
    _sides, _mode = 4, "circular"
