"""Basic layers: Linear, Embedding, LayerNorm, activations, Flatten, Unflatten, Dropout,
Sequential.

Constructor arguments are PyTorch's; layers that draw initial weights also take
`generator=` or `seed=` (see init.py). Parameter shapes are PyTorch's
(Linear.weight is (out_features, in_features)), so PyTorch weights load unchanged.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import numpy as np

from .. import functional as F
from .. import random
from ..functional._core import normalize_dim
from ..functional.dropout import dropout
from ..functional.nn import check_padding_idx, implicit_dim
from ..random import Generator
from ..tensor import Tensor, to_float32_on_cpu
from .init import EMBEDDING_BOUND, fan_in_bound, resolve_generator, uniform_parameter
from .module import Module, Parameter, check_factory_kwargs


def _positive(value: Any, name: str, layer: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{layer}: {name} must be a positive integer, got {value!r}")
    return int(value)


class Linear(Module):
    """y = x·weightᵀ + bias; weight then bias drawn from Uniform(±1/√in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        self.in_features = _positive(in_features, "in_features", "Linear")
        self.out_features = _positive(out_features, "out_features", "Linear")
        g = resolve_generator(generator, seed)
        bound = fan_in_bound(self.in_features)
        self.weight = uniform_parameter((self.out_features, self.in_features), bound, g)
        if bias:
            self.bias = uniform_parameter((self.out_features,), bound, g)
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Embedding(Module):
    """Rows of weight (num_embeddings, embedding_dim) drawn from Uniform(±√3), PyTorch's
    arguments (functional.embedding): the padding_idx row starts at zero and gets no gradient;
    max_norm renormalises the rows a forward looks up, in place. `_weight` is used as the
    weight itself (nothing drawn, no row zeroed, as PyTorch), frozen with `_freeze`."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Optional[Tensor] = None, _freeze: bool = False,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        self.num_embeddings = _positive(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = _positive(embedding_dim, "embedding_dim", "Embedding")
        self.padding_idx = check_padding_idx(padding_idx, self.num_embeddings, "Embedding")
        if sparse:
            raise NotImplementedError("Embedding: sparse=True (sparse gradients) is not "
                                      "supported; use sparse=False")
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = float(norm_type)
        self.scale_grad_by_freq = bool(scale_grad_by_freq)
        self.sparse = False
        shape = (self.num_embeddings, self.embedding_dim)
        if _weight is not None:
            if tuple(_weight.shape) != shape:
                raise ValueError(f"Embedding: _weight of shape {tuple(_weight.shape)} does not "
                                 f"match (num_embeddings, embedding_dim) = {shape}")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
            return
        g = resolve_generator(generator, seed)
        self.weight = uniform_parameter(shape, EMBEDDING_BOUND, g)
        self.weight.requires_grad = not _freeze
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0.0

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> "Embedding":
        """An Embedding whose weight is `embeddings` (2-D), frozen unless freeze=False."""
        if len(getattr(embeddings, "shape", ())) != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D "
                             f"(num_embeddings, embedding_dim), got shape "
                             f"{tuple(getattr(embeddings, 'shape', ()))}")
        num, dim = embeddings.shape
        return cls(num, dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        extra = "".join(f", {name}={getattr(self, name)}" for name in
                        ("padding_idx", "max_norm") if getattr(self, name) is not None)
        return f"{self.num_embeddings}, {self.embedding_dim}" + extra


class LayerNorm(Module):
    """Normalises over the trailing `normalized_shape`; weight ones, bias zeros (no bias with
    bias=False).

    It draws nothing; `generator` and `seed` are accepted so a container can pass the same
    arguments to every child.
    """

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True,
                 device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, type(self).__name__)
        shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) \
            else tuple(normalized_shape)
        self.normalized_shape = tuple(_positive(s, "normalized_shape", "LayerNorm")
                                      for s in shape)
        self.eps = float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, np.float32))
        else:
            self.register_parameter("weight", None)
        if self.elementwise_affine and bias:
            self.bias = Parameter(np.zeros(self.normalized_shape, np.float32))
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Dropout(Module):
    """Zeroes elements with probability p by a counter-based mask.

    The buffer `draws` (int64, rank 0) counts the masks drawn; it is saved with the state, so a
    resumed run continues the stream. Evaluation mode, or p = 0, returns the input itself.
    Without `seed`, the seed is the default generator's next output, taken at construction.
    """

    _function = staticmethod(dropout)  # Dropout1d and Dropout2d drop whole channels

    def __init__(self, p: float = 0.5, seed: Optional[int] = None) -> None:
        super().__init__()
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"{type(self).__name__}: probability p must be in [0, 1], got {p}")
        if seed is not None and (isinstance(seed, bool)
                                 or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"{type(self).__name__}: seed must be an integer, got "
                            f"{type(seed).__name__}")
        self.p = float(p)
        self.seed = random.default_generator.next_u64() if seed is None else int(seed)
        self.register_buffer("draws", Tensor._wrap(np.zeros((), np.int64)))

    def forward(self, input: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return input
        counter = self.draws
        draw = int(counter._data)
        out = self._function(input, self.p, True, seed=self.seed, draw=draw)
        counter._data[...] = draw + 1
        counter._version += 1
        return out

    def extra_repr(self) -> str:
        return f"p={self.p}, seed={self.seed}"


class Dropout1d(Dropout):
    """Zeroes whole channels of (N, C, L) or (C, L) input (functional.dropout1d)."""

    _function = staticmethod(F.dropout1d)


class Dropout2d(Dropout):
    """Zeroes whole channels of (N, C, H, W) input (functional.dropout2d)."""

    _function = staticmethod(F.dropout2d)


class Dropout3d(Dropout):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) input (functional.dropout3d)."""

    _function = staticmethod(F.dropout3d)


class Bilinear(Module):
    """y = x1ᵀ·weight·x2 + bias, weight (out, in1, in2); weight then bias drawn from
    Uniform(±1/√in1_features), as torch's."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, "Bilinear")
        self.in1_features = _positive(in1_features, "in1_features", "Bilinear")
        self.in2_features = _positive(in2_features, "in2_features", "Bilinear")
        self.out_features = _positive(out_features, "out_features", "Bilinear")
        g = resolve_generator(generator, seed)
        bound = fan_in_bound(self.in1_features)
        self.weight = uniform_parameter(
            (self.out_features, self.in1_features, self.in2_features), bound, g)
        if bias:
            self.bias = uniform_parameter((self.out_features,), bound, g)
        else:
            self.register_parameter("bias", None)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Identity(Module):
    """Returns its input unchanged, as `torch.nn.Identity`."""

    def forward(self, input: Tensor) -> Tensor:
        return input


class _Activation(Module):
    """An activation without arguments: `_function` of the input."""

    _function: Callable[[Tensor], Tensor]

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input)


class _TakesInplace(_Activation):
    """One that takes PyTorch's inplace=False: with True the result is written into the input,
    which is returned (functional.elementwise.in_place)."""

    _function: Callable[..., Tensor]

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_TakesInplace):
    """Applies max(0, x) elementwise, as `torch.nn.ReLU`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.relu)


