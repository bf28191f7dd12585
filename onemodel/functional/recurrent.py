"""LSTM and GRU layers as ops: one direction of one layer over a whole sequence.

The input projection of every step, xw = x·W_ihᵀ + b_ih, is a `linear` the caller runs first
(one large product); these ops run the recurrence on the kernel of _kernels/csrc/rnn.c (per
step a product h·W_hhᵀ and a fused row kernel for the gates and the state update) and have
their own backward. Gate order and layouts are PyTorch's: LSTM (i, f, g, o), GRU (r, z, n)
with n = tanh(x_n + r·(W_hn·h + b_hn)).

`lengths` has packed-sequence meaning: row b runs its first
lengths[b] steps; its outputs after them are exactly zero with zero gradient, and h_n (c_n) is
the state at its last valid step. `reverse=True` runs each row backwards from its last valid
step, starting from h0; the kernel reads and writes every array in time order, so nothing is
permuted.

Under autocast the recurrent products (h·W_hhᵀ per step, and in backward the gate gradients'
products with W_hh and dW_hh) take bfloat16 or float16 operands as linear does (the kernel's
packing rounds them); the state, the gates and the gradients stay float32.

`lstm_projected_directions` is PyTorch's LSTM with proj_size (h_t = W_hr·(o_t * tanh(c_t))),
and `rnn_directions` its Elman RNN (h_t = tanh or relu of x_t·W_ihᵀ + b_ih + h_{t−1}·W_hhᵀ +
b_hh), which the fused kernel does not take: they compose each step of differentiable ops
(linear, sigmoid, tanh, relu, where) in a loop over time. That is slow, but these are rare
cases and every op they use has a fixed association order, so they are as deterministic as the
kernel.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import _autocast
from .._kernels import _rnn
from ..tensor import Tensor, float32, int64
from . import _core
from .elementwise import add, mul, relu, sigmoid, tanh, where
from .linalg import _product, linear
from .shape import index, stack


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


def _float(t: Any, op: str, name: str, shape: tuple) -> Tensor:
    t = _core.as_tensor(t, op)
    _core.require_float(t, op, name)
    if t.shape != shape:
        raise ValueError(f"{op}: {name} has shape {t.shape}, expected {shape}")
    return t


class _Direction:
    """One direction's inputs (checked) and the arrays its forward saves for backward."""

    def __init__(self, op: str, cell: str, xw: Any, w_hh: Any, b_hh: Any, h0: Any, c0: Any,
                 reverse: bool) -> None:
        gates = {"lstm": 4, "gru": 3}.get(cell, 1)
        self.w_hh = _core.as_tensor(w_hh, op)
        _core.require_float(self.w_hh, op, "w_hh")
        if self.w_hh.ndim != 2 or self.w_hh.shape[0] != gates * self.w_hh.shape[1]:
            raise ValueError(f"{op}: w_hh of shape {self.w_hh.shape} must be ({gates}*H, H)")
        h = self.w_hh.shape[1]
        self.xw = _core.as_tensor(xw, op)
        _core.require_float(self.xw, op, "xw")
        if self.xw.ndim != 3 or self.xw.shape[2] != gates * h:
            raise ValueError(f"{op}: xw of shape {self.xw.shape} must be (T, B, {gates * h}) "
                             f"for w_hh of shape {self.w_hh.shape}")
        batch = self.xw.shape[1]
        self.h0 = _float(h0, op, "h0", (batch, h))
        self.c0 = _float(c0, op, "c0", (batch, h)) if cell == "lstm" else None
        self.b = None if b_hh is None else _float(b_hh, op, "b_hh", (gates * h,))
        self.reverse = bool(reverse)

    def inputs(self) -> tuple:
        return tuple(t for t in (self.xw, self.w_hh, self.b, self.h0, self.c0) if t is not None)


