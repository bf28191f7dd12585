"""RNN, LSTM and GRU, and their cells: PyTorch's constructors, parameter names, shapes and gate
order.

Parameters per layer k and direction: weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
bias_hh_l{k}, with the suffix _reverse for the backward direction, registered (and drawn) in
PyTorch's order, every one from Uniform(±1/√hidden_size) as PyTorch initialises them, so
PyTorch weights load unchanged. forward(input, hx=None, lengths=None) returns (output, h_n) for
the RNN and GRU and (output, (h_n, c_n)) for the LSTM; `lengths` gives packed-sequence meaning
to padded batches (functional/recurrent.py). A 2-D input (seq, input_size) is one unbatched
sequence, as PyTorch: its states are (num_layers * num_directions, hidden_size) and batch_first
is ignored. dropout=p > 0 zeroes each layer's output but the last's in training, as PyTorch's
(F.dropout: the masks are onemodel's own draws).

LSTM(proj_size=P > 0) is PyTorch's projected LSTM: each layer and direction also has
weight_hr_l{k} (P, hidden_size), registered last, the hidden state h (and so the output, and
weight_hh's width, and the next layer's input) has size P, the cell state c hidden_size.

RNNCell, LSTMCell and GRUCell are one step of one layer: parameters weight_ih, weight_hh,
bias_ih, bias_hh (drawn as the layers'), forward(input, hx=None) on (batch, input_size) or
unbatched (input_size,) input, hx zeros when None; LSTMCell's hx and result are (h, c).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

import numpy as np

from .. import functional as F
from ..functional.recurrent import (
    check_lengths,
    check_nonlinearity,
    gru_directions,
    gru_layer,
    lstm_directions,
    lstm_layer,
    lstm_projected_directions,
    rnn_cell,
    rnn_directions,
)
from ..random import Generator
from ..tensor import Tensor, float32
from .init import fan_in_bound, resolve_generator, uniform_parameter
from .layers import _positive
from .module import Module, check_factory_kwargs


def _draw(module: Module, suffix: str, width: int, out: int, g: Generator) -> None:
    """One layer and direction's weight_ih (width wide), weight_hh (out wide), bias_ih, bias_hh
    and weight_hr, as the module has them, registered and drawn in PyTorch's order from
    Uniform(±1/√hidden_size)."""
    hidden = module.hidden_size
    gh = module._gates * hidden
    shapes: list[tuple[str, tuple[int, ...]]] = [("weight_ih", (gh, width)),
                                                 ("weight_hh", (gh, out))]
    if module.bias:
        shapes += [("bias_ih", (gh,)), ("bias_hh", (gh,))]
    if getattr(module, "proj_size", 0):
        shapes.append(("weight_hr", (module.proj_size, hidden)))
    for stem, shape in shapes:
        setattr(module, stem + suffix, uniform_parameter(shape, fan_in_bound(hidden), g))


def _inter_layer_dropout(dropout: Any, num_layers: int, name: str) -> float:
    """The probability of zeroing each layer's output but the last's in training, checked as
    PyTorch's (and its warning for one layer, where it does nothing)."""
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float, np.number)) or not (
            0 <= dropout <= 1):
        raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing the "
                         f"probability of an element being zeroed, got {dropout!r}")
    if dropout > 0 and num_layers == 1:
        warnings.warn(f"{name}: dropout option adds dropout after all but last recurrent "
                      f"layer, so non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", UserWarning, stacklevel=3)
    return float(dropout)


