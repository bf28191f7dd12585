"""Tensor: a C-contiguous numpy array with an autodiff record.

Values are float32; indices and counters int64 (or int32); masks bool. Only float32 tensors
may require gradients. The math lives in onemodel.functional; the operators here forward to it.
"""
from __future__ import annotations

import builtins
import warnings
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

import numpy as np

from . import autograd
from ._inplace import InplaceMethods
from ._printing import tensor_repr
from ._tensor_surface import TensorSurface, legacy_sizes

float32 = np.dtype(np.float32)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
_T = TypeVar("_T", bound="Tensor")  # _wrap returns the subclass it is called on
bool_ = np.dtype(np.bool_)
_DTYPES = (float32, int32, int64, bool_)


def _as_array(data: Any, dtype: Optional[Any]) -> np.ndarray:
    """Copies data into a fresh C-contiguous array of a tensor dtype (float data -> float32)."""
    if isinstance(data, Tensor):
        data = data._data
    arr = np.array(data, copy=True)
    if dtype is not None:
        target = _dtype_arg(dtype, "tensor")
        return np.require(arr.astype(target, copy=False), requirements="C")
    return _canonical(arr, "tensor")


def is_float32(dtype: Any) -> bool:
    """Whether `dtype` names float32: numpy's spellings, torch.float32, or a float32 tensor."""
    if isinstance(dtype, Tensor):
        return dtype._data.dtype == float32
    if str(dtype) in ("torch.float32", "torch.float"):
        return True
    try:
        return np.dtype(dtype) == float32
    except TypeError:
        return False


class device:
    """torch.device for the one device there is: device("cpu") (or "cpu:0", or
    device("cpu", 0)) prints as "cpu" and is what .to() takes; any other is refused."""

    def __init__(self, type: Any = "cpu", index: Optional[int] = None) -> None:
        if str(type).split(":")[0] != "cpu":
            raise ValueError(f"device: onemodel runs on the CPU only, got {type!r}")
        self.type, self.index = "cpu", None

    def __str__(self) -> str:
        return "cpu"

    def __repr__(self) -> str:
        return "device(type='cpu')"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, (device, str)) and str(other).split(":")[0] == "cpu"

    def __hash__(self) -> int:
        return hash("cpu")


def to_float32_on_cpu(args: tuple, kwargs: dict, what: str) -> bool:
    """Checks the arguments of torch's .to(device=None, dtype=None, non_blocking=False) (a
    device as a string or a device object, a tensor for its dtype): the CPU and float32 pass,
    anything else is refused naming `what`. Returns whether float32 was asked for."""
    targets = list(args) + [kwargs.pop(k) for k in ("device", "dtype") if k in kwargs]
    kwargs.pop("non_blocking", None)  # nothing is asynchronous here
    if kwargs or len(targets) > 2:
        raise TypeError(f"to: expected to(device=None, dtype=None, non_blocking=False), got "
                        f"{args!r} and {kwargs!r}")
    convert = False
    for v in targets:
        if v is None or str(v).split(":")[0] == "cpu":  # "cpu", "cpu:0", torch.device("cpu")
            continue
        if not is_float32(v):
            raise TypeError(f"to: only the CPU and float32 are supported, got {v!r} ({what})")
        convert = True
    return convert


def _canonical(arr: np.ndarray, op: str) -> np.ndarray:
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float32, copy=False)
    elif arr.dtype.kind in "iu":
        if arr.dtype == np.uint64 and arr.size and int(arr.max()) >= 1 << 63:
            raise ValueError(f"{op}: uint64 value {int(arr.max())} does not fit in int64, the "
                             "integer type it would become")
        arr = arr.astype(np.int32 if arr.dtype == np.int32 else np.int64, copy=False)
    elif arr.dtype.kind != "b":
        raise TypeError(f"{op}: unsupported dtype {arr.dtype}; use float, integer or bool data")
    return np.require(arr, requirements="C")  # unlike ascontiguousarray, keeps 0-d


