"""PyTorch's learning-rate schedulers over an optimizer, with PyTorch's meaning.

Each scheduler counts its own `step()` calls in `last_epoch` (a scheduler stepped once per epoch
decays once per epoch), records its optimizer's rates in `param_groups[g]["initial_lr"]` and
`base_lrs` when built, sets the rate of step 0 at once, and its `state_dict()` holds everything
in its `__dict__` but the optimizer (torch's keys; functions of LambdaLR and MultiplicativeLR
left out as torch leaves them out). The optimizer's pure schedules (`onemodel.optim.lr`), read
at the optimizer's step count, remain what the Trainer uses.

The rate after n calls is a closed form of n in IEEE double from + − × ÷ and correctly rounded
square roots (cosines by `lr.cos_pi`, γⁿ by squaring, a real power by square roots), so it has
the same bits everywhere; it is held as float32 by the optimizer. PyTorch computes most rates
recursively (each from the last); the two agree to within a few double roundings, far inside
1e-6 relative. Where the meaning itself needs a choice:

- Several schedulers on one optimizer compose as torch's do: a scheduler whose rate was changed
  by other code since it set it (another scheduler, ChainedScheduler's others) scales that rate
  by its own change, as torch's chainable forms do; ChainedScheduler of multiplicative
  schedulers sets the product of their closed forms.
- CosineAnnealingLR follows torch's closed form: after T_max the cosine turns back up (the rate
  returns to the base rate at 2·T_max), as torch's recursive form also does.
- MultiplicativeLR multiplies the current rate by lr_lambda(n) at each call: its rate is the
  product of a user function's values, which has no closed form.
- OneCycleLR and CyclicLR cycle momentum (or Adam's β₁) with cycle_momentum=True, torch's
  default, only for an optimizer whose momentum can change after construction; onemodel's SGD
  and Adam hold it as a fixed setting of their state and checkpoints, so they need
  cycle_momentum=False, and say so.
- ReduceLROnPlateau multiplies the current rates (its rate depends on the metrics): k reductions
  differ from torch's by up to k float32 roundings.
"""
from __future__ import annotations

import bisect
import math
import types
import warnings
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, SupportsFloat, Union

from . import lr as _lr
from .optimizer import Optimizer

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
            current = group["lr"]
            if current == _lr._f32(prev) or prev == floor:
                out.append(rate)
            else:
                out.append(floor + (current - floor) * ((rate - floor) / (prev - floor)))
        return out

    def _set(self, rates: list[float]) -> None:
        for group, rate in zip(self.optimizer.param_groups, rates):
            group["lr"] = rate
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


class _MomentumCycle:
    """OneCycleLR's and CyclicLR's momentum (or β₁) cycling, set in the groups as torch does."""

    def _setup_momentum(self, owner: str, optimizer: Optimizer, cycle_momentum: bool,
                        base_momentum: Any, max_momentum: Any) -> Optional[tuple[list, list]]:
        """Checks the arguments; the momenta per group (base, max) when cycled."""
        self.cycle_momentum = bool(cycle_momentum)
        if not self.cycle_momentum:
            return None
        group = optimizer.param_groups[0]
        if "momentum" not in group and "betas" not in group:
            raise ValueError(f"{owner}: cycle_momentum=True needs an optimizer with momentum "
                             "or betas")
        self.use_beta1 = "betas" in group
        key = "betas" if self.use_beta1 else "momentum"
        if key not in optimizer._changeable:
            raise ValueError(f"{owner}: cycle_momentum=True would cycle {key}, which "
                             f"{optimizer.kind} holds fixed (a setting of its state and "
                             "checkpoints); pass cycle_momentum=False")
        return ([_lr._number(owner, "base_momentum", m, 0.0, high=1.0)
                 for m in _per_group(owner, optimizer, "base_momentum", base_momentum)],
                [_lr._number(owner, "max_momentum", m, 0.0, high=1.0)
                 for m in _per_group(owner, optimizer, "max_momentum", max_momentum)])

    def _set_momenta(self, groups: Sequence[Any], momenta: Sequence[float]) -> None:
        for group, m in zip(groups, momenta):
            if self.use_beta1:
                group["betas"] = (m, *group["betas"][1:])
            else:
                group["momentum"] = m


