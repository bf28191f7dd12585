"""Crash safety of checkpoint.save: a child process saving large checkpoints in a loop is killed
with SIGKILL at random moments, and the file at the target path must always be a complete old or
new checkpoint; the same harness sees the corruption a naive direct write leaves. Then OSError
(ENOSPC, EIO) injected at every step of a real save: before the rename the destination keeps its
bytes, after it (the folder fsync) the new checkpoint is complete; no temporary is left and the
OSError propagates unwrapped with its errno.
"""
from __future__ import annotations

import errno
import os
import random
import re
import signal
import time

import numpy as np
import pytest

from onemodel import checkpoint, nn

posix_only = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"),
                                reason="needs fork and SIGKILL (POSIX)")
TEMPORARY = re.compile(r"\.target\.ckpt\.[a-z0-9_]{8}\.tmp")


def states() -> tuple[nn.Module, list[bytes]]:
    """A 4 MiB model and the bytes of its two distinguishable states (all 1s, all 2s)."""
    model = nn.Linear(1024, 1024, bias=False)
    out = []
    for value in (1.0, 2.0):
        model.weight._data[...] = value
        out.append(checkpoint.to_bytes(model, extra={"value": int(value)}))
    return model, out


def set_state(model: nn.Module, which: int) -> None:
    model.weight._data[...] = 1.0 + which


def saver(path: str, model: nn.Module, naive: bool, done_fd: int) -> None:
    """The child: saves the two states in turns for ever, one byte to done_fd after each."""
    which = 1
    while True:
        set_state(model, which)
        if naive:
            data = checkpoint.to_bytes(model, extra={"value": which + 1})
            with open(path, "wb") as f:
                f.write(data)
        else:
            checkpoint.save(path, model, extra={"value": which + 1})
        os.write(done_fd, b"x")
        which ^= 1


def read_bytes(fd: int, n: int) -> int:
    """Blocks until n bytes came through fd (or it closed); how many did."""
    got = 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            break
        got += len(chunk)
    return got


def kill_loop(tmp_path, naive: bool, kills: int) -> dict:
    """Starts a saver, kills it after a random delay, checks the target; `kills` times."""
    model, good = states()
    path = str(tmp_path / "target.ckpt")
    checkpoint.save(path, model, extra={"value": 2})
    # One save's duration sets the range of the random delays (a few saves' worth).
    t0 = time.perf_counter()
    checkpoint.save(path, model, extra={"value": 2})
    span = 3 * (time.perf_counter() - t0)
    rng = random.Random(1234)
    seen = {"kills": 0, "corrupt": 0, "old_or_new": 0, "saves": 0, "stale_temporaries": 0,
            "values": set()}
    before: set[str] = set()
    for round_ in range(kills):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            try:
                os.close(read_end)
                saver(path, model, naive, write_end)
            finally:
                os._exit(1)
        os.close(write_end)
        # Waiting for 0, 1 or 2 completed saves before the random delay lands the kills in the
        # first, the second and later saves however loaded the machine is: both states occur.
        awaited = read_bytes(read_end, round_ % 3)
        time.sleep(rng.uniform(0, span))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        seen["kills"] += 1
        saves = awaited + len(os.read(read_end, 1 << 16))
        os.close(read_end)
        seen["saves"] += saves
        with open(path, "rb") as f:
            data = f.read()
        if data in good:
            seen["old_or_new"] += 1
            assert checkpoint.load(path, model) == {"value": good.index(data) + 1}
            seen["values"].add(good.index(data) + 1)
        else:
            seen["corrupt"] += 1
            with pytest.raises(checkpoint.CheckpointError):
                checkpoint.load(path, model)
            set_state(model, 1)
            checkpoint.save(path, model, extra={"value": 2})  # the next round starts whole
        now = {e for e in os.listdir(tmp_path) if TEMPORARY.fullmatch(e)}
        if saves:  # a completed save removed every temporary that existed before it began
            assert not now & before, (now, before)
        seen["stale_temporaries"] += len(now)
        before = now
    return seen


