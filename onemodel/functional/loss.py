"""Losses, PyTorch's argument names, defaults and reductions.

Each returns a rank-0 float32 tensor for reduction "mean" and "sum" and the unreduced tensor
for "none". nll_loss is an op with its own backward; the others are compositions of ops, so
their gradients come from the ops' own backward passes. cosine_similarity and
pairwise_distance (torch.nn's distances, which metric losses build on) are here too.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Optional

import numpy as np

from ..tensor import Tensor
from ._core import as_tensor, broadcast_shape, normalize_dim, record, require_float, sum_to_shape
from .elementwise import abs, add, div, exp, log, mul, pow, relu, softplus, sub, where
from .nn import log_softmax
from .reduction import mean, norm, sum
from .shape import permute, reshape

REDUCTIONS = ("mean", "sum", "none")
_ONE = np.float32(1.0)


KL_REDUCTIONS = REDUCTIONS + ("batchmean",)


def _check_reduction(op: str, reduction: str, allowed: tuple = REDUCTIONS) -> None:
    if reduction not in allowed:
        raise ValueError(f"{op}: reduction must be one of {', '.join(allowed)}, "
                         f"got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    return loss


def _rows(op: str, input: Tensor) -> tuple:
    """input (C,), (N, C) or (N, C, d1, ...) as rows (M, C), and the shape of one value per
    row: (), (N,) or (N, d1, ...), the shape of class-index targets and of reduction="none"."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    require_float(input, op)
    if input.ndim == 0:
        raise ValueError(f"{op}: input must have shape (C,), (N, C) or (N, C, d1, ...), "
                         f"got {input.shape}")
    c = input.shape[1] if input.ndim > 1 else input.shape[0]
    if input.ndim == 1:
        return reshape(input, (1, c)), ()
    if input.ndim == 2:
        return input, input.shape[:1]
    batch = (input.shape[0],) + input.shape[2:]
    last = permute(input, (0,) + tuple(range(2, input.ndim)) + (1,))
    return reshape(last, (math.prod(batch), c)), batch


def _class_targets(op: str, input: Tensor, batch: tuple, target: Any,
                   ignore_index: int) -> np.ndarray:
    """Integer targets of shape `batch`, in [0, C) or equal to ignore_index, as (M,) int64."""
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"{op}: ignore_index must be an integer, got "
                        f"{type(ignore_index).__name__}")
    t = target._data if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold integer class indices, got {t.dtype} "
                        f"(shape {t.shape}, input {input.shape})")
    if t.shape != batch:
        raise ValueError(f"{op}: target of shape {t.shape} does not match input of shape "
                         f"{input.shape}: expected {batch}")
    c = input.shape[1] if input.ndim > 1 else input.shape[0]
    counted = t != ignore_index
    bad = counted & ((t < 0) | (t >= c))
    if bad.any():
        raise ValueError(f"{op}: target {int(t[bad].flat[0])} out of range for {c} classes "
                         f"(ignore_index={ignore_index})")
    return t.reshape(-1).astype(np.int64, copy=False)


def _class_weight(op: str, weight: Any, classes: int) -> Optional[np.ndarray]:
    """weight (C,) as float32 data: a constant, as PyTorch's nll_loss gives it no gradient."""
    if weight is None:
        return None
    w = weight._data if isinstance(weight, Tensor) else np.asarray(weight)
    if w.dtype != np.float32:
        raise TypeError(f"{op}: weight must be float32, got {w.dtype} (shape {w.shape})")
    if w.shape != (classes,):
        raise ValueError(f"{op}: weight of shape {w.shape} must hold one value per class: "
                         f"expected ({classes},)")
    return w


