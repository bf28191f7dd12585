"""Ops that move values without arithmetic: reshapes, axis moves, indexing, joins, padding.

Each output is a fresh C-contiguous array (never a view of its input), so an in-place write to
one tensor can never change another behind its version counter. Backward passes only move
gradient values, except where an index repeats an element: there the contributions are added
in index order (np.add.at), which the index alone fixes.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..tensor import Tensor
from . import _core


def _fresh(arr: np.ndarray, source: np.ndarray) -> np.ndarray:
    """arr as C-contiguous memory that `source` does not share."""
    if np.may_share_memory(arr, source):
        return np.array(arr, order="C", copy=True)
    return _contiguous(arr)


def _contiguous(arr: Any) -> np.ndarray:
    """arr as a C-contiguous array of the same rank (np.ascontiguousarray makes 0-d 1-d)."""
    return np.require(arr, requirements="C")


def _tensor(x: Any, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x


def _shape_tuple(shape: Any, op: str) -> tuple:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        return tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: shape must be a sequence of integers, got {shape!r}") from None


def reshape(input: Tensor, shape: Any) -> Tensor:
    """x with a new shape of the same element count; one entry may be -1 (inferred)."""
    x = _tensor(input, "reshape")
    new = _shape_tuple(shape, "reshape")
    if new.count(-1) > 1 or any(s < -1 for s in new):
        raise ValueError(f"reshape: invalid shape {new} for a tensor of shape {x.shape}")
    try:
        out = x._data.reshape(new)
    except ValueError:
        raise ValueError(f"reshape: shape {new} is invalid for a tensor of shape {x.shape} "
                         f"({x._data.size} elements)") from None
    old = x.shape
    return _core.record("reshape", _fresh(out, x._data), (x,), lambda g: (g.reshape(old),))


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merges dimensions start_dim..end_dim (inclusive) into one."""
    x = _tensor(input, "flatten")
    if x.ndim == 0:
        return reshape(x, (1,))
    start = _core.normalize_dim(start_dim, x.ndim, "flatten")
    end = _core.normalize_dim(end_dim, x.ndim, "flatten")
    if start > end:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for a "
                         f"tensor of shape {x.shape}")
    s = x.shape
    return reshape(x, s[:start] + (int(np.prod(s[start:end + 1], dtype=np.int64)),) + s[end + 1:])


def squeeze(input: Tensor, dim: Any = None) -> Tensor:
    """Drops size-1 dimensions: all of them, or those among `dim` (an int or a tuple)."""
    x = _tensor(input, "squeeze")
    if dim is None:
        dims = {d for d, s in enumerate(x.shape) if s == 1}
    else:
        dims = {_core.normalize_dim(d, x.ndim, "squeeze")
                for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        dims = {d for d in dims if x.ndim and x.shape[d] == 1}
    return reshape(x, tuple(s for d, s in enumerate(x.shape) if d not in dims))


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Inserts a size-1 dimension at `dim` (in [-ndim-1, ndim])."""
    x = _tensor(input, "unsqueeze")
    d = _core.normalize_dim(dim, x.ndim + 1, "unsqueeze")
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def permute(input: Tensor, dims: Sequence[int]) -> Tensor:
    """x with its axes reordered: output axis i is input axis dims[i]."""
    x = _tensor(input, "permute")
    dims = tuple(dims)
    axes = tuple(_core.normalize_dim(d, x.ndim, "permute") for d in dims) if x.ndim else ()
    if len(dims) != x.ndim or sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"permute: dims {dims} are not a permutation of the {x.ndim} axes of "
                         f"a tensor of shape {x.shape}")
    inverse = tuple(np.argsort(axes)) if axes else ()
    out = _contiguous(np.transpose(x._data, axes))
    return _core.record("permute", _fresh(out, x._data), (x,),
                        lambda g: (_contiguous(np.transpose(g, inverse)),))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """x with axes dim0 and dim1 swapped."""
    x = _tensor(input, "transpose")
    axes = list(range(x.ndim))
    if x.ndim == 0:
        for d in (dim0, dim1):
            _core.normalize_dim(d, 0, "transpose")
        return clone(x)
    d0 = _core.normalize_dim(dim0, x.ndim, "transpose")
    d1 = _core.normalize_dim(dim1, x.ndim, "transpose")
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return permute(x, axes)


def clone(input: Tensor) -> Tensor:
    """A copy of x that stays in the graph."""
    x = _tensor(input, "clone")
    return _core.record("clone", np.array(x._data, copy=True), (x,), lambda g: (g,))


# -- indexing ----------------------------------------------------------------------------
def _index_parts(idx: Any, shape: tuple) -> tuple[tuple, bool]:
    """idx as a tuple numpy understands, and whether it uses advanced (array) indexing."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    out = []
    advanced = False
    for p in parts:
        if isinstance(p, Tensor):
            p = p._data
        if isinstance(p, range):  # torch reads a range as the list of its integers
            p = np.arange(p.start, p.stop, p.step, dtype=np.int64)
        if isinstance(p, (list, np.ndarray)):
            p = np.asarray(p)
            if p.dtype.kind not in "biu" and not (p.size == 0 and p.dtype.kind == "f"):
                raise TypeError(f"index: tensors used as indices must be integer or bool, got "
                                f"{p.dtype} (indexing a tensor of shape {shape})")
            if p.dtype.kind == "f":
                p = p.astype(np.int64)
            advanced = True
        elif isinstance(p, bool):
            advanced = True
        elif not (p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice))):
            raise TypeError(f"index: unsupported index {p!r} for a tensor of shape {shape}")
        out.append(p)
    return tuple(out), advanced


