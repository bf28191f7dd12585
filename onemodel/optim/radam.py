"""RAdam as torch.optim.RAdam (docs/spec/optimizers.md, "RAdam").

With t = step_count + 1, in double: bc1 = 1 − β₁ᵗ, bc2 = 1 − β₂ᵗ (binary exponentiation),
ρ∞ = 2 / (1 − β₂) − 1, ρ_t = ρ∞ − 2·t·β₂ᵗ / bc2, and when ρ_t > 5
r = √((ρ_t − 4)·(ρ_t − 2)·ρ∞ / ((ρ∞ − 4)·(ρ∞ − 2)·ρ_t)). Per element, float32, in this order
(g negated when maximize):
    p = p·float32(1 − lr·wd)                  (decoupled_weight_decay, wd != 0)
    g = g + wd·p                              (otherwise, wd != 0)
    m = lerp(m, g, 1 − β₁)
    v = v·β₂ + ((1 − β₂)·g)·g
    u = m / float32(bc1)
    ρ_t > 5:  p = p − ((u·lr)·((1 / (√v + ε))·float32(√bc2)))·float32(r)
    else:     p = p − u·lr
State: exp_avg (m), exp_avg_sq (v).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional, Tuple

import numpy as np

from ._elementwise import BETAS, F32, FLAG, NONNEG, ElementwiseOptimizer, bias_correction, hp, lerp
from .lr import ipow
from .optimizer import ParamGroup, lazy_state


class RAdam(ElementwiseOptimizer):
    kind = "RAdam"
    _settings = {"betas": BETAS, "eps": NONNEG, "weight_decay": NONNEG,
                 "decoupled_weight_decay": FLAG, "maximize": FLAG}

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 foreach: Optional[bool] = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize),
                         dict(foreach=foreach, capturable=capturable,
                              differentiable=differentiable))

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        return {"exp_avg": lazy_state(p.shape), "exp_avg_sq": lazy_state(p.shape)}

    def _rule(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> None:
        g = self._gradient(group, p, g)
        t = self._step_count + 1
        lr, beta1, beta2 = hp(group, "lr"), *(float(b) for b in group["betas"])
        m, v = self._own("exp_avg", i), self._own("exp_avg_sq", i)
        m[...] = lerp(m, g, 1.0 - beta1)
        v[...] = v * F32(beta2) + (F32(1.0 - beta2) * g) * g
        bc2 = bias_correction(beta2, t)
        update = (m / F32(bias_correction(beta1, t))) * F32(lr)
        rho_inf = 2.0 / (1.0 - beta2) - 1.0
        rho_t = rho_inf - 2.0 * t * ipow(beta2, t) / bc2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf
                             / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
            adaptive = (F32(1.0) / (np.sqrt(v) + F32(hp(group, "eps")))) * F32(math.sqrt(bc2))
            update = (update * adaptive) * F32(rect)
        p[...] = p - update
