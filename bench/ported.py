"""The ported models (examples/models.py) and the line recognizer (examples/crnn): one training
step (forward, loss, backward, AdamW) in onemodel and in PyTorch, from the same weights on the
same batch, at 1 and 2 threads, in one process; printed as milliseconds and the ratio om/torch.

GPT: chargpt's default (2 blocks of width 96, 4 heads, context 64, batch 16, vocabulary 103);
ResNet: 8 images 3x16x16, width 16; sequence classifier: 6 sequences of 24 tokens; CRNN: the
job's recognizer on 32 lines of its stream.
Run: python bench/ported.py
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch
from _timing import best_seconds

import onemodel as om
import onemodel.functional as F
from onemodel import interop, nn, optim
from onemodel.examples import models
from onemodel.examples.crnn import __main__ as crnn_job
from onemodel.examples.crnn import lines

ROOT = Path(__file__).resolve().parent.parent


def _compare_tool():
    spec = importlib.util.spec_from_file_location(
        "crnn_compare", ROOT / "tools" / "crnn_ref" / "compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases():
    """(name, build(nn, F), ours inputs, torch inputs, our loss, torch loss)."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 103, (16, 65))
    gpt_in = (tokens[:, :-1], np.arange(64))
    gpt_y = tokens[:, 1:].ravel()
    image = rng.standard_normal((8, 3, 16, 16)).astype(np.float32)
    labels = rng.integers(0, 10, 8)
    seq = rng.integers(0, 40, (6, 24))
    seq_y = rng.integers(0, 4, 6)
    batch = lines.training_batch(0, 0, 32)
    steps = crnn_job.time_steps(batch.widths)
    target = (batch.targets, batch.target_lengths, steps)
    tool = _compare_tool()

    def flat_ce(lib_f):
        return lambda out, y: lib_f.cross_entropy(out.reshape(-1, out.shape[-1]), y)

    return [
        ("GPT", lambda n, f: models.build_gpt(n, f, 103, block=64, width=96), gpt_in, gpt_y,
         flat_ce(F), flat_ce(torch.nn.functional)),
        ("ResNet", models.build_resnet, (image,), labels, flat_ce(F),
         flat_ce(torch.nn.functional)),
        ("Conv1d classifier", lambda n, f: models.build_sequence_classifier(n, f, 40),
         (seq,), seq_y, flat_ce(F), flat_ce(torch.nn.functional)),
        ("CRNN", None, (batch.images, steps), target, crnn_job.ctc, tool.torch_ctc(torch)),
    ], tool


def step_fns(case, tool):
    name, build, inputs, target, ours_loss, torch_loss = case
    torch.manual_seed(0)
    if build is None:
        theirs = tool.torch_recognizer(torch)
        ours = crnn_job.build(nn, F, lines.CLASSES)
    else:
        theirs, ours = build(torch.nn, torch.nn.functional), build(nn, F)
    interop.load_torch_state_dict(ours, theirs.state_dict())
    opt_o = optim.AdamW(ours.parameters(), lr=1e-4)
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=1e-4)
    o_in = [om.from_numpy(a) if a.dtype.kind == "f" or a.ndim > 1 or build is not None else a
            for a in inputs]
    t_in = [torch.from_numpy(a) if a.dtype.kind == "f" or a.ndim > 1 or build is not None else a
            for a in inputs]
    t_target = target if build is None else torch.from_numpy(target)

    def ours_step():
        opt_o.zero_grad()
        ours_loss(ours(*o_in), target).backward()
        opt_o.step()

    def torch_step():
        opt_t.zero_grad()
        torch_loss(theirs(*t_in), t_target).backward()
        opt_t.step()

    return ours_step, torch_step


def main() -> None:
    table, tool = cases()
    print(f"onemodel {om.config()['isa']}, exact mode; ms per training step (best of turns)")
    print(f"{'model':<18} {'threads':>7} {'onemodel':>9} {'torch':>9} {'om/torch':>9}")
    for threads in (1, 2):
        om.set_num_threads(threads)
        torch.set_num_threads(threads)
        for case in table:
            ours, theirs = best_seconds(step_fns(case, tool), budget=3.0)
            print(f"{case[0]:<18} {threads:>7} {1000 * ours:>9.2f} {1000 * theirs:>9.2f} "
                  f"{ours / theirs:>9.2f}")


if __name__ == "__main__":
    main()
