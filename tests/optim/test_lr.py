"""Schedules: cos_pi against math.cos, each schedule against an independent float64 formula
and against PyTorch's scheduler where one is equivalent, apply(), argument checks."""
from __future__ import annotations

import math

import numpy as np
import pytest

from onemodel import optim
from onemodel.optim.lr import cos_pi, cosine, one_cycle, step_decay, warmup, warmup_cosine
from onemodel.tensor import tensor


def test_cos_pi_against_math_cos():
    ts = np.linspace(0.0, 1.0, 10001)
    err = max(abs(cos_pi(t) - math.cos(math.pi * t)) for t in ts)
    assert err <= 1e-15
    assert cos_pi(-0.5) == 1.0 and cos_pi(0.0) == 1.0
    assert cos_pi(1.0) == -1.0 and cos_pi(7.0) == -1.0
    assert cos_pi(0.25) == -cos_pi(0.75)


def rel(a, b):
    return abs(a - b) / abs(b)


def f32(x):
    return float(np.float32(x))


SCHEDULES = {
    "step": (step_decay(0.1, 7, 0.5),
             lambda s: 0.1 * 0.5 ** (s // 7)),
    "cosine": (cosine(0.1, 60, 1e-3),
               lambda s: 1e-3 + (0.1 - 1e-3) * (1 + math.cos(math.pi * min(s / 60, 1))) / 2),
    "warmup": (warmup(cosine(0.1, 80, 1e-3), 20, 0.1),
               lambda s: (0.1 * (0.1 + 0.9 * s / 20) if s < 20 else
                          1e-3 + (0.1 - 1e-3) * (1 + math.cos(math.pi * (s - 20) / 80)) / 2)),
    "onecycle": (one_cycle(0.1, 100, 0.3, 25.0, 1e4),
                 lambda s: (0.1 + (0.004 - 0.1) / 2 * (math.cos(math.pi * s / 29) + 1)
                            if s <= 29 else 4e-7 + (0.1 - 4e-7) / 2 *
                            (math.cos(math.pi * (s - 29) / 70) + 1))),
    "warmup-cosine": (warmup_cosine(6e-5, 20, 100, 0.02),
                      lambda s: (6e-5 * (s + 1) / 20 if s < 20 else 6e-5 * (
                          0.02 + 0.98 * (1 + math.cos(math.pi * (s - 20) / 80)) / 2))),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_against_independent_formula(name):
    sched, formula = SCHEDULES[name]
    for s in range(100):
        got = sched.lr_at(s)
        assert got == f32(got)   # a float32 value
        assert rel(got, formula(s)) <= 1.2e-7, s


def test_cosine_stays_at_min_after_total_steps():
    sched = cosine(0.1, 10, 0.01)
    assert [sched.lr_at(s) for s in (10, 11, 500)] == [f32(0.01)] * 3
    assert warmup_cosine(1.0, 2, 10, 0.1).lr_at(1000) == f32(0.1)


def test_warmup_starts_from_the_float32_rate_of_after():
    after = step_decay(0.1, 5, 0.5)
    r0 = after.lr_at(0)
    w = warmup(after, 4, 0.25)
    assert w.lr_at(0) == f32(r0 * 0.25)
    assert w.lr_at(3) == f32(r0 * (0.25 + 0.75 * 3 / 4))
    assert w.lr_at(4) == r0 and w.lr_at(9) == after.lr_at(5)


def _torch_lrs(torch, make, steps=100, base=0.1):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base)
    sched = make(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


TORCH_EQUIVALENTS = [
    (step_decay(0.1, 7, 0.5), lambda t, o: t.optim.lr_scheduler.StepLR(o, 7, 0.5)),
    (cosine(0.1, 100, 1e-3),
     lambda t, o: t.optim.lr_scheduler.CosineAnnealingLR(o, 100, eta_min=1e-3)),
    (warmup(step_decay(0.1, 1000, 0.5), 30, 0.1),
     lambda t, o: t.optim.lr_scheduler.LinearLR(o, 0.1, 1.0, total_iters=30)),
    (one_cycle(0.1, 100), lambda t, o: t.optim.lr_scheduler.OneCycleLR(
        o, 0.1, total_steps=100, cycle_momentum=False, anneal_strategy="cos")),
]


@pytest.mark.parametrize("ours,make", TORCH_EQUIVALENTS, ids=lambda x: type(x).__name__)
def test_against_torch_schedulers(ours, make):
    torch = pytest.importorskip("torch")
    want = _torch_lrs(torch, lambda o: make(torch, o))
    for s, w in enumerate(want):
        assert rel(ours.lr_at(s), w) <= 1.2e-7, s


def test_apply_sets_the_rate_for_the_optimizer_step_count():
    p = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.AdamW([p], lr=1.0)
    sched = warmup_cosine(6e-5, 200, 2000, 0.02)
    for s in range(3):
        assert sched.apply(opt) == sched.lr_at(s) == opt.lr
        p.grad = tensor(np.ones(2, np.float32))
        opt.step()
    opt.step_count = 2000
    sched.apply(opt)
    assert opt.lr == f32(6e-5 * 0.02)


@pytest.mark.parametrize("make,name", [
    (lambda: step_decay(0.1, 0, 0.5), "step_size"),
    (lambda: step_decay(-0.1, 3, 0.5), "base_lr"),
    (lambda: cosine(0.1, 0), "total_steps"),
    (lambda: cosine(0.1, 10, min_lr=float("nan")), "min_lr"),
    (lambda: warmup(0.1, 10, 0.5), "after"),
    (lambda: warmup(step_decay(0.1, 3, 0.5), -1, 0.5), "warmup_steps"),
    (lambda: warmup(step_decay(0.1, 3, 0.5), 5, 1.5), "start_factor"),
    (lambda: one_cycle(0.0, 100), "max_lr"),
    (lambda: one_cycle(0.1, 3, pct_start=0.2), "pct_start"),
    (lambda: warmup_cosine(0.1, 10, 10, 0.1), "total_steps"),
    (lambda: warmup_cosine(0.1, 10, 100, -0.1), "final_factor"),
    (lambda: step_decay(0.1, 3, 0.5).lr_at(-1), "step"),
])
def test_bad_arguments(make, name):
    with pytest.raises(ValueError, match=name):
        make()


FORMER_NAMES = {"StepLR": "step_decay", "MultiStepLR": "multistep_decay", "CosineLR": "cosine",
                "WarmupLR": "warmup", "OneCycleLR": "one_cycle",
                "WarmupCosineLR": "warmup_cosine", "LinearLR": "linear_ramp",
                "LambdaLR": "lambda_factor", "SequentialLR": "sequential"}


@pytest.mark.parametrize("old", FORMER_NAMES)
def test_former_names_are_deprecated_aliases(old):
    """The pure schedules' former names read as torch's schedulers: still there for a release,
    with a DeprecationWarning naming the new one, by attribute and by import."""
    import onemodel.optim.lr as lr

    new = FORMER_NAMES[old]
    with pytest.warns(DeprecationWarning, match=rf"lr\.{old} is deprecated.*optim\.lr\.{new} \("):
        assert getattr(lr, old) is getattr(lr, new)
    with pytest.warns(DeprecationWarning, match=rf"lr_scheduler\.{old}\)"):
        exec(f"from onemodel.optim.lr import {old}", {})
    with pytest.raises(AttributeError, match="StepDecay"):
        lr.StepDecay
