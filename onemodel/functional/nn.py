"""Neural-network ops: softmax, log_softmax, layer norm and embedding with kernels of their
own; one_hot and normalize composed of other ops.

softmax and layer norm run in _kernels._reduce, whose sums follow the engine's fixed order, so
forward and backward give the same bits on every path and thread count. The embedding gradient
adds rows in index order (np.add.at, sequential), which is deterministic as well.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Sequence, Union

import numpy as np

from .._kernels import _direct, _reduce
from ..autograd import no_grad
from ..tensor import Tensor, float32, int64
from . import elementwise as E
from ._core import as_tensor, normalize_dim, record, require_float, threads
from .reduction import max as _max
from .reduction import min as _min
from .reduction import sum as _sum


def _outer_n_inner(shape: tuple, axis: int) -> tuple:
    shape = shape or (1,)
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _softmax(op: str, input: Tensor, dim: int, log: bool, dtype: Any) -> Tensor:
    if dtype is None:  # a float32 tensor without a graph: the kernel directly
        direct = _direct.reduce(_direct.LOG_SOFTMAX if log else _direct.SOFTMAX, input, dim,
                                threads())
        if direct is not None:
            return direct
    x = as_tensor(input, op)
    if dtype is not None:
        # PyTorch casts the input to dtype first; float32 is the one float dtype here.
        if not _is_float32(dtype):
            raise TypeError(f"{op}: dtype must be float32 (or None), got {dtype!r} "
                            f"(input {x.dtype}, shape {x.shape})")
        x = x.float()
    require_float(x, op)
    outer, n, inner = _outer_n_inner(x.shape, normalize_dim(dim, x.ndim, op))
    y = np.empty(x.shape, float32)
    _reduce.softmax(x._data, y, outer, n, inner, log, threads())

    def backward(g: np.ndarray) -> tuple:
        dx = np.empty(y.shape, float32)
        _reduce.softmax_backward(y, np.asarray(g, float32, order="C"), dx, outer, n, inner, log,
                                 threads())
        return (dx,)

    return record(op, y, (x,), backward)


def _is_float32(dtype: Any) -> bool:
    """numpy's float32 in any spelling, or torch.float32 from ported code (torch not needed)."""
    if str(dtype) == "torch.float32":
        return True
    try:
        return np.dtype(dtype) == float32
    except TypeError:
        return False


def implicit_dim(op: str, ndim: int, stacklevel: int) -> int:
    """PyTorch's deprecated choice of dim when none is given (0 for rank 0, 1 or 3, else 1),
    with its warning."""
    warnings.warn(f"{op}: implicit dimension choice has been deprecated; pass dim",
                  UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3,
            dtype: Any = None) -> Tensor:
    """exp(x) / Σ exp(x) along dim (max-shifted); dtype=float32 converts the input first.
    PyTorch's signature: without dim, its deprecated implicit choice (implicit_dim)."""
    if dim is None:
        dim = implicit_dim("softmax", as_tensor(input, "softmax").ndim, _stacklevel)
    return _softmax("softmax", input, dim, False, dtype)


def log_softmax(input: Tensor, dim: Optional[int] = None, _stacklevel: int = 3,
                dtype: Any = None) -> Tensor:
    """x - log Σ exp(x) along dim (max-shifted); dtype=float32 converts the input first.
    Without dim, PyTorch's deprecated implicit choice (implicit_dim)."""
    if dim is None:
        dim = implicit_dim("log_softmax", as_tensor(input, "log_softmax").ndim, _stacklevel)
    return _softmax("log_softmax", input, dim, True, dtype)


def _affine(op: str, name: str, t: Any, shape: tuple, x: Tensor) -> Optional[Tensor]:
    if t is None:
        return None
    t = as_tensor(t, op)
    require_float(t, op, name)
    if t.shape != shape:
        raise ValueError(f"{op}: {name} of shape {t.shape} does not match normalized_shape "
                         f"{shape} (input {x.shape})")
    return t


def trailing_shape(normalized_shape: Union[int, Sequence[int]], x: Tensor, op: str) -> tuple:
    """normalized_shape as a tuple, checked to be the trailing axes of x."""
    norm = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) \
        else tuple(int(s) for s in normalized_shape)
    k = len(norm)
    if k == 0 or k > x.ndim or x.shape[x.ndim - k:] != norm:
        raise ValueError(f"{op}: normalized_shape {norm} does not match the trailing axes of "
                         f"input of shape {x.shape}")
    return norm


