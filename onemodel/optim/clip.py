"""Gradient clipping.

clip_grad_norm: the norm is √Σg² with the squares added in double strictly in order (parameter
order, then row-major), or max|g| for the infinity norm (NaN if any gradient holds a NaN);
coef = float32(max_norm / (norm + 1e-6)) in double; every gradient is multiplied by coef only
when coef < 1; a non-finite norm is returned and nothing is scaled. Returns float32(norm).
grad_norm: that norm alone, nothing scaled (what a training log shows every step).
"""
from __future__ import annotations

import math
from typing import Iterable, List

import numpy as np

from .. import _config
from .._kernels import _optim
from ..tensor import Tensor
from .optimizer import check_number, f32


def _grads(op: str, params: Iterable[Tensor]) -> List[Tensor]:
    """The gradients of params, in order, skipping parameters without one."""
    if isinstance(params, Tensor):
        params = [params]
    grads = []
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise ValueError(f"{op}: params[{i}] is a {type(p).__name__}, not a Tensor")
        if p.grad is None:
            continue
        g = p.grad._data
        if g.dtype != np.float32 or not g.flags.c_contiguous:
            raise ValueError(f"{op}: params[{i}]: gradient must be C-contiguous float32, got "
                             f"{g.dtype} of shape {g.shape}")
        grads.append(p.grad)
    return grads


def _norm(op: str, grads: List[Tensor], norm_type: float) -> float:
    """The joint norm of the gradients, in double, in the fixed order of the module notes."""
    norm_type = check_number(op, "norm_type", norm_type)
    if norm_type not in (2.0, math.inf):
        raise ValueError(f"{op}: norm_type must be 2.0 or inf, got {norm_type!r}")
    if norm_type == math.inf:
        norm = 0.0
        for g in grads:
            largest = _optim.absmax(g._data.reshape(-1))
            if math.isnan(largest):
                return math.nan
            norm = max(norm, largest)
        return norm
    total = 0.0
    for g in grads:
        total = _optim.sumsq_f64(g._data.reshape(-1), total)
    return math.sqrt(total)


def grad_norm(params: Iterable[Tensor], norm_type: float = 2.0) -> float:
    """float32 of the joint norm of the gradients that clip_grad_norm would clip, unchanged."""
    return f32(_norm("grad_norm", _grads("grad_norm", params), norm_type))


def clip_grad_norm(params: Iterable[Tensor], max_norm: float,
                   norm_type: float = 2.0) -> float:
    """Scales the gradients so that their joint norm is at most max_norm; returns the norm."""
    max_norm = check_number("clip_grad_norm", "max_norm", max_norm)
    if max_norm < 0.0:
        raise ValueError(f"clip_grad_norm: max_norm must be >= 0, got {max_norm!r}")
    grads = _grads("clip_grad_norm", params)
    norm = _norm("clip_grad_norm", grads, norm_type)
    if not math.isfinite(norm):
        return f32(norm)
    coef = f32(f32(max_norm) / (norm + 1e-6))
    if coef < 1.0:
        nthreads = _config.num_threads()
        for g in grads:
            _optim.scale_(g._data.reshape(-1), coef, nthreads)
            g._version += 1
    return f32(norm)


def clip_grad_value(params: Iterable[Tensor], clip_value: float) -> None:
    """Clamps every gradient element to [-clip_value, clip_value]; NaN stays NaN."""
    clip_value = check_number("clip_grad_value", "clip_value", clip_value)
    if clip_value < 0.0:
        raise ValueError(f"clip_grad_value: clip_value must be >= 0, got {clip_value!r}")
    c = f32(clip_value)
    nthreads = _config.num_threads()
    for g in _grads("clip_grad_value", params):
        _optim.clamp_(g._data.reshape(-1), c, nthreads)
        g._version += 1


# PyTorch's names (torch.nn.utils.clip_grad_norm_ returns a tensor; this returns the float).
clip_grad_norm_ = clip_grad_norm
clip_grad_value_ = clip_grad_value
