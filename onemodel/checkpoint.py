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
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import stat
import struct
import sys
import tempfile
import warnings
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Mapping, Optional

import numpy as np

from ._kernels._crc import crc32c

try:  # the lock that tells a live save's temporary from an abandoned one (POSIX)
    import fcntl
except ImportError:  # Windows: no temporary is provably abandoned, so none is removed
    fcntl = None  # type: ignore[assignment]

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


# -- writing --------------------------------------------------------------------------------
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


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


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


def _checksum(chunks: Iterable[Any]) -> int:
    crc = 0
    for chunk in chunks:
        crc = crc32c(chunk, crc)
    return crc


def _set_checksum(chunks: list, checksum: int) -> None:
    chunks[0][HEADER.size - 8:HEADER.size] = checksum.to_bytes(8, "little")


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


def _temporary_name(path: str) -> re.Pattern:
    """The names mkstemp gives the temporaries of `path` (the prefix, 8 random characters)."""
    return re.compile(re.escape("." + os.path.basename(path) + ".") + r"[A-Za-z0-9_]{8}\.tmp")


def _locked_temporary(folder: str, path: str) -> tuple[int, str]:
    """A new temporary for `path`, open and (on POSIX) locked. Another save may take it for
    abandoned between its creation and the lock; then its name is gone and a new one is made."""
    while True:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                                   suffix=".tmp")
        if fcntl is None:
            return fd, tmp
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system without flock: no save can lock it to remove it
                return fd, tmp
            if os.path.samestat(os.stat(tmp), os.fstat(fd)):
                return fd, tmp
        except FileNotFoundError:  # removed before the lock: make another
            pass
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)


