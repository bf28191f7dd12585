"""The CRNN line recognizer, its CTC loss, greedy decoding and CER.

Written once against a namespace (`nn`, `F`), so the same code builds the onemodel model and the
PyTorch one (tools/crnn_ref): six convolution blocks (3x3 without bias, batch norm, ReLU; max
pooling that halves the height in the first five and the width in the first two, so a time step
is 4 columns), a two-layer bidirectional LSTM of 192 that sees each line's true length, and a linear
layer to the classes; log-softmax over the classes, (T, B, classes) as CTC takes it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

CHANNELS = (32, 64, 96, 96, 128, 128)
POOLS = ((2, 2), (2, 2), (2, 1), (2, 1), (2, 1), None)
HIDDEN = 192
COLUMNS_PER_STEP = 4


def build(nn: Any, F: Any, classes: int, hidden: int = HIDDEN, folded: bool = False) -> Any:
    """The recognizer as a module of the library `nn` (onemodel.nn or torch.nn). `folded`
    builds the exported form: batch norm folded into convolutions with a bias (export.py), the
    norms' places held by identities so that every name stays."""

    class CRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers, channels = [], 1
            for out, pool in zip(CHANNELS, POOLS):
                # No bias unfolded: the batch norm after it would subtract it again.
                layers += [nn.Conv2d(channels, out, 3, padding=1, bias=folded),
                           nn.Identity() if folded else nn.BatchNorm2d(out), nn.ReLU()]
                if pool:
                    layers.append(nn.MaxPool2d(pool))
                channels = out
            self.features = nn.Sequential(*layers)
            self.rnn = nn.LSTM(channels, hidden, num_layers=2, bidirectional=True)
            self.classifier = nn.Linear(2 * hidden, classes)

        def forward(self, images: Any, steps: Any) -> Any:
            """images (B, 1, 32, W) -> log-probabilities (W / 4, B, classes); `steps` is each
            line's true length in time steps."""
            features = self.features(images)           # (B, C, 1, W / 4)
            sequence = features.squeeze(2).permute(2, 0, 1)  # (T, B, C)
            out = self.recurrent(sequence, steps)
            return F.log_softmax(self.classifier(out), dim=-1)

        def recurrent(self, sequence: Any, steps: Any) -> Any:
            return self.rnn(sequence, lengths=steps)[0]

    return CRNN()


def time_steps(widths: np.ndarray) -> np.ndarray:
    return np.asarray(widths, np.int64) // COLUMNS_PER_STEP


def greedy_decode(log_probs: np.ndarray, steps: np.ndarray) -> list[list[int]]:
    """Best path: the most likely class at each step, repeats merged, blanks (0) removed."""
    best = np.asarray(log_probs).argmax(-1)  # (T, B)
    out = []
    for b, length in enumerate(np.asarray(steps)):
        path = best[:int(length), b]
        keep = np.ones(len(path), bool)
        keep[1:] = path[1:] != path[:-1]
        out.append([int(c) for c in path[keep] if c != 0])
    return out


def edit_distance(a: list, b: list) -> int:
    """Levenshtein distance (insertions, deletions and substitutions cost 1)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def character_errors(predictions: list[list[int]], targets: list[list[int]]) -> tuple[int, int]:
    """(edits, characters) over lines: the CER is their ratio."""
    if len(predictions) != len(targets):
        raise ValueError(f"character_errors: {len(predictions)} predictions for "
                         f"{len(targets)} targets")
    edits = sum(edit_distance(p, t) for p, t in zip(predictions, targets))
    return edits, sum(len(t) for t in targets)
