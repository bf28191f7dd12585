"""The functions that make tensors, as torch's: tensor, from_numpy, as_tensor, zeros, ones,
full, empty, their *_like forms, arange, eye and linspace (tensor.py re-exports them)."""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence

import numpy as np

from .tensor import Tensor, _as_array, _canonical, _dtype_arg, bool_, float32, int64


def tensor(data: Any, dtype: Optional[Any] = None, requires_grad: bool = False, *,
           device: Any = None) -> Tensor:
    """Copies data into a new tensor; float data becomes float32, integer data int64."""
    check_device(device, "tensor")
    _warn_float64(data, dtype, "tensor")
    return Tensor._wrap(_as_array(data, dtype), False)._set_requires_grad(requires_grad)


def is_tensor(obj: Any) -> bool:
    """True if `obj` is a onemodel Tensor, as `torch.is_tensor`.

    Parameters
    ----------
    obj : object
        Anything.
    """
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    """The number of elements of `input`, as `torch.numel`.

    Parameters
    ----------
    input : Tensor
        The tensor.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"numel: expected a Tensor, got {type(input).__name__}")
    return input.numel()


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor over a copy of a: floats -> float32, int32 kept, other integers -> int64."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(a).__name__}")
    _warn_float64(a, None, "from_numpy")
    return Tensor._wrap(np.array(_canonical(a, "from_numpy"), copy=True))


def as_tensor(data: Any, dtype: Optional[Any] = None, device: Any = None) -> Tensor:
    """data as a tensor: a tensor of that dtype itself, anything else copied as tensor()."""
    check_device(device, "as_tensor")
    if isinstance(data, Tensor) and (dtype is None or _dtype_arg(dtype, "as_tensor") ==
                                     data.dtype):
        return data
    _warn_float64(data, dtype, "as_tensor")
    return Tensor._wrap(_as_array(data, dtype))


_float64_warned = False


def _warn_float64(data: Any, dtype: Any, op: str) -> None:
    """float64 numpy data becomes float32 (docs/spec/clarifications.md, "float64 until it
    exists"), with a warning the first time in the process."""
    global _float64_warned
    if (dtype is None and not _float64_warned and isinstance(data, (np.ndarray, np.floating))
            and data.dtype == np.float64):
        _float64_warned = True
        warnings.warn(f"{op}: float64 data converted to float32 (onemodel has no float64 "
                      "yet); warned once per process", UserWarning, stacklevel=3)


def check_device(device: Any, op: str) -> None:
    """torch's device= argument: None or the CPU ("cpu", "cpu:0", a device); nothing else."""
    if device is not None and str(device).split(":")[0] != "cpu":
        raise ValueError(f"{op}: onemodel runs on the CPU only, got device {device!r}")


def _shape_arg(shape: Sequence[Any], op: str, size: Any = None) -> tuple:
    """zeros(2, 3), zeros((2, 3)) or torch's keyword zeros(size=(2, 3))."""
    if size is not None:
        if shape:
            raise TypeError(f"{op}: got the shape both as arguments {tuple(shape)} and as "
                            f"size={size!r}")
        shape = (size,)
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    out = tuple(int(s) for s in shape)
    if any(s < 0 for s in out):
        raise ValueError(f"{op}: negative dimension in shape {out}")
    return out


def zeros(*shape: Any, dtype: Any = float32, requires_grad: bool = False,
          device: Any = None, size: Any = None) -> Tensor:
    """A tensor of zeros, as `torch.zeros`.

    Parameters
    ----------
    *shape : int or sequence of int
        The shape, as separate ints or one sequence.
    dtype : dtype, optional
        The dtype (default float32).
    requires_grad : bool, optional
        Record operations on the result for autograd (default False).
    device : str or device, optional
        Only the CPU is accepted, as `"cpu"` or None.
    size : sequence of int, optional
        The shape as a keyword, as torch's `size=`.
    """
    check_device(device, "zeros")
    arr = np.zeros(_shape_arg(shape, "zeros", size), _dtype_arg(dtype, "zeros"))
    return Tensor._wrap(arr)._set_requires_grad(requires_grad)


def ones(*shape: Any, dtype: Any = float32, requires_grad: bool = False,
         device: Any = None, size: Any = None) -> Tensor:
    """A tensor of ones, as `torch.ones`.

    Parameters
    ----------
    *shape : int or sequence of int
        The shape, as separate ints or one sequence.
    dtype : dtype, optional
        The dtype (default float32).
    requires_grad : bool, optional
        Record operations on the result for autograd (default False).
    device : str or device, optional
        Only the CPU is accepted, as `"cpu"` or None.
    size : sequence of int, optional
        The shape as a keyword, as torch's `size=`.
    """
    check_device(device, "ones")
    arr = np.ones(_shape_arg(shape, "ones", size), _dtype_arg(dtype, "ones"))
    return Tensor._wrap(arr)._set_requires_grad(requires_grad)


def full(shape: Any, value: Any, dtype: Any = None, requires_grad: bool = False, *,
         device: Any = None) -> Tensor:
    """A tensor filled with `value`, as `torch.full`.

    Parameters
    ----------
    shape : int or sequence of int
        The shape.
    value : number
        The fill value.
    dtype : dtype, optional
        The dtype (default: inferred from the value, as PyTorch: float32, int64 or bool).
    requires_grad : bool, optional
        Record operations on the result for autograd (default False).
    device : str or device, optional
        Only the CPU is accepted, as `"cpu"` or None.
    """
    check_device(device, "full")
    shape = _shape_arg((shape,) if isinstance(shape, int) else tuple(shape), "full")
    kind = np.asarray(value).dtype.kind
    if dtype is None:
        dtype = float32 if kind == "f" else (bool_ if kind == "b" else int64)
    return Tensor._wrap(np.full(shape, value, _dtype_arg(dtype, "full")))._set_requires_grad(
        requires_grad)


def empty(*shape: Any, dtype: Any = float32, requires_grad: bool = False,
          device: Any = None, size: Any = None) -> Tensor:
    """zeros: memory is never handed out uninitialised, so that results stay reproducible."""
    return zeros(*shape, dtype=dtype, requires_grad=requires_grad, device=device, size=size)


def _like(other: Any, op: str) -> Tensor:
    if not isinstance(other, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(other).__name__}")
    return other


def zeros_like(other: Tensor, dtype: Any = None, requires_grad: bool = False, *,
               device: Any = None) -> Tensor:
    """A tensor of zeros shaped as `other`, as `torch.zeros_like`.

    Parameters
    ----------
    other : Tensor
        The tensor whose shape (and, by default, dtype) the result takes.
    dtype : dtype, optional
        The result's dtype (default: the other's).
    requires_grad : bool, optional
        Record operations on the result for autograd (default False).
    device : str or device, optional
        Only the CPU is accepted, as `"cpu"` or None.
    """
    t = _like(other, "zeros_like")
    return zeros(t.shape, dtype=t.dtype if dtype is None else dtype,
                 requires_grad=requires_grad, device=device)


def ones_like(other: Tensor, dtype: Any = None, requires_grad: bool = False, *,
              device: Any = None) -> Tensor:
    """A tensor of ones shaped as `other`, as `torch.ones_like`.

    Parameters
    ----------
    other : Tensor
        The tensor whose shape (and, by default, dtype) the result takes.
    dtype : dtype, optional
        The result's dtype (default: the other's).
    requires_grad : bool, optional
        Record operations on the result for autograd (default False).
    device : str or device, optional
        Only the CPU is accepted, as `"cpu"` or None.
    """
    t = _like(other, "ones_like")
    return ones(t.shape, dtype=t.dtype if dtype is None else dtype,
                requires_grad=requires_grad, device=device)


def full_like(other: Tensor, value: Any, dtype: Any = None,
              requires_grad: bool = False, *, device: Any = None) -> Tensor:
    """A tensor filled with `value` shaped as `other`, as `torch.full_like`.

    Parameters
    ----------
    other : Tensor
        The tensor whose shape (and, by default, dtype) the result takes.
    value : number
        The fill value.
    dtype : dtype, optional
        The result's dtype (default: the other's).
    requires_grad : bool, optional
        Record operations on the result for autograd (default False).
    device : str or device, optional
        Only the CPU is accepted, as `"cpu"` or None.
    """
    t = _like(other, "full_like")
    return full(t.shape, value, dtype=t.dtype if dtype is None else dtype,
                requires_grad=requires_grad, device=device)


def empty_like(other: Tensor, dtype: Any = None, requires_grad: bool = False, *,
               device: Any = None) -> Tensor:
    """`torch.empty_like`; here the memory is always zeroed (`zeros_like`).

    Parameters
    ----------
    other : Tensor
        The tensor whose shape (and, by default, dtype) the result takes.
    dtype : dtype, optional
        The result's dtype (default: the other's).
    requires_grad : bool, optional
        Record operations on the result for autograd (default False).
    device : str or device, optional
        Only the CPU is accepted, as `"cpu"` or None.
    """
    return zeros_like(other, dtype=dtype, requires_grad=requires_grad, device=device)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None, *,
           device: Any = None) -> Tensor:
    """Values from `start` up to (not including) `end` by `step`, as `torch.arange`.

    Parameters
    ----------
    start : number
        The first value; with `end` omitted, the end (the start is then 0).
    end : number, optional
        The bound, not included.
    step : number, optional
        The spacing (default 1).
    dtype : dtype, optional
        The dtype (default: int64 when every argument is an integer, float32 otherwise).
    device : str or device, optional
        Only the CPU is accepted.
    """
    check_device(device, "arange")
    if end is None:
        start, end = 0, start
    values = np.arange(start, end, step)
    return Tensor._wrap(values.astype(_dtype_arg(dtype, "arange")) if dtype is not None
                        else _canonical(values, "arange"))


