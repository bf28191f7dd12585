"""Trainer callbacks: `Callback` (the hooks), `ProgressBar` (what the run shows on stderr),
`CSVLogger` (one CSV row per step and evaluation), `EarlyStopping` (ends fit() when a monitored
evaluation stops improving), and the two the Trainer makes itself: a plain function f(info)
given as a callback, and the run folder's metrics.jsonl (onemodel/metrics_log.py)."""
from __future__ import annotations

import csv
import io
import math
import os
from typing import IO, Any, Callable, Optional

from ..checkpoint import _write_small_file
from ..metrics_log import MetricsLog
from ..progress import Progress
from .options import _DIRECTIONS, _count


class Callback:
    """The hooks the Trainer calls, in the order of its `callbacks`, on every worker (those that
    write act on rank 0 alone). `info` is what train_step() and evaluate() return. Setting
    `trainer.should_stop = True` ends fit() after the current step (its evaluation and
    checkpoint included); fit() still writes its final checkpoint."""

    def on_fit_start(self, trainer: Any) -> None:
        """When fit() starts, after a resume: `trainer.step` is where it continues from and
        `trainer.max_steps` where it stops."""

    def on_step_end(self, trainer: Any, info: dict) -> None:
        """After each step: info = {"event": "step", "step", "loss", "lr", "grad_norm",
        "stepped", "time"}."""

    def on_eval_end(self, trainer: Any, info: dict) -> None:
        """After each evaluation of fit(): info = {"event": "eval", "step", "loss", "accuracy",
        and each metric of the Evaluation}."""

    def on_checkpoint(self, trainer: Any) -> None:
        """Before a checkpoint of `trainer.step` is written."""

    def on_fit_end(self, trainer: Any) -> None:
        """When fit() ends, by an exception too."""


class FunctionCallback(Callback):
    """A function f(info) given as a callback: called after every step and every evaluation."""

    def __init__(self, function: Callable[[dict], Any]) -> None:
        self.function = function

    def on_step_end(self, trainer: Any, info: dict) -> None:
        self.function(info)

    def on_eval_end(self, trainer: Any, info: dict) -> None:
        self.function(info)


class ProgressBar(Callback):
    """Shows the run on stderr from rank 0 (onemodel/progress.py): a live bar on a terminal,
    one line per epoch otherwise (`live` True or False forces either); `every` > 0 adds a line
    of the step's numbers every that many steps."""

    def __init__(self, live: Optional[bool] = None, every: int = 0) -> None:
        if live not in (None, True, False):
            raise ValueError(f"ProgressBar: live must be None, True or False, got {live!r}")
        _count("ProgressBar", "every", every, 0)
        self.live, self.every = live, every
        self._shown: Optional[Progress] = None

    def on_fit_start(self, trainer: Any) -> None:
        if trainer.rank == 0:
            try:
                per_epoch = max(len(trainer.loader) // trainer.accumulate, 0)
            except TypeError:  # a loader without len() has no epochs to show
                per_epoch = 0
            self._shown = Progress(trainer.max_steps, per_epoch, live=self.live)

    def on_step_end(self, trainer: Any, info: dict) -> None:
        if self._shown is None:
            return
        self._shown.step(info)
        if self.every and info["step"] % self.every == 0:
            self._shown.line(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                      for k, v in info.items()
                                      if k != "event" and v is not None))

    def on_eval_end(self, trainer: Any, info: dict) -> None:
        if self._shown is not None:
            self._shown.evaluation(info)

    def on_fit_end(self, trainer: Any) -> None:
        if self._shown is not None:
            self._shown.close()
            self._shown = None


class RunLog(Callback):
    """The run folder's metrics.jsonl (rank 0): rows past the step fit() starts from dropped,
    a row per step and evaluation, made durable before each checkpoint."""

    def __init__(self, log: MetricsLog) -> None:
        self.log = log

    def on_fit_start(self, trainer: Any) -> None:
        self.log.truncate_after(trainer.step)

    def on_step_end(self, trainer: Any, info: dict) -> None:
        self.log.write(info)

    on_eval_end = on_step_end

    def on_checkpoint(self, trainer: Any) -> None:
        self.log.sync()

    def on_fit_end(self, trainer: Any) -> None:
        self.log.close()


def _cell(value: Any) -> Any:
    return "" if value is None else value


