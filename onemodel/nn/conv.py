"""Convolution, pooling, padding, resizing and batch-norm layers, with PyTorch's arguments and
state names.

Conv2d.weight is (out_channels, in_channels / groups, kh, kw) (Conv1d's (..., k)), drawn with
its bias from Uniform(±1/√fanIn), fanIn = in_channels / groups · kh · kw.
ConvTranspose2d.weight is (in_channels, out_channels / groups, kh,
kw), fanIn = out_channels / groups · kh · kw, as PyTorch's. Batch norm keeps PyTorch's state:
weight, bias, then the buffers running_mean, running_var and num_batches_tracked (int64), so
PyTorch's state_dict loads unchanged.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..functional import conv as C
from ..functional.sampling import MODES as _INTERPOLATE_MODES
from ..functional.sampling import interpolate, pixel_shuffle, pixel_unshuffle
from ..functional.shape import pad
from ..random import Generator
from ..tensor import Tensor
from .init import fan_in_bound, resolve_generator, uniform_parameter
from .module import Module, Parameter, check_factory_kwargs

IntPair = Union[int, Sequence[int]]
_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _positive(value: Any, name: str, layer: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{layer}: {name} must be a positive integer, got {value!r}")
    return int(value)


class _ConvNd(Module):
    """The arguments, weights and repr Conv1d and Conv2d share; _dims is 1 or 2."""

    _dims = 0
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair = 1, padding: Union[IntPair, str] = 0, dilation: IntPair = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        layer, n = type(self).__name__, self._dims
        self.in_channels = _positive(in_channels, "in_channels", layer)
        self.out_channels = _positive(out_channels, "out_channels", layer)
        self.groups = _positive(groups, "groups", layer)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"{layer}: in_channels {self.in_channels} and out_channels "
                             f"{self.out_channels} must be divisible by groups {self.groups}")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{layer}: padding_mode must be one of {', '.join(_PADDING_MODES)}, "
                             f"got {padding_mode!r}")
        self.padding_mode = padding_mode
        self.kernel_size = C._ints(kernel_size, "kernel_size", layer, 1, n)
        self.stride = C._ints(stride, "stride", layer, 1, n)
        self.dilation = C._ints(dilation, "dilation", layer, 1, n)
        self.padding: Union[str, tuple[int, ...]]
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{layer}: padding must be 'same', 'valid' or ints, got "
                                 f"{padding!r}")
            if padding == "same" and self.stride != (1,) * n:
                raise ValueError(f"{layer}: padding='same' needs stride 1, got stride "
                                 f"{self.stride}")
            self.padding = padding
        else:
            self.padding = C._ints(padding, "padding", layer, 0, n)
        g = resolve_generator(generator, seed)
        # PyTorch's fan in: the weight's second dimension times the taps (a transposed one's
        # weight is (in_channels, out_channels / groups, ...)).
        first, second = (self.in_channels, self.out_channels) if self._transposed else \
            (self.out_channels, self.in_channels)
        fan_in = second // self.groups * math.prod(self.kernel_size)
        bound = fan_in_bound(fan_in)
        self.weight = uniform_parameter(
            (first, second // self.groups) + self.kernel_size, bound, g)
        if bias:
            self.bias = uniform_parameter((self.out_channels,), bound, g)
        else:
            self.register_parameter("bias", None)

    def _pad_amounts(self) -> tuple:
        """F.pad's (left, right) pairs, last dim first; 'same' puts the odd one on the right,
        as PyTorch."""
        if self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in totals]
        elif self.padding == "valid":
            pairs = [(0, 0)] * self._dims
        else:
            pairs = [(p, p) for p in self.padding]
        return tuple(a for pair in reversed(pairs) for a in pair)

    def _conv(self, conv: Any, input: Tensor) -> Tensor:
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)
        # Padded by F.pad in the mode, then a convolution without padding, as PyTorch.
        input = pad(input, self._pad_amounts(), self.padding_mode)
        return conv(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    def extra_repr(self) -> str:
        mode = "" if self.padding_mode == "zeros" else f", padding_mode={self.padding_mode!r}"
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"groups={self.groups}, bias={self.bias is not None}{mode}")


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) or (C, L) input; see functional.conv1d."""

    _dims = 1

    def forward(self, input: Tensor) -> Tensor:
        return self._conv(C.conv1d, input)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W) input; see functional.conv2d."""

    _dims = 2

    def forward(self, input: Tensor) -> Tensor:
        return self._conv(C.conv2d, input)


class _ConvTransposeNd(_ConvNd):
    """PyTorch's ConvTranspose1d and 2d: its arguments in its order, padding_mode 'zeros' only,
    its repr; forward's output_size picks the output padding, as PyTorch's."""

    _transposed = True
    _function: Callable[..., Tensor]

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair = 1, padding: IntPair = 0, output_padding: IntPair = 0,
                 groups: int = 1, bias: bool = True, dilation: IntPair = 1,
                 padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None, *, generator: Optional[Generator] = None,
                 seed: Optional[int] = None) -> None:
        layer, n = type(self).__name__, self._dims
        if padding_mode != "zeros":
            raise ValueError(f"{layer}: padding_mode must be 'zeros', the only one PyTorch's "
                             f"transposed convolutions take, got {padding_mode!r}")
        check_factory_kwargs(device, dtype, layer)
        super().__init__(in_channels, out_channels, kernel_size, stride,
                         C._ints(padding, "padding", layer, 0, n), dilation, groups, bias,
                         generator=generator, seed=seed)
        self.output_padding = C._ints(output_padding, "output_padding", layer, 0, n)

    def _output_padding(self, input: Tensor, output_size: Optional[Sequence[int]]) -> tuple:
        """self.output_padding, or the one that gives output_size (spatial sizes, or with the
        batch and channels), within PyTorch's range."""
        if output_size is None:
            return self.output_padding
        layer, n, padding = type(self).__name__, self._dims, self.padding
        sizes = tuple(output_size)[-n:] if len(output_size) == input.ndim else tuple(output_size)
        if len(sizes) != n:
            raise ValueError(f"{layer}: output_size must have {n} or {input.ndim} elements "
                             f"for a {input.ndim}-D input, got {output_size!r}")
        assert not isinstance(padding, str)  # refused by __init__
        low = tuple((i - 1) * s - 2 * p + d * (k - 1) + 1 for i, s, p, d, k in zip(
            input.shape[-n:], self.stride, padding, self.dilation, self.kernel_size))
        high = tuple(a + s - 1 for a, s in zip(low, self.stride))
        if not all(a <= size <= z for a, size, z in zip(low, sizes, high)):
            raise ValueError(f"{layer}: output_size {sizes} must lie between {low} and {high} "
                             f"for an input of shape {input.shape}")
        return tuple(size - a for size, a in zip(sizes, low))

    def forward(self, input: Tensor, output_size: Optional[Sequence[int]] = None) -> Tensor:
        return self._function(input, self.weight, self.bias, self.stride, self.padding,
                              self._output_padding(input, output_size), self.groups,
                              self.dilation)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        for name, default in (("padding", 0), ("dilation", 1), ("output_padding", 0)):
            if getattr(self, name) != (default,) * self._dims:
                text += f", {name}={getattr(self, name)}"
        return text + (f", groups={self.groups}" if self.groups != 1 else "") + \
            ("" if self.bias is not None else ", bias=False")


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over (N, C, L) or (C, L) input; see
    functional.conv_transpose1d."""

    _dims, _function = 1, staticmethod(C.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C, H, W) or (C, H, W) input; see
    functional.conv_transpose2d."""

    _dims, _function = 2, staticmethod(C.conv_transpose2d)


