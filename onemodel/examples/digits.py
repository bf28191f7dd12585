"""Train a small convolutional network on scikit-learn's handwritten digits.

    python -m onemodel.examples.digits [--epochs 30] [--out runs/digits] [--threads N]

The data set ships with scikit-learn (1797 images of 8×8 pixels, ten classes). The run splits
it into train / validation / test with a fixed seed, trains with AdamW, a warm-up cosine
schedule and gradient-norm clipping, shows a progress bar with the loss and learning rate,
evaluates on the validation split and writes a checkpoint after every epoch (the last three,
and a copy of the one with the best validation accuracy), then reports the test accuracy of the
best checkpoint.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import onemodel as om
import onemodel.functional as F
from onemodel import checkpoint, nn
from onemodel.data import DataLoader
from onemodel.optim import AdamW
from onemodel.optim.lr import WarmupCosineLR
from onemodel.train import Trainer


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


def progress(epoch: int, epochs: int, done: int, total: int, loss: float, lr: float) -> None:
    width = 24
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    print(f"\repoch {epoch:>2}/{epochs} [{bar}] {done:>3}/{total} loss {loss:.4f} "
          f"lr {lr:.2e}", end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=os.path.join("runs", "digits"))
    args = p.parse_args(argv)
    if args.threads:
        om.set_num_threads(args.threads)

    data = load_splits(args.seed)
    train = DataLoader(data["train"], args.batch_size, seed=args.seed)
    model = DigitsNet(args.seed)
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    steps_per_epoch = len(train)
    total = steps_per_epoch * args.epochs
    start = time.perf_counter()

    def report(info: dict) -> None:
        epoch, done = divmod(info["step"] - 1, steps_per_epoch)
        if info["event"] == "step":
            progress(epoch + 1, args.epochs, done + 1, steps_per_epoch, info["loss"], info["lr"])
        else:
            print(f"  val accuracy {info['accuracy']:.4f}  ({time.perf_counter() - start:.1f} s)",
                  file=sys.stderr)

    warmup = min(steps_per_epoch, total // 2)
    trainer = Trainer(model, F.cross_entropy, optimizer, train,
                      schedule=WarmupCosineLR(args.lr, warmup_steps=warmup, total_steps=total,
                                              final_factor=0.02),
                      clip_norm=1.0, eval_every=steps_per_epoch, checkpoint_dir=args.out,
                      keep_last=3, eval_loader=DataLoader(data["val"], 512, shuffle=False),
                      callback=report)
    print(f"onemodel {om.__version__}: {om.config()['isa']}, {om.get_num_threads()} threads, "
          f"{om.get_mode()} mode; {len(data['train'][1])} training images, {total} steps",
          file=sys.stderr)
    trainer.fit(total)
    checkpoint.load(trainer.manager.best_path, model)
    test = trainer.evaluate(DataLoader(data["test"], 512, shuffle=False))["accuracy"]
    print(f"test accuracy {test:.4f} (best validation {trainer.manager.best_metric:.4f}) "
          f"in {time.perf_counter() - start:.1f} s; checkpoints in {args.out}")
    return test


if __name__ == "__main__":
    main()
