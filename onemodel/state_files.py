"""onemodel.save / onemodel.load: what a training script saves, as torch.save and torch.load do,
in the checkpoint format (docs/spec/clarifications.md, "State files"); no pickle, nothing run.

`save(obj, f)` takes any nesting of dicts (str or int keys), lists and tuples holding tensors,
numpy arrays (f32, i32, i64, u8) and None, bool, int (64-bit), float and str. The tensors are the
manifest's "model" entries, named "0", "1", ... in the order of a depth-first walk (keys in
insertion order); the structure is the manifest's "tree" after "extra":
    tensor {"t": i}   dict {"d": [[key, node], ...]} (key a JSON string, or a JSON integer for
    an int key)   list {"l": [...]}   tuple {"u": [...]}   None {"n": null}   bool {"b": true}
    int {"i": 3}   float {"f": bits} (the IEEE-754 double's bit pattern, unsigned)   str {"s": ""}
A flat {name: tensor} dict (a module's state_dict) is written without a tree, as before, so its
bytes and older files are unchanged. Containers nest at most MAX_DEPTH deep and a string holds at
most MAX_STRING characters; `save` refuses, before writing anything, whatever `load` refuses,
naming where in the object it is (`obj['config']['fn']: a function cannot be saved`).

`load(f, map_location=None, weights_only=True)` returns the structure with tensors (a saved numpy
array comes back as a tensor), each its own copy. The file is read with no target
(checkpoint.read_free: the header checked against the file's size first, the manifest bounded by
the file); the tree is checked whole, every tensor index the next in the walk, before any tensor
is made. Every bad file is one CheckpointError subclass naming the file.
"""
from __future__ import annotations

import math
import os
import struct
from collections.abc import Mapping
from typing import Any, BinaryIO, Callable, Optional

import numpy as np

from . import checkpoint as ck
from .tensor import Tensor, device

MAX_DEPTH = ck.MAX_DEPTH
MAX_STRING = 1 << 20
_I64 = (-(1 << 63), 1 << 63)
_SCALAR_TAGS: dict[str, type] = {"n": type(None), "b": bool, "i": int, "f": int, "s": str}
_TAGS = ("t", "d", "l", "u", *_SCALAR_TAGS)


# -- writing ---------------------------------------------------------------------------------
def _unsaveable(value: Any) -> str:
    if callable(value):
        return "a function" if hasattr(value, "__code__") else f"a callable {type(value).__name__}"
    return f"a {type(value).__module__}.{type(value).__name__}"