@pytest.mark.slow
@posix_only
def test_sigkill_during_save_always_leaves_a_complete_old_or_new_checkpoint(tmp_path):
    seen = kill_loop(tmp_path, naive=False, kills=200)
    print("atomic save:", seen)
    assert seen["kills"] == seen["old_or_new"] == 200 and seen["corrupt"] == 0
    assert seen["saves"] > 0 and seen["values"] == {1, 2}
    # The last save removes whatever temporaries earlier kills left.
    model, _ = states()
    checkpoint.save(tmp_path / "target.ckpt", model)
    assert os.listdir(tmp_path) == ["target.ckpt"]


@pytest.mark.slow
@posix_only
def test_the_same_harness_sees_a_naive_direct_write_corrupt_the_file(tmp_path):
    seen = kill_loop(tmp_path, naive=True, kills=60)
    print("naive write:", seen)
    assert seen["corrupt"] > 0


# -- injected OSError at every step of a save -----------------------------------------------
STEPS = ("open", "write", "fsync", "close", "replace")


class Injector:
    """Wraps the os calls a save makes: records them, and fails the `fail_at`-th one."""

    def __init__(self, monkeypatch, fail_at: int = -1, code: int = errno.ENOSPC) -> None:
        self.calls: list[str] = []
        self.fail_at, self.code = fail_at, code
        for name in STEPS:
            monkeypatch.setattr(os, name, self.wrap(name, getattr(os, name)))

    def wrap(self, name, real):
        def call(*args, **kwargs):
            self.calls.append(name)
            if len(self.calls) - 1 == self.fail_at:
                if name == "close":  # close releases the descriptor even when it fails
                    real(*args, **kwargs)
                raise OSError(self.code, os.strerror(self.code))
            return real(*args, **kwargs)
        return call


def two_models() -> tuple[nn.Module, nn.Module]:
    old, new = nn.Linear(40, 30), nn.Linear(40, 30)
    old.weight._data[...] = 1.0
    new.weight._data[...] = -3.0
    return old, new


@posix_only
def test_a_real_save_makes_these_steps(tmp_path, monkeypatch):
    old, _ = two_models()
    injector = Injector(monkeypatch)
    checkpoint.save(tmp_path / "a.ckpt", old)
    calls = injector.calls
    # open the temporary, its writes, fsync, rename, close (the temporary stays open, locked,
    # through the rename: no other save takes it for abandoned), then the folder: open, fsync,
    # close
    assert calls[0] == "open" and calls[-6:] == ["fsync", "replace", "close", "open", "fsync",
                                                 "close"]
    assert set(calls[1:-6]) == {"write"} and len(calls) >= 9


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
def test_oserror_at_every_step_leaves_the_destination_old_or_complete(tmp_path, monkeypatch,
                                                                      code):
    old, new = two_models()
    path = tmp_path / "a.ckpt"
    counter = Injector(monkeypatch)
    checkpoint.save(path, new)
    steps = list(counter.calls)
    monkeypatch.undo()
    new_bytes = path.read_bytes()
    rename = steps.index("replace")
    for fail_at, step in enumerate(steps):
        for target_exists in (True, False):
            path.unlink(missing_ok=True)
            if target_exists:
                checkpoint.save(path, old)
            previous = path.read_bytes() if target_exists else None
            Injector(monkeypatch, fail_at, code)
            with pytest.raises(OSError) as info:
                checkpoint.save(path, new)
            monkeypatch.undo()
            assert info.value.errno == code and type(info.value) is not checkpoint.CheckpointError
            now = path.read_bytes() if path.exists() else None
            if fail_at <= rename:
                assert now == previous, (fail_at, step)
            else:  # only the folder's fsync comes after the rename: the new file is whole
                assert now == new_bytes, (fail_at, step)
            assert os.listdir(tmp_path) == ([] if now is None else ["a.ckpt"]), (fail_at, step)
    np.testing.assert_array_equal(old.weight._data, 1.0)
