"""A run folder after a crash (issue 45): a torn metrics.jsonl, a kill between a checkpoint and
best.ckpt, a corrupt newest checkpoint, a bad best.ckpt. Each resumed run must end with the
folder of the uninterrupted run: the same checkpoints, best.ckpt and rows (times aside)."""
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import checkpoint, nn
from onemodel.data import DataLoader
from onemodel.optim import AdamW
from onemodel.train import Checkpoints, Evaluation, Trainer

STEPS = 12


def _trainer(folder, **kwargs):
    g = om.Generator(1)
    model = nn.Sequential(nn.Linear(6, 16, generator=g), nn.ReLU(), nn.Linear(16, 4, generator=g))
    gx = om.Generator(0)
    x = gx.uniform(-1.0, 1.0, (44, 6)).numpy()
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + 2 * (x[:, 2] > 0)
    # Validation on the training set's first 24 rows: its loss moves, and best.ckpt with it.
    return Trainer(model, F.cross_entropy, AdamW(model.parameters(), lr=3e-2),
                   DataLoader((x, y), 8, seed=4),
                   evaluation=Evaluation(DataLoader((x[:24], y[:24]), 8, shuffle=False), every=2,
                                         best_metric="loss"),
                   checkpoints=Checkpoints(str(folder), keep_last=2), callbacks=[], **kwargs)


def _rows(folder):
    with open(os.path.join(folder, "metrics.jsonl"), encoding="utf-8") as f:
        return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in f]


def _files(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))
            if name.endswith(".ckpt")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run's folder: its checkpoints and rows."""
    folder = tmp_path_factory.mktemp("reference")
    _trainer(folder).fit(STEPS)
    return _files(folder), _rows(folder)


def _cut_run(folder, steps):
    _trainer(folder).fit(steps)


def _assert_like_reference(folder, reference, leftover_allowed=False):
    files, rows = reference
    found = _files(folder)
    if leftover_allowed:  # killed in the last save's rotation: an older checkpoint stays
        extra = sorted(set(found) - set(files))
        oldest = min(n for n in files if n.startswith("step-"))
        assert len(extra) <= 1 and all(n.startswith("step-") and n < oldest for n in extra)
        for name in extra:
            del found[name]
    assert found == files
    assert _rows(folder) == rows
    assert not [n for n in os.listdir(folder) if n.endswith((".tmp", ".pending"))]


# -- metrics.jsonl --------------------------------------------------------------------------
TORN_TAILS = {
    "cut short": b'{"event": "step", "step": 7, "lo',
    "NUL tail": b"\0" * 300,
    "invalid UTF-8": b'{"event": "step", "step": 7, "loss": "\xff\xfe"}\n',
    "not an object": b"[7]\n",
}


@pytest.mark.parametrize("tail", list(TORN_TAILS))
def test_a_torn_last_line_is_dropped_on_resume_with_a_warning(tmp_path, reference, tail):
    _cut_run(tmp_path, 6)  # checkpoints at 2, 4, 6; rows to step 6
    with open(tmp_path / "metrics.jsonl", "ab") as f:
        f.write(TORN_TAILS[tail])
    lines = (tmp_path / "metrics.jsonl").read_bytes().count(b"\n") + (tail != "invalid UTF-8"
                                                                       and tail != "not an "
                                                                       "object")
    with pytest.warns(RuntimeWarning, match=rf"metrics.jsonl: dropping torn or undecodable "
                                            rf"line {lines} "):
        _trainer(tmp_path).fit(STEPS, resume=True)
    _assert_like_reference(tmp_path, reference)


def test_rows_after_the_checkpoint_are_dropped_not_doubled(tmp_path, reference):
    _cut_run(tmp_path, 7)  # rows to step 7, the last checkpoint at 7 (fit's end): remove it
    os.unlink(tmp_path / "step-00000007.ckpt")
    _trainer(tmp_path).fit(STEPS, resume=True)  # from step 6: row 7 is redone once
    _assert_like_reference(tmp_path, reference)


