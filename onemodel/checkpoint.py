"""Checkpoints: the byte format of training.txt section 6, hostile-input checks, atomic writes.

Layout (little endian):
    0             64-byte header: b"ONEMCKPT", u32 version = 1, u32 flags = 0,
                  u64 manifest_offset = 64, u64 manifest_length, u64 data_offset,
                  u64 data_length, u64 file_length, u64 reserved = 0
    64            manifest: compact UTF-8 JSON, fields in the spec's order
    data_offset   data region (data_offset = 64 + manifest_length rounded up to 64); each tensor
                  at a 64-aligned offset from its start, raw little-endian, row-major; floats by
                  bit pattern, so NaN payloads and signed zeros survive.

Extension: besides f32, i32 and i64, the dtype "u8" holds packed optimizer state (SR4's 4-bit
accumulators, two per byte). A file is untrusted: `from_bytes` checks the header (BadHeader), the
manifest (BadManifest), its entries against the target (Mismatch) and then every offset and
length (BadTensor), in that order, before it changes anything; nothing else escapes for a bad
file, and a rejected file leaves the model and optimizer as they were.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from typing import Any, Iterable, Optional

import numpy as np

MAGIC = b"ONEMCKPT"
VERSION = 1
HEADER = struct.Struct("<8sIIQQQQQQ")
ALIGN = 64
MAX_MANIFEST = 256 << 20
MAX_DEPTH = 32
# Room a manifest may take beyond the one this target would write: extra integers and longer
# number spellings, never gigabytes.
MANIFEST_MARGIN = 1 << 20
DTYPES = {"f32": np.dtype("<f4"), "i32": np.dtype("<i4"), "i64": np.dtype("<i8"),
          "u8": np.dtype("u1")}
_DTYPE_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.int32): "i32",
                np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8"}
_I64 = (-(1 << 63), 1 << 63)


class CheckpointError(Exception):
    """A checkpoint could not be read or does not fit the target; `.kind` names the class."""

    @property
    def kind(self) -> str:
        return type(self).__name__


class BadHeader(CheckpointError):
    pass


class BadManifest(CheckpointError):
    pass


class BadTensor(CheckpointError):
    pass


class Mismatch(CheckpointError):
    pass


# -- the training state of a target --------------------------------------------------------
def _model_state(model: Any) -> list[tuple[str, np.ndarray]]:
    """The model's own parameter and buffer arrays (not copies), in the state order."""
    return [(name, t._data) for name, t in model._named_state()]


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
    return int(np.float32(value).view(np.uint32))


def _value_of(bits: int) -> float:
    return float(np.uint32(bits).view(np.float32))


# -- writing --------------------------------------------------------------------------------
def _check_extra(extra: Optional[dict]) -> list[tuple[str, int]]:
    items = []
    for key, value in (extra or {}).items():
        if not isinstance(key, str):
            raise ValueError(f"checkpoint: extra key {key!r} is not a string")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or not _I64[0] <= int(value) < _I64[1]:
            raise ValueError(f"checkpoint: extra[{key!r}] = {value!r} is not a 64-bit integer")
        items.append((key, int(value)))
    # Ordinal order of the keys: by UTF-16 code units, as the format's first readers sort.
    return sorted(items, key=lambda kv: kv[0].encode("utf-16-be"))


