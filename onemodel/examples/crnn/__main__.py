"""Train the CRNN + CTC line recognizer on generated text lines.

Lines of handwritten digits and printed receipt text (onemodel.examples.crnn.lines), a
convolutional-recurrent recognizer with CTC, AdamW (weight decay 0.01 on the weights only), a
linear warm-up and a half cosine down to 2% of the peak, gradient-norm clip 5. Every
--eval-every steps the character error rate (greedy decoding) on held-out validation lines of
both sources chooses the best checkpoint; at the end a table of the CER per source and a few
decoded lines, and the best model exported with batch norm folded in (RUN/model.safetensors).
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Iterator, Optional

import numpy as np

import onemodel as om
import onemodel.functional as F
from onemodel import nn
from onemodel.optim import AdamW
from onemodel.optim.lr import warmup_cosine
from onemodel.train import Checkpoints, Evaluation, Trainer

from .._runs import (
    decay_on_matrices,
    fit_run,
    job_options,
    open_run,
    run_options,
    speaker,
    write_result,
)
from . import lines
from .export import export
from .model import build, character_errors, greedy_decode, time_steps

# 1200 steps of 32 lines: about 9 minutes at 2 threads on an AVX-512 core pair, past CTC's blank
# plateau (about steps 400-700) to a CER of 6% (handwriting) and 17% (print).
DEFAULTS: dict[str, Any] = {"steps": 1200, "batch_size": 32, "lr": 1e-3, "warmup": 60,
                            "eval_every": 200, "val_lines": 96, "seed": 0}


def as_inputs(batch: lines.Batch) -> tuple:
    """A batch as the Trainer takes it: (images, time steps, (targets, target lengths, steps))."""
    steps = time_steps(batch.widths)
    return (om.from_numpy(batch.images), steps, (batch.targets, batch.target_lengths, steps))


def ctc(log_probs: om.Tensor, target: tuple) -> om.Tensor:
    targets, target_lengths, steps = target
    return F.ctc_loss(log_probs, targets, steps, target_lengths, blank=0, reduction="mean",
                      zero_infinity=True)


def cer(log_probs: om.Tensor, target: tuple) -> float:
    targets, target_lengths, steps = target
    truth = [list(row[:n]) for row, n in zip(targets, target_lengths)]
    edits, chars = character_errors(greedy_decode(log_probs.numpy(), steps), truth)
    return edits / chars


class LineStream:
    """The training batches of a seed, step after step. len() is the evaluation interval, so an
    'epoch' of the Trainer's progress is the stretch between two evaluations; the position is
    the next step, which a checkpoint keeps."""

    def __init__(self, seed: int, batch_size: int, interval: int) -> None:
        self.seed, self.batch_size, self.interval = seed, batch_size, interval
        self.position = 0

    def __len__(self) -> int:
        return self.interval

    def __iter__(self) -> Iterator[tuple]:
        for _ in range(self.interval):
            batch = lines.training_batch(self.seed, self.position, self.batch_size)
            self.position += 1
            yield as_inputs(batch)

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict) -> None:
        position = state.get("position")
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)) \
                or position < 0:
            raise ValueError(f"LineStream.load_state_dict: position must be an integer >= 0, "
                             f"got {position!r}")
        self.position = int(position)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onemodel-crnn", description=__doc__.split("\n\n")[0])
    job_options(p, DEFAULTS, {
        "steps": "optimizer steps", "batch_size": "lines per step", "lr": "peak learning rate",
        "warmup": "steps of linear warm-up",
        "eval_every": "steps between evaluations and checkpoints",
        "val_lines": "held-out lines per source",
        "seed": "seed of the weights and of the line stream"})
    run_options(p, os.path.join("runs", "crnn"))
    return p


def main(argv: Optional[list[str]] = None) -> dict[str, float]:
    p = parser()
    args = p.parse_args(argv)
    folder, o, resumed = open_run(args, p, DEFAULTS, "onemodel-crnn",
                                  positive=("steps", "batch_size", "lr", "eval_every",
                                            "val_lines"))
    say = speaker(args.quiet)
    om.manual_seed(o["seed"])
    model = build(nn, F, lines.CLASSES)
    optimizer = AdamW(decay_on_matrices(model, 0.01), lr=o["lr"])
    validation = {s: lines.validation_set(o["seed"], s, o["val_lines"], 64)
                  for s in lines.SOURCES}
    trainer = Trainer(
        model, ctc, optimizer, LineStream(o["seed"], o["batch_size"], o["eval_every"]),
        schedule=warmup_cosine(o["lr"], warmup_steps=min(o["warmup"], o["steps"] - 1),
                                total_steps=o["steps"], final_factor=0.02),
        clip_norm=5.0,
        evaluation=Evaluation([as_inputs(b) for s in lines.SOURCES for b in validation[s]],
                              every=o["eval_every"], metrics={"cer": cer}, best_metric="cer",
                              best_mode="min"),
        checkpoints=Checkpoints(folder), callbacks=[] if args.quiet else None)
    say(f"onemodel {om.__version__}: {om.config()['isa']}, {om.get_num_threads()} threads; "
        f"{o['steps']} steps of {o['batch_size']} lines, {lines.CLASSES} classes")
    seconds, best_step = fit_run(trainer, o["steps"], folder, resumed, p, say)
    model.eval()
    rates, examples = {}, []
    with om.no_grad():
        for source, batches in validation.items():
            edits = chars = 0
            for batch in batches:
                images, steps, _ = as_inputs(batch)
                decoded = greedy_decode(model(images, steps).numpy(), steps)
                e, c = character_errors(decoded, [lines.encode(t) for t in batch.texts])
                edits, chars = edits + e, chars + c
                examples += [(source, t, lines.decode(d)) for t, d in zip(batch.texts[:2],
                                                                         decoded[:2])]
            rates[source] = 100.0 * edits / chars
    headline = "CER " + ", ".join(f"{s} {r:.2f}%" for s, r in rates.items()) \
        + f" after {trainer.step} steps"
    write_result(folder, p.prog, o, headline, {"cer_percent": rates}, trainer, best_step,
                 seconds)
    exported = os.path.join(folder, "model.safetensors")
    export(model, exported)
    print(f"character error rate after {trainer.step} steps "
          f"({seconds:.0f} s; run folder {folder}):")
    for source, rate in rates.items():
        print(f"  {source:<12} {rate:6.2f}%  ({o['val_lines']} lines)")
    for source, truth, guess in examples[::2]:
        print(f"  {source:<12} {truth!r:>28} -> {guess!r}")
    print(f"the best checkpoint, batch norm folded in: {exported}")
    return rates


def console() -> None:
    """The onemodel-crnn command."""
    main()


if __name__ == "__main__":
    console()
