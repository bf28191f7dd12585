"""Adagrad as torch.optim.Adagrad (docs/spec/optimizers.md, "Adagrad").

With t = step_count + 1 and clr = lr / (1 + (t − 1)·lr_decay) in double, per element, float32,
in this order (g negated when maximize):
    g = g + wd·p                      (wd != 0)
    s = s + g·g
    p = p + float32(−clr)·(g / (√s + ε))
State: sum, filled with initial_accumulator_value at creation.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

import numpy as np

from ._elementwise import F32, FLAG, NONNEG, ElementwiseOptimizer, hp
from .optimizer import ParamGroup, lazy_state


class Adagrad(ElementwiseOptimizer):
    kind = "Adagrad"
    _settings = {"lr_decay": NONNEG, "weight_decay": NONNEG,
                 "initial_accumulator_value": NONNEG, "eps": NONNEG, "maximize": FLAG}

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach: Optional[bool] = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 fused: Optional[bool] = None) -> None:
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize),
                         dict(foreach=foreach, differentiable=differentiable, fused=fused))

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        return {"sum": lazy_state(p.shape, hp(group, "initial_accumulator_value"))}

    def _rule(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> None:
        g = self._gradient(group, p, g)
        clr = hp(group, "lr") / (1.0 + self._step_count * hp(group, "lr_decay"))
        s = self._own("sum", i)
        s[...] = s + g * g
        p[...] = p + F32(-clr) * (g / (np.sqrt(s) + F32(hp(group, "eps"))))
