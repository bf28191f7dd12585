"""Adadelta as torch.optim.Adadelta (docs/spec/optimizers.md, "Adadelta").

Per element, float32, in this order (g negated when maximize):
    g = g + wd·p                                   (wd != 0)
    v = v·ρ + ((1 − ρ)·g)·g
    δ = (√(u + ε) / √(v + ε))·g
    u = u·ρ + ((1 − ρ)·δ)·δ
    p = p + (−lr)·δ
State: square_avg (v) and acc_delta (u).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

import numpy as np

from ._elementwise import F32, FLAG, NONNEG, UNIT_CLOSED, ElementwiseOptimizer, hp
from .optimizer import ParamGroup, lazy_state


class Adadelta(ElementwiseOptimizer):
    kind = "Adadelta"
    _settings = {"rho": UNIT_CLOSED, "eps": NONNEG, "weight_decay": NONNEG, "maximize": FLAG}

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0.0,
                 foreach: Optional[bool] = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize),
                         dict(foreach=foreach, capturable=capturable,
                              differentiable=differentiable))

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        return {"square_avg": lazy_state(p.shape), "acc_delta": lazy_state(p.shape)}

    def _rule(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> None:
        g = self._gradient(group, p, g)
        rho, eps = F32(hp(group, "rho")), F32(hp(group, "eps"))
        keep = F32(1.0 - hp(group, "rho"))
        v, u = self._own("square_avg", i), self._own("acc_delta", i)
        v[...] = v * rho + (keep * g) * g
        delta = (np.sqrt(u + eps) / np.sqrt(v + eps)) * g
        u[...] = u * rho + (keep * delta) * delta
        p[...] = p + F32(-hp(group, "lr")) * delta
