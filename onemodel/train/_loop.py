"""Trainer: its arguments (the option groups of options.py, checked there and by
_trainer_checks), the batches of the loader, the callbacks and the loop of fit(); the step, the
evaluation and the checkpoints are its mixins (_step, _evaluation, _checkpoints)."""
from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable, Optional, Sequence, Union

from .. import _trainer_checks, checkpoint, distributed
from ..metrics_log import METRICS_LOG, MetricsLog
from ..tensor import Tensor
from ._checkpoints import TrainerCheckpoints
from ._evaluation import TrainerEvaluation
from ._step import TrainerStep
from .callbacks import Callback, FunctionCallback, ProgressBar, RunLog
from .options import Checkpoints, DataParallel, Evaluation, Precision, Strategy, from_legacy


class Trainer(TrainerStep, TrainerEvaluation, TrainerCheckpoints):
    """Trains `model` on batches of `loader` (see the package notes).

    `schedule` sets the learning rate before each step; `clip_norm` clips the global gradient
    norm; `strategy` shares the micro-batches of a step among the workers (SingleProcess,
    DataParallel, the default, or ZeRO); `precision` (Precision) sets autocast and loss
    scaling; `evaluation` (Evaluation) and `checkpoints` (Checkpoints) say what is evaluated
    and written, and when; `callbacks` are called after every step and evaluation (Callback
    instances, or functions f(info)), default [ProgressBar()]: pass [] to show nothing.

    The former keyword arguments (eval_loader=, checkpoint_dir=, autocast=, micro_batches=,
    callback=, progress=, ...) still work for this release, with a DeprecationWarning naming
    their replacement.
    """

    def __init__(self, model: Any, loss_fn: Callable[[Any, Any], Tensor], optimizer: Any,
                 loader: Any, *, schedule: Any = None, clip_norm: Optional[float] = None,
                 strategy: Optional[Strategy] = None, precision: Optional[Precision] = None,
                 evaluation: Optional[Evaluation] = None,
                 checkpoints: Optional[Checkpoints] = None,
                 callbacks: Optional[Sequence[Union[Callback, Callable[[dict], Any]]]] = None,
                 **deprecated: Any) -> None:
        _trainer_checks.check_core(model, loss_fn, optimizer, loader)
        _trainer_checks.check_options(schedule=schedule, clip_norm=clip_norm)
        options: dict[str, Any] = {"strategy": strategy, "precision": precision,
                                   "evaluation": evaluation, "checkpoints": checkpoints,
                                   "callbacks": callbacks}
        accumulate = None
        if deprecated:
            options, accumulate = from_legacy(deprecated, options)
        kinds = {"strategy": Strategy, "precision": Precision, "evaluation": Evaluation,
                 "checkpoints": Checkpoints}
        for name, kind in kinds.items():
            value = options[name]
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"Trainer: {name} must be {kind.__name__}(...) or None, got "
                                f"{_trainer_checks._kind(value)}"
                                + _trainer_checks._instantiate_hint(value))
        strategy = options["strategy"] or DataParallel()
        precision = options["precision"] or Precision()
        evaluation, checkpoints = options["evaluation"], options["checkpoints"]
        given = [ProgressBar()] if options["callbacks"] is None else list(options["callbacks"])
        _trainer_checks.check_callbacks(given, Callback)
        if strategy.joins_world() and distributed.launched():
            distributed.init()  # under mpiexec: never W copies of rank 0 writing one folder
        self.world = distributed.world_size()
        self.rank = distributed.rank()
        self.micro_batches = strategy.plan(self.world) if accumulate is None \
            else accumulate * self.world
        self.accumulate = self.micro_batches // self.world
        loader_world = getattr(loader, "world_size", self.world)
        if loader_world == 1 and self.world > 1 and hasattr(loader, "shard"):
            loader.shard(self.rank, self.world)
        elif loader_world != self.world:
            raise ValueError(f"Trainer: the loader is sharded for {loader.world_size} workers, "
                             f"the run has {self.world}")
        self.model, self.loss_fn, self.optimizer, self.loader = model, loss_fn, optimizer, loader
        self.schedule, self.clip_norm = schedule, clip_norm
        self.strategy, self.precision = strategy, precision
        self.scaler, self.autocast = precision.scaler, precision.autocast
        self.eval_loader = evaluation.loader if evaluation else None
        self.eval_every = evaluation.every if evaluation else 0
        self.metrics = dict(evaluation.metrics) if evaluation else {}
        self.best_metric = evaluation.best_metric if evaluation else None
        self.best_mode = evaluation.best_mode if evaluation else None
        self.checkpoint_every = checkpoints.every if checkpoints else 0
        self.shards = strategy.shards(optimizer)
        self.manager = (checkpoint.CheckpointManager(checkpoints.dir, checkpoints.keep_last)
                        if checkpoints is not None else None)
        self.log = (MetricsLog(os.path.join(checkpoints.dir, METRICS_LOG))
                    if checkpoints is not None and self.rank == 0 else None)
        self.callbacks: list[Callback] = [
            c if isinstance(c, Callback) else FunctionCallback(c) for c in given
        ] + ([RunLog(self.log)] if self.log is not None else [])
        self.step = 0
        self.max_steps = 0
        self.should_stop = False
        self._sum: Optional[distributed.ExactSum] = None
        self._synced = False
        self._collecting: Optional[tuple] = None  # (sum, samples, last micro-batch) in backward
        self.last_eval: Optional[dict] = None
        self._batches: Any = None
        self._saved_step: Optional[int] = None
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
    def _call(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(self, *args)

    def _report(self, info: dict) -> None:
        self._call("on_step_end" if info["event"] == "step" else "on_eval_end", info)

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(f"Trainer: {message}", RuntimeWarning, stacklevel=3)

    # -- the loop -----------------------------------------------------------------------------
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
                raise ValueError("Trainer.fit: resume=True needs checkpoints=Checkpoints(dir)")
            self.resume()
        if self.world > 1:
            self._broadcast_state()
        self.max_steps, self.should_stop = steps, False
        try:
            self._call("on_fit_start")
            while self.step < steps and not self.should_stop:
                self.train_step()
                evaluation = None
                if self.eval_every and self.step % self.eval_every == 0:
                    evaluation = self.last_eval = self.evaluate()
                    self._report(evaluation)
                if self.manager is not None and (evaluation is not None or (
                        self.checkpoint_every and self.step % self.checkpoint_every == 0)):
                    self.save(evaluation)
            if self.manager is not None and self._saved_step != self.step:
                self.save()
        finally:
            self._release_batches()
            self._call("on_fit_end")
        return self.last_eval
