"""The optimizer base: one parameter group, float32 hyper-parameters, a global step count.

spec/training.txt section 3 and clarifications.md: every hyper-parameter is held as float32,
the learning rate is read at every step (a schedule sets it), parameters whose `.grad` is None
are skipped, `step_count` counts completed steps, and the state is float32 (int32 flags),
shaped like its parameter, zero at creation and listed in a fixed order by `state_tensors()`.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterable, Mapping

import numpy as np

from .. import _config
from ..tensor import Tensor


def f32(value: float) -> float:
    """The Python float of float32(value): how every hyper-parameter is held."""
    return float(np.float32(value))


def check_number(owner: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{owner}: {name} must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{owner}: {name} must not be NaN")
    return value


class Optimizer:
    """Holds the parameter list, the learning rate and the step count; subclasses update."""

    kind = "Optimizer"
    # Hyper-parameters a checkpoint must match exactly (training.txt section 6); the others
    # (the learning rate, weight decay) are restored from it.
    fixed_hyper_parameters: tuple = ()

    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params: list[Tensor] = self._check_params(params)
        self._lr = 0.0
        lr = check_number(self.kind, "lr", lr)
        if not lr > 0.0:
            raise ValueError(f"{self.kind}: lr must be > 0, got {lr!r}")
        self.lr = lr
        self._step_count = 0

    def _check_params(self, params: Iterable[Tensor]) -> list[Tensor]:
        if isinstance(params, Tensor):
            raise ValueError(f"{self.kind}: params must be an iterable of tensors, "
                             "not a single tensor")
        params = list(params)
        if not params:
            raise ValueError(f"{self.kind}: params is empty")
        seen: set[int] = set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise ValueError(f"{self.kind}: params[{i}] is a {type(p).__name__}, "
                                 "not a Tensor")
            if p.dtype != np.float32:
                raise ValueError(f"{self.kind}: params[{i}] has dtype {p.dtype}, "
                                 "expected float32")
            if id(p) in seen:
                raise ValueError(f"{self.kind}: params[{i}] appears twice in params")
            seen.add(id(p))
        return params

    # -- learning rate and step count -------------------------------------------------------
    @property
    def lr(self) -> float:
        return self._lr

    @lr.setter
    def lr(self, value: float) -> None:
        # 0 is allowed here: a schedule may end at a rate of 0.
        value = check_number(self.kind, "lr", value)
        if value < 0.0 or math.isinf(value):
            raise ValueError(f"{self.kind}: lr must be finite and >= 0, got {value!r}")
        self._lr = f32(value)

    @property
    def step_count(self) -> int:
        return self._step_count

    @step_count.setter
    def step_count(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{self.kind}: step_count must be an integer >= 0, got {value!r}")
        self._step_count = int(value)

    # -- the step -----------------------------------------------------------------------------
    def zero_grad(self) -> None:
        """Drops every gradient (PyTorch 2's set_to_none)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Updates every parameter that has a gradient, then counts the step."""
        # Every gradient is checked before any parameter changes.
        work = [(i, p, self._grad_array(i, p)) for i, p in enumerate(self.params)
                if p.grad is not None]
        nthreads = _config.num_threads()
        for i, p, g in work:
            self._update(i, p._data.reshape(-1), g.reshape(-1), nthreads)
            p._version += 1
        self._step_count += 1

    def _grad_array(self, i: int, p: Tensor) -> np.ndarray:
        g = p.grad._data if isinstance(p.grad, Tensor) else p.grad
        if not isinstance(g, np.ndarray) or g.dtype != np.float32 or g.shape != p.shape:
            shape = getattr(g, "shape", None)
            dtype = getattr(g, "dtype", type(g).__name__)
            raise ValueError(f"{self.kind}.step: params[{i}] of shape {p.shape}: gradient of "
                             f"shape {shape} and dtype {dtype}, expected float32 {p.shape}")
        if not p._data.flags.c_contiguous:
            raise ValueError(f"{self.kind}.step: params[{i}] is not C-contiguous")
        if np.may_share_memory(g, p._data):
            raise ValueError(f"{self.kind}.step: params[{i}]: gradient shares memory with "
                             "the parameter")
        return np.ascontiguousarray(g)

    def _update(self, i: int, p: np.ndarray, g: np.ndarray, nthreads: int) -> None:
        raise NotImplementedError

    # -- state --------------------------------------------------------------------------------
    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        """Name -> the state array itself (not a copy), in checkpoint order."""
        return OrderedDict()

    def hyper_parameters(self) -> "OrderedDict[str, float]":
        """Name -> value (a float32 value as a Python float; flags as 0.0 or 1.0), in order."""
        return OrderedDict(lr=self._lr)

    def load_hyper_parameters(self, values: Mapping[str, float]) -> None:
        """Restores the changeable hyper-parameters after checking that the fixed ones (and the
        names) equal this optimizer's; nothing changes when a check fails."""
        own = self.hyper_parameters()
        if list(values) != list(own):
            raise ValueError(f"{self.kind}: hyper-parameters {list(values)} do not match "
                             f"{list(own)}")
        for name in self.fixed_hyper_parameters:
            if np.float32(values[name]).tobytes() != np.float32(own[name]).tobytes():
                raise ValueError(f"{self.kind}: {name} is {own[name]!r}, "
                                 f"the saved value {values[name]!r}")
        self._set_hyper_parameters(values)

    def _set_hyper_parameters(self, values: Mapping[str, float]) -> None:
        self.lr = values["lr"]

    def __repr__(self) -> str:
        hp = ", ".join(f"{k}={v:g}" for k, v in self.hyper_parameters().items())
        return f"{self.kind}({len(self.params)} parameters, {hp}, step_count={self._step_count})"
