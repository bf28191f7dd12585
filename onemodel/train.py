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
`resume()` in a new process continues the same trajectory bit for bit.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Optional

import numpy as np

from . import amp, checkpoint, distributed
from .autograd import no_grad
from .optim import clip_grad_norm
from .tensor import Tensor

_METRICS = {"accuracy": True, "loss": False}  # name -> higher is better


def _split(batch: Any) -> tuple[tuple, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("Trainer: a batch must be a tuple (inputs..., target), got "
                         f"{type(batch).__name__}")
    return tuple(batch[:-1]), batch[-1]


class Trainer:
    """Trains `model` on batches of `loader` (see the module notes).

    `callback(info)` is called after every step with {"event": "step", "step", "loss", "lr",
    "grad_norm", "stepped"} and after every evaluation with {"event": "eval", "step", "loss",
    "accuracy"}; `log_every` > 0 prints a line every that many steps.
    """

    def __init__(self, model: Any, loss_fn: Callable[[Any, Any], Tensor], optimizer: Any,
                 loader: Any, *, schedule: Any = None, clip_norm: Optional[float] = None,
                 eval_loader: Any = None, eval_every: int = 0,
                 checkpoint_dir: Optional[str] = None, keep_last: int = 3,
                 best_metric: str = "accuracy", scaler: Optional[amp.GradScaler] = None,
                 autocast: Optional[str] = None, accumulate: int = 1,
                 callback: Optional[Callable[[dict], None]] = None, log_every: int = 0) -> None:
        for name, value in (("eval_every", eval_every), ("accumulate", accumulate),
                            ("log_every", log_every)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Trainer: {name} must be an integer >= 0, got {value!r}")
        if accumulate < 1:
            raise ValueError(f"Trainer: accumulate must be >= 1, got {accumulate}")
        if eval_every and eval_loader is None:
            raise ValueError("Trainer: eval_every needs an eval_loader")
        if best_metric not in _METRICS:
            raise ValueError(f"Trainer: best_metric must be one of {list(_METRICS)}, "
                             f"got {best_metric!r}")
        if autocast is not None:
            autocast = amp.dtype_name(autocast)
        self.world = distributed.world_size()
        self.rank = distributed.rank()
        if getattr(loader, "world_size", self.world) != self.world:
            raise ValueError(f"Trainer: the loader is sharded for {loader.world_size} workers, "
                             f"the run has {self.world}")
        self.model, self.loss_fn, self.optimizer, self.loader = model, loss_fn, optimizer, loader
        self.schedule, self.clip_norm, self.scaler = schedule, clip_norm, scaler
        self.eval_loader, self.eval_every = eval_loader, eval_every
        self.best_metric, self.autocast, self.accumulate = best_metric, autocast, accumulate
        self.callback, self.log_every = callback, log_every
        self.manager = (checkpoint.CheckpointManager(checkpoint_dir, keep_last)
                        if checkpoint_dir is not None else None)
        self.step = 0
        self.last_eval: Optional[dict] = None
        self._batches: Any = None
        self._saved_step: Optional[int] = None

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
        norm = clip_grad_norm(params, self.clip_norm) if self.clip_norm is not None else None
        if self.scaler:
            stepped = self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
            stepped = True
        self.step += 1
        info = {"event": "step", "step": self.step, "loss": float(np.mean(losses)), "lr": lr,
                "grad_norm": norm, "stepped": stepped}
        self._report(info)
        return info

    def _report(self, info: dict) -> None:
        if self.callback is not None:
            self.callback(info)
        if self.log_every and self.rank == 0 and (
                info["event"] == "eval" or info["step"] % self.log_every == 0):
            fields = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                              for k, v in info.items() if k != "event" and v is not None)
            print(f"{info['event']}: {fields}", file=sys.stderr, flush=True)

    # -- evaluation -------------------------------------------------------------------------
    def evaluate(self, loader: Any = None) -> dict:
        """Loss (weighted by batch size) and accuracy over one pass of `loader` (default: the
        eval loader), in eval mode without gradients; the model's mode is restored."""
        loader = self.eval_loader if loader is None else loader
        if loader is None:
            raise ValueError("Trainer.evaluate: no loader")
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(0)
        was_training = self.model.training
        self.model.eval()
        total_loss, correct, count, classes = 0.0, 0, 0, True
        try:
            with no_grad():
                for batch in loader:
                    output, loss, target = self._forward(batch)
                    y = target.numpy() if isinstance(target, Tensor) else np.asarray(target)
                    n = len(y)
                    total_loss += loss.item() * n
                    count += n
                    out = output.numpy()
                    classes = classes and y.dtype.kind in "iu" and out.ndim == y.ndim + 1
                    if classes:
                        correct += int((out.argmax(1) == y).sum())
        finally:
            self.model.train(was_training)
        if not count:
            raise ValueError("Trainer.evaluate: the loader yields no examples")
        return {"event": "eval", "step": self.step, "loss": total_loss / count,
                "accuracy": correct / count if classes else None}

    # -- checkpoints --------------------------------------------------------------------------
    def _extra(self) -> dict:
        extra = {"train.step": self.step}
        if hasattr(self.loader, "state_dict"):
            extra.update({f"data.{k}": v for k, v in self.loader.state_dict().items()})
        if self.scaler is not None:
            extra.update({f"amp.{k}": v for k, v in self.scaler.state_dict().items()})
        return extra

    def save(self, metric: Optional[float] = None) -> Optional[str]:
        """Writes a checkpoint of the current step (rank 0 only); returns its path."""
        if self.manager is None:
            raise ValueError("Trainer.save: no checkpoint_dir")
        self._saved_step = self.step
        if self.rank != 0:
            return None
        return self.manager.save(self.step, self.model, self.optimizer, self._extra(),
                                 metric=metric, higher_is_better=_METRICS[self.best_metric])

    def resume(self, path: Optional[str] = None) -> bool:
        """Restores the latest checkpoint (or `path`): model, optimizer, step, loader position,
        loss scale. Returns False when there is none."""
        if path is None:
            if self.manager is None:
                raise ValueError("Trainer.resume: no checkpoint_dir and no path")
            path = self.manager.latest()
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
        self.step = int(extra.get("train.step", self.optimizer.step_count))
        self._saved_step = self.step
        return True

    # -- the loop -----------------------------------------------------------------------------
    def fit(self, steps: int) -> Optional[dict]:
        """Trains until `steps` steps are done in all (a resumed run continues its count),
        evaluating and checkpointing on the way and checkpointing at the end; returns the last
        evaluation (None if there was none)."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"Trainer.fit: steps must be an integer >= 0, got {steps!r}")
        try:
            while self.step < steps:
                self.train_step()
                if self.eval_every and self.step % self.eval_every == 0:
                    self.last_eval = self.evaluate()
                    self._report(self.last_eval)
                    if self.manager is not None:
                        self.save(self.last_eval[self.best_metric])
        finally:
            self._release_batches()
        if self.manager is not None and self._saved_step != self.step:
            self.save()
        return self.last_eval
