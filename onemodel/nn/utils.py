"""torch.nn.utils under its PyTorch names: gradient clipping (onemodel.optim.clip), and
parameters as one vector."""
from __future__ import annotations

from typing import Iterable

from .. import functional as F
from ..autograd import no_grad
from ..optim.clip import clip_grad_norm_, clip_grad_value_
from ..tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated in order, in the graph (as PyTorch's)."""
    return F.cat([F.reshape(p, (-1,)) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copies consecutive pieces of vec (1-D) into the parameters, in place and outside the
    graph. PyTorch rebinds each .data to a view of vec instead; a copy keeps the parameters
    apart from vec. vec must hold exactly the parameters' elements: checked before any write."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: vec must be a Tensor, got {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.shape != (total,):
        raise ValueError(f"vector_to_parameters: vec of shape {vec.shape}, expected ({total},) "
                         f"for {len(params)} parameters of {total} elements")
    start = 0
    with no_grad():
        for p in params:
            p.copy_(F.reshape(vec.detach()[start:start + p.numel()], p.shape))
            start += p.numel()


__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters"]
