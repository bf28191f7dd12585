"""The checks on an untrusted file that need no target: the header against the input's
length (a torch.save file named as such), the version-2 checksum, and the manifest: its JSON
structure (depth, count of values) bounded before it is parsed, then its fields and ranges.
Also the manifest bounds of the reader with no target (FREE_*)."""
from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Optional

import numpy as np

from .._kernels._crc import crc32c
from ._format import (
    _I64,
    _JSON_INT,
    ALIGN,
    BYTES_PER_VALUE,
    CHECKSUM,
    DTYPES,
    FREE_MARGIN,
    FREE_PER_TENSOR,
    FREE_VALUES,
    HEADER,
    MAGIC,
    MAX_DEPTH,
    MAX_EXTRA,
    MAX_MANIFEST,
    MAX_RANK,
    VERSIONS,
    BadHeader,
    BadManifest,
    TorchFile,
    _has_surrogate,
    _round_up,
    _short,
    _value_of,
)

# -- the header -----------------------------------------------------------------------------
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


def _file_entries(manifest: dict) -> list[dict]:
    """Every tensor entry of a manifest, in file order."""
    return manifest["model"] + (manifest["optimizer"]["state"] if "optimizer" in manifest
                                else [])


def _check_free_length(m_len: int, tensors: int) -> None:
    limit = FREE_MARGIN + FREE_PER_TENSOR * tensors
    if m_len > limit:
        raise BadManifest(f"manifest of {m_len} bytes exceeds {limit} bytes, the bound for "
                          f"{tensors} tensors")


def _free_values(size: int) -> int:
    """The JSON values a file of `size` bytes may hold in its manifest (read with no target)."""
    return FREE_VALUES + size // BYTES_PER_VALUE
