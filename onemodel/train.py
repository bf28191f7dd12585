"""Trainer: the training loop around a model, a loss and an optimizer.

One step: lr = schedule(step count); M micro-batches (`micro_batches`, or `accumulate` per
worker times the worker count W), worker r computing global micro-batches r, r + W, ...: for
each, forward (under autocast if asked), loss, backward of the scaled loss, each gradient added
into the exact sum of distributed.py weighted by its sample count as backward completes it (a
post-accumulate-grad hook; in the last micro-batch a finished bucket's all-reduce starts there,
and the gradient's memory is released at once); the sum all-reduced and rounded once to the
mean over the step's samples (the same bits for every W dividing M); unscale; clip the global
norm; optimizer step (skipped, with the schedule, on a non-finite gradient); scaler update.
Every `eval_every` steps the held-out loader runs in eval mode without gradients (loss weighted
by batch size, accuracy when the target holds class indices; under W workers each computes its
share of the batches and the sums are gathered in batch order) and a checkpoint is written;
the manager keeps the last few and the best by the chosen metric.

Randomness follows the global micro-batch position, not the worker: before micro-batch i of a
step every dropout counter (`draws` buffer) is set to its value at the step's start plus i times
its advance per micro-batch, and the default generator likewise, and after the step both stand
where one worker accumulating all M would leave them. So dropout masks, and any draw from the
default generator during forward, are the same whichever worker computes a micro-batch.

Under mpiexec (W > 1; the Trainer calls distributed.init() itself when the launcher announces
several processes) parameters, buffers and the default generator are broadcast from rank 0 when
fit() starts, buffers (batch-norm statistics) again after every step (DDP's rule: rank 0's
win), the logged loss is the sample-weighted mean over all workers' micro-batches, rank 0 alone
writes checkpoints and metrics, resume() reads rank 0's checkpoint and broadcasts it, and an
exception on any rank ends the job (distributed.abort_on).

Batches are tuples (inputs..., target): the model gets the inputs, the loss function gets
(output, target). A checkpoint holds the model, the optimizer (its step count drives the
schedule) and, in extra, the trainer's step, the loader's position, the loss scaler and the
exact sum's grid exponents, so `resume()` in a new process, at any W dividing M, continues the
same trajectory bit for bit. The extra also holds the state of `om.default_generator`, so what
draws from it (an `F.dropout` without a seed, a layer built after the resume) draws what the
uninterrupted run would.

With a `checkpoint_dir` the run folder also gets `metrics.jsonl`: one JSON object a line, one
per step ({"event": "step", "step", "loss", "lr", "grad_norm", "stepped", "time"}) and one per
evaluation ({"event": "eval", "step", "loss", "accuracy", and each of `metrics`}); a
non-finite number is written as null. fit() first drops the rows after the step it starts from
(the resumed checkpoint's, or 0 without one), and any torn line a crash left, with a warning
(onemodel/metrics_log.py), so the log always reads as one run; it is fsynced before every
checkpoint. `python -m onemodel.plot RUN_DIR` draws it.

The best checkpoint is chosen by `best_metric`: by default the validation accuracy when the
targets are class indices, the validation loss otherwise; any name of `metrics` with
`best_mode` "max" or "min". An evaluation whose metric is missing or not finite is still
checkpointed, never taken as the best, and warns.
"""
from __future__ import annotations

import contextlib
import math
import os
import time
import warnings
import weakref
from typing import Any, Callable, Optional

import numpy as np

from . import _trainer_checks, amp, checkpoint, distributed, random
from .autograd import no_grad
from .metrics_log import METRICS_LOG, MetricsLog
from .optim import clip_grad_norm, grad_norm
from .progress import Progress
from .tensor import Tensor

_DIRECTIONS = {"accuracy": "max", "loss": "min"}  # the built-in metrics: which way is better
_GOLDEN_INVERSE = pow(random.GOLDEN, -1, 1 << 64)  # counts the generator's draws


