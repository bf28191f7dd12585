"""The rest of torch.Tensor's spellings that ported programs use (mm, mT, nelement, type(),
diag, to_sparse, expand, split, new_zeros, cpu, ...), as a mixin of Tensor so that tensor.py
keeps to the core, and torch's legacy typed constructors (FloatTensor, LongTensor, IntTensor,
BoolTensor)."""
# mypy: disable-error-code="arg-type, attr-defined, return-value"
# (self, a Tensor at run time, is typed TensorSurface for mypy, which would refuse it where a
# Tensor is passed, returned or read)
from __future__ import annotations

import builtins
import warnings
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor, device

# torch's type strings of the dtypes a tensor can hold, and the dtype each names
TYPE_NAMES: dict[np.dtype, str] = {
    np.dtype(np.float32): "torch.FloatTensor", np.dtype(np.int64): "torch.LongTensor",
    np.dtype(np.int32): "torch.IntTensor", np.dtype(np.bool_): "torch.BoolTensor"}
_TYPES_BY_NAME: dict[str, np.dtype] = {name: dtype for dtype, name in TYPE_NAMES.items()}
_UNSUPPORTED_TYPES = {"torch.DoubleTensor": "float64", "torch.HalfTensor": "float16",
                      "torch.BFloat16Tensor": "bfloat16"}


def legacy_sizes(first: Any, rest: tuple, op: str) -> Optional[tuple]:
    """The sizes of torch's legacy constructors (`Tensor(2, 3)`) when every argument is an
    integer, else None (the one argument is data); other mixtures are refused."""
    if isinstance(first, (int, np.integer)) and not isinstance(first, bool):
        sizes = (first,) + rest
        if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in sizes):
            raise TypeError(f"{op}: expected sizes (integers) or one data argument, got {sizes}")
        if any(s < 0 for s in sizes):
            raise ValueError(f"{op}: negative dimension in shape {sizes}")
        return tuple(int(s) for s in sizes)
    if rest:
        raise TypeError(f"{op}: expected sizes (integers) or one data argument, got "
                        f"{(first,) + rest!r}")
    return None


def dtype_of_type_name(name: str, op: str) -> np.dtype:
    if name in _UNSUPPORTED_TYPES:
        raise TypeError(f"{op}: {name} ({_UNSUPPORTED_TYPES[name]}) is not supported yet; "
                        "onemodel computes in float32")
    if name not in _TYPES_BY_NAME:
        raise ValueError(f"{op}: invalid type {name!r}; expected one of "
                         f"{', '.join(_TYPES_BY_NAME)}")
    return _TYPES_BY_NAME[name]


_T_DEPRECATED = (
    "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated "
    "and it will throw an error in a future release. Consider `x.mT` to transpose batches of "
    "matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a "
    "tensor.")
