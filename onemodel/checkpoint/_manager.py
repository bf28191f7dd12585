"""The run folder's checkpoints: CheckpointManager keeps the last few step-<n>.ckpt files and
a copy of the best one (its metric in the file's extra), crash-safe through best.pending."""
from __future__ import annotations

import contextlib
import math
import os
import re
import struct
import warnings
from typing import Any, Callable, Optional

import numpy as np

from ._atomic import _atomic_write, _write_small_file
from ._format import MANIFEST_MARGIN, CheckpointError, Mismatch
from ._reader import _extra_of, _read_file
from ._writer import _chunks_for

# -- rotation -------------------------------------------------------------------------------
_STEP_FILE = re.compile(r"step-(\d{8,})\.ckpt")
METRIC_KEY = "metric.f64"


def _metric_bits(metric: float) -> int:
    """A float64 metric as the signed 64-bit integer of its bit pattern (extra holds integers)."""
    return struct.unpack("<q", struct.pack("<d", metric))[0]


def _metric_of(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


BEST_PENDING = "best.pending"


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
