"""Basic layers: Linear, Bilinear, Embedding, Identity, Flatten and Unflatten; and, importable
from here too, the activations (activation.py), the dropouts (dropout.py), LayerNorm
(normalization.py) and Sequential (container.py).

Constructor arguments are PyTorch's; layers that draw initial weights also take
`generator=` or `seed=` (see init.py). Parameter shapes are PyTorch's
(Linear.weight is (out_features, in_features)), so PyTorch weights load unchanged.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from .. import functional as F
from ..functional._core import normalize_dim
from ..functional.nn import check_padding_idx
from ..random import Generator
from ..tensor import Tensor
from .activation import (  # noqa: F401
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .container import Sequential  # noqa: F401
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d  # noqa: F401
from .init import EMBEDDING_BOUND, fan_in_bound, resolve_generator, uniform_parameter
from .module import Module, Parameter, _positive, check_factory_kwargs
from .normalization import LayerNorm  # noqa: F401


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