class Hardswish(_TakesInplace):
    """Applies x * relu6(x + 3) / 6 elementwise, as `torch.nn.Hardswish`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.hardswish)


class Mish(_TakesInplace):
    """Applies x * tanh(softplus(x)) elementwise, as `torch.nn.Mish`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.mish)


class Hardsigmoid(_TakesInplace):
    """Applies relu6(x + 3) / 6 elementwise, as `torch.nn.Hardsigmoid`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.hardsigmoid)


class SELU(_TakesInplace):
    """Applies the scaled ELU with PyTorch's constants, as `torch.nn.SELU`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.selu)


class Tanhshrink(_Activation):
    """Applies x - tanh(x) elementwise, as `torch.nn.Tanhshrink`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.tanhshrink)


class Softsign(_Activation):
    """Applies x / (1 + |x|) elementwise, as `torch.nn.Softsign`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.softsign)


class LogSigmoid(_Activation):
    """Applies log(sigmoid(x)) elementwise without overflow, as `torch.nn.LogSigmoid`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.logsigmoid)


class Tanh(_Activation):
    """Applies tanh elementwise (onemodel's exact-mode kernel), as `torch.nn.Tanh`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.tanh)


class Sigmoid(_Activation):
    """Applies 1 / (1 + exp(-x)) elementwise (onemodel's exact-mode kernel), as `torch.nn.Sigmoid`.

    Takes a tensor of any shape and returns one of the same shape.
    """

    _function = staticmethod(F.sigmoid)


class Hardtanh(Module):
    """Clamps the input to [min_val, max_val], as `torch.nn.Hardtanh`.

    Parameters
    ----------
    min_val : float, optional
        The lower bound (default -1).
    max_val : float, optional
        The upper bound (default 1); must not be below `min_val`.
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        name = type(self).__name__
        self.inplace = bool(inplace)
        if not max_val > min_val:
            raise ValueError(f"{name}: max_val ({max_val}) must be greater than min_val "
                             f"({min_val})")
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Hardtanh):
    """Applies min(max(0, x), 6) elementwise, as `torch.nn.ReLU6`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return ""


class Softplus(Module):
    """Applies log(1 + exp(beta x)) / beta elementwise, as `torch.nn.Softplus`.

    Parameters
    ----------
    beta : float, optional
        The sharpness (default 1).
    threshold : float, optional
        Above beta x > threshold the input is returned as it is (default 20).
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """weight (num_parameters,) filled with init: one slope, or one per channel (dim 1)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        to_float32_on_cpu((device, dtype), {}, "PReLU")
        self.num_parameters = _positive(num_parameters, "num_parameters", "PReLU")
        self.weight = Parameter(np.full(self.num_parameters, init, np.float32))

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GELU(Module):
    """Applies the Gaussian error linear unit, as `torch.nn.GELU`.

    Parameters
    ----------
    approximate : str, optional
        "none" (default) for x * Phi(x) with the exact-mode erf, "tanh" for the tanh
        approximation.
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(_TakesInplace):
    """Applies x * sigmoid(x) elementwise, as `torch.nn.SiLU`.

    Parameters
    ----------
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.silu)


