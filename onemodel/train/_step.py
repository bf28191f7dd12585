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

# Micro-batch i of a step draws from every dropout counter and the default generator starting
# i * STRIDE draws after where the step started them, whichever worker computes it.
STRIDE = 1 << 32


def _signed(value: int) -> int:
    """An unsigned 64-bit count as the int64 a counter buffer holds (wrapping, as its use)."""
    return value - (1 << 64) if value >= 1 << 63 else value


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

    def _counters(self) -> list[tuple[str, Tensor]]:
        """The dropout counters, by name: every int64 scalar buffer named `draws`."""
        found = getattr(self, "_counter_list", None)
        if found is None:
            named = getattr(self.model, "named_buffers", None)
            found = [(name, b) for name, b in (named() if named else ())
                     if name.rsplit(".", 1)[-1] == "draws" and b._data.dtype == np.int64
                     and b._data.ndim == 0]
            self._counter_list = found
        return found

    def _place(self, start: list[int], index: int, counters: list[tuple[str, Tensor]]) -> None:
        """Sets every counter, and the default generator, to where micro-batch `index` of the
        step starts: the step's start plus index times STRIDE draws."""
        for (_, c), s in zip(counters, start):
            c._data[...] = _signed((s + index * STRIDE) & random.MASK64)
            c._version += 1
        random.default_generator.state = random.advanced(start[-1], index * STRIDE)

    def _check_draws(self, start: list[int], index: int,
                     counters: list[tuple[str, Tensor]]) -> None:
        """Refuses a micro-batch that drew more than STRIDE from a counter or the generator:
        the next micro-batch's draws would repeat its own."""
        moved = [(f"the dropout counter {name}", (int(c._data) - s - index * STRIDE)
                  & random.MASK64) for (name, c), s in zip(counters, start)]
        moved.append(("the default generator", random.draws_between(
            random.advanced(start[-1], index * STRIDE), random.default_generator.state)))
        for what, draws in moved:
            if draws > STRIDE:
                raise RuntimeError(
                    f"Trainer: micro-batch {index} of step {self.step + 1} moved {what} by "
                    f"{draws} draws (mod 2^64: it drew too many, or was set elsewhere); a "
                    f"micro-batch may draw at most {STRIDE} (2^32) from each, since micro-batch "
                    "i of a step starts i * 2^32 draws after the step's start")

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
        start = [int(c._data) for _, c in counters] + [random.default_generator.state]
        slots = np.zeros((total, 2), np.int64)  # per global micro-batch: samples, loss bits
        for a in range(self.accumulate):
            index = a * self.world + self.rank
            batch = self._next_batch()
            self._place(start, index, counters)
            self._running.begin(index)
            _, loss, _ = self._forward(batch)
            self.optimizer.zero_grad()
            n = len(_split(batch)[0][0])
            # Each gradient goes into the sum as backward completes it (_hook_gradient); in the
            # last micro-batch, finished buckets start their all-reduce during backward.
            self._collecting = (acc, n, a == self.accumulate - 1)
            try:
                (self.scaler.scale(loss) if self.scaler else loss).backward()
            finally:
                self._collecting = None
            self._check_draws(start, index, counters)
            slots[index] = (n, np.float64(loss.item()).view(np.int64))
        self._place(start, total, counters)  # where one worker accumulating M would be
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
