"""Dropout, Dropout1d, Dropout2d and Dropout3d: the functional dropouts under a counter of the
masks drawn, saved with the state, so that a resumed run continues the stream of masks.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import functional as F
from .. import random
from ..functional.dropout import dropout
from ..tensor import Tensor
from .module import Module


class Dropout(Module):
    """Zeroes elements with probability p by a counter-based mask.

    The buffer `draws` (int64, rank 0) counts the masks drawn; it is saved with the state, so a
    resumed run continues the stream. Evaluation mode, or p = 0, returns the input itself.
    Without `seed`, the seed is the default generator's next output, taken at construction.
    """

    _function = staticmethod(dropout)  # Dropout1d and Dropout2d drop whole channels

    def __init__(self, p: float = 0.5, seed: Optional[int] = None) -> None:
        super().__init__()
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability p must be in [0, 1], got {p}")
        if seed is not None and (isinstance(seed, bool)
                                 or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"{type(self).__name__}: seed must be an integer, got "
                            f"{type(seed).__name__}")
        self.p = float(p)
        self.seed = random.default_generator.next_u64() if seed is None else int(seed)
        self.register_buffer("draws", Tensor._wrap(np.zeros((), np.int64)))

    def forward(self, input: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return input
        counter = self.draws
        draw = int(counter._data)
        out = self._function(input, self.p, True, seed=self.seed, draw=draw)
        counter._data[...] = draw + 1
        counter._version += 1
        return out

    def extra_repr(self) -> str:
        return f"p={self.p}, seed={self.seed}"


class Dropout1d(Dropout):
    """Zeroes whole channels of (N, C, L) or (C, L) input (functional.dropout1d)."""

    _function = staticmethod(F.dropout1d)


class Dropout2d(Dropout):
    """Zeroes whole channels of (N, C, H, W) input (functional.dropout2d)."""

    _function = staticmethod(F.dropout2d)


class Dropout3d(Dropout):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) input (functional.dropout3d)."""

    _function = staticmethod(F.dropout3d)
