"""Tensor's operators (`a + b`, `a @ b`, `a == b`, `a[i]`, ...) and its method spellings of
functional's ops (`x.sum(dim)`, `x.reshape(...)`, `x.exp()`, ...), each forwarding to
onemodel.functional, as a mixin of Tensor so that tensor.py keeps to the core."""
# mypy: disable-error-code="arg-type, attr-defined, return-value"
# (self, a Tensor at run time, is typed TensorOps for mypy, which would refuse it where a
# Tensor is passed, returned or read)
from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from .tensor import Tensor


class TensorOps:
    """Mixed into Tensor: the methods that forward to onemodel.functional."""

    __slots__ = ()

    def clone(self) -> "Tensor":
        """`om.clone` of this tensor, as `torch.Tensor.clone`."""
        return _t.F.clone(self)

    def add(self, other: Any, *, alpha: Any = 1) -> "Tensor":
        """`om.add` of this tensor, as `torch.Tensor.add`; `other` and `alpha` as there."""
        return _t.F.add(self, other, alpha=alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> "Tensor":
        """`om.sub` of this tensor, as `torch.Tensor.sub`; `other` and `alpha` as there."""
        return _t.F.sub(self, other, alpha=alpha)

    # -- operators (differentiable ones live in functional) -----------------------------
    def __add__(self, other: Any) -> "Tensor":
        return _t.F.add(self, other)

    def __radd__(self, other: Any) -> "Tensor":
        return _t.F.add(other, self)

    def __sub__(self, other: Any) -> "Tensor":
        return _t.F.sub(self, other)

    def __rsub__(self, other: Any) -> "Tensor":
        return _t.F.sub(other, self)

    def __mul__(self, other: Any) -> "Tensor":
        return _t.F.mul(self, other)

    def __rmul__(self, other: Any) -> "Tensor":
        return _t.F.mul(other, self)

    def __truediv__(self, other: Any) -> "Tensor":
        return _t.F.div(self, other)

    def __rtruediv__(self, other: Any) -> "Tensor":
        return _t.F.div(other, self)

    def __floordiv__(self, other: Any) -> "Tensor":
        return _t.F.div(self, other, rounding_mode="floor")

    def __rfloordiv__(self, other: Any) -> "Tensor":
        return _t.F.div(other, self, rounding_mode="floor")

    def __pow__(self, other: Any) -> "Tensor":
        return _t.F.pow(self, other)

    def __rpow__(self, other: Any) -> "Tensor":
        return _t.F.pow(other, self)

    def __matmul__(self, other: Any) -> "Tensor":
        return _t.F.matmul(self, other)

    def __rmatmul__(self, other: Any) -> "Tensor":
        return _t.F.matmul(other, self)

    def __neg__(self) -> "Tensor":
        return _t.F.neg(self)

    def __abs__(self) -> "Tensor":
        return _t.F.abs(self)

    def __getitem__(self, index: Any) -> "Tensor":
        return _t.F.index(self, index)

    def __eq__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return _t.F.eq(self, other)

    def __ne__(self, other: Any) -> "Tensor":  # type: ignore[override]
        return _t.F.ne(self, other)

    def __lt__(self, other: Any) -> "Tensor":
        return _t.F.lt(self, other)

    def __le__(self, other: Any) -> "Tensor":
        return _t.F.le(self, other)

    def __gt__(self, other: Any) -> "Tensor":
        return _t.F.gt(self, other)

    def __ge__(self, other: Any) -> "Tensor":
        return _t.F.ge(self, other)

    eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__

    __hash__ = object.__hash__

    # -- method spellings of common functional ops --------------------------------------
    def sum(self, dim: Any = None, keepdim: bool = False) -> "Tensor":
        """`om.sum` of this tensor, as `torch.Tensor.sum`; `dim` and `keepdim` as there."""
        return _t.F.sum(self, dim, keepdim)

    def mean(self, dim: Any = None, keepdim: bool = False) -> "Tensor":
        """`om.mean` of this tensor, as `torch.Tensor.mean`; `dim` and `keepdim` as there."""
        return _t.F.mean(self, dim, keepdim)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        """`om.max` of this tensor, as `torch.Tensor.max`; `dim` and `keepdim` as there."""
        return _t.F.max(self, dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        """`om.min` of this tensor, as `torch.Tensor.min`; `dim` and `keepdim` as there."""
        return _t.F.min(self, dim, keepdim)

    def maximum(self, other: Any) -> "Tensor":
        """`om.maximum` of this tensor, as `torch.Tensor.maximum`; `other` as there."""
        return _t.F.maximum(self, other)

    def minimum(self, other: Any) -> "Tensor":
        """`om.minimum` of this tensor, as `torch.Tensor.minimum`; `other` as there."""
        return _t.F.minimum(self, other)

    def reshape(self, *shape: Any) -> "Tensor":
        """`om.reshape(self, shape)`, as `torch.Tensor.reshape`; the shape as separate ints
        or one sequence.
        """
        return _t.F.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int)
                         else shape)

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        """`om.flatten` of this tensor, as `torch.Tensor.flatten`; `start_dim` and `end_dim`
        as there.
        """
        return _t.F.flatten(self, start_dim, end_dim)

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        """`om.transpose` of this tensor, as `torch.Tensor.transpose`; `dim0` and `dim1` as
        there.
        """
        return _t.F.transpose(self, dim0, dim1)

    def mul(self, other: Any) -> "Tensor":
        """`om.mul` of this tensor, as `torch.Tensor.mul`; `other` as there."""
        return _t.F.mul(self, other)

    def pow(self, exponent: Any) -> "Tensor":
        """`om.pow` of this tensor, as `torch.Tensor.pow`; `exponent` as there."""
        return _t.F.pow(self, exponent)

    def gather(self, dim: int, index: Any) -> "Tensor":
        """`om.gather` of this tensor, as `torch.Tensor.gather`; `dim` and `index` as there."""
        return _t.F.gather(self, dim, index)

    def any(self, dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.any` of this tensor, as `torch.Tensor.any`; `dim` and `keepdim` as there."""
        return _t.F.any(self, dim, keepdim)

    def all(self, dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.all` of this tensor, as `torch.Tensor.all`; `dim` and `keepdim` as there."""
        return _t.F.all(self, dim, keepdim)

    def matmul(self, other: Any) -> "Tensor":
        """`om.matmul` of this tensor, as `torch.Tensor.matmul`; `other` as there."""
        return _t.F.matmul(self, other)

    def bmm(self, mat2: Any) -> "Tensor":
        """`om.bmm` of this tensor, as `torch.Tensor.bmm`; `mat2` as there."""
        return _t.F.bmm(self, mat2)

    def outer(self, vec2: Any) -> "Tensor":
        """`om.outer` of this tensor, as `torch.Tensor.outer`; `vec2` as there."""
        return _t.F.outer(self, vec2)

    def index_select(self, dim: int, index: Any) -> "Tensor":
        """`om.index_select` of this tensor, as `torch.Tensor.index_select`; `dim` and
        `index` as there.
        """
        return _t.F.index_select(self, dim, index)

    def var(self, dim: Any = None, *, correction: builtins.float = 1,
            keepdim: builtins.bool = False, unbiased: Any = None) -> "Tensor":
        """`om.var` of this tensor, as `torch.Tensor.var`; `dim`, `correction`, `keepdim` and
        `unbiased` as there.
        """
        return _t.F.var(self, dim, correction=correction, keepdim=keepdim, unbiased=unbiased)

    def std(self, dim: Any = None, *, correction: builtins.float = 1,
            keepdim: builtins.bool = False, unbiased: Any = None) -> "Tensor":
        """`om.std` of this tensor, as `torch.Tensor.std`; `dim`, `correction`, `keepdim` and
        `unbiased` as there.
        """
        return _t.F.std(self, dim, correction=correction, keepdim=keepdim, unbiased=unbiased)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.norm` of this tensor, as `torch.Tensor.norm`; `p`, `dim` and `keepdim` as
        there.
        """
        return _t.F.norm(self, p, dim, keepdim)

    def round(self) -> "Tensor":
        """`om.round` of this tensor, as `torch.Tensor.round`."""
        return _t.F.round(self)

    def floor(self) -> "Tensor":
        """`om.floor` of this tensor, as `torch.Tensor.floor`."""
        return _t.F.floor(self)

    def ceil(self) -> "Tensor":
        """`om.ceil` of this tensor, as `torch.Tensor.ceil`."""
        return _t.F.ceil(self)

    def trunc(self) -> "Tensor":
        """`om.trunc` of this tensor, as `torch.Tensor.trunc`."""
        return _t.F.trunc(self)

    def sign(self) -> "Tensor":
        """`om.sign` of this tensor, as `torch.Tensor.sign`."""
        return _t.F.sign(self)

    def isnan(self) -> "Tensor":
        """`om.isnan` of this tensor, as `torch.Tensor.isnan`."""
        return _t.F.isnan(self)

    def isinf(self) -> "Tensor":
        """`om.isinf` of this tensor, as `torch.Tensor.isinf`."""
        return _t.F.isinf(self)

    def isfinite(self) -> "Tensor":
        """`om.isfinite` of this tensor, as `torch.Tensor.isfinite`."""
        return _t.F.isfinite(self)

    def allclose(self, other: Any, rtol: builtins.float = 1e-05, atol: builtins.float = 1e-08,
                 equal_nan: builtins.bool = False) -> builtins.bool:
        """`om.allclose` of this tensor, as `torch.Tensor.allclose`; `other`, `rtol`, `atol`
        and `equal_nan` as there.
        """
        return _t.F.allclose(self, other, rtol, atol, equal_nan)

    def equal(self, other: Any) -> builtins.bool:
        """`om.equal` of this tensor, as `torch.Tensor.equal`; `other` as there."""
        return _t.F.equal(self, other)

    def flip(self, *dims: Any) -> "Tensor":
        """`om.flip(self, dims)`, as `torch.Tensor.flip`; the dims as separate ints or one
        sequence.
        """
        return _t.F.flip(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)

    def roll(self, shifts: Any, dims: Any = None) -> "Tensor":
        """`om.roll` of this tensor, as `torch.Tensor.roll`; `shifts` and `dims` as there."""
        return _t.F.roll(self, shifts, dims)

    def movedim(self, source: Any, destination: Any) -> "Tensor":
        """`om.movedim` of this tensor, as `torch.Tensor.movedim`; `source` and `destination`
        as there.
        """
        return _t.F.movedim(self, source, destination)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        """`om.narrow` of this tensor, as `torch.Tensor.narrow`; `dim`, `start` and `length`
        as there.
        """
        return _t.F.narrow(self, dim, start, length)

    def swapaxes(self, axis0: int, axis1: int) -> "Tensor":
        """`om.transpose` of this tensor, as `torch.Tensor.swapaxes`; `axis0` and `axis1` as
        there.
        """
        return _t.F.transpose(self, axis0, axis1)

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
        return _t.F.amax(self, dim, keepdim)

    def amin(self, dim: Any = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.amin` of this tensor, as `torch.Tensor.amin`; `dim` and `keepdim` as there."""
        return _t.F.amin(self, dim, keepdim)

    def prod(self, dim: Optional[int] = None, keepdim: builtins.bool = False) -> "Tensor":
        """`om.prod` of this tensor, as `torch.Tensor.prod`; `dim` and `keepdim` as there."""
        return _t.F.prod(self, dim, keepdim)

    def logsumexp(self, dim: Any, keepdim: builtins.bool = False) -> "Tensor":
        """`om.logsumexp` of this tensor, as `torch.Tensor.logsumexp`; `dim` and `keepdim` as
        there.
        """
        return _t.F.logsumexp(self, dim, keepdim)

    def argsort(self, dim: int = -1, descending: builtins.bool = False) -> "Tensor":
        """`om.argsort` of this tensor, as `torch.Tensor.argsort`; `dim` and `descending` as
        there.
        """
        return _t.F.argsort(self, dim, descending)

    def square(self) -> "Tensor":
        """`om.square` of this tensor, as `torch.Tensor.square`."""
        return _t.F.square(self)

    def reciprocal(self) -> "Tensor":
        """`om.reciprocal` of this tensor, as `torch.Tensor.reciprocal`."""
        return _t.F.reciprocal(self)

    def rsqrt(self) -> "Tensor":
        """`om.rsqrt` of this tensor, as `torch.Tensor.rsqrt`."""
        return _t.F.rsqrt(self)

    def nonzero(self, *, as_tuple: builtins.bool = False) -> Any:
        """`om.nonzero` of this tensor, as `torch.Tensor.nonzero`; `as_tuple` as there."""
        return _t.F.nonzero(self, as_tuple=as_tuple)

    def masked_select(self, mask: Any) -> "Tensor":
        """`om.masked_select` of this tensor, as `torch.Tensor.masked_select`; `mask` as
        there.
        """
        return _t.F.masked_select(self, mask)

    def repeat_interleave(self, repeats: Any, dim: Optional[int] = None) -> "Tensor":
        """`om.repeat_interleave` of this tensor, as `torch.Tensor.repeat_interleave`;
        `repeats` and `dim` as there.
        """
        return _t.F.repeat_interleave(self, repeats, dim)

    def t(self) -> "Tensor":
        """The transpose of a matrix, as torch's: a 0-d or 1-d tensor is returned as it is."""
        if self.ndim > 2:
            raise ValueError(f"t: expects a tensor of at most 2 dimensions, got shape "
                             f"{self.shape}; use transpose(dim0, dim1) or permute")
        return self if self.ndim < 2 else _t.F.transpose(self, 0, 1)

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
        return _t.F.permute(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int)
                         else dims)

    def unsqueeze(self, dim: int) -> "Tensor":
        """`om.unsqueeze` of this tensor, as `torch.Tensor.unsqueeze`; `dim` as there."""
        return _t.F.unsqueeze(self, dim)

    def squeeze(self, dim: Optional[int] = None) -> "Tensor":
        """`om.squeeze` of this tensor, as `torch.Tensor.squeeze`; `dim` as there."""
        return _t.F.squeeze(self, dim)

    def div(self, other: Any, *, rounding_mode: Optional[str] = None) -> "Tensor":
        """`om.div` of this tensor, as `torch.Tensor.div`; `other` and `rounding_mode` as
        there.
        """
        return _t.F.div(self, other, rounding_mode=rounding_mode)

    def exp(self) -> "Tensor":
        """`om.exp` of this tensor, as `torch.Tensor.exp`."""
        return _t.F.exp(self)

    def log(self) -> "Tensor":
        """`om.log` of this tensor, as `torch.Tensor.log`."""
        return _t.F.log(self)

    def sqrt(self) -> "Tensor":
        """`om.sqrt` of this tensor, as `torch.Tensor.sqrt`."""
        return _t.F.sqrt(self)

    def tanh(self) -> "Tensor":
        """`om.tanh` of this tensor, as `torch.Tensor.tanh`."""
        return _t.F.tanh(self)

    def sigmoid(self) -> "Tensor":
        """`om.sigmoid` of this tensor, as `torch.Tensor.sigmoid`."""
        return _t.F.sigmoid(self)

    def erf(self) -> "Tensor":
        """`om.erf` of this tensor, as `torch.Tensor.erf`."""
        return _t.F.erf(self)

    def expm1(self) -> "Tensor":
        """`om.expm1` of this tensor, as `torch.Tensor.expm1`."""
        return _t.F.expm1(self)

    def log1p(self) -> "Tensor":
        """`om.log1p` of this tensor, as `torch.Tensor.log1p`."""
        return _t.F.log1p(self)

    def sin(self) -> "Tensor":
        """`om.sin` of this tensor, as `torch.Tensor.sin`."""
        return _t.F.sin(self)

    def cos(self) -> "Tensor":
        """`om.cos` of this tensor, as `torch.Tensor.cos`."""
        return _t.F.cos(self)

    def relu(self) -> "Tensor":
        """`om.relu` of this tensor, as `torch.Tensor.relu`."""
        return _t.F.relu(self)

    def abs(self) -> "Tensor":
        """`om.abs` of this tensor, as `torch.Tensor.abs`."""
        return _t.F.abs(self)

    def clamp(self, min: Any = None, max: Any = None) -> "Tensor":
        """`om.clamp` of this tensor, as `torch.Tensor.clamp`; `min` and `max` as there."""
        return _t.F.clamp(self, min, max)

    def clamp_min(self, min: Any) -> "Tensor":
        """`om.clamp` of this tensor, as `torch.Tensor.clamp_min`; `min=min` as there."""
        return _t.F.clamp(self, min=min)

    def clamp_max(self, max: Any) -> "Tensor":
        """`om.clamp` of this tensor, as `torch.Tensor.clamp_max`; `max=max` as there."""
        return _t.F.clamp(self, max=max)

    def softmax(self, dim: int, dtype: Any = None) -> "Tensor":
        """`om.softmax` of this tensor, as `torch.Tensor.softmax`; `dim` and `dtype` as
        there.
        """
        return _t.F.softmax(self, dim, dtype=dtype)

    def log_softmax(self, dim: int, dtype: Any = None) -> "Tensor":
        """`om.log_softmax` of this tensor, as `torch.Tensor.log_softmax`; `dim` and `dtype`
        as there.
        """
        return _t.F.log_softmax(self, dim, dtype=dtype)

    def topk(self, k: int, dim: Optional[int] = None, largest: bool = True,
             sorted: bool = True) -> Any:
        """`om.topk` of this tensor, as `torch.Tensor.topk`; `k`, `dim`, `largest` and
        `sorted` as there.
        """
        return _t.F.topk(self, k, dim, largest, sorted)

    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
        """`om.sort` of this tensor, as `torch.Tensor.sort`; `dim`, `descending` and `stable`
        as there.
        """
        return _t.F.sort(self, dim, descending, stable=stable)

    def cumsum(self, dim: int, *, dtype: Any = None) -> "Tensor":
        """`om.cumsum` of this tensor, as `torch.Tensor.cumsum`; `dim` and `dtype` as there."""
        return _t.F.cumsum(self, dim, dtype=dtype)

    def tril(self, diagonal: int = 0) -> "Tensor":
        """`om.tril` of this tensor, as `torch.Tensor.tril`; `diagonal` as there."""
        return _t.F.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> "Tensor":
        """`om.triu` of this tensor, as `torch.Tensor.triu`; `diagonal` as there."""
        return _t.F.triu(self, diagonal)

    def argmax(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """`om.argmax` of this tensor, as `torch.Tensor.argmax`; `dim` and `keepdim` as
        there.
        """
        return _t.F.argmax(self, dim, keepdim)

    def argmin(self, dim: Optional[int] = None, keepdim: bool = False) -> "Tensor":
        """`om.argmin` of this tensor, as `torch.Tensor.argmin`; `dim` and `keepdim` as
        there.
        """
        return _t.F.argmin(self, dim, keepdim)


# Last: tensor.py imports this module before it defines Tensor; functional, which imports
# tensor.py, is read at run time through it (tensor.py binds it as F once Tensor exists).
from . import tensor as _t  # type: ignore[no-redef]  # noqa: E402