class Tensor(InplaceMethods, TensorSurface):
    """An n-dimensional array that records the ops applied to it for reverse-mode autodiff."""

    # _vc is the version counter, a one-element list shared with detached aliases so a write
    # through either one is seen by the nodes that saved the other.
    __slots__ = ("_data", "_requires_grad", "grad", "_node", "_vc", "__weakref__")
    __array_priority__ = 1000  # numpy scalars defer to Tensor operators

    def __init__(self, data: Any = (), *sizes: Any, requires_grad: bool = False) -> None:
        # torch's legacy constructor: Tensor(2, 3) is a float32 tensor of that shape, and
        # Tensor(data) float32 whatever the data (Tensor([0]) too); a tensor keeps its dtype.
        shape = legacy_sizes(data, sizes, "Tensor")
        self._data = np.zeros(shape, float32) if shape is not None else _as_array(
            data, None if isinstance(data, Tensor) else float32)
        self._node: Optional[autograd.Node] = None
        self._vc = [0]
        self.grad: Optional[Tensor] = None
        self._requires_grad = False
        self.requires_grad = requires_grad

    @classmethod
    def _wrap(cls: type[_T], arr: np.ndarray, requires_grad: bool = False) -> _T:
        """Takes ownership of an array the caller will not touch again (no copy)."""
        t = cls.__new__(cls)
        t._data = arr
        t._node = None
        t._vc = [0]
        t.grad = None
        t._requires_grad = requires_grad
        return t

    def _set_requires_grad(self, value: bool) -> "Tensor":
        self.requires_grad = value
        return self

    # -- properties ---------------------------------------------------------------------
    @property
    def _version(self) -> int:
        return self._vc[0]

    @_version.setter
    def _version(self, value: int) -> None:
        self._vc[0] = value

    @property
    def requires_grad(self) -> bool:
        """Whether autograd records operations on this tensor; settable on a leaf."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self._data.dtype != float32:
            raise TypeError(f"requires_grad: only float32 tensors can require gradients, "
                            f"not {self._data.dtype}")
        if not value and self._node is not None:
            raise RuntimeError("requires_grad: cannot be cleared on a non-leaf tensor; "
                               "use detach()")
        self._requires_grad = bool(value)

    @property
    def shape(self) -> tuple:
        """The sizes of the dimensions, a tuple (torch's `torch.Size` is a tuple too)."""
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        """The element type, a numpy dtype (`om.float32`, `om.int64`, `om.bool`, ...)."""
        return self._data.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return self._data.ndim

    @property
    def is_leaf(self) -> bool:
        """True if the tensor was not computed by a recorded operation."""
        return self._node is None

    @property
    def grad_fn(self) -> Optional[str]:
        """The name of the operation that computed this tensor (a string, where PyTorch
        returns a node object), or None for a leaf."""
        return None if self._node is None else self._node.op

    def size(self, dim: Optional[int] = None) -> Union[tuple, int]:
        """The shape, or the size of dimension `dim`, as `torch.Tensor.size`.

        Parameters
        ----------
        dim : int, optional
            A dimension (negative counts from the end).
        """
        return self._data.shape if dim is None else self._data.shape[dim]

    def numel(self) -> int:
        """The number of elements."""
        return int(self._data.size)

    def dim(self) -> int:
        """The number of dimensions, as `torch.Tensor.dim`."""
        return self._data.ndim

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # -- conversion ---------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The underlying array (shared, as torch.Tensor.numpy); copy it to keep it."""
        if self._requires_grad:
            raise RuntimeError("numpy: tensor requires grad; call detach().numpy()")
        return self._data

    def item(self) -> Union[float, int, bool]:
        """The value of a one-element tensor as a Python number, as `torch.Tensor.item`."""
        if self._data.size != 1:
            raise ValueError(f"item: tensor of shape {self._data.shape} has {self._data.size} "
                             "elements, expected 1")
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        """The values as nested Python lists (a number for a 0-d tensor)."""
        return self._data.tolist()

    def detach(self) -> "Tensor":
        """A tensor sharing this one's storage (and version counter), outside the graph."""
        t = Tensor._wrap(self._data)
        t._vc = self._vc
        return t

    def clone(self) -> "Tensor":
        """`om.clone` of this tensor, as `torch.Tensor.clone`."""
        return F.clone(self)

    def float(self) -> "Tensor":
        """The tensor as float32 (itself when it is already)."""
        return self if self._data.dtype == float32 else Tensor._wrap(self._data.astype(float32))

    def to(self, *args: Any, **kwargs: Any) -> "Tensor":
        """to("cpu"), to(float32) (as numpy or PyTorch spell it, or a float32 tensor), or both,
        as torch.Tensor.to: self when nothing changes (a copy with copy=True), else float().
        Other devices and dtypes are refused."""
        copy = bool(kwargs.pop("copy", False))
        convert = to_float32_on_cpu(args, kwargs, f"tensor of shape {self.shape}, "
                                                  f"{self._data.dtype}")
        out = self.float() if convert else self
        return out.clone() if copy and out is self else out

    def long(self) -> "Tensor":
        """A copy as int64, outside the graph."""
        return Tensor._wrap(self._data.astype(int64))

    def __repr__(self) -> str:
        return tensor_repr(self._data, self._node.op if self._node else None,
                           self._requires_grad)

    def __format__(self, spec: str) -> str:
        """f"{loss:.4f}" formats a 0-d tensor's value, as torch's; others as their repr."""
        return format(self.item(), spec) if self.ndim == 0 else object.__format__(self, spec)

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise ValueError("the truth value of a tensor with more than one element is "
                             "ambiguous")
        return bool(self._data.reshape(()))

    def __float__(self) -> builtins.float:  # the method float() shadows the name here
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu":
            raise TypeError("only integer tensors can be used as an index")
        return int(self.item())

    # -- autodiff -----------------------------------------------------------------------
    def backward(self, gradient: Optional[Any] = None, retain_graph: Optional[bool] = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Computes the gradients of this tensor with respect to the leaves that require grad
        and adds them into their `.grad`, as `torch.Tensor.backward`.

        Parameters
        ----------
        gradient : Tensor or array, optional
            The gradient of the output; may be omitted for a one-element tensor (1 is used).
        retain_graph : bool, optional
            Keep the graph for another backward (default: False unless create_graph).
        create_graph : bool, optional
            Not supported (no double backward): NotImplementedError.
        inputs : sequence of Tensor, optional
            Fill only these leaves' `.grad`.
        """
        if create_graph or inputs is not None:
            from ._grad import backward
            return backward(self, gradient, retain_graph, create_graph, inputs)
        grad = gradient
        if not self._requires_grad:
            raise RuntimeError("backward: tensor does not require grad and has no grad_fn")
        if grad is None:
            if self._data.size != 1:
                raise RuntimeError(f"backward: grad can be implicitly created only for "
                                   f"scalar outputs, got shape {self._data.shape}")
            g = np.ones(self._data.shape, dtype=np.float32)
        else:
            g = np.require(grad._data if isinstance(grad, Tensor) else grad, np.float32, "C")
            if g.shape != self._data.shape:
                raise ValueError(f"backward: gradient of shape {g.shape} for a tensor of "
                                 f"shape {self._data.shape}")
        autograd.run_backward(((self, g),), bool(retain_graph))

    def register_post_accumulate_grad_hook(self, hook: Callable[["Tensor"], None]) -> Any:
        """hook(self) runs in each backward pass once this leaf's gradient is complete in
        .grad, while backward goes on (autograd.py); returns a handle with remove()."""
        return autograd.register_post_accumulate_grad_hook(self, hook)

    def add(self, other: Any, *, alpha: Any = 1) -> "Tensor":
        """`om.add` of this tensor, as `torch.Tensor.add`; `other` and `alpha` as there."""
        return F.add(self, other, alpha=alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> "Tensor":
        """`om.sub` of this tensor, as `torch.Tensor.sub`; `other` and `alpha` as there."""
        return F.sub(self, other, alpha=alpha)

    # -- operators (differentiable ones live in functional) -----------------------------
    def __add__(self, other: Any) -> "Tensor":
        return F.add(self, other)

    def __radd__(self, other: Any) -> "Tensor":
        return F.add(other, self)

    def __sub__(self, other: Any) -> "Tensor":
        return F.sub(self, other)

    def __rsub__(self, other: Any) -> "Tensor":
        return F.sub(other, self)

    def __mul__(self, other: Any) -> "Tensor":
        return F.mul(self, other)

    def __rmul__(self, other: Any) -> "Tensor":
        return F.mul(other, self)

    def __truediv__(self, other: Any) -> "Tensor":
        return F.div(self, other)

    def __rtruediv__(self, other: Any) -> "Tensor":
        return F.div(other, self)

    def __floordiv__(self, other: Any) -> "Tensor":
        return F.div(self, other, rounding_mode="floor")

    def __rfloordiv__(self, other: Any) -> "Tensor":
        return F.div(other, self, rounding_mode="floor")

    def __pow__(self, other: Any) -> "Tensor":
        return F.pow(self, other)

    def __rpow__(self, other: Any) -> "Tensor":
        return F.pow(other, self)

    def __matmul__(self, other: Any) -> "Tensor":
        return F.matmul(self, other)

    def __rmatmul__(self, other: Any) -> "Tensor":
        return F.matmul(other, self)

    def __neg__(self) -> "Tensor":
        return F.neg(self)

    def __abs__(self) -> "Tensor":
        return F.abs(self)

    def __getitem__(self, index: Any) -> "Tensor":
        return F.index(self, index)

    def __eq__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return F.eq(self, other)

    def __ne__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return F.ne(self, other)

    def __lt__(self, other: Any) -> "Tensor":
        return F.lt(self, other)

    def __le__(self, other: Any) -> "Tensor":
        return F.le(self, other)

    def __gt__(self, other: Any) -> "Tensor":
        return F.gt(self, other)

    def __ge__(self, other: Any) -> "Tensor":
        return F.ge(self, other)

    eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__

    __hash__ = object.__hash__

    # -- method spellings of common functional ops --------------------------------------
    def sum(self, dim: Any = None, keepdim: bool = False) -> "Tensor":
        """`om.sum` of this tensor, as `torch.Tensor.sum`; `dim` and `keepdim` as there."""
        return F.sum(self, dim, keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False) -> "Tensor":
        """`om.mean` of this tensor, as `torch.Tensor.mean`; `dim` and `keepdim` as there."""
        return F.mean(self, dim, keepdim)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        """`om.max` of this tensor, as `torch.Tensor.max`; `dim` and `keepdim` as there."""
        return F.max(self, dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        """`om.min` of this tensor, as `torch.Tensor.min`; `dim` and `keepdim` as there."""
        return F.min(self, dim, keepdim)

    def maximum(self, other: Any) -> "Tensor":
        """`om.maximum` of this tensor, as `torch.Tensor.maximum`; `other` as there."""
        return F.maximum(self, other)

    def minimum(self, other: Any) -> "Tensor":
        """`om.minimum` of this tensor, as `torch.Tensor.minimum`; `other` as there."""
        return F.minimum(self, other)

    def reshape(self, *shape: Any) -> "Tensor":
        """`om.reshape(self, shape)`, as `torch.Tensor.reshape`; the shape as separate ints
        or one sequence.
        """
        return F.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int)
                         else shape)

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        """`om.flatten` of this tensor, as `torch.Tensor.flatten`; `start_dim` and `end_dim`
        as there.
        """
        return F.flatten(self, start_dim, end_dim)

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        """`om.transpose` of this tensor, as `torch.Tensor.transpose`; `dim0` and `dim1` as
        there.
        """
        return F.transpose(self, dim0, dim1)

    def mul(self, other: Any) -> "Tensor":
        """`om.mul` of this tensor, as `torch.Tensor.mul`; `other` as there."""
        return F.mul(self, other)

    def pow(self, exponent: Any) -> "Tensor":
        """`om.pow` of this tensor, as `torch.Tensor.pow`; `exponent` as there."""
        return F.pow(self, exponent)

    def gather(self, dim: int, index: Any) -> "Tensor":
        """`om.gather` of this tensor, as `torch.Tensor.gather`; `dim` and `index` as there."""
        return F.gather(self, dim, index)

    def any(self, dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.any` of this tensor, as `torch.Tensor.any`; `dim` and `keepdim` as there."""
        return F.any(self, dim, keepdim)

    def all(self, dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.all` of this tensor, as `torch.Tensor.all`; `dim` and `keepdim` as there."""
        return F.all(self, dim, keepdim)

    def matmul(self, other: Any) -> "Tensor":
        """`om.matmul` of this tensor, as `torch.Tensor.matmul`; `other` as there."""
        return F.matmul(self, other)

    def bmm(self, mat2: Any) -> "Tensor":
        """`om.bmm` of this tensor, as `torch.Tensor.bmm`; `mat2` as there."""
        return F.bmm(self, mat2)

    def outer(self, vec2: Any) -> "Tensor":
        """`om.outer` of this tensor, as `torch.Tensor.outer`; `vec2` as there."""
        return F.outer(self, vec2)

    def index_select(self, dim: int, index: Any) -> "Tensor":
        """`om.index_select` of this tensor, as `torch.Tensor.index_select`; `dim` and
        `index` as there.
        """
        return F.index_select(self, dim, index)

    def var(self, dim: Any = None, *, correction: builtins.float = 1,
            keepdim: builtins.bool = False, unbiased: Any = None) -> "Tensor":
        """`om.var` of this tensor, as `torch.Tensor.var`; `dim`, `correction`, `keepdim` and
        `unbiased` as there.
        """
        return F.var(self, dim, correction=correction, keepdim=keepdim, unbiased=unbiased)

    def std(self, dim: Any = None, *, correction: builtins.float = 1,
            keepdim: builtins.bool = False, unbiased: Any = None) -> "Tensor":
        """`om.std` of this tensor, as `torch.Tensor.std`; `dim`, `correction`, `keepdim` and
        `unbiased` as there.
        """
        return F.std(self, dim, correction=correction, keepdim=keepdim, unbiased=unbiased)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.norm` of this tensor, as `torch.Tensor.norm`; `p`, `dim` and `keepdim` as
        there.
        """
        return F.norm(self, p, dim, keepdim)

    def round(self) -> "Tensor":
        """`om.round` of this tensor, as `torch.Tensor.round`."""
        return F.round(self)

    def floor(self) -> "Tensor":
        """`om.floor` of this tensor, as `torch.Tensor.floor`."""
        return F.floor(self)

    def ceil(self) -> "Tensor":
        """`om.ceil` of this tensor, as `torch.Tensor.ceil`."""
        return F.ceil(self)

    def trunc(self) -> "Tensor":
        """`om.trunc` of this tensor, as `torch.Tensor.trunc`."""
        return F.trunc(self)

    def sign(self) -> "Tensor":
        """`om.sign` of this tensor, as `torch.Tensor.sign`."""
        return F.sign(self)

    def isnan(self) -> "Tensor":
        """`om.isnan` of this tensor, as `torch.Tensor.isnan`."""
        return F.isnan(self)

    def isinf(self) -> "Tensor":
        """`om.isinf` of this tensor, as `torch.Tensor.isinf`."""
        return F.isinf(self)

    def isfinite(self) -> "Tensor":
        """`om.isfinite` of this tensor, as `torch.Tensor.isfinite`."""
        return F.isfinite(self)

    def allclose(self, other: Any, rtol: builtins.float = 1e-05, atol: builtins.float = 1e-08,
                 equal_nan: builtins.bool = False) -> builtins.bool:
        """`om.allclose` of this tensor, as `torch.Tensor.allclose`; `other`, `rtol`, `atol`
        and `equal_nan` as there.
        """
        return F.allclose(self, other, rtol, atol, equal_nan)

    def equal(self, other: Any) -> builtins.bool:
        """`om.equal` of this tensor, as `torch.Tensor.equal`; `other` as there."""
        return F.equal(self, other)

    def flip(self, *dims: Any) -> "Tensor":
        """`om.flip(self, dims)`, as `torch.Tensor.flip`; the dims as separate ints or one
        sequence.
        """
        return F.flip(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)

    def roll(self, shifts: Any, dims: Any = None) -> "Tensor":
        """`om.roll` of this tensor, as `torch.Tensor.roll`; `shifts` and `dims` as there."""
        return F.roll(self, shifts, dims)

    def movedim(self, source: Any, destination: Any) -> "Tensor":
        """`om.movedim` of this tensor, as `torch.Tensor.movedim`; `source` and `destination`
        as there.
        """
        return F.movedim(self, source, destination)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        """`om.narrow` of this tensor, as `torch.Tensor.narrow`; `dim`, `start` and `length`
        as there.
        """
        return F.narrow(self, dim, start, length)

    def swapaxes(self, axis0: int, axis1: int) -> "Tensor":
        """`om.transpose` of this tensor, as `torch.Tensor.swapaxes`; `axis0` and `axis1` as
        there.
        """
        return F.transpose(self, axis0, axis1)

    def expand_as(self, other: "Tensor") -> "Tensor":
        """`expand(other.shape)`, as `torch.Tensor.expand_as`.

        Parameters
        ----------
        other : Tensor
            Gives the shape.
        """
        return self.expand(other.shape)

    def amax(self, dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.amax` of this tensor, as `torch.Tensor.amax`; `dim` and `keepdim` as there."""
        return F.amax(self, dim, keepdim)

    def amin(self, dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.amin` of this tensor, as `torch.Tensor.amin`; `dim` and `keepdim` as there."""
        return F.amin(self, dim, keepdim)

    def prod(self, dim: Optional[int] = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.prod` of this tensor, as `torch.Tensor.prod`; `dim` and `keepdim` as there."""
        return F.prod(self, dim, keepdim)

    def logsumexp(self, dim: Any, keepdim: builtins.bool = False) -> "Tensor":
        """`om.logsumexp` of this tensor, as `torch.Tensor.logsumexp`; `dim` and `keepdim` as
        there.
        """
        return F.logsumexp(self, dim, keepdim)

    def argsort(self, dim: int = -1, descending: builtins.bool = False) -> "Tensor":
        """`om.argsort` of this tensor, as `torch.Tensor.argsort`; `dim` and `descending` as
        there.
        """
        return F.argsort(self, dim, descending)

    def square(self) -> "Tensor":
        """`om.square` of this tensor, as `torch.Tensor.square`."""
        return F.square(self)

    def reciprocal(self) -> "Tensor":
        """`om.reciprocal` of this tensor, as `torch.Tensor.reciprocal`."""
        return F.reciprocal(self)

    def rsqrt(self) -> "Tensor":
        """`om.rsqrt` of this tensor, as `torch.Tensor.rsqrt`."""
        return F.rsqrt(self)

    def nonzero(self, *, as_tuple: builtins.bool = False) -> Any:
        """`om.nonzero` of this tensor, as `torch.Tensor.nonzero`; `as_tuple` as there."""
        return F.nonzero(self, as_tuple=as_tuple)

    def masked_select(self, mask: Any) -> "Tensor":
        """`om.masked_select` of this tensor, as `torch.Tensor.masked_select`; `mask` as
        there.
        """
        return F.masked_select(self, mask)

    def repeat_interleave(self, repeats: Any, dim: Optional[int] = None) -> "Tensor":
        """`om.repeat_interleave` of this tensor, as `torch.Tensor.repeat_interleave`;
        `repeats` and `dim` as there.
        """
        return F.repeat_interleave(self, repeats, dim)

    def t(self) -> "Tensor":
        """The transpose of a matrix, as torch's: a 0-d or 1-d tensor is returned as it is."""
        if self.ndim > 2:
            raise ValueError(f"t: expects a tensor of at most 2 dimensions, got shape "
                             f"{self.shape}; use transpose(dim0, dim1) or permute")
        return self if self.ndim < 2 else F.transpose(self, 0, 1)

    def contiguous(self) -> "Tensor":
        """self: a tensor's array is always C-contiguous (views are copied where they are made)."""
        return self

    def is_contiguous(self) -> bool:
        """Always True: every tensor is a C-contiguous array."""
        return True

    def permute(self, *dims: Any) -> "Tensor":
        """`om.permute(self, dims)`, as `torch.Tensor.permute`; the dims as separate ints or
        one sequence.
        """
        return F.permute(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int)
                         else dims)

    def unsqueeze(self, dim: int) -> "Tensor":
        """`om.unsqueeze` of this tensor, as `torch.Tensor.unsqueeze`; `dim` as there."""
        return F.unsqueeze(self, dim)

    def squeeze(self, dim: Optional[int] = None) -> "Tensor":
        """`om.squeeze` of this tensor, as `torch.Tensor.squeeze`; `dim` as there."""
        return F.squeeze(self, dim)

    def div(self, other: Any, *, rounding_mode: Optional[str] = None) -> "Tensor":
        """`om.div` of this tensor, as `torch.Tensor.div`; `other` and `rounding_mode` as
        there.
        """
        return F.div(self, other, rounding_mode=rounding_mode)

    def exp(self) -> "Tensor":
        """`om.exp` of this tensor, as `torch.Tensor.exp`."""
        return F.exp(self)

    def log(self) -> "Tensor":
        """`om.log` of this tensor, as `torch.Tensor.log`."""
        return F.log(self)

    def sqrt(self) -> "Tensor":
        """`om.sqrt` of this tensor, as `torch.Tensor.sqrt`."""
        return F.sqrt(self)

    def tanh(self) -> "Tensor":
        """`om.tanh` of this tensor, as `torch.Tensor.tanh`."""
        return F.tanh(self)

    def sigmoid(self) -> "Tensor":
        """`om.sigmoid` of this tensor, as `torch.Tensor.sigmoid`."""
        return F.sigmoid(self)

    def erf(self) -> "Tensor":
        """`om.erf` of this tensor, as `torch.Tensor.erf`."""
        return F.erf(self)

    def expm1(self) -> "Tensor":
        """`om.expm1` of this tensor, as `torch.Tensor.expm1`."""
        return F.expm1(self)

    def log1p(self) -> "Tensor":
        """`om.log1p` of this tensor, as `torch.Tensor.log1p`."""
        return F.log1p(self)

    def sin(self) -> "Tensor":
        """`om.sin` of this tensor, as `torch.Tensor.sin`."""
        return F.sin(self)

    def cos(self) -> "Tensor":
        """`om.cos` of this tensor, as `torch.Tensor.cos`."""
        return F.cos(self)

    def relu(self) -> "Tensor":
        """`om.relu` of this tensor, as `torch.Tensor.relu`."""
        return F.relu(self)

    def abs(self) -> "Tensor":
        """`om.abs` of this tensor, as `torch.Tensor.abs`."""
        return F.abs(self)

    def clamp(self, min: Any = None, max: Any = None) -> "Tensor":
        """`om.clamp` of this tensor, as `torch.Tensor.clamp`; `min` and `max` as there."""
        return F.clamp(self, min, max)

    def clamp_min(self, min: Any) -> "Tensor":
        """`om.clamp` of this tensor, as `torch.Tensor.clamp_min`; `min=min` as there."""
        return F.clamp(self, min=min)

    def clamp_max(self, max: Any) -> "Tensor":
        """`om.clamp` of this tensor, as `torch.Tensor.clamp_max`; `max=max` as there."""
        return F.clamp(self, max=max)

    def softmax(self, dim: int, dtype: Any = None) -> "Tensor":
        """`om.softmax` of this tensor, as `torch.Tensor.softmax`; `dim` and `dtype` as
        there.
        """
        return F.softmax(self, dim, dtype=dtype)

    def log_softmax(self, dim: int, dtype: Any = None) -> "Tensor":
        """`om.log_softmax` of this tensor, as `torch.Tensor.log_softmax`; `dim` and `dtype`
        as there.
        """
        return F.log_softmax(self, dim, dtype=dtype)

    def topk(self, k: int, dim: Optional[int] = None, largest: bool = True,
             sorted: bool = True) -> Any:
        """`om.topk` of this tensor, as `torch.Tensor.topk`; `k`, `dim`, `largest` and
        `sorted` as there.
        """
        return F.topk(self, k, dim, largest, sorted)

    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
        """`om.sort` of this tensor, as `torch.Tensor.sort`; `dim`, `descending` and `stable`
        as there.
        """
        return F.sort(self, dim, descending, stable=stable)

    def cumsum(self, dim: int, *, dtype: Any = None) -> "Tensor":
        """`om.cumsum` of this tensor, as `torch.Tensor.cumsum`; `dim` and `dtype` as there."""
        return F.cumsum(self, dim, dtype=dtype)

    def tril(self, diagonal: int = 0) -> "Tensor":
        """`om.tril` of this tensor, as `torch.Tensor.tril`; `diagonal` as there."""
        return F.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> "Tensor":
        """`om.triu` of this tensor, as `torch.Tensor.triu`; `diagonal` as there."""
        return F.triu(self, diagonal)

    def argmax(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """`om.argmax` of this tensor, as `torch.Tensor.argmax`; `dim` and `keepdim` as
        there.
        """
        return F.argmax(self, dim, keepdim)

    def argmin(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """`om.argmin` of this tensor, as `torch.Tensor.argmin`; `dim` and `keepdim` as
        there.
        """
        return F.argmin(self, dim, keepdim)

    # -- more method spellings, composed of the ops above --------------------------------
    @property
    def data(self) -> "Tensor":
        """This tensor's values outside the graph: detach(), sharing the version counter, so a
        write through it into a tensor saved for backward is caught rather than corrupting."""
        return self.detach()

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Sets `requires_grad` and returns the tensor, as `torch.Tensor.requires_grad_`.

        Parameters
        ----------
        requires_grad : bool, optional
            Default True.
        """
        self.requires_grad = requires_grad
        return self

    def view_as(self, other: "Tensor") -> "Tensor":
        """`reshape(other.shape)`, as `torch.Tensor.view_as`.

        Parameters
        ----------
        other : Tensor
            Gives the shape.
        """
        return F.reshape(self, other.shape)

    def masked_fill(self, mask: "Tensor", value: Any) -> "Tensor":
        """value where mask holds (broadcast), self elsewhere; the gradient flows elsewhere."""
        return F.where(mask, value, self)

    def where(self, condition: "Tensor", other: Any) -> "Tensor":
        """`om.where(condition, self, other)`, as `torch.Tensor.where`.

        Parameters
        ----------
        condition : Tensor
            A bool tensor: where True the result takes this tensor's element.
        other : Tensor or number
            The elements elsewhere.
        """
        return F.where(condition, self, other)

    def expand(self, *sizes: Any) -> "Tensor":
        """self broadcast to sizes (-1 keeps a dimension), as a new tensor: multiplying by ones
        broadcasts, keeps -0 and NaN, and its backward sums the gradient back."""
        sizes = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ValueError(f"expand: {len(sizes)} sizes {sizes} for a tensor of shape "
                             f"{self.shape} ({self.ndim} dimensions)")
        target = tuple(self.shape[i - lead] if s == -1 and i >= lead else int(s)
                       for i, s in enumerate(sizes))
        if any(s < 0 for s in target) or any(
                have not in (1, want) for have, want in zip(self.shape, target[lead:])):
            raise ValueError(f"expand: shape {self.shape} cannot be expanded to {sizes}")
        return F.mul(self, Tensor._wrap(np.ones(target, self._data.dtype)))

    def repeat(self, *sizes: Any) -> "Tensor":
        """self tiled sizes[i] times along each dimension (leading sizes add dimensions)."""
        sizes = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes
        if len(sizes) < self.ndim or any(int(r) < 0 for r in sizes):
            raise ValueError(f"repeat: sizes {sizes} must be >= 0 and at least one per "
                             f"dimension of the tensor of shape {self.shape}")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        pairs = tuple(d for n in shape for d in (1, n))
        tiled = tuple(d for r, n in zip(sizes, shape) for d in (int(r), n))
        return self.reshape(pairs).expand(tiled).reshape(
            tuple(int(r) * n for r, n in zip(sizes, shape)))

    def split(self, split_size_or_sections: Any, dim: int = 0) -> tuple:
        """Pieces along dim: of split_size each (the last may be shorter), or of the sizes
        listed, as torch.split."""
        axis = F._core.normalize_dim(dim, self.ndim, "split")
        length = self.shape[axis]
        if isinstance(split_size_or_sections, (int, np.integer)):
            size = int(split_size_or_sections)
            if size <= 0:
                raise ValueError(f"split: split_size must be positive, got {size}")
            sections = [min(size, length - start) for start in range(0, length, size)] or [0]
        else:
            sections = [int(n) for n in split_size_or_sections]
            if sum(sections) != length or any(n < 0 for n in sections):
                raise ValueError(f"split: sections {sections} must be >= 0 and add up to "
                                 f"{length}, the size of dim {dim} of shape {self.shape}")
        lead = (slice(None),) * axis
        starts = np.cumsum([0] + sections)
        return tuple(F.index(self, lead + (slice(int(a), int(b)),))
                     for a, b in zip(starts[:-1], starts[1:]))

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """At most `chunks` pieces of ceil(size / chunks) along dim, as torch.chunk."""
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
            raise ValueError(f"chunk: chunks must be a positive integer, got {chunks!r}")
        axis = F._core.normalize_dim(dim, self.ndim, "chunk")
        return self.split(max(-(-self.shape[axis] // int(chunks)), 1), axis)

    # Last in the class: these names shadow int, bool and device in the annotations after them.
    def int(self) -> "Tensor":
        """A copy as int32, outside the graph."""
        return Tensor._wrap(self._data.astype(int32))

    def bool(self) -> "Tensor":
        """A copy as bool, outside the graph."""
        return Tensor._wrap(self._data.astype(bool_))

    def double(self) -> "Tensor":
        """Refused: float64 tensors are not supported yet (TypeError)."""
        raise TypeError("double: float64 tensors are not supported yet; onemodel computes in "
                        "float32")

    def half(self) -> "Tensor":
        """Refused: float16 tensors are not supported; mixed precision is
        `amp.autocast("fp16")` (TypeError).
        """
        raise TypeError("half: float16 tensors are not supported; mixed precision is "
                        "amp.autocast('fp16')")

    @property
    def device(self) -> device:
        """Always `om.device("cpu")`."""
        return device("cpu")

    def cpu(self) -> "Tensor":
        """Returns the tensor itself: everything lives on the CPU."""
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> "Tensor":
        """Refused (ValueError): onemodel runs on the CPU only."""
        raise ValueError("cuda: onemodel runs on the CPU only")

    def new_tensor(self, data: Any, dtype: Any = None, requires_grad: builtins.bool = False, *,
                   device: Any = None) -> "Tensor":
        """A new tensor of data, of self's dtype unless dtype is given, as torch's."""
        return tensor(data, self.dtype if dtype is None else dtype, requires_grad, device=device)

    def new_zeros(self, *size: Any, dtype: Any = None, requires_grad: builtins.bool = False,
                  device: Any = None) -> "Tensor":
        """Zeros of `size` with this tensor's dtype unless `dtype` is given, as
        `torch.Tensor.new_zeros`.
        """
        return zeros(*size, dtype=self.dtype if dtype is None else dtype,
                     requires_grad=requires_grad, device=device)

    def new_ones(self, *size: Any, dtype: Any = None, requires_grad: builtins.bool = False,
                 device: Any = None) -> "Tensor":
        """Ones of `size` with this tensor's dtype unless `dtype` is given, as
        `torch.Tensor.new_ones`.
        """
        return ones(*size, dtype=self.dtype if dtype is None else dtype,
                    requires_grad=requires_grad, device=device)

    def new_full(self, size: Any, fill_value: Any, dtype: Any = None,
                 requires_grad: builtins.bool = False, *, device: Any = None) -> "Tensor":
        """`fill_value` in a tensor of `size` with this tensor's dtype unless `dtype` is
        given, as `torch.Tensor.new_full`.
        """
        return full(size, fill_value, self.dtype if dtype is None else dtype, requires_grad,
                    device=device)

    new_empty = new_zeros


# -- constructors ------------------------------------------------------------------------
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


def _dtype_arg(dtype: Any, op: str) -> np.dtype:
    try:
        target = np.dtype(dtype)
    except TypeError:
        target = None
    if target not in _DTYPES:
        raise TypeError(f"{op}: unsupported dtype {dtype if target is None else target}; use "
                        "float32, int32, int64 or bool (bfloat16 and float16 are amp.autocast's)"
                        + ("; float64 is not supported yet" if target == np.float64 else ""))
    return target


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


# Bound once, after Tensor exists (functional imports this module): the operators and methods
# above call into it, and an import statement per call would cost about a microsecond.
from . import functional as F  # noqa: E402
