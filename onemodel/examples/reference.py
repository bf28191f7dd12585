"""The reference trainings: seeded models on seeded data, for determinism checks and benchmarks.

Every number comes from onemodel itself (SplitMix64 initialisation and data), so a run is the
same on every machine, and `state_hash` after it is the pinned fingerprint of exact mode:

    python -m onemodel.examples.reference convnet transformer   # state hashes after 20 steps
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

import onemodel as om
import onemodel.functional as F
from onemodel import checkpoint, nn
from onemodel.optim import SGD, AdamW, Optimizer, clip_grad_norm
from onemodel.optim.lr import Schedule, cosine, warmup_cosine


@dataclass
class Training:
    """A model, its optimizer and schedule, and a function that yields batch k's loss."""
    model: nn.Module
    optimizer: Optimizer
    schedule: Schedule
    loss_at: Callable[[int], om.Tensor]
    clip: float = 1.0

    def step(self, k: int) -> float:
        self.schedule.apply(self.optimizer)
        loss = self.loss_at(k)
        self.optimizer.zero_grad()
        loss.backward()
        if self.clip:
            clip_grad_norm(self.model.parameters(), self.clip)
        self.optimizer.step()
        return loss.item()


def _images(g: om.Generator, n: int, c: int, size: int, classes: int) -> tuple:
    x = g.uniform(-1.0, 1.0, (n, c, size, size))
    labels = (g.uniform(0.0, 1.0, (n,)).numpy() * classes).astype(np.int64)
    return x, labels


def _tokens(g: om.Generator, n: int, length: int, vocab: int, classes: int) -> tuple:
    ids = (g.uniform(0.0, 1.0, (n, length)).numpy() * vocab).astype(np.int64)
    labels = (ids[:, 0] + ids[:, -1]) % classes  # learnable: depends on two positions
    return ids, labels


def _batch(k: int, batch: int, n: int) -> slice:
    start = (k * batch) % n
    return slice(start, start + batch)


def mlp(seed: int = 0, batch: int = 32) -> Training:
    g = om.Generator(seed)
    model = nn.Sequential(nn.Linear(64, 128, generator=g), nn.ReLU(),
                          nn.Linear(128, 128, generator=g), nn.GELU(),
                          nn.Linear(128, 10, generator=g))
    x, y = _images(g, 256, 1, 8, 10)
    x = x.reshape(256, 64)
    opt = SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)

    def loss_at(k: int) -> om.Tensor:
        s = _batch(k, batch, 256)
        return F.cross_entropy(model(x[s]), y[s])

    return Training(model, opt, cosine(0.05, 100), loss_at)


class ConvNet(nn.Module):
    def __init__(self, g: om.Generator) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1, generator=g), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, generator=g), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(16, 10, generator=g)

    def forward(self, x: om.Tensor) -> om.Tensor:
        return self.head(self.features(x))


def convnet(seed: int = 0, batch: int = 16) -> Training:
    g = om.Generator(seed)
    model = ConvNet(g)
    x, y = _images(g, 128, 1, 12, 10)
    opt = AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def loss_at(k: int) -> om.Tensor:
        s = _batch(k, batch, 128)
        return F.cross_entropy(model(x[s]), y[s])

    return Training(model, opt, cosine(3e-3, 100, min_lr=1e-4), loss_at)


class TransformerClassifier(nn.Module):
    def __init__(self, g: om.Generator, vocab: int, d: int, classes: int, dropout: float,
                 seed: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d, generator=g)
        self.layer0 = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=dropout,
                                                 activation="gelu", batch_first=True,
                                                 generator=g, seed=1000 + seed)
        self.layer1 = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=dropout,
                                                 norm_first=True, batch_first=True,
                                                 generator=g, seed=2000 + seed)
        self.head = nn.Linear(d, classes, generator=g)

    def forward(self, ids: om.Tensor) -> om.Tensor:
        h = self.layer1(self.layer0(self.embed(ids)))
        return self.head(h.mean(1))


def transformer(seed: int = 0, batch: int = 16) -> Training:
    g = om.Generator(seed)
    model = TransformerClassifier(g, vocab=40, d=32, classes=5, dropout=0.1, seed=seed)
    ids, y = _tokens(g, 128, 12, 40, 5)
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def loss_at(k: int) -> om.Tensor:
        s = _batch(k, batch, 128)
        return F.cross_entropy(model(om.from_numpy(ids[s])), y[s], label_smoothing=0.05)

    return Training(model, opt, warmup_cosine(1e-3, 5, 100, 0.1), loss_at)


TRAININGS = {"mlp": mlp, "convnet": convnet, "transformer": transformer}


def state_hash_after(name: str, steps: int = 20) -> str:
    """The SHA-256 of the whole training state after `steps` steps of a reference training."""
    training = TRAININGS[name]()
    for k in range(steps):
        training.step(k)
    return checkpoint.state_hash(training.model, training.optimizer)


def state_after(name: str, steps: int = 20) -> dict:
    """Name -> array of the whole training state after `steps` steps (to locate a mismatch)."""
    training = TRAININGS[name]()
    for k in range(steps):
        training.step(k)
    state = {k: v.numpy().copy() for k, v in training.model.state_dict().items()}
    state.update({f"optimizer.{k}": v.copy()
                  for k, v in training.optimizer.state_tensors().items()})
    return state


if __name__ == "__main__":
    import json
    names = sys.argv[1:] or list(TRAININGS)
    print(json.dumps({name: state_hash_after(name) for name in names}))
