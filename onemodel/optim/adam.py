"""Adam (L2 weight decay) and AdamW (decoupled weight decay), with optional AMSGrad.

Per element, t = step_count + 1, each operation one float32
operation in this order:
    g = g + wd·p                           (Adam, wd != 0)
    p = p·(1 − lr·wd)                      (AdamW, wd != 0; the factor rounded to float32 once)
    m = β₁·m + (1−β₁)·g
    v = β₂·v + ((1−β₂)·g)·g
    v̂ = amsgrad ? max(vmax, v) : v         (vmax = v̂)
    p = p − (stepSize·m) / (√v̂ / sqrtBc2 + ε)
with bc = 1 − βᵗ in double (βᵗ by right-to-left binary exponentiation), stepSize =
float32(lr / bc1) and sqrtBc2 = float32(√bc2). Each parameter group
has its own lr, betas, ε, wd and amsgrad; t is the optimizer's.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Optional, Tuple

import numpy as np

from .._kernels import _optim
from ._elementwise import check_betas, check_ignored
from .lr import ipow
from .optimizer import GroupSetting, Optimizer, ParamGroup, check_number, f32, lazy_state


class Adam(Optimizer):
    """Adam, as `torch.optim.Adam`, with float32 state and a fixed order of operations.

    Parameters
    ----------
    params : iterable of Tensor or of dict
        The parameters, or parameter groups (dicts with "params" and any setting below).
    lr : float, optional
        The learning rate (default 1e-3).
    betas : pair of float, optional
        The decay rates of the first and second moments, each in [0, 1) (default (0.9, 0.999)).
    eps : float, optional
        Added to the square root of the second moment (default 1e-8).
    weight_decay : float, optional
        L2 penalty added to the gradient (default 0; AdamW decouples it).
    amsgrad : bool, optional
        Use the running maximum of the second moment (default False).
    foreach, capturable, differentiable, fused : optional
        PyTorch's implementation switches (keyword-only): checked and ignored on the CPU.

    Notes
    -----
    Unlike PyTorch, `betas`, `eps` and `amsgrad` are fixed once the optimizer is built (a
    scheduler may change `lr` and `weight_decay`).
    """

    kind = "Adam"
    decoupled = False
    _changeable = ("lr", "weight_decay")
    _fixed = ("beta1", "beta2", "eps", "amsgrad")
    weight_decay = GroupSetting()

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *,
                 foreach: Optional[bool] = None, capturable: bool = False,
                 differentiable: bool = False, fused: Optional[bool] = None) -> None:
        check_ignored(self.kind, dict(foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad))
        self._exp_avg = [lazy_state(p.shape) for p in self.params]
        self._exp_avg_sq = [lazy_state(p.shape) for p in self.params]
        self._max_exp_avg_sq: list[Optional[np.ndarray]] = [
            lazy_state(p.shape) if self.param_groups[g]["amsgrad"] else None
            for p, g in zip(self.params, self._group_of)]
        self._coefficients: list[tuple] = []

    def _check_group(self, where: str, values: dict) -> dict:
        betas = check_betas(where, values["betas"])
        eps = check_number(where, "eps", values["eps"])
        if eps < 0.0:
            raise ValueError(f"{where}: eps must be >= 0, got {eps!r}")
        return dict(super()._check_group(where, values), betas=betas,
                    eps=values["eps"],
                    weight_decay=self._check_setting(where, "weight_decay",
                                                     values["weight_decay"]),
                    amsgrad=bool(values["amsgrad"]))

    def _apply(self) -> None:
        t = self._step_count + 1
        self._coefficients = [self._group_coefficients(group, t) for group in self.param_groups]
        super()._apply()

    def _group_coefficients(self, group: ParamGroup, t: int) -> tuple:
        beta1, beta2 = (f32(beta) for beta in group["betas"])
        bc1 = 1.0 - ipow(beta1, t)
        bc2 = 1.0 - ipow(beta2, t)
        lr, wd = np.float32(group["lr"]), np.float32(group["weight_decay"])
        return (f32(float(lr) / bc1), f32(math.sqrt(bc2)),
                float(np.float32(1.0) - np.float32(beta1)),
                float(np.float32(1.0) - np.float32(beta2)),
                0.0 if self.decoupled else float(wd),
                float(np.float32(1.0) - lr * wd), self.decoupled and float(wd) != 0.0)

    def _update(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray,
                nthreads: int) -> None:
        step_size, sqrt_bc2, beta1_c, beta2_c, l2, decay, decoupled = \
            self._coefficients[self._group_of[i]]
        vmax = self._max_exp_avg_sq[i]
        beta1, beta2 = group["betas"]
        _optim.adam_step(p, g, self._exp_avg[i].reshape(-1), self._exp_avg_sq[i].reshape(-1),
                         None if vmax is None else vmax.reshape(-1), beta1, beta2, beta1_c,
                         beta2_c, group["eps"], step_size, sqrt_bc2, l2, decay, decoupled,
                         nthreads)

    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        self._allocate_state()
        state: OrderedDict[str, np.ndarray] = OrderedDict()
        for i in range(len(self.params)):
            state[f"exp_avg.{i}"] = self._exp_avg[i]
            state[f"exp_avg_sq.{i}"] = self._exp_avg_sq[i]
            vmax = self._max_exp_avg_sq[i]
            if vmax is not None:
                state[f"max_exp_avg_sq.{i}"] = vmax
        return state

    def _state_lists(self) -> "dict[str, list]":
        return {"exp_avg": self._exp_avg, "exp_avg_sq": self._exp_avg_sq,
                "max_exp_avg_sq": self._max_exp_avg_sq}

    def _group_hyper(self, group: Mapping[str, Any]) -> "OrderedDict[str, float]":
        beta1, beta2 = group["betas"]
        return OrderedDict(lr=f32(group["lr"]), beta1=f32(beta1), beta2=f32(beta2),
                           eps=f32(group["eps"]), weight_decay=f32(group["weight_decay"]),
                           amsgrad=float(bool(group["amsgrad"])))


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 − lr·wd before the moment update."""

    kind = "AdamW"
    decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, amsgrad: bool = False, *,
                 foreach: Optional[bool] = None, capturable: bool = False,
                 differentiable: bool = False, fused: Optional[bool] = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         capturable=capturable, differentiable=differentiable, fused=fused)
