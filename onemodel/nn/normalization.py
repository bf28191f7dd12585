"""LayerNorm, GroupNorm, InstanceNorm1d/2d and RMSNorm with PyTorch's arguments and state
(weight ones, bias zeros)."""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence, Union

import numpy as np

from .. import functional as F
from ..functional.normalization import group_norm, instance_norm, rms_norm
from ..random import Generator
from ..tensor import Tensor
from .conv import _BatchNorm
from .module import Module, Parameter, _positive, check_factory_kwargs


class LayerNorm(Module):
    """Normalises over the trailing `normalized_shape`; weight ones, bias zeros (no bias with
    bias=False).

    It draws nothing; `generator` and `seed` are accepted so a container can pass the same
    arguments to every child.
    """

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) \
            else tuple(normalized_shape)
        self.normalized_shape = tuple(_positive(s, "normalized_shape", "LayerNorm")
                                      for s in shape)
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, np.float32))
        else:
            self.register_parameter("weight", None)
        if self.elementwise_affine and bias:
            self.bias = Parameter(np.zeros(self.normalized_shape, np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalises (N, C, *) input over groups of C / num_groups channels (functional.group_norm).

    It draws nothing; `generator` and `seed` are accepted so a container can pass the same
    arguments to every child.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None, *, bias: bool = True,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
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


class _InstanceNorm(_BatchNorm):
    """Instance norm (functional.instance_norm) with batch norm's state, as PyTorch's share
    _NormBase: weight and bias with affine, running statistics with track_running_stats (used
    in evaluation, updated in training). The first of `_ranks` is the unbatched input's."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = False, track_running_stats: bool = False,
                 device: Any = None, dtype: Any = None, *, bias: bool = True,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, bias=bias,
                         generator=generator, seed=seed)
        check_factory_kwargs(device, dtype, type(self).__name__)

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        if input.ndim not in self._ranks:
            raise ValueError(f"{name}: expected a {' or '.join(map(str, self._ranks))}-D "
                             f"input, got shape {input.shape}")
        unbatched = input.ndim == self._ranks[0]
        channels = input.shape[0 if unbatched else 1]
        if channels != self.num_features:
            message = (f"{name}: input of shape {input.shape} has {channels} channels, "
                       f"num_features is {self.num_features}")
            if self.affine:
                raise ValueError(message)
            # As PyTorch: without affine (and running statistics) num_features is unused.
            warnings.warn(message + " (unused: affine=False)", stacklevel=2)
        x = F.unsqueeze(input, 0) if unbatched else input
        y = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          self.training or not self.track_running_stats, self.momentum or 0.0,
                          self.eps)
        return F.squeeze(y, 0) if unbatched else y

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) or unbatched (C, L) input."""

    _ranks = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) or unbatched (C, H, W) input."""

    _ranks = (3, 4)


class RMSNorm(Module):
    """x / √(mean(x²) + eps) · weight over the trailing `normalized_shape`
    (functional.rms_norm); eps None is float32's machine epsilon, as PyTorch."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: Optional[float] = None,
                 elementwise_affine: bool = True,
                 device: Any = None, dtype: Any = None, *, generator: Optional[Generator] = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
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
