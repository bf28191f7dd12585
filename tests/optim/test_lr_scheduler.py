"""onemodel.optim.lr_scheduler.ReduceLROnPlateau against torch's: its counters and rates over
metric sequences, its state_dict (torch's keys) resuming a run, and argument checks. The other
schedulers are compared with torch's in test_lr_scheduler_torch.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

from onemodel import optim
from onemodel.optim import lr_scheduler
from onemodel.tensor import tensor

BASES = (0.1, 0.03)
# Our rates are float32 (one rounding, 2^-24 relative) of torch's doubles.
TOL = 2.0 ** -23


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
        sched3.load_state_dict({**state, "surprise": 0.5})
    with pytest.raises(ValueError, match="num_bad_epochs"):
        sched3.load_state_dict({**state, "num_bad_epochs": -1})
    with pytest.raises(ValueError, match="best"):
        sched3.load_state_dict({**state, "best": "low"})
    with pytest.raises(ValueError, match="metrics must be a number"):
        sched3.step("low")
    assert sched3.state_dict() == sched.state_dict()  # refused calls changed nothing


@pytest.mark.parametrize("make,match", [
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


def test_reduce_on_plateau_state_dict_keys_as_torch():
    torch = pytest.importorskip("torch")
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    want = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, min_lr=[0.01]).state_dict()
    opt = optim.SGD([tensor(np.ones(2, np.float32), requires_grad=True)], lr=0.1)
    got = lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.01]).state_dict()
    assert set(got) == set(want) - {"_is_initial", "_get_lr_called_within_step"}
    assert {k: got[k] for k in ("mode", "threshold_mode", "min_lrs", "default_min_lr",
                                "best", "last_epoch")} == {
        k: want[k] for k in ("mode", "threshold_mode", "min_lrs", "default_min_lr", "best",
                             "last_epoch")}
    with pytest.raises(TypeError, match="ReduceLROnPlateau: optimizer"):
        lr_scheduler.ReduceLROnPlateau(topt)
