"""TernaryLinear and TernaryConv2d: the SR4 layers.

    Z = scale ⊙ (x · Wᵀ) + bias,   W (out_features, in_features) in {-1, 0, +1}

and the same for a convolution, with one scale and bias per output channel.

W is the materialisation of a packed 4-bit state q that the SR4 optimizer owns and updates; the
layer holds it as `weight`, a TernaryWeight. The weight is deliberately not a module parameter:
its training state is SR4's (`q.<i>` in the optimizer's state, 4 bits per weight), so
`model.parameters()` lists the float32 scales and biases (trained by SGD at their own rates)
and `ternary_weights(model)` lists the weights to hand to SR4. A checkpoint of the model with
its SR4 optimizer therefore stores each weight once, as 4 bits.

The ops (TernaryWeight, ternary_matmul, ternary_conv2d): onemodel/functional/ternary.py.
"""
from __future__ import annotations

import numpy as np

from .. import functional as F
from ..functional import conv as _fconv
from ..functional.ternary import TernaryWeight, ternary_conv2d, ternary_matmul
from ..tensor import Tensor
from .init import fan_in_bound
from .layers import _positive
from .module import Module, Parameter


class TernaryLinear(Module):
    """Z = scale ⊙ (x · Wᵀ) + bias with ternary W; scale starts at 1/√in_features, bias at 0.

    Until an SR4 optimizer takes `weight`, every weight is 0.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features = _positive(in_features, "in_features", "TernaryLinear")
        self.out_features = _positive(out_features, "out_features", "TernaryLinear")
        # A plain attribute, not a registered parameter (see the module note).
        self.weight = TernaryWeight.zeros((self.out_features, self.in_features))
        self.scale = Parameter(np.full(self.out_features, fan_in_bound(self.in_features),
                                       np.float32))
        if bias:
            self.bias = Parameter(np.zeros(self.out_features, np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        z = F.mul(ternary_matmul(x, self.weight), self.scale)
        return z if self.bias is None else F.add(z, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class TernaryConv2d(Module):
    """Z = scale ⊙ conv2d(x, W) + bias per output channel, W (out, in, kh, kw) ternary; groups
    1, zero padding. scale starts at 1/√(in·kh·kw), bias at 0; every weight is 0 until an SR4
    optimizer takes `weight` (see TernaryLinear)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, bias: bool = True) -> None:
        super().__init__()
        layer = "TernaryConv2d"
        self.in_channels = _positive(in_channels, "in_channels", layer)
        self.out_channels = _positive(out_channels, "out_channels", layer)
        self.kernel_size = _fconv._pair(kernel_size, "kernel_size", layer, 1)
        self.stride = _fconv._pair(stride, "stride", layer, 1)
        self.padding = _fconv._pair(padding, "padding", layer, 0)
        self.dilation = _fconv._pair(dilation, "dilation", layer, 1)
        self.weight = TernaryWeight.zeros((self.out_channels, self.in_channels)
                                          + self.kernel_size)
        fan_in = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        self.scale = Parameter(np.full(self.out_channels, fan_in_bound(fan_in), np.float32))
        if bias:
            self.bias = Parameter(np.zeros(self.out_channels, np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        z = ternary_conv2d(x, self.weight, self.stride, self.padding, self.dilation)
        z = F.mul(z, self.scale.reshape(-1, 1, 1))
        return z if self.bias is None else F.add(z, self.bias.reshape(-1, 1, 1))

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"bias={self.bias is not None}")


def ternary_weights(module: Module) -> list[TernaryWeight]:
    """The TernaryWeight of every ternary layer in `module`, in module order (for SR4)."""
    return [m.weight for m in module.modules() if isinstance(m, (TernaryLinear, TernaryConv2d))]