class _BatchNorm(Module):
    """Batch norm over the channel axis 1; the subclasses only check the input rank."""

    _ranks: tuple = ()
    # While running_updates collects a step (onemodel/nn/running_stats.py): the list this
    # micro-batch's statistics go to, in place of the running update.
    _deferred: Optional[list] = None

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        # Nothing is drawn; generator and seed are accepted so containers can pass them on.
        # bias=False keeps the affine scale alone, as PyTorch's keyword of that name.
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        name = type(self).__name__
        self.num_features = _positive(num_features, "num_features", name)
        if eps < 0:
            raise ValueError(f"{name}: eps must be >= 0, got {eps}")
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{name}: momentum must be in [0, 1] or None, got {momentum}")
        self.eps = float(eps)
        self.momentum = None if momentum is None else float(momentum)
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        c = self.num_features
        if self.affine:
            self.weight = Parameter(np.ones(c, np.float32))
        else:
            self.register_parameter("weight", None)
        if self.affine and bias:
            self.bias = Parameter(np.zeros(c, np.float32))
        else:
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", Tensor._wrap(np.zeros(c, np.float32)))
            self.register_buffer("running_var", Tensor._wrap(np.ones(c, np.float32)))
            self.register_buffer("num_batches_tracked", Tensor._wrap(np.zeros((), np.int64)))
        else:
            for buffer in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(buffer, None)

    def forward(self, input: Tensor) -> Tensor:
        name = type(self).__name__
        if input.ndim not in self._ranks:
            raise ValueError(f"{name}: expected a {' or '.join(map(str, self._ranks))}-D "
                             f"input, got shape {input.shape}")
        running, momentum = (self.running_mean, self.running_var), 0.0
        deferred = self._deferred if self.training and self.track_running_stats else None
        if deferred is not None:
            # Momentum 1 into buffers of -0.0 writes the batch statistics exactly (x + -0 = x,
            # for x = +0 too), for running_updates to apply later.
            zeros = np.full(self.num_features, -0.0, np.float32)
            running = (Tensor._wrap(zeros), Tensor._wrap(zeros.copy()))
            momentum = 1.0
        elif self.training and self.track_running_stats:
            momentum = self._count()
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        y = C.batch_norm(input, running[0] if track else None, running[1] if track else None,
                         self.weight, self.bias, use_batch, momentum, self.eps)
        if deferred is not None:  # an empty batch has no statistics, but counts
            deferred.append((running[0]._data, running[1]._data) if input.numel() else None)
        return y

    def _count(self) -> float:
        """Counts one more batch in num_batches_tracked; returns the momentum of its update
        (with momentum None the cumulative moving average's 1 / count, as PyTorch)."""
        counter = self.num_batches_tracked
        counter._data[...] = counter._data + 1
        counter._version += 1
        return 1.0 / float(counter._data) if self.momentum is None else self.momentum

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) input."""

    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) input."""

    _ranks = (4,)


