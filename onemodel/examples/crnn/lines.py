"""Text-line images 32 px high from what packages ship, as a pure function of (seed, step).

Two sources, mixed in every batch:

- handwriting: digit strings assembled from scikit-learn's 8x8 digit scans, each scaled to 16 to
  26 px high, with random gaps and vertical jitter; the label is the digits in order;
- print: receipt-like lines (items, quantities, prices, dates, times) rendered with Pillow's
  bundled font (`ImageFont.load_default(size=...)`) at 14 to 22 px.

Ink is 1, paper 0. Every random choice (source, text, sizes, gaps, augmentation) comes from a
SplitMix64 generator (onemodel.Generator) keyed by (seed, step, line), so a batch is the same in
every process and library. Augmentation is light: a small shear, a vertical shift, a blur on some
lines, contrast and additive noise. The handwriting source splits the scans: the first 80% make
training lines, the rest the validation lines, which are drawn from their own key space: no
validation line is ever drawn in training.

A batch pads its lines to the widest by repeating each line's last column and returns the true
widths; widths are multiples of 4 (the recognizer's time step is 4 columns).
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ...random import Generator, mix

HEIGHT = 32
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz .,:-/x$%#"
CLASSES = len(ALPHABET) + 1  # class 0 is the CTC blank
SOURCES = ("handwriting", "print")
_TRAIN_SHARE = 0.8
_VALIDATION_KEY = 0x5A17  # a key space of its own: validation lines are never training lines

_ITEMS = ("MILK", "Bread", "EGGS 12", "Apples", "COFFEE", "Rice 1kg", "Tea", "SUGAR", "Butter",
          "Cheese", "WATER", "Orange juice", "Pasta", "SOAP", "Tomatoes", "Bananas", "Yogurt",
          "Chocolate", "Olive oil", "Salt")
_WORDS = ("TOTAL", "Subtotal", "TAX", "Cash", "CHANGE", "VISA", "Card", "Discount", "Qty",
          "Receipt #", "Store", "Thank you")


def encode(text: str) -> list[int]:
    """Class indices of a label (1-based: 0 is the blank); a character outside the alphabet is
    a ValueError naming it."""
    try:
        return [ALPHABET.index(c) + 1 for c in text]
    except ValueError:
        bad = next(c for c in text if c not in ALPHABET)
        raise ValueError(f"label {text!r}: {bad!r} is not in the alphabet") from None


def decode(indices: list[int]) -> str:
    return "".join(ALPHABET[i - 1] for i in indices)


class Draws:
    """Uniform numbers in [0, 1) from one line's generator, consumed in order."""

    def __init__(self, key: int) -> None:
        self._values = Generator(key).uniform(0.0, 1.0, (64,)).numpy().astype(np.float64)
        self._next = 0

    def __call__(self) -> float:
        value = self._values[self._next]
        self._next += 1
        return float(value)

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return low + min(int(self() * (high - low + 1)), high - low)

    def choice(self, options: tuple):
        return options[self.integer(0, len(options) - 1)]


@lru_cache(maxsize=1)
def _digit_scans() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise SystemExit("the handwriting source uses scikit-learn's digits: "
                         "pip install 'onemodel[examples]'") from None
    digits = load_digits()
    return (digits.images / 16.0).astype(np.float32), digits.target.astype(np.int64)


@lru_cache(maxsize=16)
def _font(size: int):
    try:
        from PIL import ImageFont
    except ImportError:
        raise SystemExit("the print source renders with Pillow: pip install 'onemodel[examples]'")
    return ImageFont.load_default(size=size)


def _scale(image: np.ndarray, height: int) -> np.ndarray:
    """Nearest-neighbour resize of a square scan to height x height."""
    index = (np.arange(height) * image.shape[0]) // height
    return image[np.ix_(index, index)]


def _handwriting(draw: Draws, validation: bool) -> tuple[np.ndarray, str]:
    images, labels = _digit_scans()
    split = int(len(labels) * _TRAIN_SHARE)
    pool = range(split, len(labels)) if validation else range(split)
    count = draw.integer(3, 10)
    height = draw.integer(16, 26)
    pieces, text = [np.zeros((HEIGHT, draw.integer(2, 8)), np.float32)], ""
    for _ in range(count):
        k = pool[draw.integer(0, len(pool) - 1)]
        column = np.zeros((HEIGHT, height), np.float32)
        top = draw.integer(0, HEIGHT - height)
        column[top:top + height] = _scale(images[k], height)
        pieces += [column, np.zeros((HEIGHT, draw.integer(0, 6)), np.float32)]
        text += str(labels[k])
    return np.concatenate(pieces, axis=1), text


