"""Group, instance and RMS norm, composed of other ops (exact mode gets
their bits).

group_norm runs the layer-norm kernel over each (sample, group) row of C/G · spatial values,
then applies the per-channel weight and bias; instance_norm is PyTorch's own composition, batch
norm of the (1, N·C, *) view; rms_norm divides by √(mean(x²) + eps), the mean by the engine's
fixed-order sum.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import numpy as np

from ..autograd import no_grad
from ..tensor import Tensor
from . import elementwise as E
from ._core import as_tensor, require_float
from .conv import batch_norm
from .nn import layer_norm, trailing_shape
from .reduction import mean
from .shape import reshape


def _parameter(t: Optional[Tensor], shape: tuple, name: str, op: str,
               x: Tensor) -> Optional[Tensor]:
    if t is None:
        return None
    t = as_tensor(t, op)
    require_float(t, op, name)
    if t.shape != shape:
        raise ValueError(f"{op}: {name} of shape {t.shape}, expected {shape} (input {x.shape})")
    return t


def _batch_of_channels(input: Tensor, op: str) -> tuple[Tensor, int, int]:
    """(N, C, *) float32 input as a tensor, and N and C."""
    x = as_tensor(input, op)
    require_float(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must be (N, C, *), got shape {x.shape}")
    return x, x.shape[0], x.shape[1]


def group_norm(input: Tensor, num_groups: int, weight: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """Normalises (N, C, *) input over each group of C / num_groups channels (and all their
    positions) with the biased variance, then weight and bias per channel, as
    torch.nn.functional.group_norm."""
    op = "group_norm"
    x, n, c = _batch_of_channels(input, op)
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)) or (
            num_groups < 1 or c % num_groups):
        raise ValueError(f"{op}: num_groups {num_groups!r} must be a positive divisor of the "
                         f"{c} channels of input {x.shape}")
    w = _parameter(weight, (c,), "weight", op, x)
    b = _parameter(bias, (c,), "bias", op, x)
    group_size = int(np.prod(x.shape[1:], dtype=np.int64)) // int(num_groups)
    rows = reshape(x, (n, int(num_groups), group_size))  # explicit: -1 fails for N = 0
    y = reshape(layer_norm(rows, rows.shape[-1:], eps=eps), x.shape)
    per_channel = (c,) + (1,) * (x.ndim - 2)
    if w is not None:
        y = E.mul(y, reshape(w, per_channel))
    if b is not None:
        y = E.add(y, reshape(b, per_channel))
    return y


def instance_norm(input: Tensor, running_mean: Optional[Tensor] = None,
                  running_var: Optional[Tensor] = None, weight: Optional[Tensor] = None,
                  bias: Optional[Tensor] = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalises each channel of each sample of (N, C, *) input over its positions (biased
    variance), then weight and bias per channel, as torch.nn.functional.instance_norm.

    PyTorch's algorithm: batch norm of the (1, N·C, *) view with weight, bias and the running
    statistics repeated per sample; with use_input_stats the statistics are updated as batch
    norm's (unbiased variance) and then averaged over the samples, in place. Without, the
    running statistics normalise."""
    op = "instance_norm"
    x, n, c = _batch_of_channels(input, op)
    if use_input_stats and math.prod(x.shape[2:]) == 1:
        raise ValueError(f"{op}: expected more than 1 spatial element when using input "
                         f"statistics, got input of shape {x.shape}")
    w, b, rm, rv = (_parameter(t, (c,), name, op, x) for t, name in (
        (weight, "weight"), (bias, "bias"), (running_mean, "running_mean"),
        (running_var, "running_var")))
    if (rm is None) != (rv is None) or (rm is None and not use_input_stats):
        raise ValueError(f"{op}: running_mean and running_var must both be given, or both None "
                         "(with use_input_stats=True)")
    stats = [None if t is None else Tensor._wrap(np.tile(t._data, n)) for t in (rm, rv)]
    y = batch_norm(reshape(x, (1, n * c) + x.shape[2:]), stats[0], stats[1],
                   None if w is None else w.repeat(n), None if b is None else b.repeat(n),
                   bool(use_input_stats), momentum, eps)
    if use_input_stats and n:  # else they are as they were (an empty batch has no statistics)
        with no_grad():
            for t, s in zip((rm, rv), stats):
                if t is not None and s is not None:
                    t.copy_(mean(reshape(s, (n, c)), 0))
    return reshape(y, x.shape)


def rms_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]],
             weight: Optional[Tensor] = None, eps: Optional[float] = None) -> Tensor:
    """x / √(mean(x²) + eps) · weight over the trailing `normalized_shape` axes, as
    torch.nn.functional.rms_norm; eps None is float32's machine epsilon (PyTorch's default)."""
    op = "rms_norm"
    x = as_tensor(input, op)
    require_float(x, op)
    norm = trailing_shape(normalized_shape, x, op)
    k = len(norm)
    w = _parameter(weight, norm, "weight", op, x)
    eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    square_mean = mean(E.mul(x, x), tuple(range(x.ndim - k, x.ndim)), True)
    y = E.div(x, E.sqrt(E.add(square_mean, np.float32(eps))))
    return y if w is None else E.mul(y, w)
