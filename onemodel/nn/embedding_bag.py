"""nn.EmbeddingBag: Embedding's table reduced per bag (functional.embedding_bag)."""
from __future__ import annotations

from typing import Any, Optional

from .. import functional as F
from ..functional.nn import check_padding_idx
from ..random import Generator
from ..tensor import Tensor
from .init import EMBEDDING_BOUND, resolve_generator, uniform_parameter
from .layers import _positive
from .module import Module, Parameter, check_factory_kwargs


class EmbeddingBag(Module):
    """weight (num_embeddings, embedding_dim) drawn as Embedding's (Uniform(±√3), variance 1
    as torch's normal draws), the padding_idx row zeroed; forward(input, offsets,
    per_sample_weights) as torch's."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 max_norm: Optional[float] = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Optional[Tensor] = None, include_last_offset: bool = False,
                 padding_idx: Optional[int] = None, device: Any = None, dtype: Any = None, *,
                 generator: Optional[Generator] = None, seed: Optional[int] = None) -> None:
        super().__init__()
        check_factory_kwargs(device, dtype, "EmbeddingBag")
        self.num_embeddings = _positive(num_embeddings, "num_embeddings", "EmbeddingBag")
        self.embedding_dim = _positive(embedding_dim, "embedding_dim", "EmbeddingBag")
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        if sparse:
            raise NotImplementedError("EmbeddingBag: sparse=True (sparse gradients) is not "
                                      "supported; use sparse=False")
        self.padding_idx = check_padding_idx(padding_idx, self.num_embeddings, "EmbeddingBag")
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, False
        self.include_last_offset = include_last_offset
        shape = (self.num_embeddings, self.embedding_dim)
        if _weight is not None:
            if tuple(_weight.shape) != shape:
                raise ValueError(f"EmbeddingBag: _weight of shape {tuple(_weight.shape)} does "
                                 f"not match (num_embeddings, embedding_dim) = {shape}")
            self.weight = Parameter(_weight)
            return
        self.weight = uniform_parameter(shape, EMBEDDING_BOUND, resolve_generator(generator,
                                                                                  seed))
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0.0

    def forward(self, input: Tensor, offsets: Optional[Tensor] = None,
                per_sample_weights: Optional[Tensor] = None) -> Tensor:
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx!r}"
        return text
