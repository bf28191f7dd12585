"""RMSprop as torch.optim.RMSprop (docs/spec/optimizers.md, "RMSprop").

Per element, float32, in this order (g the gradient, negated when maximize):
    g = g + wd·p                                  (wd != 0)
    v = v·α + ((1 − α)·g)·g
    centered: a = lerp(a, g, 1 − α);  s = √(v + (−1·a)·a)      else s = √v
    s = s + ε
    momentum μ > 0: b = b·μ + g / s;  p = p + (−lr)·b            else p = p + (−lr)·(g / s)
State: square_avg, momentum_buffer (μ > 0), grad_avg (centered).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

import numpy as np

from ._elementwise import F32, FLAG, NONNEG, UNIT_CLOSED, ElementwiseOptimizer, hp, lerp
from .optimizer import ParamGroup, lazy_state


class RMSprop(ElementwiseOptimizer):
    kind = "RMSprop"
    _settings = {"alpha": UNIT_CLOSED, "eps": NONNEG, "weight_decay": NONNEG,
                 "momentum": NONNEG, "centered": FLAG, "maximize": FLAG}

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False, capturable: bool = False,
                 foreach: Optional[bool] = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize),
                         dict(capturable=capturable, foreach=foreach,
                              differentiable=differentiable))

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        state = {"square_avg": lazy_state(p.shape)}
        if hp(group, "momentum") > 0.0:
            state["momentum_buffer"] = lazy_state(p.shape)
        if group["centered"]:
            state["grad_avg"] = lazy_state(p.shape)
        return state

    def _rule(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> None:
        g = self._gradient(group, p, g)
        alpha = hp(group, "alpha")
        v = self._own("square_avg", i)
        v[...] = v * F32(alpha) + (F32(1.0 - alpha) * g) * g
        a = self._slot("grad_avg", i)
        if a is not None:
            a[...] = lerp(a, g, 1.0 - alpha)
            s = np.sqrt(v + (F32(-1.0) * a) * a)
        else:
            s = np.sqrt(v)
        s = s + F32(hp(group, "eps"))
        rate = F32(-hp(group, "lr"))
        b = self._slot("momentum_buffer", i)
        if b is not None:
            b[...] = b * F32(hp(group, "momentum")) + g / s
            p[...] = p + rate * b
        else:
            p[...] = p + rate * (g / s)