def index(x: Tensor, idx: Any) -> Tensor:
    """x[idx]: ints, slices, None, Ellipsis, negative indices, integer and bool tensors/arrays."""
    x = _tensor(x, "index")
    parts, advanced = _index_parts(idx, x.shape)
    try:
        out = x._data[parts]
    except IndexError as e:
        raise IndexError(f"index: {e} (tensor of shape {x.shape})") from None
    shape = x.shape

    def backward(g: np.ndarray):
        gx = np.zeros(shape, np.float32)
        if advanced:
            np.add.at(gx, parts, g)  # repeated indices add up, in index order
        else:
            gx[parts] = g
        return (gx,)

    return _core.record("index", _fresh(np.asarray(out), x._data), (x,), backward)


def index_select(input: Tensor, dim: int, index: Any) -> Tensor:
    """The entries of `index` (1-D integers) along dim, as torch.index_select."""
    x = _tensor(input, "index_select")
    axis = _core.normalize_dim(dim, x.ndim, "index_select")
    i = np.asarray(index._data if isinstance(index, Tensor) else index)
    if i.ndim != 1 or i.dtype.kind not in "iu":
        raise ValueError(f"index_select: index must be a 1-D integer tensor, got shape "
                         f"{i.shape} of {i.dtype}")
    size = x.shape[axis]
    outside = i[(i < 0) | (i >= size)]
    if outside.size:  # torch counts no index from the end here
        raise IndexError(f"index_select: index {outside[0]} is out of range for dim {dim} of "
                         f"size {size}")
    return x[(slice(None),) * axis + (i,)]


def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple:
    """As Tensor.split: pieces of a size, or of the sizes listed."""
    return _tensor(tensor, "split").split(split_size_or_sections, dim)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Splits the input into `chunks` pieces along `dim`, as `torch.chunk`.

    Parameters
    ----------
    input : Tensor
        The tensor to split.
    chunks : int
        How many pieces at most; each but the last has ceil(size / chunks) elements along `dim`.
    dim : int, optional
        The dimension to split (default 0).

    Returns
    -------
    tuple of Tensor
        Views of the input.
    """
    return _tensor(input, "chunk").chunk(chunks, dim)


def _check_index_tensor(index: Any, op: str, x_shape: tuple) -> np.ndarray:
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}: index must be an integer Tensor, got {type(index).__name__}")
    if index._data.dtype.kind not in "iu":
        raise TypeError(f"{op}: index must be an integer tensor, got {index._data.dtype} "
                        f"(index shape {index.shape}, input shape {x_shape})")
    return index._data


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """Picks values along `dim` by `index`, as `torch.gather`: for dim 0,
    `out[i][j][k] = input[index[i][j][k]][j][k]`, and likewise for other dims.

    Parameters
    ----------
    input : Tensor
        The source.
    dim : int
        The dimension indexed.
    index : Tensor
        An integer tensor of the output's shape.
    """
    x = _tensor(input, "gather")
    idx = _check_index_tensor(index, "gather", x.shape)
    d = _core.normalize_dim(dim, x.ndim, "gather")
    if idx.size == 0:
        # An empty index of any rank gives an empty result of its shape, as PyTorch.
        shape = x.shape
        return _core.record("gather", np.zeros(idx.shape, x._data.dtype), (x,),
                            lambda g: (np.zeros(shape, np.float32),))
    xs = x.shape if x.ndim else (1,)
    ishape = idx.shape if idx.ndim else (1,)
    if len(ishape) != len(xs) or any(ishape[i] > xs[i] for i in range(len(xs)) if i != d):
        raise ValueError(f"gather: index of shape {idx.shape} does not fit input of shape "
                         f"{x.shape} along dim {dim} (same rank, no larger except along dim)")
    if idx.size and (idx.min() < 0 or idx.max() >= xs[d]):
        bad = idx.min() if idx.min() < 0 else idx.max()
        raise IndexError(f"gather: index {bad} is out of bounds for dim {dim} with size "
                         f"{xs[d]} (input shape {x.shape}, index shape {idx.shape})")
    # Open-mesh coordinates of every output element, with dim's coordinate taken from index.
    mesh = list(np.ix_(*[np.arange(s) for s in ishape]))
    mesh[d] = idx.reshape(ishape)
    coords = tuple(mesh)
    out = x._data.reshape(xs)[coords].reshape(idx.shape)
    shape = x.shape

    def backward(g: np.ndarray):
        gx = np.zeros(xs, np.float32)
        np.add.at(gx, coords, g.reshape(ishape))  # repeated indices add up, in index order
        return (gx.reshape(shape),)

    return _core.record("gather", _contiguous(out), (x,), backward)


def flip(input: Tensor, dims: Sequence[int]) -> Tensor:
    """The entries in reverse order along each of dims, as torch.flip."""
    x = _tensor(input, "flip")
    axes = [_core.normalize_dim(d, x.ndim, "flip") for d in
            (dims if isinstance(dims, (tuple, list)) else (dims,))]
    for k, axis in enumerate(axes):
        if axis in axes[:k]:
            raise RuntimeError(f"flip: dim {axis} appears multiple times in the list of dims "
                               f"{dims}")
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Entries moved `shifts` places along dims (wrapping around), as torch.roll; without
    dims, along the flattened tensor, its shape kept."""
    x = _tensor(input, "roll")
    if dims is None:
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    for shift, dim in zip(shifts, dims):
        axis = _core.normalize_dim(dim, x.ndim, "roll")
        n = x.shape[axis]
        k = int(shift) % n if n else 0
        if k:
            lead = (slice(None),) * axis
            x = cat([x[lead + (slice(n - k, None),)], x[lead + (slice(0, n - k),)]], axis)
    return x


def movedim(input: Tensor, source: Any, destination: Any) -> Tensor:
    """The dims `source` moved to `destination`, the others in their order, as torch.movedim."""
    x = _tensor(input, "movedim")
    src = [_core.normalize_dim(d, x.ndim, "movedim") for d in
           (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [_core.normalize_dim(d, x.ndim, "movedim") for d in
           (destination if isinstance(destination, (tuple, list)) else (destination,))]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: source {source} and destination {destination} must be "
                         "distinct dims, as many of each")
    rest = iter(d for d in range(x.ndim) if d not in src)
    where = dict(zip(dst, src))
    return permute(x, [where[i] if i in where else next(rest) for i in range(x.ndim)])


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """length entries from start along dim (a negative start counts from the end)."""
    x = _tensor(input, "narrow")
    axis = _core.normalize_dim(dim, x.ndim, "narrow")
    n = x.shape[axis]
    begin = start + n if start < 0 else start
    if not (0 <= begin <= n and 0 <= length <= n - begin):
        raise ValueError(f"narrow: start {start} and length {length} leave dim {dim} of size "
                         f"{n}")
    return x[(slice(None),) * axis + (slice(begin, begin + length),)]


def nonzero(input: Any, *, as_tuple: bool = False) -> Any:
    """The indices of the nonzero entries in row-major order: an (n, ndim) int64 tensor, or one
    tensor per dim with as_tuple, as torch.nonzero."""
    x = _tensor(input, "nonzero")
    # A 0-d tensor counts as 1-d in the tuple form, and has no columns in the other (torch).
    where = [i.astype(np.int64) for i in np.nonzero(x._data.reshape(x.shape or (1,)))]
    if as_tuple:
        return tuple(Tensor._wrap(w) for w in where)
    return Tensor._wrap(np.stack(where, axis=1) if x.ndim else
                        np.zeros((len(where[0]), 0), np.int64))


def masked_select(input: Tensor, mask: Any) -> Tensor:
    """The entries where mask (broadcast) holds, as a 1-D tensor, as torch.masked_select."""
    x = _tensor(input, "masked_select")
    m = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"masked_select: mask must be a bool tensor, got {m.dtype}")
    try:
        shape = np.broadcast_shapes(x.shape, m.shape)
    except ValueError:
        raise ValueError(f"masked_select: input {x.shape} and mask {m.shape} cannot be "
                         "broadcast together") from None
    return x.expand(shape)[np.broadcast_to(m, shape)]


