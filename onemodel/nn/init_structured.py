"""torch.nn.init's structured fills: orthogonal_, eye_, dirac_ and sparse_.

orthogonal_ orthonormalises a matrix of N(0, 1) draws as torch's (the Q of its QR with R's
diagonal made positive), by Householder reflections in float32 of + − × ÷ and sqrt, every sum
taken by pairs in an order fixed by its length: the same bits on every platform and
thread count (torch's LAPACK QR agrees to rounding).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..random import (
    Generator,
    _fill,
    _float_target,
    normal_,
    randperm,
    resolve_generator,
    standard_normals,
)
from ..tensor import Tensor

_TWO = np.float32(2)


def _row_sum(x: np.ndarray) -> np.ndarray:
    """Σ over the first axis by pairs (row 2i + row 2i+1, the odd row out carried), level by
    level: an order fixed by the row count alone, in a handful of array operations."""
    while len(x) > 1:
        pairs = x[0:len(x) - 1:2] + x[1::2]
        x = np.concatenate([pairs, x[-1:]]) if len(x) % 2 else pairs
    return x[0]


def _reflect(block: np.ndarray, v: np.ndarray, scale: np.float32) -> None:
    """block -= (scale·v) (vᵀ·block) in place: the Householder reflection of v."""
    block -= (scale * v)[:, None] * _row_sum(v[:, None] * block)[None, :]


def orthonormal_columns(a: np.ndarray) -> np.ndarray:
    """Q of a = QR (a is m × n, m >= n, float32) with the signs making R's diagonal
    positive, as torch's orthogonal_ (a zero diagonal entry zeroes its column, as there)."""
    m, n = a.shape
    r = a.copy()
    reflections = []
    for j in range(n):
        x = r[j:, j]
        norm = np.sqrt(_row_sum((x * x)[:, None])[0])
        v = x.copy()
        v[0] -= -norm if x[0] >= 0 else norm
        length2 = _row_sum((v * v)[:, None])[0]
        scale = _TWO / length2 if length2 > 0 else np.float32(0)
        _reflect(r[j:, j:], v, scale)
        reflections.append((v, scale))
    q = np.eye(m, n, dtype=np.float32)
    for j in range(n - 1, -1, -1):
        v, scale = reflections[j]
        _reflect(q[j:], v, scale)
    return q * np.sign(np.diagonal(r))[None, :]


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Optional[Generator] = None) -> Tensor:
    """A (semi-)orthogonal matrix, as torch.nn.init.orthogonal_: the tensor seen as
    (size(0), numel / size(0)) gets orthonormal rows or columns, whichever are fewer, times
    gain (Saxe et al. 2013)."""
    shape = _float_target(tensor, "orthogonal_")
    if len(shape) < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, "
                         f"got shape {shape}")
    if tensor.numel() == 0:
        return tensor
    rows = shape[0]
    cols = math.prod(shape) // rows
    flat = standard_normals(resolve_generator(generator), rows * cols).reshape(rows, cols)
    q = orthonormal_columns(flat.T.copy()).T if rows < cols else orthonormal_columns(flat)
    return _fill(tensor, (q * np.float32(gain)).reshape(shape))


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (ones on the main diagonal), as torch.nn.init.eye_."""
    shape = _float_target(tensor, "eye_")
    if len(shape) != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape "
                         f"{shape}")
    return _fill(tensor, np.eye(*shape, dtype=np.float32))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta of a convolution's weight (3-, 4- or 5-D): each of the first
    min(out / groups, in) output channels of every group passes its input channel through
    unchanged, as torch.nn.init.dirac_."""
    shape = _float_target(tensor, "dirac_")
    if len(shape) not in (3, 4, 5):
        raise ValueError(f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got "
                         f"shape {shape}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or (
            shape[0] % groups):
        raise ValueError(f"dirac_: dim 0 ({shape[0]}) must be divisible by groups, got "
                         f"groups={groups!r}")
    per_group = shape[0] // groups
    values = np.zeros(shape, np.float32)
    centre = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for d in range(min(per_group, shape[1])):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, values)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01,
            generator: Optional[Generator] = None) -> Tensor:
    """N(0, std²) with ceil(sparsity · rows) entries of every column zeroed, the rows chosen
    by a permutation per column, as torch.nn.init.sparse_ (Martens 2010)."""
    shape = _float_target(tensor, "sparse_")
    if len(shape) != 2:
        raise ValueError(f"sparse_: only tensors with 2 dimensions are supported, got shape "
                         f"{shape}")
    if not 0 <= sparsity <= 1:
        raise ValueError(f"sparse_: sparsity must be in [0, 1], got {sparsity!r}")
    rows, cols = shape
    zeros = int(math.ceil(sparsity * rows))
    g = resolve_generator(generator)
    normal_(tensor, 0.0, std, g)
    values = tensor.detach().numpy().copy()
    for col in range(cols):
        values[randperm(rows, g).numpy()[:zeros], col] = 0
    return _fill(tensor, values)
