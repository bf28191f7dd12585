"""onemodel.optim.lr_scheduler against torch.optim.lr_scheduler: the lr sequence of every group
over 30 steps of the usual loop (optimizer.step(); scheduler.step()), within float32 rounding;
statelessness (read at the step count), and argument checks."""
from __future__ import annotations

import numpy as np
import pytest

from onemodel import optim
from onemodel.optim import lr_scheduler
from onemodel.tensor import tensor

STEPS = 30
BASES = (0.1, 0.03)
# Our rates are float32 (one rounding, 2^-24 relative) of a closed form in double; PyTorch's
# are doubles from recursive updates that drift by a few double ulps.
TOL = 2.0 ** -23


def _ours(make):
    ps = [tensor(np.ones(2, np.float32), requires_grad=True) for _ in BASES]
    opt = optim.SGD([{"params": [p], "lr": b} for p, b in zip(ps, BASES)], lr=1.0)
    sched = make(lr_scheduler, opt)
    out = []
    for _ in range(STEPS):
        out.append([g["lr"] for g in opt.param_groups])
        assert sched.get_last_lr() == out[-1]
        opt.step()
        sched.step()
    return out


def _theirs(torch, make):
    ps = [torch.zeros(1, requires_grad=True) for _ in BASES]
    opt = torch.optim.SGD([{"params": [p], "lr": b} for p, b in zip(ps, BASES)], lr=1.0)
    sched = make(torch.optim.lr_scheduler, opt)
    out = []
    for _ in range(STEPS):
        out.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    return out


CASES = {
    "StepLR": lambda m, o: m.StepLR(o, 7, gamma=0.5),
    "StepLR-default-gamma": lambda m, o: m.StepLR(o, 4),
    "StepLR-float-step-size": lambda m, o: m.StepLR(o, 3.0, gamma=0.95),  # torch's tutorials
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, STEPS, eta_min=1e-3),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, [0.5, 0.2], total_steps=STEPS, **(
        {"cycle_momentum": False} if m.__name__.startswith("torch") else {})),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=12),
    "LinearLR-defaults": lambda m, o: m.LinearLR(o),
    "LambdaLR": lambda m, o: m.LambdaLR(o, [lambda s: 0.9 ** s, lambda s: 1.0 / (1 + s)]),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.StepLR(o, 6, gamma=0.5),
            m.CosineAnnealingLR(o, 13)], milestones=[5, 17]),
}


@pytest.mark.parametrize("name", CASES)
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    want = _theirs(torch, CASES[name])
    got = _ours(CASES[name])
    for s, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            assert a == float(np.float32(a))
            assert abs(a - b) <= TOL * abs(b), (s, a, b)


def test_stateless_read_at_the_step_count():
    p = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.AdamW([p], lr=0.1)
    sched = lr_scheduler.CosineAnnealingLR(opt, 10)
    sched.step()
    sched.step()  # no optimizer step in between: the same rate
    assert opt.lr == float(np.float32(0.1)) == sched.get_last_lr()[0]
    opt.step_count = 5  # as after resuming from a checkpoint of step 5
    sched.step()
    assert opt.lr == float(np.float32(0.05)) and sched.last_epoch == 5
    fresh = optim.AdamW([p], lr=0.1)
    fresh.step_count = 5
    lr_scheduler.CosineAnnealingLR(fresh, 10)  # built after the resume: the same rate at once
    assert fresh.lr == opt.lr
    assert sched.state_dict() == {}
    with pytest.raises(ValueError, match="empty"):
        sched.load_state_dict({"last_epoch": 3})


def test_cosine_stays_at_eta_min_after_t_max():
    p = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    sched = lr_scheduler.CosineAnnealingLR(opt, 4, eta_min=0.01)
    opt.step_count = 9
    sched.step()
    assert opt.lr == float(np.float32(0.01))


@pytest.mark.parametrize("make,match", [
    (lambda o: lr_scheduler.StepLR(o, 0), "step_size"),
    (lambda o: lr_scheduler.StepLR(o, 2.5), r"step_size must be an integer >= 1, got 2\.5"),
    (lambda o: lr_scheduler.StepLR(o, float("nan")), "step_size"),
    (lambda o: lr_scheduler.CosineAnnealingLR(o, True), "CosineAnnealingLR: T_max must be an "),
    (lambda o: lr_scheduler.StepLR(object(), 3), "optimizer"),
    (lambda o: lr_scheduler.OneCycleLR(o, [0.1, 0.2, 0.3], 10), "max_lr"),
    (lambda o: lr_scheduler.LinearLR(o, start_factor=0.0), "start_factor"),
    (lambda o: lr_scheduler.LambdaLR(o, 0.5), "lr_lambda"),
    (lambda o: lr_scheduler.LambdaLR(o, lambda s: -1.0), "lr_lambda"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.StepLR(o, 2)], [3]), "milestones"),
    (lambda o: lr_scheduler.SequentialLR(
        o, [lr_scheduler.StepLR(o, 2), lr_scheduler.StepLR(o, 3)], [0]), "milestones"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.StepLR(o, 2), 3], [2]),
     r"schedulers\[1\]"),
])
def test_bad_arguments(make, match):
    ps = [tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(2)]
    opt = optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5}], lr=0.1)
    with pytest.raises(ValueError, match=match):
        make(opt)
