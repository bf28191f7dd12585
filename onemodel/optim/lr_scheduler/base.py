"""The base every scheduler shares: its call count, its state, the checks of its arguments,
and the exact arithmetic of the closed forms."""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Mapping, Optional

from .. import lr as _lr
from ..optimizer import Optimizer, shortest

Lambda = Callable[[int], float]


def _cos_pi(t: float) -> float:
    """cos(π·t) for any real t: t mod 2 and 2 − t are exact, then lr.cos_pi on [0, 1]."""
    t = abs(t) % 2.0
    return _lr.cos_pi(2.0 - t if t > 1.0 else t)


def _power(x: float, p: float) -> float:
    """x^p for x in [0, 1], p >= 0 without libm: x^⌊p⌋ by squaring, times x^(2^-k) (k square
    roots) for every set bit k of p's fraction."""
    whole = int(p)
    frac, result, root = p - whole, _lr.ipow(x, whole), x
    while frac and root != 1.0:  # once a root rounds to 1 the remaining factors are 1
        root, frac = math.sqrt(root), frac * 2.0
        if frac >= 1.0:
            result, frac = result * root, frac - 1.0
    return result


def _check_optimizer(owner: str, optimizer: Any) -> Optimizer:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{owner}: optimizer must be a onemodel optimizer, got "
                        f"{type(optimizer).__name__}")
    return optimizer


def _per_group(owner: str, optimizer: Optimizer, name: str, value: Any) -> list:
    """A value for every group: one for all, or a list with one per group (torch's rule)."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{owner}: {name} holds {len(value)} values for {n} parameter "
                             "groups")
        return list(value)
    return [value] * n


def _lambdas(owner: str, optimizer: Optimizer, lr_lambda: Any) -> list[Lambda]:
    lambdas = _per_group(owner, optimizer, "lr_lambda", lr_lambda)
    for k, f in enumerate(lambdas):
        if not callable(f):
            raise TypeError(f"{owner}: lr_lambda must be a function or one per group, got "
                            f"{f!r}" + (f" at {k}" if len(lambdas) > 1 else ""))
    return lambdas


def _lambda_value(owner: str, f: Lambda, n: int) -> float:
    return _lr._number(owner, f"lr_lambda({n})", f(n), 0.0)


def _check_state(owner: str, own: Mapping[str, Any], state: Any) -> None:
    """A state dict must hold this scheduler's keys and a whole last_epoch."""
    where = f"{owner}.load_state_dict"
    if not isinstance(state, Mapping) or set(state) != set(own):
        keys = sorted(state) if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(f"{where}: expected the keys {sorted(own)}, got {keys}")
    if "last_epoch" in own:
        _lr._steps(where, "last_epoch", state["last_epoch"], -1)


class LRScheduler:
    """The base: counts step() calls in last_epoch and sets every group's rate to the closed
    form `_rates(last_epoch)` (subclasses give `_rates`, or `_factor` of the base rates)."""

    # Whether this scheduler scales a rate that other code changed (torch's chainable forms)
    # instead of setting its own; _floor() is what the scaling keeps fixed.
    _chainable = True

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        owner = type(self).__name__
        self.optimizer = _check_optimizer(owner, optimizer)
        last_epoch = _lr._steps(owner, "last_epoch", last_epoch, -1)
        groups = optimizer.param_groups
        if last_epoch >= 0:
            missing = [g for g, group in enumerate(groups) if "initial_lr" not in group]
            if missing:
                raise KeyError(f"{owner}: param_groups[{missing[0]}] has no 'initial_lr': a "
                               "scheduler resumed with last_epoch >= 0 needs the optimizer's "
                               "state (saved with a scheduler) loaded first")
        for group in groups:
            if "initial_lr" not in group:
                group["initial_lr"] = group["lr"]
        self.base_lrs: list[float] = [group["initial_lr"] for group in groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self.step()

    def _factor(self, n: int) -> float:
        raise NotImplementedError(f"{type(self).__name__} has no closed form")

    def _rates(self, n: int) -> list[float]:
        factor = self._factor(n)
        return [base * factor for base in self.base_lrs]

    def _floor(self) -> float:
        return 0.0

    def get_lr(self) -> list[float]:
        """Every group's rate at last_epoch (the closed form)."""
        return self._rates(self.last_epoch)

    def get_last_lr(self) -> list[float]:
        """Every group's rate as the last step() set it."""
        return list(self._last_lr)

    def step(self, epoch: Optional[int] = None) -> None:
        """Counts one more call in `last_epoch` and sets every group's rate to the schedule's value
        there, as torch's `step()`.

        Parameters
        ----------
        epoch : int, optional
            Deprecated, as in PyTorch (warns): jump to this count instead of adding one.
        """
        if epoch is not None:
            epoch = _lr._steps(f"{type(self).__name__}.step", "epoch", epoch, 0)
            warnings.warn(f"{type(self).__name__}.step(epoch) is deprecated, as in PyTorch: "
                          "call step() once per epoch or step", UserWarning, stacklevel=2)
            self._step_count += 1
            self._jump(epoch)
            return
        self._step_count += 1
        self.last_epoch += 1
        rates = self.get_lr()
        self._set(self._chained(rates) if self._chainable else rates)

    def _jump(self, epoch: int) -> None:
        """torch's _update_lr(epoch): the rates of `epoch` whatever the groups hold."""
        self.last_epoch = epoch
        self._set(self.get_lr())

    def _chained(self, rates: list[float]) -> list[float]:
        """The closed-form rates, except for a group whose rate is not this scheduler's
        previous one (other code changed it): that rate scaled by this scheduler's change, as
        torch's chainable forms scale it."""
        n, floor = self.last_epoch, self._floor()
        before = self._rates(n - 1) if n > 0 else self.base_lrs
        out = []
        for group, rate, prev in zip(self.optimizer.param_groups, rates, before):
            current = _lr._f32(group["lr"])
            if current == _lr._f32(prev) or prev == floor:
                out.append(rate)
            else:
                out.append(floor + (current - floor) * ((rate - floor) / (prev - floor)))
        return out

    def _set(self, rates: list[float]) -> None:
        for group, rate in zip(self.optimizer.param_groups, rates):
            group["lr"] = shortest(rate)  # float32, the optimizer's arithmetic
        self._last_lr: list[float] = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Everything in the scheduler's __dict__ but the optimizer (torch's keys)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores what `state_dict()` returned, after checking it has this scheduler's keys and a
        whole `last_epoch` (a ValueError names what differs, before anything changes).

        Parameters
        ----------
        state_dict : mapping
            A `state_dict()` of a scheduler of the same class.
        """
        _check_state(type(self).__name__, self.state_dict(), state_dict)
        self.__dict__.update(state_dict)
