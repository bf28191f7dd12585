"""The Trainer's evaluation, a mixin of Trainer: loss, accuracy and `metrics` over the held-out
loader (each worker its share of the batches, the sums gathered in batch order), and the metric
that chooses the best checkpoint."""
# mypy: disable-error-code="attr-defined"
# (a mixin reads the attributes that Trainer.__init__ sets, in _loop.py, and the methods of
# the other rooms, which mypy does not see on the mixin alone)
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import distributed
from ..autograd import no_grad
from ..tensor import Tensor
from ._step import _split
from .options import _DIRECTIONS


class TrainerEvaluation:
    """Mixed into Trainer: evaluate and the best checkpoint's metric."""

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
