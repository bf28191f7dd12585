"""Train a character-level GPT on a text that ships with Python, then sample from it.

The text is Python's own help topics (the pydoc_data package of the standard library, about
450,000 characters of its language reference). The model is examples/models.py's nanoGPT-style
decoder (causal self-attention through scaled_dot_product_attention, layer norms without bias,
the output layer tied to the embedding), trained with AdamW (decay on matrices only, by
parameter groups), a warm-up cosine schedule and gradient clipping; windows of the text are
drawn by (seed, step), so a run is reproducible to the bit and resumable. The last tenth of the
text is held out for the validation loss; at the end the best checkpoint samples text with
top-k sampling.
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
from onemodel.random import mix
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
from .models import build_gpt

DEFAULTS: dict[str, Any] = {"steps": 400, "batch_size": 16, "block": 64, "layers": 2,
                            "width": 96, "heads": 4, "lr": 2e-3, "eval_every": 100,
                            "top_k": 8, "seed": 0}


def load_text() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k] for k in sorted(topics))


class Vocabulary:
    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self._index = {c: i for i, c in enumerate(self.chars)}

    def encode(self, text: str) -> np.ndarray:
        try:
            return np.array([self._index[c] for c in text], np.int64)
        except KeyError as e:
            raise ValueError(f"encode: {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: Any) -> str:
        return "".join(self.chars[int(i)] for i in ids)


class Windows:
    """Batches of random windows of `ids` (inputs, positions, next characters), the offsets a
    pure function of (seed, step); len() is the evaluation interval (see crnn's LineStream)."""

    def __init__(self, ids: np.ndarray, block: int, batch_size: int, seed: int,
                 interval: int) -> None:
        if len(ids) <= block + 1:
            raise ValueError(f"Windows: a text of {len(ids)} tokens is too short for windows "
                             f"of {block}")
        self.ids, self.block, self.batch_size = ids, block, batch_size
        self.seed, self.interval, self.position = seed, interval, 0

    def batch(self, step: int) -> tuple:
        g = om.Generator(mix(mix(self.seed) ^ step))
        starts = om.randint(0, len(self.ids) - self.block - 1, (self.batch_size,),
                            generator=g).numpy()
        windows = np.stack([self.ids[s:s + self.block + 1] for s in starts])
        return (om.from_numpy(windows[:, :-1]), om.arange(self.block),
                windows[:, 1:].reshape(-1))

    def __len__(self) -> int:
        return self.interval

    def __iter__(self) -> Iterator[tuple]:
        for _ in range(self.interval):
            self.position += 1
            yield self.batch(self.position - 1)

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.position = int(state["position"])


def next_character_loss(logits: om.Tensor, target: np.ndarray) -> om.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target)


def sample(model: Any, vocab: Vocabulary, prompt: str, length: int, top_k: int,
           generator: om.Generator) -> str:
    """`length` characters after `prompt`, each drawn from the `top_k` most likely."""
    ids = list(vocab.encode(prompt))
    model.eval()
    with om.no_grad():
        for _ in range(length):
            window = np.array(ids[-model.block:], np.int64)[None]
            logits = model(om.from_numpy(window), om.arange(window.shape[1])).numpy()[0, -1]
            top = np.argsort(-logits, kind="stable")[:top_k]
            p = np.exp(logits[top] - logits[top].max())
            u = generator.uniform(0.0, 1.0, ()).item() * p.sum()
            ids.append(int(top[min(np.searchsorted(np.cumsum(p), u, side="right"),
                                   top_k - 1)]))
    model.train()
    return vocab.decode(ids)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onemodel-chargpt", description=__doc__.split("\n\n")[0])
    helps = {"steps": "optimizer steps", "batch_size": "windows per step",
             "block": "characters of context", "layers": "transformer blocks",
             "width": "embedding width", "heads": "attention heads", "lr": "peak learning rate",
             "eval_every": "steps between validations and checkpoints",
             "top_k": "sampling draws from this many most likely characters",
             "seed": "seed of the weights, the windows and the sample"}
    job_options(p, DEFAULTS, helps)
    p.add_argument("--prompt", default="The ", help="the sample's beginning (default 'The ')")
    run_options(p, os.path.join("runs", "chargpt"))
    return p


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    p = parser()
    args = p.parse_args(argv)
    folder, o, resumed = open_run(args, p, DEFAULTS, "onemodel-chargpt",
                                  positive=("steps", "batch_size", "block", "layers", "width",
                                            "heads", "lr", "eval_every", "top_k"))
    if o["width"] % o["heads"]:
        p.error(f"--width {o['width']} does not divide into {o['heads']} heads")
    say = speaker(args.quiet)
    text = load_text()
    vocab = Vocabulary(text)
    ids = vocab.encode(text)
    split = len(ids) * 9 // 10
    om.manual_seed(o["seed"])
    model = build_gpt(nn, F, len(vocab.chars), block=o["block"], layers=o["layers"],
                      heads=o["heads"], width=o["width"])
    validation = Windows(ids[split:], o["block"], 64, o["seed"] + 1, 1)
    trainer = Trainer(
        model, next_character_loss, AdamW(decay_on_matrices(model, 0.1), lr=o["lr"]),
        Windows(ids[:split], o["block"], o["batch_size"], o["seed"], o["eval_every"]),
        schedule=warmup_cosine(o["lr"], warmup_steps=min(o["steps"] // 10, o["steps"] - 1),
                                total_steps=o["steps"], final_factor=0.1),
        clip_norm=1.0,
        evaluation=Evaluation([validation.batch(k) for k in range(4)], every=o["eval_every"],
                              best_metric="loss"),
        checkpoints=Checkpoints(folder), callbacks=[] if args.quiet else None)
    say(f"onemodel {om.__version__}: {om.config()['isa']}, {om.get_num_threads()} threads; "
        f"{len(ids)} characters ({len(vocab.chars)} distinct), "
        f"{sum(int(np.prod(w.shape)) for w in model.parameters())} parameters, "
        f"{o['steps']} steps")
    seconds, best_step = fit_run(trainer, o["steps"], folder, resumed, p, say)
    loss = trainer.evaluate()["loss"]
    text_out = sample(model, vocab, args.prompt, 200, o["top_k"], om.Generator(o["seed"]))
    headline = f"validation loss {loss:.4f} after {trainer.step} steps"
    write_result(folder, p.prog, o, headline, {"validation_loss": loss, "sample": text_out},
                 trainer, best_step, seconds)
    print(f"{headline} ({seconds:.0f} s); run folder {folder}")
    print("sample:\n" + text_out)
    return {"loss": loss, "sample": text_out}


def console() -> None:
    """The onemodel-chargpt command."""
    main()


if __name__ == "__main__":
    console()
