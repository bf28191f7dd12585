"""The PyTorch side of the line recognizer (docs/spec/training.txt section 10), and the comparison.

    python tools/crnn_ref/compare.py [--steps 600] [--batch-size 32] [--threads 2] [--json F]

Three runs of the recognizer of onemodel.examples.crnn, from the same initial weights
(PyTorch's initialisation, loaded into onemodel through interop) on the same batch stream
(lines.training_batch(seed, step, size)), with the job's recipe: AdamW with decay 0.01 on the
weights only, the warm-up + cosine schedule (onemodel's warmup_cosine sets every library's
rate at each step), gradient-norm clip 5, CTC (blank 0, mean, zero_infinity):

- onemodel (float32, exact mode);
- PyTorch float32;
- PyTorch float64: the re-rounded reference. Section 10's standard is that onemodel is no
  further from PyTorch float32 than PyTorch float32 is from PyTorch float64.

Printed: the first step's loss and gradient norm of each; the median relative per-step loss
difference, and the means over windows of 200 steps, for onemodel against PyTorch float32 and
for PyTorch float32 against float64; the character error rate per validation set; the time
per step.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable, Optional

import numpy as np

import onemodel as om
import onemodel.functional as F
from onemodel import interop, nn
from onemodel.examples._runs import decay_on_matrices
from onemodel.examples.crnn import __main__ as job
from onemodel.examples.crnn import lines
from onemodel.examples.crnn.model import build, character_errors, greedy_decode
from onemodel.optim import AdamW, clip_grad_norm
from onemodel.optim.lr import warmup_cosine

WINDOW = 200


def torch_recognizer(torch: Any) -> Any:
    """The job's recognizer built in PyTorch, its LSTM over packed sequences (PyTorch's way to
    per-line lengths: padded steps give zeros, as onemodel's lengths do)."""
    model = build(torch.nn, torch.nn.functional, lines.CLASSES)

    def recurrent(sequence: Any, steps: Any) -> Any:
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            sequence, torch.as_tensor(steps), enforce_sorted=False)
        out, _ = model.rnn(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(out, total_length=sequence.shape[0])[0]

    model.recurrent = recurrent
    return model


def torch_ctc(torch: Any) -> Callable[[Any, tuple], Any]:
    def loss(log_probs: Any, target: tuple) -> Any:
        targets, target_lengths, steps = (torch.from_numpy(np.asarray(a)) for a in target)
        return torch.nn.functional.ctc_loss(log_probs, targets, steps, target_lengths, blank=0,
                                            reduction="mean", zero_infinity=True)
    return loss


def _cer(model: Any, forward: Callable, validation: dict) -> dict[str, float]:
    model.eval()
    rates = {}
    for source, batches in validation.items():
        edits = chars = 0
        for batch in batches:
            steps = job.time_steps(batch.widths)
            decoded = greedy_decode(forward(batch.images, steps), steps)
            e, c = character_errors(decoded, [lines.encode(t) for t in batch.texts])
            edits, chars = edits + e, chars + c
        rates[source] = 100.0 * edits / chars
    model.train()
    return rates


def _train(step_fn: Callable[[int, lines.Batch, float], tuple[float, float]],
           o: dict) -> dict[str, list]:
    losses, norms, times = [], [], []
    schedule = warmup_cosine(o["lr"], warmup_steps=min(o["warmup"], o["steps"] - 1),
                              total_steps=o["steps"], final_factor=0.02)
    for step in range(o["steps"]):
        batch = lines.training_batch(o["seed"], step, o["batch_size"])
        start = time.perf_counter()
        loss, norm = step_fn(step, batch, schedule.lr_at(step))
        times.append(time.perf_counter() - start)
        losses.append(loss)
        norms.append(norm)
    return {"losses": losses, "norms": norms, "times": times}


def run_onemodel(state: dict, o: dict, validation: dict) -> dict[str, Any]:
    model = build(nn, F, lines.CLASSES)
    interop.load_torch_state_dict(model, state)
    optimizer = AdamW(decay_on_matrices(model, 0.01), lr=o["lr"])

    def step(_: int, batch: lines.Batch, lr: float) -> tuple[float, float]:
        optimizer.lr = lr
        optimizer.zero_grad()
        images, steps, target = job.as_inputs(batch)
        loss = job.ctc(model(images, steps), target)
        loss.backward()
        norm = clip_grad_norm(model.parameters(), 5.0)
        optimizer.step()
        return loss.item(), float(norm)

    result = _train(step, o)
    with om.no_grad():
        result["cer"] = _cer(model, lambda x, s: model(om.from_numpy(x), s).numpy(), validation)
    return result


def run_torch(torch: Any, state: dict, dtype: Any, o: dict, validation: dict) -> dict[str, Any]:
    model = torch_recognizer(torch)
    model.load_state_dict(state)
    model.to(dtype)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.ndim > 1], "weight_decay": 0.01},
         {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}], lr=o["lr"])
    ctc = torch_ctc(torch)

    def step(_: int, batch: lines.Batch, lr: float) -> tuple[float, float]:
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        steps = job.time_steps(batch.widths)
        loss = ctc(model(torch.from_numpy(batch.images).to(dtype), steps),
                   (batch.targets, batch.target_lengths, steps))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, 5.0)
        optimizer.step()
        return loss.item(), float(norm)

    result = _train(step, o)
    with torch.no_grad():
        result["cer"] = _cer(model, lambda x, s: model(torch.from_numpy(x).to(dtype), s)
                             .float().numpy(), validation)
    return result


