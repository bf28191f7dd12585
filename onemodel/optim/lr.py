"""Learning-rate schedules as pure functions of the step.

`lr_at(s)` is the rate for the optimizer step with index s (0 for the first step), computed in
IEEE double with + − × ÷ only (the cosine is `cos_pi`, the same bits on every platform) and
rounded to float32 at the end; it returns the Python float of that float32. `apply(optimizer)`
sets `optimizer.lr = lr_at(optimizer.step_count)`. A schedule holds no state, so a checkpoint
needs only the optimizer's step count.

The schedules are named so as not to be mistaken for PyTorch's schedulers
(`onemodel.optim.lr_scheduler`), which count their own step() calls: `step_decay`,
`multistep_decay`, `cosine`, `warmup`, `one_cycle`, `warmup_cosine`, `linear_ramp`,
`lambda_factor`, `sequential`. Their former names (StepLR, CosineLR, WarmupCosineLR, ...) still
work for a release, with a DeprecationWarning.
"""
from __future__ import annotations

import bisect
import math
import warnings
from typing import Any, Callable, Iterable, Sequence

import numpy as np

# π as the double nearest to it (docs/spec/training.txt section 5).
PI = 3.14159265358979323846


def cos_pi(t: float) -> float:
    """cos(π·t) for t in [0, 1] (clamped outside) by the degree-26 Maclaurin series in Horner
    form, from + − × ÷ alone, so every platform gets the same bits (truncation below 1e-21)."""
    t = float(t)
    if t <= 0.0:
        return 1.0
    if t >= 1.0:
        return -1.0
    y, sign = (1.0 - t, -1.0) if t > 0.5 else (t, 1.0)
    a = PI * y
    a2 = a * a
    r = 1.0
    for k in range(13, 0, -1):
        r = 1.0 - a2 / ((2 * k - 1) * (2 * k)) * r
    return sign * r


def ipow(x: float, n: int) -> float:
    """xⁿ in double by right-to-left binary exponentiation, each product rounded to nearest."""
    r = 1.0
    while n:
        if n & 1:
            r *= x
        n >>= 1
        if n:
            x *= x
    return r


def _f32(x: float) -> float:
    return float(np.float32(x))


def _number(owner: str, name: str, value: Any, low: float = -math.inf,
            low_open: bool = False, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{owner}: {name} must be a number, got {value!r}")
    v = float(value)
    if not (v > low if low_open else v >= low) or not v <= high or math.isinf(v):
        bound = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}"
                                                         if high != math.inf else "")
        raise ValueError(f"{owner}: {name} must be finite and {bound}, got {value!r}")
    return v


def _steps(owner: str, name: str, value: Any, low: int) -> int:
    """A count of steps; a float with an integer value (PyTorch's tutorials write
    StepLR(optimizer, 1.0)) counts as that integer."""
    whole = isinstance(value, (int, np.integer)) or (
        isinstance(value, (float, np.floating)) and float(value).is_integer())
    if isinstance(value, bool) or not whole or value < low:
        raise ValueError(f"{owner}: {name} must be an integer >= {low}, got {value!r}")
    return int(value)


class Schedule:
    """A learning rate as a pure function of the number of optimizer steps already taken."""

    def lr_at(self, step: int) -> float:
        """The rate (rounded to float32) for the step after `step` optimizer steps.

        Parameters
        ----------
        step : int
            The optimizer's step count, at least 0.
        """
        return _f32(self._rate(_steps(type(self).__name__, "step", step, 0)))

    def _rate(self, s: int) -> float:
        raise NotImplementedError

    def apply(self, optimizer: Any) -> float:
        """Sets the optimizer's rate for its next step; returns it."""
        lr = self.lr_at(optimizer.step_count)
        optimizer.lr = lr
        return lr


