"""NAdam as torch.optim.NAdam (docs/spec/optimizers.md, "NAdam").

With t = step_count + 1, in double: bc2 = 1 − β₂ᵗ (binary exponentiation),
μ_k = β₁·(1 − 0.5·0.96^(k·ψ)) for k = t and t + 1 (0.96^x as exp(x·ln 0.96), `exp_double`).
Per parameter, the float32 product π = float32(π·float32(μ_t)) (state mu_product, 1 at creation);
then per element, float32, in this order (g negated when maximize):
    p = p·float32(1 − lr·wd)                  (decoupled_weight_decay, wd != 0)
    g = g + wd·p                              (otherwise, wd != 0)
    m = lerp(m, g, 1 − β₁)
    v = v·β₂ + ((1 − β₂)·g)·g
    d = √(v / float32(bc2)) + ε
    p = p + float32(−lr·(1 − μ_t) / (1 − π))·(g / d)
    p = p + float32(−lr·μ_{t+1} / (1 − π·μ_{t+1}))·(m / d)      (π·μ_{t+1} in double)
State: exp_avg (m), exp_avg_sq (v), mu_product (π, float32 of shape ()).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Tuple

import numpy as np

from ._elementwise import (
    BETAS,
    F32,
    FLAG,
    NONNEG,
    ElementwiseOptimizer,
    bias_correction,
    exp_double,
    hp,
    lerp,
)
from .optimizer import ParamGroup, lazy_state

# ln 0.96 as the double nearest to it: PyTorch's momentum schedule raises 0.96 to real powers.
LN_096 = -0.040821994520255166


class NAdam(ElementwiseOptimizer):
    kind = "NAdam"
    _settings = {"betas": BETAS, "eps": NONNEG, "weight_decay": NONNEG,
                 "momentum_decay": NONNEG, "decoupled_weight_decay": FLAG, "maximize": FLAG}

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: Optional[bool] = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize),
                         dict(foreach=foreach, capturable=capturable,
                              differentiable=differentiable))

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        return {"exp_avg": lazy_state(p.shape), "exp_avg_sq": lazy_state(p.shape),
                "mu_product": np.ones((), F32)}

    @staticmethod
    def _mu(beta1: float, psi: float, k: int) -> float:
        return beta1 * (1.0 - 0.5 * exp_double(k * psi * LN_096))

    def _rule(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> None:
        g = self._gradient(group, p, g)
        t = self._step_count + 1
        lr, beta1, beta2 = hp(group, "lr"), *(float(b) for b in group["betas"])
        psi = hp(group, "momentum_decay")
        mu, mu_next = self._mu(beta1, psi, t), self._mu(beta1, psi, t + 1)
        product = self._own("mu_product", i)
        product[...] = product * F32(mu)
        m, v = self._own("exp_avg", i), self._own("exp_avg_sq", i)
        m[...] = lerp(m, g, 1.0 - beta1)
        v[...] = v * F32(beta2) + (F32(1.0 - beta2) * g) * g
        d = np.sqrt(v / F32(bias_correction(beta2, t))) + F32(hp(group, "eps"))
        pi = float(product[0])
        p[...] = p + F32(-lr * (1.0 - mu) / (1.0 - pi)) * (g / d)
        p[...] = p + F32(-lr * mu_next / (1.0 - pi * mu_next)) * (m / d)
