"""Hostile files for the readers with no target (onemodel.load, the manager's best.ckpt): trees
that lie, zero-dimension shapes numpy refuses, manifests built to blow up the parser's memory,
huge files that are no checkpoint; every error typed and naming the file, memory bounded."""
from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import time

import pytest

import onemodel as om
from onemodel import checkpoint
from onemodel._kernels._crc import crc32c


def framed(manifest: bytes, data: bytes = b"") -> bytes:
    """A version-2 file around a manifest text and a data region (checksum right)."""
    d_off = -(-(64 + len(manifest)) // 64) * 64
    body = manifest + bytes(d_off - 64 - len(manifest)) + data
    header = struct.pack("<8sIIQQQQQQ", b"ONEMCKPT", 2, 0, 64, len(manifest), d_off,
                         len(data), d_off + len(data), crc32c(body))
    return header + body


def tree_file(tree, entries=(("0", "f32", [2]),)) -> bytes:
    model, data = [], b""
    for name, dtype, shape in entries:
        data += bytes(-len(data) % 64)
        model.append({"name": name, "dtype": dtype, "shape": shape, "offset": len(data),
                      "length": 8})
        data += bytes(8)
    m = {"format": "onemodel-checkpoint", "version": 2, "checksum": "crc32c", "model": model,
         "extra": [], "tree": tree}
    return framed(json.dumps(m, separators=(",", ":")).encode(), data)


def zero_dim_file() -> bytes:
    m = {"format": "onemodel-checkpoint", "version": 2, "checksum": "crc32c",
         "model": [{"name": "w", "dtype": "f32", "shape": [0, 1 << 31, 1 << 31], "offset": 0,
                    "length": 0}], "extra": []}
    return framed(json.dumps(m, separators=(",", ":")).encode())


def deep(n: int):
    node = {"t": 0}
    for _ in range(n):
        node = {"l": [node]}
    return node


TREES = [
    ("missing tensor", {"l": [{"t": 0}, {"t": 1}]}, "tree names 2 tensors, the file holds 1"),
    ("unnamed tensor", {"l": []}, "tree names 0 tensors, the file holds 1"),
    ("out of order", {"l": [{"t": 1}]}, "tensor 1 is not 0"),
    ("index as bool", {"t": True}, "tensor True is not 0"),
    ("two tags", {"t": 0, "n": None}, "only field"),
    ("unknown tag", {"x": 0}, "only field"),
    ("not an object", [0], "manifest.tree: expected dict"),
    ("dict not pairs", {"d": [["a"]]}, r"expected a \[key, node\] pair"),
    ("float key", {"d": [[1.5, {"t": 0}]]}, "is not a str"),
    ("duplicate key", {"d": [["a", {"t": 0}], ["a", {"n": None}]]}, "'a' appears more than"),
    ("int key over 64 bits", {"d": [[1 << 63, {"t": 0}]]}, "does not fit in 64 bits"),
    ("int over 64 bits", {"l": [{"t": 0}, {"i": -(1 << 63) - 1}]}, "does not fit in 64 bits"),
    ("float bits negative", {"l": [{"t": 0}, {"f": -1}]}, "not a 64-bit pattern"),
    ("float as float", {"l": [{"t": 0}, {"f": 1.5}]}, "expected int"),
    ("bool as int", {"l": [{"t": 0}, {"b": 1}]}, "expected bool"),
    ("int as bool", {"l": [{"t": 0}, {"i": True}]}, "expected int"),
    ("null with value", {"l": [{"t": 0}, {"n": 0}]}, "expected NoneType"),
    ("list not list", {"l": {"t": 0}}, "expected a list"),
    ("depth 33", deep(33), "nest deeper than 32"),
]


@pytest.mark.parametrize("name,tree,match", TREES, ids=[t[0] for t in TREES])
def test_a_lying_tree_is_bad_manifest_naming_the_file(tmp_path, name, tree, match):
    path = tmp_path / "bad.pt"
    path.write_bytes(tree_file(tree))
    with pytest.raises(checkpoint.BadManifest, match=match) as info:
        om.load(path)
    assert str(info.value).startswith(f"{path}: ")


def test_depth_32_and_wrong_names_of_a_tree_file():
    assert om.load(io.BytesIO(tree_file(deep(32)))) is not None
    with pytest.raises(checkpoint.BadManifest, match="tensor name 'w' is not '0'"):
        om.load(io.BytesIO(tree_file({"t": 0}, [("w", "f32", [2])])))


def test_zero_dimension_shapes_are_checked_as_numpy_counts_them(tmp_path):
    data = zero_dim_file()
    assert len(data) == 256
    path = tmp_path / "zero.ckpt"
    path.write_bytes(data)
    with pytest.raises(checkpoint.BadManifest, match=f"{path}: .*spans 2\\^63 bytes"):
        om.load(path)
    with pytest.raises(checkpoint.BadManifest, match="spans 2\\^63 bytes"):
        checkpoint.load(path, om.nn.Linear(1, 1))
    # empty tensors numpy takes come back as such
    back = om.load(io.BytesIO(checkpoint.to_bytes({"w": om.zeros(0, 1 << 20, 5).numpy()})))
    assert back["w"].shape == (0, 1 << 20, 5)


def test_a_bad_best_checkpoint_does_not_stop_the_manager_or_the_trainer(tmp_path):
    for data in (zero_dim_file(), tree_file(deep(40)), b"PK\x03\x04" + bytes(60)):
        (tmp_path / "best.ckpt").write_bytes(data)
        assert checkpoint.CheckpointManager(tmp_path).best_metric is None
        model = om.nn.Linear(2, 1)
        om.train.Trainer(model, om.nn.functional.mse_loss,
                         om.optim.SGD(model.parameters(), lr=0.1), [],
                         checkpoints=om.train.Checkpoints(str(tmp_path)))


def test_every_error_names_its_file(tmp_path):
    path = tmp_path / "m.ckpt"
    model = om.nn.Linear(2, 1)
    checkpoint.save(path, model)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    for read in (lambda: om.load(path), lambda: checkpoint.load(path, model),
                 lambda: om.load(open(path, "rb"))):
        with pytest.raises(checkpoint.BadHeader, match=f"^{path}: checksum"):
            read()


def test_a_huge_file_that_is_no_checkpoint_fails_in_milliseconds(tmp_path):
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as f:
        f.truncate(2 << 30)
    start = time.perf_counter()
    for read in (lambda: om.load(path), lambda: checkpoint.load(path, om.nn.Linear(1, 1))):
        with pytest.raises(checkpoint.BadHeader, match="magic"):
            read()
    assert time.perf_counter() - start < 0.5
    assert checkpoint.CheckpointManager(tmp_path).best_metric is None


# Attack files for the target-free reader's memory: manifests of many tiny JSON values (each a
# few bytes of text, up to ~200 bytes once parsed), as large as the old 256 MiB bound allowed
# (here 48 MiB, in a subprocess limited to 1 GiB of address space).
ATTACKS = {
    "empty lists": lambda n: b'{"format":"onemodel-checkpoint","extra":[' + b"[]," * n + b"[]]}",
    "objects": lambda n: b'{"format":"onemodel-checkpoint","extra":[' + b"{}," * n + b"{}]}",
    "numbers": lambda n: b'{"format":"onemodel-checkpoint","extra":[' + b"1000," * n + b"1]}",
    "strings": lambda n: b'{"format":"onemodel-checkpoint","extra":[' + b'"ab",' * n + b"1]}",
    "tree nodes": lambda n: b'{"format":"onemodel-checkpoint","tree":{"l":[' +
                            b'{"n":null},' * n + b'{"n":null}]}}',
}

PROBE = r"""
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
import onemodel as om
from onemodel import checkpoint
def high_water():  # this process's own peak (ru_maxrss would carry the parent's over exec)
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0]) * 1024
before = high_water()
start = time.perf_counter()
try:
    om.load(sys.argv[1])
except checkpoint.BadManifest as e:
    kind = "BadManifest"
print(kind, time.perf_counter() - start, high_water() - before)
"""


@pytest.mark.parametrize("name", list(ATTACKS))
def test_big_manifests_are_refused_in_bounded_memory_and_time(tmp_path, name):
    size = 48 << 20
    text = ATTACKS[name](size // 4)[:size]
    path = tmp_path / "attack.ckpt"
    path.write_bytes(framed(text))
    run = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True,
                         text=True, env=dict(os.environ))
    assert run.returncode == 0, run.stderr[-2000:]
    kind, seconds, extra_text = run.stdout.split()
    extra = int(extra_text)
    print(f"{name}: {len(text) >> 20} MiB manifest refused in {float(seconds):.2f} s, "
          f"{extra / len(text):.2f}x the file in extra memory")
    assert kind == "BadManifest"
    assert extra < 3 * len(text)
    assert float(seconds) < 10
