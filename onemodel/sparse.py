"""Sparse COO tensors, as torch's, enough for graph networks: `sparse_coo_tensor(indices,
values, size)`, `Tensor.to_sparse()`, `.to_dense()`, `.coalesce()`, `.indices()`,
`.values()`, and `sparse.mm(S, dense)` (also `om.mm(S, dense)` and `S @ dense`) with gradients
to the dense operand and to the values.

The values are a Tensor of their own (1-D: one per index column), so gradients reach them
through the graph as through any op. Every sum has a fixed order, the same bits everywhere:
coalescing sums duplicate indices in the order they were given; a product S @ D sums, for each
row of S, the products of its nonzeros in column order (after coalescing), one by one from the
first (`_segment_sum`); D's gradient sums over each column's nonzeros in row order likewise,
and the values' gradient is a row-wise dot product over the library's reduction."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .functional import _core
from .tensor import Tensor, _as_array, check_device, int64

__all__ = ["SparseTensor", "mm", "sparse_coo_tensor", "to_sparse"]


def _segment_sum(x: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """out[s] = x[starts[s]] + x[starts[s] + 1] + ... (counts[s] terms), added one at a time
    from the first: the order is fixed by the segments, not by numpy. The segments are taken
    longest first, so those still adding at step j are a prefix of them."""
    by_length = np.argsort(-counts, kind="stable")
    first, lengths = starts[by_length], counts[by_length]
    acc = np.zeros((len(starts),) + x.shape[1:], x.dtype)
    for j in range(int(lengths[0]) if len(lengths) else 0):
        live = int(np.searchsorted(-lengths, -j, side="left"))  # lengths > j
        acc[:live] += x[first[:live] + j]
    out = np.empty_like(acc)
    out[by_length] = acc
    return out


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For sorted keys: (the distinct keys, where each run starts, its length)."""
    if not len(keys):
        return keys, keys, keys
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], starts, np.diff(np.r_[starts, len(keys)])


