"""What a training run shows while it runs: a live bar on a terminal, one line per epoch elsewhere.

On a terminal the bar is redrawn in place (carriage return) at most ten times a second, with the
step count, the running loss, the learning rate, the gradient norm and the speed; evaluation
lines and the end of each epoch are printed above it. When the stream is not a terminal (a log
file, a CI job, a pipe) nothing is redrawn: the run prints one line per epoch (the mean loss of
its steps, the last learning rate and gradient norm) and one per evaluation.
"""
from __future__ import annotations

import math
import sys
import time
from typing import IO, Any, Optional


def _number(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g}" if math.isfinite(value) else str(value)


class Progress:
    """Shows the steps of a run of `total` steps, `per_epoch` steps to an epoch (0: no epochs)."""

    WIDTH = 24
    REDRAW_SECONDS = 0.1

    def __init__(self, total: int, per_epoch: int = 0, stream: Optional[IO[str]] = None,
                 live: Optional[bool] = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.live = bool(isatty and isatty()) if live is None else live
        self.total, self.per_epoch = total, per_epoch
        self._drawn = 0.0
        self._bar_shown = False
        self._epoch_losses: list[float] = []
        self._started = time.perf_counter()
        self._first_step: Optional[int] = None

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _clear_bar(self) -> None:
        if self._bar_shown:
            self._write("\r\033[K")
            self._bar_shown = False

    def line(self, text: str) -> None:
        """A line that stays (above the bar, on a terminal)."""
        self._clear_bar()
        self._write(text + "\n")

    def step(self, info: dict[str, Any]) -> None:
        step = info["step"]
        if self._first_step is None:
            self._first_step = step - 1
        self._epoch_losses.append(info["loss"])
        now = time.perf_counter()
        rate = (step - self._first_step) / max(now - self._started, 1e-9)
        fields = (f"loss {_number(info['loss'])} lr {info['lr']:.3g} "
                  f"grad {_number(info['grad_norm'])}")
        end_of_epoch = self.per_epoch and step % self.per_epoch == 0
        if self.live and (now - self._drawn >= self.REDRAW_SECONDS or step == self.total):
            filled = self.WIDTH * step // max(self.total, 1)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            self._write(f"\rstep {step}/{self.total} [{bar}] {fields} {rate:.1f} it/s\033[K")
            self._bar_shown = True
            self._drawn = now
        if end_of_epoch or (not self.per_epoch and step == self.total):
            losses, self._epoch_losses = self._epoch_losses, []
            mean = sum(losses) / len(losses)
            epoch = f"epoch {step // self.per_epoch} " if self.per_epoch else ""
            self.line(f"{epoch}step {step}/{self.total}: loss {_number(mean)} "
                      f"lr {info['lr']:.3g} grad {_number(info['grad_norm'])} "
                      f"({now - self._started:.1f} s)")

    def evaluation(self, info: dict[str, Any]) -> None:
        metrics = " ".join(f"{k} {_number(v)}" for k, v in info.items()
                           if k not in ("event", "step") and v is not None)
        self.line(f"  eval at step {info['step']}: {metrics}")

    def close(self) -> None:
        self._clear_bar()
