"""CTC loss: an op with its own backward, PyTorch's
semantics.

The kernel (_kernels/csrc/ctc.c) returns each row's negative log-likelihood and, in backward,
PyTorch's gradient: exp(lp) - posterior, the gradient with respect to the logits when the input
is a log_softmax output (the usual case; PyTorch returns the same for any input). The reductions
are ops on the per-row losses: "mean" divides each by its target length clamped to at least 1,
then takes the batch mean, "sum" adds them.

A target that no alignment can produce (longer than its input, counting the blanks that
repeated labels need) is an infinite loss with a NaN gradient, or 0 with zero_infinity, as in
PyTorch; it never raises. Deliberate differences from PyTorch:
a target outside [0, C) or equal to the blank raises ValueError (PyTorch reads out of bounds or
computes a meaningless loss), and targets must be integers.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .._kernels import _ctc
from ..tensor import Tensor, float32, int64
from ._core import record, require_float, threads
from .elementwise import div
from .loss import _check_reduction
from .reduction import mean, sum

_OP = "ctc_loss"


def _integers(value: Any, name: str) -> np.ndarray:
    a = value._data if isinstance(value, Tensor) else np.asarray(value)
    if a.dtype.kind not in "iu" and not (a.size == 0 and a.dtype.kind == "f"):
        raise TypeError(f"{_OP}: {name} must hold integers, got {a.dtype} (shape {a.shape})")
    return np.ascontiguousarray(a, dtype=int64)


def _lengths(value: Any, name: str, batch: int, high: int) -> np.ndarray:
    a = _integers(value, name)
    if a.shape != (batch,):
        raise ValueError(f"{_OP}: {name} of shape {a.shape} does not match the batch: "
                         f"expected ({batch},)")
    if (a < 0).any():
        raise ValueError(f"{_OP}: {name} must be >= 0, got {int(a[a < 0][0])}")
    if (a > high).any():
        raise ValueError(f"{_OP}: {name} must be <= {high} (the input's length T), got "
                         f"{int(a[a > high][0])}")
    return a


def _flat_targets(targets: Any, target_lengths: np.ndarray, batch: int, classes: int,
                  blank: int) -> tuple:
    """The labels of every row, concatenated, and each row's offset into them."""
    t = _integers(targets, "targets")
    if t.ndim == 2:
        width = int(target_lengths.max(initial=0))
        if t.shape[0] != batch or t.shape[1] < width:
            raise ValueError(f"{_OP}: targets of shape {t.shape} must be (B, S) with B = {batch} "
                             f"and S >= the longest target length {width}")
        offsets = np.arange(batch, dtype=int64) * t.shape[1]
        used = np.arange(t.shape[1]) < target_lengths[:, None]
        flat, labels = t.reshape(-1), t[used]
    elif t.ndim == 1:
        total = int(target_lengths.sum())
        if t.shape[0] != total:
            raise ValueError(f"{_OP}: concatenated targets of shape {t.shape} must have the sum "
                             f"of target_lengths = {total} entries")
        offsets = np.concatenate(([0], np.cumsum(target_lengths)[:-1])).astype(int64)
        flat = labels = t
    else:
        raise ValueError(f"{_OP}: targets must be (B, S) padded or 1-D concatenated, got shape "
                         f"{t.shape}")
    bad = (labels < 0) | (labels >= classes) | (labels == blank)
    if bad.any():
        raise ValueError(f"{_OP}: targets must be class indices in [0, {classes}) other than "
                         f"the blank {blank}, got {int(labels[bad][0])}")
    return np.ascontiguousarray(flat), offsets


def ctc_loss(log_probs: Tensor, targets: Any, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss of log_probs (T, B, C).

    targets: (B, S) padded or the 1-D concatenation of every row's labels; input_lengths and
    target_lengths: (B,) integers. Returns the (B,) losses for reduction "none", else rank 0.
    """
    _check_reduction(_OP, reduction)
    if not isinstance(log_probs, Tensor):
        raise TypeError(f"{_OP}: log_probs must be a Tensor, got {type(log_probs).__name__}")
    require_float(log_probs, _OP, "log_probs")
    if log_probs.ndim != 3:
        raise ValueError(f"{_OP}: log_probs must have shape (T, B, C), got {log_probs.shape}")
    steps, batch, classes = log_probs.shape
    if isinstance(blank, bool) or not isinstance(blank, (int, np.integer)) \
            or not 0 <= blank < classes:
        raise ValueError(f"{_OP}: blank must be a class index in [0, {classes}), got {blank!r}")
    blank = int(blank)
    lin = _lengths(input_lengths, "input_lengths", batch, steps)
    lt = _lengths(target_lengths, "target_lengths", batch, np.iinfo(np.int64).max)
    flat, offsets = _flat_targets(targets, lt, batch, classes, blank)

    lp = np.ascontiguousarray(log_probs._data)
    alpha = np.empty((batch, steps, 2 * int(lt.max(initial=0)) + 3), float32)
    nll = np.empty(batch, float32)
    _ctc.forward(lp, flat, offsets, lin, lt, blank, alpha, nll, threads())
    out = np.where(nll == np.inf, np.float32(0), nll) if zero_infinity else nll

    def backward(g: np.ndarray) -> tuple:
        grad = np.empty(lp.shape, float32)
        _ctc.backward(lp, flat, offsets, lin, lt, blank, alpha, nll,
                      np.ascontiguousarray(g, float32), zero_infinity, grad, threads())
        return (grad,)

    loss = record(_OP, out, (log_probs,), backward, saved=(log_probs,))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return sum(loss)
    return mean(div(loss, Tensor._wrap(np.maximum(lt, 1).astype(float32))))