def test_killed_before_the_first_checkpoint_leaves_no_duplicate_rows(tmp_path, reference):
    log = tmp_path / "metrics.jsonl"
    _cut_run(tmp_path, 1)  # one row and step-00000001.ckpt: as if killed before any save
    os.unlink(tmp_path / "step-00000001.ckpt")
    assert len(log.read_text().splitlines()) == 1
    assert not _trainer(tmp_path).resume()
    _trainer(tmp_path).fit(STEPS, resume=True)
    _assert_like_reference(tmp_path, reference)


def test_the_truncation_is_atomic_and_fsynced(tmp_path, monkeypatch):
    _cut_run(tmp_path, 7)
    os.unlink(tmp_path / "step-00000007.ckpt")
    log = tmp_path / "metrics.jsonl"
    before = log.read_bytes()
    synced, real_fsync = [], os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}"))
                        or real_fsync(fd))

    def killed(src, dst):
        raise KeyboardInterrupt  # as a kill between the temporary's fsync and the rename

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        _trainer(tmp_path).fit(STEPS, resume=True)
    assert log.read_bytes() == before  # whole, untouched
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]  # none left
    assert any(os.path.basename(p) == "metrics.jsonl.tmp" for p in synced)
    monkeypatch.undo()
    trainer = _trainer(tmp_path)
    trainer.resume()
    rows = _rows(tmp_path)
    assert [r["step"] for r in rows][-1] == 6 and len(log.read_bytes()) < len(before)


# -- best.ckpt: a kill at every point of a save ---------------------------------------------
class Killed(BaseException):
    """A kill: no except clause of the library catches it."""


def _manager_saves(folder, metrics, start=0):
    """Saves checkpoints start+1.. of a model whose weights follow the step, with `metrics`
    (higher is better)."""
    manager = checkpoint.CheckpointManager(folder, keep_last=2)
    for step in range(start + 1, len(metrics) + 1):
        model = nn.Linear(2, 2, generator=om.Generator(step))
        manager.save(step, model, metric=metrics[step - 1])
    return manager


def _expected_best(metrics, done):
    """The bytes best.ckpt must hold once the checkpoints of steps 1..done exist."""
    best = max(range(1, done + 1), key=lambda s: (metrics[s - 1], -s))
    model = nn.Linear(2, 2, generator=om.Generator(best))
    return checkpoint.to_bytes(model, extra={checkpoint.METRIC_KEY: struct.unpack(
        "<q", struct.pack("<d", metrics[best - 1]))[0]})


METRICS = [0.5, 0.75, 0.625, 0.875, 0.875, 0.25, 1.0]


def _operations(monkeypatch, at):
    """Counts the manager's file operations, raising Killed before operation `at`."""
    count = [0]

    def hooked(real):
        def op(*args, **kwargs):
            if count[0] == at:
                raise Killed
            count[0] += 1
            return real(*args, **kwargs)
        return op

    monkeypatch.setattr(checkpoint._manager, "_atomic_write", hooked(checkpoint._atomic_write))
    monkeypatch.setattr(checkpoint._manager, "_write_small_file",
                        hooked(checkpoint._write_small_file))
    monkeypatch.setattr(os, "unlink", hooked(os.unlink))
    return count


