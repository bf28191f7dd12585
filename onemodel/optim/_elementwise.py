"""The shared frame of the elementwise optimizers ported from PyTorch (docs/spec/optimizers.md).

RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam each declare their settings (name and kind)
and write `_rule` as numpy float32 arithmetic on one parameter: + − × ÷ and sqrt are correctly
rounded and numpy never fuses them, so the bits are the same on every ISA path and thread
count. This module validates the settings, keeps the per-parameter state in the base class's
mechanism (`state_tensors()`, `state_dict()`, checkpoints) and lists the hyper-parameters a
checkpoint holds.

A group keeps each setting as the user gave it (PyTorch's `param_groups` show lr=0.05 as 0.05).
The arithmetic reads `hp(group, key)`: lr and weight decay as float32 values, so a run resumed
from a checkpoint (which stores float32 bits and restores those two) continues with the same
bits; the fixed settings (never restored, only checked) as given, in double, as PyTorch does.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Optional, cast

import numpy as np

from .lr import ipow
from .optimizer import FLOAT32_MAX, Optimizer, ParamGroup, check_number, f32

F32 = np.float32
# What each kind of setting accepts (PyTorch's ranges).
NONNEG, UNIT_CLOSED, BETAS, FLAG = "nonneg", "unit_closed", "betas", "flag"


def hp(group: Mapping[str, Any], key: str) -> float:
    """A group's setting as the arithmetic reads it: the learning rate and weight decay as their
    float32 values (a checkpoint restores them from float32 bits), every other setting as the
    double the user gave, which PyTorch's formulas use (they are fixed, never restored)."""
    value = group[key]
    return f32(value) if key in ("lr", "weight_decay") else float(value)


def check_beta(where: str, name: str, value: Any, closed: bool = False) -> Any:
    """A coefficient in [0, 1) (or [0, 1]) whose float32 value is in the same range."""
    beta = check_number(where, name, value)
    if not (0.0 <= beta <= 1.0 if closed else 0.0 <= beta < 1.0):
        raise ValueError(f"{where}: {name} must be in [0, 1{']' if closed else ')'}, "
                         f"got {value!r}")
    # float32(β) can round up to 1 (0.99999999 does); a bias correction would be 0.
    if not closed and f32(beta) >= 1.0:
        raise ValueError(f"{where}: {name} rounds to 1 in float32")
    return value


def check_betas(where: str, betas: Any) -> tuple:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{where}: betas must be a pair, got {betas!r}")
    return tuple(check_beta(where, f"betas[{k}]", beta) for k, beta in enumerate(betas))


def check_ignored(owner: str, options: Mapping[str, Any]) -> None:
    """PyTorch's implementation switches: accepted (bool or None) and ignored on a CPU."""
    for name, value in options.items():
        if value is not None and not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{owner}: {name} must be a bool or None, got {value!r}")


def lerp(start: np.ndarray, end: np.ndarray, weight: float) -> np.ndarray:
    """PyTorch's lerp in float32, unfused: start + w·(end − start) for |w| < 0.5, else
    end − (end − start)·(1 − w)."""
    w = F32(weight)
    if abs(weight) < 0.5:
        return start + w * (end - start)
    return end - (end - start) * (F32(1.0) - w)