def eye(n: int, m: Optional[int] = None, *, dtype: Any = float32, requires_grad: bool = False,
        device: Any = None) -> Tensor:
    """The n × m identity (m = n by default), as torch.eye."""
    check_device(device, "eye")
    rows, cols = _shape_arg((n, n if m is None else m), "eye")
    return Tensor._wrap(np.eye(rows, cols, dtype=_dtype_arg(dtype, "eye")))._set_requires_grad(
        requires_grad)


def linspace(start: Any, end: Any, steps: int, *, dtype: Any = float32,
             requires_grad: bool = False, device: Any = None) -> Tensor:
    """`steps` values from start to end, as torch.linspace computes them in float32: step =
    (end − start) / (steps − 1), start + i·step for the first half and end − (steps − 1 − i)·step
    for the second, so both ends are exact."""
    check_device(device, "linspace")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace: steps must be an integer >= 0, got {steps!r}")
    lo, hi = np.float32(start), np.float32(end)
    step = (hi - lo) / np.float32(max(steps - 1, 1))
    i = np.arange(steps, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        values = np.where(i < steps // 2, lo + i * step, hi - (np.float32(steps - 1) - i) * step)
    values[:steps == 1] = lo  # one step is start, as torch's
    return Tensor._wrap(values.astype(_dtype_arg(dtype, "linspace")))._set_requires_grad(
        requires_grad)