class SparseTensor:
    """A sparse COO tensor: `indices` (int64, ndim x nnz), `values` (a 1-D Tensor of nnz) and
    a size; coalesced when the indices are sorted row-major and distinct."""

    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices: np.ndarray, values: Tensor, size: tuple,
                 coalesced: bool = False) -> None:
        self._idx, self._vals, self._size = indices, values, size
        self._coalesced = coalesced

    # -- what torch's sparse tensors answer ------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._size

    def size(self, dim: Optional[int] = None) -> Any:
        return self._size if dim is None else self._size[dim]

    def dim(self) -> int:
        return len(self._size)

    ndim = property(dim)

    @property
    def dtype(self) -> np.dtype:
        return self._vals.dtype

    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    @property
    def grad(self) -> Optional["SparseTensor"]:
        """The gradient of the tensor this one stands for, at its distinct indices (coalesced),
        as torch's sparse leaf's: an index given twice has the gradient of its one element."""
        g = self._vals.grad
        if g is None:
            return None
        keys, order, starts, _ = self._plan()
        return SparseTensor(self._unravel(keys), Tensor._wrap(g._data[order[starts]]),
                            self._size, True)

    def requires_grad_(self, requires_grad: bool = True) -> "SparseTensor":
        self._vals.requires_grad_(requires_grad)
        return self

    def detach(self) -> "SparseTensor":
        return SparseTensor(self._idx, self._vals.detach(), self._size, self._coalesced)

    def _nnz(self) -> int:
        return self._idx.shape[1]

    def is_coalesced(self) -> bool:
        return self._coalesced

    def indices(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("indices: cannot get indices on an uncoalesced tensor, please "
                               "call .coalesce() first")
        return Tensor._wrap(self._idx.copy())

    def values(self) -> Tensor:
        if not self._coalesced:
            raise RuntimeError("values: cannot get values on an uncoalesced tensor, please "
                               "call .coalesce() first")
        return self._vals

    def _indices(self) -> Tensor:
        """The indices as given (uncoalesced ones too), as torch's."""
        return Tensor._wrap(self._idx.copy())

    def _values(self) -> Tensor:
        return self._vals

    def to_sparse(self) -> "SparseTensor":
        return self

    def to(self, *args: Any, **kwargs: Any) -> "SparseTensor":
        """As Tensor.to, applied to the values: self when nothing changes."""
        values = self._vals.to(*args, **kwargs)
        if values is self._vals:
            return self
        return SparseTensor(self._idx, values, self._size, self._coalesced)

    def __repr__(self) -> str:
        return (f"tensor(indices={self._idx.tolist()},\n       values={self._vals!r},\n"
                f"       size={self._size}, nnz={self._nnz()}, layout=torch.sparse_coo)")

    # -- the ops -----------------------------------------------------------------------------
    def _plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(the distinct linear indices, sorted; the stable order that sorts the entries;
        where each distinct index's run starts in it; the run's length)."""
        linear = (np.ravel_multi_index(tuple(self._idx), self._size) if self._nnz()
                  else np.zeros(0, int64))
        order = np.argsort(linear, kind="stable")
        keys, starts, counts = _segments(linear[order])
        return keys, order, starts, counts

    def _unravel(self, keys: np.ndarray) -> np.ndarray:
        return np.array(np.unravel_index(keys, self._size), np.int64).reshape(
            len(self._size), len(keys))

    def coalesce(self) -> "SparseTensor":
        """Indices sorted row-major and made distinct; duplicates' values summed in the order
        they were given."""
        if self._coalesced:
            return self
        keys, order, starts, counts = self._plan()
        values = self._vals
        by_order = values._data[order]
        out = _segment_sum(by_order, starts, counts) if len(keys) < len(order) else by_order
        # position of each given entry's sum in the output
        slot = np.empty(len(order), np.int64)
        slot[order] = np.repeat(np.arange(len(keys)), counts)

        def backward(g: np.ndarray) -> tuple:
            return (g[slot],)
        summed = _core.record("coalesce", out, (values,), backward)
        return SparseTensor(self._unravel(keys), summed, self._size, True)

    def to_dense(self) -> Tensor:
        s = self.coalesce()
        where = tuple(s._idx)
        out = np.zeros(self._size, self.dtype)
        out[where] = s._vals._data

        def backward(g: np.ndarray) -> tuple:
            return (g[where],)
        return _core.record("to_dense", out, (s._vals,), backward)

    def mm(self, mat2: Any) -> Tensor:
        return mm(self, mat2)

    def __matmul__(self, other: Any) -> Tensor:
        return mm(self, other)

    def t(self) -> "SparseTensor":
        if self.ndim != 2:
            raise ValueError(f"t: expected a 2-D sparse tensor, got size {self._size}")
        return SparseTensor(self._idx[::-1].copy(), self._vals, self._size[::-1])


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None,
                      device: Any = None, requires_grad: bool = False,
                      check_invariants: Optional[bool] = None,
                      is_coalesced: Optional[bool] = None) -> SparseTensor:
    """torch.sparse_coo_tensor: indices (ndim x nnz integers), values (nnz), the size (by
    default each dimension's largest index + 1). Values that are a Tensor keep their graph."""
    check_device(device, "sparse_coo_tensor")
    idx = np.asarray(indices._data if isinstance(indices, Tensor) else indices)
    if idx.ndim != 2 or (idx.size and idx.dtype.kind not in "iu"):
        raise ValueError(f"sparse_coo_tensor: indices must be a 2-D integer array (ndim x "
                         f"nnz), got shape {idx.shape} of {idx.dtype}")
    idx = np.array(idx, np.int64)
    if isinstance(values, Tensor) and dtype is None:
        vals = values
    else:
        vals = Tensor._wrap(_as_array(values, dtype))
    if vals.ndim != 1:
        raise NotImplementedError(f"sparse_coo_tensor: values must be 1-D (no dense "
                                  f"dimensions), got shape {vals.shape}")
    if vals.shape[0] != idx.shape[1]:
        raise ValueError(f"sparse_coo_tensor: {idx.shape[1]} index columns but "
                         f"{vals.shape[0]} values")
    if idx.size and idx.min() < 0:
        raise ValueError("sparse_coo_tensor: indices must be >= 0")
    if size is None:
        shape = tuple(int(m) + 1 for m in idx.max(axis=1)) if idx.shape[1] else \
            (0,) * idx.shape[0]
    else:
        shape = tuple(int(s) for s in size)
        if len(shape) != idx.shape[0]:
            raise ValueError(f"sparse_coo_tensor: size {shape} has {len(shape)} dimensions "
                             f"but the indices {idx.shape[0]}")
        too_big = [d for d in range(len(shape)) if idx.shape[1] and idx[d].max() >= shape[d]]
        if too_big:
            d = too_big[0]
            raise ValueError(f"sparse_coo_tensor: index {idx[d].max()} is out of bounds for "
                             f"dimension {d} of size {shape[d]}")
    if requires_grad:
        vals = Tensor._wrap(vals._data.copy(), False)._set_requires_grad(True)
    return SparseTensor(idx, vals, shape, bool(is_coalesced))


def to_sparse(input: Tensor) -> SparseTensor:
    """The nonzeros of a dense tensor, in row-major order (coalesced)."""
    where = np.nonzero(input._data)
    out = input._data[where]
    shape = input.shape

    def backward(g: np.ndarray) -> tuple:
        full = np.zeros(shape, np.float32)
        full[where] = g
        return (full,)
    values = _core.record("to_sparse", out, (input,), backward)
    return SparseTensor(np.array(where, np.int64).reshape(len(shape), -1), values, shape, True)


def mm(mat1: SparseTensor, mat2: Any, reduce: str = "sum") -> Tensor:
    """torch.sparse.mm: a sparse (n, m) matrix times a dense (m, p) one, dense (n, p)."""
    if not isinstance(mat1, SparseTensor):
        raise TypeError(f"sparse.mm: mat1 must be a sparse COO tensor, got "
                        f"{type(mat1).__name__}")
    if reduce != "sum":
        raise NotImplementedError(f"sparse.mm: reduce={reduce!r}: only 'sum'")
    dense = _core.as_tensor(mat2, "sparse.mm")
    if mat1.ndim != 2 or dense.ndim != 2 or mat1.shape[1] != dense.shape[0]:
        raise ValueError(f"sparse.mm: expected sparse (n, m) and dense (m, p), got "
                         f"{mat1.shape} and {dense.shape}")
    _core.require_float(mat1._vals, "sparse.mm", "mat1's values")
    _core.require_float(dense, "sparse.mm", "mat2")
    s = mat1.coalesce()
    rows, cols = s._idx
    v, d = s._vals, dense._data
    n, p = mat1.shape[0], dense.shape[1]
    row_keys, row_starts, row_counts = _segments(rows)
    out = np.zeros((n, p), np.float32)
    out[row_keys] = _segment_sum(v._data[:, None] * d[cols], row_starts, row_counts)
    # D's gradient: each column's nonzeros in row order (a stable sort of the row-major list)
    by_col = np.argsort(cols, kind="stable")
    col_keys, col_starts, col_counts = _segments(cols[by_col])
    need_v, need_d = v.requires_grad, dense.requires_grad

    def backward(g: np.ndarray) -> tuple:
        gv = gd = None
        if need_v:
            gv = _core.sum_axis(g[rows] * d[cols], 1) if p else np.zeros(len(rows), np.float32)
        if need_d:
            gd = np.zeros(d.shape, np.float32)
            gd[col_keys] = _segment_sum((v._data[:, None] * g[rows])[by_col], col_starts,
                                        col_counts)
        return gv, gd
    return _core.record("sparse.mm", out, (v, dense), backward, (v, dense))


