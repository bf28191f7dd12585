"""Convolution, pooling and batch norm over NCHW float32 tensors (kernels: csrc/conv.c).

Arguments follow torch.nn.functional. Every shape, dtype and size rule is checked here, before
a kernel runs; pooling windows are computed here once as row and column tables (clipped to the
input), so one max kernel and one average kernel serve max_pool2d, avg_pool2d and
adaptive_avg_pool2d. The association orders of every sum are in the design note of conv.c.
Under onemodel.amp.autocast conv2d runs on bfloat16 / float16 operands as linear does
(functional/linalg.py): the kernel rounds the images as it loads them, and an intermediate
input is kept for the backward pass as the 2-byte copy that loading wrote. conv_transpose1d/2d
run on conv2d's kernels (forward: its input gradient; backward: its forward and weight
gradient), so they round as those do; they keep their input in float32 (the input gradient's
product writes no 2-byte copy). batch_norm reads its input rounded to 2 bytes too and keeps
its 2-byte copy (the float32 conv output it normalises is what a convnet's graph would
otherwise hold most of).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from .. import _autocast
from .._kernels import _conv
from ..tensor import Tensor
from . import _core
from .shape import pad, reshape

IntPair = Union[int, Sequence[int]]
IntSingle = Union[int, Sequence[int]]


def _ints(value: Any, name: str, op: str, minimum: int, n: int) -> tuple:
    """An int or n ints (as PyTorch's size arguments) as a tuple of n ints >= minimum."""
    if isinstance(value, (int, np.integer)):
        items = (value,) * n
    else:
        items = tuple(value) if isinstance(value, (tuple, list)) else ()
    if len(items) != n or any(isinstance(v, bool) or not isinstance(v, (int, np.integer))
                              for v in items):
        raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {value!r}")
    if min(items) < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return tuple(int(v) for v in items)


def _pair(value: Any, name: str, op: str, minimum: int) -> tuple:
    return _ints(value, name, op, minimum, 2)


def _image(x: Any, op: str) -> Tensor:
    """x as a float32 tensor of rank 3 (C, H, W) or 4 (N, C, H, W)."""
    x = _core.as_tensor(x, op)
    _core.require_float(x, op)
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {x.shape}")
    return x


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


# -- convolution ----------------------------------------------------------------------------
def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntPair = 1,
           padding: Union[IntPair, str] = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D cross-correlation as torch.nn.functional.conv2d; padding may be "valid" or "same"
    (the latter with stride 1; an odd total padding puts the extra one on the right)."""
    return _convolution("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: IntSingle = 1,
           padding: Union[IntSingle, str] = 0, dilation: IntSingle = 1,
           groups: int = 1) -> Tensor:
    """1-D cross-correlation over (N, C, L) or (C, L) as torch.nn.functional.conv1d: the 2-D
    kernels over a height of 1, so exact mode gives their bits; padding as conv2d's."""
    return _convolution("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def _operands(op: str, n: int, x: Any, weight: Any, bias: Any, stride: Any, dilation: Any,
              groups: Any, transposed: bool = False) -> tuple:
    """The checked input, weight, bias, stride, dilation and groups of a convolution (n = 1, 2)
    or, transposed, of its transpose, whose weight is (in_channels, out_channels/groups, ...)."""
    x = _core.as_tensor(x, op)
    _core.require_float(x, op)
    layout = ("H", "W") if n == 2 else ("L",)
    if x.ndim not in (n + 1, n + 2):
        raise ValueError(f"{op}: input must be (N, C, {', '.join(layout)}) or "
                         f"(C, {', '.join(layout)}), got shape {x.shape}")
    w = _core.as_tensor(weight, op)
    _core.require_float(w, op, "weight")
    if w.ndim != n + 2:
        channels = "in_channels, out_channels" if transposed else "out_channels, in_channels"
        raise ValueError(f"{op}: weight must be ({channels}/groups, "
                         f"{', '.join('k' + d.lower() for d in layout)}), got shape {w.shape}")
    stride = _ints(stride, "stride", op, 1, n)
    dilation = _ints(dilation, "dilation", op, 1, n)
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive integer, got {groups!r}")
    b = None if bias is None else _core.as_tensor(bias, op)
    if b is not None:
        _core.require_float(b, op, "bias")
        k = w.shape[1] * groups if transposed else w.shape[0]
        if b.shape != (k,):
            raise ValueError(f"{op}: bias of shape {b.shape} for weight {w.shape}, expected "
                             f"({k},)")
    return x, w, b, stride, dilation, int(groups)


def _over_height(n: int, xs: tuple, w: np.ndarray, stride: tuple, padding: tuple,
                 dilation: tuple) -> tuple:
    """A 1-d convolution's input shape, weight and arguments as the 2-d kernels' over a height
    of 1 (n = 2: unchanged)."""
    if n == 2:
        return xs, w, stride, padding, dilation
    return (xs[:2] + (1,) + xs[2:], w.reshape(w.shape[:2] + (1,) + w.shape[2:]), (1,) + stride,
            (0,) + padding, (1,) + dilation)


def _convolution(op: str, n: int, x: Any, weight: Any, bias: Any, stride: Any, padding: Any,
                 dilation: Any, groups: Any) -> Tensor:
    """conv1d (n = 1) and conv2d (n = 2): checked with the caller's shapes; a 1-D convolution
    runs as a 2-D one whose height and kernel height are 1."""
    x, w, b, stride, dilation, groups = _operands(op, n, x, weight, bias, stride, dilation,
                                                  groups)
    k, cg, kernel = w.shape[0], w.shape[1], w.shape[2:]
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0,) * n
        elif padding == "same":
            if stride != (1,) * n:
                raise ValueError(f"{op}: padding='same' needs stride 1, got stride {stride} "
                                 f"(input {x.shape}, weight {w.shape})")
            spans = tuple(d * (s - 1) for d, s in zip(dilation, kernel))
            padding = tuple(span // 2 for span in spans)
            if any(span % 2 for span in spans):
                # The odd one goes on the right, as PyTorch: padded here, then none in the
                # kernel; the 2-D kernels' padding is symmetric.
                x = pad(x, tuple(a for span in reversed(spans)
                                 for a in (span // 2, span - span // 2)))
                padding = (0,) * n
        else:
            raise ValueError(f"{op}: padding must be 'valid', 'same' or ints, got {padding!r}")
    padding = _ints(padding, "padding", op, 0, n)
    batched = x.ndim == n + 2
    xs = x.shape if batched else (1,) + x.shape
    if xs[1] != cg * groups or k % groups:
        raise ValueError(f"{op}: input {x.shape} and weight {w.shape} with groups={groups}: "
                         f"input channels must be {cg}*{groups} and {k} output channels "
                         f"divisible by {groups}")
    out = tuple(_out_size(*a) for a in zip(xs[2:], kernel, stride, padding, dilation))
    if min(out) < 1 or min(kernel) < 1:
        raise ValueError(f"{op}: kernel {kernel} with dilation {dilation} is larger than the "
                         f"padded input {tuple(s + 2 * q for s, q in zip(xs[2:], padding))} "
                         f"(input {x.shape}, weight {w.shape})")
    xs, w4, stride, padding, dilation = _over_height(n, xs, w._data, stride, padding, dilation)
    out = (1,) * (2 - n) + out
    x4 = np.ascontiguousarray(x._data.reshape(xs))
    y = np.empty((xs[0], k) + out, np.float32)
    args = (stride, padding, dilation, groups)
    half = _autocast.half_code()
    ops = _autocast.Operands(half)
    x_keep = ops.keep(x, x4, True)
    assert x_keep is not None  # needed: the weight's gradient reads it
    _conv.conv2d_forward(x4, w4, None if b is None else b._data, y, *args, _core.threads(),
                         half, ops.saves[0])
    ops.packed(y)
    out_shape = (xs[0], k) + out[2 - n:] if batched else (k,) + out[2 - n:]
    # The closure reads these, not the tensors: an input saved in 2 bytes must be free to go.
    grad_x, grad_w, grad_b = x.requires_grad, w.requires_grad, b is not None and b.requires_grad
    x_shape, w_shape, y_shape = x.shape, w.shape, y.shape

    def backward(g: np.ndarray):
        gx = np.empty(xs, np.float32) if grad_x else None
        gw = np.empty(w4.shape, np.float32) if grad_w else None
        gb = np.empty((k,), np.float32) if grad_b else None
        _conv.conv2d_backward(x_keep, w4, np.ascontiguousarray(g.reshape(y_shape)), gx, gw, gb,
                              *args, _core.threads(), half)
        return ((None if gx is None else gx.reshape(x_shape)),
                (None if gw is None else gw.reshape(w_shape)), gb)

    inputs = (x, w) if b is None else (x, w, b)
    return _core.record(op, y.reshape(out_shape), inputs, backward, ops.protected(inputs))


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     stride: IntPair = 1, padding: IntPair = 0, output_padding: IntPair = 0,
                     groups: int = 1, dilation: IntPair = 1) -> Tensor:
    """2-D transposed convolution as torch.nn.functional.conv_transpose2d, weight (in_channels,
    out_channels/groups, kh, kw): the gradient of a conv2d with respect to its input, computed
    by conv2d's kernels (exact mode gives their bits; under autocast their rounding)."""
    return _transposed("conv_transpose2d", 2, input, weight, bias, stride, padding,
                       output_padding, groups, dilation)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None,
                     stride: IntSingle = 1, padding: IntSingle = 0,
                     output_padding: IntSingle = 0, groups: int = 1,
                     dilation: IntSingle = 1) -> Tensor:
    """1-D transposed convolution over (N, C, L) or (C, L), as
    torch.nn.functional.conv_transpose1d: conv_transpose2d's kernels over a height of 1."""
    return _transposed("conv_transpose1d", 1, input, weight, bias, stride, padding,
                       output_padding, groups, dilation)


def _transposed(op: str, n: int, x: Any, weight: Any, bias: Any, stride: Any, padding: Any,
                output_padding: Any, groups: Any, dilation: Any) -> Tensor:
    """y = conv_transpose(x, w) is the input gradient of the convolution by w (as conv2d's
    weight: K = in_channels) of y-shaped images, for the upstream gradient x. Its backward:
    gx = conv(gy, w), gw = that convolution's weight gradient for images gy and upstream x."""
    x, w, b, stride, dilation, groups = _operands(op, n, x, weight, bias, stride, dilation,
                                                  groups, transposed=True)
    padding = _ints(padding, "padding", op, 0, n)
    extra = _ints(output_padding, "output_padding", op, 0, n)
    if any(e >= s and e >= d for e, s, d in zip(extra, stride, dilation)):
        raise ValueError(f"{op}: output_padding {extra} must be smaller than the stride "
                         f"{stride} or the dilation {dilation}")
    batched = x.ndim == n + 2
    xs, kernel = x.shape if batched else (1,) + x.shape, w.shape[2:]
    if xs[1] != w.shape[0] or w.shape[0] % groups:
        raise ValueError(f"{op}: input {x.shape} and weight {w.shape} with groups={groups}: "
                         f"input channels must be {w.shape[0]}, divisible by {groups}")
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + e + 1
                for i, s, p, d, k, e in zip(xs[2:], stride, padding, dilation, kernel, extra))
    if min(xs[2:] + kernel + out) < 1:
        raise ValueError(f"{op}: input {x.shape}, weight {w.shape}, stride {stride}, padding "
                         f"{padding}, dilation {dilation} and output_padding {extra} give an "
                         f"output of size {out}: every size must be positive")
    # An output padding of a stride or more (dilation allows it) makes the convolution of the
    # output e // s longer than x: its gradient there is zero.
    more = tuple(e // s for e, s in zip(extra, stride))
    if any(more):
        x = pad(x, tuple(a for m in reversed(more) for a in (0, m)))
        xs = x.shape if batched else (1,) + x.shape
    xs, w4, stride, padding, dilation = _over_height(n, xs, w._data, stride, padding, dilation)
    x4 = np.ascontiguousarray(x._data.reshape(xs))
    y = np.empty((xs[0], w.shape[1] * groups) + (1,) * (2 - n) + out, np.float32)
    args = (stride, padding, dilation, groups)
    half = _autocast.half_code()  # read once: the backward rounds as the forward did
    # The input gradient reads only the shape of the convolution's images: y stands for them.
    _conv.conv2d_backward(y, w4, x4, y, None, None, *args, _core.threads(), half)
    if b is not None:
        y += b._data.reshape(-1, 1, 1)
    grad_x, grad_w, grad_b = x.requires_grad, w.requires_grad, b is not None and b.requires_grad
    x_shape, w_shape, y_shape = x.shape, w.shape, y.shape

    def backward(g: np.ndarray):
        g4 = np.ascontiguousarray(g.reshape(y_shape))
        gx = np.empty(xs, np.float32) if grad_x else None
        gw = np.empty(w4.shape, np.float32) if grad_w else None
        if gx is not None:
            _conv.conv2d_forward(g4, w4, None, gx, *args, _core.threads(), half)
        if gw is not None:
            _conv.conv2d_backward(g4, w4, x4, None, gw, None, *args, _core.threads(), half)
        planes = g4.reshape(y_shape[:2] + (y_shape[2] * y_shape[3],))
        gb = _core.sum_axis(_core.sum_axis(planes, 2), 0) if grad_b else None
        return ((None if gx is None else gx.reshape(x_shape)),
                (None if gw is None else gw.reshape(w_shape)), gb)

    out_shape = (y_shape[:2] if batched else y_shape[1:2]) + out
    return _core.record(op, y.reshape(out_shape), (x, w) if b is None else (x, w, b), backward,
                        (x, w))


# -- pooling --------------------------------------------------------------------------------
def _planes(x: Tensor) -> np.ndarray:
    """x's data as (planes, H, W)."""
    return x._data.reshape((-1,) + x.shape[-2:])


def _sliding(size: int, kernel: int, stride: int, padding: int, op: str, shape: tuple,
             ceil_mode: bool = False, dilation: int = 1):
    """Windows of taps start + i * dilation, i < kernel, over a padded axis: (first tap inside
    the input, one past the last tap inside, unclipped starts, output size). With ceil_mode a
    last, partial window is kept when it starts inside the input or the left padding (PyTorch's
    rule)."""
    span = dilation * (kernel - 1) + 1
    out = _out_size(size, kernel, stride, padding, dilation)
    if out < 1:
        raise ValueError(f"{op}: kernel {kernel} (dilation {dilation}) is larger than the padded "
                         f"input {size + 2 * padding} (input {shape})")
    if ceil_mode and (size + 2 * padding - span) % stride and out * stride < size + padding:
        out += 1
    start = np.arange(out, dtype=np.int64) * stride - padding
    first = start - np.minimum(start, 0) // dilation * dilation  # ceil(-start / d) taps skipped
    last = start + np.minimum(kernel - 1, (size - 1 - start) // dilation) * dilation
    if (last < first).any():
        raise ValueError(f"{op}: with kernel {kernel}, dilation {dilation} and padding {padding}"
                         f" a window has no tap inside the input (input {shape})")
    return first, last + 1, start, out


def _pool_pair(value: Any, name: str, op: str, minimum: int) -> tuple:
    """As _pair, also taking a 1-tuple for both axes, as PyTorch's pooling does."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    return _pair(value, name, op, minimum)


def _pool_args(x: Tensor, kernel_size: IntPair, stride: Optional[IntPair], padding: IntPair,
               op: str, ceil_mode: bool, dilation: IntPair = 1) -> tuple:
    kernel = _pool_pair(kernel_size, "kernel_size", op, 1)
    # An empty stride means the default, as in PyTorch.
    stride = kernel if stride is None or stride == () else _pool_pair(stride, "stride", op, 1)
    padding = _pool_pair(padding, "padding", op, 0)
    dilation = _pool_pair(dilation, "dilation", op, 1)
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise ValueError(f"{op}: padding {padding} must be at most half of kernel_size "
                         f"{kernel}")
    rows = _sliding(x.shape[-2], kernel[0], stride[0], padding[0], op, x.shape, ceil_mode,
                    dilation[0])
    cols = _sliding(x.shape[-1], kernel[1], stride[1], padding[1], op, x.shape, ceil_mode,
                    dilation[1])
    return kernel, padding, dilation, rows, cols


# Output elements of the block of planes whose int64 indices max_pool2d holds at once.
_POOL_BLOCK = 1 << 16


def max_pool2d(input: Tensor, kernel_size: IntPair, stride: Optional[IntPair] = None,
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """Maximum over each window of taps `dilation` apart (padding counts as -inf), arguments
    as torch.nn.functional.max_pool2d. The gradient goes to the first maximal element in
    row-major window order, as in PyTorch. With return_indices, also the int64 index
    (row * W + column) of that element in its plane."""
    return _max_pool("max_pool2d", _image(input, "max_pool2d"), kernel_size, stride, padding,
                     dilation, ceil_mode, return_indices)


def max_pool1d(input: Tensor, kernel_size: IntSingle, stride: Optional[IntSingle] = None,
               padding: IntSingle = 0, dilation: IntSingle = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """max_pool2d over (N, C, L) or (C, L) seen as a height of 1; indices are positions in L."""
    op = "max_pool1d"
    kernel, stride, padding, dilation = _row_window(op, kernel_size, stride, padding, dilation)
    return _over_rows(op, input, lambda rows: _max_pool(
        op, rows, kernel, stride, padding, dilation, ceil_mode, return_indices))


def _max_pool(op: str, x: Tensor, kernel_size: IntPair, stride: Optional[IntPair],
              padding: IntPair, dilation: IntPair, ceil_mode: bool,
              return_indices: bool) -> Any:
    _, _, (sh, sw), (hs, he, _, oh), (ws, we, _, ow) = _pool_args(
        x, kernel_size, stride, padding, op, bool(ceil_mode), dilation)
    windows = (hs, he, ws, we)
    xp = _planes(x)
    y = np.empty((xp.shape[0], oh, ow), np.float32)
    # The backward reads only the indices: the graph keeps them in 2 bytes where a plane has
    # at most 2^16 elements (the kernel's int64 ones exist for a block of planes at a time).
    compact = not return_indices and x.shape[-2] * x.shape[-1] <= 1 << 16
    idx = np.empty(y.shape, np.uint16 if compact else np.int64)
    step = max(1, _POOL_BLOCK // max(1, oh * ow)) if compact else max(1, len(y))
    for p in range(0, len(y), step):
        planes = slice(p, p + step)
        block = np.empty(y[planes].shape, np.int64) if compact else idx[planes].view(np.int64)
        _conv.max_pool2d(xp[planes], y[planes], block, *windows, sh, sw, _core.threads())
        if compact:
            idx[planes] = block
    out_shape = x.shape[:-2] + (oh, ow)
    x_shape, planes_shape, y_shape = x.shape, xp.shape, y.shape

    def backward(g: np.ndarray):
        gx = np.empty(x_shape, np.float32)  # not a view: the next backward may write into it
        gx_planes, gy = gx.reshape(planes_shape), np.ascontiguousarray(g.reshape(y_shape))
        for p in range(0, len(gy), step):
            _conv.max_pool2d_backward(gy[p:p + step], np.asarray(idx[p:p + step], np.int64),
                                      gx_planes[p:p + step], *windows, _core.threads())
        return (gx,)

    out = _core.record(op, y.reshape(out_shape), (x,), backward)
    return (out, Tensor._wrap(idx.reshape(out_shape))) if return_indices else out


Windows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # (hs, he, ws, we)


def _average(x: Tensor, op: str, windows: Windows, dh: np.ndarray, dw: np.ndarray) -> Tensor:
    xp = _planes(x)
    y = np.empty((xp.shape[0], dh.shape[0], dw.shape[0]), np.float32)
    _conv.avg_pool2d(xp, y, *windows, dh, dw, _core.threads())
    x_shape, planes_shape, y_shape = x.shape, xp.shape, y.shape  # all the backward needs

    def backward(g: np.ndarray):
        gx = np.empty(planes_shape, np.float32)
        _conv.avg_pool2d_backward(np.ascontiguousarray(g.reshape(y_shape)), gx, *windows, dh,
                                  dw, _core.threads())
        return (gx.reshape(x_shape),)

    return _core.record(op, y.reshape(x.shape[:-2] + y.shape[1:]), (x,), backward)


def avg_pool2d(input: Tensor, kernel_size: IntPair, stride: Optional[IntPair] = None,
               padding: IntPair = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Optional[int] = None) -> Tensor:
    """Mean over each window, arguments as torch.nn.functional.avg_pool2d; with
    count_include_pad (PyTorch's default) the padding counts in the divisor, and
    divisor_override replaces every window's divisor."""
    op = "avg_pool2d"
    return _avg_pool(op, _image(input, op), kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool1d(input: Tensor, kernel_size: IntSingle, stride: Optional[IntSingle] = None,
               padding: IntSingle = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """avg_pool2d over (N, C, L) or (C, L) seen as a height of 1, as PyTorch computes it."""
    op = "avg_pool1d"
    kernel, stride, padding, _ = _row_window(op, kernel_size, stride, padding, 1)
    return _over_rows(op, input, lambda rows: _avg_pool(
        op, rows, kernel, stride, padding, ceil_mode, count_include_pad, None))


def _row_window(op: str, kernel_size: IntSingle, stride: Optional[IntSingle],
                padding: IntSingle, dilation: IntSingle) -> tuple:
    """A 1-d pooling's kernel, stride, padding and dilation as the 2-d ones over a height of 1
    (an empty stride means the kernel's, as PyTorch)."""
    kernel = _ints(kernel_size, "kernel_size", op, 1, 1)
    stride = kernel if stride is None or stride == () else _ints(stride, "stride", op, 1, 1)
    return ((1,) + kernel, (1,) + stride, (0,) + _ints(padding, "padding", op, 0, 1),
            (1,) + _ints(dilation, "dilation", op, 1, 1))


def _over_rows(op: str, input: Any, pool: Callable[[Tensor], Any]) -> Any:
    """A 1-d pooling of (N, C, L) or (C, L): `pool` over its rows as (..., 1, L) images, each
    output (and indices) back to (..., L_out)."""
    x = _core.as_tensor(input, op)
    _core.require_float(x, op)
    if x.ndim not in (2, 3):
        raise ValueError(f"{op}: input must be (N, C, L) or (C, L), got shape {x.shape}")
    out = pool(reshape(x, x.shape[:-1] + (1, x.shape[-1])))
    outs = tuple(reshape(y, x.shape[:-1] + y.shape[-1:]) for y in (
        out if isinstance(out, tuple) else (out,)))
    return outs if isinstance(out, tuple) else outs[0]


def _avg_pool(op: str, x: Tensor, kernel_size: IntPair, stride: Optional[IntPair],
              padding: IntPair, ceil_mode: bool, count_include_pad: bool,
              divisor_override: Optional[int]) -> Tensor:
    d = divisor_override
    if d is not None and (isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d == 0):
        raise ValueError(f"{op}: divisor_override must be a non-zero integer or None, got {d!r}")
    kernel, pad, _, (hs, he, h0, _), (ws, we, w0, _) = _pool_args(x, kernel_size, stride,
                                                               padding, op, bool(ceil_mode))
    if d is not None:
        # The kernel divides by positive counts; a negative divisor negates the mean.
        dh, dw = np.full(hs.shape, abs(int(d)), np.int64), np.ones_like(ws)
    elif count_include_pad:
        # PyTorch's divisor: the window clipped to the padded input, not to the input.
        dh = np.minimum(h0 + kernel[0], x.shape[-2] + pad[0]) - h0
        dw = np.minimum(w0 + kernel[1], x.shape[-1] + pad[1]) - w0
    else:
        dh, dw = he - hs, we - ws
    y = _average(x, op, (hs, he, ws, we), dh, dw)
    return -y if d is not None and d < 0 else y


def adaptive_avg_pool2d(input: Tensor,
                        output_size: Union[int, Sequence[Optional[int]]]) -> Tensor:
    """Mean over the windows [floor(i*H/OH), ceil((i+1)*H/OH)) as in PyTorch; None in
    output_size keeps that input size."""
    op = "adaptive_avg_pool2d"
    x = _image(input, op)
    sizes = (output_size, output_size) if isinstance(output_size, (int, np.integer)) \
        else tuple(output_size)
    if len(sizes) != 2:
        raise ValueError(f"{op}: output_size must be an int or a pair, got {output_size!r}")
    return _adaptive(op, x, tuple(x.shape[-2 + i] if s is None else s
                                  for i, s in enumerate(sizes)))


def adaptive_avg_pool1d(input: Tensor, output_size: IntSingle) -> Tensor:
    """adaptive_avg_pool2d over (N, C, L) or (C, L) seen as a height of 1."""
    op = "adaptive_avg_pool1d"
    size = _ints(output_size, "output_size", op, 1, 1)
    return _over_rows(op, input, lambda rows: _adaptive(op, rows, (1,) + size))


def _adaptive(op: str, x: Tensor, out_hw: tuple) -> Tensor:
    _pair(out_hw, "output_size", op, 1)
    if x.shape[-2] < 1 or x.shape[-1] < 1:
        raise ValueError(f"{op}: input {x.shape} has an empty spatial dimension")

    def axis(size: int, out: int) -> tuple:
        i = np.arange(out, dtype=np.int64)
        return (i * size) // out, -((-(i + 1) * size) // out)

    (hs, he), (ws, we) = axis(x.shape[-2], int(out_hw[0])), axis(x.shape[-1], int(out_hw[1]))
    return _average(x, op, (hs, he, ws, we), he - hs, we - ws)


# -- batch norm -----------------------------------------------------------------------------
def _channel_vector(t: Any, c: int, name: str, op: str) -> Optional[Tensor]:
    if t is None:
        return None
    t = _core.as_tensor(t, op)
    _core.require_float(t, op, name)
    if t.shape != (c,):
        raise ValueError(f"{op}: {name} has shape {t.shape}, expected ({c},)")
    return t


def update_running(running: Tensor, batch: np.ndarray, momentum: float) -> None:
    """running = (1 - momentum)·running + momentum·batch in place, computed in double and
    rounded once to float32: batch norm's update of a running statistic."""
    m = float(momentum)
    new = m * batch.astype(np.float64) + (1.0 - m) * running._data.astype(np.float64)
    running.copy_(new.astype(np.float32))


def batch_norm(input: Tensor, running_mean: Optional[Tensor], running_var: Optional[Tensor],
               weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch norm over (N, C), (N, C, L) or (N, C, H, W) as torch.nn.functional.batch_norm.

    Training: normalises with the batch mean and biased variance and, when given, updates the
    running statistics in place: running = (1 - momentum)·running + momentum·batch, with the
    unbiased variance for running_var (computed in double, rounded once). Evaluation: uses the
    running statistics. Under autocast the input is read rounded to bfloat16 / float16 (as
    torch's reads a convolution's 2-byte output) and kept for backward in 2 bytes; the
    arithmetic is float32.
    """
    op = "batch_norm"
    x = _core.as_tensor(input, op)
    _core.require_float(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must be (N, C, ...), got shape {x.shape}")
    n, c = x.shape[:2]
    s = int(np.prod(x.shape[2:], dtype=np.int64))
    rm = _channel_vector(running_mean, c, "running_mean", op)
    rv = _channel_vector(running_var, c, "running_var", op)
    w = _channel_vector(weight, c, "weight", op)
    b = _channel_vector(bias, c, "bias", op)
    if (rm is None) != (rv is None):
        raise ValueError(f"{op}: running_mean and running_var must both be given or both None")
    if not training and rm is None:
        raise ValueError(f"{op}: evaluation mode needs running_mean and running_var")
    if training and n * s == 1:
        raise ValueError(f"{op}: expected more than 1 value per channel when training, got "
                         f"input of shape {x.shape}")
    if eps < 0:
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")

    x3 = x._data.reshape(n, c, s)
    threads = _core.threads()
    # Under autocast the kernels read x rounded to 2 bytes (torch's batch norm reads a
    # convolution's bfloat16 output), and the backward reads the 2-byte copy they wrote.
    half = _autocast.half_code()
    grad_x = x.requires_grad
    needed = grad_x or any(t is not None and t.requires_grad for t in (w, b))
    ops = _autocast.Operands(half)
    x_keep = ops.keep(x, x3, needed)
    save = ops.saves[0]
    src = x3
    if training and n * s == 0:
        # An empty batch has no statistics: the output is empty and the running statistics
        # stay as they are, as in PyTorch (weight and bias get zero gradients).
        mean, invstd = np.zeros(c, np.float32), np.ones(c, np.float32)
    elif training:
        mean, var, var_unbiased, invstd = (np.empty(c, np.float32) for _ in range(4))
        _conv.batch_norm_stats(x3, float(eps), mean, var, var_unbiased, invstd, threads, half,
                               save)
        if save is not None:  # apply reads the bits the statistics pass saved
            src, save = save, None
        if rm is not None:
            assert rv is not None  # both or neither (checked above)
            update_running(rm, mean, momentum)
            update_running(rv, var_unbiased, momentum)
    else:
        assert rm is not None and rv is not None  # evaluation needs them (checked above)
        mean = rm._data.copy()
        invstd = (1.0 / np.sqrt(rv._data.astype(np.float64) + float(eps))).astype(np.float32)
    wd = np.ones(c, np.float32) if w is None else w._data
    bd = np.zeros(c, np.float32) if b is None else b._data
    y = np.empty(x3.shape, np.float32)
    _conv.batch_norm_apply(src, mean, invstd, wd, bd, y, threads, half, save)
    inputs = tuple(t for t in (x, w, b) if t is not None)
    # The closure reads these, not x: an input saved in 2 bytes must be free to go.
    x_shape = x.shape

    def backward(g: np.ndarray):
        assert x_keep is not None  # backward runs only when a gradient is needed
        gx = np.empty((n, c, s), np.float32) if grad_x else None
        gw = np.empty(c, np.float32) if w is not None and w.requires_grad else None
        gb = np.empty(c, np.float32) if b is not None and b.requires_grad else None
        _conv.batch_norm_backward(x_keep, np.ascontiguousarray(g.reshape(n, c, s)), mean,
                                  invstd, wd, gx, gw, gb, bool(training), _core.threads(), half)
        grads = [None if gx is None else gx.reshape(x_shape)]
        grads += [gw] if w is not None else []
        grads += [gb] if b is not None else []
        return grads

    return _core.record(op, y.reshape(x.shape), inputs, backward,
                        ops.protected((x,) if w is None else (x, w)))


__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d", "batch_norm",
           "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d"]
