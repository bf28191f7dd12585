"""The Trainer's step, a mixin of Trainer: the schedule's learning rate, the M micro-batches
(forward under autocast, loss, backward of the scaled loss), the dropout counters and the default
generator set by the global micro-batch position, each gradient added into the exact sum by a
post-accumulate-grad hook and the sum reduced over the workers, then unscale, clipping, the
optimizer step and the scaler's update (the package notes)."""
# mypy: disable-error-code="attr-defined"
# (a mixin reads the attributes that Trainer.__init__ sets, in _loop.py, and the methods of
# the other rooms, which mypy does not see on the mixin alone)
from __future__ import annotations

import contextlib
import time
import weakref
from typing import Any, Optional

import numpy as np

from .. import amp, distributed, random
from ..nn.running_stats import RunningUpdates, running_updates
from ..optim import clip_grad_norm, grad_norm
from ..tensor import Tensor

_GOLDEN_INVERSE = pow(random.GOLDEN, -1, 1 << 64)  # counts the generator's draws


def _split(batch: Any) -> tuple[tuple, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise ValueError("Trainer: a batch must be a tuple (inputs..., target), got "
                         f"{type(batch).__name__}")
    return tuple(batch[:-1]), batch[-1]


class TrainerStep:
    """Mixed into Trainer: train_step and the micro-batches, counters and hooks it is made of."""

    _sum: Optional[distributed.ExactSum]  # declared for mypy; Trainer.__init__ sets them
    _collecting: Optional[tuple]
    _running: RunningUpdates  # the step's running-statistics records

    def _forward(self, batch: Any) -> tuple[Any, Tensor, Any]:
        inputs, target = _split(batch)
        cast = amp.autocast(self.autocast) if self.autocast else contextlib.nullcontext()
        with cast:
            output = self.model(*inputs)
            return output, self.loss_fn(output, target), target

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
        else:  # the running statistics as one process running the M in order would have
            with running_updates(self.model) as self._running:
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
                self._running.begin(index)
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