def layer_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) · weight + bias over the trailing `normalized_shape` axes
    (biased variance, as PyTorch)."""
    x = as_tensor(input, "layer_norm")
    require_float(x, "layer_norm")
    norm = trailing_shape(normalized_shape, x, "layer_norm")
    k = len(norm)
    w = _affine("layer_norm", "weight", weight, norm, x)
    b = _affine("layer_norm", "bias", bias, norm, x)
    n = math.prod(norm)
    rows = math.prod(x.shape[:x.ndim - k])
    y = np.empty(x.shape, float32)
    mean = np.empty(rows, float32)
    rstd = np.empty(rows, float32)
    wd = None if w is None else w._data
    _reduce.layer_norm(x._data, wd, None if b is None else b._data, float(eps), y, mean, rstd,
                       rows, n, threads())

    def backward(g: np.ndarray) -> tuple:
        dx = np.empty(x.shape, float32)
        dw = np.empty(norm, float32) if w is not None and w._requires_grad else None
        db = np.empty(norm, float32) if b is not None and b._requires_grad else None
        _reduce.layer_norm_backward(np.asarray(g, float32, order="C"), x._data, mean, rstd, wd,
                                    dx, dw, db, rows, n, threads())
        return (dx, dw, db)

    inputs = (x,) + tuple(t for t in (w, b) if t is not None)
    return record("layer_norm", y, inputs, lambda g: _drop_missing(backward(g), w, b), inputs)


def _drop_missing(grads: tuple, w: Optional[Tensor], b: Optional[Tensor]) -> tuple:
    """The gradients of the inputs actually given (weight and bias are optional)."""
    dx, dw, db = grads
    return (dx,) + ((dw,) if w is not None else ()) + ((db,) if b is not None else ())


def _row_norms(rows: Tensor, p: float) -> np.ndarray:
    """The p-norm of each row (float32), summed in the engine's fixed order."""
    if p == math.inf:
        return _max(E.abs(rows), 1)[0]._data
    if p == 1:
        return _sum(E.abs(rows), 1)._data
    if p == 2:
        return E.sqrt(_sum(E.mul(rows, rows), 1))._data
    return E.pow(_sum(E.pow(E.abs(rows), float(p)), 1), 1.0 / p)._data


def _renorm_rows(w: Tensor, flat: np.ndarray, max_norm: float, p: float) -> None:
    """PyTorch's embedding_renorm_: each row the indices pick whose norm exceeds max_norm is
    scaled in place by max_norm / (norm + 1e-7) (the scale in float64, as there), outside the
    graph; the weight's version goes up, so a graph that saved it refuses to run backward."""
    rows = np.unique(flat)
    if rows.size == 0:
        return
    with no_grad():
        norms = _row_norms(Tensor._wrap(w._data[rows]), p).astype(np.float64)
    big = norms > max_norm
    if big.any():
        scale = (max_norm / (norms[big] + 1e-7)).astype(float32)
        w._data[rows[big]] = w._data[rows[big]] * scale[:, None]
        w._version += 1


