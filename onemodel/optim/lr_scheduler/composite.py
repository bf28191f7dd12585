"""Schedulers made of schedulers: one after another (SequentialLR), all at once
(ChainedScheduler)."""
from __future__ import annotations

import bisect
from typing import Any, Mapping, Optional, Sequence

from .. import lr as _lr
from ..optimizer import Optimizer
from .base import LRScheduler, _check_optimizer, _check_state
from .plateau import ReduceLROnPlateau


class SequentialLR(LRScheduler):
    """schedulers[k] from its own call 0 at milestones[k−1] (torch's SequentialLR)."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int], last_epoch: int = -1) -> None:
        owner = "SequentialLR"
        _check_optimizer(owner, optimizer)
        schedulers = _children(owner, optimizer, schedulers)
        milestones = list(milestones)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"{owner}: milestones must hold {len(schedulers) - 1} calls (one "
                             f"fewer than schedulers), got {milestones!r}")
        for k, m in enumerate(milestones):
            _lr._steps(owner, f"milestones[{k}]", m, milestones[k - 1] + 1 if k else 1)
        self._schedulers = schedulers
        self._milestones = [int(m) for m in milestones]
        self.last_epoch = _lr._steps(owner, "last_epoch", last_epoch, -1) + 1
        self.optimizer = optimizer
        # torch's: back to the initial rates, the children's steps of construction undone,
        # then the first one's step 0 again
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        _undo(self)
        first = schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        k = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[k]
        if k > 0 and self._milestones[k - 1] == self.last_epoch:
            scheduler._jump(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        owner = type(self).__name__
        _check_state(owner, self.state_dict(), state_dict)
        saved = state_dict["_schedulers"]
        if not isinstance(saved, (list, tuple)) or len(saved) != len(self._schedulers):
            raise ValueError(f"{owner}.load_state_dict: _schedulers must hold "
                             f"{len(self._schedulers)} state dicts")
        for s, state in zip(self._schedulers, saved):
            _check_state(type(s).__name__, s.state_dict(), state)
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_schedulers"})
        for s, state in zip(self._schedulers, saved):
            s.load_state_dict(state)


def _children(owner: str, optimizer: Optional[Optimizer],
              schedulers: Sequence[LRScheduler]) -> list[LRScheduler]:
    """The schedulers of SequentialLR or ChainedScheduler, checked as torch checks them."""
    schedulers = list(schedulers)
    if not schedulers:
        raise ValueError(f"{owner}: schedulers is empty")
    optimizer = optimizer or getattr(schedulers[0], "optimizer", None)
    for k, s in enumerate(schedulers):
        if isinstance(s, ReduceLROnPlateau) or not isinstance(s, LRScheduler):
            raise ValueError(f"{owner}: schedulers[{k}] must be a scheduler other than "
                             f"ReduceLROnPlateau, got {type(s).__name__}")
        if s.optimizer is not optimizer:
            raise ValueError(f"{owner}: schedulers[{k}] belongs to another optimizer")
    return schedulers


def _undo(scheduler: LRScheduler) -> None:
    """torch's recursive_undo: every leaf scheduler's last_epoch one call back."""
    for s in getattr(scheduler, "_schedulers", ()):
        if hasattr(s, "_schedulers"):
            _undo(s)
        else:
            s.last_epoch -= 1


class ChainedScheduler(LRScheduler):
    """Steps every scheduler at each call, their effects composed (torch's ChainedScheduler)."""

    def __init__(self, schedulers: Sequence[LRScheduler],
                 optimizer: Optional[Optimizer] = None) -> None:
        if optimizer is not None:
            _check_optimizer("ChainedScheduler", optimizer)
        self._schedulers = _children("ChainedScheduler", optimizer, schedulers)
        self.optimizer = self._schedulers[0].optimizer
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def step(self) -> None:  # type: ignore[override]
        for s in self._schedulers:
            s.step()
        # Multiplicative ones compose as the product of their closed forms (one rounding).
        if all(type(s)._factor is not LRScheduler._factor for s in self._schedulers):
            product = 1.0
            for s in self._schedulers:
                product *= s._factor(s.last_epoch)
            self._set([base * product for base in self._schedulers[0].base_lrs])
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict
