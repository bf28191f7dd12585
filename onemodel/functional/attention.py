"""Scaled dot-product attention, composed of matmul, softmax and dropout (exact
mode gets the bits of those kernels, on every ISA path and thread count).

`attend` is the arithmetic MultiheadAttention and scaled_dot_product_attention share:
softmax((q·scale)·kᵀ + mask)·v. Each rounds as its PyTorch counterpart: multi-head attention
scales q before the product, scaled_dot_product_attention scales the product (its CPU kernel's
order), which matters where large scores amplify one rounding.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np

from ..tensor import Tensor, float32
from ._core import as_tensor, require_float
from .dropout import _check_p, dropout
from .elementwise import add, mul, where
from .linalg import matmul, matmul_nt
from .nn import softmax
from .shape import reshape, unsqueeze

_NEG_INF = np.float32(-np.inf)


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Optional[np.ndarray], scale: float,
           drop: Callable[[Tensor], Tensor], dead_rows: Optional[np.ndarray] = None,
           scale_product: bool = False) -> tuple[Tensor, Tensor]:
    """(softmax((q·scale)·kᵀ + mask) → zeroed at dead_rows → drop) · v, and those weights.

    q (..., L, E), k (..., S, E), v (..., S, Ev); mask a float32 array added to the scores
    (broadcast to (..., L, S)); dead_rows a bool array over (..., L, 1) whose rows get weight 0.
    With scale_product the scores are (q·kᵀ)·scale.
    """
    factor = np.float32(scale)
    if scale_product:
        scores = mul(matmul_nt(q, k), factor)
    else:
        scores = matmul_nt(mul(q, factor), k)
    if mask is not None:
        scores = add(scores, Tensor._wrap(mask))
    weights = softmax(scores, -1)
    if dead_rows is not None:
        weights = where(dead_rows, np.float32(0.0), weights)
    weights = drop(weights)
    return matmul(weights, v), weights


def causal_mask(lq: int, lk: int) -> np.ndarray:
    """The additive mask that lets query i see keys 0..i: -inf above the diagonal."""
    return np.where(np.tri(lq, lk, dtype=bool), np.float32(0.0), _NEG_INF)


def _float_mask(mask: Any, op: str) -> np.ndarray:
    """A bool mask (True = takes part, as torch's scaled_dot_product_attention) or a float mask
    as the float32 array added to the scores."""
    arr = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if arr.dtype == np.bool_:
        return np.where(arr, np.float32(0.0), _NEG_INF)
    if arr.dtype.kind != "f":
        raise TypeError(f"{op}: attn_mask must be bool or floating point, got {arr.dtype} "
                        f"(shape {arr.shape})")
    return arr.astype(float32, copy=False)


def _repeat_heads(t: Tensor, times: int) -> Tensor:
    """(..., H, S, E) -> (..., H·times, S, E), each head repeated in place (repeat_interleave)."""
    shape = t.shape
    wide = unsqueeze(t, -3).expand(shape[:-2] + (times,) + shape[-2:])
    return reshape(wide, shape[:-3] + (shape[-3] * times,) + shape[-2:])


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Any = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(query·keyᵀ·scale + mask)·value, as PyTorch's scaled_dot_product_attention.

    query (..., L, E), key (..., S, E), value (..., S, Ev), leading dimensions broadcast; scale
    defaults to 1/√E. A bool attn_mask marks with True the pairs that take part (the opposite of
    MultiheadAttention's bool masks, as in PyTorch); a float one is added to the scores; either
    broadcasts to (..., L, S). is_causal lets query i attend to keys 0..i. A query whose keys are
    all masked gets weight 0 everywhere (output 0, gradient 0), as PyTorch. With dropout_p > 0
    the weights are dropped out (whatever the mode: this function has no training flag, as
    PyTorch's) by a fresh stream from the default generator. enable_gqa repeats each key and
    value head for query.size(-3) // key.size(-3) query heads.
    """
    op = "scaled_dot_product_attention"
    q, k, v = (as_tensor(t, op) for t in (query, key, value))
    for name, t in (("query", q), ("key", k), ("value", v)):
        require_float(t, op, name)
        if t.ndim < 2:
            raise ValueError(f"{op}: {name} must have at least 2 dimensions (..., length, "
                             f"features), got shape {t.shape}")
    p = _check_p(dropout_p, op)
    if enable_gqa:
        if q.ndim < 3 or k.ndim < 3 or v.ndim < 3 or k.shape[-3] != v.shape[-3] or (
                q.shape[-3] % k.shape[-3]):
            raise ValueError(f"{op}: enable_gqa needs (..., heads, length, features) inputs "
                             f"with the query heads a multiple of the key and value heads, got "
                             f"query {q.shape}, key {k.shape}, value {v.shape}")
        k, v = (_repeat_heads(t, q.shape[-3] // k.shape[-3]) for t in (k, v))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{op}: query {q.shape}, key {k.shape} and value {v.shape} must agree "
                         f"in features (query and key, last) and length (key and value)")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the leading dimensions of query {q.shape}, key {k.shape} and "
                         f"value {v.shape} cannot be broadcast together") from None
    lq, lk = q.shape[-2], k.shape[-2]
    scores_shape = tuple(batch) + (lq, lk)
    mask = None
    if is_causal:
        if attn_mask is not None:
            raise ValueError(f"{op}: attn_mask must be None when is_causal=True (got a mask of "
                             f"shape {tuple(np.shape(attn_mask))})")
        mask = causal_mask(lq, lk)
    elif attn_mask is not None:
        mask = _float_mask(attn_mask, op)
        try:
            fits = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"{op}: attn_mask of shape {mask.shape} does not broadcast to the "
                             f"scores (..., L, S) = {scores_shape} of query {q.shape} and key "
                             f"{k.shape}")
    dead = None
    if mask is not None:
        dead_rows = np.all(mask == _NEG_INF, axis=-1, keepdims=True)
        if dead_rows.any():
            # Finite scores there, so softmax and its backward stay free of NaN; the weights
            # are then zeroed (PyTorch's safe softmax).
            mask = np.where(dead_rows, np.float32(0.0), mask)
            dead = dead_rows
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    drop = (lambda w: dropout(w, p)) if p > 0.0 else (lambda w: w)
    return attend(q, k, v, mask, factor, drop, dead, scale_product=True)[0]