_T_DEPRECATED_0D = ("Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                    "these cases.")


class TensorSurface:
    """Methods of torch.Tensor mixed into onemodel's Tensor (self, always a Tensor, is typed
    Any here: the class is defined after this one)."""

    __slots__ = ()
    is_sparse = False  # onemodel.sparse's COO tensors say True

    def mm(self: Any, mat2: Any) -> Any:
        return _t.F.mm(self, mat2)

    @property
    def T(self: Any) -> Any:
        """The dimensions reversed; on other than 2 with torch's deprecation warning."""
        ndim = self.ndim
        if ndim != 2:
            warnings.warn(_T_DEPRECATED_0D if ndim == 0 else _T_DEPRECATED, UserWarning,
                          stacklevel=2)
        return _t.F.permute(self, tuple(range(ndim - 1, -1, -1)))

    @property
    def mT(self: Any) -> Any:
        """The last two dimensions swapped (batches of matrices)."""
        if self.ndim < 2:
            raise ValueError(f"mT: expected a matrix or a batch of matrices, got a "
                             f"{self.ndim}-D tensor")
        return _t.F.transpose(self, -2, -1)

    @property
    def mH(self: Any) -> Any:
        """mT (the conjugate of a real tensor is itself)."""
        return self.mT

    @property
    def H(self: Any) -> Any:
        """The transpose of a matrix (real, so no conjugate), as torch's x.H."""
        if self.ndim not in (0, 2):
            raise ValueError(f"H: expected a matrix or a scalar, got a {self.ndim}-D tensor "
                             "(use mH for batches of matrices)")
        return self.T

    def nelement(self: Any) -> int:
        return self.numel()

    def type(self: Any, dtype: Any = None, non_blocking: bool = False) -> Any:
        """With no dtype, torch's type string ("torch.FloatTensor"); else the tensor as that
        dtype (a dtype or a type string), itself when it is one already."""
        current = self.dtype
        if dtype is None:
            return TYPE_NAMES[current]
        if isinstance(dtype, str) and dtype.startswith("torch.") and dtype.endswith("Tensor"):
            dtype = dtype_of_type_name(dtype, "type")
        target = _t._dtype_arg(dtype, "type")
        if target == current:
            return self
        return _t.Tensor._wrap(self._data.astype(target))

    def diag(self: Any, diagonal: int = 0) -> Any:
        return _t.F.diag(self, diagonal)

    def diagonal(self: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        return _t.F.diagonal(self, offset, dim1, dim2)

    def diag_embed(self: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
        return _t.F.diag_embed(self, offset, dim1, dim2)

    def to_sparse(self: Any, sparse_dim: Any = None) -> Any:
        """A sparse COO copy holding the nonzeros (onemodel.sparse)."""
        if sparse_dim is not None and sparse_dim != self.ndim:
            raise NotImplementedError("to_sparse: only sparse_dim equal to the number of "
                                      "dimensions (no dense trailing dimensions)")
        from . import sparse  # type: ignore[attr-defined]  # above this floor
        return sparse.to_sparse(self)

    def to_dense(self: Any) -> Any:
        return self

    # -- more method spellings, composed of the ops above --------------------------------
    def view_as(self, other: "Tensor") -> "Tensor":
        """`reshape(other.shape)`, as `torch.Tensor.view_as`.

        Parameters
        ----------
        other : Tensor
            Gives the shape.
        """
        return _t.F.reshape(self, other.shape)

    def masked_fill(self, mask: "Tensor", value: Any) -> "Tensor":
        """value where mask holds (broadcast), self elsewhere; the gradient flows elsewhere."""
        return _t.F.where(mask, value, self)

    def where(self, condition: "Tensor", other: Any) -> "Tensor":
        """`om.where(condition, self, other)`, as `torch.Tensor.where`.

        Parameters
        ----------
        condition : Tensor
            A bool tensor: where True the result takes this tensor's element.
        other : Tensor or number
            The elements elsewhere.
        """
        return _t.F.where(condition, self, other)

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
        return _t.F.mul(self, _t.Tensor._wrap(np.ones(target, self._data.dtype)))

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
        axis = _t.F._core.normalize_dim(dim, self.ndim, "split")
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
        return tuple(_t.F.index(self, lead + (slice(int(a), int(b)),))
                     for a, b in zip(starts[:-1], starts[1:]))

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        """At most `chunks` pieces of ceil(size / chunks) along dim, as torch.chunk."""
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
            raise ValueError(f"chunk: chunks must be a positive integer, got {chunks!r}")
        axis = _t.F._core.normalize_dim(dim, self.ndim, "chunk")
        return self.split(max(-(-self.shape[axis] // int(chunks)), 1), axis)

    @property
    def device(self) -> device:
        """Always `om.device("cpu")`."""
        return _t.device("cpu")

    def cpu(self) -> "Tensor":
        """Returns the tensor itself: everything lives on the CPU."""
        return self

    def cuda(self, *args: Any, **kwargs: Any) -> "Tensor":
        """Refused (ValueError): onemodel runs on the CPU only."""
        raise ValueError("cuda: onemodel runs on the CPU only")

    def new_tensor(self, data: Any, dtype: Any = None, requires_grad: builtins.bool = False, *,
                   device: Any = None) -> "Tensor":
        """A new tensor of data, of self's dtype unless dtype is given, as torch's."""
        return _t.tensor(data, self.dtype if dtype is None else dtype, requires_grad, device=device)

    def new_zeros(self, *size: Any, dtype: Any = None, requires_grad: builtins.bool = False,
                  device: Any = None) -> "Tensor":
        """Zeros of `size` with this tensor's dtype unless `dtype` is given, as
        `torch.Tensor.new_zeros`.
        """
        return _t.zeros(*size, dtype=self.dtype if dtype is None else dtype,
                        requires_grad=requires_grad, device=device)

    def new_ones(self, *size: Any, dtype: Any = None, requires_grad: builtins.bool = False,
                 device: Any = None) -> "Tensor":
        """Ones of `size` with this tensor's dtype unless `dtype` is given, as
        `torch.Tensor.new_ones`.
        """
        return _t.ones(*size, dtype=self.dtype if dtype is None else dtype,
                       requires_grad=requires_grad, device=device)

    def new_full(self, size: Any, fill_value: Any, dtype: Any = None,
                 requires_grad: builtins.bool = False, *, device: Any = None) -> "Tensor":
        """`fill_value` in a tensor of `size` with this tensor's dtype unless `dtype` is
        given, as `torch.Tensor.new_full`.
        """
        return _t.full(size, fill_value, self.dtype if dtype is None else dtype, requires_grad,
                       device=device)

    new_empty = new_zeros


class _LegacyTypeMeta(type):
    """isinstance(t, om.FloatTensor) is whether t is a tensor of that dtype, as torch's."""

    _dtype: np.dtype

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _t.Tensor) and obj.dtype == cls._dtype


class _LegacyTensor(metaclass=_LegacyTypeMeta):
    """torch's typed constructors: `FloatTensor(2, 3)` (zeros: memory is never handed out
    uninitialised) or `FloatTensor(data)` (the data converted, as torch's, a tensor of
    another dtype refused)."""

    _dtype: np.dtype = np.dtype(np.float32)

    def __new__(cls, *args: Any) -> Any:  # type: ignore[misc]
        name = cls.__name__
        if not args:
            return _t.Tensor._wrap(np.zeros(0, cls._dtype))
        sizes = legacy_sizes(args[0], args[1:], name)
        if sizes is not None:
            return _t.Tensor._wrap(np.zeros(sizes, cls._dtype))
        data = args[0]
        if isinstance(data, _t.Tensor) and data.dtype != cls._dtype:
            raise TypeError(f"{name}: expected a tensor of {cls._dtype}, got {data.dtype}")
        return _t.tensor(data, dtype=cls._dtype)


class FloatTensor(_LegacyTensor):
    _dtype = np.dtype(np.float32)


class LongTensor(_LegacyTensor):
    _dtype = np.dtype(np.int64)


class IntTensor(_LegacyTensor):
    _dtype = np.dtype(np.int32)


class BoolTensor(_LegacyTensor):
    _dtype = np.dtype(np.bool_)


# Last: tensor.py imports this module before it defines Tensor. Its names (and functional,
# which it binds as F) are read at run time through the module.
from . import tensor as _t  # type: ignore[no-redef]  # noqa: E402
