"""Checkpoints: onemodel's byte format (version 2, with a checksum; version 1 still read),
hostile-input checks, atomic writes.

Layout (little endian):
    0             64-byte header: b"ONEMCKPT", u32 version (2; 1 still read), u32 flags = 0,
                  u64 manifest_offset = 64, u64 manifest_length, u64 data_offset,
                  u64 data_length, u64 file_length, u64 checksum (version 1: reserved = 0)
    64            manifest: compact UTF-8 JSON, fields in the spec's order
    data_offset   data region (data_offset = 64 + manifest_length rounded up to 64); each tensor
                  at a 64-aligned offset from its start, raw little-endian, row-major; floats by
                  bit pattern, so NaN payloads and signed zeros survive.

Version 2: the last header field holds the CRC-32C (Castagnoli, zero-extended to 64 bits) of
every byte from offset 64 to the end of the file, named in the manifest as "checksum":"crc32c"
right after "version" (kernel csrc/crc32c.c: carry-less folding on x86-64 with AVX-512
VPCLMULQDQ, the CRC32 instruction of SSE4.2 or ARMv8 otherwise, a table elsewhere). It is
verified after the header checks and before the manifest is parsed (a mismatch is BadHeader).
The writer writes version 2; `state_hash` hashes the version-1 bytes, which hold no checksum.

The only layout read is the writer's: tensor entries in state order, the first at offset 0 and
each later one at the first multiple of 64 at or after the end of the one before it, every
padding byte zero (after the manifest too), the data region ending where the last tensor ends.
Anything else is BadTensor, so two entries never share bytes and no byte goes unchecked.

Dtypes: "f32", "i32", "i64" and "u8" (packed optimizer state: SR4's 4-bit accumulators, two per
byte). One rule for all four: a name outside them is BadManifest; a known name that differs
from the target's tensor is Mismatch, u8 included.

Caps, beyond the format's own limits (no real checkpoint comes near them; each keeps a hostile
manifest cheap to reject):
- a shape has at most 64 dimensions (numpy's own limit);
- extra holds at most 1024 integers, in at most 64 KiB of manifest text;
- a reader takes a manifest of at most twice the length its target would write plus 128 KiB
  (hence at most a few hundred KiB for any model of a few hundred tensors, and never more than
  256 MiB), so tensor and hyper-parameter entries are bounded by the target's own counts.
The writer refuses, with a ValueError naming the destination and before anything is written,
every state its reader would refuse (a step count of 2^63, say).

A file is untrusted: the reader takes the whole input, then checks the header (BadHeader), the
checksum (BadHeader), the manifest (BadManifest), its entries against the target (Mismatch) and
then the layout (BadTensor), in that order, before it changes anything; nothing else escapes for
a bad file, and a rejected file leaves the model and optimizer as they were. `load` reads a
regular file whole into memory first (a directory, FIFO, device or socket is BadHeader before
anything is read), so a file changed on disk during the load cannot leave a target half
loaded: a load's extra memory is the file's size. The 64-byte header is read and checked
against the file's size first, so a file that is no checkpoint costs 64 bytes of reading. Every
error names the file (`_naming`); a zip archive or pickle (torch.save's) is TorchFile. The
reader with no target (`read_free`: onemodel.load, state_files.py) bounds the manifest by the
file (FREE_*). `save` writes the arrays themselves, no copy.

`save` writes atomically; `CheckpointManager` keeps the last few step-<n>.ckpt files of a run and
a copy of the best one.

Integers in the manifest are read as arbitrary-precision JSON numbers and must fit in 64 bits
(signed or unsigned, [-2^63, 2^64)); each field then has its own range.

The package, by concern: _format (constants, caps, errors, a target's state), _writer (the
manifest and bytes, to_bytes, state_hash, save), _checks (the header, checksum and manifest of
an untrusted file), _reader (entries against the target, the layout, the restore; from_bytes,
load, read_free), _atomic (temporaries, locks, fsync, rename) and _manager (CheckpointManager).
"""
from __future__ import annotations

import os
from typing import Any, BinaryIO, Optional

from ._atomic import _atomic_write as _atomic_write
from ._atomic import _write_small_file as _write_small_file
from ._checks import _file_entries as _file_entries
from ._format import _DTYPE_NAMES as _DTYPE_NAMES
from ._format import (
    ALIGN,
    BYTES_PER_VALUE,
    CHECKSUM,
    DTYPES,
    FREE_MARGIN,
    FREE_PER_TENSOR,
    FREE_VALUES,
    HEADER,
    MAGIC,
    MANIFEST_MARGIN,
    MAX_DEPTH,
    MAX_EXTRA,
    MAX_EXTRA_TEXT,
    MAX_MANIFEST,
    MAX_RANK,
    OPTIMIZER_ALLOWANCE,
    TREE_JSON_DEPTH,
    VERSION,
    VERSIONS,
    BadHeader,
    BadManifest,
    BadTensor,
    CheckpointError,
    Mismatch,
    TorchFile,
)
from ._format import _checksum as _checksum
from ._format import _has_surrogate as _has_surrogate
from ._format import _naming as _naming
from ._format import _set_checksum as _set_checksum
from ._format import _short as _short
from ._format import _source as _source
from ._manager import BEST_PENDING, METRIC_KEY, CheckpointManager
from ._reader import _as_view as _as_view
from ._reader import _check_layout as _check_layout
from ._reader import _read_file as _read_file
from ._reader import from_bytes, load, read_free
from ._writer import _chunks as _chunks
from ._writer import save, state_hash, to_bytes

__all__ = ["MAGIC", "VERSION", "VERSIONS", "CHECKSUM", "HEADER", "ALIGN", "MAX_MANIFEST",
           "MAX_DEPTH", "MAX_RANK", "MAX_EXTRA", "MANIFEST_MARGIN", "MAX_EXTRA_TEXT",
           "FREE_VALUES", "BYTES_PER_VALUE", "FREE_MARGIN", "FREE_PER_TENSOR", "TREE_JSON_DEPTH",
           "OPTIMIZER_ALLOWANCE", "DTYPES", "CheckpointError", "BadHeader", "BadManifest",
           "BadTensor", "Mismatch", "TorchFile", "to_bytes", "state_hash", "save", "from_bytes",
           "load", "read_free", "save_state_dict", "load_state_dict", "METRIC_KEY",
           "BEST_PENDING", "CheckpointManager"]


# -- onemodel.save and onemodel.load (the tree of state_files.py), under their old names ----
def save_state_dict(obj: Any, f: str | os.PathLike | BinaryIO) -> None:
    """onemodel.save: see state_files.save."""
    from ..state_files import save as save_object
    save_object(obj, f)


def load_state_dict(f: str | os.PathLike | BinaryIO, map_location: Any = None, *,
                    weights_only: Optional[bool] = True) -> Any:
    """onemodel.load: see state_files.load."""
    from ..state_files import load as load_object
    return load_object(f, map_location, weights_only=weights_only)
