"""LSTM and GRU layers as ops: one direction of one layer over a whole sequence.

The input projection of every step, xw = x·W_ihᵀ + b_ih, is a `linear` the caller runs first
(one large product); these ops run the recurrence on the kernel of _kernels/csrc/rnn.c (per
step a product h·W_hhᵀ and a fused row kernel for the gates and the state update) and have
their own backward. Gate order and layouts are PyTorch's: LSTM (i, f, g, o), GRU (r, z, n)
with n = tanh(x_n + r·(W_hn·h + b_hn)).

`lengths` has packed-sequence meaning (training.txt section 10): row b runs its first
lengths[b] steps; its outputs after them are exactly zero with zero gradient, and h_n (c_n) is
the state at its last valid step. `reverse=True` runs each row reversed within its length (a
gather by an involutive permutation of time), so it starts at step lengths[b]-1 from h0.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .._kernels import _rnn
from ..tensor import Tensor, float32, int64
from . import _core
from .linalg import _product
from .shape import index


def check_lengths(lengths: Any, batch: int, steps: int, op: str) -> Optional[np.ndarray]:
    """lengths as a contiguous int64 array of shape (batch,) with values in [1, steps]."""
    if lengths is None:
        return None
    arr = np.asarray(lengths._data if isinstance(lengths, Tensor) else lengths)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{op}: lengths must be integers, got {arr.dtype}")
    if arr.shape != (batch,):
        raise ValueError(f"{op}: lengths of shape {arr.shape} for a batch of {batch}; "
                         f"expected ({batch},)")
    if batch and (arr.min() < 1 or arr.max() > steps):
        raise ValueError(f"{op}: lengths must lie in [1, {steps}] (the sequence length), got "
                         f"{arr.min()} .. {arr.max()}")
    return np.ascontiguousarray(arr, dtype=int64)


def _reversal(lengths: np.ndarray, steps: int) -> tuple:
    """Index (time, row) of the gather that reverses each row within its length; applying it
    twice is the identity."""
    t = np.arange(steps)[:, None]
    time = np.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)
    return time, np.arange(len(lengths))[None, :]


def _float(t: Any, op: str, name: str, shape: tuple) -> Tensor:
    t = _core.as_tensor(t, op)
    _core.require_float(t, op, name)
    if t.shape != shape:
        raise ValueError(f"{op}: {name} has shape {t.shape}, expected {shape}")
    return t


def _layer(cell: str, xw: Any, w_hh: Any, b_hh: Any, h0: Any, c0: Any, lengths: Any,
           reverse: bool) -> tuple:
    op = f"{cell}_layer"
    gates = 4 if cell == "lstm" else 3
    w_hh = _core.as_tensor(w_hh, op)
    _core.require_float(w_hh, op, "w_hh")
    if w_hh.ndim != 2 or w_hh.shape[0] != gates * w_hh.shape[1]:
        raise ValueError(f"{op}: w_hh of shape {w_hh.shape} must be ({gates}*H, H)")
    h = w_hh.shape[1]
    xw = _core.as_tensor(xw, op)
    _core.require_float(xw, op, "xw")
    if xw.ndim != 3 or xw.shape[2] != gates * h:
        raise ValueError(f"{op}: xw of shape {xw.shape} must be (T, B, {gates * h}) for "
                         f"w_hh of shape {w_hh.shape}")
    steps, batch = xw.shape[:2]
    h0 = _float(h0, op, "h0", (batch, h))
    c0 = _float(c0, op, "c0", (batch, h)) if cell == "lstm" else None
    b = None if b_hh is None else _float(b_hh, op, "b_hh", (gates * h,))
    lens = check_lengths(lengths, batch, steps, op)
    full = lens if lens is not None else np.full(batch, steps, int64)
    perm = _reversal(full, steps) if reverse else None

    def run_order(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a[perm] if reverse else a)

    lstm = cell == "lstm"
    xw_run = run_order(xw._data)
    bias = b._data if b is not None else np.zeros(gates * h, float32)
    h0_d = np.ascontiguousarray(h0._data)
    c0_d = np.ascontiguousarray(c0._data) if lstm else None
    y = np.empty((steps, batch, h), float32)
    gate_vals = np.empty((steps, batch, gates * h), float32)
    cs = np.empty((steps, batch, h), float32) if lstm else None
    hn_lin = None if lstm else np.empty((steps, batch, h), float32)
    states = 2 if lstm else 1
    packed = np.empty((steps + states, batch, h), float32)
    c_n = packed[steps + 1] if lstm else None
    _rnn.forward(cell, xw_run, w_hh._data, bias, h0_d, c0_d, full, y, gate_vals, cs, hn_lin,
                 packed[steps], c_n, _core.threads())
    packed[:steps] = y[perm] if reverse else y

    def backward(g: np.ndarray) -> tuple:
        gy = run_order(g[:steps])
        dgx = np.empty(gate_vals.shape, float32)
        dgh = None if lstm else np.empty(gate_vals.shape, float32)
        dh0 = np.empty((batch, h), float32)
        dc0 = np.empty((batch, h), float32) if lstm else None
        _rnn.backward(cell, w_hh._data, h0_d, c0_d, full, y, gate_vals, cs, hn_lin, gy,
                      np.ascontiguousarray(g[steps]),
                      np.ascontiguousarray(g[steps + 1]) if lstm else None, dgx, dgh, dh0,
                      dc0, _core.threads())
        dg = (dgx if lstm else dgh).reshape(steps * batch, gates * h)
        dw = db = None
        if w_hh.requires_grad:
            h_prev = np.concatenate([h0_d[None], y[:-1]]).reshape(steps * batch, h)
            dw = _product(dg, h_prev, trans_a=True)
        if b is not None and b.requires_grad:
            db = _core.sum_axis(dg, 0)
        grads = (run_order(dgx), dw, db, dh0) + ((dc0,) if lstm else ())
        keep = (True, True, b is not None, True, lstm)
        return tuple(gr for gr, k in zip(grads, keep) if k)

    inputs = tuple(t for t in (xw, w_hh, b, h0, c0) if t is not None)
    out = _core.record(op, packed, inputs, backward, inputs)
    return (index(out, slice(0, steps)),) + tuple(index(out, steps + i) for i in range(states))


def lstm_layer(xw: Tensor, w_hh: Tensor, b_hh: Optional[Tensor], h0: Tensor, c0: Tensor,
               lengths: Any = None, reverse: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """(y (T, B, H), h_n (B, H), c_n (B, H)) of an LSTM direction from xw (T, B, 4H)."""
    return _layer("lstm", xw, w_hh, b_hh, h0, c0, lengths, reverse)


def gru_layer(xw: Tensor, w_hh: Tensor, b_hh: Optional[Tensor], h0: Tensor,
              lengths: Any = None, reverse: bool = False) -> tuple[Tensor, Tensor]:
    """(y (T, B, H), h_n (B, H)) of a GRU direction from xw (T, B, 3H)."""
    return _layer("gru", xw, w_hh, b_hh, h0, None, lengths, reverse)
