"""The reader: a checkpoint's entries against its target (names, dtypes, shapes, the
optimizer's kind and settings), the writer's layout, and the restore once every check passed;
reading a regular file whole (its checksum taken as it arrives); from_bytes, load, and read_free,
the reader with no target."""
from __future__ import annotations

import os
import stat
from typing import Any, Optional

import numpy as np

from .._kernels._crc import crc32c
from ._checks import (
    _byte_size,
    _check_frame,
    _check_free_length,
    _check_header,
    _check_manifest_length,
    _file_entries,
    _free_values,
    _parse_manifest,
    _validate_manifest,
)
from ._format import (
    _PIECE,
    ALIGN,
    DTYPES,
    HEADER,
    MANIFEST_MARGIN,
    MAX_MANIFEST,
    OPTIMIZER_ALLOWANCE,
    TREE_JSON_DEPTH,
    BadHeader,
    BadManifest,
    BadTensor,
    Mismatch,
    _dtype_name,
    _hyper_bits,
    _model_state,
    _naming,
    _optimizer_state,
    _round_up,
    _short,
    _value_of,
)


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


def _extra_of(data: memoryview, checksum: Optional[int]) -> dict:
    """The extra integers of checkpoint bytes, header, checksum and manifest checked, no
    target."""
    return read_free(data, checksum)[0]["extra"]