class _Recurrent(Module):
    _gates = 0
    _cell = ""
    nonlinearity: str  # RNN's

    # PyTorch's arguments in its order: dropout sixth, then bidirectional, proj_size.
    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        name = type(self).__name__
        self.input_size = _positive(input_size, "input_size", name)
        self.hidden_size = _positive(hidden_size, "hidden_size", name)
        self.num_layers = _positive(num_layers, "num_layers", name)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = _inter_layer_dropout(dropout, self.num_layers, name)
        self.bidirectional = bool(bidirectional)
        if isinstance(proj_size, bool) or not isinstance(proj_size, (int, np.integer)) or (
                proj_size < 0):
            raise ValueError(f"{name}: proj_size must be a non-negative integer (0: no "
                             f"projection), got {proj_size!r}")
        if proj_size and self._cell != "lstm":
            raise ValueError(f"{name}: proj_size is only supported for LSTM, got {proj_size}")
        if proj_size >= self.hidden_size:
            raise ValueError(f"{name}: proj_size {proj_size} must be smaller than hidden_size "
                             f"{self.hidden_size}")
        self.proj_size = int(proj_size)
        g = resolve_generator(generator, seed)
        out = self._out_size
        for k in range(self.num_layers):
            width = self.input_size if k == 0 else out * self.directions
            for suffix in self._suffixes():
                _draw(self, f"_l{k}{suffix}", width, out, g)

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def _out_size(self) -> int:
        """The size of h (and of each direction's output): proj_size if set."""
        return self.proj_size or self.hidden_size

    def _suffixes(self) -> tuple:
        return ("", "_reverse") if self.bidirectional else ("",)

    def _initial(self, state: Any, batch: Optional[int], what: str, size: int) -> Tensor:
        """The initial state (layers * directions, batch, size); batch None means an
        unbatched input, whose state has no batch axis."""
        stack = self.num_layers * self.directions
        shape = (stack, 1 if batch is None else batch, size)
        size_name = "proj_size" if size != self.hidden_size else "hidden_size"
        if state is None:
            return Tensor._wrap(np.zeros(shape, float32))
        state = state if isinstance(state, Tensor) else Tensor(state)
        if batch is None:
            if state.shape != (stack, size):
                raise ValueError(f"{type(self).__name__}: {what} has shape {state.shape}, "
                                 f"expected {(stack, size)} (num_layers * num_directions, "
                                 f"{size_name}) for an unbatched 2-D input")
            return F.unsqueeze(state, 1)
        if state.shape != shape:
            raise ValueError(f"{type(self).__name__}: {what} has shape {state.shape}, expected "
                             f"{shape} (num_layers * num_directions, batch, {size_name})")
        return state

    def _run(self, x: Tensor, h0: Any, c0: Any, lengths: Any) -> tuple:
        name = type(self).__name__
        x = x if isinstance(x, Tensor) else Tensor(x)
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            layout = "(batch, seq, input_size)" if self.batch_first else \
                "(seq, batch, input_size)"
            raise ValueError(f"{name}: input of shape {x.shape} must be {layout} or unbatched "
                             f"(seq, input_size) with input_size {self.input_size}")
        unbatched = x.ndim == 2
        if unbatched:
            x = F.unsqueeze(x, 1)
        elif self.batch_first:
            x = F.transpose(x, 0, 1)
        steps, batch = x.shape[:2]
        lengths = check_lengths(lengths, batch, steps, name)
        h0 = self._initial(h0, None if unbatched else batch, "h0", self._out_size)
        c0 = self._initial(c0, None if unbatched else batch, "c0", self.hidden_size) \
            if self._cell == "lstm" else None
        hs, cs = [], []
        for k in range(self.num_layers):
            xws, w_hhs, b_hhs, w_hrs, h0s, c0s = [], [], [], [], [], []
            for d, suffix in enumerate(self._suffixes()):
                i = k * self.directions + d
                p = f"_l{k}{suffix}"
                xws.append(F.linear(x, getattr(self, "weight_ih" + p),
                                    getattr(self, "bias_ih" + p) if self.bias else None))
                w_hhs.append(getattr(self, "weight_hh" + p))
                b_hhs.append(getattr(self, "bias_hh" + p) if self.bias else None)
                w_hrs.append(getattr(self, "weight_hr" + p) if self.proj_size else None)
                h0s.append(F.index(h0, i))
                c0s.append(F.index(c0, i) if c0 is not None else None)
            reverses = [False, True][:self.directions]
            if self.proj_size:
                results = lstm_projected_directions(xws, w_hhs, b_hhs, w_hrs, h0s, c0s,
                                                    lengths, reverses)
            elif self._cell == "lstm":
                results = lstm_directions(xws, w_hhs, b_hhs, h0s, c0s, lengths, reverses)
            elif self._cell == "gru":
                results = gru_directions(xws, w_hhs, b_hhs, h0s, lengths, reverses)
            else:
                results = rnn_directions(xws, w_hhs, b_hhs, h0s, self.nonlinearity, lengths,
                                         reverses)
            hs += [r[1] for r in results]
            cs += [r[2] for r in results] if self._cell == "lstm" else []
            x = results[0][0] if len(results) == 1 else F.cat([r[0] for r in results], 2)
            if self.dropout and self.training and k + 1 < self.num_layers:
                x = F.dropout(x, self.dropout, True)
        h_n, c_n = F.stack(hs, 0), (F.stack(cs, 0) if cs else None)
        if unbatched:
            return (F.squeeze(x, 1), F.squeeze(h_n, 1),
                    None if c_n is None else F.squeeze(c_n, 1))
        if self.batch_first:
            x = F.transpose(x, 0, 1)
        return x, h_n, c_n

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"bias={self.bias}, batch_first={self.batch_first}, "
                + (f"dropout={self.dropout}, " if self.dropout else "")
                + f"bidirectional={self.bidirectional}"
                + (f", proj_size={self.proj_size}" if self.proj_size else ""))


