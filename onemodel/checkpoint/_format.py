"""The checkpoint format's constants and caps, its errors, and a target's state in it: the
arrays of a model (or state dict) and an optimizer, their dtype names, hyper-parameters as
bit patterns; the header's checksum. What the writer, the reader and the atomic files share."""
from __future__ import annotations

import contextlib
import os
import re
import struct
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from .._kernels._crc import crc32c

MAGIC = b"ONEMCKPT"
VERSION = 2
VERSIONS = (1, 2)
CHECKSUM = "crc32c"
HEADER = struct.Struct("<8sIIQQQQQQ")
ALIGN = 64
MAX_MANIFEST = 256 << 20
MAX_DEPTH = 32
MAX_RANK = 64
MAX_EXTRA = 1024
# A reader also bounds the manifest by the one its target would write, so a small model never
# parses megabytes of JSON: twice that (longer number spellings, whitespace) plus this margin,
# which also bounds the extra integers a writer accepts.
MANIFEST_MARGIN = 128 << 10
MAX_EXTRA_TEXT = MANIFEST_MARGIN // 2
# The reader with no target (onemodel.load) bounds the manifest by the file: before parsing,
# at most FREE_VALUES JSON values plus one per BYTES_PER_VALUE bytes of the file (the parser
# builds up to ~200 bytes of objects per value, so the parsed manifest stays under the file's
# size plus a few MiB) and decoded text no larger than the bytes plus FREE_MARGIN; after it,
# at most FREE_MARGIN bytes plus FREE_PER_TENSOR per tensor. Its JSON nests up to
# TREE_JSON_DEPTH: a tree container takes up to three levels (docs/spec/clarifications.md).
FREE_VALUES = 1 << 16
BYTES_PER_VALUE = 256
FREE_MARGIN = 4 << 20
FREE_PER_TENSOR = 4 << 10
TREE_JSON_DEPTH = 2 + 3 * MAX_DEPTH
# Without an optimizer the target cannot say how long a saved optimizer section is; optimizers
# keep a few state tensors per parameter, so this many times the model's part bounds it.
OPTIMIZER_ALLOWANCE = 8
DTYPES: dict[str, np.dtype] = {"f32": np.dtype("<f4"), "i32": np.dtype("<i4"),
                               "i64": np.dtype("<i8"), "u8": np.dtype("u1")}
_DTYPE_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32",
                np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8"}
_I64 = (-(1 << 63), 1 << 63)
_JSON_INT = (-(1 << 63), 1 << 64)
# Pieces a save writes, and a load reads, at a time: each one's checksum is taken while it is in
# cache (twice the speed of a separate pass over the whole state).
_PIECE = 1 << 20


class CheckpointError(Exception):
    """A checkpoint could not be read or does not fit the target; `.kind` names the class."""

    @property
    def kind(self) -> str:
        return type(self).__name__


class BadHeader(CheckpointError):
    """The header is not a checkpoint's, or the file's length or checksum differs from it."""


class BadManifest(CheckpointError):
    """The manifest is not valid: bad JSON, unknown or missing fields, over the caps."""


class BadTensor(CheckpointError):
    """A tensor entry's offset, length or padding is not the writer's layout."""


class Mismatch(CheckpointError):
    """A valid checkpoint that does not fit the target: names, shapes, dtypes or settings."""


class TorchFile(BadHeader):
    """The file is what torch.save writes (a zip archive or a pickle): never unpickled."""


@contextlib.contextmanager
def _naming(source: str) -> Iterator[None]:
    """Every CheckpointError raised inside names `source`, the file it came from."""
    try:
        yield
    except CheckpointError as e:
        raise type(e)(f"{source}: {e}") from None


def _source(f: Any) -> str:
    """The name of a path or file object, for error messages."""
    if isinstance(f, (str, bytes, os.PathLike)):
        return os.fsdecode(f)
    name = getattr(f, "name", None)
    return os.fsdecode(name) if isinstance(name, (str, bytes, os.PathLike)) else \
        f"<{type(f).__name__}>"


def _short(value: Any) -> str:
    """repr for an error message, cut short: a hostile value may be megabytes long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- the training state of a target --------------------------------------------------------
def _model_state(model: Any) -> list[tuple[str, np.ndarray]]:
    """The model's own parameter and buffer arrays (not copies), in the state order; for a
    state dict (save_state_dict), its arrays in its own order."""
    if isinstance(model, Mapping):
        return [_state_entry(name, value) for name, value in model.items()]
    return [(name, t._data) for name, t in model._named_state()]


def _state_entry(name: Any, value: Any) -> tuple[str, np.ndarray]:
    if not isinstance(name, str):
        raise TypeError(f"save: a state dict's keys are names (str), got {_short(name)}")
    array = getattr(value, "_data", value)  # a Tensor's own array
    if not isinstance(array, (np.ndarray, np.generic)):
        raise TypeError(f"save: state_dict[{name!r}] is of type {type(value).__name__}; a "
                        "model's state holds tensors (onemodel.save takes any nesting of "
                        "dicts, lists, numbers and tensors)")
    return name, np.asarray(array)


def _optimizer_state(optimizer: Any) -> list[tuple[str, np.ndarray]]:
    """The optimizer's own state arrays (not copies), in state_tensors() order."""
    return list(optimizer.state_tensors().items())


def _dtype_name(name: str, arr: np.ndarray) -> str:
    try:
        return _DTYPE_NAMES[arr.dtype]
    except KeyError:
        raise ValueError(f"checkpoint: tensor {name!r} has unsupported dtype {arr.dtype}") from None


def _hyper_bits(optimizer: Any) -> list[dict]:
    out = []
    for name, value in optimizer.hyper_parameters().items():
        out.append({"name": name, "bits": _bits_of(value)})
    return out


def _bits_of(value: float) -> int:
    """A hyper-parameter (held as float32; flags as 0.0 or 1.0) as its IEEE-754 bit pattern."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _value_of(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _checksum(chunks: Iterable[Any]) -> int:
    crc = 0
    for chunk in chunks:
        crc = crc32c(chunk, crc)
    return crc


def _set_checksum(chunks: list, checksum: int) -> None:
    chunks[0][HEADER.size - 8:HEADER.size] = checksum.to_bytes(8, "little")