class step_decay(Schedule):
    """base·γ^⌊s/size⌋."""

    def __init__(self, base_lr: float, step_size: int, gamma: float) -> None:
        self.base_lr = _number("step_decay", "base_lr", base_lr, 0.0)
        self.step_size = _steps("step_decay", "step_size", step_size, 1)
        self.gamma = _number("step_decay", "gamma", gamma, 0.0)

    def _rate(self, s: int) -> float:
        return self.base_lr * ipow(self.gamma, s // self.step_size)


def _milestones(owner: str, value: Any) -> list[int]:
    """Step indices >= 0 in any order, sorted; a repeated one counts twice (PyTorch's
    MultiStepLR holds them in a Counter)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"{owner}: milestones must be a list of steps, got {value!r}")
    return sorted(_steps(owner, f"milestones[{k}]", m, 0) for k, m in enumerate(value))


class multistep_decay(Schedule):
    """base·γ^k with k the number of milestones <= s."""

    def __init__(self, base_lr: float, milestones: Iterable[int], gamma: float = 0.1) -> None:
        self.base_lr = _number("multistep_decay", "base_lr", base_lr, 0.0)
        self.milestones = _milestones("multistep_decay", milestones)
        self.gamma = _number("multistep_decay", "gamma", gamma, 0.0)

    def _rate(self, s: int) -> float:
        return self.base_lr * ipow(self.gamma, bisect.bisect_right(self.milestones, s))


class cosine(Schedule):
    """min + (base−min)(1 + cos(π·s/T))/2 with s/T clamped to 1: it stays at min after T."""

    def __init__(self, base_lr: float, total_steps: int, min_lr: float = 0.0) -> None:
        self.base_lr = _number("cosine", "base_lr", base_lr, 0.0)
        self.total_steps = _steps("cosine", "total_steps", total_steps, 1)
        self.min_lr = _number("cosine", "min_lr", min_lr, 0.0)

    def _rate(self, s: int) -> float:
        x = min(s / self.total_steps, 1.0)
        return self.min_lr + (self.base_lr - self.min_lr) * (1.0 + cos_pi(x)) / 2.0


class warmup(Schedule):
    """r₀·(f + (1−f)·s/W) for s < W with r₀ = after.lr_at(0); then after.lr_at(s − W)."""

    def __init__(self, after: Schedule, warmup_steps: int, start_factor: float) -> None:
        if not isinstance(after, Schedule):
            raise ValueError(f"warmup: after must be a schedule, got {type(after).__name__}")
        self.after = after
        self.warmup_steps = _steps("warmup", "warmup_steps", warmup_steps, 0)
        self.start_factor = _number("warmup", "start_factor", start_factor, 0.0, high=1.0)

    def _rate(self, s: int) -> float:
        if s >= self.warmup_steps:
            return self.after.lr_at(s - self.warmup_steps)
        f = self.start_factor
        return self.after.lr_at(0) * (f + (1.0 - f) * s / self.warmup_steps)


class one_cycle(Schedule):
    """Half-cosine from max/div up to max over steps 0..pct·T−1, then down to
    max/div/final_div at T−1 (PyTorch's OneCycleLR with two phases; momentum not cycled)."""

    def __init__(self, max_lr: float, total_steps: int, pct_start: float = 0.3,
                 div_factor: float = 25.0, final_div_factor: float = 1e4) -> None:
        self.max_lr = _number("one_cycle", "max_lr", max_lr, 0.0, low_open=True)
        self.total_steps = _steps("one_cycle", "total_steps", total_steps, 2)
        self.pct_start = _number("one_cycle", "pct_start", pct_start, 0.0, True, 1.0)
        self.div_factor = _number("one_cycle", "div_factor", div_factor, 0.0, low_open=True)
        self.final_div_factor = _number("one_cycle", "final_div_factor", final_div_factor,
                                        0.0, low_open=True)
        self.initial_lr = self.max_lr / self.div_factor
        self.min_lr = self.initial_lr / self.final_div_factor
        self.up = self.pct_start * self.total_steps - 1.0
        self.end = self.total_steps - 1.0
        if not 0.0 < self.up < self.end:
            raise ValueError(f"one_cycle: pct_start={pct_start!r} with total_steps="
                             f"{total_steps!r} leaves no rising or no falling phase")

    @staticmethod
    def _anneal(a: float, b: float, x: float) -> float:
        return b + (a - b) / 2.0 * (cos_pi(x) + 1.0)

    def _rate(self, s: int) -> float:
        if s <= self.up:
            return self._anneal(self.initial_lr, self.max_lr, s / self.up)
        return self._anneal(self.max_lr, self.min_lr, (s - self.up) / (self.end - self.up))


class warmup_cosine(Schedule):
    """base·(s+1)/W for s < W, then base·(f + (1−f)·(1 + cos(πp))/2) with p = (s−W)/(T−W)
    clamped to 1."""

    def __init__(self, base_lr: float, warmup_steps: int, total_steps: int,
                 final_factor: float) -> None:
        self.base_lr = _number("warmup_cosine", "base_lr", base_lr, 0.0)
        self.warmup_steps = _steps("warmup_cosine", "warmup_steps", warmup_steps, 0)
        self.total_steps = _steps("warmup_cosine", "total_steps", total_steps,
                                  self.warmup_steps + 1)
        self.final_factor = _number("warmup_cosine", "final_factor", final_factor, 0.0,
                                    high=1.0)

    def _rate(self, s: int) -> float:
        w = self.warmup_steps
        if s < w:
            return self.base_lr * (s + 1) / w
        p = (s - w) / (self.total_steps - w)
        f = self.final_factor
        return self.base_lr * (f + (1.0 - f) * (1.0 + cos_pi(p)) / 2.0)


class linear_ramp(Schedule):
    """base·(start + (end−start)·min(s, T)/T): PyTorch's LinearLR in closed form."""

    def __init__(self, base_lr: float, start_factor: float = 1.0 / 3.0,
                 end_factor: float = 1.0, total_iters: int = 5) -> None:
        self.base_lr = _number("linear_ramp", "base_lr", base_lr, 0.0)
        self.start_factor = _number("linear_ramp", "start_factor", start_factor, 0.0, True, 1.0)
        self.end_factor = _number("linear_ramp", "end_factor", end_factor, 0.0, high=1.0)
        self.total_iters = _steps("linear_ramp", "total_iters", total_iters, 1)

    def _rate(self, s: int) -> float:
        f = self.start_factor
        return self.base_lr * (f + (self.end_factor - f) * min(s, self.total_iters)
                               / self.total_iters)


class lambda_factor(Schedule):
    """base·lr_lambda(s); pure as long as lr_lambda is."""

    def __init__(self, base_lr: float, lr_lambda: Callable[[int], float]) -> None:
        if not callable(lr_lambda):
            raise ValueError(f"lambda_factor: lr_lambda must be callable, got {lr_lambda!r}")
        self.base_lr = _number("lambda_factor", "base_lr", base_lr, 0.0)
        self.lr_lambda = lr_lambda

    def _rate(self, s: int) -> float:
        return self.base_lr * _number("lambda_factor", f"lr_lambda({s})", self.lr_lambda(s), 0.0)


class sequential(Schedule):
    """schedules[k].lr_at(s − milestones[k−1]) for milestones[k−1] <= s < milestones[k]: each
    schedule starts from its step 0 at its milestone, as in PyTorch's SequentialLR."""

    def __init__(self, schedules: Sequence[Schedule], milestones: Sequence[int]) -> None:
        schedules, milestones = list(schedules), list(milestones)
        if not schedules or not all(isinstance(x, Schedule) for x in schedules):
            raise ValueError(f"sequential: schedules must be a non-empty list of schedules, "
                             f"got {schedules!r}")
        if len(milestones) != len(schedules) - 1:
            raise ValueError(f"sequential: milestones must hold {len(schedules) - 1} "
                             f"steps (one fewer than schedules), got {milestones!r}")
        for k, m in enumerate(milestones):
            _steps("sequential", f"milestones[{k}]", m, milestones[k - 1] + 1 if k else 1)
        self.schedules, self.milestones = schedules, [int(m) for m in milestones]

    def _rate(self, s: int) -> float:
        k = bisect.bisect_right(self.milestones, s)
        return self.schedules[k].lr_at(s - (self.milestones[k - 1] if k else 0))


# The former names, deprecated: they read as PyTorch's schedulers, which these are not.
_DEPRECATED = {"StepLR": step_decay, "MultiStepLR": multistep_decay, "CosineLR": cosine,
               "WarmupLR": warmup, "OneCycleLR": one_cycle, "WarmupCosineLR": warmup_cosine,
               "LinearLR": linear_ramp, "LambdaLR": lambda_factor, "SequentialLR": sequential}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(f"onemodel.optim.lr.{name} is deprecated: it is the pure schedule "
                      f"onemodel.optim.lr.{new.__name__} (torch's scheduler of that name is "
                      f"onemodel.optim.lr_scheduler.{name})", DeprecationWarning, stacklevel=2)
        return new
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
