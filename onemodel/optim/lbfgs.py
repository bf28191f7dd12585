"""L-BFGS as torch.optim.LBFGS (docs/spec/optimizers.md, "LBFGS").

PyTorch's algorithm: every parameter is one flat float32 vector x (parameters in order,
row-major; a missing gradient counts as zeros). Vector updates are float32 (x + float32(t)·d,
y = g − g_prev, s = d·float32(t), q + float32(−a)·y, ...); every dot product, sum and norm is a
float32 product per element followed by the engine's fixed-order float32 sum (`sum_axis`), so its
bits depend on the size alone; the scalars of the two-loop recursion and of the line search are
Python doubles of those float32 results. Hence the same bits on every ISA path and thread count.

The state (direction, step, curvature pairs) is not a fixed set of arrays, so this optimizer has
no `state_tensors()` for checkpoints: `state_dict()` and checkpoint.save refuse it by name.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterable, Optional

import numpy as np

from ..functional._core import sum_axis
from ..tensor import Tensor
from ._elementwise import F32, ElementwiseOptimizer, hp
from .optimizer import ParamGroup, check_number, f32


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(sum_axis(a * b, 0))


def _abs_max(a: np.ndarray) -> float:
    return float(np.max(np.abs(a))) if a.size else 0.0


def _cubic_min(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
               bounds: Optional[tuple] = None) -> float:
    """The minimum of the cubic through two points with their slopes, clamped to bounds (the
    interval itself by default); the midpoint when the cubic has no real minimum."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0.0:
        return (low + high) / 2.0
    d2 = float(np.sqrt(d2_square))
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
    return min(max(at, low), high)


