"""Adamax as torch.optim.Adamax (docs/spec/optimizers.md, "Adamax").

With t = step_count + 1, bc = 1 − β₁ᵗ in double (βᵗ by binary exponentiation) and
clr = lr / bc in double, per element, float32, in this order (g negated when maximize):
    g = g + wd·p                                   (wd != 0)
    m = lerp(m, g, 1 − β₁)
    u = max(u·β₂, |g| + ε)                        (NaN if either is NaN)
    p = p + float32(−clr)·(m / u)
State: exp_avg (m) and exp_inf (u).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Tuple

import numpy as np

from ._elementwise import BETAS, F32, FLAG, NONNEG, ElementwiseOptimizer, bias_correction, hp, lerp
from .optimizer import ParamGroup, lazy_state


class Adamax(ElementwiseOptimizer):
    kind = "Adamax"
    _settings = {"betas": BETAS, "eps": NONNEG, "weight_decay": NONNEG, "maximize": FLAG}

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, foreach: Optional[bool] = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize),
                         dict(foreach=foreach, differentiable=differentiable,
                              capturable=capturable))

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        return {"exp_avg": lazy_state(p.shape), "exp_inf": lazy_state(p.shape)}

    def _rule(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> None:
        g = self._gradient(group, p, g)
        beta1, beta2 = (float(b) for b in group["betas"])
        m, u = self._own("exp_avg", i), self._own("exp_inf", i)
        m[...] = lerp(m, g, 1.0 - beta1)
        u[...] = np.maximum(u * F32(beta2), np.abs(g) + F32(hp(group, "eps")))
        clr = hp(group, "lr") / bias_correction(beta1, self._step_count + 1)
        p[...] = p + F32(-clr) * (m / u)