def test_best_ckpt_agrees_with_the_checkpoints_after_a_kill_at_every_point(tmp_path,
                                                                           monkeypatch):
    total = _operations(monkeypatch, -1)
    _manager_saves(tmp_path / "count", METRICS)
    points = total[0]
    monkeypatch.undo()
    assert points >= 3 * len(METRICS)
    for at in range(points + 1):
        folder = tmp_path / str(at)
        _operations(monkeypatch, at)
        with pytest.raises(Killed) if at < points else _nothing():
            _manager_saves(folder, METRICS)
        monkeypatch.undo()
        done = max((int(n[5:13]) for n in os.listdir(folder) if n.startswith("step-")),
                   default=0)
        manager = checkpoint.CheckpointManager(folder, keep_last=2)
        manager.recover()
        if done:  # opened again: best.ckpt is the best of the checkpoints written
            assert manager.best_metric == max(METRICS[:done])
            assert (folder / "best.ckpt").read_bytes() == _expected_best(METRICS, done)
        assert not (folder / checkpoint.BEST_PENDING).exists()
        _manager_saves(folder, METRICS, start=done)  # the run goes on to its end
        assert (folder / "best.ckpt").read_bytes() == _expected_best(METRICS, len(METRICS))
        left = set(os.listdir(folder)) - {"best.ckpt", "step-00000006.ckpt",
                                          "step-00000007.ckpt"}
        # Killed in the last save's rotation, step 5 stays until a next save rotates it.
        assert left == set() or (done == len(METRICS) and left == {"step-00000005.ckpt"})


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_pending_best_naming_a_missing_checkpoint_leaves_best_ckpt(tmp_path):
    _manager_saves(tmp_path, METRICS[:2])
    before = (tmp_path / "best.ckpt").read_bytes()
    (tmp_path / checkpoint.BEST_PENDING).write_text("step-00000003.ckpt\n")
    assert checkpoint.CheckpointManager(tmp_path).best_metric == 0.75
    assert (tmp_path / "best.ckpt").read_bytes() == before
    assert not (tmp_path / checkpoint.BEST_PENDING).exists()
    (tmp_path / checkpoint.BEST_PENDING).write_text("../../etc/passwd\n")
    with pytest.warns(RuntimeWarning, match="names no checkpoint"):
        checkpoint.CheckpointManager(tmp_path).recover()
    assert (tmp_path / "best.ckpt").read_bytes() == before


def test_trainer_resume_repairs_a_stale_best_ckpt(tmp_path, reference):
    _cut_run(tmp_path, 6)
    # As killed after step 6's checkpoint was renamed, before best.ckpt was replaced.
    (tmp_path / checkpoint.BEST_PENDING).write_text("step-00000006.ckpt\n")
    (tmp_path / "best.ckpt").write_bytes((tmp_path / "step-00000004.ckpt").read_bytes())
    trainer = _trainer(tmp_path)
    assert trainer.resume() and trainer.step == 6
    assert (tmp_path / "best.ckpt").read_bytes() == (tmp_path / "step-00000006.ckpt").read_bytes()
    trainer.fit(STEPS)
    _assert_like_reference(tmp_path, reference)


# -- a corrupt newest checkpoint, a bad best.ckpt -------------------------------------------
def _flip_a_byte(path, at):
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "empty", "directory"])
def test_resume_skips_a_corrupt_newest_checkpoint_with_a_warning(tmp_path, reference, damage):
    _cut_run(tmp_path, 6)  # keeps step 4 and 6
    newest = tmp_path / "step-00000006.ckpt"
    if damage == "flipped byte":
        _flip_a_byte(newest, 200)
    elif damage == "directory":
        newest.unlink()
        newest.mkdir()
    else:
        newest.write_bytes(newest.read_bytes()[:100 if damage == "truncated" else 0])
    trainer = _trainer(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"step-00000006\.ckpt cannot be read"):
        assert trainer.resume()
    assert trainer.step == 4
    if damage == "directory":
        newest.rmdir()  # the run would write its step 6 over it
    trainer.fit(STEPS)
    _assert_like_reference(tmp_path, reference)


def test_resume_with_no_intact_checkpoint_raises_instead_of_restarting(tmp_path):
    _cut_run(tmp_path, 4)
    for name in ("step-00000002.ckpt", "step-00000004.ckpt"):
        _flip_a_byte(tmp_path / name, 300)
    with pytest.warns(RuntimeWarning, match="step-00000004.ckpt cannot be read"):
        with pytest.raises(checkpoint.CheckpointError):
            _trainer(tmp_path).fit(STEPS, resume=True)


def test_a_checkpoint_of_another_model_is_not_skipped(tmp_path):
    _cut_run(tmp_path, 4)
    other = nn.Linear(3, 3)
    checkpoint.save(tmp_path / "step-00000004.ckpt", other)
    with pytest.raises(checkpoint.Mismatch):
        _trainer(tmp_path).resume()