def embedding(input: Any, weight: Tensor, padding_idx: Optional[int] = None,
              max_norm: Optional[float] = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of `weight` (num_embeddings, embedding_dim) picked by integer indices, as PyTorch:
    the row at `padding_idx` gets no gradient; with max_norm, the picked rows whose norm_type
    norm exceeds it are first renormalised in place (see _renorm_rows); scale_grad_by_freq
    divides each position's gradient by its index's count in `input`."""
    w = as_tensor(weight, "embedding")
    require_float(w, "embedding", "weight")
    idx = input._data if isinstance(input, Tensor) else np.asarray(input)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be integers, got {idx.dtype} "
                        f"(shape {idx.shape})")
    if w.ndim != 2:
        raise ValueError(f"embedding: weight must have shape (num_embeddings, embedding_dim), "
                         f"got {w.shape}")
    if sparse:
        raise NotImplementedError(f"embedding: sparse=True (sparse gradients) is not supported "
                                  f"(weight {w.shape}); use sparse=False")
    num, width = w.shape
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        bad = idx[(idx < 0) | (idx >= num)].flat[0]
        raise ValueError(f"embedding: index {int(bad)} out of range [0, {num}) for weight of "
                         f"shape {w.shape} (indices of shape {idx.shape})")
    padding_idx = check_padding_idx(padding_idx, num, "embedding")
    if max_norm is not None and not (float(norm_type) > 0):
        raise ValueError(f"embedding: norm_type must be > 0, got {norm_type}")
    flat = idx.reshape(-1).astype(int64, copy=False)
    if max_norm is not None:
        _renorm_rows(w, flat, float(max_norm), float(norm_type))
    out = w._data[flat].reshape(idx.shape + (width,))

    def backward(g: np.ndarray) -> tuple:
        grad = np.zeros((num, width), float32)
        rows = np.ascontiguousarray(g, float32).reshape(-1, width)
        if scale_grad_by_freq:
            counts = np.bincount(flat, minlength=num)
            rows = rows * (1.0 / counts[flat]).astype(float32)[:, None]
        # Each row's gradient: its positions' rows added in position order, from +0.
        _reduce.index_add_rows(flat, rows, grad, threads())
        if padding_idx is not None:
            grad[padding_idx] = 0
        return (grad,)

    return record("embedding", out, (w,), backward)


def check_padding_idx(padding_idx: Optional[int], num: int, op: str) -> Optional[int]:
    """padding_idx in [-num, num) as an index in [0, num), or None."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)) or not (
            -num <= padding_idx < num):
        raise ValueError(f"{op}: padding_idx must be an integer in [{-num}, {num}) for "
                         f"{num} embeddings, got {padding_idx!r}")
    return int(padding_idx) % num


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """int64 indices (...) -> int64 (..., num_classes) with a 1 at each index, as PyTorch;
    num_classes = -1 takes the largest index + 1."""
    idx = tensor._data if isinstance(tensor, Tensor) else np.asarray(tensor)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"one_hot: tensor must hold integer class indices, got {idx.dtype} "
                        f"(shape {idx.shape})")
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or (
            num_classes < -1):
        raise ValueError(f"one_hot: num_classes must be -1 or a count >= 0, got {num_classes!r}")
    if num_classes == -1:
        if idx.size == 0:
            raise ValueError(f"one_hot: cannot infer num_classes from an empty tensor "
                             f"(shape {idx.shape})")
        num_classes = int(idx.max()) + 1
    if idx.size and (idx.min() < 0 or idx.max() >= num_classes):
        bad = idx[(idx < 0) | (idx >= num_classes)].flat[0]
        raise ValueError(f"one_hot: class index {int(bad)} out of range [0, {num_classes}) "
                         f"(tensor of shape {idx.shape})")
    out = np.zeros(idx.shape + (int(num_classes),), int64)
    np.put_along_axis(out, idx.astype(int64)[..., None], 1, axis=-1)
    return Tensor._wrap(out)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: None = None) -> Tensor:
    """input / max(‖input‖_p, eps) along dim, as torch.nn.functional.normalize, for any p:
    0 counts the non-zero elements (a norm with no gradient, as PyTorch's), ±inf is the
    largest / smallest |x|, and p < 0 is (Σ|x|^p)^(1/p), 0 where an element is 0.

    Composed of ops. For p > 0 the clamp is applied before the root (max(‖x‖, eps) =
    root(max(Σ|x|^p, eps^p))) so an all-zero slice gets PyTorch's gradient g / eps rather than
    0 · ∞ = NaN; for p < 0 the root decreases, so the clamp follows it."""
    if out is not None:
        raise ValueError("normalize: out= is not supported; use the returned tensor")
    x = as_tensor(input, "normalize")
    require_float(x, "normalize")
    d = normalize_dim(dim, x.ndim, "normalize")
    p, eps = float(p), float(eps)
    if math.isnan(p):
        raise ValueError(f"normalize: p must be a number, got {p}")
    if p == 0:
        nonzero = Tensor._wrap((x._data != 0).astype(np.float32))
        norm = E.clamp(_sum(nonzero, d, True), min=eps)
    elif math.isinf(p):
        norm = E.clamp((_max if p > 0 else _min)(E.abs(x), d, True)[0], min=eps)
    elif p == 1:
        norm = E.clamp(_sum(E.abs(x), d, True), min=eps)
    elif p == 2:
        norm = E.sqrt(E.clamp(_sum(E.mul(x, x), d, True), min=eps ** 2))
    elif p > 0:
        total = _sum(E.pow(E.abs(x), p), d, True)
        norm = E.pow(E.clamp(total, min=eps ** p), 1.0 / p)
    else:
        norm = E.clamp(E.pow(_sum(E.pow(E.abs(x), p), d, True), 1.0 / p), min=eps)
    return E.div(x, norm)
