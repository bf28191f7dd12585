"""Generated sweeps over two valid checkpoints (a model-only file and a model + AdamW file), and
the hostile suite under a 1 GiB address-space limit with a time bound per file.

Sweeps: every truncation length, every single-bit flip in the header and the manifest, and
boundary values in every header field. Each variant either loads as what it says (same tensors,
step, hyper-parameters and extra as an independent decoding of it) or raises a CheckpointError
subclass and leaves the target's state hash as it was.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn
from onemodel.optim import AdamW

HEADER = struct.Struct("<8sIIQQQQQQ")
# (name, byte offset, width) of each header field after the magic.
FIELDS = [("version", 8, 4), ("flags", 12, 4), ("manifest_offset", 16, 8),
          ("manifest_length", 24, 8), ("data_offset", 32, 8), ("data_length", 40, 8),
          ("file_length", 48, 8), ("reserved", 56, 8)]
HOSTILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                       "testdata",
                       "checkpoint", "hostile")


def make_target(with_optimizer: bool, seed: int) -> tuple[nn.Module, AdamW | None]:
    """Small targets keep the sweeps fast: batch norm (an i64 buffer) for the model-only file,
    a Linear and AdamW for the other."""
    g = om.Generator(seed)
    if not with_optimizer:
        return nn.Sequential(nn.Linear(3, 4, generator=g), nn.BatchNorm1d(4)), None
    model = nn.Linear(3, 2, generator=g)
    return model, AdamW(model.parameters(), lr=0.01, weight_decay=0.1)


def valid_files() -> list[tuple[str, bytes, bool]]:
    """(name, bytes, loaded with the optimizer): a model-only file and a model + AdamW file,
    each with distinctive values (optimizer state, a step count, extra integers)."""
    model, _ = make_target(False, 11)
    model_only = checkpoint.to_bytes(model, None, {"epoch": 3})
    model, opt = make_target(True, 11)
    for i, arr in enumerate(opt.state_tensors().values()):
        arr[...] = np.linspace(-1, 1, arr.size, dtype=np.float32).reshape(arr.shape) * (i + 1)
    opt.step_count, opt.lr = 17, 0.004
    return [("model-only", model_only, False),
            ("model-adamw", checkpoint.to_bytes(model, opt, {"samples": 4096, "epoch": 2}),
             True)]


def decoded(data: bytes) -> dict:
    """An independent reading of a checkpoint's content: each tensor entry with its bytes in
    place of offset and length (the format allows any layout), the rest as it is, extra as a
    sorted list."""
    fields = HEADER.unpack_from(data)
    manifest = json.loads(data[64:64 + fields[4]].decode("utf-8"))
    region = data[fields[5]:]

    def tensors(entries):
        return [(e["name"], e["dtype"], e["shape"],
                 region[e["offset"]:e["offset"] + e["length"]]) for e in entries]
    manifest["model"] = tensors(manifest["model"])
    if "optimizer" in manifest:
        manifest["optimizer"]["state"] = tensors(manifest["optimizer"]["state"])
    manifest["extra"] = sorted((e["key"], e["value"]) for e in manifest["extra"])
    return manifest


class Sweep:
    """One target and its own starting state; `check` runs one variant through it."""

    def __init__(self, data: bytes, with_optimizer: bool) -> None:
        self.model, self.opt = make_target(with_optimizer, 5)
        self.start = checkpoint.to_bytes(self.model, self.opt)
        self.start_hash = checkpoint.state_hash(self.model, self.opt)
        self.valid = data
        self.counts = {"loaded": 0, "rejected": 0}

    def check(self, variant: bytes) -> None:
        try:
            extra = checkpoint.from_bytes(variant, self.model, self.opt)
        except checkpoint.CheckpointError:
            self.counts["rejected"] += 1
            assert checkpoint.state_hash(self.model, self.opt) == self.start_hash
            return
        self.counts["loaded"] += 1
        # It loaded: the target now holds what the variant says, field for field.
        assert decoded(checkpoint.to_bytes(self.model, self.opt, extra)) == decoded(variant)
        checkpoint.from_bytes(self.start, self.model, self.opt)


@pytest.fixture(params=valid_files(), ids=lambda f: f[0])
def sweep(request) -> tuple[Sweep, bytes]:
    _, data, with_optimizer = request.param
    return Sweep(data, with_optimizer), data


def test_the_valid_file_loads_and_round_trips(sweep):
    s, data = sweep
    s.check(data)
    assert s.counts == {"loaded": 1, "rejected": 0}


def test_every_truncation_is_rejected_from_memory_and_from_a_file(sweep, tmp_path):
    s, data = sweep
    for n in range(len(data)):
        s.check(data[:n])
    assert s.counts == {"loaded": 0, "rejected": len(data)}
    # The file reader takes its own path (lengths from fstat, reads by offset): a sample of
    # truncations through it.
    path = tmp_path / "t.ckpt"
    for n in list(range(0, 130)) + list(range(130, len(data), 37)):
        path.write_bytes(data[:n])
        with pytest.raises(checkpoint.CheckpointError):
            checkpoint.load(path, s.model, s.opt)
        assert checkpoint.state_hash(s.model, s.opt) == s.start_hash


def test_every_bit_flip_in_header_and_manifest(sweep):
    s, data = sweep
    end = 64 + HEADER.unpack_from(data)[4]
    base = bytearray(data)
    for pos in range(end):
        for bit in range(8):
            base[pos] ^= 1 << bit
            s.check(bytes(base))
            base[pos] ^= 1 << bit
    assert sum(s.counts.values()) == 8 * end
    # Every header bit matters; in the manifest a flip may keep it valid (a digit of a value).
    assert s.counts["rejected"] >= 8 * 64


def boundary_values(true: int, width: int, file_length: int) -> set[int]:
    top = (1 << (8 * width)) - 1
    values = {true, 0, 1, 2, 63, 64, 65, top, top - 1, top - 63, 1 << (8 * width - 1),
              (1 << (8 * width - 1)) - 1, true - 1, true + 1, true - 64, true + 64,
              file_length, file_length - 1, file_length + 1, file_length - 64,
              file_length + 64}
    if width == 8:
        values |= {1 << 32, (1 << 32) - 1, 1 << 62}
    return {v for v in values if 0 <= v <= top}


def test_boundary_values_in_every_header_field(sweep):
    s, data = sweep
    fmt = {4: "<I", 8: "<Q"}
    tried = 0
    for name, offset, width in FIELDS:
        true = struct.unpack_from(fmt[width], data, offset)[0]
        for value in sorted(boundary_values(true, width, len(data))):
            variant = bytearray(data)
            struct.pack_into(fmt[width], variant, offset, value)
            before = s.counts["loaded"]
            s.check(bytes(variant))
            # A header field holds one right value; every other one is refused.
            assert (s.counts["loaded"] > before) == (value == true), (name, value)
            tried += 1
    for magic in (b"\0" * 8, b"\xff" * 8, b"ONEMCKPt", b"ONEMCKP", b"onemckpt"):
        s.check(magic.ljust(8, b" ") + data[8:])
        tried += 1
    assert s.counts == {"loaded": len(FIELDS), "rejected": tried - len(FIELDS)}


def test_model_only_file_with_optimizer_asked_is_mismatch_and_changes_nothing():
    (_, data, _), _ = valid_files()
    model, _ = make_target(False, 5)
    opt = AdamW(model.parameters())
    before = checkpoint.state_hash(model, opt)
    with pytest.raises(checkpoint.Mismatch):
        checkpoint.from_bytes(data, model, opt)
    assert checkpoint.state_hash(model, opt) == before


# -- the hostile suite under a 1 GiB address space ------------------------------------------
LIMITED = textwrap.dedent("""
    import resource, sys
    limit = 1 << 30
    # Set before anything is imported: the interpreter, numpy and the kernels take about
    # 150 MB of address space, the rest is for the loads.
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import json, os, time
    import importlib.util
    spec = importlib.util.spec_from_file_location("hostile", sys.argv[1])
    hostile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hostile)
    from onemodel import checkpoint
    times, kinds = {}, {}
    for kind, name, data, _ in hostile.CASES:
        model, opt = hostile.make_target()
        path = hostile.path_of(kind, name)
        worst = 0.0
        for load in (lambda: checkpoint.from_bytes(data, model, opt),
                     lambda: checkpoint.load(path, model, opt)):
            # The CPU time the rejection costs, best of three: what other processes on a
            # shared machine do can only add to it
            best = float("inf")
            for _ in range(3):
                t0 = time.process_time()
                try:
                    load()
                    kinds[f"{kind}-{name}"] = "loaded"
                except checkpoint.CheckpointError as e:
                    kinds[f"{kind}-{name}"] = e.kind
                best = min(best, time.process_time() - t0)
            worst = max(worst, best)
        times[f"{kind}-{name}"] = worst
    status = open("/proc/self/status").read()
    peak = int(status.split("VmPeak:")[1].split()[0]) * 1024
    print(json.dumps({"times": times, "kinds": kinds, "limit": resource.getrlimit(
        resource.RLIMIT_AS)[0], "vm_peak": peak}))
""")


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc/self/status: Linux")
def test_hostile_suite_under_1_gib_address_space_each_rejected_in_100_ms():
    hostile_py = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "test_checkpoint_hostile.py")
    # The package under test (installed or built in place), never a bare checkout.
    package_root = os.path.dirname(os.path.dirname(om.__file__))
    env = dict(os.environ,
               PYTHONPATH=package_root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", LIMITED, hostile_py], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["limit"] == 1 << 30 and result["vm_peak"] <= 1 << 30
    assert len(result["times"]) == len(os.listdir(HOSTILE)) >= 41
    for case, kind in result["kinds"].items():
        assert kind != "loaded", case
    for key, kind in zip(result["times"], result["kinds"].values()):
        assert key.startswith(kind + "-"), (key, kind)
    worst = max(result["times"], key=result["times"].get)
    print(f"slowest rejection: {worst} {result['times'][worst] * 1e3:.1f} ms, "
          f"VmPeak {result['vm_peak'] >> 20} MiB under a {result['limit'] >> 20} MiB limit")
    assert result["times"][worst] < 0.1, worst