def repeat_interleave(input: Tensor, repeats: Any, dim: Optional[int] = None) -> Tensor:
    """Each entry repeated `repeats` times (an int, or one count per entry) along dim, or over
    the flattened tensor without dim, as torch.repeat_interleave."""
    x = _tensor(input, "repeat_interleave")
    if dim is None:
        x, dim = x.reshape(-1), 0
    axis = _core.normalize_dim(dim, x.ndim, "repeat_interleave")
    counts = np.asarray(repeats._data if isinstance(repeats, Tensor) else repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1 or (counts < 0).any() or \
            counts.size not in (1, x.shape[axis]):
        raise ValueError(f"repeat_interleave: repeats must be integers >= 0, one or one per "
                         f"entry of dim {dim} (size {x.shape[axis]}), got {counts.tolist()}")
    rows = np.repeat(np.arange(x.shape[axis]), np.broadcast_to(counts, (x.shape[axis],)))
    return x[(slice(None),) * axis + (rows,)]


def meshgrid(*tensors: Any, indexing: Optional[str] = None) -> tuple:
    """Coordinate grids of 1-D tensors, as torch.meshgrid ("ij", its default, or "xy")."""
    indexing = "ij" if indexing is None else indexing
    ts = [_tensor(t, "meshgrid") for t in (tensors[0] if len(tensors) == 1 and
                                            isinstance(tensors[0], (list, tuple)) else tensors)]
    if indexing not in ("ij", "xy") or any(t.ndim != 1 for t in ts):
        raise ValueError(f"meshgrid: expected 1-D tensors and indexing 'ij' or 'xy', got "
                         f"shapes {[t.shape for t in ts]} and {indexing!r}")
    sizes = [t.shape[0] for t in ts]
    if indexing == "xy" and len(ts) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, t in enumerate(ts):
        axis = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(ts) > 1 else i
        out.append(t.reshape([-1 if j == axis else 1 for j in range(len(ts))]).expand(sizes))
    return tuple(out)


# -- joining and padding -----------------------------------------------------------------
def _check_join(ts: Any, op: str) -> list[Tensor]:
    if isinstance(ts, Tensor) or not isinstance(ts, (list, tuple)) or not ts:
        raise TypeError(f"{op}: expected a non-empty list or tuple of tensors")
    ts = [_tensor(t, op) for t in ts]
    dtypes = {t.dtype for t in ts}
    if len(dtypes) > 1:
        raise TypeError(f"{op}: tensors have different dtypes "
                        f"{[str(t.dtype) for t in ts]} (shapes {[t.shape for t in ts]})")
    return ts


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors joined along an existing dimension. Tensors of shape (0,) are skipped, as
    PyTorch still does for its legacy empty shape, so dim refers to the others."""
    ts = _check_join(tensors, "cat")
    ts = [t for t in ts if t.shape != (0,)] or ts[:1]
    ndim = ts[0].ndim
    shapes = [t.shape for t in ts]
    if ndim == 0:
        raise ValueError(f"cat: zero-dimensional tensors cannot be concatenated (shapes "
                         f"{shapes})")
    d = _core.normalize_dim(dim, ndim, "cat")
    if any(len(s) != ndim or s[:d] + s[d + 1:] != shapes[0][:d] + shapes[0][d + 1:]
           for s in shapes):
        raise ValueError(f"cat: shapes {shapes} must match except along dim {dim}")
    out = np.concatenate([t._data for t in ts], axis=d)
    bounds = np.cumsum([s[d] for s in shapes])[:-1]

    def backward(g: np.ndarray):
        return tuple(np.array(p, order="C", copy=True) for p in np.split(g, bounds, axis=d))

    return _core.record("cat", out, ts, backward)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new dimension."""
    ts = _check_join(tensors, "stack")
    shapes = [t.shape for t in ts]
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"stack: all tensors must have the same shape, got {shapes}")
    d = _core.normalize_dim(dim, ts[0].ndim + 1, "stack")
    out = np.stack([t._data for t in ts], axis=d)
    count = len(ts)  # the closure must not hold the tensors

    def backward(g: np.ndarray):
        return tuple(_contiguous(np.take(g, i, axis=d)) for i in range(count))

    return _core.record("stack", out, ts, backward)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """cat along dim 1, or dim 0 for 1-D tensors, as torch.hstack."""
    ts = _check_join(tensors, "hstack")
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """cat along dim 0, 1-D tensors taken as rows, as torch.vstack."""
    ts = _check_join(tensors, "vstack")
    return cat([t.reshape(1, -1) if t.ndim < 2 else t for t in ts], 0)


PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: Optional[float] = None) -> Tensor:
    """Padding as torch.nn.functional.pad: (left, right) pairs from the last dim backwards;
    negative amounts crop. "constant" fills with value (0 by default); "reflect" mirrors
    about the edge element, "replicate" repeats it and "circular" wraps around, each over the
    last 1 to 3 dims of an input with one or two more dims than that, as PyTorch."""
    x = _tensor(input, "pad")
    amounts = _shape_tuple(pad, "pad")
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    if mode != "constant":
        if value is not None:
            raise ValueError(f"pad: mode {mode!r} takes no value, got value={value}")
        return _pad_indexed(x, amounts, mode)
    value = 0.0 if value is None else value
    if len(amounts) % 2 or len(amounts) > 2 * x.ndim:
        raise ValueError(f"pad: {len(amounts)} padding values for a tensor of shape {x.shape}; "
                         f"expected an even number, at most {2 * x.ndim}")
    out_shape = list(x.shape)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    for i in range(len(amounts) // 2):
        d = x.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        size = x.shape[d]
        out_shape[d] = size + lo + hi
        if out_shape[d] < 0:
            raise ValueError(f"pad: padding {amounts} gives a negative size along dim {d} of a "
                             f"tensor of shape {x.shape}")
        start, stop = max(0, -lo), size - max(0, -hi)
        if start < stop:
            src[d] = slice(start, stop)
            dst[d] = slice(max(0, lo), max(0, lo) + stop - start)
        else:
            src[d] = dst[d] = slice(0, 0)
    src_t, dst_t = tuple(src), tuple(dst)
    out = np.full(out_shape, value, dtype=x.dtype)
    out[dst_t] = x._data[src_t]
    shape = x.shape

    def backward(g: np.ndarray):
        gx = np.zeros(shape, np.float32)
        gx[src_t] = g[dst_t]
        return (gx,)

    return _core.record("pad", out, (x,), backward)


def _pad_indexed(x: Tensor, amounts: tuple, mode: str) -> Tensor:
    """reflect, replicate and circular padding: along each padded dim, output position j
    reads source index map(j - left); the backward adds each output's gradient into its
    source in position order (np.add.at is sequential), so the sums are deterministic."""
    k = len(amounts) // 2
    if len(amounts) % 2 or not 1 <= k <= 3 or x.ndim not in (k + 1, k + 2):
        raise ValueError(f"pad: mode {mode!r} pads the last 1 to 3 dims of an input with 1 or "
                         f"2 more dims; got {len(amounts)} padding values {amounts} for a "
                         f"tensor of shape {x.shape}")
    out = x._data
    maps = []
    for i in range(k):
        d = x.ndim - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        n = x.shape[d]
        # circular wraps the part that negative amounts leave (as PyTorch), at most once.
        start, kept = max(0, -lo), n - max(0, -lo) - max(0, -hi)
        # reflect needs a neighbour on each side of the edge.
        too_far = max(lo, hi) >= n if mode == "reflect" else (
            mode == "circular" and max(lo, hi) > kept)
        if n == 0 or too_far or n + lo + hi < 0:
            raise ValueError(f"pad: padding ({lo}, {hi}) of dim {d} (size {n}) of a tensor of "
                             f"shape {x.shape} is out of range for mode {mode!r}")
        p = np.arange(-lo, n + hi)
        if mode == "reflect":
            idx = np.abs(p)
            idx = np.where(idx >= n, 2 * (n - 1) - idx, idx)
        elif mode == "replicate":
            idx = np.clip(p, 0, n - 1)
        else:
            idx = start + (p - start) % max(kept, 1)
        maps.append((d, idx))
        out = np.take(out, idx, axis=d)

    shape = x.shape  # the backward needs x's shape, not its values

    def backward(g: np.ndarray) -> tuple:
        for d, idx in reversed(maps):
            acc = np.zeros(g.shape[:d] + (shape[d],) + g.shape[d + 1:], np.float32)
            np.add.at(acc, (slice(None),) * d + (idx,), g)  # type: ignore[arg-type]
            g = acc
        return (g,)

    return _core.record("pad", np.ascontiguousarray(out), (x,), backward)