def _huge_best(path, manifest_length):
    """A best.ckpt whose header claims a manifest of `manifest_length` bytes, the file sparse."""
    header = checkpoint.HEADER.pack(checkpoint.MAGIC, 2, 0, 64, manifest_length,
                                    64 + manifest_length, 0, 64 + manifest_length, 0)
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(64 + manifest_length)


def test_a_huge_best_ckpt_neither_blocks_the_trainer_nor_is_read(tmp_path, reference,
                                                                  monkeypatch):
    _cut_run(tmp_path, 6)
    _huge_best(tmp_path / "best.ckpt", 1 << 40)  # 1 TiB claimed, nothing on disk
    read = []
    real = checkpoint._read_file
    monkeypatch.setattr(checkpoint._manager, "_read_file", lambda p: read.append(p) or real(p))
    start = time.monotonic()
    trainer = _trainer(tmp_path)
    assert time.monotonic() - start < 5
    assert trainer.manager.best_metric is None  # counted as none: too large to be a copy
    assert not [p for p in read if p.endswith("best.ckpt")]
    monkeypatch.undo()
    trainer.fit(STEPS, resume=True)
    # The evaluations after the resume alone competed: best.ckpt holds the lowest of them.
    losses = [r["loss"] for r in _rows(tmp_path) if r["event"] == "eval" and r["step"] > 6]
    extra = checkpoint.load(tmp_path / "best.ckpt", _trainer(tmp_path / "x").model)
    assert struct.unpack("<d", struct.pack("<q", extra[checkpoint.METRIC_KEY]))[0] == min(losses)


# -- real kills -----------------------------------------------------------------------------
KILLED_RUN = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    sys.path.insert(0, sys.argv[3])
    from test_run_folder_faults import _trainer, STEPS
    _trainer(sys.argv[1]).fit(STEPS, resume=True)
""")


@pytest.mark.slow
def test_sigkill_at_random_instants_never_breaks_the_run_folder(tmp_path, reference):
    rng = np.random.default_rng(45)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.abspath(om.__file__)))
    env = dict(os.environ, OMP_NUM_THREADS="1", ONEMODEL_NUM_THREADS="1")
    # How long a whole run takes here, so the kills fall inside it.
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", KILLED_RUN, str(tmp_path / "timing"), here, root],
                   check=True, env=env)
    span = time.monotonic() - start
    for trial in range(8):
        folder = tmp_path / str(trial)
        for _ in range(3):  # killed up to three times, then left to finish
            child = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(folder), here, root],
                                     env=env)
            time.sleep(rng.uniform(0.3, 1.0) * span)
            child.send_signal(signal.SIGKILL)
            child.wait()
        subprocess.run([sys.executable, "-W", "ignore", "-c", KILLED_RUN, str(folder), here,
                        root], check=True, env=env)
        _assert_like_reference(folder, reference, leftover_allowed=True)


def test_any_torn_tail_is_dropped_and_the_rows_before_it_kept(tmp_path):
    from onemodel.metrics_log import MetricsLog

    rng = np.random.default_rng(4)
    rows = [json.dumps({"event": "step", "step": s, "loss": 0.5 / s}) + "\n" for s in (1, 2, 3)]
    whole = "".join(rows).encode()
    cut = json.dumps({"event": "eval", "step": 4, "loss": 0.25}).encode()
    for trial in range(300):
        kind = trial % 3
        if kind == 0:  # a row cut anywhere before its newline
            tail = cut[:rng.integers(1, len(cut))]
        elif kind == 1:  # random bytes (invalid UTF-8, NULs, newlines among them)
            tail = rng.integers(0, 256, rng.integers(1, 64)).astype(np.uint8).tobytes()
        else:  # a run of NULs, as a power cut leaves
            tail = bytes(int(rng.integers(1, 4096)))
        path = tmp_path / f"{trial}.jsonl"
        path.write_bytes(whole + tail)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            MetricsLog(str(path)).truncate_after(2)
        assert path.read_bytes() == "".join(rows[:2]).encode(), tail
