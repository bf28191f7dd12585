"""The cycling schedulers: one cycle, cyclic and cosine annealing with warm restarts, and the
momentum cycling of the first two."""
from __future__ import annotations

import math
import types
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from .. import lr as _lr
from ..optimizer import Optimizer
from .base import LRScheduler, _check_optimizer, _check_state, _cos_pi, _per_group


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
