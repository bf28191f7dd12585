"""ReduceLROnPlateau: a rate that follows the metrics given to step(), not the call count."""
from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, Optional, Sequence, SupportsFloat, Union

from .. import lr as _lr
from ..optimizer import Optimizer, shortest
from .base import LRScheduler, _check_optimizer, _check_state, _per_group


class ReduceLROnPlateau(LRScheduler):
    """torch's ReduceLROnPlateau: step(metrics) multiplies every group's rate by factor (not
    below its min_lr; changes of eps or less skipped) once more than `patience` calls in a row
    brought no improvement beyond threshold, then waits `cooldown` calls."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: Union[float, Sequence[float]] = 0,
                 eps: float = 1e-8) -> None:
        owner = "ReduceLROnPlateau"
        _check_optimizer(owner, optimizer)
        for name, value, known in (("mode", mode, ("min", "max")),
                                   ("threshold_mode", threshold_mode, ("rel", "abs"))):
            if value not in known:
                raise ValueError(f"{owner}: {name} must be one of {known}, got {value!r}")
        self.factor = _lr._number(owner, "factor", factor, 0.0)
        if self.factor >= 1.0:
            raise ValueError(f"{owner}: factor must be < 1, got {factor!r}")
        self.optimizer = optimizer
        min_lrs = [_lr._number(owner, "min_lr", m, 0.0)
                   for m in _per_group(owner, optimizer, "min_lr", min_lr)]
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lrs[0]
        self.min_lrs = min_lrs
        self.patience = _lr._steps(owner, "patience", patience, 0)
        self.cooldown = _lr._steps(owner, "cooldown", cooldown, 0)
        self.eps = _lr._number(owner, "eps", eps, 0.0)
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold_mode = mode, threshold_mode
        self.threshold = _lr._number(owner, "threshold", threshold, 0.0)
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def _is_better(self, a: float) -> bool:
        """torch's test, in its arithmetic: a beats best by more than the threshold."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (self.best * (1.0 - self.threshold) if rel else self.best - self.threshold)
        return a > (self.best * (1.0 + self.threshold) if rel else self.best + self.threshold)

    def step(self, metrics: SupportsFloat,  # type: ignore[override]
             epoch: Optional[int] = None) -> None:
        try:
            current = float(metrics)  # a number or a one-element tensor
        except (TypeError, ValueError):
            raise ValueError(f"ReduceLROnPlateau.step: metrics must be a number, got "
                             f"{type(metrics).__name__}") from None
        if epoch is not None:
            warnings.warn("ReduceLROnPlateau.step(metrics, epoch) is deprecated, as in "
                          "PyTorch", UserWarning, stacklevel=2)
        self.last_epoch = (self.last_epoch + 1 if epoch is None else
                           _lr._steps("ReduceLROnPlateau.step", "epoch", epoch, 0))
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
                    group["lr"] = shortest(new)
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        owner = "ReduceLROnPlateau.load_state_dict"
        _check_state("ReduceLROnPlateau", self.state_dict(), state_dict)
        best = state_dict["best"]
        if isinstance(best, bool) or not isinstance(best, (int, float)):
            raise ValueError(f"{owner}: best must be a number, got {best!r}")
        for k in ("num_bad_epochs", "cooldown_counter"):
            _lr._steps(owner, k, state_dict[k], 0)
        self.__dict__.update(state_dict)
