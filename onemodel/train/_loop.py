"""Trainer: its options (checked here and by _trainer_checks), the batches of the loader, the
reports (callback, metrics.jsonl, progress) and the loop of fit(); the step, the evaluation and
the checkpoints are its mixins (_step, _evaluation, _checkpoints)."""
from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable, Optional

from .. import _trainer_checks, amp, checkpoint, distributed
from ..metrics_log import METRICS_LOG, MetricsLog
from ..progress import Progress
from ..tensor import Tensor
from ._checkpoints import TrainerCheckpoints
from ._evaluation import _DIRECTIONS, TrainerEvaluation
from ._step import TrainerStep


class Trainer(TrainerStep, TrainerEvaluation, TrainerCheckpoints):
    """Trains `model` on batches of `loader` (see the module notes).

    `callback(info)` is called after every step with {"event": "step", "step", "loss", "lr",
    "grad_norm", "stepped", "time"} and after every evaluation with {"event": "eval", "step",
    "loss", "accuracy", ...}. `progress` shows the run on stderr (None: a live bar on a terminal,
    one line per epoch otherwise; False: nothing); `log_every` > 0 adds a line every that many
    steps. `metrics` maps names to functions (output, target) -> float, averaged over the
    evaluation weighted by batch size. Every `checkpoint_every` steps a checkpoint is written
    whether or not an evaluation falls there.

    `shard_optimizer=True` (ZeRO stage 1, distributed.OptimizerShards, kept as `shards`): each
    worker steps the optimizer for its share of the parameters, which are then all-gathered;
    the same bits as unsharded. A worker holds the optimizer state of its own parameters only
    (the others' are zero placeholders) except from `shards.gather_state()` (which save() calls
    on every worker before rank 0 writes the unsharded checkpoint) to `shards.release()`, and
    after a step only the worker's own parameters keep their gradients.
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
                 progress: Optional[bool] = None, log_every: int = 0,
                 micro_batches: Optional[int] = None, shard_optimizer: bool = False) -> None:
        _trainer_checks.check_core(model, loss_fn, optimizer, loader)
        _trainer_checks.check_options(schedule=schedule, clip_norm=clip_norm,
                                      eval_loader=eval_loader, keep_last=keep_last,
                                      checkpoint_dir=checkpoint_dir, scaler=scaler,
                                      callback=callback, progress=progress)
        if not isinstance(shard_optimizer, bool):
            raise ValueError(f"Trainer: shard_optimizer must be True or False, got "
                             f"{shard_optimizer!r}")
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
        if micro_batches is not None and (isinstance(micro_batches, bool) or not isinstance(
                micro_batches, int) or micro_batches < 1):
            raise ValueError(f"Trainer: micro_batches must be an integer >= 1, got "
                             f"{micro_batches!r}")
        if distributed.launched():
            distributed.init()  # under mpiexec: never W copies of rank 0 writing one folder
        self.world = distributed.world_size()
        self.rank = distributed.rank()
        if micro_batches is not None:
            if micro_batches % self.world:
                raise ValueError(f"Trainer: micro_batches {micro_batches} do not divide among "
                                 f"{self.world} workers")
            accumulate = micro_batches // self.world
        self.micro_batches = accumulate * self.world
        loader_world = getattr(loader, "world_size", self.world)
        if loader_world == 1 and self.world > 1 and hasattr(loader, "shard"):
            loader.shard(self.rank, self.world)
        elif loader_world != self.world:
            raise ValueError(f"Trainer: the loader is sharded for {loader.world_size} workers, "
                             f"the run has {self.world}")
        self.model, self.loss_fn, self.optimizer, self.loader = model, loss_fn, optimizer, loader
        self.schedule, self.clip_norm, self.scaler = schedule, clip_norm, scaler
        self.eval_loader, self.eval_every, self.metrics = eval_loader, eval_every, metrics
        self.checkpoint_every = checkpoint_every
        self.best_metric, self.best_mode = best_metric, best_mode
        self.autocast, self.accumulate = autocast, accumulate
        self.callback, self.progress, self.log_every = callback, progress, log_every
        self.shards = distributed.OptimizerShards(optimizer) if shard_optimizer else None
        self.manager = (checkpoint.CheckpointManager(checkpoint_dir, keep_last)
                        if checkpoint_dir is not None else None)
        self.log = (MetricsLog(os.path.join(checkpoint_dir, METRICS_LOG))
                    if checkpoint_dir is not None and self.rank == 0 else None)
        self.step = 0
        self._sum: Optional[distributed.ExactSum] = None
        self._synced = False
        self._collecting: Optional[tuple] = None  # (sum, samples, last micro-batch) in backward
        self.last_eval: Optional[dict] = None
        self._batches: Any = None
        self._saved_step: Optional[int] = None
        self._shown: Optional[Progress] = None
        self._warned: set[str] = set()
        self._started = time.perf_counter()

    # -- batches ----------------------------------------------------------------------------
    def _next_batch(self) -> Any:
        # A rank's share of an epoch may be empty (fewer batches than workers): try a few.
        for _ in range(self.world + 2):
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

    # -- reports -----------------------------------------------------------------------------
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
        if self.world > 1:
            try:
                self._fit(steps, resume)
            except BaseException as exc:  # one rank's exception ends the job, never a hang
                distributed.abort_on(exc)
            return self.last_eval
        return self._fit(steps, resume)

    def _fit(self, steps: int, resume: bool) -> Optional[dict]:
        if resume:
            if self.manager is None:
                raise ValueError("Trainer.fit: resume=True needs a checkpoint_dir")
            self.resume()
        if self.log is not None:  # rows past the step this fit starts from would be doubled
            self.log.truncate_after(self.step)
        if self.world > 1:
            self._broadcast_state()
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
