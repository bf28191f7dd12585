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
from onemodel.optim import AdamW, clip_grad_norm
from onemodel.optim.lr import WarmupCosineLR


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


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray, batch: int = 512) -> float:
    model.eval()
    correct = 0
    with om.no_grad():
        for i in range(0, len(y), batch):
            logits = model(om.from_numpy(x[i:i + batch]))
            correct += int((logits.numpy().argmax(1) == y[i:i + batch]).sum())
    model.train()
    return correct / len(y)


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
    os.makedirs(args.out, exist_ok=True)

    data = load_splits(args.seed)
    x_train, y_train = data["train"]
    model = DigitsNet(args.seed)
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    steps_per_epoch = -(-len(y_train) // args.batch_size)
    total = steps_per_epoch * args.epochs
    schedule = WarmupCosineLR(args.lr, warmup_steps=steps_per_epoch, total_steps=total,
                              final_factor=0.02)
    rng = np.random.default_rng(args.seed)
    manager = checkpoint.CheckpointManager(args.out, keep_last=3)
    print(f"onemodel {om.__version__}: {om.config()['isa']}, {om.get_num_threads()} threads, "
          f"{om.get_mode()} mode; {len(y_train)} training images, {total} steps",
          file=sys.stderr)
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(y_train))
        for i in range(steps_per_epoch):
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            schedule.apply(optimizer)
            loss = F.cross_entropy(model(om.from_numpy(x_train[idx])), y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            clip_grad_norm(model.parameters(), 1.0)
            optimizer.step()
            progress(epoch, args.epochs, i + 1, steps_per_epoch, loss.item(), optimizer.lr)
        val = accuracy(model, *data["val"])
        manager.save(optimizer.step_count, model, optimizer, extra={"epoch": epoch},
                     metric=val)
        print(f"  val accuracy {val:.4f}  ({time.perf_counter() - start:.1f} s)",
              file=sys.stderr)
    checkpoint.load(manager.best_path, model)
    test = accuracy(model, *data["test"])
    print(f"test accuracy {test:.4f} (best validation {manager.best_metric:.4f}) "
          f"in {time.perf_counter() - start:.1f} s; checkpoints in {args.out}")
    return test


if __name__ == "__main__":
    main()
