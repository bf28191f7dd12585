"""GroupNorm and RMSNorm with PyTorch's arguments and state (weight ones, bias zeros)."""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np

from ..functional.normalization import group_norm, rms_norm
from ..random import Generator
from ..tensor import Tensor
from .layers import _positive
from .module import Module, Parameter


class GroupNorm(Module):
    """Normalises (N, C, *) input over groups of C / num_groups channels (functional.group_norm).

    It draws nothing; `generator` and `seed` are accepted so a container can pass the same
    arguments to every child.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, *, bias: bool = True,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        self.num_groups = _positive(num_groups, "num_groups", "GroupNorm")
        self.num_channels = _positive(num_channels, "num_channels", "GroupNorm")
        if self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by "
                             f"num_groups {num_groups}")
        self.eps = float(eps)
        self.affine = bool(affine)
        if self.affine:
            self.weight = Parameter(np.ones(self.num_channels, np.float32))
        else:
            self.register_parameter("weight", None)
        # bias=False keeps the affine scale alone, as PyTorch's keyword of that name.
        if self.affine and bias:
            self.bias = Parameter(np.zeros(self.num_channels, np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """x / √(mean(x²) + eps) · weight over the trailing `normalized_shape`
    (functional.rms_norm); eps None is float32's machine epsilon, as PyTorch."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: Optional[float] = None,
                 elementwise_affine: bool = True, *, generator: Optional[Generator] = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) \
            else tuple(normalized_shape)
        self.normalized_shape = tuple(_positive(s, "normalized_shape", "RMSNorm") for s in shape)
        self.eps = None if eps is None else float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, np.float32))
        else:
            self.register_parameter("weight", None)

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")