def _remove_abandoned(folder: str, path: str) -> None:
    """Removes the temporaries of `path` that no live save holds locked."""
    if fcntl is None:  # without the lock none is provably abandoned
        return
    pattern = _temporary_name(path)
    for entry in os.scandir(folder):
        if not pattern.fullmatch(entry.name):
            continue
        with contextlib.suppress(OSError):  # a live save's lock (BlockingIOError), or gone
            fd = os.open(entry.path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.path.samestat(os.stat(entry.path), os.fstat(fd)):
                    os.unlink(entry.path)
            finally:
                os.close(fd)


# Pieces a save writes, and a load reads, at a time: each one's checksum is taken while it is in
# cache (twice the speed of a separate pass over the whole state).
_PIECE = 1 << 20


def _write_piece(fd: int, view: memoryview, path: str) -> None:
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(f"checkpoint: writing {path} made no progress")
        view = view[written:]


def _write_all(fd: int, chunks: list, path: str) -> None:
    """Writes the chunks; for version 2, checksums each piece as it goes, then writes the header
    again with the checksum."""
    checksummed = HEADER.unpack_from(chunks[0])[1] == 2
    crc = 0
    for i, chunk in enumerate(chunks):
        view = memoryview(chunk)
        for start in range(0, len(view), _PIECE):
            piece = view[start:start + _PIECE]
            if checksummed:
                crc = crc32c(piece[HEADER.size:] if i == start == 0 else piece, crc)
            _write_piece(fd, piece, path)
    if checksummed:
        _set_checksum(chunks, crc)
        os.lseek(fd, 0, os.SEEK_SET)
        _write_piece(fd, memoryview(chunks[0])[:HEADER.size], path)


def _atomic_write(path: str, chunks: list) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = _locked_temporary(folder, path)
        try:
            try:
                _write_all(fd, chunks, path)
                os.fsync(fd)
                if fcntl is None:  # Windows renames no open file (and it holds no lock)
                    unlocked, fd = fd, -1
                    os.close(unlocked)
                # The lock is held through the rename: until then no other save removes tmp.
                os.replace(tmp, path)
            finally:
                if fd >= 0:
                    os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _remove_abandoned(folder, path)
        _fsync_folder(folder)
    except OSError as e:  # the caller's path, not the hidden temporary's name
        if e.errno is not None:
            e.filename, e.filename2 = path, None
        raise


def _fsync_folder(folder: str) -> None:
    if os.name != "posix":  # Windows cannot open a folder for fsync; the rename is durable
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- reading --------------------------------------------------------------------------------
_TORCH_FIX = ("load it with torch.load(f, weights_only=True) and convert it with "
              "onemodel.interop.load_torch_state_dict(model, state_dict)")


def _foreign(head: bytes) -> Optional[str]:
    """What a file that is not a checkpoint looks like, if it is what torch.save writes."""
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive (what torch.save writes)"
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "a pickle (what torch.save writes with _use_new_zipfile_serialization=False)"
    return None


def _check_frame(head: bytes | bytearray | memoryview, size: int) -> tuple[int, int, int, int]:
    """Checks the header (the input's first bytes, up to 64) against the input's real length
    `size`, before anything else is read; returns the version, the manifest's length, the data
    offset and the checksum field."""
    if size == 0:
        raise BadHeader("the checkpoint is empty (0 bytes)")
    foreign = _foreign(bytes(head[:4]))
    if foreign:
        raise TorchFile(f"the file is {foreign}, not a onemodel checkpoint: {_TORCH_FIX}")
    if size < HEADER.size:
        raise BadHeader(f"checkpoint of {size} bytes is shorter than the 64-byte header")
    magic, version, flags, m_off, m_len, d_off, d_len, f_len, checksum = HEADER.unpack_from(head)
    if magic != MAGIC:
        raise BadHeader(f"magic {magic!r} is not {MAGIC!r}")
    if version not in VERSIONS:
        raise BadHeader(f"version {version} is not one of {VERSIONS}")
    if flags != 0:
        raise BadHeader(f"flags {flags:#x} are not 0")
    if version == 1 and checksum != 0:
        raise BadHeader(f"reserved field {checksum:#x} is not 0")
    if checksum >> 32:
        raise BadHeader(f"checksum field {checksum:#x} is not a zero-extended CRC-32C")
    if f_len != size:
        raise BadHeader(f"file_length {f_len} differs from the real length {size}")
    if m_off != HEADER.size:
        raise BadHeader(f"manifest_offset {m_off} is not {HEADER.size}")
    if m_len > size - m_off:
        raise BadHeader(f"manifest of {m_len} bytes leaves the {size}-byte file")
    if d_off != _round_up(m_off + m_len) or d_off > size:
        raise BadHeader(f"data_offset {d_off} is not {_round_up(m_off + m_len)}, the manifest "
                        f"end rounded up to {ALIGN}, inside the {size}-byte file")
    if d_len != size - d_off:
        raise BadHeader(f"data_length {d_len} is not file length - data_offset "
                        f"({size - d_off})")
    return version, m_len, d_off, checksum


def _check_header(data: memoryview, actual: Optional[int] = None) -> tuple[int, int, int]:
    """Checks the header against the input's real length, then a version-2 checksum (`actual`:
    that of the bytes after the header, if already known); returns the version, the manifest's
    length and the data offset."""
    version, m_len, d_off, checksum = _check_frame(data[:HEADER.size], len(data))
    if version == 2:
        if actual is None:
            actual = crc32c(data[HEADER.size:])
        if actual != checksum:
            raise BadHeader(f"checksum {actual:#010x} of bytes 64..{len(data)} differs from "
                            f"the header's {checksum:#010x}: the file is corrupt")
    return version, m_len, d_off


# A JSON string (an unterminated one runs to the end). The loop is unrolled so that no two of
# its branches can match the same byte and the optional closing quote lets every match succeed:
# the scan never backtracks, and stays linear on any input without possessive quantifiers
# (Python 3.11+ only). It runs on the UTF-8 bytes: a multi-byte character never holds an ASCII
# byte.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


# The structure scan's piece: its temporaries (int64 string marks) stay a few MiB.
_SCAN_PIECE = 1 << 18


def _check_structure(raw: memoryview, max_depth: int, max_values: Optional[int]) -> None:
    """Before parsing, from the brackets and commas outside strings: the nesting depth (so the
    parser never recurses deeper; for any text that parses it is the parsed structure's own),
    and, given max_values, a bound on the count of JSON values (strings; commas and opening
    brackets, plus one), which bounds the memory the parser takes. Linear time, piece by piece
    over the text itself (the strings masked out by their spans), so the scan takes no copy of
    the manifest; counted without recursion."""
    text = np.frombuffer(raw, np.uint8)
    if max_values is not None:  # a string is a value too: this also bounds the spans below
        quotes = sum(int(np.count_nonzero(text[i:i + _SCAN_PIECE] == ord('"')))
                     for i in range(0, len(text), _SCAN_PIECE))
        if quotes // 2 > max_values:
            raise BadManifest(f"manifest holds about {quotes // 2} strings, more than the "
                              f"{max_values} JSON values a checkpoint of this size may hold")
    spans = np.array([m.span() for m in _STRING.finditer(raw)], np.int64).reshape(-1, 2)
    depth, values = 0, 1
    for start in range(0, len(text), _SCAN_PIECE):
        piece = text[start:start + _SCAN_PIECE]
        # the bytes inside strings, from +1 at each string's start and -1 at its end
        ends = np.clip(spans - start, 0, len(piece))
        marks = np.bincount(ends[:, 0], minlength=len(piece) + 1) - \
            np.bincount(ends[:, 1], minlength=len(piece) + 1)
        outside = np.cumsum(marks[:len(piece)]) == 0
        steps = _OPEN[piece] * outside
        commas = (piece == ord(",")) & outside
        levels = np.cumsum(steps, dtype=np.int32)
        if depth + int(levels.max()) > max_depth:
            raise BadManifest(f"manifest nests deeper than {max_depth} levels")
        depth += int(levels[-1])
        values += int(np.count_nonzero(commas)) + int(np.count_nonzero(steps == 1))
    if max_values is not None and values > max_values:
        raise BadManifest(f"manifest holds about {values} JSON values, more than the "
                          f"{max_values} a checkpoint of this size may hold")


def _reject_duplicates(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise BadManifest(f"duplicate key {_short(key)} in an object")
    return out


def _reject_constant(name: str) -> None:
    raise BadManifest(f"{name} is not a JSON number")


def _check_manifest_length(length: int, limit: int) -> None:
    """Before the manifest is read: its length against the target's bound."""
    limit = min(limit, MAX_MANIFEST)
    if length > limit:
        raise BadManifest(f"manifest of {length} bytes exceeds the limit of {limit} bytes "
                          "for this target")


def _parse_manifest(raw: memoryview, max_depth: int = MAX_DEPTH,
                    max_values: Optional[int] = None) -> dict:
    """The manifest's JSON object, its depth (and, given max_values, its size in values)
    checked before it is parsed."""
    if raw[:3] == b"\xef\xbb\xbf":
        raise BadManifest("manifest starts with a byte-order mark")
    _check_structure(raw, max_depth, max_values)
    try:
        text = str(raw, "utf-8", "strict")
    except UnicodeDecodeError as e:
        raise BadManifest(f"manifest is not valid UTF-8: {e.reason} at byte {e.start}") from None
    if max_values is not None and sys.getsizeof(text) > len(raw) + FREE_MARGIN:
        raise BadManifest("manifest takes more than its length once decoded (characters "
                          "beyond Latin-1 among many others)")
    try:
        value = json.loads(text, object_pairs_hook=_reject_duplicates,
                           parse_constant=_reject_constant)
    except BadManifest:
        raise
    except (ValueError, RecursionError) as e:  # JSONDecodeError, or an over-long integer
        raise BadManifest(f"manifest is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise BadManifest("manifest is not a JSON object")
    return value


def _integer(value: Any, where: str) -> int:
    if type(value) is not int:  # booleans and floats are not integers
        raise BadManifest(f"{where}: expected an integer, got {_short(value)}")
    if not _JSON_INT[0] <= value < _JSON_INT[1]:
        raise BadManifest(f"{where}: integer {_short(value)} does not fit in 64 bits")
    return value


def _field(obj: dict, key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise BadManifest(f"{where}: missing field {key!r}")
    value = obj[key]
    if kind is int:
        return _integer(value, f"{where}.{key}")
    if not isinstance(value, kind):
        raise BadManifest(f"{where}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    if isinstance(value, str) and _has_surrogate(value):
        raise BadManifest(f"{where}.{key}: string holds a lone surrogate")
    return value


def _only_fields(obj: Any, keys: tuple, where: str) -> dict:
    if not isinstance(obj, dict):
        raise BadManifest(f"{where}: expected an object")
    unknown = [k for k in obj if k not in keys]
    if unknown:
        raise BadManifest(f"{where}: unknown field {_short(unknown[0])}")
    return obj


_ENTRY_FIELDS = ("name", "dtype", "shape", "offset", "length")


def _extent(shape: list[int], itemsize: int) -> int:
    """itemsize times the product of the nonzero dimensions (each below 2^62), capped at 2^63:
    numpy refuses a shape whose extent reaches 2^63 even when a zero dimension empties it, so
    this, not the byte size, is what must fit. The product stops growing once it passes 2^63,
    so a hostile shape costs no big-number arithmetic."""
    extent = itemsize
    for d in shape:
        if d:
            extent *= d
            if extent >= 1 << 63:
                return 1 << 63
    return extent


def _byte_size(shape: list[int], itemsize: int) -> int:
    """Bytes of a validated shape: 0 with a zero dimension, else its extent."""
    return 0 if 0 in shape else _extent(shape, itemsize)


def _tensor_entries(value: Any, where: str) -> list[dict]:
    if not isinstance(value, list):
        raise BadManifest(f"{where}: expected a list of tensor entries")
    out = []
    for i, raw in enumerate(value):
        at = f"{where}[{i}]"
        entry = _only_fields(raw, _ENTRY_FIELDS, at)
        name = _field(entry, "name", str, at)
        dtype = _field(entry, "dtype", str, at)
        if dtype not in DTYPES:
            raise BadManifest(f"{at}.dtype: unknown dtype {_short(dtype)}")
        shape = _field(entry, "shape", list, at)
        if len(shape) > MAX_RANK:
            raise BadManifest(f"{at}.shape: {len(shape)} dimensions, more than {MAX_RANK}")
        for d in shape:
            d = _integer(d, f"{at}.shape")
            if d < 0:
                raise BadManifest(f"{at}.shape: negative dimension {d}")
            if d >= 1 << 62:
                raise BadManifest(f"{at}.shape: dimension {d} is oversized")
        if _extent(shape, DTYPES[dtype].itemsize) >= 1 << 63:
            raise BadManifest(f"{at}.shape: {_short(shape)} spans 2^63 bytes or more (its "
                              "nonzero dimensions count, as numpy's)")
        out.append({"name": name, "dtype": dtype, "shape": shape,
                    "offset": _field(entry, "offset", int, at),
                    "length": _field(entry, "length", int, at)})
    return out


def _check_restorable(name: str, value: float, where: str) -> None:
    """The settings a load restores: a learning rate and a weight decay, finite and >= 0 (a
    schedule may have brought the rate to 0)."""
    if name in ("lr", "weight_decay") and not (math.isfinite(value) and value >= 0):
        raise BadManifest(f"{where}: {name} {value!r} is not a finite number >= 0")


def _validate_manifest(m: dict, version: int) -> dict:
    """The manifest's shape and ranges, for a file of this header version."""
    fields = ("format", "version") + (("checksum",) if version == 2 else ()) + (
        "model", "optimizer", "extra", "tree")
    _only_fields(m, fields, "manifest")
    if _field(m, "format", str, "manifest") != "onemodel-checkpoint":
        raise BadManifest(f"manifest.format {_short(m['format'])} is not "
                          "'onemodel-checkpoint'")
    if _field(m, "version", int, "manifest") != version:
        raise BadManifest(f"manifest.version {m['version']} is not the header's {version}")
    if version == 2 and _field(m, "checksum", str, "manifest") != CHECKSUM:
        raise BadManifest(f"manifest.checksum {_short(m['checksum'])} is not {CHECKSUM!r}")
    out: dict[str, Any] = {"model": _tensor_entries(_field(m, "model", list, "manifest"),
                                                    "model")}
    if "optimizer" in m:
        o = _only_fields(m["optimizer"], ("kind", "step", "hyper", "state"), "optimizer")
        kind = _field(o, "kind", str, "optimizer")
        step = _field(o, "step", int, "optimizer")
        if not 0 <= step < _I64[1]:
            raise BadManifest(f"optimizer.step {step} is not in [0, 2^63)")
        hyper = []
        for i, h in enumerate(_field(o, "hyper", list, "optimizer")):
            at = f"optimizer.hyper[{i}]"
            h = _only_fields(h, ("name", "bits"), at)
            name = _field(h, "name", str, at)
            bits = _field(h, "bits", int, at)
            if not 0 <= bits < 1 << 32:
                raise BadManifest(f"{at}.bits: {bits} is not a 32-bit pattern")
            _check_restorable(name, _value_of(bits), at)
            hyper.append((name, bits))
        out["optimizer"] = {"kind": kind, "step": step, "hyper": hyper,
                            "state": _tensor_entries(_field(o, "state", list, "optimizer"),
                                                     "optimizer.state")}
    extra = {}
    saved_extra = _field(m, "extra", list, "manifest")
    if len(saved_extra) > MAX_EXTRA:
        raise BadManifest(f"extra holds {len(saved_extra)} entries, more than {MAX_EXTRA}")
    for i, e in enumerate(saved_extra):
        at = f"extra[{i}]"
        e = _only_fields(e, ("key", "value"), at)
        key = _field(e, "key", str, at)
        if key in extra:
            raise BadManifest(f"{at}: duplicate key {_short(key)}")
        value = _field(e, "value", int, at)
        if not _I64[0] <= value < _I64[1]:
            raise BadManifest(f"{at}.value: {value} is not in [-2^63, 2^63)")
        extra[key] = value
    out["extra"] = extra
    if "tree" in m:  # a node (an object); checked whole by state_files, its one reader
        out["tree"] = _field(m, "tree", dict, "manifest")
    return out


def _describe(name: Any, dtype: str, shape: list) -> str:
    return f"{_short(name)} {dtype} {_short(shape)}"


def _match(entries: list[dict], state: list[tuple[str, np.ndarray]], what: str) -> None:
    """Names, dtypes and shapes in order; shapes are compared, never sized."""
    own = [(name, _dtype_name(name, arr), list(arr.shape)) for name, arr in state]
    saved = [(e["name"], e["dtype"], e["shape"]) for e in entries]
    if saved == own:
        return
    first = next((i for i, (a, b) in enumerate(zip(saved, own)) if a != b), None)
    parts = []
    if first is not None:
        parts.append(f"tensor {first} is {_describe(*saved[first])} in the file, "
                     f"{_describe(*own[first])} in the target")
    saved_names, own_names = {e[0] for e in saved}, {e[0] for e in own}
    missing = [n for n, _, _ in own if n not in saved_names]
    unexpected = [n for n, _, _ in saved if n not in own_names]
    if missing:
        parts.append(f"missing from the file: {_short(missing)}")
    if unexpected:
        parts.append(f"not in the target: {_short(unexpected)}")
    if len(saved) != len(own):
        parts.append(f"the file has {len(saved)} tensors, the target {len(own)}")
    raise Mismatch(f"{what}: " + "; ".join(parts))


def _file_entries(manifest: dict) -> list[dict]:
    """Every tensor entry of a manifest, in file order."""
    return manifest["model"] + (manifest["optimizer"]["state"] if "optimizer" in manifest
                                else [])


def _check_layout(entries: list[dict], data: memoryview, m_end: int, d_off: int) -> None:
    """The writer's layout: each entry at the first multiple of 64 at or after the end of the
    one before, its length the shape's size, padding zero, nothing after the last tensor."""
    d_len = len(data) - d_off
    if any(data[m_end:d_off]):  # under 64 bytes
        raise BadTensor(f"padding after the manifest (bytes {m_end}..{d_off}) is not zero")
    end = 0
    for e in entries:
        where = f"tensor {_short(e['name'])}"
        # The shape was compared with the target's (or, for an optimizer section a model-only
        # load skips, bounded to 2^63 bytes): its size is cheap and small.
        expected = _byte_size(e["shape"], DTYPES[e["dtype"]].itemsize)
        if e["length"] != expected:
            raise BadTensor(f"{where}: length {e['length']} is not the shape's {expected} bytes")
        start = _round_up(end)
        if e["offset"] != start:
            raise BadTensor(f"{where}: offset {e['offset']} is not {start}, the first multiple "
                            f"of {ALIGN} at or after the end of the tensor before it")
        if start + expected > d_len:
            raise BadTensor(f"{where}: bytes [{start}, {start + expected}) leave the data "
                            f"region of {d_len} bytes")
        if any(data[d_off + end:d_off + start]):
            raise BadTensor(f"{where}: the padding before it is not zero")
        end = start + expected
    if end != d_len:
        raise BadTensor(f"the data region of {d_len} bytes runs past the last tensor's end at "
                        f"{end}")


# A bound on the writer's JSON for one tensor entry beyond its name and dimensions (field
# names, dtype, 20-digit offset and length), for the manifest-wide part, and for one
# hyper-parameter; a name character takes at most 6 bytes (a \u escape).
_ENTRY_BOUND, _MANIFEST_BOUND, _HYPER_BOUND = 128, 256, 64


def _manifest_limit(state: list[tuple[str, np.ndarray]], optimizer: Any) -> int:
    """Twice a bound on the manifest this target writes, plus the margin (computed from the
    names and ranks, so no JSON is encoded for it)."""
    own = _MANIFEST_BOUND + sum(_ENTRY_BOUND + 6 * len(name) + 21 * arr.ndim
                                for name, arr in state)
    if optimizer is None:
        own *= OPTIMIZER_ALLOWANCE
    else:
        own += 6 * len(type(optimizer).__name__) + sum(
            _HYPER_BOUND + 6 * len(name) for name in optimizer.hyper_parameters())
    return 2 * own + MANIFEST_MARGIN


def _as_view(data: Any) -> memoryview:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"checkpoint: expected bytes, got {type(data).__name__}")
    view = memoryview(data)
    return view.cast("B") if view.c_contiguous else memoryview(view.tobytes())


def _restore(data: memoryview, checksum: Optional[int], model: Any, optimizer: Any) -> dict:
    """Checks header, checksum, manifest, entries and layout in that order, then restores.
    `checksum` is the CRC-32C of the bytes after the header if the reader took it already."""
    version, m_len, d_off = _check_header(data, checksum)
    model_state = _model_state(model)
    opt_state = _optimizer_state(optimizer) if optimizer is not None else []
    if m_len > MANIFEST_MARGIN:  # every target's bound exceeds the margin
        _check_manifest_length(m_len, _manifest_limit(model_state + opt_state, optimizer))
    manifest = _validate_manifest(_parse_manifest(data[HEADER.size:HEADER.size + m_len]),
                                  version)
    if "tree" in manifest:
        raise Mismatch("the file holds an object written by onemodel.save, not a training "
                       "state: read it with onemodel.load")
    _match(manifest["model"], model_state, "model")
    entries = list(manifest["model"])
    if optimizer is not None:
        if "optimizer" not in manifest:
            raise Mismatch("optimizer state was asked for, but the file holds a model only")
        saved = manifest["optimizer"]
        if saved["kind"] != type(optimizer).__name__:
            raise Mismatch(f"optimizer kind {_short(saved['kind'])} in the file, "
                           f"{type(optimizer).__name__!r} in the target")
        hyper = _match_hyper(saved["hyper"], optimizer)
        _match(saved["state"], opt_state, "optimizer state")
        entries += saved["state"]
    _check_layout(_file_entries(manifest), data, HEADER.size + m_len, d_off)

    # Every check passed. The hyper-parameters go first: an optimizer may still refuse a value
    # (its own rules), and then nothing else has changed yet.
    if optimizer is not None:
        _load_hyper(optimizer, hyper)
    for entry, (_, arr) in zip(entries, model_state + opt_state):
        if arr.size:
            arr[...] = np.frombuffer(data, DTYPES[entry["dtype"]], arr.size,
                                     d_off + entry["offset"]).reshape(arr.shape)
    for _, t in model._named_state():
        t._version += 1
    if optimizer is not None:
        optimizer.step_count = manifest["optimizer"]["step"]
    return dict(manifest["extra"])


def from_bytes(data: bytes, model: Any, optimizer: Any = None) -> dict:
    """Restores model (and optimizer) from checkpoint bytes; returns the extra integers.

    Every check runs before anything is changed; errors are CheckpointError subclasses only.
    """
    return _restore(_as_view(data), None, model, optimizer)


def _match_hyper(saved: list[tuple[str, int]], optimizer: Any) -> dict[str, float]:
    """Checks names and fixed settings; returns the saved values, each one restorable."""
    own = [(h["name"], h["bits"]) for h in _hyper_bits(optimizer)]
    names = [n for n, _ in saved]
    if names != [n for n, _ in own]:
        raise Mismatch(f"optimizer hyper-parameters {_short(names)} in the file, "
                       f"{[n for n, _ in own]} in the target")
    fixed = set(optimizer.fixed_hyper_parameters)
    values = {}
    for (name, bits), (_, own_bits) in zip(saved, own):
        if name in fixed and bits != own_bits:
            raise Mismatch(f"optimizer setting {name!r} differs: bits {bits:#010x} in the file, "
                           f"{own_bits:#010x} in the target")
        values[name] = _value_of(bits)
    return values


def _load_hyper(optimizer: Any, values: dict[str, float]) -> None:
    before = optimizer.hyper_parameters()
    try:
        optimizer.load_hyper_parameters(values)
    except (ValueError, TypeError) as e:
        optimizer.load_hyper_parameters(before)
        raise BadManifest(f"optimizer refuses the saved hyper-parameters: {e}") from None


_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def _check_regular(mode: int, path: str) -> None:
    if not stat.S_ISREG(mode):
        what = next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")
        raise BadHeader(f"{path} is {what}: a checkpoint is read from a regular file")


def _read_file(path: str) -> tuple[memoryview, Optional[int]]:
    """The whole of a regular file and, for a version-2 header, the CRC-32C of its bytes after
    the header, taken piece by piece as they arrive (in cache). A FIFO or device is refused
    before it is opened for reading (opening a FIFO would block), and again by the open
    descriptor's own type. The header is read and checked against the file's size first, so a
    file that is no checkpoint costs 64 bytes of reading and nothing is allocated for it."""
    _check_regular(os.stat(path).st_mode, path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb", buffering=0) as f:
        info = os.fstat(fd)
        _check_regular(info.st_mode, path)
        size = info.st_size
        head = bytearray(min(size, HEADER.size))
        _read_exactly(f, memoryview(head), 0, size)
        version = _check_frame(head, size)[0]
        buf = np.empty(size, np.uint8)  # not zero-filled: every byte is read over
        view = memoryview(buf)
        view[:len(head)] = head
        crc = 0
        for start in range(len(head), size, _PIECE):
            piece = view[start:start + _PIECE]
            _read_exactly(f, piece, start, size)
            if version == 2:
                crc = crc32c(piece, crc)
        if f.read(1):
            raise BadHeader(f"the file grew past its length of {size} bytes while being read")
    return view, crc if version == 2 else None


def _read_exactly(f: Any, view: memoryview, start: int, size: int) -> None:
    """Fills view from f (at offset `start` of a file of `size` bytes)."""
    done = 0
    while done < len(view):
        n = f.readinto(view[done:])
        if not n:
            raise BadHeader(f"the file ended at byte {start + done}, before its length of "
                            f"{size} bytes: it changed while being read")
        done += n


def load(path: str | os.PathLike, model: Any, optimizer: Any = None) -> dict:
    """Restores as from_bytes from the whole file, read first; returns the extra integers."""
    path = os.fspath(path)
    with _naming(path):
        return _restore(*_read_file(path), model, optimizer)


def read_free(data: memoryview, checksum: Optional[int]) -> tuple[dict, int, int]:
    """The reader with no target (onemodel.load, the manager's best.ckpt): header, checksum
    and manifest checked, the manifest bounded by the file (FREE_* below) before and after it
    is parsed; returns the validated manifest, the manifest's length and the data offset."""
    version, m_len, d_off = _check_header(data, checksum)
    _check_manifest_length(m_len, MAX_MANIFEST)
    manifest = _validate_manifest(_parse_manifest(
        data[HEADER.size:HEADER.size + m_len], TREE_JSON_DEPTH, _free_values(len(data))),
        version)
    _check_free_length(m_len, len(_file_entries(manifest)))
    return manifest, m_len, d_off


def _check_free_length(m_len: int, tensors: int) -> None:
    limit = FREE_MARGIN + FREE_PER_TENSOR * tensors
    if m_len > limit:
        raise BadManifest(f"manifest of {m_len} bytes exceeds {limit} bytes, the bound for "
                          f"{tensors} tensors")


def _free_values(size: int) -> int:
    """The JSON values a file of `size` bytes may hold in its manifest (read with no target)."""
    return FREE_VALUES + size // BYTES_PER_VALUE


def _extra_of(data: memoryview, checksum: Optional[int]) -> dict:
    """The extra integers of checkpoint bytes, header, checksum and manifest checked, no
    target."""
    return read_free(data, checksum)[0]["extra"]


# -- onemodel.save and onemodel.load (the tree of state_files.py), under their old names ----
def save_state_dict(obj: Any, f: str | os.PathLike | BinaryIO) -> None:
    """onemodel.save: see state_files.save."""
    from .state_files import save as save_object
    save_object(obj, f)


def load_state_dict(f: str | os.PathLike | BinaryIO, map_location: Any = None, *,
                    weights_only: Optional[bool] = True) -> Any:
    """onemodel.load: see state_files.load."""
    from .state_files import load as load_object
    return load_object(f, map_location, weights_only=weights_only)


# -- rotation -------------------------------------------------------------------------------
_STEP_FILE = re.compile(r"step-(\d{8,})\.ckpt")
METRIC_KEY = "metric.f64"


def _metric_bits(metric: float) -> int:
    """A float64 metric as the signed 64-bit integer of its bit pattern (extra holds integers)."""
    return struct.unpack("<q", struct.pack("<d", metric))[0]


def _metric_of(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


BEST_PENDING = "best.pending"


def _write_small_file(path: str, data: bytes) -> None:
    """`data` at `path` whole or not at all: a temporary beside it (one writer a folder: the
    next write replaces one a kill left), fsynced, renamed, the folder fsynced."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(os.path.dirname(os.path.abspath(path)))


def _warn(message: str) -> None:
    warnings.warn(f"CheckpointManager: {message}", RuntimeWarning, stacklevel=3)


class CheckpointManager:
    """Saves step-<step:08d>.ckpt files in a folder, keeps the last `keep_last`, and copies a
    checkpoint to best.ckpt whenever its metric improves on the best so far.

    The metric travels in the file's extra (key "metric.f64", the float64 bit pattern), so a
    manager opened on an existing folder knows the best metric from best.ckpt. Opening reads
    nothing: best.ckpt is read the first time the best is needed (`best_metric`, `save`,
    `recover`); one that cannot be read counts as none (the next metric replaces it).

    best.ckpt never disagrees with the checkpoints, whatever instant a process is killed at
    (docs/spec/clarifications.md, "Run folder"): a save whose metric improves on the best first
    writes best.pending, naming its checkpoint, atomically; then the checkpoint; then best.ckpt;
    then removes best.pending. `recover()` (called before the first save of a manager, by
    `best_metric` and by the Trainer's resume) finishes what a killed save began: if best.pending
    names a checkpoint that exists (renamed into place, so complete) it is copied to best.ckpt;
    best.pending goes either way. Rotation happens only in a save, after that recovery, so the
    checkpoint named is still there.
    """

    def __init__(self, folder: str | os.PathLike, keep_last: int = 3) -> None:
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
            raise ValueError(f"CheckpointManager: keep_last must be an integer >= 1, "
                             f"got {keep_last!r}")
        self.folder = os.fspath(folder)
        self.keep_last = keep_last
        os.makedirs(self.folder, exist_ok=True)
        self.best_path = os.path.join(self.folder, "best.ckpt")
        self._pending_path = os.path.join(self.folder, BEST_PENDING)
        self._best: Optional[float] = None
        self._recovered = False

    @property
    def best_metric(self) -> Optional[float]:
        """The metric of best.ckpt (None: no readable best yet)."""
        self.recover()
        return self._best

    def recover(self, size_hint: int = 0) -> None:
        """Finishes a best.ckpt update that a killed process began (see the class notes) and
        reads the best metric; once per manager. best.ckpt is a copy of a checkpoint of the
        run, so one over twice the size of the largest checkpoint kept (or `size_hint`, the
        size of one being saved) plus MANIFEST_MARGIN is not read (a bad file, counted as
        none): a hostile one costs no more than the run's own."""
        if self._recovered:
            return
        try:
            with open(self._pending_path, "rb") as f:
                named = f.read(256).decode("ascii", "replace").strip()
        except FileNotFoundError:
            named = None
        if named is not None:
            self._finish_best(named)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._pending_path)
        sizes = [size_hint]
        for _, path in self._steps():
            with contextlib.suppress(OSError):
                sizes.append(os.stat(path).st_size)
        self._best = self._read_best_metric(2 * max(sizes) + MANIFEST_MARGIN)
        self._recovered = True

    def _finish_best(self, named: str) -> None:
        source = os.path.join(self.folder, named)
        if not _STEP_FILE.fullmatch(named):
            _warn(f"{self._pending_path} names no checkpoint ({named!r}): ignored")
            return
        try:
            data, crc = _read_file(source)
            _extra_of(data, crc)  # the header, checksum and manifest intact
        except FileNotFoundError:
            return  # killed before the checkpoint was renamed into place: best.ckpt stands
        except (CheckpointError, OSError) as e:
            _warn(f"{source} cannot be read ({e}): best.ckpt is left as it is")
            return
        _atomic_write(self.best_path, [bytearray(data)])

    def _read_best_metric(self, limit: int) -> Optional[float]:
        try:
            if os.stat(self.best_path).st_size > limit:
                return None
            bits = _extra_of(*_read_file(self.best_path)).get(METRIC_KEY)
        except (CheckpointError, OSError):
            return None  # none yet, or one that the next metric replaces
        return None if bits is None else _metric_of(bits)

    def _steps(self) -> list[tuple[int, str]]:
        found = []
        for name in os.listdir(self.folder):
            match = _STEP_FILE.fullmatch(name)
            if match:
                found.append((int(match.group(1)), os.path.join(self.folder, name)))
        return sorted(found)

    def latest(self) -> Optional[str]:
        """The path of the highest-step checkpoint, or None."""
        steps = self._steps()
        return steps[-1][1] if steps else None

    def restore_newest(self, load: Callable[[str], Any]) -> Optional[tuple[str, Any]]:
        """Calls `load(path)` on the checkpoints, highest step first, until one succeeds;
        returns (its path, what load returned), or None when the folder holds none. A file that
        is corrupt (any CheckpointError but Mismatch, or an OSError reading it) is skipped with
        a warning naming it; a Mismatch (an intact file of another model) propagates, and so
        does the oldest file's error when none can be read (never a silent restart)."""
        steps = self._steps()
        for k, (_, path) in enumerate(reversed(steps)):
            try:
                return path, load(path)
            except Mismatch:
                raise
            except (CheckpointError, OSError) as e:
                if k == len(steps) - 1:
                    raise
                _warn(f"{path} cannot be read ({type(e).__name__}: {e}): resuming from an "
                      "older checkpoint")
        return None

    def save(self, step: int, model: Any, optimizer: Any = None, extra: Optional[dict] = None,
             metric: Optional[float] = None, higher_is_better: bool = True) -> str:
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"CheckpointManager.save: step must be an integer >= 0, "
                             f"got {step!r}")
        extra = dict(extra or {})
        if METRIC_KEY in extra:
            raise ValueError(f"CheckpointManager.save: extra key {METRIC_KEY!r} is reserved")
        if metric is not None:
            if isinstance(metric, bool) or not isinstance(metric, (int, float, np.number)) \
                    or not math.isfinite(metric):
                raise ValueError(f"CheckpointManager.save: metric must be a finite number, "
                                 f"got {metric!r}")
            metric = float(metric)
            extra[METRIC_KEY] = _metric_bits(metric)
        path = os.path.join(self.folder, f"step-{int(step):08d}.ckpt")
        chunks = _chunks_for(path, model, optimizer, extra)
        self.recover(sum(memoryview(c).nbytes for c in chunks))
        improves = metric is not None and (self._best is None or (
            metric > self._best if higher_is_better else metric < self._best))
        if improves:
            _write_small_file(self._pending_path, os.path.basename(path).encode() + b"\n")
        _atomic_write(path, chunks)
        if improves:
            _atomic_write(self.best_path, chunks)
            self._best = metric
            os.unlink(self._pending_path)
        # The oldest beyond keep_last go; the file just written stays even if its step is lower.
        others = [p for _, p in self._steps() if p != path]
        for old in others[:max(0, len(others) - (self.keep_last - 1))]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old)
        return path