class LSTM(_Recurrent):
    """Long short-term memory; gates (i, f, g, o) stacked in that order as PyTorch."""

    _gates = 4
    _cell = "lstm"

    def forward(self, input: Tensor, hx: Optional[tuple] = None,
                lengths: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """input (T, B, input_size) (or (B, T, ...) with batch_first); hx is (h_0, c_0) or
        None."""
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError("LSTM: hx must be a pair (h_0, c_0) or None")
        h_0, c_0 = (None, None) if hx is None else hx
        y, h_n, c_n = self._run(input, h_0, c_0, lengths)
        return y, (h_n, c_n)


class _OneState(_Recurrent):
    """The layers whose state is h alone: forward returns (output, h_n)."""

    def forward(self, input: Tensor, hx: Optional[Tensor] = None,
                lengths: Any = None) -> tuple[Tensor, Tensor]:
        y, h_n, _ = self._run(input, hx, None, lengths)
        return y, h_n


class GRU(_OneState):
    """Gated recurrent unit; gates (r, z, n) stacked in that order as PyTorch."""

    _gates = 3
    _cell = "gru"


class RNN(_OneState):
    """Elman RNN, h_t = tanh or relu of x_t·W_ihᵀ + b_ih + h_{t−1}·W_hhᵀ + b_hh, with
    PyTorch's arguments in its order (nonlinearity fourth); step by step of exact ops
    (functional.recurrent.rnn_directions)."""

    _gates = 1
    _cell = "rnn"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, *,
                 device: Any = None, dtype: Any = None,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        check_nonlinearity(nonlinearity, "RNN")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype, generator=generator,
                         seed=seed)
        self.nonlinearity = nonlinearity


class _Cell(Module):
    """One step of a layer; `_state_names` name hx's parts in errors."""

    _gates = 0
    _state_names: tuple = ("hx",)

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        name = type(self).__name__
        self.input_size = _positive(input_size, "input_size", name)
        self.hidden_size = _positive(hidden_size, "hidden_size", name)
        self.bias = bool(bias)
        _draw(self, "", self.input_size, self.hidden_size, resolve_generator(generator, seed))

    def _step(self, input: Any, states: tuple, step: Callable[..., tuple]) -> tuple:
        """step(x·W_ihᵀ + b_ih, *states), all (batch, ·), the states checked and zeros where
        None; an unbatched input runs as a batch of one, and the results lose that axis."""
        name = type(self).__name__
        x = input if isinstance(input, Tensor) else Tensor(input)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input of shape {x.shape} must be (batch, "
                             f"{self.input_size}) or unbatched ({self.input_size},)")
        batched = x.ndim == 2
        expected = x.shape[:-1] + (self.hidden_size,)
        ready = []
        for what, state in zip(self._state_names, states):
            state = Tensor._wrap(np.zeros(expected, float32)) if state is None else \
                state if isinstance(state, Tensor) else Tensor(state)
            if state.shape != expected:
                raise ValueError(f"{name}: {what} has shape {state.shape}, expected "
                                 f"{expected} for input {x.shape}")
            ready.append(state if batched else F.unsqueeze(state, 0))
        x = x if batched else F.unsqueeze(x, 0)
        xw = F.linear(x, self.weight_ih, self.bias_ih if self.bias else None)
        out = step(xw, *ready)
        return out if batched else tuple(F.squeeze(t, 0) for t in out)

    @property
    def _b_hh(self) -> Optional[Tensor]:
        return self.bias_hh if self.bias else None

    def extra_repr(self) -> str:
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        return (f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")
                + ("" if nonlinearity == "tanh" else f", nonlinearity={nonlinearity}"))


class RNNCell(_Cell):
    """tanh or relu of x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None, *, generator: Optional[Generator] = None,
                 seed: Optional[int] = None) -> None:
        check_nonlinearity(nonlinearity, "RNNCell")
        super().__init__(input_size, hidden_size, bias, generator=generator, seed=seed)
        check_factory_kwargs(device, dtype, type(self).__name__)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        return self._step(input, (hx,), lambda xw, h: (
            rnn_cell(xw, h, self.weight_hh, self._b_hh, self.nonlinearity),))[0]


class LSTMCell(_Cell):
    """One LSTM step (gates i, f, g, o) by the LSTM kernel; returns (h, c)."""

    _gates = 4
    _state_names = ("hx[0]", "hx[1]")

    def forward(self, input: Tensor, hx: Optional[tuple] = None) -> tuple[Tensor, Tensor]:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError("LSTMCell: hx must be a pair (h_0, c_0) or None")
        h, c = self._step(input, (None, None) if hx is None else tuple(hx), lambda xw, h, c:
                          lstm_layer(F.unsqueeze(xw, 0), self.weight_hh, self._b_hh, h, c)[1:])
        return h, c


class GRUCell(_Cell):
    """One GRU step (gates r, z, n) by the GRU kernel."""

    _gates = 3

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        return self._step(input, (hx,), lambda xw, h: (
            gru_layer(F.unsqueeze(xw, 0), self.weight_hh, self._b_hh, h)[1],))[0]