class OneCycleLR(_MomentumCycle, LRScheduler):
    """torch's one-cycle policy: from max_lr/div_factor up to max_lr over pct_start of
    total_steps, then down to max_lr/div_factor/final_div_factor (three_phase: back to the
    start, then down), by cos or linear annealing; momentum the other way when cycled."""

    _chainable = False

    def __init__(self, optimizer: Optimizer, max_lr: Union[float, Sequence[float]],
                 total_steps: Optional[int] = None, epochs: Optional[int] = None,
                 steps_per_epoch: Optional[int] = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: Union[float, Sequence[float]] = 0.85,
                 max_momentum: Union[float, Sequence[float]] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        owner = "OneCycleLR"
        _check_optimizer(owner, optimizer)
        if total_steps is not None:  # torch's: total_steps wins when both are given
            self.total_steps = _lr._steps(owner, "total_steps", total_steps, 1)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (_lr._steps(owner, "epochs", epochs, 1)
                                * _lr._steps(owner, "steps_per_epoch", steps_per_epoch, 1))
        else:
            raise ValueError(f"{owner}: give total_steps, or epochs and steps_per_epoch")
        pct = _lr._number(owner, "pct_start", pct_start, 0.0, high=1.0)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{owner}: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self._anneal_func_type = anneal_strategy
        div = _lr._number(owner, "div_factor", div_factor, 0.0, low_open=True)
        final_div = _lr._number(owner, "final_div_factor", final_div_factor, 0.0,
                                low_open=True)
        max_lrs = [_lr._number(owner, "max_lr", m, 0.0)
                   for m in _per_group(owner, optimizer, "max_lr", max_lr)]
        up = float(pct * self.total_steps) - 1
        # (end step, start key, end key, start momentum key, end momentum key), as torch's
        self._schedule_phases = [
            (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (float(2 * pct * self.total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
             "max_momentum"),
            (self.total_steps - 1.0, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
        ] if three_phase else [
            (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (self.total_steps - 1.0, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        momenta = self._setup_momentum(owner, optimizer, cycle_momentum, base_momentum,
                                       max_momentum)
        _lr._steps(owner, "last_epoch", last_epoch, -1)
        if last_epoch == -1:
            for g, group in enumerate(optimizer.param_groups):
                group["initial_lr"] = max_lrs[g] / div
                group["max_lr"] = max_lrs[g]
                group["min_lr"] = group["initial_lr"] / final_div
                if momenta is not None:
                    group["base_momentum"], group["max_momentum"] = momenta[0][g], momenta[1][g]
            if momenta is not None:
                self._set_momenta(optimizer.param_groups, momenta[1])
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (_cos_pi(pct) + 1.0)
        return (end - start) * pct + start

    def _phase(self, n: int) -> tuple[float, tuple]:
        """The fraction of its phase at step n, and the phase."""
        if n > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {n} times, past total_steps="
                             f"{self.total_steps}")
        start, phases = 0.0, self._schedule_phases
        k = 0
        while k < len(phases) - 1 and n > phases[k][0]:  # the last phase takes the rest
            start, k = phases[k][0], k + 1
        return (n - start) / (phases[k][0] - start), phases[k]

    def _rates(self, n: int) -> list[float]:
        pct, phase = self._phase(n)
        return [self._anneal(group[phase[1]], group[phase[2]], pct)
                for group in self.optimizer.param_groups]

    def get_lr(self) -> list[float]:
        if self.cycle_momentum:
            pct, phase = self._phase(self.last_epoch)
            groups = self.optimizer.param_groups
            self._set_momenta(groups, [self._anneal(group[phase[3]], group[phase[4]], pct)
                                       for group in groups])
        return self._rates(self.last_epoch)


class CyclicLR(_MomentumCycle, LRScheduler):
    """torch's cyclical rate between base_lr and max_lr: up over step_size_up calls, down over
    step_size_down, the amplitude scaled by mode (triangular, triangular2, exp_range) or
    scale_fn; momentum the other way when cycled."""

    _chainable = False

    def __init__(self, optimizer: Optimizer, base_lr: Union[float, Sequence[float]],
                 max_lr: Union[float, Sequence[float]], step_size_up: int = 2000,
                 step_size_down: Optional[int] = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Optional[Callable[[float], float]] = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: Union[float, Sequence[float]] = 0.8,
                 max_momentum: Union[float, Sequence[float]] = 0.9,
                 last_epoch: int = -1) -> None:
        owner = "CyclicLR"
        _check_optimizer(owner, optimizer)
        base_lrs = [_lr._number(owner, "base_lr", b, 0.0)
                    for b in _per_group(owner, optimizer, "base_lr", base_lr)]
        self.max_lrs = [_lr._number(owner, "max_lr", m, 0.0)
                        for m in _per_group(owner, optimizer, "max_lr", max_lr)]
        up = float(_lr._steps(owner, "step_size_up", step_size_up, 1))
        down = up if step_size_down is None else float(
            _lr._steps(owner, "step_size_down", step_size_down, 1))
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if scale_fn is None and mode not in ("triangular", "triangular2", "exp_range"):
            raise ValueError(f"{owner}: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range' when scale_fn is None, got {mode!r}")
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"{owner}: scale_fn must be a function, got {scale_fn!r}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"{owner}: scale_mode must be 'cycle' or 'iterations', got "
                             f"{scale_mode!r}")
        self.mode = mode
        self.gamma = _lr._number(owner, "gamma", gamma, 0.0)
        self._scale_fn_custom = scale_fn
        # torch's modes fix their scale_mode; a scale_fn keeps the one given
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        momenta = self._setup_momentum(owner, optimizer, cycle_momentum, base_momentum,
                                       max_momentum)
        if momenta is not None:
            self.base_momentums, self.max_momentums = momenta
        _lr._steps(owner, "last_epoch", last_epoch, -1)
        if last_epoch == -1:
            for g, group in enumerate(optimizer.param_groups):
                group["lr"] = base_lrs[g]
                if momenta is not None:
                    group["base_momentum"], group["max_momentum"] = momenta[0][g], momenta[1][g]
            if momenta is not None:
                self._set_momenta(optimizer.param_groups, momenta[1])
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1.0 / _lr.ipow(2.0, int(x) - 1)
        return _lr.ipow(self.gamma, int(x))

    def _scales(self, n: int) -> tuple[float, float]:
        """(the fraction of the way up, the amplitude's scale) at call n, in torch's
        arithmetic."""
        cycle = math.floor(1 + n / self.total_size)
        x = 1.0 + n / self.total_size - cycle
        up = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        return up, self.scale_fn(cycle if self.scale_mode == "cycle" else n)

    def _rates(self, n: int) -> list[float]:
        up, scale = self._scales(n)
        return [base + (top - base) * up * scale
                for base, top in zip(self.base_lrs, self.max_lrs)]

    def get_lr(self) -> list[float]:
        if self.cycle_momentum:
            up, scale = self._scales(self.last_epoch)
            self._set_momenta(self.optimizer.param_groups, [
                top - (top - base) * up * scale
                for base, top in zip(self.base_momentums, self.max_momentums)])
        return self._rates(self.last_epoch)

    def state_dict(self) -> dict:
        """As torch's: a scale_fn function left out (None), a callable object's __dict__."""
        state, fn = super().state_dict(), self._scale_fn_custom
        state["_scale_fn_custom"] = None if fn is None or isinstance(
            fn, types.FunctionType) else dict(vars(fn))
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        _check_state("CyclicLR", self.state_dict(), state_dict)
        fn, saved = self._scale_fn_custom, state_dict["_scale_fn_custom"]
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_scale_fn_custom"})
        if fn is not None and isinstance(saved, Mapping):
            vars(fn).update(saved)


class CosineAnnealingWarmRestarts(LRScheduler):
    """eta_min + (base − eta_min)·(1 + cos(π·T_cur/T_i))/2, restarting (T_cur = 0) after T_i
    calls, each period T_mult times the last; step(epoch) takes a fractional epoch as torch's."""

    _chainable = False

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        owner = "CosineAnnealingWarmRestarts"
        self.T_0 = self.T_i = _lr._steps(owner, "T_0", T_0, 1)
        self.T_mult = _lr._steps(owner, "T_mult", T_mult, 1)
        self.eta_min = _lr._number(owner, "eta_min", eta_min, 0.0)
        self.T_cur: float = _lr._steps(owner, "last_epoch", last_epoch, -1)
        super().__init__(optimizer, last_epoch)

    def _rates(self, n: int) -> list[float]:
        half = (1.0 + _cos_pi(self.T_cur / self.T_i)) / 2.0
        return [self.eta_min + (base - self.eta_min) * half for base in self.base_lrs]

    def step(self, epoch: Optional[float] = None) -> None:  # type: ignore[override]
        if epoch is not None:
            epoch = _lr._number(f"{type(self).__name__}.step", "epoch", epoch, 0.0)
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            self.last_epoch += 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        else:
            self._restart_at(epoch)
            self.last_epoch = math.floor(epoch)
        self._set(self.get_lr())

    def _restart_at(self, epoch: float) -> None:
        """T_i and T_cur at a (fractional) epoch: with T_mult > 1 the periods T_0, T_0·T_mult,
        ... summed in integers (torch takes a logarithm)."""
        if self.T_mult == 1:
            self.T_i, self.T_cur = self.T_0, epoch % self.T_0
            return
        start, period = 0, self.T_0
        while start + period <= epoch:
            start, period = start + period, period * self.T_mult
        self.T_i, self.T_cur = period, epoch - start


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
                    group["lr"] = new
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


__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR",
           "PolynomialLR", "CosineAnnealingLR", "LambdaLR", "MultiplicativeLR", "OneCycleLR",
           "CyclicLR", "CosineAnnealingWarmRestarts", "SequentialLR", "ChainedScheduler",
           "ReduceLROnPlateau"]
