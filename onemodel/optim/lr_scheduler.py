"""PyTorch's scheduler objects over an optimizer, as thin stateless wrappers of the pure
schedules in `lr` (docs/spec/training.txt section 5).

Each scheduler builds one pure schedule per parameter group from the group's initial rate (its
lr at the optimizer's construction) and `step()` sets every group's lr to its schedule at the
optimizer's `step_count`. The usual loop, `optimizer.step(); scheduler.step()`, then sets what
PyTorch's scheduler sets, within float32 rounding: the rates are held as float32, and the
closed forms replace PyTorch's recursive updates. Where they differ from PyTorch, and why:

- The rate is read at the optimizer's step count, not counted by `scheduler.step()` calls, so a
  resumed run needs no scheduler state (`state_dict()` is empty) and calling `step()` twice
  changes nothing. A scheduler meant to advance once per epoch must therefore be written in
  optimizer steps (StepLR's step_size = epochs × batches per epoch).
- The base rates are the groups' rates at the optimizer's construction (PyTorch takes them
  when the first scheduler is built, the same unless a group's lr was set in between).
- CosineAnnealingLR stays at eta_min after T_max (PyTorch's recursive form turns back up).
- OneCycleLR never cycles momentum or betas (PyTorch's default cycle_momentum=True does):
  they are fixed settings of the optimizer's state and checkpoint; only cos annealing and two
  phases exist (PyTorch's defaults).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence, Union

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
                 total_steps: int, pct_start: float = 0.3, div_factor: float = 25.0,
                 final_div_factor: float = 1e4) -> None:
        LRScheduler._check_optimizer("OneCycleLR", optimizer)
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


__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR", "LinearLR", "LambdaLR", "OneCycleLR",
           "SequentialLR"]
