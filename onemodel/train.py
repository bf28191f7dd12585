"""Trainer: the training loop of pipeline.txt around a model, a loss and an optimizer.

One step: lr = schedule(step count); for each of `accumulate` micro-batches, forward (under
autocast if asked), loss, backward of the scaled loss; gradients of all micro-batches on all
workers summed in the fixed tree (distributed.py); unscale; clip the global norm; optimizer
step (skipped, with the schedule, on a non-finite gradient); scaler update. Every `eval_every`
steps the held-out loader runs in eval mode without gradients (loss weighted by batch size,
accuracy when the target holds class indices) and a checkpoint is written; the manager keeps the
last few and the best by the chosen metric.

Batches are tuples (inputs..., target): the model gets the inputs, the loss function gets
(output, target). A checkpoint holds the model, the optimizer (its step count drives the
schedule) and, in extra, the trainer's step, the loader's position and the loss scaler, so
`resume()` in a new process continues the same trajectory bit for bit. The extra also holds the
state of `om.default_generator`, so what draws from it (an `F.dropout` without a seed, a layer
built after the resume) draws what the uninterrupted run would.

With a `checkpoint_dir` the run folder also gets `metrics.jsonl`: one JSON object a line, one
per step ({"event": "step", "step", "loss", "lr", "grad_norm", "stepped", "time"}) and one per
evaluation ({"event": "eval", "step", "loss", "accuracy", and each of `metrics`}); a
non-finite number is written as null. A resumed run first drops the rows after its checkpoint,
so the log always reads as one run. `python -m onemodel.plot RUN_DIR` draws it.

The best checkpoint is chosen by `best_metric`: by default the validation accuracy when the
targets are class indices, the validation loss otherwise; any name of `metrics` with
`best_mode` "max" or "min". An evaluation whose metric is missing or not finite is still
checkpointed, never taken as the best, and warns.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import time
import warnings
from typing import IO, Any, Callable, Optional

import numpy as np

from . import amp, checkpoint, distributed, random
from .autograd import no_grad
from .optim import clip_grad_norm, grad_norm
from .progress import Progress
from .tensor import Tensor

_DIRECTIONS = {"accuracy": "max", "loss": "min"}  # the built-in metrics: which way is better
METRICS_LOG = "metrics.jsonl"


def _split(batch: Any) -> tuple[tuple, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("Trainer: a batch must be a tuple (inputs..., target), got "
                         f"{type(batch).__name__}")
    return tuple(batch[:-1]), batch[-1]


def _finite_or_none(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


class MetricsLog:
    """The run folder's metrics.jsonl (see the module notes): appended one row at a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: Optional[IO[str]] = None

    def write(self, row: dict) -> None:
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(json.dumps({k: _finite_or_none(v) for k, v in row.items()}) + "\n")
        self._file.flush()

    def truncate_after(self, step: int) -> None:
        """Drops the rows of steps after `step` (a resumed run redoes them)."""
        self.close()
        try:
            with open(self.path, encoding="utf-8") as f:
                rows = f.readlines()
        except FileNotFoundError:
            return
        kept = [r for r in rows if r.strip() and json.loads(r).get("step", 0) <= step]
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(kept)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Trainer:
    """Trains `model` on batches of `loader` (see the module notes).

    `callback(info)` is called after every step with {"event": "step", "step", "loss", "lr",
    "grad_norm", "stepped", "time"} and after every evaluation with {"event": "eval", "step",
    "loss", "accuracy", ...}. `progress` shows the run on stderr (None: a live bar on a terminal,
    one line per epoch otherwise; False: nothing); `log_every` > 0 adds a line every that many
    steps. `metrics` maps names to functions (output, target) -> float, averaged over the
    evaluation weighted by batch size. Every `checkpoint_every` steps a checkpoint is written
    whether or not an evaluation falls there.
    """

    def __init__(self, model: Any, loss_fn: Callable[[Any, Any], Tensor], optimizer: Any,
                 loader: Any, *, schedule: Any = None, clip_norm: Optional[float] = None,
                 eval_loader: Any = None, eval_every: int = 0,
                 checkpoint_dir: Optional[str] = None, keep_last: int = 3,
                 checkpoint_every: int = 0, best_metric: Optional[str] = None,
                 best_mode: Optional[str] = None,
                 metrics: Optional[dict[str, Callable[[Any, Any], float]]] = None,
                 scaler: Optional[amp.GradScaler] = None, autocast: Optional[str] = None,
                 accumulate: int = 1, callback: Optional[Callable[[dict], None]] = None,
                 progress: Optional[bool] = None, log_every: int = 0) -> None:
        for name, value in (("eval_every", eval_every), ("accumulate", accumulate),
                            ("log_every", log_every), ("checkpoint_every", checkpoint_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Trainer: {name} must be an integer >= 0, got {value!r}")
        if accumulate < 1:
            raise ValueError(f"Trainer: accumulate must be >= 1, got {accumulate}")
        if eval_every and eval_loader is None:
            raise ValueError("Trainer: eval_every needs an eval_loader")
        if checkpoint_every and checkpoint_dir is None:
            raise ValueError("Trainer: checkpoint_every needs a checkpoint_dir")
        metrics = dict(metrics or {})
        for name, fn in metrics.items():
            if name in ("event", "step", *_DIRECTIONS) or not callable(fn):
                raise ValueError(f"Trainer: metrics must map new names to functions "
                                 f"(output, target) -> float, got {name!r}: {fn!r}")
        if best_mode not in (None, "max", "min"):
            raise ValueError(f"Trainer: best_mode must be 'max' or 'min', got {best_mode!r}")
        if best_metric is not None:
            if best_metric not in _DIRECTIONS and best_metric not in metrics:
                raise ValueError(f"Trainer: best_metric must be one of "
                                 f"{list(_DIRECTIONS) + list(metrics)}, got {best_metric!r}")
            if best_mode is None and best_metric not in _DIRECTIONS:
                raise ValueError(f"Trainer: best_metric {best_metric!r} needs best_mode "
                                 "'max' or 'min'")
        if autocast is not None:
            autocast = amp.dtype_name(autocast)
        self.world = distributed.world_size()
        self.rank = distributed.rank()
        if getattr(loader, "world_size", self.world) != self.world:
            raise ValueError(f"Trainer: the loader is sharded for {loader.world_size} workers, "
                             f"the run has {self.world}")
        self.model, self.loss_fn, self.optimizer, self.loader = model, loss_fn, optimizer, loader
        self.schedule, self.clip_norm, self.scaler = schedule, clip_norm, scaler
        self.eval_loader, self.eval_every, self.metrics = eval_loader, eval_every, metrics
        self.checkpoint_every = checkpoint_every
        self.best_metric, self.best_mode = best_metric, best_mode
        self.autocast, self.accumulate = autocast, accumulate
        self.callback, self.progress, self.log_every = callback, progress, log_every
        self.manager = (checkpoint.CheckpointManager(checkpoint_dir, keep_last)
                        if checkpoint_dir is not None else None)
        self.log = (MetricsLog(os.path.join(checkpoint_dir, METRICS_LOG))
                    if checkpoint_dir is not None and self.rank == 0 else None)
        self.step = 0
        self.last_eval: Optional[dict] = None
        self._batches: Any = None
        self._saved_step: Optional[int] = None
        self._shown: Optional[Progress] = None
        self._warned: set[str] = set()
        self._started = time.perf_counter()

    # -- batches ----------------------------------------------------------------------------
    def _next_batch(self) -> Any:
        for _ in range(2):
            if self._batches is None:
                self._batches = iter(self.loader)
            try:
                return next(self._batches)
            except StopIteration:
                self._batches = None  # the epoch is over; the loader has moved to the next
        raise ValueError("Trainer: the loader yields no batches")

    def _release_batches(self) -> None:
        if self._batches is not None:
            close = getattr(self._batches, "close", None)
            if close:
                close()
            self._batches = None

    def _forward(self, batch: Any) -> tuple[Any, Tensor, Any]:
        inputs, target = _split(batch)
        cast = amp.autocast(self.autocast) if self.autocast else contextlib.nullcontext()
        with cast:
            output = self.model(*inputs)
            return output, self.loss_fn(output, target), target

    # -- one step -----------------------------------------------------------------------------
    def train_step(self) -> dict:
        """One optimizer step over `accumulate` micro-batches per worker; returns its info."""
        params = self.optimizer.params
        if self.schedule is not None:
            self.schedule.apply(self.optimizer)
        lr = self.optimizer.lr
        micro, losses = [], []
        for a in range(self.accumulate):
            _, loss, _ = self._forward(self._next_batch())
            self.optimizer.zero_grad()
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            micro.append((a * self.world + self.rank, distributed.gradients(params)))
            losses.append(loss.item())
        if len(micro) > 1 or self.world > 1:
            distributed.all_reduce_gradients(params, micro)
        if self.scaler:
            self.scaler.unscale_(self.optimizer)  # before clipping: the norm of true gradients
        norm = (clip_grad_norm(params, self.clip_norm) if self.clip_norm is not None
                else grad_norm(params))
        if self.scaler:
            stepped = self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
            stepped = True
        self.step += 1
        info = {"event": "step", "step": self.step, "loss": float(np.mean(losses)), "lr": lr,
                "grad_norm": norm, "stepped": stepped,
                "time": round(time.perf_counter() - self._started, 4)}
        self._report(info)
        return info

    def _report(self, info: dict) -> None:
        if self.callback is not None:
            self.callback(info)
        if self.rank != 0:
            return
        if self.log is not None:
            self.log.write(info)
        if self._shown is not None:
            (self._shown.step if info["event"] == "step" else self._shown.evaluation)(info)
            if self.log_every and info["event"] == "step" and info["step"] % self.log_every == 0:
                self._shown.line(" ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                          for k, v in info.items()
                                          if k != "event" and v is not None))

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(f"Trainer: {message}", RuntimeWarning, stacklevel=3)

    # -- evaluation -------------------------------------------------------------------------
    def evaluate(self, loader: Any = None) -> dict:
        """Loss and `metrics` (weighted by batch size) and accuracy over one pass of `loader`
        (default: the eval loader), in eval mode without gradients; the model's mode is
        restored. Accuracy is None when the targets are not class indices; a target that is
        no array (a tuple, say) is the loss function's business alone."""
        loader = self.eval_loader if loader is None else loader
        if loader is None:
            raise ValueError("Trainer.evaluate: no loader")
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(0)
        was_training = self.model.training
        self.model.eval()
        total_loss, correct, count, classes = 0.0, 0, 0, True
        totals = dict.fromkeys(self.metrics, 0.0)
        try:
            with no_grad():
                for batch in loader:
                    output, loss, target = self._forward(batch)
                    n = len(_split(batch)[0][0])  # examples in the batch: the first input's
                    total_loss += loss.item() * n
                    count += n
                    y = target.numpy() if isinstance(target, Tensor) else target
                    out = output.numpy()
                    classes = (classes and isinstance(y, np.ndarray) and y.dtype.kind in "iu"
                               and out.ndim == y.ndim + 1 and len(y) == n)
                    if classes:
                        correct += int((out.argmax(1) == y).sum())
                    for name, fn in self.metrics.items():
                        totals[name] += float(fn(output, target)) * n
        finally:
            self.model.train(was_training)
        if not count:
            raise ValueError("Trainer.evaluate: the loader yields no examples")
        return {"event": "eval", "step": self.step, "loss": total_loss / count,
                "accuracy": correct / count if classes else None,
                **{name: total / count for name, total in totals.items()}}

    def _best_of(self, evaluation: dict) -> tuple[Optional[float], bool]:
        """The evaluation's metric for choosing the best checkpoint (None: it cannot be used),
        and whether higher is better."""
        name = self.best_metric or ("accuracy" if evaluation["accuracy"] is not None else "loss")
        higher = (self.best_mode or _DIRECTIONS[name]) == "max"
        value = evaluation.get(name)
        if value is None:
            self._warn_once(f"the evaluation gives no {name}: no best checkpoint can be chosen")
            return None, higher
        if not math.isfinite(value):
            self._warn_once(f"{name} {value} at step {self.step} is not finite: that checkpoint "
                            "cannot be the best")
            return None, higher
        return value, higher

    # -- checkpoints --------------------------------------------------------------------------
    def _extra(self) -> dict:
        extra = {"train.step": self.step, "rng.default": random.get_rng_state()}
        if hasattr(self.loader, "state_dict"):
            extra.update({f"data.{k}": v for k, v in self.loader.state_dict().items()})
        if self.scaler is not None:
            extra.update({f"amp.{k}": v for k, v in self.scaler.state_dict().items()})
        return extra

    def save(self, evaluation: Optional[dict] = None) -> Optional[str]:
        """Writes a checkpoint of the current step (rank 0 only), a candidate for the best when
        `evaluation` (from evaluate()) is given; returns its path."""
        if self.manager is None:
            raise ValueError("Trainer.save: no checkpoint_dir")
        self._saved_step = self.step
        if self.rank != 0:
            return None
        metric, higher = self._best_of(evaluation) if evaluation else (None, True)
        return self.manager.save(self.step, self.model, self.optimizer, self._extra(),
                                 metric=metric, higher_is_better=higher)

    def resume(self, path: Optional[str] = None) -> bool:
        """Restores the newest checkpoint of the checkpoint folder, or of `path` when it is a
        folder, or the checkpoint file `path`: model, optimizer, step, loader position, loss
        scale and the default generator. Returns False when there is none."""
        if path is None or os.path.isdir(path):
            folder = path if path is not None else (self.manager and self.manager.folder)
            if folder is None:
                raise ValueError("Trainer.resume: no checkpoint_dir and no path")
            path = checkpoint.CheckpointManager(folder).latest()
            if path is None:
                return False
        extra = checkpoint.load(path, self.model, self.optimizer)
        self._release_batches()

        def part(prefix: str) -> dict:
            return {k[len(prefix):]: v for k, v in extra.items() if k.startswith(prefix)}

        if hasattr(self.loader, "load_state_dict"):
            self.loader.load_state_dict(part("data."))
        if self.scaler is not None:
            self.scaler.load_state_dict(part("amp."))
        if "rng.default" in extra:
            random.set_rng_state(extra["rng.default"])
        self.step = int(extra.get("train.step", self.optimizer.step_count))
        self._saved_step = self.step
        if self.log is not None:
            self.log.truncate_after(self.step)
        return True

    # -- the loop -----------------------------------------------------------------------------
    def _steps_per_epoch(self) -> int:
        try:
            return max(len(self.loader) // self.accumulate, 0)
        except TypeError:  # a loader without len() has no epochs to show
            return 0

    def fit(self, steps: int, resume: bool = False) -> Optional[dict]:
        """Trains until `steps` steps are done in all, evaluating and checkpointing on the way
        and checkpointing at the end; returns the last evaluation (None if there was none).
        With `resume=True` it first continues from the newest checkpoint of the checkpoint
        folder, if there is one (a resumed run continues its step count)."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"Trainer.fit: steps must be an integer >= 0, got {steps!r}")
        if resume:
            if self.manager is None:
                raise ValueError("Trainer.fit: resume=True needs a checkpoint_dir")
            self.resume()
        if self.rank == 0 and self.progress is not False:
            self._shown = Progress(steps, self._steps_per_epoch(),
                                   live=None if self.progress is None else True)
        try:
            while self.step < steps:
                self.train_step()
                evaluation = None
                if self.eval_every and self.step % self.eval_every == 0:
                    evaluation = self.last_eval = self.evaluate()
                    self._report(evaluation)
                if self.manager is not None and (evaluation is not None or (
                        self.checkpoint_every and self.step % self.checkpoint_every == 0)):
                    self.save(evaluation)
        finally:
            self._release_batches()
            if self._shown is not None:
                self._shown.close()
                self._shown = None
            if self.log is not None:
                self.log.close()
        if self.manager is not None and self._saved_step != self.step:
            self.save()
        return self.last_eval
