"""embedding_bag as torch.nn.functional.embedding_bag: each bag's rows of weight reduced by
sum, mean or max. Built of the library's ops, so the gradients and their order are theirs: the
rows are picked by embedding (gradient to weight as embedding's), laid out (bags, longest bag)
with zeros in the empty slots (each row's gradient moved back from its one slot, no sum), and
reduced along the bag by the library's reductions (sum, amax), whose order is fixed by the
shapes."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..tensor import Tensor
from . import _core
from .elementwise import where
from .nn import embedding
from .reduction import amax, sum

_MODES = ("sum", "mean", "max")


def _bags(idx: np.ndarray, offsets: Any, include_last_offset: bool) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """(the flat indices, where each bag starts in them) from a 2-D input or 1-D + offsets."""
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None for a 2-D input (each row is "
                             "a bag)")
        return idx.reshape(-1), np.arange(0, idx.size, max(idx.shape[1], 1))[:idx.shape[0]]
    if idx.ndim != 1:
        raise ValueError(f"embedding_bag: input must be 1-D (with offsets) or 2-D, got shape "
                         f"{idx.shape}")
    if offsets is None:
        raise ValueError("embedding_bag: offsets must be given for a 1-D input")
    starts = np.asarray(offsets._data if isinstance(offsets, Tensor) else offsets)
    if starts.ndim != 1 or starts.dtype.kind not in "iu":
        raise ValueError(f"embedding_bag: offsets must be a 1-D integer tensor, got shape "
                         f"{starts.shape} of {starts.dtype}")
    if include_last_offset:
        if not len(starts):
            raise ValueError("embedding_bag: include_last_offset needs at least one offset")
        starts = starts[:-1]
    if len(starts) and (starts[0] != 0 or np.any(np.diff(starts) < 0)
                        or starts[-1] > idx.size):
        raise ValueError(f"embedding_bag: offsets must start at 0 and not decrease, within "
                         f"the {idx.size} indices, got {starts.tolist()}")
    return idx, starts.astype(np.int64)


def _lay_out(rows: Tensor, where: tuple, kept: np.ndarray, bags: tuple) -> Tensor:
    """rows[kept[k]] at (bag, position) where[k] of a (bags, longest, dim) tensor of zeros.
    Each row lands once, so the gradient is moved back, not summed."""
    out = np.zeros(bags + (rows.shape[1],), np.float32)
    out[where] = rows._data[kept]
    count = rows.shape[0]

    def backward(g: np.ndarray) -> tuple:
        grad = np.zeros((count, g.shape[2]), np.float32)
        grad[kept] = g[where]
        return (grad,)
    return _core.record("embedding_bag", out, (rows,), backward)


def embedding_bag(input: Any, weight: Tensor, offsets: Any = None,
                  max_norm: Optional[float] = None, norm_type: float = 2.0,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Optional[Tensor] = None,
                  include_last_offset: bool = False, padding_idx: Optional[int] = None
                  ) -> Tensor:
    """One row per bag: the sum, mean or max of the bag's rows of weight (per_sample_weights
    scale them, with mode "sum" only); indices equal to padding_idx are left out (not counted
    by mean); an empty bag gives zeros."""
    if mode not in _MODES:
        raise ValueError(f"embedding_bag: mode must be one of {_MODES}, got {mode!r}")
    idx = np.asarray(input._data if isinstance(input, Tensor) else input)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"embedding_bag: input must be integers, got {idx.dtype}")
    flat, starts = _bags(idx, offsets, include_last_offset)
    psw = None
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights is only supported "
                                      f"for mode='sum', got mode={mode!r}")
        psw = _core.as_tensor(per_sample_weights, "embedding_bag")
        if psw.shape != idx.shape:
            raise ValueError(f"embedding_bag: per_sample_weights of shape {psw.shape} must "
                             f"match input of shape {idx.shape}")
    rows = embedding(flat, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                     sparse)
    if psw is not None:
        rows = rows * psw.reshape(-1, 1)
    keep = np.ones(len(flat), bool) if padding_idx is None else \
        flat != (padding_idx % weight.shape[0])
    bag_of = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(flat)]))
    kept = np.flatnonzero(keep)
    counts = np.bincount(bag_of[kept], minlength=len(starts))
    longest = int(counts.max()) if len(counts) else 0
    first = np.searchsorted(bag_of[kept], np.arange(len(starts)))
    laid = _lay_out(rows, (bag_of[kept], np.arange(len(kept)) - first[bag_of[kept]]), kept,
                    (len(starts), longest))
    if mode == "max":
        empty = Tensor._wrap(np.arange(longest)[None, :, None] >= counts[:, None, None])
        laid = where(empty, Tensor._wrap(np.array(-np.inf, np.float32)), laid)
        out = amax(laid, 1) if longest else laid.sum(1)
        return where(Tensor._wrap(counts[:, None] > 0), out,
                     Tensor._wrap(np.zeros((), np.float32)))
    out = sum(laid, 1)
    if mode == "mean":
        out = out / Tensor._wrap(np.maximum(counts, 1).astype(np.float32)[:, None])
    return out
