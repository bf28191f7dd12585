"""The resume rule (docs/spec/training.txt section 6): a run saved at step k and continued in a
fresh process reproduces the uninterrupted run bit for bit (same mode and thread count).

The model has dropout (its draw counter is a buffer) and batch norm (running statistics); the
loop applies a warm-up cosine schedule, clips the gradient norm and steps AdamW or Nesterov SGD.
The data order is a function of the sample counter, which the checkpoint carries in extra.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import _config, checkpoint, nn
from onemodel.optim import SGD, AdamW, clip_grad_norm
from onemodel.optim.lr import warmup_cosine

TOTAL, SAVED_AT, BATCH = 14, 6, 8
HERE = os.path.dirname(os.path.abspath(__file__))


def build(optimizer: str, init_seed: int = 0):
    g = om.Generator(init_seed)
    model = nn.Sequential(nn.Linear(6, 16, generator=g), nn.BatchNorm1d(16), nn.ReLU(),
                          nn.Dropout(0.3, seed=5), nn.Linear(16, 3, generator=g))
    if optimizer == "adamw":
        opt = AdamW(model.parameters(), lr=0.02, weight_decay=0.01)
    else:
        opt = SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    return model, opt, warmup_cosine(opt.lr, warmup_steps=3, total_steps=TOTAL,
                                      final_factor=0.1)


def data():
    rng = np.random.default_rng(123)
    x = rng.standard_normal((40, 6)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)


def train(model, opt, schedule, samples: int, until: int) -> int:
    """Steps until opt.step_count == until; returns the sample counter."""
    x, y = data()
    while opt.step_count < until:
        idx = (samples + np.arange(BATCH)) % len(y)
        schedule.apply(opt)
        loss = F.cross_entropy(model(om.from_numpy(x[idx])), y[idx])
        opt.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), 0.5)
        opt.step()
        samples += BATCH
    return samples


def resume(optimizer: str, path: str, threads: int) -> str:
    """Run in the fresh process: load into a differently initialized model, finish the run."""
    om.set_num_threads(threads)
    model, opt, schedule = build(optimizer, init_seed=99)
    samples = checkpoint.load(path, model, opt)["samples"]
    samples = train(model, opt, schedule, samples, TOTAL)
    return checkpoint.to_bytes(model, opt, {"samples": samples}).hex()


@pytest.fixture
def threads(request):
    before = _config.num_threads()
    om.set_num_threads(request.param)
    yield request.param
    om.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("optimizer", ["adamw", "sgd-nesterov"])
def test_resume_in_a_fresh_process_is_bit_identical(tmp_path, optimizer, threads):
    model, opt, schedule = build(optimizer)
    samples = train(model, opt, schedule, 0, TOTAL)
    uninterrupted = checkpoint.to_bytes(model, opt, {"samples": samples})

    model, opt, schedule = build(optimizer)
    samples = train(model, opt, schedule, 0, SAVED_AT)
    path = str(tmp_path / "k.ckpt")
    checkpoint.save(path, model, opt, extra={"samples": samples})
    assert int(model[3].draws._data) == SAVED_AT  # the dropout counter is in the state

    script = (f"import sys; sys.path.insert(0, {HERE!r}); import test_resume; "
              f"print(test_resume.resume({optimizer!r}, {path!r}, {threads}))")
    # The child imports the same onemodel as this process (installed, or a development tree).
    package_root = os.path.dirname(os.path.dirname(om.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_root] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    resumed = bytes.fromhex(out.stdout.strip())
    assert resumed == uninterrupted


def test_a_resume_without_optimizer_state_diverges(tmp_path):
    """The check above would notice a checkpoint that forgot the moments or the step."""
    model, opt, schedule = build("adamw")
    samples = train(model, opt, schedule, 0, TOTAL)
    full = checkpoint.state_hash(model, opt)
    model, opt, schedule = build("adamw")
    samples = train(model, opt, schedule, 0, SAVED_AT)
    data = checkpoint.to_bytes(model)
    model, opt, schedule = build("adamw", init_seed=99)
    checkpoint.from_bytes(data, model)
    opt.step_count = SAVED_AT  # the schedule position alone is not enough
    train(model, opt, schedule, samples, TOTAL)
    assert checkpoint.state_hash(model, opt) != full
