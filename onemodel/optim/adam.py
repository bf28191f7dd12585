"""Adam (L2 weight decay) and AdamW (decoupled weight decay), with optional AMSGrad.

Per element (training.txt section 3), t = step_count + 1, each operation one float32
operation in this order:
    g = g + wd·p                           (Adam, wd != 0)
    p = p·(1 − lr·wd)                      (AdamW, wd != 0; the factor rounded to float32 once)
    m = β₁·m + (1−β₁)·g
    v = β₂·v + ((1−β₂)·g)·g
    v̂ = amsgrad ? max(vmax, v) : v         (vmax = v̂)
    p = p − (stepSize·m) / (√v̂ / sqrtBc2 + ε)
with bc = 1 − βᵗ in double (βᵗ by right-to-left binary exponentiation), stepSize =
float32(lr / bc1) and sqrtBc2 = float32(√bc2) (clarifications.md).
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Iterable, Mapping, Tuple

import numpy as np

from .._kernels import _optim
from ..tensor import Tensor
from .lr import ipow
from .optimizer import Optimizer, check_number, f32


class Adam(Optimizer):
    kind = "Adam"
    decoupled = False
    fixed_hyper_parameters = ("beta1", "beta2", "eps", "amsgrad")

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False) -> None:
        super().__init__(params, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{self.kind}: betas must be a pair, got {betas!r}")
        for k, beta in enumerate(betas):
            beta = check_number(self.kind, f"betas[{k}]", beta)
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"{self.kind}: betas[{k}] must be in [0, 1), got {beta!r}")
        eps = check_number(self.kind, "eps", eps)
        if eps < 0.0:
            raise ValueError(f"{self.kind}: eps must be >= 0, got {eps!r}")
        self.beta1, self.beta2 = f32(betas[0]), f32(betas[1])
        # float32(β) can round up to 1 (0.99999999 does); the bias correction would be 0.
        for k, beta in enumerate((self.beta1, self.beta2)):
            if beta >= 1.0:
                raise ValueError(f"{self.kind}: betas[{k}] rounds to 1 in float32")
        self.eps = f32(eps)
        self.weight_decay = 0.0
        self._set_weight_decay(weight_decay)
        self.amsgrad = bool(amsgrad)
        self._exp_avg = [np.zeros(p.shape, np.float32) for p in self.params]
        self._exp_avg_sq = [np.zeros(p.shape, np.float32) for p in self.params]
        self._max_exp_avg_sq = ([np.zeros(p.shape, np.float32) for p in self.params]
                                if self.amsgrad else None)
        self._coefficients: tuple = ()

    def _set_weight_decay(self, value: float) -> None:
        value = check_number(self.kind, "weight_decay", value)
        if value < 0.0:
            raise ValueError(f"{self.kind}: weight_decay must be >= 0, got {value!r}")
        self.weight_decay = f32(value)

    def step(self) -> None:
        t = self._step_count + 1
        bc1 = 1.0 - ipow(self.beta1, t)
        bc2 = 1.0 - ipow(self.beta2, t)
        lr, wd = np.float32(self._lr), np.float32(self.weight_decay)
        decoupled = self.decoupled and self.weight_decay != 0.0
        self._coefficients = (
            f32(float(lr) / bc1), f32(math.sqrt(bc2)),
            float(np.float32(1.0) - np.float32(self.beta1)),
            float(np.float32(1.0) - np.float32(self.beta2)),
            0.0 if self.decoupled else self.weight_decay,
            float(np.float32(1.0) - lr * wd), decoupled)
        super().step()

    def _update(self, i: int, p: np.ndarray, g: np.ndarray, nthreads: int) -> None:
        step_size, sqrt_bc2, beta1_c, beta2_c, l2, decay, decoupled = self._coefficients
        vmax = None if self._max_exp_avg_sq is None else self._max_exp_avg_sq[i].reshape(-1)
        _optim.adam_step(p, g, self._exp_avg[i].reshape(-1), self._exp_avg_sq[i].reshape(-1),
                         vmax, self.beta1, self.beta2, beta1_c, beta2_c, self.eps, step_size,
                         sqrt_bc2, l2, decay, decoupled, nthreads)

    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        state: OrderedDict[str, np.ndarray] = OrderedDict()
        for i in range(len(self.params)):
            state[f"exp_avg.{i}"] = self._exp_avg[i]
            state[f"exp_avg_sq.{i}"] = self._exp_avg_sq[i]
            if self._max_exp_avg_sq is not None:
                state[f"max_exp_avg_sq.{i}"] = self._max_exp_avg_sq[i]
        return state

    def hyper_parameters(self) -> "OrderedDict[str, float]":
        return OrderedDict(lr=self._lr, beta1=self.beta1, beta2=self.beta2, eps=self.eps,
                           weight_decay=self.weight_decay, amsgrad=float(self.amsgrad))

    def _set_hyper_parameters(self, values: Mapping[str, float]) -> None:
        self._set_weight_decay(values["weight_decay"])
        self.lr = values["lr"]


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 − lr·wd before the moment update."""

    kind = "AdamW"
    decoupled = True

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, amsgrad: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)