def distance(a: list[float], b: list[float]) -> dict[str, Any]:
    """Median relative per-step difference, and the relative difference of 200-step means."""
    a64, b64 = np.asarray(a), np.asarray(b)
    relative = np.abs(a64 - b64) / np.maximum(np.abs(b64), 1e-30)
    windows = [float(abs(a64[i:i + WINDOW].mean() - b64[i:i + WINDOW].mean())
                     / abs(b64[i:i + WINDOW].mean())) for i in range(0, len(a64), WINDOW)]
    return {"median_relative": float(np.median(relative)), "windows": windows}


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    import torch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in job.DEFAULTS.items():
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", help="write the runs and the comparison to this file")
    o = vars(p.parse_args(argv))
    if o["threads"]:
        om.set_num_threads(o["threads"])
        torch.set_num_threads(o["threads"])
    validation = {s: lines.validation_set(o["seed"], s, o["val_lines"], 64)
                  for s in lines.SOURCES}
    torch.manual_seed(o["seed"])
    state = torch_recognizer(torch).state_dict()
    runs = {"onemodel": run_onemodel(state, o, validation),
            "torch32": run_torch(torch, state, torch.float32, o, validation),
            "torch64": run_torch(torch, state, torch.float64, o, validation)}
    report = {"options": o, "runs": runs,
              "onemodel_vs_torch32": distance(runs["onemodel"]["losses"],
                                              runs["torch32"]["losses"]),
              "torch32_vs_torch64": distance(runs["torch32"]["losses"],
                                             runs["torch64"]["losses"])}
    print(f"{o['steps']} steps of {o['batch_size']} lines, "
          f"{om.get_num_threads()} threads (onemodel {om.config()['isa']})")
    for name, run in runs.items():
        cer = ", ".join(f"{s} {r:.2f}%" for s, r in run["cer"].items())
        print(f"  {name:<9} first loss {run['losses'][0]:.7f} grad norm {run['norms'][0]:.6f}; "
              f"final loss {np.mean(run['losses'][-20:]):.4f}; CER {cer}; "
              f"{1000 * np.median(run['times']):.1f} ms/step")
    for key in ("onemodel_vs_torch32", "torch32_vs_torch64"):
        d = report[key]
        print(f"  {key}: median relative loss difference {d['median_relative']:.2e}; "
              f"{WINDOW}-step means " + " ".join(f"{w:.1e}" for w in d["windows"]))
    if o["json"]:
        with open(o["json"], "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