def _entries(state: Iterable[tuple[str, np.ndarray]], start: int) -> tuple[list[dict], int]:
    entries, offset = [], start
    for name, arr in state:
        offset = -(-offset // ALIGN) * ALIGN
        entries.append({"name": name, "dtype": _dtype_name(name, arr),
                        "shape": list(arr.shape), "offset": offset, "length": arr.nbytes})
        offset += arr.nbytes
    return entries, offset


def _manifest(model: Any, optimizer: Any, extra: list[tuple[str, int]]) -> tuple[dict, list]:
    model_state = _model_state(model)
    model_entries, end = _entries(model_state, 0)
    manifest: dict[str, Any] = {"format": "onemodel-checkpoint", "version": VERSION,
                                "model": model_entries}
    arrays = [a for _, a in model_state]
    if optimizer is not None:
        opt_state = _optimizer_state(optimizer)
        opt_entries, end = _entries(opt_state, end)
        manifest["optimizer"] = {"kind": type(optimizer).__name__,
                                 "step": int(optimizer.step_count),
                                 "hyper": _hyper_bits(optimizer), "state": opt_entries}
        arrays += [a for _, a in opt_state]
    manifest["extra"] = [{"key": k, "value": v} for k, v in extra]
    return manifest, arrays


def _encode(manifest: dict) -> bytes:
    return json.dumps(manifest, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def to_bytes(model: Any, optimizer: Any = None, extra: Optional[dict] = None) -> bytes:
    """The checkpoint of the whole training state; the same state gives the same bytes."""
    manifest, arrays = _manifest(model, optimizer, _check_extra(extra))
    text = _encode(manifest)
    data_offset = -(-(HEADER.size + len(text)) // ALIGN) * ALIGN
    entries = manifest["model"] + (manifest["optimizer"]["state"] if optimizer is not None
                                   else [])
    data_length = entries[-1]["offset"] + entries[-1]["length"] if entries else 0
    buf = bytearray(data_offset + data_length)
    HEADER.pack_into(buf, 0, MAGIC, VERSION, 0, HEADER.size, len(text), data_offset,
                     data_length, len(buf), 0)
    buf[HEADER.size:HEADER.size + len(text)] = text
    for entry, arr in zip(entries, arrays):
        start = data_offset + entry["offset"]
        buf[start:start + arr.nbytes] = np.ascontiguousarray(
            arr, dtype=DTYPES[entry["dtype"]]).tobytes()
    return bytes(buf)


def state_hash(model: Any, optimizer: Any = None) -> str:
    """Hex SHA-256 of the checkpoint bytes of this state."""
    return hashlib.sha256(to_bytes(model, optimizer)).hexdigest()


def save(path: str | os.PathLike, model: Any, optimizer: Any = None,
         extra: Optional[dict] = None) -> None:
    """Writes atomically: a temporary file in the same folder, fsync, rename, fsync the folder.

    A failure at any point leaves the previous file intact and no temporary file behind.
    """
    data = to_bytes(model, optimizer, extra)
    _atomic_write(os.fspath(path), data)


def _atomic_write(path: str, data: bytes) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    if os.name != "posix":  # Windows cannot open a folder for fsync; the rename is durable
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- reading --------------------------------------------------------------------------------
def _read_header(data: bytes) -> tuple[int, int, int, int]:
    if len(data) < HEADER.size:
        raise BadHeader(f"file of {len(data)} bytes is shorter than the 64-byte header")
    magic, version, flags, m_off, m_len, d_off, d_len, f_len, reserved = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise BadHeader(f"magic {magic!r} is not {MAGIC!r}")
    if version != VERSION:
        raise BadHeader(f"version {version} is not {VERSION}")
    if flags != 0:
        raise BadHeader(f"flags {flags:#x} are not 0")
    if reserved != 0:
        raise BadHeader(f"reserved field {reserved:#x} is not 0")
    if f_len != len(data):
        raise BadHeader(f"file_length {f_len} differs from the real length {len(data)}")
    if m_off != HEADER.size:
        raise BadHeader(f"manifest_offset {m_off} is not {HEADER.size}")
    if m_len > len(data) - m_off:
        raise BadHeader(f"manifest of {m_len} bytes leaves the {len(data)}-byte file")
    if d_off % ALIGN != 0:
        raise BadHeader(f"data_offset {d_off} is not a multiple of {ALIGN}")
    if d_off < m_off + m_len or d_off > len(data):
        raise BadHeader(f"data_offset {d_off} is not between the manifest end "
                        f"{m_off + m_len} and the file end {len(data)}")
    if d_len != len(data) - d_off:
        raise BadHeader(f"data_length {d_len} is not file length - data_offset "
                        f"({len(data) - d_off})")
    return m_off, m_len, d_off, d_len


def _json_depth_ok(text: str) -> bool:
    """Nesting depth of brackets outside strings, counted without recursion."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def _reject_duplicates(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise BadManifest(f"duplicate key {key!r} in an object")
        out[key] = value
    return out


def _reject_constant(name: str) -> None:
    raise BadManifest(f"{name} is not a JSON number")


def _parse_manifest(raw: bytes, limit: int) -> dict:
    if len(raw) > min(limit, MAX_MANIFEST):
        raise BadManifest(f"manifest of {len(raw)} bytes exceeds the limit of "
                          f"{min(limit, MAX_MANIFEST)} bytes for this target")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise BadManifest("manifest starts with a byte-order mark")
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise BadManifest(f"manifest is not valid UTF-8: {e.reason} at byte {e.start}") from None
    if not _json_depth_ok(text):
        raise BadManifest(f"manifest nests deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, object_pairs_hook=_reject_duplicates,
                           parse_constant=_reject_constant)
    except BadManifest:
        raise
    except (ValueError, RecursionError) as e:
        raise BadManifest(f"manifest is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise BadManifest("manifest is not a JSON object")
    return value


def _field(obj: dict, key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise BadManifest(f"{where}: missing field {key!r}")
    value = obj[key]
    if kind is int:
        if type(value) is not int:  # booleans are not integers
            raise BadManifest(f"{where}.{key}: expected an integer, got {value!r}")
        if not _I64[0] <= value < _I64[1]:
            raise BadManifest(f"{where}.{key}: integer {value} does not fit in 64 bits")
    elif not isinstance(value, kind):
        raise BadManifest(f"{where}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    if kind is str and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise BadManifest(f"{where}.{key}: string holds a lone surrogate")
    return value


def _only_fields(obj: Any, keys: tuple, where: str) -> dict:
    if not isinstance(obj, dict):
        raise BadManifest(f"{where}: expected an object")
    unknown = [k for k in obj if k not in keys]
    if unknown:
        raise BadManifest(f"{where}: unknown field {unknown[0]!r}")
    return obj


_ENTRY_FIELDS = ("name", "dtype", "shape", "offset", "length")


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
            raise BadManifest(f"{at}.dtype: unknown dtype {dtype!r}")
        shape = _field(entry, "shape", list, at)
        for d in shape:
            if type(d) is not int:
                raise BadManifest(f"{at}.shape: dimension {d!r} is not an integer")
            if d < 0:
                raise BadManifest(f"{at}.shape: negative dimension {d}")
            if d >= 1 << 62:
                raise BadManifest(f"{at}.shape: dimension {d} is oversized")
        nbytes = DTYPES[dtype].itemsize
        for d in shape:
            nbytes *= d
            if nbytes >= 1 << 63:
                raise BadManifest(f"{at}.shape: {shape} holds more than 2^63 bytes")
        out.append({"name": name, "dtype": dtype, "shape": shape,
                    "offset": _field(entry, "offset", int, at),
                    "length": _field(entry, "length", int, at)})
    return out


def _check_restorable(name: str, value: float, where: str) -> None:
    """The settings a load restores: a learning rate > 0 and a weight decay >= 0, finite."""
    if name == "lr" and not (np.isfinite(value) and value > 0):
        raise BadManifest(f"{where}: learning rate {value!r} is not a positive number")
    if name == "weight_decay" and not (np.isfinite(value) and value >= 0):
        raise BadManifest(f"{where}: weight decay {value!r} is not a non-negative number")


def _validate_manifest(m: dict) -> dict:
    _only_fields(m, ("format", "version", "model", "optimizer", "extra"), "manifest")
    if _field(m, "format", str, "manifest") != "onemodel-checkpoint":
        raise BadManifest(f"manifest.format {m['format']!r} is not 'onemodel-checkpoint'")
    if _field(m, "version", int, "manifest") != VERSION:
        raise BadManifest(f"manifest.version {m['version']} is not {VERSION}")
    out: dict[str, Any] = {"model": _tensor_entries(_field(m, "model", list, "manifest"),
                                                    "model")}
    if "optimizer" in m:
        o = _only_fields(m["optimizer"], ("kind", "step", "hyper", "state"), "optimizer")
        hyper = []
        for i, h in enumerate(_field(o, "hyper", list, "optimizer")):
            at = f"optimizer.hyper[{i}]"
            h = _only_fields(h, ("name", "bits"), at)
            bits = _field(h, "bits", int, at)
            if not 0 <= bits < 1 << 32:
                raise BadManifest(f"{at}.bits: {bits} is not a 32-bit pattern")
            name = _field(h, "name", str, at)
            _check_restorable(name, _value_of(bits), at)
            hyper.append((name, bits))
        step = _field(o, "step", int, "optimizer")
        if step < 0:
            raise BadManifest(f"optimizer.step {step} is negative")
        out["optimizer"] = {"kind": _field(o, "kind", str, "optimizer"), "step": step,
                            "hyper": hyper,
                            "state": _tensor_entries(_field(o, "state", list, "optimizer"),
                                                     "optimizer.state")}
    extra = {}
    for i, e in enumerate(_field(m, "extra", list, "manifest")):
        at = f"extra[{i}]"
        e = _only_fields(e, ("key", "value"), at)
        key = _field(e, "key", str, at)
        if key in extra:
            raise BadManifest(f"{at}: duplicate key {key!r}")
        extra[key] = _field(e, "value", int, at)
    out["extra"] = extra
    return out


def _match(entries: list[dict], state: list[tuple[str, np.ndarray]], what: str) -> None:
    if len(entries) != len(state):
        raise Mismatch(f"{what}: file has {len(entries)} tensors, target has {len(state)}")
    for entry, (name, arr) in zip(entries, state):
        if entry["name"] != name:
            raise Mismatch(f"{what}: file has {entry['name']!r} where the target has {name!r}")
        if entry["dtype"] != _dtype_name(name, arr):
            raise Mismatch(f"{what} {name!r}: dtype {entry['dtype']} in the file, "
                           f"{_dtype_name(name, arr)} in the target")
        # Compared before any size is computed from the file's shape.
        if entry["shape"] != list(arr.shape):
            raise Mismatch(f"{what} {name!r}: shape {entry['shape']} in the file, "
                           f"{list(arr.shape)} in the target")


def _check_extent(entries: list[dict], data_length: int, what: str) -> None:
    for e in entries:
        expected = int(np.prod(e["shape"], dtype=object)) * DTYPES[e["dtype"]].itemsize
        if e["length"] != expected:
            raise BadTensor(f"{what} {e['name']!r}: length {e['length']} is not the shape's "
                            f"{expected} bytes")
        if e["offset"] < 0 or e["offset"] % ALIGN != 0:
            raise BadTensor(f"{what} {e['name']!r}: offset {e['offset']} is not a non-negative "
                            f"multiple of {ALIGN}")
        if e["offset"] > data_length or e["length"] > data_length - e["offset"]:
            raise BadTensor(f"{what} {e['name']!r}: bytes [{e['offset']}, "
                            f"{e['offset'] + e['length']}) leave the data region of "
                            f"{data_length} bytes")


def _manifest_limit(model: Any, optimizer: Any) -> int:
    manifest, _ = _manifest(model, optimizer, [])
    return 2 * len(_encode(manifest)) + MANIFEST_MARGIN


def from_bytes(data: bytes, model: Any, optimizer: Any = None) -> dict:
    """Restores model (and optimizer) from checkpoint bytes; returns the extra integers.

    Every check runs before anything is changed; errors are CheckpointError subclasses only.
    """
    data = bytes(data)
    m_off, m_len, d_off, d_len = _read_header(data)
    manifest = _validate_manifest(_parse_manifest(data[m_off:m_off + m_len],
                                                  _manifest_limit(model, optimizer)))
    model_state = _model_state(model)
    _match(manifest["model"], model_state, "model")
    opt_state: list[tuple[str, np.ndarray]] = []
    if optimizer is not None:
        if "optimizer" not in manifest:
            raise Mismatch("optimizer state was asked for, but the file holds a model only")
        saved = manifest["optimizer"]
        if saved["kind"] != type(optimizer).__name__:
            raise Mismatch(f"optimizer kind {saved['kind']!r} in the file, "
                           f"{type(optimizer).__name__!r} in the target")
        hyper = _match_hyper(saved["hyper"], optimizer)
        opt_state = _optimizer_state(optimizer)
        _match(saved["state"], opt_state, "optimizer state")
    _check_extent(manifest["model"], d_len, "model")
    if optimizer is not None:
        _check_extent(manifest["optimizer"]["state"], d_len, "optimizer state")

    # Every check passed: copy.
    entries = manifest["model"] + (manifest["optimizer"]["state"] if optimizer else [])
    for entry, (_, arr) in zip(entries, model_state + opt_state):
        start = d_off + entry["offset"]
        values = np.frombuffer(data, DTYPES[entry["dtype"]], arr.size, start)
        arr[...] = values.reshape(arr.shape)
    for _, t in model._named_state():
        t._version += 1
    if optimizer is not None:
        optimizer.load_hyper_parameters(hyper)
        optimizer.step_count = manifest["optimizer"]["step"]
    return dict(manifest["extra"])


def _match_hyper(saved: list[tuple[str, int]], optimizer: Any) -> dict[str, float]:
    """Checks names and fixed settings; returns the saved values, each one restorable."""
    own = [(h["name"], h["bits"]) for h in _hyper_bits(optimizer)]
    names = [n for n, _ in saved]
    if names != [n for n, _ in own]:
        raise Mismatch(f"optimizer hyper-parameters {names} in the file, "
                       f"{[n for n, _ in own]} in the target")
    fixed = set(optimizer.fixed_hyper_parameters)
    values = {}
    for (name, bits), (_, own_bits) in zip(saved, own):
        if name in fixed and bits != own_bits:
            raise Mismatch(f"optimizer setting {name!r} differs: bits {bits} in the file, "
                           f"{own_bits} in the target")
        values[name] = _value_of(bits)
    return values


def load(path: str | os.PathLike, model: Any, optimizer: Any = None) -> dict:
    """Reads the whole file, then restores as from_bytes; returns the extra integers."""
    with open(path, "rb") as f:
        data = f.read()
    return from_bytes(data, model, optimizer)
