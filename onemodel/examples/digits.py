"""Train a small convolutional network on scikit-learn's handwritten digits.

The data set ships with scikit-learn (1797 images of 8x8 pixels, ten classes). The run splits it
into train / validation / test with a fixed seed, trains with AdamW, a warm-up cosine schedule
and gradient-norm clipping, evaluates on the validation split and writes a checkpoint after
every epoch (the last three, and best.ckpt, the one with the best validation accuracy), then
prints the test accuracy of the best checkpoint.

Each run gets a folder of its own, OUT/1, OUT/2, ... (its options in run.json, its checkpoints,
and metrics.jsonl for `onemodel-plot`); --resume continues the newest run, or the one named,
from its last checkpoint to the same bits as a run never stopped.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Optional

import numpy as np

import onemodel as om
import onemodel.functional as F
from onemodel import nn
from onemodel.data import DataLoader
from onemodel.optim import AdamW
from onemodel.optim.lr import warmup_cosine
from onemodel.train import Checkpoints, Evaluation, Trainer

from ._runs import (
    decay_on_matrices,
    fit_run,
    job_options,
    open_run,
    run_options,
    speaker,
    write_result,
)

# The options a run is defined by: a resumed run keeps them (run.json).
DEFAULTS: dict[str, Any] = {"epochs": 20, "batch_size": 64, "lr": 3e-3, "weight_decay": 0.01,
                            "seed": 0}


def load_splits(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        sys.exit("the digits data set comes with scikit-learn: pip install 'onemodel[examples]'")
    digits = load_digits()
    x = (digits.images.astype(np.float32) / np.float32(16.0))[:, None, :, :]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test, n_val = len(y) // 5, len(y) // 10
    test, val, train = np.split(order, [n_test, n_test + n_val])
    return {"train": (x[train], y[train]), "val": (x[val], y[val]), "test": (x[test], y[test])}


class DigitsNet(nn.Module):
    def __init__(self, seed: int) -> None:
        super().__init__()
        g = om.Generator(seed)
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, generator=g), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1, generator=g), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 4 * 4, 128, generator=g), nn.ReLU(),
            nn.Dropout(0.25, seed=seed), nn.Linear(128, 10, generator=g))

    def forward(self, x: om.Tensor) -> om.Tensor:
        return self.classifier(self.features(x))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="onemodel-digits", description=__doc__.split("\n\n")[0],
        epilog="Example: onemodel-digits --epochs 5 --threads 1; then onemodel-digits --resume "
               "to continue it, and onemodel-plot runs/digits/1 to draw its curves.")
    job_options(p, DEFAULTS, {
        "epochs": "passes over the training split", "batch_size": "images per step",
        "lr": "peak learning rate of the warm-up cosine schedule",
        "weight_decay": "AdamW's decoupled weight decay of the weights (not of biases and "
                        "batch-norm scales)",
        "seed": "seed of the split, the initial weights, the dropout masks and the batch order"})
    run_options(p, os.path.join("runs", "digits"))
    return p


def main(argv: Optional[list[str]] = None) -> float:
    p = parser()
    args = p.parse_args(argv)
    folder, o, resumed = open_run(args, p, DEFAULTS, "onemodel-digits",
                                  positive=("epochs", "batch_size", "lr"))
    say = speaker(args.quiet)

    data = load_splits(o["seed"])
    train = DataLoader(data["train"], o["batch_size"], seed=o["seed"], shuffle=True)
    model = DigitsNet(o["seed"])
    optimizer = AdamW(decay_on_matrices(model, o["weight_decay"]), lr=o["lr"])
    steps_per_epoch = len(train)
    total = steps_per_epoch * o["epochs"]
    warmup = min(steps_per_epoch, total // 2)
    trainer = Trainer(model, F.cross_entropy, optimizer, train,
                      schedule=warmup_cosine(o["lr"], warmup_steps=warmup, total_steps=total,
                                              final_factor=0.02),
                      clip_norm=1.0,
                      evaluation=Evaluation(DataLoader(data["val"], 512, shuffle=False),
                                            every=steps_per_epoch),
                      checkpoints=Checkpoints(folder, keep_last=3),
                      callbacks=[] if args.quiet else None)
    say(f"onemodel {om.__version__}: {om.config()['isa']}, {om.get_num_threads()} threads, "
        f"{om.get_mode()} mode; {len(data['train'][1])} training images, {total} steps")
    seconds, best_step = fit_run(trainer, total, folder, resumed, p, say)
    test = trainer.evaluate(DataLoader(data["test"], 512, shuffle=False))["accuracy"]
    best = trainer.manager.best_metric if trainer.manager is not None else None
    best_text = "none" if best is None else f"{100 * best:.1f}%"
    headline = f"test accuracy {100 * test:.1f}% (best validation {best_text})"
    write_result(folder, p.prog, o, headline, {"test_accuracy": test,
                                               "best_validation_accuracy": best},
                 trainer, best_step, seconds)
    print(f"{headline} in {seconds:.1f} s; run folder {folder}")
    return test


def console() -> None:
    """The onemodel-digits command."""
    main()


if __name__ == "__main__":
    console()
