"""Matrix products: matmul (PyTorch's rules for 1-D and batched operands) and linear.

Every product runs on the engine's gemm kernel, which reads transposed operands in place, so
no transpose is ever materialised: linear computes x·wᵀ straight from w (out, in), and the
backward passes compute g·bᵀ and aᵀ·g the same way. Gradients of a broadcast operand are
reduced over the batch: where matmul folds a batch into rows (an N-D operand times a 2-D one)
that reduction is part of a single product with a longer K; otherwise it is sum_to_shape.

Under onemodel.amp.autocast the kernel rounds both operands to bfloat16 or float16 as it packs
them (the product still accumulates in float32), and in backward so is the incoming gradient;
the rounding in force at the forward pass is the one its backward uses. What the backward
reads of an intermediate operand is the 2-byte copy the forward packing wrote
(_autocast.Operands); only the operands a gradient needs are kept.

A weight's gradient (aᵀ·g over a batch of at most one K block) goes back unmade
(autograd.AddableGrad): where backward has the weight's .grad to add it into, the kernel adds
each finished tile there, with the bits of .grad + the product, and no weight-sized array is
made.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import _autocast, autograd
from .._kernels import _direct, _gemm
from ..tensor import Tensor
from . import _core


def _product(a: np.ndarray, b: np.ndarray, trans_a: bool = False,
             trans_b: bool = False, bias: Optional[np.ndarray] = None, half: int = 0,
             save_a: Optional[np.ndarray] = None,
             save_b: Optional[np.ndarray] = None) -> np.ndarray:
    """op(a)·op(b) (+ bias, a vector over the columns) for float32 (or, with half, uint16)
    arrays of rank 2 or 3 (a 2-D operand, or a leading batch of 1, serves every product of the
    batch); the result is 3-D if either operand is. half and save_*: as _gemm.gemm's."""
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    m = a.shape[-1] if trans_a else a.shape[-2]
    n = b.shape[-2] if trans_b else b.shape[-1]
    if a.ndim == 2 and b.ndim == 2:
        out = np.empty((m, n), np.float32)
    else:
        out = np.empty((max(x.shape[0] for x in (a, b) if x.ndim == 3), m, n), np.float32)
    if out.size:
        _gemm.gemm(a, b, out, trans_a, trans_b, _core.threads(), bias, half, save_a, save_b)
    return out


def _rows(shape: tuple) -> int:
    return math.prod(shape)  # not np.prod, which costs microseconds per call


def _shaped(x: np.ndarray, shape: tuple) -> np.ndarray:
    """x itself where it has the shape already: a reshaped view would keep backward from
    handing the array on as one the next closure may overwrite (_grad_buffers.may_overwrite)."""
    return x if x.shape == shape else x.reshape(shape)