class LeakyReLU(Module):
    """Applies max(0, x) + negative_slope * min(0, x), as `torch.nn.LeakyReLU`.

    Parameters
    ----------
    negative_slope : float, optional
        The slope for negative inputs (default 0.01).
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = float(negative_slope), bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class _WithAlpha(Module):
    """ELU and CELU: `_function`(input, alpha, inplace)."""

    _function: Callable[[Tensor, float, bool], Tensor]

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class ELU(_WithAlpha):
    """Applies x for x > 0 and alpha (exp(x) - 1) otherwise, as `torch.nn.ELU`.

    Parameters
    ----------
    alpha : float, optional
        The scale of the negative part (default 1).
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.elu)


class CELU(_WithAlpha):
    """Applies max(0, x) + min(0, alpha (exp(x / alpha) - 1)), as `torch.nn.CELU`.

    Parameters
    ----------
    alpha : float, optional
        The scale of the negative part (default 1).
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    _function = staticmethod(F.celu)


class GLU(Module):
    """The gated linear unit: splits the input in two halves a, b along `dim` and returns a *
    sigmoid(b), as `torch.nn.GLU`.

    Parameters
    ----------
    dim : int, optional
        The dimension to split, whose size must be even (default -1).
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Threshold(Module):
    """Replaces every element not above `threshold` with `value`, as `torch.nn.Threshold`.

    Parameters
    ----------
    threshold : float
        Elements greater than this are kept.
    value : float
        What the others become.
    inplace : bool, optional
        Write the result into the input and return it, as PyTorch (default False).
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, bool(inplace)

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class _Shrink(Module):
    """Softshrink and Hardshrink: `_function`(input, lambd)."""

    _function: Callable[[Tensor, float], Tensor]

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Softshrink(_Shrink):
    """Shrinks the input towards 0 by `lambd` (0 inside [-lambd, lambd]), as `torch.nn.Softshrink`.

    Parameters
    ----------
    lambd : float, optional
        The half-width of the zero band, at least 0 (default 0.5).
    """

    _function = staticmethod(F.softshrink)


class Hardshrink(_Shrink):
    """Sets elements inside [-lambd, lambd] to 0 and keeps the others, as `torch.nn.Hardshrink`.

    Parameters
    ----------
    lambd : float, optional
        The half-width of the zero band (default 0.5).
    """

    _function = staticmethod(F.hardshrink)


class Softmax(Module):
    """softmax along dim. Without dim, PyTorch's deprecated implicit choice (0 for inputs of
    rank 0, 1 or 3, else 1), with PyTorch's warning."""

    _function = staticmethod(F.softmax)

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        dim = self.dim
        if dim is None:
            dim = implicit_dim(type(self).__name__, input.ndim, 3)
        return self._function(input, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log_softmax along dim (without dim, as Softmax)."""

    _function = staticmethod(F.log_softmax)


class Softmin(Softmax):
    """softmin along dim (without dim, as Softmax)."""

    _function = staticmethod(F.softmin)


class Flatten(Module):
    """Flattens dimensions start_dim..end_dim (inclusive) into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = int(start_dim)
        self.end_dim = int(end_dim)

    def forward(self, input: Tensor) -> Tensor:
        return F.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dimension dim into unflattened_size (one entry may be -1), as PyTorch's."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)) or any(
                isinstance(s, bool) or not isinstance(s, (int, np.integer))
                for s in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple or list of ints, got "
                            f"{unflattened_size!r}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        d = normalize_dim(self.dim, input.ndim, "Unflatten")
        sizes, n = tuple(self.unflattened_size), input.shape[d]
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1 or (n % known if -1 in sizes and known else n != known):
            raise ValueError(f"Unflatten: sizes {sizes} do not multiply up to the size {n} of "
                             f"dim {self.dim} of input {input.shape}")
        return F.reshape(input, input.shape[:d] + sizes + input.shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Sequential(Module):
    """Runs its children in order; they are named "0", "1", ... (or by an OrderedDict)."""

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, input: Any) -> Any:
        for m in self.children():
            input = m(input)
        return input

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self._modules)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: Union[int, slice]) -> Module:
        items = list(self._modules.items())
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        if not -len(items) <= index < len(items):
            raise IndexError(f"Sequential: index {index} out of range for {len(items)} modules")
        return items[index][1]