class LBFGS(ElementwiseOptimizer):
    kind = "LBFGS"
    groups_supported = False
    _changeable = ("lr",)
    _settings: dict = {}

    def __init__(self, params: Iterable[Any], lr: float = 1.0, max_iter: int = 20,
                 max_eval: Optional[int] = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: Optional[str] = None) -> None:
        for name, value in (("max_iter", max_iter), ("max_eval", max_eval),
                            ("history_size", history_size)):
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, (int, np.integer)) or value < 1):
                raise ValueError(f"LBFGS: {name} must be an integer >= 1, got {value!r}")
        for name, tolerance in (("tolerance_grad", tolerance_grad),
                                ("tolerance_change", tolerance_change)):
            if check_number("LBFGS", name, tolerance) < 0.0:
                raise ValueError(f"LBFGS: {name} must be >= 0, got {tolerance!r}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        super().__init__(params, dict(lr=lr), {})
        self.param_groups[0]._values.update(
            max_iter=int(max_iter), max_eval=int(max_iter * 5 // 4 if max_eval is None
                                                 else max_eval),
            tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
            history_size=int(history_size), line_search_fn=line_search_fn)
        self._numel = sum(p._data.size for p in self.params)
        # PyTorch's names; d, t, ... are set by the first iteration.
        self._history: dict[str, Any] = dict.fromkeys(
            ("d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss"))
        self._history.update(func_evals=0, n_iter=0)
        for i, p in enumerate(self.params):
            if not p._data.flags.c_contiguous:
                raise ValueError(f"LBFGS: params[{i}] of shape {p.shape} is not C-contiguous")

    def _new_state(self, group: ParamGroup, p: Any) -> "dict[str, np.ndarray]":
        return {}

    def state_tensors(self) -> "OrderedDict[str, np.ndarray]":
        raise ValueError("LBFGS: its state (a history of curvature pairs of varying length) "
                         "cannot be saved in a checkpoint")

    def state_dict(self) -> dict:
        self.state_tensors()
        return {}

    def load_state_dict(self, state_dict: Any) -> None:
        self.state_tensors()

    # -- the flat vector ----------------------------------------------------------------------
    def _flat_grad(self) -> np.ndarray:
        parts = [np.zeros(p._data.size, F32) if p.grad is None
                 else self._grad_array(i, p).reshape(-1) for i, p in enumerate(self.params)]
        return np.concatenate(parts) if parts else np.zeros(0, F32)

    def _add(self, t: float, d: np.ndarray) -> None:
        """x = x + float32(t)·d, parameter by parameter."""
        offset, step = 0, F32(t)
        for p in self.params:
            flat = p._data.reshape(-1)
            flat[...] = flat + step * d[offset:offset + flat.size]
            offset += flat.size
            p._version += 1

    def _params_copy(self) -> list:
        return [p._data.copy() for p in self.params]

    def _restore(self, saved: list) -> None:
        for p, data in zip(self.params, saved):
            p._data[...] = data
            p._version += 1

    def _loss(self, closure: Callable[[], Any]) -> tuple[Any, float]:
        loss = self._evaluate(closure)
        return loss, float(loss.item() if isinstance(loss, Tensor) else loss)

    # -- the step -----------------------------------------------------------------------------
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:  # type: ignore[override]
        """Up to max_iter L-BFGS iterations; returns the closure's first loss."""
        if closure is None:
            raise TypeError("LBFGS.step: closure is required (it re-evaluates the model and "
                            "returns the loss)")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            orig_loss = self._iterate(closure)
        self._step_count += 1
        return orig_loss

    def _iterate(self, closure: Callable[[], Any]) -> Any:
        group, state = self.param_groups[0], self._history
        lr, max_iter, max_eval = hp(group, "lr"), group["max_iter"], group["max_eval"]
        tol_grad, tol_change = float(group["tolerance_grad"]), float(group["tolerance_change"])
        orig_loss, loss = self._loss(closure)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if _abs_max(flat_grad) <= tol_grad:
            return orig_loss
        d, t, h_diag = state["d"], state["t"], state["H_diag"]
        dirs, steps, ro = state["old_dirs"], state["old_stps"], state["ro"]
        prev_grad, prev_loss = state["prev_flat_grad"], state["prev_loss"]
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, dirs, steps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                y = flat_grad - prev_grad
                s = d * F32(t)
                ys = _dot(y, s)
                if ys > 1e-10:
                    if len(dirs) == group["history_size"]:
                        dirs.pop(0), steps.pop(0), ro.pop(0)
                    dirs.append(y)
                    steps.append(s)
                    ro.append(float(f32(1.0 / ys)))
                    h_diag = float(f32(ys / _dot(y, y)))
                d = self._direction(flat_grad, dirs, steps, ro, h_diag)
            prev_grad = flat_grad.copy()
            prev_loss = loss
            t = (min(1.0, 1.0 / float(sum_axis(np.abs(flat_grad), 0))) * lr
                 if state["n_iter"] == 1 else lr)
            gtd = _dot(flat_grad, d)
            if gtd > -tol_change:
                break
            ls_evals = 0
            if group["line_search_fn"] is not None:
                loss, flat_grad, t, ls_evals = self._strong_wolfe(
                    closure, t, d, loss, flat_grad, gtd, tol_change, max_eval - evals)
                self._add(t, d)
                done = _abs_max(flat_grad) <= tol_grad
            else:
                self._add(t, d)
                done = False
                if n_iter != max_iter:
                    loss = self._loss(closure)[1]
                    flat_grad = self._flat_grad()
                    done = _abs_max(flat_grad) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if (n_iter == max_iter or evals >= max_eval or done
                    or _abs_max(d * F32(t)) <= tol_change or abs(loss - prev_loss) < tol_change):
                break
        state.update(d=d, t=t, old_dirs=dirs, old_stps=steps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _direction(flat_grad: np.ndarray, dirs: list, steps: list, ro: list,
                   h_diag: float) -> np.ndarray:
        """−H·g by the two-loop recursion over the stored curvature pairs."""
        q = -flat_grad
        al = [0.0] * len(dirs)
        for k in range(len(dirs) - 1, -1, -1):
            al[k] = float(f32(_dot(steps[k], q) * ro[k]))
            q = q + F32(-al[k]) * dirs[k]
        r = q * F32(h_diag)
        for k in range(len(dirs)):
            be = float(f32(_dot(dirs[k], r) * ro[k]))
            r = r + F32(al[k] - be) * steps[k]
        return r

    def _evaluate_at(self, closure: Callable[[], Any], x: list, t: float,
                     d: np.ndarray) -> tuple[float, np.ndarray]:
        """The loss and flat gradient at x + t·d; the parameters are x again afterwards."""
        self._add(t, d)
        loss = self._loss(closure)[1]
        grad = self._flat_grad()
        self._restore(x)
        return loss, grad

    def _strong_wolfe(self, closure: Callable[[], Any], t: float, d: np.ndarray, f: float,
                      g: np.ndarray, gtd: float, tol_change: float, max_ls: int,
                      c1: float = 1e-4, c2: float = 0.9) -> tuple:
        """A step t satisfying the strong Wolfe conditions: PyTorch's bracketing phase, then
        its zoom by cubic interpolation. Returns (loss, gradient, t, evaluations)."""
        x = self._params_copy()
        d_norm = _abs_max(d)
        f_new, g_new = self._evaluate_at(closure, x, t, d)
        evals, ls_iter = 1, 0
        gtd_new = _dot(g_new, d)
        t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
        done = False
        bracket: list = []
        while ls_iter < max_ls:
            if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
                bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
                break
            if abs(gtd_new) <= -c2 * gtd:
                bracket, done = [[t, f_new, g_new, gtd_new]], True
                break
            if gtd_new >= 0:
                bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
                break
            t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                bounds=(t + 0.01 * (t - t_prev), t * 10))
            t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
            t = t_next
            f_new, g_new = self._evaluate_at(closure, x, t, d)
            evals += 1
            gtd_new = _dot(g_new, d)
            ls_iter += 1
        if ls_iter == max_ls:
            bracket = [[0.0, f, g, gtd], [t, f_new, g_new, gtd_new]]
        low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
        insufficient = False
        while not done and ls_iter < max_ls:
            (a, fa, _, ga), (b, fb, _, gb) = bracket
            if abs(b - a) * d_norm < tol_change:
                break
            t = _cubic_min(a, fa, ga, b, fb, gb)
            top, bottom = max(a, b), min(a, b)
            eps = 0.1 * (top - bottom)
            if min(top - t, t - bottom) < eps:
                if insufficient or t >= top or t <= bottom:
                    t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                    insufficient = False
                else:
                    insufficient = True
            else:
                insufficient = False
            f_new, g_new = self._evaluate_at(closure, x, t, d)
            evals += 1
            gtd_new = _dot(g_new, d)
            ls_iter += 1
            if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
                bracket[high] = [t, f_new, g_new, gtd_new]
                low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
            else:
                if abs(gtd_new) <= -c2 * gtd:
                    done = True
                elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                    bracket[high] = bracket[low]
                bracket[low] = [t, f_new, g_new, gtd_new]
        t, f_new, g_new, _ = bracket[low]
        return f_new, g_new, t, evals