def _weight_grad(a: np.ndarray, b: np.ndarray, half: int, shape: tuple):
    """aᵀ·b (2-D), the gradient of an operand of `shape`. Where that is the product's shape and
    its depth (a's rows) one K block, an autograd.AddableGrad: backward can have the kernel add
    it straight into a weight's .grad."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if shape != (a.shape[1], b.shape[1]) or not 0 < a.shape[0] <= _gemm.KC:
        return _shaped(_product(a, b, trans_a=True, half=half), shape)

    def make() -> np.ndarray:
        return _product(a, b, trans_a=True, half=half)

    def add_into(out: np.ndarray) -> None:
        if out.flags.c_contiguous and not (np.may_share_memory(out, a)
                                           or np.may_share_memory(out, b)):
            _gemm.gemm(a, b, out, True, False, _core.threads(), None, half, add=True)
        else:  # a .grad the kernel cannot write to: the product made whole, then added
            np.add(out, make(), out=out)
    return autograd.AddableGrad(shape, make, add_into)


def _folded_backward(sa: tuple, sb: tuple, half: int, a_keep: Optional[np.ndarray],
                     b_keep: Optional[np.ndarray], grad_a: bool, grad_b: bool) -> Any:
    """The backward of a product whose a (of shape sa, its batch folded into rows: a_keep, kept
    for b's gradient) times a 2-D b (sb; b_keep, kept for a's)."""
    rows, n = _rows(sa[:-1]), sb[-1] if len(sb) == 2 else 1

    def backward(g: np.ndarray):
        g_rows = g.reshape(rows, n)
        ga = gb = None
        if grad_a:
            assert b_keep is not None  # kept for a's gradient
            ga = _shaped(_product(g_rows, b_keep, trans_b=True, half=half), sa)
        if grad_b:
            assert a_keep is not None
            gb = _weight_grad(a_keep, g_rows, half, sb)
        return ga, gb
    return backward


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """input @ other with torch.matmul's rules: 1-D operands gain and lose a dimension, leading
    (batch) dimensions broadcast."""
    if _autocast._state.dtype is None:  # 2-D float32 operands: the kernel directly
        direct = _direct.matmul(input, other, None, False, _core.threads())
        if type(direct) is Tensor:
            return direct
        if direct is not None:  # the bare product of operands of which one requires a gradient
            grad_a, grad_b = input._requires_grad, other._requires_grad
            backward = _folded_backward(input._data.shape, other._data.shape, 0,
                                        input._data if grad_b else None,
                                        other._data if grad_a else None, grad_a, grad_b)
            return _core.record("matmul", direct, (input, other), backward, (input, other))
    a = _core.as_tensor(input, "matmul")
    b = _core.as_tensor(_core.dense_of_sparse(other, a, "matmul"), "matmul")
    _core.require_float(a, "matmul", "a")
    _core.require_float(b, "matmul", "b")
    sa, sb = a._data.shape, b._data.shape
    if not sa or not sb:
        raise ValueError(f"matmul: {sa} @ {sb}: both operands need at least one dimension")
    # 1-D operands: a row vector on the left, a column vector on the right, dropped afterwards.
    a2 = a._data.reshape((1,) + sa) if len(sa) == 1 else a._data
    b2 = b._data.reshape(sb + (1,)) if len(sb) == 1 else b._data
    m, k = a2.shape[-2:]
    k2, n = b2.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul: {sa} @ {sb}: inner dimensions {k} != {k2}")
    batch = _core.broadcast_shape(a2.shape[:-2], b2.shape[:-2], "matmul")
    out_shape = batch + (() if len(sa) == 1 else (m,)) + (() if len(sb) == 1 else (n,))

    if b2.ndim == 2:
        # Fold a's batch into rows: one (rows, k)·(k, n) product.
        half = _autocast.half_code()
        ops = _autocast.Operands(half)
        # The closures read these flags, not the tensors: an operand saved in 2 bytes must be
        # free to go.
        grad_a, grad_b = a.requires_grad, b.requires_grad
        a_rows = a2 if a2.ndim == 2 else a2.reshape(_rows(a2.shape[:-1]), k)
        a_keep = ops.keep(a, a_rows, b.requires_grad)
        b_keep = ops.keep(b, b2, a.requires_grad)
        out = _product(a_rows, b2, half=half, save_a=ops.saves[0], save_b=ops.saves[1])
        ops.packed(out)
        backward = _folded_backward(sa, sb, half, a_keep, b_keep, grad_a, grad_b)
        if out.shape != out_shape:
            out = out.reshape(out_shape)
        return _core.record("matmul", out, (a, b), backward, ops.protected((a, b)))

    return _batched(a, b, a2, b2, batch, out_shape, False)


def _batched(a: Tensor, b: Tensor, a2: np.ndarray, b2: np.ndarray, batch: tuple,
             out_shape: tuple, trans_b: bool) -> Tensor:
    """a2 @ op(b2) for each product of the broadcast `batch` (op: b2's last two axes swapped
    when trans_b, read so by the kernel), shaped out_shape, with its backward. Each operand is
    either one matrix for every product or a full batch."""
    half = _autocast.half_code()
    ops = _autocast.Operands(half)
    grad_a, grad_b = a.requires_grad, b.requires_grad
    m, k = a2.shape[-2:]
    n = b2.shape[-2] if trans_b else b2.shape[-1]

    def batched(x: np.ndarray) -> np.ndarray:
        if _rows(x.shape[:-2]) == 1:
            return x.reshape((1,) + x.shape[-2:])
        return np.broadcast_to(x, batch + x.shape[-2:]).reshape((_rows(batch),) + x.shape[-2:])

    a3, b3 = batched(a2), batched(b2)
    a_keep = ops.keep(a, a3, b.requires_grad)
    b_keep = ops.keep(b, b3, a.requires_grad)
    out = _product(a3, b3, trans_b=trans_b, half=half, save_a=ops.saves[0],
                   save_b=ops.saves[1])
    ops.packed(out)
    shape_a, shape_b, sa, sb = a2.shape, b2.shape, a._data.shape, b._data.shape

    def batched_backward(g: np.ndarray):
        g3 = g.reshape((_rows(batch), m, n))
        ga = gb = None
        if grad_a:  # g·op(b)ᵀ
            assert b_keep is not None  # kept for a's gradient
            ga = _product(g3, b_keep, trans_b=not trans_b, half=half).reshape(batch + (m, k))
            ga = _core.sum_to_shape(ga, shape_a).reshape(sa)
        if grad_b:  # aᵀ·g; for b read transposed, its transpose, copied: attention's k
            # gradient as gᵀ·q (keys x head width: a 24-wide head fills 16-column tiles
            # badly) measured 224 us against 148 for qᵀ·g and the copy
            assert a_keep is not None
            gb = _product(a_keep, g3, trans_a=True, half=half)
            if trans_b:
                gb = np.ascontiguousarray(np.swapaxes(gb, -1, -2))
            gb = _core.sum_to_shape(gb.reshape(batch + gb.shape[-2:]), shape_b).reshape(sb)
        return ga, gb

    return _core.record("matmul", out.reshape(out_shape), (a, b), batched_backward,
                        ops.protected((a, b)))


def matmul_nt(input: Tensor, other: Tensor) -> Tensor:
    """input @ other.transpose(-2, -1) (attention's q·kᵀ) without making the transpose: the
    kernel reads `other` transposed, with the bits of matmul of the transposed copy, forward
    and backward (each element's chain runs over k in the same order). Both operands have at
    least 2 dimensions."""
    a = _core.as_tensor(input, "matmul")
    b = _core.as_tensor(other, "matmul")
    _core.require_float(a, "matmul", "a")
    _core.require_float(b, "matmul", "b")
    sa, sb = a._data.shape, b._data.shape
    if len(sa) < 2 or len(sb) < 2:
        raise ValueError(f"matmul: {sa} @ ({sb})ᵀ: both operands need at least two dimensions")
    if sa[-1] != sb[-1]:
        raise ValueError(f"matmul: {sa} @ ({sb})ᵀ: inner dimensions {sa[-1]} != {sb[-1]}")
    if len(sb) == 2:  # a's batch folded into rows, as matmul folds it: linear's product
        return linear(a, b)
    batch = _core.broadcast_shape(sa[:-2], sb[:-2], "matmul")
    return _batched(a, b, a._data, b._data, batch, batch + (sa[-2], sb[-2]), True)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched matrix product of (b, n, m) and (b, m, p), as torch.bmm (no broadcasting)."""
    sa, sb = _core.as_tensor(input, "bmm").shape, _core.as_tensor(mat2, "bmm").shape
    if len(sa) != 3 or len(sb) != 3 or sa[0] != sb[0] or sa[2] != sb[1]:
        raise ValueError(f"bmm: expected (b, n, m) and (b, m, p), got {sa} and {sb}")
    return matmul(input, mat2)


def mm(input: Any, mat2: Tensor) -> Tensor:
    """Matrix product of (n, m) and (m, p), as torch.mm (no broadcasting); a sparse COO input
    (onemodel.sparse) multiplies by its nonzeros."""
    if getattr(input, "is_sparse", False):
        return input.mm(mat2)
    mat2 = _core.dense_of_sparse(mat2, input, "mm")
    sa, sb = _core.as_tensor(input, "mm").shape, _core.as_tensor(mat2, "mm").shape
    if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0]:
        raise ValueError(f"mm: expected (n, m) and (m, p), got {sa} and {sb}")
    return matmul(input, mat2)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Optional[Tensor] = None) -> Tensor:
    """y[..., o] = Σ_ij input1[..., i]·weight[o, i, j]·input2[..., j] + bias[o], as
    torch.nn.functional.bilinear: input1 times weight first (one matrix product), then each
    output's row dotted with input2 (a batched product), over the exact kernel."""
    x1, x2 = _core.as_tensor(input1, "bilinear"), _core.as_tensor(input2, "bilinear")
    w = _core.as_tensor(weight, "bilinear")
    if w.ndim != 3 or x1.ndim < 1 or x1.shape[:-1] != x2.shape[:-1] or \
            (x1.shape[-1], x2.shape[-1]) != w.shape[1:]:
        raise ValueError(f"bilinear: expected input1 (..., {w.shape[1:2]}), input2 (..., "
                         f"in2) with the same leading sizes and weight (out, in1, in2), got "
                         f"{x1.shape}, {x2.shape} and {w.shape}")
    out_features, in1, in2 = w.shape
    lead = x1.shape[:-1]
    rows = math.prod(lead)
    # (rows, in1) @ (in1, out·in2) -> (rows, out, in2), then dotted with input2 (rows, in2, 1)
    mixed = matmul(x1.reshape(rows, in1), w.permute(1, 0, 2).reshape(in1, out_features * in2))
    out = matmul(mixed.reshape(rows, out_features, in2), x2.reshape(rows, in2, 1))
    out = out.reshape(lead + (out_features,))
    return out if bias is None else out + bias


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """input[i] · vec2[j] (one rounding each), as torch.outer."""
    a, b = _core.as_tensor(input, "outer"), _core.as_tensor(vec2, "outer")
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: expected two 1-D tensors, got shapes {a.shape} and {b.shape}")
    return a.unsqueeze(1) * b.unsqueeze(0)


