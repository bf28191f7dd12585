"""onemodel.optim.lr_scheduler against torch.optim.lr_scheduler: the lr sequence of every group
over 30 steps of the usual loop (optimizer.step(); scheduler.step()), within float32 rounding;
statelessness (read at the step count), ReduceLROnPlateau's counters and rates against torch's
over metric sequences, and argument checks."""
from __future__ import annotations

import math

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
    "OneCycleLR-epochs": lambda m, o: m.OneCycleLR(o, 0.3, epochs=3, steps_per_epoch=10, **(
        {"cycle_momentum": False} if m.__name__.startswith("torch") else {})),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, 0.85),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, [4, 11, 23], gamma=0.5),
    # milestone 0 decays at once; repeats count twice; any order (torch's Counter)
    "MultiStepLR-repeats-default-gamma": lambda m, o: m.MultiStepLR(o, iter([17, 0, 6, 17])),
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


def test_stepping_once_per_epoch_warns_once(recwarn):
    """PyTorch scripts step their scheduler once per epoch: here the rate already follows every
    optimizer step, so such a loop is told (once), and a resume's one jump is not."""
    p = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = lr_scheduler.StepLR(opt, 1, gamma=0.5)
    opt.step_count = 40  # a resume: one jump
    for _ in range(3):
        opt.step_count += 1
        sched.step()
    assert not recwarn.list
    for _ in range(3):  # an epoch of 7 batches, then the scheduler
        opt.step_count += 7
        sched.step()
    (w,) = recwarn.list
    assert "StepLR.step() is called every 7 optimizer steps" in str(w.message)
    assert opt.lr == 0.5 ** opt.step_count


def test_cosine_stays_at_eta_min_after_t_max():
    p = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    sched = lr_scheduler.CosineAnnealingLR(opt, 4, eta_min=0.01)
    opt.step_count = 9
    sched.step()
    assert opt.lr == float(np.float32(0.01))


def test_onecycle_total_steps_wins_over_epochs():
    p = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    sched = lr_scheduler.OneCycleLR(opt, 0.5, total_steps=20, epochs=3, steps_per_epoch=10)
    opt.step_count = 19
    sched.step()  # the last step of a 20-step cycle: max_lr / 25 / 1e4
    assert sched.get_last_lr() == [float(np.float32(0.5 / 25 / 1e4))]


def _plateau(module, opt, metrics, make, as_tensor):
    """Rates of every group and the counters after each step(metric)."""
    sched = make(module, opt)
    out = []
    for m in metrics:
        sched.step(as_tensor(m))
        state = sched.state_dict()
        out.append(([g["lr"] for g in opt.param_groups],
                    [state[k] for k in ("last_epoch", "best", "num_bad_epochs",
                                        "cooldown_counter")]))
        if module is lr_scheduler:
            assert sched.get_last_lr() == out[-1][0]
    return out


_rng = np.random.default_rng(0)
# A falling loss with noise and plateaus, a NaN (a bad epoch in torch's test), and an
# accuracy; float32 values, so a float32 tensor holds them exactly.
LOSS = [float(x) for x in (np.concatenate([np.linspace(2, 1, 10), np.full(8, 1.0),
                                           1 - np.linspace(0, 0.02, 12), np.full(30, 0.98)])
                           + _rng.normal(0, 0.003, 60)).astype(np.float32)]
LOSS[20] = math.nan
ACCURACY = [float(np.float32(min(0.9, 0.5 + 0.05 * k) + _rng.normal(0, 0.01)))
            for k in range(40)]
PLATEAU_CASES = {
    "defaults": (LOSS, lambda m, o: m.ReduceLROnPlateau(o)),
    "min-rel-cooldown": (LOSS, lambda m, o: m.ReduceLROnPlateau(o, patience=2, cooldown=3,
                                                                 threshold=0.01)),
    "min-abs-floor": (LOSS, lambda m, o: m.ReduceLROnPlateau(
        o, factor=0.5, patience=1, threshold=0.005, threshold_mode="abs",
        min_lr=[0.01, 0.02])),
    "max-rel": (ACCURACY, lambda m, o: m.ReduceLROnPlateau(o, "max", factor=0.3, patience=0,
                                                             threshold=0.03)),
    "max-abs-eps": (ACCURACY, lambda m, o: m.ReduceLROnPlateau(
        o, mode="max", patience=1, threshold=0.02, threshold_mode="abs", eps=1e-3)),
}


