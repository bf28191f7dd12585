"""Trainer: the training loop around a model, a loss and an optimizer.

One step: lr = schedule(step count); M micro-batches (the strategy's `micro_batches`; one a
worker when None) shared among the W workers, worker r computing global micro-batches r, r + W,
...: for each, forward (under autocast if asked), loss, backward of the scaled loss, each
gradient added into the exact sum of distributed.py weighted by its sample count as backward
completes it (a post-accumulate-grad hook; in the last micro-batch a finished bucket's
all-reduce starts there, and the gradient's memory is released at once); the sum all-reduced and
rounded once to the mean over the step's samples (the same bits for every W dividing M);
unscale; clip the global norm; optimizer step (skipped, with the schedule, on a non-finite
gradient); scaler update. Every `Evaluation.every` steps the held-out loader runs in eval mode
without gradients (loss weighted by batch size, accuracy when the target holds class indices;
under W workers each computes its share of the batches and the sums are gathered in batch order)
and a checkpoint is written; the manager keeps the last few and the best by the chosen metric.

Randomness follows the global micro-batch position, not the worker: before micro-batch i of a
step (M > 1) every dropout counter (`draws` buffer) is set to its value at the step's start plus
i·2^32, and the default generator to its state at the step's start advanced by i·2^32 draws
(SplitMix64 states are additive: random.advanced); after the step both stand at the start plus
M·2^32. So dropout masks, and any draw from the default generator during forward, are the same
whichever worker computes a micro-batch, with nothing learned or redone; a micro-batch that
draws more than 2^32 from one of them is refused with an error (its draws would overlap the
next one's).

Under mpiexec (W > 1; the Trainer calls distributed.init() itself when the launcher announces
several processes) parameters, buffers and the default generator are broadcast from rank 0 when
fit() starts; after every step the batch-norm running statistics are those of one process
running the step's M micro-batches in order (nn.running_stats: each micro-batch's statistics
gathered, the M updates applied in global order on every worker) and the other buffers rank
0's, so the state, the evaluation and the best checkpoint do not depend on W; the logged loss
is the sample-weighted mean over all workers' micro-batches, rank 0 alone writes checkpoints
and metrics, resume() reads rank 0's checkpoint and broadcasts it, and an
exception on any rank ends the job (distributed.abort_on).

Batches are tuples (inputs..., target): the model gets the inputs, the loss function gets
(output, target). A checkpoint holds the model, the optimizer (its step count drives the
schedule) and, in extra, the trainer's step, the loader's position, the loss scaler and the
exact sum's grid exponents, so `resume()` in a new process, at any W dividing M, continues the
same trajectory bit for bit. The extra also holds the state of `om.default_generator`, so what
draws from it (an `F.dropout` without a seed, a layer built after the resume) draws what the
uninterrupted run would.

With `Checkpoints(dir)` the run folder also gets `metrics.jsonl`: one JSON object a line, one
per step ({"event": "step", "step", "loss", "lr", "grad_norm", "stepped", "time"}) and one per
evaluation ({"event": "eval", "step", "loss", "accuracy", and each of `metrics`}); a
non-finite number is written as null. fit() first drops the rows after the step it starts from
(the resumed checkpoint's, or 0 without one), and any torn line a crash left, with a warning
(onemodel/metrics_log.py), so the log always reads as one run; it is fsynced before every
checkpoint. `python -m onemodel.plot RUN_DIR` draws it.

The best checkpoint is chosen by the Evaluation's `best_metric`: by default the validation
accuracy when the targets are class indices, the validation loss otherwise; any name of
`metrics` with `best_mode` "max" or "min". An evaluation whose metric is missing or not finite
is still checkpointed, never taken as the best, and warns.

The package, by concern: _step (one step: micro-batches, randomness by position, the exact sum
and its post-accumulate-grad hooks), _evaluation (evaluate, the best checkpoint's metric),
_checkpoints (save, resume, rank 0's state on every rank), each a mixin of Trainer; _loop
(Trainer: its arguments, the batches, the callbacks and fit); options (the option groups and
strategies, and the former keyword arguments mapped onto them); callbacks (Callback,
ProgressBar, CSVLogger, EarlyStopping, the run log).
"""
from __future__ import annotations

from ..metrics_log import METRICS_LOG as METRICS_LOG
from ._loop import Trainer as Trainer
from .callbacks import Callback as Callback
from .callbacks import CSVLogger as CSVLogger
from .callbacks import EarlyStopping as EarlyStopping
from .callbacks import ProgressBar as ProgressBar
from .options import Checkpoints as Checkpoints
from .options import DataParallel as DataParallel
from .options import Evaluation as Evaluation
from .options import Precision as Precision
from .options import SingleProcess as SingleProcess
from .options import Strategy as Strategy
from .options import ZeRO as ZeRO

__all__ = ["Trainer", "Evaluation", "Checkpoints", "Precision", "Strategy", "SingleProcess",
           "DataParallel", "ZeRO", "Callback", "ProgressBar", "CSVLogger", "EarlyStopping"]
