"""Checkpoint format (docs/spec/training.txt section 6), atomic writes and CheckpointManager.

The format checks read what the writer wrote with a decoder written here (struct + json), so a
writer bug is not hidden by the reader sharing it.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import struct

import numpy as np
import pytest
from test_checkpoint_hostile import crc32c_reference

import onemodel as om
from onemodel import checkpoint, nn
from onemodel.optim import SGD, Adam, AdamW
from onemodel.tensor import Tensor

ELEMENT = {"f32": "<f4", "i32": "<i4", "i64": "<i8", "u8": "u1"}


class Codes(nn.Module):
    """A module holding one buffer of each non-float dtype, and an empty one."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("codes", Tensor._wrap(np.arange(70, dtype=np.uint8)))
        self.register_buffer("flags", Tensor._wrap(np.array([[1, -2], [3, -4]], np.int32)))
        self.register_buffer("empty", Tensor._wrap(np.zeros((0, 3), np.float32)))
        self.register_buffer("count", Tensor._wrap(np.array(-(1 << 62), np.int64)))


def small(seed: int = 0) -> nn.Module:
    g = om.Generator(seed)
    return nn.Sequential(nn.Linear(5, 7, generator=g), nn.BatchNorm1d(7), nn.ReLU(),
                         nn.Dropout(0.2, seed=seed), nn.Linear(7, 3, generator=g))


