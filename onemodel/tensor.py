"""Tensor: a C-contiguous numpy array with an autodiff record.

Values are float32; indices and counters int64 (or int32); masks bool. Only float32 tensors
may require gradients. The math lives in onemodel.functional; the operators and the method
spellings of its ops forward to it (_tensor_ops.py), and torch's other spellings are in
_tensor_surface.py, the in-place methods in _inplace.py, all mixins of Tensor. Here: its
storage, dtype, version counter and autograd state; the functions that make tensors are in
_tensor_creation.py (re-exported here).
"""
from __future__ import annotations

import builtins
from typing import Any, Callable, Optional, TypeVar, Union

import numpy as np

from . import autograd
from ._inplace import InplaceMethods
from ._printing import tensor_repr
from ._tensor_ops import TensorOps
from ._tensor_surface import TensorSurface, legacy_sizes

float32 = np.dtype(np.float32)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
_T = TypeVar("_T", bound="Tensor")  # _wrap returns the subclass it is called on
bool_ = np.dtype(np.bool_)
_DTYPES = (float32, int32, int64, bool_)


class ReducedFloat:
    """The dtype of a 2-byte float that numpy lacks (bfloat16): what amp.autocast's products
    round their operands to. No tensor holds one; the constructors refuse it by name."""

    __slots__ = ("name",)
    is_floating_point = True
    is_complex = False
    is_signed = True
    itemsize = 2

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"onemodel.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # one object per process, as torch's dtypes (pickle finds it by name)


bfloat16 = ReducedFloat("bfloat16")


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


def _dtype_arg(dtype: Any, op: str) -> np.dtype:
    try:
        target = np.dtype(dtype)
    except TypeError:
        target = None
    if target not in _DTYPES:
        name = getattr(dtype, "name", dtype) if target is None else target
        raise TypeError(f"{op}: unsupported dtype {name}; use "
                        "float32, int32, int64 or bool (bfloat16 and float16 are amp.autocast's)"
                        + ("; float64 is not supported yet" if target == np.float64 else ""))
    return target


class Tensor(TensorOps, InplaceMethods, TensorSurface):
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

    # Last in the class: these names shadow int and bool in the annotations after them.
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


# The functions that make tensors: they name Tensor, and functional imports them from here.
from ._tensor_creation import (  # noqa: E402, F401
    _shape_arg,
    arange,
    as_tensor,
    check_device,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    is_tensor,
    linspace,
    numel,
    ones,
    ones_like,
    tensor,
    zeros,
    zeros_like,
)

# isort: split
# Bound once, after Tensor exists (functional imports this module): the operators and methods
# of the mixins call into it through this module, and an import statement per call would cost
# about a microsecond.
from . import functional as F  # noqa: E402, F401