def _run(cell: str, dirs: list, lengths: Any) -> list:
    """Runs the directions in one kernel call (concurrently when threads allow); returns
    (y, h_n[, c_n]) per direction."""
    op = f"{cell}_layer"
    lstm = cell == "lstm"
    first = dirs[0]
    steps, batch, gh = first.xw.shape
    h = first.w_hh.shape[1]
    for d in dirs[1:]:
        if d.xw.shape != first.xw.shape or d.w_hh.shape != first.w_hh.shape:
            raise ValueError(f"{op}: directions differ in shape: xw {d.xw.shape} vs "
                             f"{first.xw.shape}, w_hh {d.w_hh.shape} vs {first.w_hh.shape}")
    lens = check_lengths(lengths, batch, steps, op)
    full = lens if lens is not None else np.full(batch, steps, int64)
    states = 2 if lstm else 1
    packed = np.empty((len(dirs), steps + states, batch, h), float32)
    saved = []
    for i, d in enumerate(dirs):
        arrays = {"reverse": d.reverse, "xw": np.ascontiguousarray(d.xw._data),
                  "w_hh": d.w_hh._data,
                  "bias": d.b._data if d.b is not None else np.zeros(gh, float32),
                  "h0": np.ascontiguousarray(d.h0._data), "y": packed[i, :steps],
                  "gates": np.empty((steps, batch, gh), float32), "h_n": packed[i, steps]}
        if lstm:
            arrays.update(c0=np.ascontiguousarray(d.c0._data),
                          cs=np.empty((steps, batch, h), float32), c_n=packed[i, steps + 1])
        else:
            arrays["hn_lin"] = np.empty((steps, batch, h), float32)
        saved.append(arrays)
    half = _autocast.half_code()
    _rnn.forward(cell, saved, full, _core.threads(), half)
    for arrays in saved:
        del arrays["xw"], arrays["bias"], arrays["h_n"]
        arrays.pop("c_n", None)

    def previous_state(d: _Direction, y: np.ndarray, h0: np.ndarray) -> np.ndarray:
        """The state each step starts from, in time order: h0 at a row's first step (time 0,
        or its last valid time when reversed), else the output of the step before."""
        h_prev = np.empty_like(y)
        if not d.reverse:
            h_prev[:1] = h0[None]
            h_prev[1:] = y[:-1]
        elif steps:
            h_prev[:-1] = y[1:]
            h_prev[-1] = 0.0  # reached only through padded steps, whose gradient is zero
            h_prev[full - 1, np.arange(batch)] = h0
        return h_prev.reshape(steps * batch, h)

    def backward(g: np.ndarray) -> tuple:
        jobs = []
        for i, arrays in enumerate(saved):
            job = dict(arrays, gy=np.ascontiguousarray(g[i, :steps]),
                       g_hn=np.ascontiguousarray(g[i, steps]),
                       dgx=np.empty((steps, batch, gh), float32),
                       dh0=np.empty((batch, h), float32))
            if lstm:
                job.update(g_cn=np.ascontiguousarray(g[i, steps + 1]),
                           dc0=np.empty((batch, h), float32))
            else:
                job["dgh"] = np.empty((steps, batch, gh), float32)
            jobs.append(job)
        _rnn.backward(cell, jobs, full, _core.threads(), half)
        grads = []
        for d, job in zip(dirs, jobs):
            dg = (job["dgx"] if lstm else job["dgh"]).reshape(steps * batch, gh)
            dw = db = None
            if d.w_hh.requires_grad:
                dw = _product(dg, previous_state(d, job["y"], job["h0"]), trans_a=True,
                              half=half)
            if d.b is not None and d.b.requires_grad:
                db = _core.sum_axis(dg, 0)
            grads += [job["dgx"], dw] + ([db] if d.b is not None else []) + [job["dh0"]]
            grads += [job["dc0"]] if lstm else []
        return tuple(grads)

    inputs = tuple(t for d in dirs for t in d.inputs())
    out = _core.record(op, packed, inputs, backward, inputs)
    return [(index(out, (i, slice(0, steps))),)
            + tuple(index(out, (i, steps + s)) for s in range(states))
            for i in range(len(dirs))]


