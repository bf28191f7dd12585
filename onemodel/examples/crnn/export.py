"""Export of a trained recognizer: batch norm folded into the convolutions, in safetensors.

Folding, in double precision, per output channel c of a convolution followed by batch norm in
evaluation mode: s = gamma_c / sqrt(running_var_c + eps), weight_c <- weight_c * s, bias_c <-
beta_c - running_mean_c * s; each rounded once to float32. The folded model
(model.build(..., folded=True)) gives the unfolded model's evaluation output within float32
rounding.

The file is safetensors (its documented layout): an 8-byte little-endian header length, a JSON
header naming each tensor's dtype, shape and byte range (plus "__metadata__"), padded with
spaces to a multiple of 8, then the tensors' little-endian bytes in header order. Written
through a temporary file and a rename, so a reader never sees half a file.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import numpy as np

from ... import nn

_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}


def folded_state(model: Any) -> dict[str, np.ndarray]:
    """The state of the folded model: every convolution with its batch norm folded in, the
    norms gone, the rest as it is."""
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    layers = list(model.features)
    out: dict[str, np.ndarray] = {}
    for i, layer in enumerate(layers):
        if isinstance(layer, nn.Conv2d):
            norm = layers[i + 1]
            if not isinstance(norm, nn.BatchNorm2d):
                raise ValueError(f"folded_state: features.{i} is not followed by a batch norm")
            n = f"features.{i + 1}."
            scale = state[n + "weight"].astype(np.float64) / np.sqrt(
                state[n + "running_var"].astype(np.float64) + norm.eps)
            weight = state[f"features.{i}.weight"].astype(np.float64) * scale[:, None, None, None]
            bias = state[n + "bias"] - state[n + "running_mean"].astype(np.float64) * scale
            out[f"features.{i}.weight"] = weight.astype(np.float32)
            out[f"features.{i}.bias"] = bias.astype(np.float32)
    for name, value in state.items():
        if not name.startswith("features."):
            out[name] = value
    return out


def write_safetensors(path: str, tensors: dict[str, np.ndarray],
                      metadata: dict[str, str] | None = None) -> None:
    header: dict[str, Any] = {"__metadata__": dict(metadata or {})}
    offset = 0
    for name, value in tensors.items():
        if value.dtype not in _DTYPES:
            raise ValueError(f"write_safetensors: {name} has dtype {value.dtype}; "
                             f"only {[str(d) for d in _DTYPES]} are written")
        header[name] = {"dtype": _DTYPES[value.dtype], "shape": list(value.shape),
                        "data_offsets": [offset, offset + value.nbytes]}
        offset += value.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".export-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(len(raw).to_bytes(8, "little") + raw)
            for value in tensors.values():
                f.write(np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"))
                        .tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def export(model: Any, path: str) -> None:
    """Writes the folded recognizer to `path` (safetensors)."""
    write_safetensors(path, folded_state(model), {"format": "onemodel-crnn", "folded": "1"})