def _receipt_text(draw: Draws) -> str:
    kind = draw.integer(0, 3)
    price = f"{draw.integer(0, 99)}.{draw.integer(0, 99):02d}"
    if kind == 0:
        return f"{draw.integer(1, 9)} x {draw.choice(_ITEMS)} {price}"
    if kind == 1:
        return f"{draw.choice(_WORDS)} ${price}"
    if kind == 2:
        return (f"{draw.integer(1, 28):02d}/{draw.integer(1, 12):02d}/20{draw.integer(20, 29)} "
                f"{draw.integer(0, 23):02d}:{draw.integer(0, 59):02d}")
    return f"{draw.choice(_ITEMS)} {draw.integer(1, 50)}% {price}"


def _print(draw: Draws) -> tuple[np.ndarray, str]:
    from PIL import Image, ImageDraw

    text = _receipt_text(draw)
    font = _font(draw.integer(14, 22))
    left, top, right, bottom = font.getbbox(text)
    width = int(right) + 8
    canvas = Image.new("L", (width, HEIGHT), 0)
    y = (HEIGHT - (bottom - top)) // 2 - top + draw.integer(-2, 2)
    ImageDraw.Draw(canvas).text((4 - left, y), text, fill=255, font=font)
    return np.asarray(canvas, np.float32) / np.float32(255.0), text


def _augment(image: np.ndarray, draw: Draws) -> np.ndarray:
    rows = np.arange(HEIGHT) - HEIGHT // 2
    shear = (draw() - 0.5) * 0.3  # at most 2.4 columns at the top and bottom rows
    image = np.pad(image, ((0, 0), (3, 3)))  # so the shear never wraps ink around
    out = np.stack([np.roll(row, int(round(shear * r))) for row, r in zip(image, rows)])
    out = np.roll(out, draw.integer(-1, 1), axis=0)
    if draw() < 0.3:
        padded = np.pad(out, 1, mode="edge")
        out = (padded[:-2, 1:-1] + 2 * padded[1:-1, 1:-1] + padded[2:, 1:-1]) / 4
        out = (np.roll(out, 1, axis=1) + 2 * out + np.roll(out, -1, axis=1)) / 4
    noise = Generator(int(draw() * 2 ** 53)).uniform(-1.0, 1.0, out.shape).numpy()
    out = out * (0.7 + 0.3 * draw()) + noise * (0.1 * draw())
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def line(seed: int, step: int, index: int, source: str | None = None,
         validation: bool = False) -> tuple[np.ndarray, str]:
    """Line `index` of batch `step`: (image 32 x width, float32 in [0, 1], width a multiple of 4;
    its text). `source` forces one source; `validation` draws from the held-out key space."""
    key = mix(mix(mix(seed ^ (_VALIDATION_KEY if validation else 0)) ^ step) ^ index)
    draw = Draws(key)
    chosen = source or SOURCES[draw.integer(0, 1)]
    if chosen not in SOURCES:
        raise ValueError(f"line: source must be one of {SOURCES}, got {source!r}")
    image, text = _handwriting(draw, validation) if chosen == "handwriting" else _print(draw)
    image = _augment(image, draw)
    width = -(-image.shape[1] // 4) * 4
    return np.pad(image, ((0, 0), (0, width - image.shape[1])), mode="edge"), text


class Batch(NamedTuple):
    images: np.ndarray    # (B, 1, 32, widest), each line padded by repeating its last column
    widths: np.ndarray    # (B,) int64, the true widths
    targets: np.ndarray   # (B, longest label) int64, padded with 0
    target_lengths: np.ndarray  # (B,) int64
    texts: list[str]


def collate(lines: list[tuple[np.ndarray, str]]) -> Batch:
    for image, text in lines:
        if image.ndim != 2 or image.shape[0] != HEIGHT:
            raise ValueError(f"collate: a line image must be {HEIGHT} px high (2-D), got shape "
                             f"{image.shape}")
        if not text:
            raise ValueError("collate: a line needs a non-empty label")
    widths = np.array([image.shape[1] for image, _ in lines], np.int64)
    widest = int(widths.max())
    images = np.stack([np.pad(image, ((0, 0), (0, widest - image.shape[1])), mode="edge")
                       for image, _ in lines])[:, None]
    codes = [encode(text) for _, text in lines]
    targets = np.zeros((len(lines), max(map(len, codes))), np.int64)
    for row, code in zip(targets, codes):
        row[:len(code)] = code
    return Batch(images, widths, targets, np.array([len(c) for c in codes], np.int64),
                 [text for _, text in lines])


def training_batch(seed: int, step: int, size: int) -> Batch:
    """The batch of step `step`: `size` lines, sources mixed."""
    return collate([line(seed, step, i) for i in range(size)])


def validation_set(seed: int, source: str, count: int,
                   batch_size: int) -> list[Batch]:
    """A fixed held-out set of one source, in batches."""
    lines = [line(seed, 0, i, source, validation=True) for i in range(count)]
    return [collate(lines[i:i + batch_size]) for i in range(0, count, batch_size)]

