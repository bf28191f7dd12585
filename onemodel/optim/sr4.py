"""SR4: the ternary optimizer with a 4-bit state.

Each parameter is a weight matrix whose deployed values are ternary. Its whole training state
is one integer q in [-q_clamp, q_clamp] per weight, packed two per byte (4 bits per weight);
there is no float master copy and no moment. Per step, with g the parameter's `.grad`:
    mean|g| = float32(Σ|g| in double, row-major order / n)
    s       = float32(target_step) / (mean|g| + float32(1e-12))            (float32)
    q       = q + k + stochastic bit, saturating,  k and the bit from the 8.8 fixed-point
              step lrintf(clamp(((-g)·s)·256, ±4096)) and a counter hash of
              (seed, step_count, idx_base + i), with the stratified Weyl dither or plain
              i.i.d. rounding (use_dither)
and the parameter's values become the materialised ternary weights: +1 where q >= theta, -1
where q <= -theta, else 0. The kernels (csrc/sr4.h) hold the exact formula.

The learning rate of the optimizer base is the target step: a schedule sets `lr` as for any
optimizer, and a rate <= 0 falls back to the configured `target_step`.
`idx_base` of parameter i is the element count of the parameters before it, so no two weights
share a draw. State for checkpoints: `q.<i>` (uint8, packed, low nibble first) and `seed`
(int64, the 64-bit seed's bit pattern: a float32 hyper-parameter cannot hold it); the batch
counter is the step count.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Callable, Iterable, Mapping, Optional

import numpy as np

from .. import _config
from .._kernels import _sr4
from ..functional.ternary import TernaryWeight
from ..tensor import Tensor
from .optimizer import GroupSetting, Optimizer, check_number, f32

# Bounds the scale s = target_step / (mean|g| + 1e-12) well inside float32, so no step value
# is infinite or NaN whatever the gradient.
MAX_TARGET_STEP = 1e6
_U64 = 1 << 64


def _integer(owner: str, name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not low <= int(value) <= high:
        raise ValueError(f"{owner}: {name} must be an integer in [{low}, {high}], "
                         f"got {value!r}")
    return int(value)


def _target_step(owner: str, name: str, value, allow_default: bool) -> float:
    value = check_number(owner, name, value)
    low_ok = value <= 0.0 if allow_default else False
    if not (low_ok or 0.0 < value <= MAX_TARGET_STEP):
        rule = "<= 0 (the default) or " if allow_default else ""
        raise ValueError(f"{owner}: {name} must be {rule}in (0, {MAX_TARGET_STEP:g}], "
                         f"got {value!r}")
    return value


class SR4(Optimizer):
    """The ternary optimizer with a 4-bit state per weight (onemodel's own; PyTorch has none).

    Each parameter (a `TernaryWeight` matrix) keeps one integer q in [-q_clamp, q_clamp] per
    weight, two per byte, and no float copy. A step adds to q the gradient scaled so that its mean
    magnitude is `target_step` (in 1/256 units, rounded stochastically by a counter hash of the
    seed, the step count and the weight's index), and the weights become +1 where q >= theta, -1
    where q <= -theta and 0 elsewhere. A scheduler's `lr` sets the target step.

    Parameters
    ----------
    params : iterable of Tensor
        The ternary weights (one group only).
    target_step : float, optional
        The mean step size, in (0, 1e6] (default 1e-3).
    q_clamp : int, optional
        The accumulator's bound, in [1, 7] (default 7).
    theta : int, optional
        The threshold for a nonzero weight, in [1, q_clamp] (default 2).
    seed : int, optional
        The 64-bit seed of the rounding draws (default 0).
    use_dither : bool, optional
        Stratified Weyl dither rather than independent rounding (default True).
    """

    kind = "SR4"
    _changeable = ("lr", "target_step")
    _fixed = ("q_clamp", "theta", "use_dither")
    # Every parameter is a ternary matrix sharing one seed and one index space; groups would
    # only split the target step, which the schedule already sets.
    groups_supported = False
    target_step = GroupSetting()
    q_clamp = GroupSetting()
    theta = GroupSetting()
    use_dither = GroupSetting()

    def __init__(self, params: Iterable[Tensor], target_step: float = 1e-3, q_clamp: int = 7,
                 theta: int = 2, seed: int = 0, use_dither: bool = True) -> None:
        seed = _integer("SR4", "seed", seed, 0, _U64 - 1)
        super().__init__(params, dict(lr=target_step, target_step=target_step, q_clamp=q_clamp,
                                      theta=theta, use_dither=use_dither))
        self._seed = np.array(seed - _U64 if seed >> 63 else seed, np.int64)
        self.idx_base: list[int] = []
        self._q: list[np.ndarray] = []
        theta, q_clamp = self.theta, self.q_clamp
        # Section 1 puts active weights one step past the dead zone (3 for theta = 2).
        magnitude = min(theta + 1, q_clamp)
        base = 0
        for p in self.params:
            n = p._data.size
            if not p._data.flags.c_contiguous:
                raise ValueError(f"SR4: a parameter of shape {p.shape} is not C-contiguous")
            if isinstance(p, TernaryWeight):  # the layer reads the same packed array
                q = p.packed
                p.theta = theta
            else:
                q = np.zeros((n + 1) // 2, np.uint8)
            _sr4.init(q, n, seed, base, magnitude)
            _sr4.materialize(q, p._data.reshape(-1), theta, _config.num_threads())
            p._version += 1
            self._q.append(q)
            self.idx_base.append(base)
            base += n

    def _check_group(self, where: str, values: dict) -> dict:
        # target_step first: it is also the initial lr, and the error should name it.
        target_step = self._check_setting(where, "target_step", values["target_step"])
        q_clamp = _integer(where, "q_clamp", values["q_clamp"], 1, 7)
        return dict(super()._check_group(where, values), target_step=target_step,
                    q_clamp=q_clamp,
                    theta=_integer(where, "theta", values["theta"], 1, q_clamp),
                    use_dither=bool(values["use_dither"]))

    def _check_setting(self, where: str, key: str, value: Any) -> Any:
        if key == "target_step":
            _target_step(where, key, value, False)
            return value
        return super()._check_setting(where, key, value)

    @property
    def seed(self) -> int:
        return int(self._seed) % _U64

    def step(self, closure: Optional[Callable[[], Any]] = None,
             target_step: Optional[float] = None) -> Any:
        """One SR4 update of every parameter with a gradient, then counts the step; returns
        the loss of the closure, called first as PyTorch's optimizers do (None without one).

        target_step (default: `lr`, which a schedule may set) overrides the step size for this
        call; a value <= 0 means the configured `target_step`.
        """
        ts = _target_step("SR4.step", "lr" if target_step is None else "target_step",
                          self.lr if target_step is None else target_step, True)
        loss = self._evaluate(closure)
        if ts <= 0.0:
            ts = self.target_step
        ts32 = np.float32(ts)
        nthreads = _config.num_threads()
        work = []
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = self._grad_array(i, p).reshape(-1)
            if g.size == 0:
                continue
            mean = np.float32(_sr4.abs_mean(g, nthreads))
            if not math.isfinite(mean):
                raise ValueError(f"SR4.step: params[{i}] of shape {p.shape} has a non-finite "
                                 "gradient; nothing was updated")
            work.append((i, p, g, mean))
        for i, p, g, mean in work:
            s = ts32 / (mean + np.float32(1e-12))
            _sr4.step(self._q[i], g, p._data.reshape(-1), float(s), self.seed,
                      self._step_count, self.idx_base[i], self.q_clamp, self.theta,
                      self.use_dither, nthreads)
            p._version += 1
        self._step_count += 1
        return loss

    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        state: OrderedDict[str, np.ndarray] = OrderedDict(
            (f"q.{i}", q) for i, q in enumerate(self._q))
        state["seed"] = self._seed
        return state

    def _group_hyper(self, group: Mapping[str, Any]) -> "OrderedDict[str, float]":
        return OrderedDict(lr=f32(group["lr"]), target_step=f32(group["target_step"]),
                           q_clamp=float(group["q_clamp"]), theta=float(group["theta"]),
                           use_dither=float(bool(group["use_dither"])))

    def _state_loaded(self) -> None:
        self.materialize()

    def materialize(self) -> None:
        """Rewrites every parameter's values from q (after q was loaded from a checkpoint)."""
        for p, q in zip(self.params, self._q):
            _sr4.materialize(q, p._data.reshape(-1), self.theta, _config.num_threads())
            p._version += 1