def lstm_directions(xws: Sequence[Tensor], w_hhs: Sequence[Tensor],
                    b_hhs: Sequence[Optional[Tensor]], h0s: Sequence[Tensor],
                    c0s: Sequence[Optional[Tensor]], lengths: Any = None,
                    reverses: Sequence[bool] = (False, True)) -> list:
    """Several LSTM directions over the same steps (a bidirectional layer), run together:
    [(y, h_n, c_n) per direction]."""
    op = "lstm_layer"
    return _run("lstm", [_Direction(op, "lstm", *a) for a in
                         zip(xws, w_hhs, b_hhs, h0s, c0s, reverses)], lengths)


def gru_directions(xws: Sequence[Tensor], w_hhs: Sequence[Tensor],
                   b_hhs: Sequence[Optional[Tensor]], h0s: Sequence[Tensor],
                   lengths: Any = None, reverses: Sequence[bool] = (False, True)) -> list:
    """Several GRU directions over the same steps, run together: [(y, h_n) per direction]."""
    op = "gru_layer"
    return _run("gru", [_Direction(op, "gru", xw, w, b, h0, None, r) for xw, w, b, h0, r in
                        zip(xws, w_hhs, b_hhs, h0s, reverses)], lengths)


def lstm_layer(xw: Tensor, w_hh: Tensor, b_hh: Optional[Tensor], h0: Tensor, c0: Tensor,
               lengths: Any = None, reverse: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """(y (T, B, H), h_n (B, H), c_n (B, H)) of an LSTM direction from xw (T, B, 4H)."""
    return lstm_directions([xw], [w_hh], [b_hh], [h0], [c0], lengths, [reverse])[0]


def gru_layer(xw: Tensor, w_hh: Tensor, b_hh: Optional[Tensor], h0: Tensor,
              lengths: Any = None, reverse: bool = False) -> tuple[Tensor, Tensor]:
    """(y (T, B, H), h_n (B, H)) of a GRU direction from xw (T, B, 3H)."""
    return gru_directions([xw], [w_hh], [b_hh], [h0], lengths, [reverse])[0]


def _stepped(step: Callable[[Tensor, tuple], tuple], xw: Tensor, states: tuple,
             lengths: Optional[np.ndarray], reverse: bool) -> tuple:
    """One direction run step by step: step(xw_t, states) gives the new states, h (the output)
    first. Returns (y (T, B, h's size), *the final states)."""
    steps = xw.shape[0]
    ys: list = [None] * steps
    zero = np.zeros((), float32)
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        new = step(index(xw, t), states)
        if lengths is None:
            states, ys[t] = new, new[0]
        else:
            # Rows past their length keep their state (forward: the last valid one; reverse:
            # h0, not yet started) and output zero, as the kernel's packed sequences.
            live = (t < lengths)[:, None]
            states = tuple(where(live, a, b) for a, b in zip(new, states))
            ys[t] = where(live, new[0], zero)
    y = stack(ys, 0) if steps else Tensor._wrap(np.zeros((0,) + states[0].shape, float32))
    return (y,) + states


def _projected_direction(xw: Tensor, w_hh: Tensor, b_hh: Optional[Tensor], w_hr: Tensor,
                         h0: Tensor, c0: Tensor, lengths: Optional[np.ndarray],
                         reverse: bool) -> tuple:
    """One direction of a projected LSTM layer: (y (T, B, P), h_n, c_n)."""
    hidden = w_hh.shape[0] // 4

    def step(x_t: Tensor, states: tuple) -> tuple:
        h, c = states
        gates = add(x_t, linear(h, w_hh, b_hh))
        i, f, g, o = (index(gates, (slice(None), slice(k * hidden, (k + 1) * hidden)))
                      for k in range(4))
        c_new = add(mul(sigmoid(f), c), mul(sigmoid(i), tanh(g)))
        return linear(mul(sigmoid(o), tanh(c_new)), w_hr), c_new

    return _stepped(step, xw, (h0, c0), lengths, reverse)


def check_nonlinearity(nonlinearity: str, op: str) -> str:
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{op}: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    return nonlinearity


def rnn_cell(xw: Tensor, h: Tensor, w_hh: Tensor, b_hh: Optional[Tensor],
             nonlinearity: str = "tanh") -> Tensor:
    """One Elman step, tanh or relu of xw + h·W_hhᵀ + b_hh (xw the input's projection), in
    PyTorch's order."""
    z = add(xw, linear(h, w_hh, b_hh))
    return tanh(z) if check_nonlinearity(nonlinearity, "rnn_cell") == "tanh" else relu(z)


def rnn_directions(xws: Sequence[Tensor], w_hhs: Sequence[Tensor],
                   b_hhs: Sequence[Optional[Tensor]], h0s: Sequence[Tensor],
                   nonlinearity: str = "tanh", lengths: Any = None,
                   reverses: Sequence[bool] = (False, True)) -> list:
    """Elman RNN directions over the same steps, xw (T, B, H) and w_hh (H, H) as for
    gru_directions: [(y, h_n) per direction]."""
    op = "rnn_layer"
    check_nonlinearity(nonlinearity, op)
    results = []
    for xw, w_hh, b_hh, h0, reverse in zip(xws, w_hhs, b_hhs, h0s, reverses):
        d = _Direction(op, "rnn", xw, w_hh, b_hh, h0, None, reverse)
        lens = check_lengths(lengths, d.xw.shape[1], d.xw.shape[0], op)

        def step(x_t: Tensor, states: tuple, d: _Direction = d) -> tuple:
            return (rnn_cell(x_t, states[0], d.w_hh, d.b, nonlinearity),)

        results.append(_stepped(step, d.xw, (d.h0,), lens, d.reverse))
    return results


def lstm_projected_directions(xws: Sequence[Tensor], w_hhs: Sequence[Tensor],
                              b_hhs: Sequence[Optional[Tensor]], w_hrs: Sequence[Any],
                              h0s: Sequence[Tensor], c0s: Sequence[Optional[Tensor]],
                              lengths: Any = None,
                              reverses: Sequence[bool] = (False, True)) -> list:
    """Directions of an LSTM layer with projections w_hr (P, H): [(y, h_n, c_n) per direction],
    y (T, B, P), h_n (B, P), c_n (B, H); xw (T, B, 4H) is the input projection as for
    lstm_directions, w_hh (4H, P)."""
    op = "lstm_layer"
    results = []
    for xw, w_hh, b_hh, w_hr, h0, c0, reverse in zip(xws, w_hhs, b_hhs, w_hrs, h0s, c0s,
                                                     reverses):
        w_hh = _core.as_tensor(w_hh, op)
        w_hr = _core.as_tensor(w_hr, op)
        _core.require_float(w_hr, op, "w_hr")
        if w_hh.ndim != 2 or w_hh.shape[0] % 4 or w_hr.shape != (w_hh.shape[1],
                                                                 w_hh.shape[0] // 4):
            raise ValueError(f"{op}: w_hh of shape {w_hh.shape} and w_hr of shape {w_hr.shape} "
                             f"must be (4*H, P) and (P, H)")
        proj, hidden = w_hr.shape
        xw = _core.as_tensor(xw, op)
        if xw.ndim != 3 or xw.shape[2] != 4 * hidden:
            raise ValueError(f"{op}: xw of shape {xw.shape} must be (T, B, {4 * hidden}) for "
                             f"w_hh of shape {w_hh.shape}")
        steps, batch = xw.shape[:2]
        h0 = _float(h0, op, "h0", (batch, proj))
        c0 = _float(c0, op, "c0", (batch, hidden))
        if b_hh is not None:
            b_hh = _float(b_hh, op, "b_hh", (4 * hidden,))
        lens = check_lengths(lengths, batch, steps, op)
        results.append(_projected_direction(xw, w_hh, b_hh, w_hr, h0, c0, lens, reverse))
    return results
