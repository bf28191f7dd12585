"""PyTorch state dicts <-> onemodel modules: names and layouts.

Most modules already use PyTorch's names and layouts (Linear, Conv2d, ConvTranspose2d, LayerNorm,
BatchNorm with num_batches_tracked, Embedding, LSTM and GRU with their gate order and bias
pairs), so their entries map by name. The differences:

- MultiheadAttention: PyTorch's fused in_proj_weight / in_proj_bias are our q, k, v stacked
  along rows (in that order), its q/k/v_proj_weight our q, k, v weights when kdim or vdim
  differ from embed_dim; out_proj is o; bias_k and bias_v keep their names. The dropout's
  draw counter has no PyTorch counterpart: loading keeps ours, exporting leaves it out.
- TransformerEncoderLayer: self_attn, linear1, linear2 are our attn, ff1, ff2;
  TransformerDecoderLayer's multihead_attn is our cross_attn.
- TransformerEncoder and TransformerDecoder: layers.<i> is our layer<i>.

to_torch_state_dict returns torch tensors, ready for torch's load_state_dict, and is the only
function here that imports torch (lazily); to_torch_arrays gives the same entries as numpy
arrays without it. load_torch_state_dict takes torch tensors or numpy arrays (a tensor is read
through its own methods, so loading never imports torch either).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np

from .nn.attention import (
    MultiheadAttention,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from .nn.layers import Dropout
from .nn.module import Module

if TYPE_CHECKING:
    import torch

_LAYER_CHILDREN = {"attn": "self_attn", "cross_attn": "multihead_attn", "ff1": "linear1",
                   "ff2": "linear2"}


def _links(module: Module, ours: str, theirs: str) -> Iterator[tuple]:
    """(torch name or None, [our names]) for every entry: a torch entry is our entries stacked
    along rows; None marks our entries PyTorch does not have."""
    if isinstance(module, Dropout):
        yield None, [ours + "draws"]
        return
    if isinstance(module, MultiheadAttention):
        if module.kdim == module.vdim == module.embed_dim:
            yield theirs + "in_proj_weight", [f"{ours}{p}.weight" for p in "qkv"]
        else:  # PyTorch keeps the three apart when their widths differ
            for p in "qkv":
                yield f"{theirs}{p}_proj_weight", [f"{ours}{p}.weight"]
        if module.q.bias is not None:
            yield theirs + "in_proj_bias", [f"{ours}{p}.bias" for p in "qkv"]
        for name in ("bias_k", "bias_v"):
            if getattr(module, name) is not None:
                yield theirs + name, [ours + name]
        yield from _links(module.o, ours + "o.", theirs + "out_proj.")
        yield from _links(module.dropout, ours + "dropout.", "")
        return
    for registry in (module._parameters, module._buffers):
        for name, t in registry.items():
            if t is not None:
                yield theirs + name, [ours + name]
    for name, child in module._named_submodules():  # every slot: a shared module under each name
        torch_name = name
        if isinstance(module, (TransformerEncoderLayer, TransformerDecoderLayer)):
            torch_name = _LAYER_CHILDREN.get(name, name)
        elif isinstance(module, (TransformerEncoder, TransformerDecoder)) and name != "norm":
            torch_name = "layers." + name[len("layer"):]
        yield from _links(child, f"{ours}{name}.", f"{theirs}{torch_name}.")


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu()
        if value.is_floating_point():  # float32 anyway, and numpy has no bfloat16
            value = value.float()
        value = value.numpy()
    return np.asarray(value)


def to_torch_arrays(module: Module) -> "OrderedDict[str, np.ndarray]":
    """The module's state under PyTorch's names and layouts, as numpy arrays (needs no torch)."""
    state = module.state_dict()
    out: "OrderedDict[str, np.ndarray]" = OrderedDict()
    for theirs, ours in _links(module, "", ""):
        if theirs is not None:
            parts = [state[name].numpy() for name in ours]  # the module's own arrays: copied
            out[theirs] = parts[0].copy() if len(parts) == 1 else np.concatenate(parts, axis=0)
    return out


def to_torch_state_dict(module: Module) -> "OrderedDict[str, torch.Tensor]":
    """The module's state under PyTorch's names and layouts as torch tensors (copies), so
    `torch_model.load_state_dict(to_torch_state_dict(module))` loads it directly."""
    try:
        import torch
    except ImportError as error:
        raise ImportError("onemodel.interop.to_torch_state_dict needs PyTorch (pip install "
                          "torch); to_torch_arrays gives the same entries as numpy arrays"
                          ) from error
    return OrderedDict((name, torch.from_numpy(value))
                       for name, value in to_torch_arrays(module).items())


def load_torch_state_dict(module: Module, torch_state_dict: Mapping[str, Any]) -> None:
    """Loads a PyTorch state dict (torch tensors or numpy arrays) into the module.

    Strict and all-or-nothing like Module.load_state_dict: a missing or unexpected PyTorch
    name, or a shape or dtype that does not fit, raises ValueError before anything is copied.
    Floating-point values are converted to float32.
    """
    if not isinstance(torch_state_dict, Mapping):
        raise TypeError(f"load_torch_state_dict: expected a mapping of name -> tensor, got "
                        f"{type(torch_state_dict).__name__}")
    current = module.state_dict()
    links = list(_links(module, "", ""))
    expected = [theirs for theirs, _ in links if theirs is not None]
    missing = [k for k in expected if k not in torch_state_dict]
    unexpected = [str(k) for k in torch_state_dict if k not in set(expected)]
    if missing or unexpected:
        parts = ([f"missing keys: {', '.join(missing)}"] if missing else []) + \
            ([f"unexpected keys: {', '.join(unexpected)}"] if unexpected else [])
        raise ValueError(f"load_torch_state_dict into {type(module).__name__}: "
                         + "; ".join(parts))
    converted: "OrderedDict[str, Any]" = OrderedDict()
    bad = []
    for theirs, ours in links:
        if theirs is None:
            for name in ours:
                converted[name] = current[name]
            continue
        value = _numpy(torch_state_dict[theirs])
        if value.dtype.kind == "f":
            value = value.astype(np.float32)
        rows = [current[name].shape[0] if current[name].ndim else 1 for name in ours]
        if len(ours) > 1 and (value.ndim == 0 or value.shape[0] != sum(rows)):
            bad.append(f"{theirs} (shape {value.shape}; expected {sum(rows)} rows for "
                       f"{', '.join(ours)})")
            continue
        pieces = np.split(value, np.cumsum(rows)[:-1], axis=0) if len(ours) > 1 else [value]
        for name, piece in zip(ours, pieces):
            converted[name] = np.require(piece, requirements="C")  # keeps rank 0
    if bad:
        raise ValueError(f"load_torch_state_dict into {type(module).__name__}: mismatched "
                         "keys: " + "; ".join(bad))
    module.load_state_dict(converted)
