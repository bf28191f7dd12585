"""The schedulers whose rate is a closed form of the call count alone: step, multistep,
exponential, constant, linear, polynomial and cosine decays, and the user's factors."""
from __future__ import annotations

import types
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence, Union

from .. import lr as _lr
from ..optimizer import Optimizer
from .base import (
    Lambda,
    LRScheduler,
    _check_optimizer,
    _check_state,
    _cos_pi,
    _lambda_value,
    _lambdas,
    _power,
)


class StepLR(LRScheduler):
    """base·γ^⌊n/step_size⌋."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = _lr._steps("StepLR", "step_size", step_size, 1)
        self.gamma = _lr._number("StepLR", "gamma", gamma, 0.0)
        super().__init__(optimizer, last_epoch)

    def _factor(self, n: int) -> float:
        return _lr.ipow(self.gamma, n // self.step_size)


class MultiStepLR(LRScheduler):
    """base·γ^k, k the number of milestones <= n (a repeated milestone counts twice)."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(_lr._milestones("MultiStepLR", milestones))
        self.gamma = _lr._number("MultiStepLR", "gamma", gamma, 0.0)
        super().__init__(optimizer, last_epoch)

    def _factor(self, n: int) -> float:
        passed = sum(k for m, k in self.milestones.items() if m <= n)
        return _lr.ipow(self.gamma, passed)


class ExponentialLR(LRScheduler):
    """base·γⁿ."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = _lr._number("ExponentialLR", "gamma", gamma, 0.0)
        super().__init__(optimizer, last_epoch)

    def _factor(self, n: int) -> float:
        return _lr.ipow(self.gamma, n)


class ConstantLR(LRScheduler):
    """base·factor for n < total_iters, then base."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        self.factor = _lr._number("ConstantLR", "factor", factor, 0.0, high=1.0)
        self.total_iters = _lr._steps("ConstantLR", "total_iters", total_iters, 0)
        super().__init__(optimizer, last_epoch)

    def _factor(self, n: int) -> float:
        return self.factor if n < self.total_iters else 1.0


class LinearLR(LRScheduler):
    """base·(start + (end − start)·min(n, T)/T)."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        self.start_factor = _lr._number("LinearLR", "start_factor", start_factor, 0.0, True,
                                        1.0)
        self.end_factor = _lr._number("LinearLR", "end_factor", end_factor, 0.0, high=1.0)
        self.total_iters = _lr._steps("LinearLR", "total_iters", total_iters, 1)
        super().__init__(optimizer, last_epoch)

    def _factor(self, n: int) -> float:
        s, t = self.start_factor, self.total_iters
        return s + (self.end_factor - s) * min(t, n) / t


class PolynomialLR(LRScheduler):
    """base·(1 − min(n, T)/T)^power."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters = _lr._steps("PolynomialLR", "total_iters", total_iters, 1)
        self.power = _lr._number("PolynomialLR", "power", power, 0.0)
        super().__init__(optimizer, last_epoch)

    def _factor(self, n: int) -> float:
        return _power(1.0 - min(self.total_iters, n) / self.total_iters, self.power)


class CosineAnnealingLR(LRScheduler):
    """eta_min + (base − eta_min)·(1 + cos(π·n/T_max))/2 for every n: torch's closed form,
    which turns back up after T_max (the base rate again at 2·T_max)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max = _lr._steps("CosineAnnealingLR", "T_max", T_max, 1)
        self.eta_min = _lr._number("CosineAnnealingLR", "eta_min", eta_min, 0.0)
        super().__init__(optimizer, last_epoch)

    def _floor(self) -> float:
        return self.eta_min

    def _rates(self, n: int) -> list[float]:
        half = (1.0 + _cos_pi(n % (2 * self.T_max) / self.T_max)) / 2.0
        return [self.eta_min + (base - self.eta_min) * half for base in self.base_lrs]


class LambdaLR(LRScheduler):
    """base·lr_lambda(n), one function for all groups or one per group."""

    _chainable = False

    def __init__(self, optimizer: Optimizer, lr_lambda: Union[Lambda, Sequence[Lambda]],
                 last_epoch: int = -1) -> None:
        self.lr_lambdas = _lambdas("LambdaLR", _check_optimizer("LambdaLR", optimizer),
                                   lr_lambda)
        super().__init__(optimizer, last_epoch)

    def _rates(self, n: int) -> list[float]:
        return [base * _lambda_value(type(self).__name__, f, n)
                for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict:
        """As torch's: a function is left out (None), a callable object's __dict__ kept."""
        state = super().state_dict()
        state["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(vars(f))
                               for f in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        owner = type(self).__name__
        _check_state(owner, self.state_dict(), state_dict)
        saved = state_dict["lr_lambdas"]
        if not isinstance(saved, (list, tuple)) or len(saved) != len(self.lr_lambdas) or \
                not all(s is None or isinstance(s, Mapping) for s in saved):
            raise ValueError(f"{owner}.load_state_dict: lr_lambdas must hold None or a dict "
                             f"for each of {len(self.lr_lambdas)} functions, got {saved!r}")
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for f, s in zip(self.lr_lambdas, saved):
            if s is not None:
                vars(f).update(s)


class MultiplicativeLR(LambdaLR):
    """The current rate times lr_lambda(n) at every call after the first (no closed form: the
    rate is a product of the function's values)."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Union[Lambda, Sequence[Lambda]],
                 last_epoch: int = -1) -> None:
        super().__init__(optimizer, lr_lambda, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._step_count <= 1:  # torch's first step keeps the rates
            return [group["lr"] for group in groups]
        return [group["lr"] * _lambda_value(type(self).__name__, f, self.last_epoch)
                for group, f in zip(groups, self.lr_lambdas)]