def trained(seed: int = 0, steps: int = 3) -> tuple[nn.Module, AdamW]:
    model = small(seed)
    opt = AdamW(model.parameters(), lr=0.01, weight_decay=0.05)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = om.from_numpy(rng.standard_normal((6, 5)).astype(np.float32))
        loss = (model(x) * model(x)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, opt


def decode(data: bytes) -> tuple[tuple, dict, dict]:
    """An independent reader: header fields, manifest object, name -> array."""
    header = struct.unpack_from("<8sIIQQQQQQ", data)
    m_len, d_off = header[4], header[5]
    manifest = json.loads(data[64:64 + m_len].decode("utf-8"))
    entries = manifest["model"] + manifest.get("optimizer", {}).get("state", [])
    arrays = {}
    for e in entries:
        start = d_off + e["offset"]
        raw = data[start:start + e["length"]]
        arrays[e["name"]] = np.frombuffer(raw, ELEMENT[e["dtype"]]).reshape(e["shape"])
    return header, manifest, arrays


# -- the format -----------------------------------------------------------------------------
@pytest.mark.parametrize("version", [2, 1])
def test_header_fields_and_padding(version):
    model, opt = trained()
    data = checkpoint.to_bytes(model, opt, version=version)
    (magic, v, flags, m_off, m_len, d_off, d_len, f_len, last), _, _ = decode(data)
    assert (magic, v, flags, m_off) == (b"ONEMCKPT", version, 0, 64)
    # Version 2's last field is the CRC-32C of everything after the header; version 1's is 0.
    assert last == (crc32c_reference(data[64:]) if version == 2 else 0)
    assert d_off == -(-(64 + m_len) // 64) * 64
    assert f_len == len(data) and d_len == len(data) - d_off
    assert data[64 + m_len:d_off] == bytes(d_off - 64 - m_len)
    with pytest.raises(ValueError, match="version 3"):
        checkpoint.to_bytes(model, opt, version=3)


def test_manifest_field_order_compactness_and_alignment():
    model, opt = trained()
    data = checkpoint.to_bytes(model, opt, extra={"samples": 18})
    header, manifest, _ = decode(data)
    text = data[64:64 + header[4]].decode()
    assert text == json.dumps(manifest, separators=(",", ":"), ensure_ascii=False)
    assert list(manifest) == ["format", "version", "checksum", "model", "optimizer", "extra"]
    assert manifest["format"] == "onemodel-checkpoint" and manifest["version"] == 2
    assert manifest["checksum"] == "crc32c"
    _, v1, _ = decode(checkpoint.to_bytes(model, opt, extra={"samples": 18}, version=1))
    assert v1 == {k: v for k, v in manifest.items() if k != "checksum"} | {"version": 1}
    o = manifest["optimizer"]
    assert list(o) == ["kind", "step", "hyper", "state"]
    assert (o["kind"], o["step"]) == ("AdamW", 3)
    assert [h["name"] for h in o["hyper"]] == list(opt.hyper_parameters())
    assert [list(h) for h in o["hyper"]] == [["name", "bits"]] * len(o["hyper"])
    assert o["hyper"][0]["bits"] == struct.unpack("<I", struct.pack("<f", 0.01))[0]
    assert manifest["extra"] == [{"key": "samples", "value": 18}]
    entries = manifest["model"] + o["state"]
    assert [e["name"] for e in manifest["model"]] == [n for n, _ in model._named_state()]
    assert [e["name"] for e in o["state"]] == list(opt.state_tensors())
    end = 0
    for e in entries:
        assert list(e) == ["name", "dtype", "shape", "offset", "length"]
        assert e["offset"] % 64 == 0 and e["offset"] >= end
        assert e["offset"] - end < 64  # no gap beyond the padding
        assert e["length"] == math.prod(e["shape"]) * np.dtype(ELEMENT[e["dtype"]]).itemsize
        end = e["offset"] + e["length"]
    assert end == header[6]


def test_independent_decoder_reads_every_tensor():
    model, opt = trained()
    _, manifest, arrays = decode(checkpoint.to_bytes(model, opt))
    for name, t in model._named_state():
        np.testing.assert_array_equal(arrays[name], t._data)
        assert arrays[name].dtype == t._data.dtype.newbyteorder("<")
    for name, arr in opt.state_tensors().items():
        np.testing.assert_array_equal(arrays[name], arr)
    assert arrays["3.draws"].dtype == np.int64 and int(arrays["3.draws"]) > 0


def test_dtypes_f32_i32_i64_u8_and_empty_round_trip():
    source, target = Codes(), Codes()
    for t in target.buffers():
        t._data[...] = 0
    data = checkpoint.to_bytes(source)
    _, manifest, _ = decode(data)
    assert [(e["dtype"], e["shape"]) for e in manifest["model"]] == [
        ("u8", [70]), ("i32", [2, 2]), ("f32", [0, 3]), ("i64", [])]
    assert checkpoint.from_bytes(data, target) == {}
    for (_, a), (_, b) in zip(source._named_state(), target._named_state()):
        assert a._data.dtype == b._data.dtype
        np.testing.assert_array_equal(a._data, b._data)
    # SGD's per-parameter flags are i32.
    model = small()
    sgd = SGD(model.parameters(), lr=0.1, momentum=0.9)
    _, manifest, _ = decode(checkpoint.to_bytes(model, sgd))
    assert {e["dtype"] for e in manifest["optimizer"]["state"]} == {"f32", "i32"}


def test_floats_survive_by_bit_pattern():
    patterns = np.array([0x7FC12345, 0xFFC00001, 0x7F800001, 0x80000000, 0x00000000,
                         0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7F7FFFFF,
                         0x3F800000, 0xBF800000], np.uint32)
    model, target = small(), small(1)
    w = model[0].weight._data.reshape(-1)
    w[:len(patterns)] = patterns.view(np.float32)
    checkpoint.from_bytes(checkpoint.to_bytes(model), target)
    got = target[0].weight._data.reshape(-1)[:len(patterns)].view(np.uint32)
    np.testing.assert_array_equal(got, patterns)


def test_same_state_same_bytes_and_state_hash():
    a, opt_a = trained(3)
    b, opt_b = trained(3)
    assert checkpoint.to_bytes(a, opt_a) == checkpoint.to_bytes(b, opt_b)
    # The hash is of the version-1 bytes: version 2's checksum never moves it.
    assert checkpoint.state_hash(a, opt_a) == hashlib.sha256(
        checkpoint.to_bytes(a, opt_a, version=1)).hexdigest()
    # A load into a differently initialized target reproduces the bytes exactly.
    c = small(9)
    opt_c = AdamW(c.parameters(), lr=0.5, weight_decay=0.05)
    extra = checkpoint.from_bytes(checkpoint.to_bytes(a, opt_a, {"k": -5}), c, opt_c)
    assert extra == {"k": -5}
    assert checkpoint.to_bytes(c, opt_c) == checkpoint.to_bytes(a, opt_a)
    assert opt_c.step_count == 3 and opt_c.lr == opt_a.lr
    assert checkpoint.state_hash(c, opt_c) == checkpoint.state_hash(a, opt_a)
    c[0].weight._data[0, 0] = -c[0].weight._data[0, 0]
    assert checkpoint.state_hash(c, opt_c) != checkpoint.state_hash(a, opt_a)


def test_restores_lr_weight_decay_step_but_fixed_settings_must_match():
    model, opt = trained()
    opt.lr, opt.weight_decay = 0.0, 0.25  # a schedule may end at a rate of 0
    data = checkpoint.to_bytes(model, opt)
    other = AdamW(small().parameters(), lr=0.3, weight_decay=0.0)
    checkpoint.from_bytes(data, small(), other)
    assert (other.lr, other.weight_decay, other.step_count) == (0.0, 0.25, 3)
    with pytest.raises(checkpoint.Mismatch):
        checkpoint.from_bytes(data, small(), AdamW(small().parameters(), betas=(0.8, 0.999)))
    with pytest.raises(checkpoint.Mismatch):
        checkpoint.from_bytes(data, small(), Adam(small().parameters()))


def test_model_only_file_and_model_only_load():
    model, opt = trained()
    full = checkpoint.to_bytes(model, opt)
    target = small(5)
    checkpoint.from_bytes(full, target)
    assert checkpoint.to_bytes(target) == checkpoint.to_bytes(model)
    with pytest.raises(checkpoint.Mismatch):
        checkpoint.from_bytes(checkpoint.to_bytes(model), target,
                              AdamW(target.parameters()))


def test_extra_sorted_by_utf16_code_units_and_range_checked():
    model = small()
    keys = ["b", "a", "B", "\uffff", "\U0001F600", "é", ""]
    _, manifest, _ = decode(checkpoint.to_bytes(model, extra={k: i for i, k in
                                                               enumerate(keys)}))
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, before U+FFFF.
    assert [e["key"] for e in manifest["extra"]] == ["", "B", "a", "b", "é", "\U0001F600",
                                                     "\uffff"]
    edge = {"lo": -(1 << 63), "hi": (1 << 63) - 1, "np": np.int64(7)}
    data = checkpoint.to_bytes(model, extra=edge)
    assert checkpoint.from_bytes(data, small()) == {"lo": -(1 << 63), "hi": (1 << 63) - 1,
                                                   "np": 7}
    for bad in ({"x": 1 << 63}, {"x": -(1 << 63) - 1}, {"x": True}, {"x": 1.0}, {"x": "1"},
                {1: 1}, {"\ud800": 1}, {"x": None}):
        with pytest.raises(ValueError):
            checkpoint.to_bytes(model, extra=bad)
    with pytest.raises(ValueError):
        checkpoint.to_bytes(model, extra={f"key{i:06d}": i for i in range(30000)})


def test_error_kinds_and_hierarchy():
    for cls in (checkpoint.BadHeader, checkpoint.BadManifest, checkpoint.BadTensor,
                checkpoint.Mismatch):
        assert issubclass(cls, checkpoint.CheckpointError)
        assert cls("x").kind == cls.__name__
    with pytest.raises(TypeError):
        checkpoint.from_bytes("not bytes", small())
    data = checkpoint.to_bytes(small())
    assert checkpoint.from_bytes(bytearray(data), small()) == {}
    assert checkpoint.from_bytes(memoryview(data), small()) == {}


# -- atomic writes --------------------------------------------------------------------------
def _assert_only(folder, names):
    assert sorted(os.listdir(folder)) == sorted(names)


def test_save_writes_temp_fsyncs_renames_fsyncs_folder(tmp_path, monkeypatch):
    model, opt = trained()
    log = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        log.append(("fsync", "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"))
        real_fsync(fd)

    def replace(src, dst):
        assert os.path.dirname(os.path.abspath(src)) == str(tmp_path)
        log.append(("replace", os.path.basename(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = tmp_path / "a.ckpt"
    checkpoint.save(path, model, opt, extra={"n": 1})
    assert log == [("fsync", "file"), ("replace", "a.ckpt"), ("fsync", "dir")]
    assert path.read_bytes() == checkpoint.to_bytes(model, opt, {"n": 1})
    _assert_only(tmp_path, ["a.ckpt"])
    assert checkpoint.load(path, small(4), AdamW(small(4).parameters(),
                                                 weight_decay=0.05)) == {"n": 1}


def test_short_writes_are_completed(tmp_path, monkeypatch):
    model, opt = trained()
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, b: real_write(fd, bytes(b[:37])))
    checkpoint.save(tmp_path / "a.ckpt", model, opt)
    assert (tmp_path / "a.ckpt").read_bytes() == checkpoint.to_bytes(model, opt)


@pytest.mark.parametrize("failing", ["write", "fsync", "replace"])
def test_failed_save_keeps_the_previous_file_and_no_temporary(tmp_path, monkeypatch, failing):
    model, opt = trained()
    path = tmp_path / "a.ckpt"
    checkpoint.save(path, model, opt)
    previous = path.read_bytes()
    calls = []

    def boom(*args):
        calls.append(args)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, boom)
    model2, opt2 = trained(1, 4)
    with pytest.raises(OSError):
        checkpoint.save(path, model2, opt2)
    assert calls
    monkeypatch.undo()
    assert path.read_bytes() == previous
    _assert_only(tmp_path, ["a.ckpt"])
    # A first save that fails leaves nothing at all.
    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(OSError):
        checkpoint.save(tmp_path / "b.ckpt", model2, opt2)
    monkeypatch.undo()
    _assert_only(tmp_path, ["a.ckpt"])


# -- CheckpointManager ----------------------------------------------------------------------
def test_manager_keeps_last_and_latest(tmp_path):
    mgr = checkpoint.CheckpointManager(tmp_path / "run", keep_last=3)
    assert mgr.latest() is None
    model, opt = trained()
    paths = [mgr.save(step, model, opt, extra={"samples": step * 8}) for step in (10, 20, 30,
                                                                                 40, 50)]
    assert os.path.basename(paths[0]) == "step-00000010.ckpt"
    _assert_only(tmp_path / "run", ["step-00000030.ckpt", "step-00000040.ckpt",
                                    "step-00000050.ckpt"])
    assert mgr.latest() == paths[-1]
    assert checkpoint.load(mgr.latest(), small()) == {"samples": 400}
    # Steps past 10^8 sort by number, not by name length.
    mgr.save(123456789, model)
    assert mgr.latest().endswith("step-123456789.ckpt")
    assert len(os.listdir(tmp_path / "run")) == 3
    with pytest.raises(ValueError):
        checkpoint.CheckpointManager(tmp_path, keep_last=0)


def test_manager_best_copy_follows_the_metric(tmp_path):
    mgr = checkpoint.CheckpointManager(tmp_path, keep_last=2)
    states = {}
    for step, acc in [(1, 0.5), (2, 0.75), (3, 0.625), (4, 0.75)]:
        model, opt = trained(step)
        path = mgr.save(step, model, opt, metric=acc)
        states[step] = open(path, "rb").read()
    assert (tmp_path / "best.ckpt").read_bytes() == states[2]  # a tie does not replace it
    assert mgr.best_metric == 0.75
    _assert_only(tmp_path, ["best.ckpt", "step-00000003.ckpt", "step-00000004.ckpt"])
    extra = checkpoint.load(tmp_path / "best.ckpt", small())
    assert extra == {checkpoint.METRIC_KEY: struct.unpack("<q", struct.pack("<d", 0.75))[0]}
    # A manager opened later knows the best so far from best.ckpt.
    again = checkpoint.CheckpointManager(tmp_path, keep_last=2)
    assert again.best_metric == 0.75
    again.save(5, small(), metric=0.7)
    assert (tmp_path / "best.ckpt").read_bytes() == states[2]
    again.save(6, small(), metric=0.8)
    assert checkpoint.load(tmp_path / "best.ckpt", small())[checkpoint.METRIC_KEY] == \
        struct.unpack("<q", struct.pack("<d", 0.8))[0]
    # Lower is better for a loss.
    losses = checkpoint.CheckpointManager(tmp_path / "loss")
    for step, loss in [(1, 2.0), (2, 1.5), (3, 1.75)]:
        losses.save(step, small(step), metric=loss, higher_is_better=False)
    assert losses.best_metric == 1.5
    assert (tmp_path / "loss" / "best.ckpt").read_bytes() == checkpoint.to_bytes(
        small(2), extra={checkpoint.METRIC_KEY: struct.unpack("<q", struct.pack("<d", 1.5))[0]})
    for bad in (math.nan, math.inf, "0.5"):
        with pytest.raises(ValueError):
            losses.save(9, small(), metric=bad)
    with pytest.raises(ValueError):
        losses.save(9, small(), extra={checkpoint.METRIC_KEY: 1})


class Picky(SGD):
    """An optimizer with a rule of its own on restored values."""

    def _set_hyper_parameters(self, values):
        super()._set_hyper_parameters(values)  # sets the weight decay, then refuses
        if values["lr"] >= 1.0:
            raise ValueError("Picky: lr must be < 1")


def test_optimizer_refusing_saved_values_is_bad_manifest_and_changes_nothing():
    model = small()
    opt = Picky(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.5)
    opt.lr = 2.0  # allowed by the setter, refused on load
    data = checkpoint.to_bytes(model, opt)
    target = small(3)
    target_opt = Picky(target.parameters(), lr=0.1, momentum=0.9)
    before = checkpoint.to_bytes(target, target_opt)
    with pytest.raises(checkpoint.BadManifest):
        checkpoint.from_bytes(data, target, target_opt)
    assert checkpoint.to_bytes(target, target_opt) == before
    assert target_opt.weight_decay == 0.0


# -- second round (issue 16) ----------------------------------------------------------------
def test_save_refuses_what_the_reader_would_refuse_before_writing(tmp_path):
    model, opt = trained()
    path = tmp_path / "a.ckpt"
    checkpoint.save(path, model, opt)
    previous = path.read_bytes()
    opt.step_count = (1 << 63) - 1
    checkpoint.from_bytes(checkpoint.to_bytes(model, opt), small(), AdamW(small().parameters(),
                                                                          weight_decay=0.05))
    opt.step_count += 1  # one more step: the reader takes steps below 2^63 only
    with pytest.raises(ValueError, match="saving .*a.ckpt.*optimizer.step"):
        checkpoint.save(path, model, opt)
    with pytest.raises(ValueError, match="optimizer.step"):
        checkpoint.to_bytes(model, opt)
    assert path.read_bytes() == previous and os.listdir(tmp_path) == ["a.ckpt"]
    mgr = checkpoint.CheckpointManager(tmp_path / "run")
    with pytest.raises(ValueError, match="step-00000007.ckpt"):
        mgr.save(7, model, opt)
    assert os.listdir(tmp_path / "run") == []


def test_brackets_inside_strings_are_no_depth():
    model = small()
    data = checkpoint.to_bytes(model, extra={"[" * 40 + "{" * 40: 1})
    assert checkpoint.from_bytes(data, small()) == {"[" * 40 + "{" * 40: 1}


def test_manager_ignores_a_best_ckpt_it_cannot_read(tmp_path):
    # A manifest that is a JSON string of brackets, with a valid checksum.
    text = b'"' + b"[" * 40 + b'"'
    body = text + bytes(-(64 + len(text)) % 64)
    header = struct.pack("<8sIIQQQQQQ", b"ONEMCKPT", 2, 0, 64, len(text), 64 + len(body), 0,
                         64 + len(body), crc32c_reference(body))
    (tmp_path / "best.ckpt").write_bytes(header + body)
    with pytest.raises(checkpoint.BadManifest, match="not a JSON object"):
        checkpoint.load(tmp_path / "best.ckpt", small())
    assert checkpoint.CheckpointManager(tmp_path).best_metric is None


def _saves(path, model, n, errors):
    try:
        for _ in range(n):
            checkpoint.save(path, model)
    except BaseException as e:  # reported by the test
        errors.append(e)


def test_concurrent_saves_to_one_path_all_succeed(tmp_path):
    import threading

    path = tmp_path / "a.ckpt"
    models = [small(1), small(2)]
    good = [checkpoint.to_bytes(m) for m in models]
    errors: list = []
    threads = [threading.Thread(target=_saves, args=(path, m, 150, errors)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert path.read_bytes() in good and os.listdir(tmp_path) == ["a.ckpt"]


@pytest.mark.skipif(checkpoint._atomic.fcntl is None, reason="flock: POSIX")
def test_a_temporary_taken_for_abandoned_before_its_lock_is_made_again(tmp_path, monkeypatch):
    """Another save may lock and remove a temporary between its creation and its own save's
    lock; that save then sees its name gone and makes a new one."""
    real = checkpoint._atomic.fcntl
    taken: list = []

    class Racing:
        LOCK_EX, LOCK_NB = real.LOCK_EX, real.LOCK_NB

        @staticmethod
        def flock(fd, op):
            if not taken and op == real.LOCK_EX:  # the first lock: another save got there
                taken.append(os.readlink(f"/proc/self/fd/{fd}"))
                os.unlink(taken[0])
            real.flock(fd, op)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    monkeypatch.setattr(checkpoint._atomic, "fcntl", Racing)
    checkpoint.save(tmp_path / "a.ckpt", small())
    assert taken and taken[0].endswith(".tmp")
    assert os.listdir(tmp_path) == ["a.ckpt"]
    assert (tmp_path / "a.ckpt").read_bytes() == checkpoint.to_bytes(small())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_concurrent_saves_from_two_processes_all_succeed(tmp_path):
    path = tmp_path / "a.ckpt"
    pids = []
    for seed in (1, 2):
        pid = os.fork()
        if pid == 0:
            errors: list = []
            _saves(path, small(seed), 150, errors)
            os._exit(1 if errors else 0)
        pids.append(pid)
    assert [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids] == [0, 0]
    assert path.read_bytes() in [checkpoint.to_bytes(small(s)) for s in (1, 2)]
    assert os.listdir(tmp_path) == ["a.ckpt"]


def test_load_refuses_what_is_not_a_regular_file(tmp_path):
    import threading

    model = small()
    before = checkpoint.to_bytes(model)
    with pytest.raises(checkpoint.BadHeader, match="is a directory"):
        checkpoint.load(tmp_path, model)
    (tmp_path / "empty.ckpt").write_bytes(b"")
    with pytest.raises(checkpoint.BadHeader, match="is empty"):
        checkpoint.load(tmp_path / "empty.ckpt", model)
    if os.path.exists("/dev/null"):
        with pytest.raises(checkpoint.BadHeader, match="is a character device"):
            checkpoint.load("/dev/null", model)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.ckpt"
        os.mkfifo(fifo)
        outcome: list = []

        def load():  # without a writer, opening the FIFO for reading would block
            try:
                checkpoint.load(fifo, model)
            except Exception as e:
                outcome.append(e)
        t = threading.Thread(target=load, daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), "load() blocked on a FIFO"
        assert type(outcome[0]) is checkpoint.BadHeader and "is a FIFO" in str(outcome[0])
        writer = os.open(fifo, os.O_RDWR)  # a FIFO with a writer
        try:
            with pytest.raises(checkpoint.BadHeader, match="is a FIFO"):
                checkpoint.load(fifo, model)
        finally:
            os.close(writer)
    assert checkpoint.to_bytes(model) == before


class _TruncatingFile:
    """A raw file whose reads stop at 4 KiB each; after the first, another process truncates
    the file to half its length."""

    def __init__(self, real, path):
        self.real, self.path, self.reads = real, path, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.real.close()

    def readinto(self, view):
        n = self.real.readinto(memoryview(view)[:4096])
        self.reads += 1
        if self.reads == 1:
            os.truncate(self.path, os.path.getsize(self.path) // 2)
        return n


def test_a_file_truncated_during_the_load_changes_nothing(tmp_path, monkeypatch):
    import builtins

    path = tmp_path / "a.ckpt"
    source, target = nn.Linear(64, 64), nn.Linear(64, 64)
    source.weight._data[...] = 3.0  # a partial load would show
    checkpoint.save(path, source)
    before = checkpoint.to_bytes(target)
    real_open = builtins.open
    monkeypatch.setattr(checkpoint._reader, "open",
                        lambda *a, **k: _TruncatingFile(real_open(*a, **k), path), raising=False)
    with pytest.raises(checkpoint.BadHeader, match="changed while being read"):
        checkpoint.load(path, target)
    assert checkpoint.to_bytes(target) == before


def test_mismatch_names_the_first_differing_tensor_and_the_missing_and_unexpected_ones():
    data = checkpoint.to_bytes(nn.Sequential(nn.Linear(5, 7), nn.Linear(7, 3)))
    with pytest.raises(checkpoint.Mismatch) as info:
        checkpoint.from_bytes(data, nn.Sequential(nn.Linear(5, 8), nn.Linear(8, 3)))
    assert "tensor 0 is '0.weight' f32 [7, 5] in the file, '0.weight' f32 [8, 5] in the " \
        "target" in str(info.value)
    with pytest.raises(checkpoint.Mismatch) as info:
        checkpoint.from_bytes(data, nn.Sequential(nn.Linear(5, 7, bias=False),
                                                  nn.Linear(7, 3), nn.Linear(3, 1)))
    message = str(info.value)
    assert "tensor 1 is '0.bias' f32 [7] in the file, '1.weight' f32 [3, 7]" in message
    assert "missing from the file: ['2.weight', '2.bias']" in message
    assert "not in the target: ['0.bias']" in message
    assert "the file has 4 tensors, the target 5" in message


def test_save_errors_name_the_destination_not_the_temporary(tmp_path, monkeypatch):
    path = tmp_path / "a.ckpt"

    def full(fd, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as info:
        checkpoint.save(path, small())
    assert info.value.errno == 28 and info.value.filename == str(path)
    assert str(path) in str(info.value) and ".tmp" not in str(info.value)
    monkeypatch.undo()
    monkeypatch.setattr(os, "replace", lambda src, dst: os.rename(src, tmp_path / "x" / "y"))
    with pytest.raises(OSError) as info:
        checkpoint.save(path, small())
    assert ".tmp" not in str(info.value) and str(path) in str(info.value)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