@pytest.mark.parametrize("name", PLATEAU_CASES)
def test_reduce_on_plateau_against_torch(name):
    torch = pytest.importorskip("torch")
    metrics, make = PLATEAU_CASES[name]
    ps = [torch.zeros(1, requires_grad=True) for _ in BASES]
    topt = torch.optim.SGD([{"params": [p], "lr": b} for p, b in zip(ps, BASES)], lr=1.0)
    want = _plateau(torch.optim.lr_scheduler, topt, metrics, make, float)
    ps = [tensor(np.ones(2, np.float32), requires_grad=True) for _ in BASES]
    opt = optim.SGD([{"params": [p], "lr": b} for p, b in zip(ps, BASES)], lr=1.0)
    got = _plateau(lr_scheduler, opt, metrics, make,
                   lambda m: tensor(np.float32(m)))  # a 0-d tensor, as a loss is
    assert len({tuple(w[0]) for w in want}) > 1  # the case reduces the rate
    for s, ((g_lr, g_state), (w_lr, w_state)) in enumerate(zip(got, want)):
        assert g_state[0] == w_state[0] and g_state[2:] == w_state[2:], s
        assert g_state[1] == w_state[1] or math.isnan(g_state[1]) and math.isnan(w_state[1])
        for g, (a, b) in enumerate(zip(g_lr, w_lr)):
            # one float32 rounding of the base rate and one more per reduction
            reductions = len({w[0][g] for w in want[:s + 1]} | {BASES[g]}) - 1
            assert abs(a - b) <= (reductions + 1) * TOL * abs(b), (s, g, a, b)


def test_reduce_on_plateau_resumes_from_its_state_dict():
    metrics, make = PLATEAU_CASES["min-rel-cooldown"]

    def fresh():
        p = tensor(np.ones(2, np.float32), requires_grad=True)
        opt = optim.SGD([p], lr=0.1)
        return opt, make(lr_scheduler, opt)

    opt, sched = fresh()
    for m in metrics:
        sched.step(m)
    opt2, sched2 = fresh()
    for m in metrics[:25]:
        sched2.step(m)
    state, lr = sched2.state_dict(), opt2.lr
    opt3, sched3 = fresh()  # a resumed run: the optimizer's rate and the scheduler's counters
    opt3.lr = lr
    sched3.load_state_dict(state)
    assert sched3.state_dict() == state and state["last_epoch"] == 25
    for m in metrics[25:]:
        sched3.step(m)
    assert opt3.lr == opt.lr < 0.1 and sched3.state_dict() == sched.state_dict()
    with pytest.raises(ValueError, match="expected the keys"):
        sched3.load_state_dict({**state, "factor": 0.5})
    with pytest.raises(ValueError, match="num_bad_epochs"):
        sched3.load_state_dict({**state, "num_bad_epochs": -1})
    with pytest.raises(ValueError, match="best"):
        sched3.load_state_dict({**state, "best": "low"})
    with pytest.raises(ValueError, match="metrics must be a number"):
        sched3.step("low")
    assert sched3.state_dict() == sched.state_dict()  # refused calls changed nothing


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
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1), "total_steps, or epochs and steps_per_epoch"),
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1, epochs=3), "epochs and steps_per_epoch"),
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1, epochs=0, steps_per_epoch=5), "epochs must"),
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1, epochs=2, steps_per_epoch=2.5),
     "steps_per_epoch must"),
    (lambda o: lr_scheduler.ExponentialLR(o, -0.5), "ExponentialLR: gamma"),
    (lambda o: lr_scheduler.ExponentialLR(o, "0.9"), "ExponentialLR: gamma"),
    (lambda o: lr_scheduler.MultiStepLR(o, 5), "MultiStepLR: milestones must be a list"),
    (lambda o: lr_scheduler.MultiStepLR(o, [3, -1]), r"milestones\[1\] must be an integer"),
    (lambda o: lr_scheduler.MultiStepLR(o, [2.5]), r"milestones\[0\]"),
    (lambda o: lr_scheduler.MultiStepLR(o, [2], gamma=float("inf")), "MultiStepLR: gamma"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(object()), "optimizer"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, mode="mean"), "mode must be one of"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, threshold_mode="relative"), "threshold_mode"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, factor=1.0), "factor must be < 1"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, factor=-0.1), "factor"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, patience=-1), "patience"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, patience=1.5), "patience"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, threshold=-1e-4), "threshold must"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, cooldown=-2), "cooldown"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, min_lr=[0.1]), "min_lr holds 1 values"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, min_lr=-1.0), "min_lr"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, eps=float("nan")), "eps"),
])
def test_bad_arguments(make, match):
    ps = [tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(2)]
    opt = optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5}], lr=0.1)
    with pytest.raises(ValueError, match=match):
        make(opt)
