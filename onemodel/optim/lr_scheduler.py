"""PyTorch's scheduler objects over an optimizer, as thin stateless wrappers of the pure
schedules in `lr` (docs/spec/training.txt section 5), and ReduceLROnPlateau, which cannot be one.

Each scheduler builds one pure schedule per parameter group from the group's initial rate (its
lr at the optimizer's construction) and `step()` sets every group's lr to its schedule at the
optimizer's `step_count`. The usual loop, `optimizer.step(); scheduler.step()`, then sets what
PyTorch's scheduler sets, within float32 rounding: the rates are held as float32, and the
closed forms replace PyTorch's recursive updates. Where they differ from PyTorch, and why:

- The rate is read at the optimizer's step count, not counted by `scheduler.step()` calls, so a
  resumed run needs no scheduler state (`state_dict()` is empty) and calling `step()` twice
  changes nothing. A scheduler meant to advance once per epoch must therefore be written in
  optimizer steps (StepLR's step_size and MultiStepLR's milestones = epochs × batches per
  epoch; PyTorch's ExponentialLR stepped once per epoch is StepLR(step_size=batches per epoch)).
  A scheduler stepped every few optimizer steps, again and again, warns once that it is.
- The base rates are the groups' rates at the optimizer's construction (PyTorch takes them
  when the first scheduler is built, the same unless a group's lr was set in between).
- CosineAnnealingLR stays at eta_min after T_max (PyTorch's recursive form turns back up).
- OneCycleLR never cycles momentum or betas (PyTorch's default cycle_momentum=True does):
  they are fixed settings of the optimizer's state and checkpoint; only cos annealing and two
  phases exist (PyTorch's defaults).
- ReduceLROnPlateau is stateful, as it must be: its rate depends on the metrics given to
  step(metrics), not on the step count. It keeps PyTorch's counters (last_epoch counts its
  step() calls) and its state_dict() holds them alone (PyTorch's also holds the constructor's
  settings), so a resumed run must load it. It multiplies the groups' current rates as PyTorch
  does, each rounded to float32 when set, so k reductions differ by up to k float32 roundings.
  It is not an LRScheduler: it has no pure schedule, so SequentialLR cannot hold it.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Iterable, Optional, Sequence, SupportsFloat, Union

from . import lr as _lr
from .optimizer import Optimizer


def _per_group(owner: str, optimizer: Optimizer, name: str, value: Any) -> list:
    """A value for every group: one for all, or a list with one per group (PyTorch's rule)."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{owner}: {name} holds {len(value)} values for {n} parameter "
                             "groups")
        return list(value)
    return [value] * n


class LRScheduler:
    """Sets each group's lr to its pure schedule at the optimizer's step count."""

    def __init__(self, optimizer: Optimizer, schedules: Sequence[_lr.Schedule]) -> None:
        self.optimizer = optimizer
        self.schedules = list(schedules)
        self._seen, self._jumps = optimizer.step_count, 0
        self.step()  # PyTorch's schedulers set the rate of step 0 when built

    @staticmethod
    def _check_optimizer(owner: str, optimizer: Any) -> Optimizer:
        if not isinstance(optimizer, Optimizer):
            raise ValueError(f"{owner}: optimizer must be a onemodel optimizer, got "
                             f"{type(optimizer).__name__}")
        return optimizer

    @property
    def last_epoch(self) -> int:
        """PyTorch's count of scheduler steps: here the optimizer's step count."""
        return self.optimizer.step_count

    def get_last_lr(self) -> list[float]:
        """Every group's rate for the optimizer's next step (what step() sets)."""
        return [s.lr_at(self.optimizer.step_count) for s in self.schedules]

    def step(self) -> None:
        # Several optimizer steps between calls, twice (once is a resume): a script stepping the
        # scheduler once per epoch, as PyTorch's do, whose schedule here runs per batch.
        count = self.optimizer.step_count
        self._jumps += count - self._seen > 1
        if self._jumps == 2 and count - self._seen > 1:
            warnings.warn(f"{type(self).__name__}.step() is called every {count - self._seen} "
                          "optimizer steps, but the rate follows the optimizer's step count: "
                          "a schedule meant per epoch runs per batch here; give its sizes in "
                          "optimizer steps (see onemodel.optim.lr_scheduler)", stacklevel=2)
        self._seen = count
        for group, rate in zip(self.optimizer.param_groups, self.get_last_lr()):
            group["lr"] = rate

    def state_dict(self) -> dict:
        """Empty: the rate is a function of the optimizer's step count."""
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        if state_dict:
            raise ValueError(f"{type(self).__name__}.load_state_dict: a stateless scheduler "
                             f"expects an empty dict, got keys {list(state_dict)!r}")


def _bases(owner: str, optimizer: Any) -> list[float]:
    return LRScheduler._check_optimizer(owner, optimizer)._initial_lrs


class StepLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        super().__init__(optimizer, [_lr.StepLR(b, step_size, gamma)
                                     for b in _bases("StepLR", optimizer)])


class MultiStepLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, milestones: Iterable[int],
                 gamma: float = 0.1) -> None:
        milestones = _lr._milestones("MultiStepLR", milestones)  # read once: may be an iterator
        super().__init__(optimizer, [_lr.MultiStepLR(b, milestones, gamma)
                                     for b in _bases("MultiStepLR", optimizer)])


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        gamma = _lr._number("ExponentialLR", "gamma", gamma, 0.0)  # named as the caller knows it
        # base·γ^s is StepLR with a step of 1.
        super().__init__(optimizer, [_lr.StepLR(b, 1, gamma)
                                     for b in _bases("ExponentialLR", optimizer)])


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:
        T_max = _lr._steps("CosineAnnealingLR", "T_max", T_max, 1)  # named as the caller knows it
        super().__init__(optimizer, [_lr.CosineLR(b, T_max, eta_min)
                                     for b in _bases("CosineAnnealingLR", optimizer)])


class LinearLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3.0,
                 end_factor: float = 1.0, total_iters: int = 5) -> None:
        super().__init__(optimizer, [_lr.LinearLR(b, start_factor, end_factor, total_iters)
                                     for b in _bases("LinearLR", optimizer)])


class LambdaLR(LRScheduler):
    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Union[Callable[[int], float], Sequence[Callable[[int], float]]]
                 ) -> None:
        bases = _bases("LambdaLR", optimizer)
        lambdas = _per_group("LambdaLR", optimizer, "lr_lambda", lr_lambda)
        super().__init__(optimizer, [_lr.LambdaLR(b, f) for b, f in zip(bases, lambdas)])


class OneCycleLR(LRScheduler):
    def __init__(self, optimizer: Optimizer, max_lr: Union[float, Sequence[float]],
                 total_steps: Optional[int] = None, epochs: Optional[int] = None,
                 steps_per_epoch: Optional[int] = None, pct_start: float = 0.3,
                 div_factor: float = 25.0, final_div_factor: float = 1e4) -> None:
        LRScheduler._check_optimizer("OneCycleLR", optimizer)
        if total_steps is None:  # PyTorch's alternative; total_steps wins when both are given
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = (_lr._steps("OneCycleLR", "epochs", epochs, 1)
                           * _lr._steps("OneCycleLR", "steps_per_epoch", steps_per_epoch, 1))
        super().__init__(optimizer, [
            _lr.OneCycleLR(m, total_steps, pct_start, div_factor, final_div_factor)
            for m in _per_group("OneCycleLR", optimizer, "max_lr", max_lr)])


class SequentialLR(LRScheduler):
    """schedulers[k] from its own step 0 at milestones[k-1] (PyTorch's SequentialLR)."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int]) -> None:
        LRScheduler._check_optimizer("SequentialLR", optimizer)
        schedulers = list(schedulers)
        for k, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler) or s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{k}] must be a scheduler of the "
                                 "same optimizer")
        super().__init__(optimizer, [
            _lr.SequentialLR([s.schedules[g] for s in schedulers], milestones)
            for g in range(len(optimizer.param_groups))])


class ReduceLROnPlateau:
    """PyTorch's ReduceLROnPlateau: step(metrics) multiplies every group's rate by factor (not
    below its min_lr; changes of eps or less are skipped) once more than `patience` calls in a
    row brought no improvement beyond threshold, then waits `cooldown` calls.

    Stateful, unlike the other schedulers here: the rate depends on the metrics seen, so a
    resumed run must load its state_dict() (the counters; see the module notes).
    """

    _STATE = ("last_epoch", "best", "num_bad_epochs", "cooldown_counter")

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: Union[float, Sequence[float]] = 0,
                 eps: float = 1e-8) -> None:
        owner = "ReduceLROnPlateau"
        self.optimizer = LRScheduler._check_optimizer(owner, optimizer)
        for name, value, known in (("mode", mode, ("min", "max")),
                                   ("threshold_mode", threshold_mode, ("rel", "abs"))):
            if value not in known:
                raise ValueError(f"{owner}: {name} must be one of {known}, got {value!r}")
        self.mode, self.threshold_mode = mode, threshold_mode
        self.factor = _lr._number(owner, "factor", factor, 0.0)
        if self.factor >= 1.0:
            raise ValueError(f"{owner}: factor must be < 1, got {factor!r}")
        self.patience = _lr._steps(owner, "patience", patience, 0)
        self.threshold = _lr._number(owner, "threshold", threshold, 0.0)
        self.cooldown = _lr._steps(owner, "cooldown", cooldown, 0)
        self.min_lrs = [_lr._number(owner, "min_lr", m, 0.0)
                        for m in _per_group(owner, optimizer, "min_lr", min_lr)]
        self.eps = _lr._number(owner, "eps", eps, 0.0)
        self.last_epoch = 0
        self.best = math.inf if mode == "min" else -math.inf  # PyTorch's mode_worse
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _is_better(self, a: float) -> bool:
        """PyTorch's test, in its arithmetic: a beats best by more than the threshold."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (self.best * (1.0 - self.threshold) if rel else self.best - self.threshold)
        return a > (self.best * (1.0 + self.threshold) if rel else self.best + self.threshold)

    def step(self, metrics: SupportsFloat) -> None:
        try:
            current = float(metrics)  # a number or a one-element tensor
        except (TypeError, ValueError):
            raise ValueError(f"ReduceLROnPlateau.step: metrics must be a number, got "
                             f"{type(metrics).__name__}") from None
        self.last_epoch += 1
        if self._is_better(current):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in cooldown do not count
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(group["lr"] * self.factor, floor)
                if group["lr"] - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """Every group's rate after the last step() (at construction before the first)."""
        return list(self._last_lr)

    def state_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._STATE}

    def load_state_dict(self, state_dict: dict) -> None:
        owner = "ReduceLROnPlateau.load_state_dict"
        if set(state_dict) != set(self._STATE):
            raise ValueError(f"{owner}: expected the keys {list(self._STATE)}, got "
                             f"{list(state_dict)}")
        best = state_dict["best"]
        if isinstance(best, bool) or not isinstance(best, (int, float)):
            raise ValueError(f"{owner}: best must be a number, got {best!r}")
        counters = {k: _lr._steps(owner, k, state_dict[k], 0) for k in self._STATE if k != "best"}
        vars(self).update(best=float(best), **counters)


__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
           "LinearLR", "LambdaLR", "OneCycleLR", "SequentialLR", "ReduceLROnPlateau"]