def _nll(log_probs: Tensor, target: np.ndarray, weight: Optional[np.ndarray],
         ignore_index: int, reduction: str, batch: tuple) -> Tensor:
    """-w[t]·logp[n, t] per row (0 where ignored); the mean divides the sum by the counted
    rows' total weight (their count without weights), as PyTorch."""
    n = log_probs.shape[0]
    counted = target != ignore_index
    rows = np.nonzero(counted)[0]
    picked = np.zeros(n, np.float32)
    scale_rows = None if weight is None else weight[target[rows]]
    picked[rows] = -log_probs._data[rows, target[rows]]
    if scale_rows is not None:
        picked[rows] *= scale_rows
    if reduction == "none":
        scale = None
        out = picked.reshape(batch)
    else:
        out = sum(Tensor._wrap(picked))._data
        # Mean over counted rows; with none counted, 0/0 gives NaN as PyTorch does.
        with np.errstate(invalid="ignore", divide="ignore"):
            count = np.float32(len(rows)) if weight is None else \
                sum(Tensor._wrap(np.ascontiguousarray(scale_rows)))._data
            scale = np.float32(1.0) if reduction == "sum" else np.float32(1.0) / count
            if reduction == "mean":
                out = out / count

    def backward(g: np.ndarray) -> tuple:
        grad = np.zeros(log_probs.shape, np.float32)
        if scale is None:
            upstream = -g.reshape(-1)[rows]
        else:
            upstream = -(g * scale)
        grad[rows, target[rows]] = upstream if scale_rows is None else upstream * scale_rows
        return (grad,)

    return record("nll_loss", np.asarray(out, np.float32), (log_probs,), backward)


def nll_loss(input: Tensor, target: Any, weight: Optional[Any] = None,
             size_average: Optional[bool] = None, ignore_index: int = -100,
             reduce: Optional[bool] = None, reduction: str = "mean") -> Tensor:
    """-w[t]·input[t] per position for input (C,), (N, C) or (N, C, d1, ...) and class
    indices (), (N,) or (N, d1, ...); weight (C,) defaults to ones."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("nll_loss", reduction)
    rows, batch = _rows("nll_loss", input)
    t = _class_targets("nll_loss", input, batch, target, ignore_index)
    w = _class_weight("nll_loss", weight, rows.shape[1])
    return _nll(rows, t, w, ignore_index, reduction, batch)


def cross_entropy(input: Tensor, target: Any, weight: Optional[Any] = None,
                  size_average: Optional[bool] = None, ignore_index: int = -100,
                  reduce: Optional[bool] = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """NLL of log_softmax over the class axis (1, or 0 for an input (C,)); with ε > 0,
    (1−ε)·NLL + ε·(−mean_c w_c·log p) over counted rows, its mean divided by their total
    weight, as PyTorch. A float target of the input's shape holds class probabilities:
    −Σ_c w_c·p_c·log q_c per position (p smoothed to (1−ε)·p + ε/C), the mean over positions."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], "
                         f"got {label_smoothing}")
    rows, batch = _rows("cross_entropy", input)
    classes = rows.shape[1]
    w = _class_weight("cross_entropy", weight, classes)
    logp = log_softmax(rows, 1)
    eps = np.float32(label_smoothing)
    if _is_probabilities(target):
        return _soft_cross_entropy(input, logp, target, w, eps, reduction, batch)
    t = _class_targets("cross_entropy", input, batch, target, ignore_index)
    nll = _nll(logp, t, w, ignore_index, reduction, batch)
    if label_smoothing == 0.0:
        return nll
    counted = (t != ignore_index).astype(np.float32)
    weighted = logp if w is None else mul(logp, Tensor._wrap(w))
    smooth = mul(mean(weighted, 1), Tensor._wrap(counted)) * np.float32(-1.0)
    if reduction == "mean":
        total = counted.sum() if w is None else sum(Tensor._wrap(
            counted * w[np.where(counted > 0, t, 0)]))._data
        smooth = sum(smooth) / np.float32(total)
    elif reduction == "sum":
        smooth = sum(smooth)
    else:
        smooth = reshape(smooth, batch)
    return nll * (np.float32(1.0) - eps) + smooth * eps


def _is_probabilities(target: Any) -> bool:
    data = target._data if isinstance(target, Tensor) else np.asarray(target)
    return data.dtype.kind == "f"


