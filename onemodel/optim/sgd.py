"""Stochastic gradient descent with momentum, dampening, weight decay and Nesterov's variant.

Per element, each operation one float32 operation in this order:
    g = g + wd·p                              (when wd != 0)
    b = first ? g : μ·b + (1−d)·g             (when μ != 0; first = the parameter's first step
    g = nesterov ? g + μ·b : b                  with a gradient, held in initialized.i)
    p = p − lr·g
Each parameter group has its own lr, μ, d, wd and nesterov; a group with μ = 0 has no state.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Mapping, Optional

import numpy as np

from .._kernels import _optim
from .optimizer import GroupSetting, Optimizer, ParamGroup, check_number, f32, lazy_state


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, as `torch.optim.SGD`.

    Parameters
    ----------
    params : iterable of Tensor or of dict
        The parameters, or parameter groups (dicts with "params" and any setting below).
    lr : float
        The learning rate (required here; PyTorch's default is 1e-3).
    momentum : float, optional
        The momentum factor (default 0).
    dampening : float, optional
        Dampening of the momentum (default 0).
    weight_decay : float, optional
        L2 penalty added to the gradient (default 0).
    nesterov : bool, optional
        Nesterov momentum (default False; needs momentum > 0 and no dampening).

    Notes
    -----
    Unlike PyTorch, `momentum`, `dampening` and `nesterov` are fixed once the optimizer is built
    (a scheduler may change `lr` and `weight_decay`).
    """

    kind = "SGD"
    _changeable = ("lr", "weight_decay")
    _fixed = ("momentum", "dampening", "nesterov")
    weight_decay = GroupSetting()

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))
        momentum_of = [f32(self.param_groups[g]["momentum"]) for g in self._group_of]
        self._buffers: list[Optional[np.ndarray]] = [
            lazy_state(p.shape) if mu != 0.0 else None
            for p, mu in zip(self.params, momentum_of)]
        self._initialized = [np.zeros((), np.int32) if mu != 0.0 else None
                             for mu in momentum_of]

    def _check_group(self, where: str, values: dict) -> dict:
        momentum = check_number(where, "momentum", values["momentum"])
        dampening = check_number(where, "dampening", values["dampening"])
        nesterov = values["nesterov"]
        if momentum < 0.0:
            raise ValueError(f"{where}: momentum must be >= 0, got {momentum!r}")
        if nesterov and (momentum <= 0.0 or dampening != 0.0):
            raise ValueError(f"{where}: nesterov needs momentum > 0 and dampening 0, got "
                             f"momentum={momentum!r}, dampening={dampening!r}")
        return dict(super()._check_group(where, values), momentum=values["momentum"],
                    dampening=values["dampening"],
                    weight_decay=self._check_setting(where, "weight_decay",
                                                     values["weight_decay"]),
                    nesterov=bool(nesterov))

    def _update(self, i: int, group: ParamGroup, p: np.ndarray, g: np.ndarray,
                nthreads: int) -> None:
        one_minus_d = float(np.float32(1.0) - np.float32(group["dampening"]))
        buf, flag = self._buffers[i], self._initialized[i]
        if buf is None or flag is None:
            _optim.sgd_step(p, g, None, group["lr"], 0.0, one_minus_d, group["weight_decay"],
                            False, False, nthreads)
            return
        _optim.sgd_step(p, g, buf.reshape(-1), group["lr"], group["momentum"], one_minus_d,
                        group["weight_decay"], group["nesterov"], flag == 0, nthreads)
        flag[...] = 1

    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        self._allocate_state()
        state: OrderedDict[str, np.ndarray] = OrderedDict()
        for i, (buf, flag) in enumerate(zip(self._buffers, self._initialized)):
            if buf is not None and flag is not None:
                state[f"momentum_buffer.{i}"] = buf
                state[f"initialized.{i}"] = flag
        return state

    def _state_lists(self) -> "dict[str, list]":
        return {"momentum_buffer": self._buffers, "initialized": self._initialized}

    def _group_hyper(self, group: Mapping[str, Any]) -> "OrderedDict[str, float]":
        return OrderedDict(lr=f32(group["lr"]), momentum=f32(group["momentum"]),
                           dampening=f32(group["dampening"]),
                           weight_decay=f32(group["weight_decay"]),
                           nesterov=float(bool(group["nesterov"])))