class _Encoder:
    """Walks an object depth first into its tree and its arrays, refusing what load would."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def node(self, value: Any, where: str, depth: int) -> dict:
        array = value._data if isinstance(value, Tensor) else value
        if isinstance(array, np.ndarray):
            if array.dtype not in ck._DTYPE_NAMES:
                raise ValueError(f"save: {where}: dtype {array.dtype} cannot be saved (float32, "
                                 "int32, int64 and uint8 can)")
            index = len(self.arrays)
            self.arrays[str(index)] = array
            return {"t": index}
        if value is None:
            return {"n": None}
        if isinstance(value, (bool, np.bool_)):
            return {"b": bool(value)}
        if isinstance(value, (int, np.integer)):
            return {"i": _int64(int(value), where)}
        if isinstance(value, (float, np.floating)):
            return {"f": struct.unpack("<Q", struct.pack("<d", float(value)))[0]}
        if isinstance(value, str):
            return {"s": _string(value, where)}
        if isinstance(value, (Mapping, list, tuple)):
            if depth == MAX_DEPTH:
                raise ValueError(f"save: {where}: containers nest deeper than {MAX_DEPTH}")
            if isinstance(value, Mapping):
                return {"d": [[self.key(k, where), self.node(v, f"{where}[{k!r}]", depth + 1)]
                              for k, v in value.items()]}
            return {"l" if isinstance(value, list) else "u":
                    [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]}
        raise TypeError(f"save: {where}: {_unsaveable(value)} cannot be saved (tensors, numpy "
                        "arrays, None, bool, int, float, str, and dicts, lists and tuples of "
                        "them can)")

    @staticmethod
    def key(key: Any, where: str) -> str | int:
        if isinstance(key, str):
            return _string(key, f"{where}: key {key[:40]!r}")
        if type(key) is int:
            return _int64(key, f"{where}: key {key!r}")
        raise TypeError(f"save: {where}: key {ck._short(key)} of type {type(key).__name__}: "
                        "dict keys are str or int")


def _int64(value: int, where: str) -> int:
    if not _I64[0] <= value < _I64[1]:
        raise ValueError(f"save: {where}: {value} does not fit in 64 bits")
    return value


def _string(value: str, where: str) -> str:
    if len(value) > MAX_STRING:
        raise ValueError(f"save: {where}: a string of {len(value)} characters, more than "
                         f"{MAX_STRING}")
    if ck._has_surrogate(value):
        raise ValueError(f"save: {where}: the string holds a lone surrogate")
    return value


def _is_flat(obj: Any) -> bool:
    """A state dict: str keys and tensor or array values, written as before (no tree)."""
    return isinstance(obj, Mapping) and all(
        isinstance(k, str) and isinstance(v, (Tensor, np.ndarray)) for k, v in obj.items())


def _chunks(obj: Any) -> list:
    if _is_flat(obj):
        for name, value in obj.items():
            _Encoder().node(value, f"obj[{name!r}]", 1)  # its dtype, named as elsewhere
        return ck._chunks(obj, None, None, ck.VERSION)
    encoder = _Encoder()
    tree = encoder.node(obj, "obj", 0)
    return ck._chunks(encoder.arrays, None, None, ck.VERSION, tree)


def save(obj: Any, f: str | os.PathLike | BinaryIO) -> None:
    """Writes obj atomically to a path (checkpoint.save's temporary, fsync and rename), or
    into a binary file object. A refusal comes before anything is written."""
    if hasattr(f, "write"):
        chunks = _chunks(obj)
        ck._set_checksum(chunks, ck._checksum([memoryview(chunks[0])[ck.HEADER.size:],
                                               *chunks[1:]]))
        for chunk in chunks:
            f.write(chunk)
        return
    path = os.fspath(f)
    try:
        chunks = _chunks(obj)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{e} (saving {path})") from None
    ck._atomic_write(path, chunks)


# -- reading ---------------------------------------------------------------------------------
def _names_cpu(target: Any) -> bool:
    if isinstance(target, device):
        return True
    if isinstance(target, str) or type(target).__name__ == "device":  # a torch.device too
        return str(target).split(":")[0] == "cpu"
    return False


def _placement(map_location: Any) -> Optional[Callable[[Tensor], Any]]:
    """torch's map_location, where the one place is the CPU: None, a device or its name, a
    dict of locations whose targets name the CPU, or a callable (storage, location) ->
    storage, called with each tensor and "cpu"."""
    if map_location is None or _names_cpu(map_location):
        return None
    if isinstance(map_location, Mapping):
        bad = [v for v in map_location.values() if not _names_cpu(v)]
        if bad:
            raise ValueError(f"load: map_location maps to {bad[0]!r}: onemodel runs on the CPU "
                             "only")
        return None
    if callable(map_location):
        return lambda t: map_location(t, "cpu")
    raise ValueError(f"load: map_location {map_location!r}: onemodel runs on the CPU only")


def _read(f: Any) -> tuple[memoryview, Optional[int]]:
    if hasattr(f, "read"):
        data = f.read()
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"load: f.read() returned {type(data).__name__}, expected bytes "
                            "(open the file in binary mode)")
        return ck._as_view(data), None
    return ck._read_file(os.fspath(f))


def load(f: str | os.PathLike | BinaryIO, map_location: Any = None, *,
         weights_only: Optional[bool] = True) -> Any:
    """What save wrote (or a checkpoint's model section, as a state dict), with tensors.

    Every load is weights-only: a file holds data alone, nothing is unpickled or run, so
    weights_only (True, False or None) changes nothing."""
    if weights_only not in (True, False, None):
        raise TypeError(f"load: weights_only must be a bool or None, got {weights_only!r}")
    place = _placement(map_location)
    with ck._naming(ck._source(f)):
        data, crc = _read(f)
        manifest, m_len, d_off = ck.read_free(data, crc)
        entries = manifest["model"]
        tree = manifest.get("tree")
        if tree is None:
            _check_unique([e["name"] for e in entries])
        else:
            _check_names(entries)
            check = _Walk(None)
            check.node(tree, "tree", 0)
            if check.next != len(entries):
                raise ck.BadManifest(f"tree names {check.next} tensors, the file holds "
                                     f"{len(entries)}")
        ck._check_layout(ck._file_entries(manifest), data, ck.HEADER.size + m_len, d_off)
        tensors = [_tensor(data, d_off, e) for e in entries]
    if place is not None:
        tensors = [_placed(place(t)) for t in tensors]
    if tree is None:
        return {e["name"]: t for e, t in zip(entries, tensors)}
    return _Walk(tensors).node(tree, "tree", 0)


def _placed(value: Any) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"load: map_location returned a {type(value).__name__}, expected the "
                        "tensor it was given (or another on the CPU)")
    return value


def _tensor(data: memoryview, d_off: int, entry: dict) -> Tensor:
    array = np.frombuffer(data, ck.DTYPES[entry["dtype"]], math.prod(entry["shape"]),
                          d_off + entry["offset"]).reshape(entry["shape"])
    return Tensor._wrap(array.astype(array.dtype.newbyteorder("="), copy=True))


def _check_unique(names: list[str]) -> None:
    if len(set(names)) != len(names):
        twice = next(n for i, n in enumerate(names) if n in names[:i])
        raise ck.BadManifest(f"model: tensor name {ck._short(twice)} appears more than once")


def _check_names(entries: list[dict]) -> None:
    for i, e in enumerate(entries):
        if e["name"] != str(i):
            raise ck.BadManifest(f"model[{i}]: tensor name {ck._short(e['name'])} is not "
                                 f"{str(i)!r} (a tree's tensors are named by their index)")


class _Walk:
    """Reads a tree: with tensors None, checks it whole and counts its tensors; given the
    tensors, builds the object (only after every check passed)."""

    def __init__(self, tensors: Optional[list[Tensor]]) -> None:
        self.tensors = tensors
        self.next = 0

    def node(self, node: Any, where: str, depth: int) -> Any:
        if not isinstance(node, dict) or len(node) != 1 or next(iter(node)) not in _TAGS:
            raise ck.BadManifest(f"{where}: expected one of {{{', '.join(_TAGS)}}} as a "
                                 f"node's only field, got {ck._short(node)}")
        tag, value = next(iter(node.items()))
        if tag == "t":
            return self.tensor(value, where)
        if tag in _SCALAR_TAGS:
            return _scalar(tag, value, where)
        if not isinstance(value, list):
            raise ck.BadManifest(f"{where}.{tag}: expected a list")
        if depth == MAX_DEPTH:
            raise ck.BadManifest(f"{where}: containers nest deeper than {MAX_DEPTH}")
        if tag == "d":
            return self.mapping(value, where, depth + 1)
        items = [self.node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        return items if tag == "l" else tuple(items)

    def tensor(self, index: Any, where: str) -> Any:
        if type(index) is not int or index != self.next:
            raise ck.BadManifest(f"{where}: tensor {ck._short(index)} is not {self.next}, the "
                                 "next in the walk")
        self.next += 1
        return None if self.tensors is None else self.tensors[index]

    def mapping(self, pairs: list, where: str, depth: int) -> dict:
        out: dict = {}
        for i, pair in enumerate(pairs):
            if not isinstance(pair, list) or len(pair) != 2:
                raise ck.BadManifest(f"{where}.d[{i}]: expected a [key, node] pair")
            key = pair[0]
            if type(key) is int:
                if not _I64[0] <= key < _I64[1]:
                    raise ck.BadManifest(f"{where}.d[{i}]: key {ck._short(key)} does not fit "
                                         "in 64 bits")
            elif not isinstance(key, str) or len(key) > MAX_STRING or ck._has_surrogate(key):
                raise ck.BadManifest(f"{where}.d[{i}]: key {ck._short(key)} is not a str "
                                     f"(at most {MAX_STRING} characters) or an int")
            if key in out:
                raise ck.BadManifest(f"{where}: key {ck._short(key)} appears more than once")
            out[key] = self.node(pair[1], f"{where}[{key!r}]", depth)
        return out


def _is_exactly(value: Any, kind: type) -> bool:
    return type(value) is kind


def _scalar(tag: str, value: Any, where: str) -> Any:
    kind = _SCALAR_TAGS[tag]
    if not _is_exactly(value, kind):  # bool is no int here, nor int a float
        raise ck.BadManifest(f"{where}.{tag}: expected {kind.__name__}, got "
                             f"{ck._short(value)}")
    if tag == "i" and not _I64[0] <= value < _I64[1]:
        raise ck.BadManifest(f"{where}.i: {ck._short(value)} does not fit in 64 bits")
    if tag == "f":
        if not 0 <= value < 1 << 64:
            raise ck.BadManifest(f"{where}.f: {ck._short(value)} is not a 64-bit pattern")
        return struct.unpack("<d", struct.pack("<Q", value))[0]
    if tag == "s" and (len(value) > MAX_STRING or ck._has_surrogate(value)):
        raise ck.BadManifest(f"{where}.s: a string over {MAX_STRING} characters or with a "
                             "lone surrogate")
    return value