def _einsum_pair(a: Tensor, sa: str, b: Tensor, sb: str, keep: str) -> tuple[Tensor, str]:
    """a (subscripts sa) times b (sb), summed over the letters not in keep, as one batched
    matrix product: batch letters (in both, kept), then a's, the contracted, b's."""
    batch = [c for c in sa if c in sb and c in keep]
    summed = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {**dict(zip(sa, a.shape)), **dict(zip(sb, b.shape))}
    for c in batch + summed:
        if a.shape[sa.index(c)] != b.shape[sb.index(c)]:
            raise ValueError(f"einsum: subscript {c!r} has size {a.shape[sa.index(c)]} in one "
                             f"operand and {b.shape[sb.index(c)]} in the other")
    lead = [size[c] for c in batch]
    am = a.permute([sa.index(c) for c in batch + left + summed]).reshape(
        lead + [math.prod(size[c] for c in left), math.prod(size[c] for c in summed)])
    bm = b.permute([sb.index(c) for c in batch + summed + right]).reshape(
        lead + [math.prod(size[c] for c in summed), math.prod(size[c] for c in right)])
    out = matmul(am, bm).reshape(lead + [size[c] for c in left + right])
    return out, "".join(batch + left + right)


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """torch.einsum through the exact ops: per operand, letters it alone has and the result
    lacks are summed first; operands are then taken pairwise, left to right, each pair one
    batched matrix product (matmul) over their shared letters. "..." stands for the same
    leading dims in every operand. A letter repeated within one operand (a diagonal) is
    refused."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ts = [_core.as_tensor(t, "einsum") for t in operands]
    eq = equation.replace(" ", "")
    inputs, arrow, out = eq.partition("->")
    subs = inputs.split(",")
    if len(subs) != len(ts) or not ts:
        raise ValueError(f"einsum: {equation!r} names {len(subs)} operands, got {len(ts)}")
    dots = max((t.ndim - len(s.replace("...", "")) for s, t in zip(subs, ts)
                if "..." in s), default=0)
    spare = "".join(chr(0x100 + i) for i in range(dots))  # letters no equation uses
    subs = [s.replace("...", spare[dots - (t.ndim - len(s) + 3):]) if "..." in s else s
            for s, t in zip(subs, ts)]
    if not arrow:  # implicit: the letters used once, in alphabetical order
        out = "".join(sorted(c for c in set("".join(subs)) if "".join(subs).count(c) == 1))
    out = out.replace("...", spare)
    for s, t in zip(subs, ts):
        if len(s) != t.ndim or len(set(s)) != len(s) or not all(c.isalpha() for c in s):
            raise ValueError(f"einsum: subscripts {s!r} for an operand of shape {t.shape} "
                             "(one distinct letter per dimension)")
    if not set(out) <= set("".join(subs)) or len(set(out)) != len(out):
        raise ValueError(f"einsum: output subscripts {out!r} must be distinct input letters")
    for i, (s, t) in enumerate(zip(subs, ts)):  # letters only this operand has, not output
        alone = [d for d, c in enumerate(s) if c not in out and
                 not any(c in o for j, o in enumerate(subs) if j != i)]
        if alone:
            ts[i], subs[i] = t.sum(alone), "".join(c for c in s if s.index(c) not in alone)
    result, letters = ts[0], subs[0]
    for k in range(1, len(ts)):
        keep = out + "".join(subs[k + 1:])
        result, letters = _einsum_pair(result, letters, ts[k], subs[k], keep)
    gone = [d for d, c in enumerate(letters) if c not in out]
    if gone:
        result, letters = result.sum(gone), "".join(c for c in letters if c in out)
    return result.permute([letters.index(c) for c in out]) if letters != out else result


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """input·weightᵀ + bias with weight of shape (out_features, in_features), as
    torch.nn.functional.linear."""
    if _autocast._state.dtype is None:  # as in matmul
        direct = _direct.matmul(input, weight, bias, True, _core.threads())
        if type(direct) is Tensor:
            return direct
        if direct is not None:
            grad_x, grad_w = input._requires_grad, weight._requires_grad
            operands = (input, weight) if bias is None else (input, weight, bias)
            backward = _linear_backward(input._data.shape, weight._data.shape, 0,
                                        input._data if grad_w else None,
                                        weight._data if grad_x else None, grad_x, grad_w,
                                        bias is not None,
                                        bias is not None and bias._requires_grad)
            return _core.record("linear", direct, operands, backward, operands)
    x = _core.as_tensor(input, "linear")
    w = _core.as_tensor(weight, "linear")
    b = bias
    _core.require_float(x, "linear", "input")
    _core.require_float(w, "linear", "weight")
    sx, sw = x._data.shape, w._data.shape
    if len(sw) != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                         f"{sw}")
    if not sx or sx[-1] != sw[1]:
        raise ValueError(f"linear: input of shape {sx} and weight of shape {sw}: "
                         f"the last dimension of the input must be {sw[1]}")
    n_out, n_in = sw
    inputs: tuple = (x, w)
    if b is not None:
        b = _core.as_tensor(b, "linear")
        _core.require_float(b, "linear", "bias")
        if b._data.shape != (n_out,):
            raise ValueError(f"linear: bias of shape {b._data.shape} for a weight of shape "
                             f"{sw}; expected ({n_out},)")
        inputs = (x, w, b)
    half = _autocast.half_code()
    grad_x, grad_w = x.requires_grad, w.requires_grad   # read by the closure, as in matmul
    has_bias = b is not None
    grad_b = b is not None and b.requires_grad
    x_rows = np.ascontiguousarray(x._data if len(sx) == 2
                                  else x._data.reshape(_rows(sx[:-1]), n_in))
    w_data = np.ascontiguousarray(w._data)
    ops = _autocast.Operands(half)
    x_keep = ops.keep(x, x_rows, w.requires_grad)
    w_keep = ops.keep(w, w_data, x.requires_grad)
    out = np.empty((x_rows.shape[0], n_out), np.float32)
    if out.size:
        _gemm.gemm(x_rows, w_data, out, False, True, _core.threads(),
                   None if b is None else b._data, half, ops.saves[0], ops.saves[1])
    ops.packed(out)
    backward = _linear_backward(sx, sw, half, x_keep, w_keep, grad_x, grad_w, has_bias, grad_b)
    return _core.record("linear", out.reshape(sx[:-1] + (n_out,)), inputs, backward,
                        ops.protected(inputs))


def _linear_backward(sx: tuple, sw: tuple, half: int, x_keep: Optional[np.ndarray],
                     w_keep: Optional[np.ndarray], grad_x: bool, grad_w: bool, has_bias: bool,
                     grad_b: bool) -> Any:
    """The backward of linear: input of shape sx (x_keep: its rows, kept for the weight's
    gradient), weight sw (w_keep, kept for the input's)."""
    rows, n_out = _rows(sx[:-1]), sw[0]

    def backward(g: np.ndarray):
        g_rows = g.reshape(rows, n_out)
        gx = gw = None
        if grad_x:
            assert w_keep is not None  # kept for x's gradient
            gx = _shaped(_product(g_rows, w_keep, half=half), sx)
        if grad_w:
            assert x_keep is not None
            gw = _weight_grad(g_rows, x_keep, half, sw)
        if not has_bias:
            return gx, gw
        return gx, gw, (_core.sum_axis(g_rows, 0) if grad_b else None)
    return backward


def _triangle(op: str, x: Tensor, diagonal: int, lower: bool) -> Tensor:
    x = _core.as_tensor(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions, got shape {x.shape}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
        raise TypeError(f"{op}: diagonal must be an integer, got {diagonal!r}")
    rows, cols = x.shape[-2:]
    keep = np.tri(rows, cols, int(diagonal), dtype=bool)
    if not lower:
        keep = ~np.tri(rows, cols, int(diagonal) - 1, dtype=bool)
    zero = np.zeros((), x._data.dtype)
    # where, not a product by the mask: the zeroed part is 0 even where x is inf or NaN.
    return _core.record(op, np.where(keep, x._data, zero), (x,),
                        lambda g: (np.where(keep, g, np.float32(0)),))


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes (j <= i + diagonal), zeros above, as torch.tril."""
    return _triangle("tril", input, diagonal, True)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes (j >= i + diagonal), zeros below, as torch.triu."""
    return _triangle("triu", input, diagonal, False)
