"""The writer: the manifest and the bytes of a training state (checked by the reader's own
checks first: a state the reader would refuse is a ValueError), to_bytes, state_hash, and save
through an atomic write."""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable, Optional

import numpy as np

from ._atomic import _atomic_write
from ._checks import (
    _check_free_length,
    _file_entries,
    _free_values,
    _parse_manifest,
    _validate_manifest,
)
from ._format import (
    _I64,
    CHECKSUM,
    DTYPES,
    HEADER,
    MAGIC,
    MAX_EXTRA_TEXT,
    TREE_JSON_DEPTH,
    VERSION,
    VERSIONS,
    BadManifest,
    _checksum,
    _dtype_name,
    _has_surrogate,
    _hyper_bits,
    _model_state,
    _optimizer_state,
    _round_up,
    _set_checksum,
    _short,
)


def _check_extra(extra: Optional[dict]) -> list[tuple[str, int]]:
    items = []
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or _has_surrogate(key):
            raise ValueError(f"checkpoint: extra key {_short(key)} is not a string of "
                             "Unicode scalar values")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or not _I64[0] <= int(value) < _I64[1]:
            raise ValueError(f"checkpoint: extra[{key!r}] = {_short(value)} is not a 64-bit "
                             "integer")
        items.append((key, int(value)))
    # Ordinal order of the keys: by UTF-16 code units, as the format's first readers sort.
    return sorted(items, key=lambda kv: kv[0].encode("utf-16-be"))


def _entries(state: Iterable[tuple[str, np.ndarray]], start: int) -> tuple[list[dict], int]:
    entries, offset = [], start
    for name, arr in state:
        offset = _round_up(offset)
        entries.append({"name": name, "dtype": _dtype_name(name, arr),
                        "shape": list(arr.shape), "offset": offset, "length": arr.nbytes})
        offset += arr.nbytes
    return entries, offset


def _manifest(model: Any, optimizer: Any, extra: list[tuple[str, int]], version: int,
              tree: Any = None) -> tuple[dict, list]:
    model_state = _model_state(model)
    model_entries, end = _entries(model_state, 0)
    manifest: dict[str, Any] = {"format": "onemodel-checkpoint", "version": version}
    if version == 2:
        manifest["checksum"] = CHECKSUM
    manifest["model"] = model_entries
    arrays = [a for _, a in model_state]
    if optimizer is not None:
        opt_state = _optimizer_state(optimizer)
        opt_entries, end = _entries(opt_state, end)
        manifest["optimizer"] = {"kind": type(optimizer).__name__,
                                 "step": int(optimizer.step_count),
                                 "hyper": _hyper_bits(optimizer), "state": opt_entries}
        arrays += [a for _, a in opt_state]
    manifest["extra"] = [{"key": k, "value": v} for k, v in extra]
    if tree is not None:
        manifest["tree"] = tree
    return manifest, arrays


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _chunks(model: Any, optimizer: Any, extra: Optional[dict], version: int,
            tree: Any = None) -> list:
    """The checkpoint as a list of byte strings and array views, in file order: the header and
    manifest (one bytearray), then each tensor after its alignment padding. The arrays are not
    copied. A version-2 header's checksum is left 0: _set_checksum fills it in. `tree` is
    onemodel.save's structure (state_files.py), its tensors the model entries."""
    if version not in VERSIONS:
        raise ValueError(f"checkpoint: version {version!r} is not one of {VERSIONS}")
    manifest, arrays = _manifest(model, optimizer, _check_extra(extra), version, tree)
    try:  # the reader's own checks: the writer never writes what it would refuse
        _validate_manifest(manifest, version)
    except BadManifest as e:
        raise ValueError(f"checkpoint: the state cannot be read back: {e}") from None
    if len(_encode(manifest["extra"])) > MAX_EXTRA_TEXT:
        raise ValueError(f"checkpoint: extra takes more than {MAX_EXTRA_TEXT} bytes of "
                         "manifest; a reader would refuse it")
    text = _encode(manifest)
    data_offset = _round_up(HEADER.size + len(text))
    entries = _file_entries(manifest)
    data_length = entries[-1]["offset"] + entries[-1]["length"] if entries else 0
    try:  # and the bounds of the reader with no target (onemodel.load)
        _parse_manifest(memoryview(text), TREE_JSON_DEPTH, _free_values(data_offset + data_length))
        _check_free_length(len(text), len(entries))
    except BadManifest as e:
        raise ValueError(f"checkpoint: onemodel.load would refuse the file: {e}") from None
    head = bytearray(data_offset)
    HEADER.pack_into(head, 0, MAGIC, version, 0, HEADER.size, len(text), data_offset,
                     data_length, data_offset + data_length, 0)
    head[HEADER.size:HEADER.size + len(text)] = text
    chunks: list = [head]
    end = 0
    for entry, arr in zip(entries, arrays):
        if entry["offset"] > end:
            chunks.append(bytes(entry["offset"] - end))
        if arr.nbytes:
            raw = np.ascontiguousarray(arr, dtype=DTYPES[entry["dtype"]])
            chunks.append(memoryview(raw.reshape(-1)).cast("B"))
        end = entry["offset"] + entry["length"]
    return chunks


def to_bytes(model: Any, optimizer: Any = None, extra: Optional[dict] = None,
             version: int = VERSION) -> bytes:
    """The checkpoint of the whole training state; the same state gives the same bytes."""
    chunks = _chunks(model, optimizer, extra, version)
    if version == 2:
        _set_checksum(chunks, _checksum([memoryview(chunks[0])[HEADER.size:], *chunks[1:]]))
    return b"".join(chunks)


def state_hash(model: Any, optimizer: Any = None) -> str:
    """Hex SHA-256 of the version-1 checkpoint bytes of this state (hashed piece by piece, no
    copy), so the checksum of version 2 never moves it."""
    sha = hashlib.sha256()
    for chunk in _chunks(model, optimizer, None, 1):
        sha.update(chunk)
    return sha.hexdigest()


def save(path: str | os.PathLike, model: Any, optimizer: Any = None,
         extra: Optional[dict] = None) -> None:
    """Writes atomically: a temporary file in the same folder, fsync, rename, fsync the folder.

    A state the reader would refuse is a ValueError before anything is written. A failure
    before the rename leaves the previous file intact and no temporary file behind; the OSError
    itself propagates (errno intact, naming `path`), unwrapped. Only the folder fsync comes
    after the rename: if it fails, the new checkpoint is complete at `path` but may not survive
    a power cut, and its OSError propagates too. Concurrent saves of one path all succeed, the
    last rename's file winning whole. Temporaries left by a process killed while saving to
    `path` are removed by the next successful save (on POSIX: a live save holds an flock on its
    temporary, an abandoned one is unlocked). The tensors are written from the arrays
    themselves, no copy.
    """
    path = os.fspath(path)
    _atomic_write(path, _chunks_for(path, model, optimizer, extra))


def _chunks_for(path: str, model: Any, optimizer: Any, extra: Optional[dict]) -> list:
    """The chunks `save` writes to `path`; a refusal names it."""
    try:
        return _chunks(model, optimizer, extra, VERSION)
    except ValueError as e:
        raise ValueError(f"saving {path}: {e}") from None