def _split(batch: Any) -> tuple[tuple, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("Trainer: a batch must be a tuple (inputs..., target), got "
                         f"{type(batch).__name__}")
    return tuple(batch[:-1]), batch[-1]


class Trainer:
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
        self._advance: dict[int, int] = {}  # per counter: its draws per micro-batch
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

    def _forward(self, batch: Any) -> tuple[Any, Tensor, Any]:
        inputs, target = _split(batch)
        cast = amp.autocast(self.autocast) if self.autocast else contextlib.nullcontext()
        with cast:
            output = self.model(*inputs)
            return output, self.loss_fn(output, target), target

    # -- one step -----------------------------------------------------------------------------
    def _counters(self) -> list[Tensor]:
        """The dropout counters: every int64 scalar buffer named `draws`."""
        found = getattr(self, "_counter_list", None)
        if found is None:
            named = getattr(self.model, "named_buffers", None)
            found = [b for name, b in (named() if named else ())
                     if name.rsplit(".", 1)[-1] == "draws" and b._data.dtype == np.int64
                     and b._data.ndim == 0]
            self._counter_list = found
        return found

    def _position(self, start: list[int], index: int, counters: list[Tensor]) -> None:
        """Sets every counter, and the default generator, to where micro-batch `index` of the
        step starts: the step's start plus index times the advance per micro-batch."""
        for k, c in enumerate(counters):
            c._data[...] = start[k] + index * self._advance.get(k, 1)
            c._version += 1
        g = random.default_generator
        g.state = (start[-1] + index * self._advance.get(-1, 0) * random.GOLDEN) & random.MASK64

    def _learn_advance(self, before: list[int], counters: list[Tensor]) -> bool:
        """Records how far this micro-batch moved each counter; True if a guess was wrong."""
        wrong = False
        now = [int(c._data) for c in counters]
        moved = {k: now[k] - before[k] for k in range(len(counters))}
        steps = ((random.default_generator.state - before[-1]) * _GOLDEN_INVERSE) & random.MASK64
        moved[-1] = steps if steps < 1 << 32 else 0  # wrapped: not a plain count of draws
        for k, d in moved.items():
            if d != self._advance.get(k, 1 if k >= 0 else 0):
                self._advance[k] = d
                wrong = True
        return wrong

    def train_step(self) -> dict:
        """One optimizer step over the M micro-batches of all workers; returns its info."""
        params = self.optimizer.params
        if self.schedule is not None:
            self.schedule.apply(self.optimizer)
        lr = self.optimizer.lr
        total = self.micro_batches
        if total == 1:  # one process, one micro-batch: no reduction at all
            _, loss, _ = self._forward(self._next_batch())
            self.optimizer.zero_grad()
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            global_loss = loss.item()
        else:
            global_loss = self._accumulate(params, total)
        if self.scaler:
            self.scaler.unscale_(self.optimizer)  # before clipping: the norm of true gradients
        norm = (clip_grad_norm(params, self.clip_norm) if self.clip_norm is not None
                else grad_norm(params))
        if self.shards is not None:  # ZeRO-1: this worker steps its share alone
            self.shards.release_others()
        if self.scaler:
            stepped = self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
            stepped = True
        if self.shards is not None and stepped:
            self.shards.gather()
        if self.world > 1:  # DDP's rule: rank 0's buffers (batch-norm statistics) win
            distributed.broadcast_arrays([b._data for b in self._buffers()],
                                         "broadcasting buffers")
        self.step += 1
        info = {"event": "step", "step": self.step, "loss": global_loss, "lr": lr,
                "grad_norm": norm, "stepped": stepped,
                "time": round(time.perf_counter() - self._started, 4)}
        self._report(info)
        return info

    def _buffers(self) -> list[Tensor]:
        named = getattr(self.model, "named_buffers", None)
        return [b for _, b in named()] if named else []

    def _accumulate(self, params: list, total: int) -> float:
        """This worker's micro-batches into the exact sum, reduced over all workers; sets the
        mean gradients and returns the sample-weighted mean loss of the step."""
        if self._sum is None:
            self._sum = distributed.ExactSum([int(np.prod(p.shape, dtype=np.int64))
                                              for p in params])
            priors = getattr(self, "_priors", None)
            if priors:
                self._sum.exponents = list(priors)
            for k, p in enumerate(params):
                self._hook_gradient(k, p)
        acc = self._sum
        acc.reset(single=self.accumulate == 1)  # one micro-batch a worker: float32 exchanged
        counters = self._counters()
        start = [int(c._data) for c in counters] + [random.default_generator.state]
        slots = np.zeros((total, 2), np.int64)  # per global micro-batch: samples, loss bits
        for a in range(self.accumulate):
            index = a * self.world + self.rank
            batch = self._next_batch()
            for attempt in range(2):
                self._position(start, index, counters)
                before = [int(c._data) for c in counters] + [random.default_generator.state]
                _, loss, _ = self._forward(batch)
                if not self._learn_advance(before, counters) or index == 0 or attempt:
                    break  # a wrong guess of the advance: redo at the right position
            self.optimizer.zero_grad()
            n = len(_split(batch)[0][0])
            # Each gradient goes into the sum as backward completes it (_hook_gradient); in the
            # last micro-batch, finished buckets start their all-reduce during backward.
            self._collecting = (acc, n, a == self.accumulate - 1)
            try:
                (self.scaler.scale(loss) if self.scaler else loss).backward()
            finally:
                self._collecting = None
            slots[index] = (n, np.float64(loss.item()).view(np.int64))
        self._position(start, total, counters)  # where one worker accumulating M would be
        reduced = acc.reduce(slots, "reducing the gradients of a step")
        assert reduced is not None  # reduce returns the slots it was given, summed
        slots = reduced
        samples = int(slots[:, 0].sum())
        means = acc.results(samples, reuse=True)  # views, as DDP's gradient_as_bucket_view
        for p, g in zip(params, means):
            p.grad = None if g is None else Tensor._wrap(g.reshape(p.shape))
        losses = slots[:, 1].copy().view(np.float64)
        weighted = 0.0
        for n, value in zip(slots[:, 0].tolist(), losses.tolist()):  # in global order
            weighted += n * value
        return weighted / samples

    def _hook_gradient(self, k: int, param: Tensor) -> None:
        """Hooks parameter k: inside a step's backward, its complete gradient goes into the
        exact sum and its memory is released (the sum holds it now). The hook holds the
        trainer weakly (the parameters may outlive it and its sum) and goes with it."""
        trainer = weakref.ref(self)

        def hook(p: Tensor) -> None:
            owner = trainer()
            if owner is None:
                handle.remove()
            elif owner._collecting is not None and p.grad is not None:
                acc, n, final = owner._collecting
                acc.add_one(k, p.grad._data, n, final)
                p.grad = None

        handle = param.register_post_accumulate_grad_hook(hook)

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
        names = list(self.metrics)
        rows: list[list[float]] = []  # per batch: loss·n, n, correct, is-classes, metric·n...
        try:
            with no_grad():
                for k, batch in enumerate(loader):
                    if k % self.world != self.rank:  # another worker's batch
                        rows.append([0.0] * (4 + len(names)))
                        continue
                    output, loss, target = self._forward(batch)
                    n = len(_split(batch)[0][0])  # examples in the batch: the first input's
                    y = target.numpy() if isinstance(target, Tensor) else target
                    out = output.numpy()
                    classes = (isinstance(y, np.ndarray) and y.dtype.kind in "iu"
                               and out.ndim == y.ndim + 1 and len(y) == n)
                    correct = int((out.argmax(1) == y).sum()) if classes else 0
                    rows.append([loss.item() * n, n, correct, 1.0 if classes else 0.0]
                                + [float(fn(output, target)) * n
                                   for fn in self.metrics.values()])
        finally:
            self.model.train(was_training)
        table = np.array(rows, np.float64).reshape(len(rows), 4 + len(names))
        if self.world > 1:  # each row has one worker's numbers, the others' zeros: exact
            distributed._allreduce(table, "gathering the evaluation")
        total_loss, correct, count, classes = 0.0, 0, 0, True
        totals = dict.fromkeys(names, 0.0)
        for row in table.tolist():  # in batch order, whatever W is
            total_loss += row[0]
            count += int(row[1])
            classes = classes and row[3] == 1.0
            if classes:
                correct += int(row[2])
            for name, value in zip(names, row[4:]):
                totals[name] += value
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
        if self.micro_batches > 1:
            priors = self._sum.exponents if self._sum is not None else self._priors_or_zero()
            extra.update({f"grad.exp.{k}": int(e) for k, e in enumerate(priors)})
        return extra

    def _priors_or_zero(self) -> list[int]:
        return list(getattr(self, "_priors", None) or [0] * len(self.optimizer.params))

    def save(self, evaluation: Optional[dict] = None) -> Optional[str]:
        """Writes a checkpoint of the current step (rank 0 only), a candidate for the best when
        `evaluation` (from evaluate()) is given; returns its path."""
        if self.manager is None:
            raise ValueError("Trainer.save: no checkpoint_dir")
        self._saved_step = self.step
        if self.shards is not None:  # every worker takes part; rank 0 writes it all
            self.shards.gather_state()
        try:
            if self.rank != 0:
                return None
            metric, higher = self._best_of(evaluation) if evaluation else (None, True)
            if self.log is not None:  # the rows up to this checkpoint as durable as it
                self.log.sync()
            return self.manager.save(self.step, self.model, self.optimizer, self._extra(),
                                     metric=metric, higher_is_better=higher)
        finally:
            if self.shards is not None:
                self.shards.release()

    def resume(self, path: Optional[str] = None) -> bool:
        """Restores the newest intact checkpoint of the checkpoint folder, or of `path` when it
        is a folder, or the checkpoint file `path`: model, optimizer, step, loader position,
        loss scale and the default generator. A corrupt newer checkpoint is skipped with a
        warning naming it (CheckpointManager.restore_newest). Returns False when there is
        none."""
        if self.world > 1 and self.shards is not None:  # the whole state loaded, this share kept
            self.shards.materialise()
        try:
            extra = self._load_newest(path)
        finally:
            if self.world > 1 and self.shards is not None:
                self.shards.release()
        if extra is None:
            return False
        self._release_batches()

        def part(prefix: str) -> dict:
            return {k[len(prefix):]: v for k, v in extra.items() if k.startswith(prefix)}

        if hasattr(self.loader, "load_state_dict"):
            self.loader.load_state_dict(part("data."))
        if self.scaler is not None:
            self.scaler.load_state_dict(part("amp."))
        if "rng.default" in extra:
            random.set_rng_state(extra["rng.default"])
        self._priors = [int(extra[f"grad.exp.{k}"]) for k in range(len(self.optimizer.params))
                        if f"grad.exp.{k}" in extra] or None
        if self._priors is not None and len(self._priors) != len(self.optimizer.params):
            self._priors = None
        if self._sum is not None:
            self._sum.exponents = self._priors_or_zero()
        self.step = int(extra.get("train.step", self.optimizer.step_count))
        self._saved_step = self.step
        if self.log is not None:
            self.log.truncate_after(self.step)
        return True

    def _load_newest(self, path: Optional[str]) -> Optional[dict]:
        """Rank 0 finds the checkpoint and loads it; under W workers its bytes are broadcast
        and loaded by the others. The extra integers, or None when there is none."""
        def load_file(found: str) -> tuple[Optional[bytes], dict]:
            if self.world == 1:
                return None, checkpoint.load(found, self.model, self.optimizer)
            with open(found, "rb") as f:
                data = f.read()
            return data, checkpoint.from_bytes(data, self.model, self.optimizer)

        loaded: Optional[tuple[Optional[bytes], dict]] = None
        if self.rank == 0:
            if path is not None and not os.path.isdir(path):
                loaded = load_file(path)
            else:
                if path is not None:
                    manager = checkpoint.CheckpointManager(path)
                elif self.manager is None:
                    raise ValueError("Trainer.resume: no checkpoint_dir and no path")
                else:  # its own folder: a best.ckpt update that a kill interrupted, finished
                    manager = self.manager
                    manager.recover()
                found = manager.restore_newest(load_file)
                loaded = None if found is None else found[1]
        if self.world == 1:
            return None if loaded is None else loaded[1]
        data = distributed.broadcast_bytes(None if loaded is None else loaded[0],
                                           "reading the checkpoint to resume from")
        if data is None:
            return None
        return loaded[1] if loaded is not None else checkpoint.from_bytes(data, self.model,
                                                                          self.optimizer)

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

    def _broadcast_state(self) -> None:
        """Rank 0's parameters, buffers and default generator on every rank (DDP's start)."""
        arrays = [p._data for p in self.optimizer.params] + [b._data for b in self._buffers()]
        distributed.broadcast_arrays(arrays, "broadcasting the parameters")
        random.set_rng_state(distributed.broadcast_int(random.get_rng_state(),
                                                       "broadcasting the generator"))

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