class ElementwiseOptimizer(Optimizer):
    """An optimizer whose state is float32 arrays per parameter, updated element by element."""

    _changeable: tuple = ("lr", "weight_decay")
    # name -> kind of every setting but lr (which the base checks), in PyTorch's order.
    _settings: Mapping[str, str] = {}

    def __init__(self, params: Iterable[Any], defaults: Mapping[str, Any],
                 ignored: Mapping[str, Any]) -> None:
        check_ignored(self.kind, ignored)
        super().__init__(params, defaults)
        self._state: dict[str, list[Optional[np.ndarray]]] = {}
        for i, p in enumerate(self.params):
            for name, array in self._new_state(self.param_groups[self._group_of[i]], p).items():
                self._state.setdefault(name, [None] * len(self.params))[i] = array

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._fixed = tuple(name for key, kind in cls._settings.items()
                           if key not in cls._changeable
                           for name in (("beta1", "beta2") if kind == BETAS else (key,)))

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        """The parameter's state arrays at creation, by name (in checkpoint order)."""
        raise NotImplementedError

    def _check_group(self, where: str, values: dict) -> dict:
        out = super()._check_group(where, values)
        for key, kind in self._settings.items():
            value = values[key]
            if key in self._changeable:
                value = self._check_setting(where, key, value)
            elif kind == BETAS:
                value = check_betas(where, value)
            elif kind == FLAG:
                if not isinstance(value, (bool, np.bool_)):
                    raise ValueError(f"{where}: {key} must be a bool, got {value!r}")
                value = bool(value)
            elif kind == UNIT_CLOSED:
                check_beta(where, key, value, closed=True)
            else:
                number = check_number(where, key, value)
                if not 0.0 <= number <= FLOAT32_MAX:
                    raise ValueError(f"{where}: {key} must be >= 0 and finite in float32, "
                                     f"got {value!r}")
            out[key] = value
        return out

    # -- the update -----------------------------------------------------------------------------
    def _update(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray,
                nthreads: int) -> None:
        # Overflow and 0/0 give PyTorch's inf and NaN, without numpy's warnings.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            self._rule(i, group, p, g)

    def _rule(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> None:
        """Updates parameter i (p, a flat view written in place) from its gradient g."""
        raise NotImplementedError

    def _gradient(self, group: ParamGroup, p: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The gradient negated when maximizing, then weight decay as PyTorch applies it: added
        to the gradient (g + wd·p), or decoupled (p = p·float32(1 − lr·wd), in double)."""
        if group["maximize"]:
            g = -g
        wd = hp(group, "weight_decay")
        if wd != 0.0:
            if group.get("decoupled_weight_decay", False):
                p[...] = p * F32(1.0 - hp(group, "lr") * wd)
            else:
                g = g + F32(wd) * p
        return g

    def _own(self, name: str, i: int) -> np.ndarray:
        """Parameter i's state array of that name (one every parameter has), as a flat view."""
        return cast(np.ndarray, self._state[name][i]).reshape(-1)

    def _slot(self, name: str, i: int) -> Optional[np.ndarray]:
        """Parameter i's state array of that name as a flat view (None if it has none)."""
        arrays = self._state.get(name)
        array = arrays[i] if arrays else None
        return None if array is None else array.reshape(-1)

    # -- state ----------------------------------------------------------------------------------
    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        self._allocate_state()
        state: OrderedDict[str, np.ndarray] = OrderedDict()
        for i in range(len(self.params)):
            for name, arrays in self._state.items():
                array = arrays[i]
                if array is not None:
                    state[f"{name}.{i}"] = array
        return state

    def _state_lists(self) -> "dict[str, list]":
        return self._state

    def _group_hyper(self, group: Mapping[str, Any]) -> "OrderedDict[str, float]":
        out = OrderedDict(lr=f32(group["lr"]))
        for key, kind in self._settings.items():
            if kind == BETAS:
                out["beta1"], out["beta2"] = (f32(b) for b in group[key])
            else:
                out[key] = float(bool(group[key])) if kind == FLAG else f32(group[key])
        return out


def bias_correction(beta: float, t: int) -> float:
    """1 − βᵗ in double, βᵗ by binary exponentiation (as Adam's)."""
    return 1.0 - ipow(beta, t)


# ln 2 split so that k·LN2_HI is exact for |k| < 2^11 (Cody and Waite's reduction).
LN2_HI, LN2_LO = 0.6931471803691238, 1.9082149292705877e-10


def exp_double(x: float) -> float:
    """e^x in double from + − × ÷ alone (the same bits on every platform, within 1 ulp of
    libm's): x = k·ln 2 + r with |r| <= ln 2 / 2, e^r by its Taylor series to degree 20 in Horner
    form, times 2^k."""
    if not -700.0 < x < 700.0:
        raise ValueError(f"exp_double: {x!r} is outside (-700, 700)")
    k = math.floor(x / 0.6931471805599453 + 0.5)
    r = (x - k * LN2_HI) - k * LN2_LO
    total = 1.0
    for n in range(20, 0, -1):
        total = 1.0 + r * total / n
    return math.ldexp(total, k)