class CSVLogger(Callback):
    """Appends one row per step and per evaluation to the CSV file `path` (rank 0). The header
    is the first row's keys; a row with a new key widens it (the file is rewritten, the earlier
    rows leaving that column empty). Append-safe: when fit() starts, an existing file keeps its
    header and its rows up to the step the run continues from; later rows (a resumed run
    redoes them) and a torn last line go. A missing value (an accuracy without class targets)
    is an empty cell."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"CSVLogger: path must be a file path, got {type(path).__name__}")
        self.path = os.fspath(path)
        self.header: Optional[list[str]] = None
        self._file: Optional[IO[str]] = None

    def _read(self) -> tuple[list[dict], bool]:
        """The rows of the file, its header set, and whether its last line was torn (it lacks
        its newline: that line is left out)."""
        try:
            with open(self.path, newline="", encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return [], False
        torn = bool(text) and not text.endswith("\n")
        reader = csv.DictReader(io.StringIO(text[:text.rfind("\n") + 1]))
        rows = list(reader)
        self.header = list(reader.fieldnames) if reader.fieldnames else None
        return rows, torn

    def _rewrite(self, rows: list[dict]) -> None:
        self.close()
        out = io.StringIO()
        writer = csv.DictWriter(out, self.header or [], restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        _write_small_file(self.path, out.getvalue().encode("utf-8"))

    def on_fit_start(self, trainer: Any) -> None:
        if trainer.rank != 0:
            return
        self.close()
        rows, torn = self._read()
        kept = [r for r in rows if not (r.get("step") or "").isdigit()
                or int(r["step"]) <= trainer.step]
        if len(kept) != len(rows) or torn:
            self._rewrite(kept)

    def _write(self, trainer: Any, info: dict) -> None:
        if trainer.rank != 0:
            return
        if self.header is None and self._file is None:
            self._read()  # train_step() outside fit(): continue the file as it is
        new = [k for k in info if k not in (self.header or [])]
        if new:
            rows = self._read()[0] if self.header is not None else []
            self.header = (self.header or []) + new
            self._rewrite(rows)
        if self._file is None:
            self._file = open(self.path, "a", newline="", encoding="utf-8")
        csv.DictWriter(self._file, self.header or [], restval="", lineterminator="\n") \
            .writerow({k: _cell(v) for k, v in info.items()})
        self._file.flush()

    on_step_end = _write
    on_eval_end = _write

    def on_fit_end(self, trainer: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class EarlyStopping(Callback):
    """Ends fit() when the evaluation's `monitor` ("loss", "accuracy" or a name of the
    Evaluation's metrics) has not improved by more than `min_delta` for `patience` evaluations
    in a row. `mode` "min" or "max" says which way is better (default: from the name, for loss
    and accuracy); a missing or non-finite value is no improvement. The count starts again with
    each fit(); the trainer needs an Evaluation with every > 0. `stopped_step` is the step
    fit() stopped at (None: it did not stop early)."""

    def __init__(self, monitor: str = "loss", patience: int = 3, mode: Optional[str] = None,
                 min_delta: float = 0.0) -> None:
        if not isinstance(monitor, str):
            raise TypeError(f"EarlyStopping: monitor must be a metric name, got "
                            f"{type(monitor).__name__}")
        mode = _DIRECTIONS.get(monitor) if mode is None else mode
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'min' or 'max' (monitor {monitor!r} "
                             f"has no default), got {mode!r}")
        _count("EarlyStopping", "patience", patience, 0)
        if (isinstance(min_delta, bool) or not isinstance(min_delta, (int, float))
                or not math.isfinite(min_delta) or min_delta < 0):
            raise ValueError(f"EarlyStopping: min_delta must be a finite number >= 0, got "
                             f"{min_delta!r}")
        self.monitor, self.patience, self.mode = monitor, patience, mode
        self.min_delta = float(min_delta)
        self.best: Optional[float] = None
        self.wait = 0
        self.stopped_step: Optional[int] = None

    def on_fit_start(self, trainer: Any) -> None:
        if not trainer.eval_every:
            raise ValueError("EarlyStopping: the trainer evaluates only when asked; give it "
                             "evaluation=Evaluation(loader, every=...) with every > 0")
        self.best, self.wait, self.stopped_step = None, 0, None

    def _improves(self, value: float) -> bool:
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_eval_end(self, trainer: Any, info: dict) -> None:
        if self.monitor not in info:
            raise ValueError(f"EarlyStopping: the evaluation has no {self.monitor!r}; it has "
                             f"{[k for k in info if k not in ('event', 'step')]}")
        value = info[self.monitor]
        if value is not None and math.isfinite(value) and self._improves(value):
            self.best, self.wait = value, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            trainer.should_stop = True
            self.stopped_step = trainer.step
