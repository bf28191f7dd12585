"""Losses (training.txt section 2), PyTorch's argument names, defaults and reductions.

Each returns a rank-0 float32 tensor for reduction "mean" and "sum" and the unreduced tensor
for "none". nll_loss is an op with its own backward; the others are compositions of ops, so
their gradients come from the ops' own backward passes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor
from ._core import as_tensor, record, require_float
from .elementwise import mul, relu, softplus, sub
from .nn import log_softmax
from .reduction import mean, sum

REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(REDUCTIONS)}, "
                         f"got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    return loss


def _class_targets(op: str, input: Tensor, target: Any, ignore_index: int) -> np.ndarray:
    """Validates (N, C) input and (N,) integer targets in [0, C) or equal to ignore_index."""
    require_float(input, op)
    if input.ndim != 2:
        raise ValueError(f"{op}: input must have shape (N, C), got {input.shape}")
    t = target._data if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold integer class indices, got {t.dtype}")
    if t.shape != input.shape[:1]:
        raise ValueError(f"{op}: target of shape {t.shape} does not match input of shape "
                         f"{input.shape}: expected ({input.shape[0]},)")
    counted = t != ignore_index
    bad = counted & ((t < 0) | (t >= input.shape[1]))
    if bad.any():
        raise ValueError(f"{op}: target {int(t[bad][0])} out of range for {input.shape[1]} "
                         f"classes (ignore_index={ignore_index})")
    return t.astype(np.int64, copy=False)


def _nll(log_probs: Tensor, target: np.ndarray, ignore_index: int, reduction: str) -> Tensor:
    n = log_probs.shape[0]
    counted = target != ignore_index
    rows = np.nonzero(counted)[0]
    picked = np.zeros(n, np.float32)
    picked[rows] = -log_probs._data[rows, target[rows]]
    if reduction == "none":
        scale = None
        out = picked
    else:
        out = sum(Tensor._wrap(picked))._data
        # Mean over counted rows; with none counted, 0/0 gives NaN as PyTorch does.
        with np.errstate(invalid="ignore", divide="ignore"):
            count = np.float32(len(rows))
            scale = np.float32(1.0) if reduction == "sum" else np.float32(1.0) / count
            if reduction == "mean":
                out = out / count

    def backward(g: np.ndarray) -> tuple:
        grad = np.zeros(log_probs.shape, np.float32)
        if scale is None:
            grad[rows, target[rows]] = -g[rows]
        else:
            grad[rows, target[rows]] = -(g * scale)
        return (grad,)

    return record("nll_loss", np.asarray(out, np.float32), (log_probs,), backward)


def nll_loss(input: Tensor, target: Any, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    _check_reduction("nll_loss", reduction)
    t = _class_targets("nll_loss", input, target, ignore_index)
    return _nll(input, t, ignore_index, reduction)


def cross_entropy(input: Tensor, target: Any, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """NLL of log_softmax; with ε > 0, (1−ε)·NLL + ε·(−mean_c log p) over counted rows."""
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], "
                         f"got {label_smoothing}")
    t = _class_targets("cross_entropy", input, target, ignore_index)
    logp = log_softmax(input, 1)
    nll = _nll(logp, t, ignore_index, reduction)
    if label_smoothing == 0.0:
        return nll
    counted = Tensor._wrap((t != ignore_index).astype(np.float32)[:, None])
    smooth = mul(mean(logp, 1, keepdim=True), counted).reshape(-1) * np.float32(-1.0)
    eps = np.float32(label_smoothing)
    if reduction == "mean":
        smooth = sum(smooth) / np.float32(counted._data.sum())
    elif reduction == "sum":
        smooth = sum(smooth)
    return nll * (np.float32(1.0) - eps) + smooth * eps


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    _check_reduction("mse_loss", reduction)
    require_float(input, "mse_loss")
    d = sub(input, as_tensor(target, "mse_loss", input))
    return _reduce(mul(d, d), reduction)


def l1_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """|d| built as relu(d) + relu(−d), so the gradient at d = 0 is 0 (as PyTorch)."""
    _check_reduction("l1_loss", reduction)
    require_float(input, "l1_loss")
    d = sub(input, as_tensor(target, "l1_loss", input))
    return _reduce(relu(d) + relu(-d), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Any,
                                     reduction: str = "mean") -> Tensor:
    """softplus(x) − x·t per element; the softplus kernel is stable for any |x|."""
    op = "binary_cross_entropy_with_logits"
    _check_reduction(op, reduction)
    require_float(input, op)
    t = as_tensor(target, op, input)
    if t.shape != input.shape:
        raise ValueError(f"{op}: target of shape {t.shape} must match input of shape "
                         f"{input.shape}")
    return _reduce(softplus(input) - mul(input, t), reduction)