def _soft_cross_entropy(input: Tensor, logp: Tensor, target: Any, w: Optional[np.ndarray],
                        eps: np.float32, reduction: str, batch: tuple) -> Tensor:
    p = as_tensor(target, "cross_entropy", input)
    if p.shape != input.shape:
        raise ValueError(f"cross_entropy: target must hold integer class indices of shape "
                         f"{batch} or class probabilities of the input's shape {input.shape}, "
                         f"got {p.dtype} of shape {p.shape}")
    require_float(p, "cross_entropy", "target")
    p, _ = _rows("cross_entropy", p)
    classes = logp.shape[1]
    if eps != 0:
        p = p * (np.float32(1.0) - eps) + eps / np.float32(classes)
    terms = mul(logp, p)
    if w is not None:
        terms = mul(terms, Tensor._wrap(w))
    loss = sum(terms, 1) * np.float32(-1.0)
    if reduction == "mean":
        # Over no positions, 0/0 gives NaN as PyTorch does.
        with np.errstate(invalid="ignore", divide="ignore"):
            return sum(loss) / np.float32(loss.shape[0])
    if reduction == "sum":
        return sum(loss)
    return reshape(loss, batch)


def mse_loss(input: Tensor, target: Any, size_average: Optional[bool] = None,
             reduce: Optional[bool] = None, reduction: str = "mean",
             weight: Optional[Any] = None) -> Tensor:
    """(input − target)² per element; weight as l1_loss's."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    d = _difference("mse_loss", input, target, reduction)
    return _weighted_reduce("mse_loss", mul(d, d), weight, input, reduction)


def l1_loss(input: Tensor, target: Any, size_average: Optional[bool] = None,
            reduce: Optional[bool] = None, reduction: str = "mean",
            weight: Optional[Any] = None) -> Tensor:
    """|d| built as relu(d) + relu(−d), so the gradient at d = 0 is 0 (as PyTorch). A weight
    of the input's shape multiplies each term, and the mean is then Σ w·loss / Σ w, as
    PyTorch's."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    d = _difference("l1_loss", input, target, reduction)
    return _weighted_reduce("l1_loss", relu(d) + relu(-d), weight, input, reduction)


def _difference(op: str, input: Tensor, target: Any, reduction: str) -> Tensor:
    _check_reduction(op, reduction)
    require_float(input, op)
    return sub(input, as_tensor(target, op, input))


def _weighted_reduce(op: str, loss: Tensor, weight: Any, input: Tensor, reduction: str,
                     by_weight: bool = True) -> Tensor:
    """The reduced loss, each term times weight (of the input's shape) if given; the mean then
    divides by Σ weight (mse_loss, l1_loss), or without `by_weight` by the count (huber_loss),
    as PyTorch's."""
    if weight is None:
        return _reduce(loss, reduction)
    w = as_tensor(weight, op, input)
    require_float(w, op, "weight")
    if w.shape != input.shape:
        raise ValueError(f"{op}: weight of shape {w.shape} must have the input's shape "
                         f"{input.shape}")
    loss = mul(loss, w)
    if reduction == "mean" and by_weight:
        return sum(loss) / sum(w)
    return _reduce(loss, reduction)


def _huber(d: Tensor, cut: float, smooth: bool) -> Tensor:
    """0.5·d² where |d| < cut, else linear in |d|, in PyTorch's order of operations:
    smooth_l1_loss divides the square by cut (beta) and subtracts 0.5·cut, huber_loss
    multiplies |d| − 0.5·cut by cut (delta). The square reads d only where it is chosen (and
    at NaN, where PyTorch's gradient takes that side too), so an infinite d gives no inf·0 in
    the gradient of the side not taken."""
    c = np.float32(cut)
    z = abs(d)
    small = ~(z._data >= c)
    q = where(small, d, 0.0)
    square = mul(mul(q, 0.5), q)
    if smooth:
        return where(small, div(square, c), sub(z, c * np.float32(0.5)))
    return where(small, square, mul(sub(z, c * np.float32(0.5)), c))