class MaxPool2d(Module):
    """Arguments in torch.nn.MaxPool2d's order (stride defaults to kernel_size); with
    return_indices, forward returns (output, indices)."""

    _function = staticmethod(C.max_pool2d)

    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None,
                 padding: IntPair = 0, dilation: IntPair = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.padding = kernel_size, padding
        self.stride = kernel_size if stride is None else stride
        self.dilation, self.return_indices = dilation, bool(return_indices)
        self.ceil_mode = bool(ceil_mode)

    def forward(self, input: Tensor) -> Any:
        return self._function(input, self.kernel_size, self.stride, self.padding, self.dilation,
                              self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Arguments in torch.nn.AvgPool2d's order."""

    def __init__(self, kernel_size: IntPair, stride: Optional[IntPair] = None,
                 padding: IntPair = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: Optional[int] = None) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad, self.ceil_mode = bool(count_include_pad), bool(ceil_mode)
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return C.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    """Arguments in torch.nn.AvgPool1d's order; sizes kept as 1-tuples, as PyTorch's."""

    def __init__(self, kernel_size: Union[int, Sequence[int]],
                 stride: Union[int, Sequence[int], None] = None,
                 padding: Union[int, Sequence[int]] = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = C._ints(kernel_size, "kernel_size", "AvgPool1d", 1, 1)
        self.stride = self.kernel_size if stride is None else C._ints(stride, "stride",
                                                                      "AvgPool1d", 1, 1)
        self.padding = C._ints(padding, "padding", "AvgPool1d", 0, 1)
        self.count_include_pad, self.ceil_mode = bool(count_include_pad), bool(ceil_mode)

    def forward(self, input: Tensor) -> Tensor:
        return C.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool1d(MaxPool2d):
    """max_pool1d over (N, C, L) or (C, L) input."""

    _function = staticmethod(C.max_pool1d)


class AdaptiveAvgPool2d(Module):
    """Averages (N, C, H, W) or (C, H, W) input over windows that give the
    output size, as `torch.nn.AdaptiveAvgPool2d`.

    Parameters
    ----------
    output_size : int or pair of int or None
        The output's (H, W), one int for both; None keeps the input's size in that dimension.
    """

    _function: Callable[..., Tensor] = staticmethod(C.adaptive_avg_pool2d)

    def __init__(self, output_size: Union[int, Sequence[Optional[int]]]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """Averages (N, C, L) or (C, L) input over windows that give the output
    length, as `torch.nn.AdaptiveAvgPool1d`.

    Parameters
    ----------
    output_size : int
        The output's length.
    """

    _function = staticmethod(C.adaptive_avg_pool1d)


class _ConstantPadNd(Module):
    """F.pad with a constant; padding is an int for every side or (left, right, ...)."""

    _sides = 0

    def __init__(self, padding: Union[int, Sequence[int]], value: float) -> None:
        super().__init__()
        self.padding = (padding,) * self._sides if isinstance(padding, (int, np.integer)) \
            else tuple(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dimension with a constant, as `torch.nn.ConstantPad1d`.

    Parameters
    ----------
    padding : int or sequence of int
        One width for every side, or the widths (left, right) as `F.pad` takes them.
    value : float
        The fill value.
    """

    _sides = 2


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dimensions with a constant, as `torch.nn.ConstantPad2d`.

    Parameters
    ----------
    padding : int or sequence of int
        One width for every side, or the widths (left, right, top, bottom) as `F.pad` takes them.
    value : float
        The fill value.
    """

    _sides = 4


class ZeroPad2d(ConstantPad2d):
    """Pads the last two dimensions with zeros, as `torch.nn.ZeroPad2d`.

    Parameters
    ----------
    padding : int or sequence of int
        One width for every side, or the widths (left, right, top, bottom) as `F.pad` takes them.
    """

    def __init__(self, padding: Union[int, Sequence[int]]) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


__all__ = ["AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "BatchNorm1d",
           "BatchNorm2d", "ConstantPad1d", "ConstantPad2d", "Conv1d", "Conv2d", "ConvTranspose1d",
           "ConvTranspose2d", "MaxPool1d", "MaxPool2d", "PixelShuffle", "PixelUnshuffle",
           "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d", "ZeroPad2d"]


class Upsample(Module):
    """Resizing by `size` or `scale_factor` in any mode of functional.interpolate."""

    def __init__(self, size: Union[int, Sequence[int], None] = None,
                 scale_factor: Union[float, Sequence[float], None] = None,
                 mode: str = "nearest", align_corners: Optional[bool] = None,
                 recompute_scale_factor: Optional[bool] = None) -> None:
        super().__init__()
        if mode not in _INTERPOLATE_MODES:
            raise ValueError(f"{type(self).__name__}: mode must be one of "
                             f"{', '.join(_INTERPOLATE_MODES)}, got {mode!r}")
        if isinstance(scale_factor, tuple):  # stored as floats, as PyTorch's
            scale_factor = tuple(float(f) for f in scale_factor)
        elif scale_factor:
            scale_factor = float(scale_factor)  # type: ignore[arg-type]  # a number here
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else \
            f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample with mode "nearest" (PyTorch's legacy name)."""

    def __init__(self, size: Union[int, Sequence[int], None] = None,
                 scale_factor: Union[float, Sequence[float], None] = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample with mode "bilinear" and align_corners=True (PyTorch's legacy name)."""

    def __init__(self, size: Union[int, Sequence[int], None] = None,
                 scale_factor: Union[float, Sequence[float], None] = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)



class _Shuffle(Module):
    """pixel_shuffle or pixel_unshuffle by the factor held under PyTorch's name `_factor`."""

    _function: Callable[[Tensor, int], Tensor]
    _factor = ""

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, getattr(self, self._factor))

    def extra_repr(self) -> str:
        return f"{self._factor}={getattr(self, self._factor)}"


class PixelShuffle(_Shuffle):
    """pixel_shuffle: (*, C·r², H, W) -> (*, C, H·r, W·r)."""

    _function, _factor = staticmethod(pixel_shuffle), "upscale_factor"

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor


class PixelUnshuffle(_Shuffle):
    """pixel_unshuffle: (*, C, H·r, W·r) -> (*, C·r², H, W)."""

    _function, _factor = staticmethod(pixel_unshuffle), "downscale_factor"

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor
