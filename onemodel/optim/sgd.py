"""Stochastic gradient descent with momentum, dampening, weight decay and Nesterov's variant.

Per element (training.txt section 3), each operation one float32 operation in this order:
    g = g + wd·p                              (when wd != 0)
    b = first ? g : μ·b + (1−d)·g             (when μ != 0; first = the parameter's first step
    g = nesterov ? g + μ·b : b                  with a gradient, held in initialized.i)
    p = p − lr·g
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, Mapping

import numpy as np

from .._kernels import _optim
from ..tensor import Tensor
from .optimizer import Optimizer, check_number, f32


class SGD(Optimizer):
    kind = "SGD"
    fixed_hyper_parameters = ("momentum", "dampening", "nesterov")

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, lr)
        momentum = check_number(self.kind, "momentum", momentum)
        dampening = check_number(self.kind, "dampening", dampening)
        if momentum < 0.0:
            raise ValueError(f"SGD: momentum must be >= 0, got {momentum!r}")
        if nesterov and (momentum <= 0.0 or dampening != 0.0):
            raise ValueError(f"SGD: nesterov needs momentum > 0 and dampening 0, got "
                             f"momentum={momentum!r}, dampening={dampening!r}")
        self.momentum = f32(momentum)
        self.dampening = f32(dampening)
        self.weight_decay = 0.0
        self._set_weight_decay(weight_decay)
        self.nesterov = bool(nesterov)
        if self.momentum != 0.0:
            self._buffers = [np.zeros(p.shape, np.float32) for p in self.params]
            self._initialized = [np.zeros((), np.int32) for _ in self.params]

    def _set_weight_decay(self, value: float) -> None:
        value = check_number(self.kind, "weight_decay", value)
        if value < 0.0:
            raise ValueError(f"{self.kind}: weight_decay must be >= 0, got {value!r}")
        self.weight_decay = f32(value)

    def _update(self, i: int, p: np.ndarray, g: np.ndarray, nthreads: int) -> None:
        one_minus_d = float(np.float32(1.0) - np.float32(self.dampening))
        if self.momentum == 0.0:
            _optim.sgd_step(p, g, None, self._lr, 0.0, one_minus_d, self.weight_decay, False,
                            False, nthreads)
            return
        first = self._initialized[i] == 0
        _optim.sgd_step(p, g, self._buffers[i].reshape(-1), self._lr, self.momentum,
                        one_minus_d, self.weight_decay, self.nesterov, first, nthreads)
        self._initialized[i][...] = 1

    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        state: OrderedDict[str, np.ndarray] = OrderedDict()
        if self.momentum != 0.0:
            for i, (buf, flag) in enumerate(zip(self._buffers, self._initialized)):
                state[f"momentum_buffer.{i}"] = buf
                state[f"initialized.{i}"] = flag
        return state

    def hyper_parameters(self) -> "OrderedDict[str, float]":
        return OrderedDict(lr=self._lr, momentum=self.momentum, dampening=self.dampening,
                           weight_decay=self.weight_decay, nesterov=float(self.nesterov))

    def _set_hyper_parameters(self, values: Mapping[str, float]) -> None:
        self._set_weight_decay(values["weight_decay"])
        self.lr = values["lr"]