def smooth_l1_loss(input: Tensor, target: Any, size_average: Optional[bool] = None,
                   reduce: Optional[bool] = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5·d²/beta where |d| < beta, else |d| − 0.5·beta; beta = 0 is l1_loss, as PyTorch's."""
    _check_cut("smooth_l1_loss", "beta", beta, False)
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    d = _difference("smooth_l1_loss", input, target, reduction)
    return _reduce(_huber(d, beta, True), reduction)


def huber_loss(input: Tensor, target: Any, reduction: str = "mean", delta: float = 1.0,
               weight: Optional[Any] = None) -> Tensor:
    """0.5·d² where |d| < delta, else delta·(|d| − 0.5·delta); a weight of the input's shape
    multiplies each term (the mean stays over the count, as PyTorch's)."""
    _check_cut("huber_loss", "delta", delta, True)
    d = _difference("huber_loss", input, target, reduction)
    return _weighted_reduce("huber_loss", _huber(d, delta, False), weight, input, reduction,
                            by_weight=False)


def _check_cut(op: str, name: str, value: float, strict: bool) -> None:
    """smooth_l1_loss's beta >= 0, huber_loss's delta > 0 (strict)."""
    if not (value > 0 if strict else value >= 0):
        raise ValueError(f"{op}: {name} must be {'>' if strict else '>='} 0, got {value}")


def kl_div(input: Tensor, target: Any, size_average: Optional[bool] = None,
           reduce: Optional[bool] = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """target·(log target − input) per element of log-probabilities `input` (0 where target is
    0, as PyTorch's xlogy), or exp(target)·(target − input) with log_target. "batchmean"
    divides the sum by the batch size input.shape[0] (the KL divergence per sample), "mean" by
    the element count, as PyTorch."""
    op = "kl_div"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(op, reduction, KL_REDUCTIONS)
    x, t = _pair(op, input, target, "input", "target")[:2]
    if log_target:
        loss = mul(exp(t), sub(t, x))
    else:
        loss = sub(where(t._data == 0, 0.0, mul(t, log(t))), mul(t, x))
    if reduction == "batchmean":
        return sum(loss) / np.float32(x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction)


def _pair(op: str, x1: Any, x2: Any, name1: str = "x1", name2: str = "x2") -> tuple:
    """Both operands as float32 tensors, and the shape they broadcast to."""
    a, b = as_tensor(x1, op), as_tensor(x2, op)
    require_float(a, op, name1)
    require_float(b, op, name2)
    return a, b, broadcast_shape(a.shape, b.shape, op)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Σ (x1/‖x1‖)·(x2/‖x2‖) along dim of the broadcast inputs, each norm at least eps, as
    PyTorch's: it clamps the norms outside the graph, so the gradient flows as if unclamped
    (and a zero vector's norm passes none)."""
    a, b, shape = _pair("cosine_similarity", x1, x2)
    d = normalize_dim(dim, len(shape), "cosine_similarity")

    def unit(x: Tensor) -> Tensor:
        x = x if x.shape == shape else x.expand(shape)
        n = norm(x, 2, d, True)
        return div(x, record("clamp_min", np.maximum(n._data, np.float32(eps)), (n,),
                             lambda g: (g,)))

    return sum(mul(unit(a), unit(b)), d)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """The p-norm of x1 − x2 + eps along the last dim, as PyTorch's; p > 0 (0 and negative p,
    which PyTorch also takes, are refused)."""
    a, b, _ = _pair("pairwise_distance", x1, x2)
    if not p > 0:
        raise ValueError(f"pairwise_distance: p must be > 0, got {p}")
    d = add(sub(a, b), np.float32(eps))
    if p in (1, 2, math.inf):
        return norm(d, p, -1, keepdim)
    return pow(sum(pow(abs(d), float(p)), -1, keepdim), 1.0 / p)


def legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """The reduction the deprecated size_average / reduce name, as torch's (each missing one
    counts as True; reduce=False is 'none', size_average=False 'sum'), with torch's warning;
    `reduction` itself when neither is given."""
    if size_average is None and reduce is None:
        return reduction
    reduce = True if reduce is None else bool(reduce)
    size_average = True if size_average is None else bool(size_average)
    legacy = "none" if not reduce else "mean" if size_average else "sum"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{legacy}' instead.", UserWarning, stacklevel=3)
    return legacy


def _bce_operands(op: str, input: Any, target: Any) -> tuple:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    require_float(input, op)
    t = as_tensor(target, op, input)
    require_float(t, op, "target")
    if t.shape != input.shape:
        raise ValueError(f"{op}: target of shape {t.shape} must match input of shape "
                         f"{input.shape}")
    return input, t


def _elementwise_weight(op: str, name: str, weight: Any, input: Tensor) -> Optional[Tensor]:
    """weight as a float32 tensor that broadcasts to the input's shape (as PyTorch's in-place
    multiply requires), or None."""
    if weight is None:
        return None
    w = as_tensor(weight, op, input)
    require_float(w, op, name)
    try:
        shape = np.broadcast_shapes(w.shape, input.shape)
    except ValueError:
        shape = None
    if shape != input.shape:
        raise ValueError(f"{op}: {name} of shape {w.shape} does not broadcast to the input's "
                         f"shape {input.shape}")
    return w


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Optional[Any] = None,
                                     size_average: Optional[bool] = None,
                                     reduce: Optional[bool] = None, reduction: str = "mean",
                                     pos_weight: Optional[Any] = None) -> Tensor:
    """w·((1 − t)·x + (1 + (p − 1)·t)·softplus(−x)) per element, PyTorch's form: softplus(−x)
    is −log σ(x), stable for any |x|, and nothing cancels when x is large. weight w broadcasts
    to the input, pos_weight p (the positive class's weight, e.g. one per class on the last
    axis) to the target."""
    op = "binary_cross_entropy_with_logits"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    x, t = _bce_operands(op, input, target)
    w = _elementwise_weight(op, "weight", weight, x)
    p = _elementwise_weight(op, "pos_weight", pos_weight, x)
    log_weight_term = softplus(-x)
    if p is not None:
        log_weight_term = mul(mul(sub(p, _ONE), t) + _ONE, log_weight_term)
    loss = mul(sub(_ONE, t), x) + log_weight_term
    return _reduce(loss if w is None else mul(loss, w), reduction)


def binary_cross_entropy(input: Tensor, target: Any, weight: Optional[Any] = None,
                         size_average: Optional[bool] = None, reduce: Optional[bool] = None,
                         reduction: str = "mean") -> Tensor:
    """−w·(t·log x + (1 − t)·log(1 − x)) per element for probabilities x in [0, 1], each log
    clamped at −100 as PyTorch, so that x = 0 or 1 gives a finite loss. The gradient is
    PyTorch's: w·(x − t) / max(x·(1 − x), 1e-12) for the input, w·log((1 − x) / x) for the
    target."""
    op = "binary_cross_entropy"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(op, reduction)
    x, t = _bce_operands(op, input, target)
    w = _elementwise_weight(op, "weight", weight, x)
    xd, td = x._data, t._data
    if not ((xd >= 0) & (xd <= 1)).all():
        raise ValueError(f"{op}: input values must be in [0, 1] (probabilities; use "
                         f"binary_cross_entropy_with_logits for logits), input {x.shape}")
    log_x = log(Tensor._wrap(xd))._data
    log_1mx = log(Tensor._wrap(np.asarray(_ONE - xd)))._data
    low = np.float32(-100)
    # PyTorch's order: (t − 1)·log(1 − x) − t·log(x).
    unweighted = (td - _ONE) * np.maximum(log_1mx, low) - td * np.maximum(log_x, low)
    wd = None if w is None else np.broadcast_to(w._data, x.shape)
    loss = unweighted if wd is None else unweighted * wd

    def backward(g: np.ndarray) -> tuple:
        gw = g if wd is None else g * wd
        gx = gt = gwt = None
        if x._requires_grad:
            gx = gw * (xd - td) / np.maximum((_ONE - xd) * xd, np.float32(1e-12))
        if t._requires_grad:
            gt = gw * (log_1mx - log_x)
        if w is not None and w._requires_grad:
            gwt = sum_to_shape(g * unweighted, w.shape)
        return (gx, gt) if w is None else (gx, gt, gwt)

    inputs = (x, t) if w is None else (x, t, w)
    return _reduce(record(op, loss, inputs, backward, inputs), reduction)
