"""onemodel.optim.lr_scheduler against torch 2.13's schedulers, with torch's meaning: the group
rates and get_last_lr() over 3 epochs of 5 optimizer steps, the scheduler stepped once per epoch
and once per step, two groups with different base rates (1e-6 relative); state_dict() keys as
torch's, a resumed run continuing exactly as an uninterrupted one; momentum cycling; schedulers
sharing an optimizer; the deprecated step(epoch); and rates computed without libm."""
from __future__ import annotations

import ast
import copy
import inspect
import math
import warnings

import numpy as np
import pytest

from onemodel import optim
from onemodel.optim import lr as pure
from onemodel.optim import lr_scheduler
from onemodel.optim.optimizer import shortest
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")

BASES = (0.1, 0.03)
EPOCHS, BATCHES = 3, 5
TOL = 1e-6


def _sgd(module, momentum=0.0, cls=None):
    """An SGD over two groups with the base rates BASES, ours or torch's."""
    if module is lr_scheduler:
        ps = [tensor(np.ones(2, np.float32), requires_grad=True) for _ in BASES]
        make = cls or optim.SGD
    else:
        ps = [torch.zeros(1, requires_grad=True) for _ in BASES]
        make = torch.optim.SGD
    return make([{"params": [p], "lr": b} for p, b in zip(ps, BASES)], lr=1.0,
                momentum=momentum)


def _run(module, opt, sched, per_step, steps=EPOCHS * BATCHES):
    """(group rates, get_last_lr()) after every optimizer step."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's warnings about its own call order
        for epoch in range(0, steps, BATCHES):
            for _ in range(min(BATCHES, steps - epoch)):
                opt.step()
                if per_step:
                    sched.step()
                out.append(([g["lr"] for g in opt.param_groups], list(sched.get_last_lr())))
            if not per_step:
                sched.step()
    return out


def _close(got, want):
    for k, ((g_lr, g_last), (w_lr, w_last)) in enumerate(zip(got, want)):
        for a, b in zip(g_lr + g_last, w_lr + w_last):
            assert abs(a - b) <= TOL * abs(b), (k, a, b)


CASES = {
    "StepLR": lambda m, o: m.StepLR(o, 2, gamma=0.5),
    "StepLR-default-gamma": lambda m, o: m.StepLR(o, 1),  # torch's MNIST example's form
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, [1, 3, 3, 7], gamma=0.5),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, 0.8),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, 4, eta_min=0.01),
    "LinearLR": lambda m, o: m.LinearLR(o, 0.2, 0.9, total_iters=6),
    "LinearLR-defaults": lambda m, o: m.LinearLR(o),
    "ConstantLR": lambda m, o: m.ConstantLR(o, 0.3, total_iters=2),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=10, power=1.7),
    "PolynomialLR-square": lambda m, o: m.PolynomialLR(o, total_iters=12, power=2.0),
    "LambdaLR": lambda m, o: m.LambdaLR(o, [lambda s: 0.9 ** s, lambda s: 1.0 / (1 + s)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda s: 0.95),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, [0.5, 0.2], total_steps=16,
                                            cycle_momentum=False),
    "OneCycleLR-linear-three-phase": lambda m, o: m.OneCycleLR(
        o, 0.5, epochs=4, steps_per_epoch=4, anneal_strategy="linear", three_phase=True,
        cycle_momentum=False),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(
        o, 0.01, [0.1, 0.2], step_size_up=3, step_size_down=2, mode="triangular2",
        cycle_momentum=False),
    "CyclicLR-exp-range": lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                  mode="exp_range", gamma=0.9,
                                                  cycle_momentum=False),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, 3, 2, 0.001),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, 0.1, total_iters=3), m.ExponentialLR(o, 0.9),
            m.CosineAnnealingLR(o, 5)], milestones=[3, 8]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, 0.5, total_iters=4), m.ExponentialLR(o, 0.9),
         m.LinearLR(o, 0.2, total_iters=5)]),
    "ChainedScheduler-cosine": lambda m, o: m.ChainedScheduler(
        [m.LinearLR(o, 0.2, total_iters=5), m.CosineAnnealingLR(o, 6, eta_min=0.001)]),
}
IDS = [f"{n}-{'step' if s else 'epoch'}" for n in CASES for s in (False, True)]


@pytest.mark.parametrize("name,per_step", [(n, s) for n in CASES for s in (False, True)],
                         ids=IDS)
def test_rates_as_torch(name, per_step):
    make = CASES[name]
    t_opt = _sgd(torch)
    want = _run(torch, t_opt, make(torch.optim.lr_scheduler, t_opt), per_step)
    opt = _sgd(lr_scheduler)
    sched = make(lr_scheduler, opt)
    got = _run(lr_scheduler, opt, sched, per_step)
    _close(got, want)
    assert len({tuple(w[0]) for w in want}) > 1  # the case changes the rate
    assert all(r == shortest(r) for g in got for r in g[0])  # float32, shortest decimal
    t_sched = make(torch.optim.lr_scheduler, _sgd(torch))
    ours = make(lr_scheduler, _sgd(lr_scheduler))
    dropped = {"_is_initial", "_get_lr_called_within_step"}  # torch's call-order flags
    assert set(ours.state_dict()) == set(t_sched.state_dict()) - dropped
    expected_last = EPOCHS * (BATCHES if per_step else 1)
    if hasattr(sched, "last_epoch") and name != "SequentialLR":
        assert sched.last_epoch == expected_last


def test_per_epoch_decays_per_epoch():
    """torch's MNIST example: StepLR(opt, 1, gamma=0.7) stepped once per epoch."""
    opt = optim.SGD([tensor(np.ones(2, np.float32), requires_grad=True)], lr=1.0)
    sched = lr_scheduler.StepLR(opt, 1, gamma=0.7)
    for epoch in range(3):
        for _ in range(100):
            opt.step()
        sched.step()
        assert opt.lr == shortest(pure.ipow(0.7, epoch + 1))
    assert sched.last_epoch == 3 and opt.step_count == 300


def test_initial_lr_and_base_lrs_as_torch():
    opt, t_opt = _sgd(lr_scheduler), _sgd(torch)
    for o, m in ((opt, lr_scheduler), (t_opt, torch.optim.lr_scheduler)):
        o.param_groups[1]["lr"] = 0.05  # changed before the first scheduler: that is the base
        m.ExponentialLR(o, 0.5)
        m.StepLR(o, 2)  # a second scheduler keeps the first's initial_lr
    assert [g["initial_lr"] for g in opt.param_groups] == pytest.approx(
        [g["initial_lr"] for g in t_opt.param_groups], rel=1e-7)
    sched = lr_scheduler.OneCycleLR(opt, 0.4, total_steps=10, cycle_momentum=False)
    t_sched = torch.optim.lr_scheduler.OneCycleLR(t_opt, 0.4, total_steps=10,
                                                  cycle_momentum=False)
    for key in ("initial_lr", "max_lr", "min_lr"):
        assert [g[key] for g in opt.param_groups] == pytest.approx(
            [g[key] for g in t_opt.param_groups], rel=1e-12)
    assert sched.base_lrs == pytest.approx(t_sched.base_lrs, rel=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_resume_continues_exactly(name):
    """state_dict() after 7 steps (mid-epoch), loaded with the optimizer's into fresh objects,
    continues to the same rates, bit for bit, as the uninterrupted run."""
    make = CASES[name]
    opt = _sgd(lr_scheduler)
    sched = make(lr_scheduler, opt)
    whole = _run(lr_scheduler, opt, sched, per_step=True)
    opt = _sgd(lr_scheduler)
    sched = make(lr_scheduler, opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(7):
            opt.step()
            sched.step()
    saved = copy.deepcopy((opt.state_dict(), sched.state_dict()))
    fresh = _sgd(lr_scheduler)
    resumed = make(lr_scheduler, fresh)
    fresh.load_state_dict(saved[0])
    resumed.load_state_dict(saved[1])
    rest = _run(lr_scheduler, fresh, resumed, per_step=True, steps=len(whole) - 7)
    assert rest == whole[7:]


class _CyclingSGD(optim.SGD):
    """An SGD whose momentum may change after construction, as torch's may."""

    _changeable = optim.SGD._changeable + ("momentum",)
    _fixed = ("dampening", "nesterov")


@pytest.mark.parametrize("make", [
    lambda m, o: m.OneCycleLR(o, [0.5, 0.2], total_steps=16),
    lambda m, o: m.OneCycleLR(o, 0.5, total_steps=16, three_phase=True, base_momentum=0.8,
                              max_momentum=[0.9, 0.99]),
    lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3),
], ids=["OneCycleLR", "OneCycleLR-three-phase", "CyclicLR"])
def test_momentum_cycles_as_torch(make):
    t_opt = _sgd(torch, momentum=0.9)
    t_sched = make(torch.optim.lr_scheduler, t_opt)
    opt = _sgd(lr_scheduler, momentum=0.9, cls=_CyclingSGD)
    sched = make(lr_scheduler, opt)
    seen = set()
    for _ in range(15):
        for o, s in ((opt, sched), (t_opt, t_sched)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                o.step()
                s.step()
        for g, t in zip(opt.param_groups, t_opt.param_groups):
            assert abs(g["momentum"] - t["momentum"]) <= TOL * t["momentum"]
            assert abs(g["lr"] - t["lr"]) <= TOL * t["lr"]
            seen.add(t["momentum"])
    assert len(seen) > 3


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam])
def test_momentum_cycling_refused_where_it_is_fixed(cls):
    p = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = cls([p], lr=0.1, **({"momentum": 0.9} if cls is optim.SGD else {}))
    key = "momentum" if cls is optim.SGD else "betas"
    with pytest.raises(ValueError, match=f"OneCycleLR: cycle_momentum=True would cycle {key}"):
        lr_scheduler.OneCycleLR(opt, 0.5, total_steps=10)
    with pytest.raises(ValueError, match="CyclicLR: cycle_momentum"):
        lr_scheduler.CyclicLR(opt, 0.01, 0.1)
    assert opt.lr == 0.1 and "initial_lr" not in opt.param_groups[0]


def test_schedulers_sharing_an_optimizer_as_torch():
    """Two schedulers stepped one after the other without ChainedScheduler compose."""
    def both(m, o):
        return m.LinearLR(o, 0.25, total_iters=4), m.StepLR(o, 3, gamma=0.5)

    def run(module, opt):
        scheds, out = both(module, opt), []
        for _ in range(12):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt.step()
                for s in scheds:
                    s.step()
            out.append(([g["lr"] for g in opt.param_groups], scheds[1].get_last_lr()))
        return out

    _close(run(lr_scheduler, _sgd(lr_scheduler)),
           run(torch.optim.lr_scheduler, _sgd(torch)))


def test_step_with_epoch_as_torch():
    """The deprecated step(epoch): the closed form at that epoch, with torch's warning; and
    CosineAnnealingWarmRestarts' fractional epochs, its documented use."""
    scheds = []
    for m, o in ((lr_scheduler, _sgd(lr_scheduler)), (torch.optim.lr_scheduler, _sgd(torch))):
        scheds.append((o, m.StepLR(o, 3, gamma=0.5), m.CosineAnnealingWarmRestarts(o, 2, 3)))
    for epoch in (4, 1, 9):
        for o, step, _ in scheds:
            with pytest.warns(UserWarning):
                step.step(epoch)
        assert scheds[0][1].last_epoch == scheds[1][1].last_epoch == epoch
        _close([([g["lr"] for g in scheds[0][0].param_groups], [])],
               [([g["lr"] for g in scheds[1][0].param_groups], [])])
    for k in range(40):
        for o, _, warm in scheds:
            warm.step(k / 4)
        _close([([g["lr"] for g in scheds[0][0].param_groups], [])],
               [([g["lr"] for g in scheds[1][0].param_groups], [])])
        assert scheds[0][2].T_i == scheds[1][2].T_i


def test_cosine_turns_back_up_after_t_max():
    opt = _sgd(lr_scheduler)
    sched = lr_scheduler.CosineAnnealingLR(opt, 4, eta_min=0.01)
    rates = []
    for _ in range(8):
        sched.step()
        rates.append(opt.param_groups[0]["lr"])
    assert rates[3] == 0.01 < rates[5] < rates[7] == 0.1


def test_optimizer_state_carries_the_scheduler_records():
    opt = _sgd(lr_scheduler)
    lr_scheduler.OneCycleLR(opt, 0.4, total_steps=10, cycle_momentum=False)
    state = opt.state_dict()
    assert state["param_groups"][0]["max_lr"] == 0.4
    plain = _sgd(lr_scheduler)  # no scheduler yet: the records are restored, as torch's
    plain.load_state_dict(state)
    assert plain.param_groups[1]["min_lr"] == opt.param_groups[1]["min_lr"]
    bad = copy.deepcopy(state)
    bad["param_groups"][0]["initial_lr"] = "high"
    with pytest.raises(ValueError, match="initial_lr"):
        plain.load_state_dict(bad)


def test_resume_with_last_epoch_needs_initial_lr():
    with pytest.raises(KeyError, match=r"StepLR: param_groups\[0\] has no 'initial_lr'"):
        lr_scheduler.StepLR(_sgd(lr_scheduler), 2, last_epoch=4)
    runs = []
    for m, opt in ((lr_scheduler, _sgd(lr_scheduler)), (torch.optim.lr_scheduler, _sgd(torch))):
        m.StepLR(opt, 2)
        opt.param_groups[0]["lr"] = 0.025  # as loaded after 4 calls of the one below
        sched = m.StepLR(opt, 2, gamma=0.5, last_epoch=4)  # torch's resume form
        runs.append(_run(m, opt, sched, per_step=True, steps=6))
        assert sched.last_epoch == 11
    _close(*runs)


@pytest.mark.parametrize("make,error,match", [
    (lambda o: lr_scheduler.StepLR(o, 0), ValueError, "StepLR: step_size"),
    (lambda o: lr_scheduler.StepLR(o, 2.5), ValueError, r"step_size must be an integer >= 1"),
    (lambda o: lr_scheduler.StepLR(object(), 3), TypeError, "StepLR: optimizer"),
    (lambda o: lr_scheduler.StepLR(o, 3, last_epoch=-2), ValueError, "last_epoch"),
    (lambda o: lr_scheduler.CosineAnnealingLR(o, True), ValueError, "CosineAnnealingLR: T_max"),
    (lambda o: lr_scheduler.ConstantLR(o, factor=1.5), ValueError, "ConstantLR: factor"),
    (lambda o: lr_scheduler.PolynomialLR(o, power=-1.0), ValueError, "PolynomialLR: power"),
    (lambda o: lr_scheduler.LinearLR(o, start_factor=0.0), ValueError, "start_factor"),
    (lambda o: lr_scheduler.LambdaLR(o, 0.5), TypeError, "LambdaLR: lr_lambda"),
    (lambda o: lr_scheduler.LambdaLR(o, lambda s: -1.0), ValueError, "LambdaLR: lr_lambda"),
    (lambda o: lr_scheduler.MultiplicativeLR(o, [abs]), ValueError, "lr_lambda holds 1"),
    (lambda o: lr_scheduler.OneCycleLR(o, [0.1, 0.2, 0.3], 10, cycle_momentum=False),
     ValueError, "max_lr"),
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1), ValueError, "total_steps, or epochs"),
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1, epochs=0, steps_per_epoch=5), ValueError,
     "epochs must"),
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1, 10, anneal_strategy="cosine"), ValueError,
     "anneal_strategy"),
    (lambda o: lr_scheduler.OneCycleLR(o, 0.1, 10, pct_start=1.5), ValueError, "pct_start"),
    (lambda o: lr_scheduler.CyclicLR(o, 0.1, 1.0, mode="sine", cycle_momentum=False),
     ValueError, "CyclicLR: mode"),
    (lambda o: lr_scheduler.CyclicLR(o, 0.1, 1.0, step_size_up=0, cycle_momentum=False),
     ValueError, "step_size_up"),
    (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, 0), ValueError, "T_0"),
    (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, 2, T_mult=0), ValueError,
     "T_mult"),
    (lambda o: lr_scheduler.ExponentialLR(o, "0.9"), ValueError, "ExponentialLR: gamma"),
    (lambda o: lr_scheduler.MultiStepLR(o, 5), ValueError, "milestones must be a list"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.StepLR(o, 2)], [3]), ValueError,
     "SequentialLR: milestones"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.StepLR(o, 2), 3], [2]), ValueError,
     r"schedulers\[1\]"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.ReduceLROnPlateau(o)], []),
     ValueError, r"schedulers\[0\] must be a scheduler other than ReduceLROnPlateau"),
    (lambda o: lr_scheduler.ChainedScheduler([]), ValueError, "ChainedScheduler: schedulers"),
    (lambda o: lr_scheduler.ChainedScheduler([lr_scheduler.StepLR(o, 2), lr_scheduler.StepLR(
        _sgd(lr_scheduler), 2)]), ValueError, "another optimizer"),
])
def test_bad_arguments(make, error, match):
    ps = [tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(2)]
    opt = optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5}], lr=0.1)
    with pytest.raises(error, match=match):
        make(opt)


def test_bad_state_dict_changes_nothing():
    opt = _sgd(lr_scheduler)
    sched = lr_scheduler.StepLR(opt, 2)
    state = sched.state_dict()
    with pytest.raises(ValueError, match="StepLR.load_state_dict: expected the keys"):
        sched.load_state_dict({**state, "surprise": 1})
    with pytest.raises(ValueError, match="last_epoch"):
        sched.load_state_dict({**state, "last_epoch": "4"})
    warm = lr_scheduler.CosineAnnealingWarmRestarts(opt, 3)
    for bad in (sched, warm):
        before = copy.deepcopy(bad.state_dict())
        with pytest.raises(ValueError, match=r"\.step: epoch must be"):
            bad.step(-1)
        assert bad.state_dict() == before
    seq = lr_scheduler.SequentialLR(opt, [lr_scheduler.StepLR(opt, 2),
                                          lr_scheduler.ExponentialLR(opt, 0.9)], [3])
    before = copy.deepcopy(seq.state_dict())
    broken = copy.deepcopy(before)
    broken["_schedulers"][1] = {"gamma": 0.5}
    with pytest.raises(ValueError, match="ExponentialLR.load_state_dict"):
        seq.load_state_dict(broken)
    assert seq.state_dict() == before and sched.state_dict() == state
    one = lr_scheduler.OneCycleLR(opt, 0.4, total_steps=2, cycle_momentum=False)
    one.step()
    one.step()
    with pytest.raises(ValueError, match="past total_steps=2"):
        one.step()


_TRANSCENDENTALS = ("cos", "sin", "tan", "exp", "expm1", "log", "log2", "log10", "log1p",
                    "pow", "acos", "atan2")


def test_rates_without_libm(monkeypatch):
    """No float ** in the module, no libm or numpy transcendental called while scheduling, and
    the rates equal an independent closed form (exact rationals, one rounding to float32)."""
    from fractions import Fraction
    modules = (lr_scheduler.base, lr_scheduler.decay, lr_scheduler.cyclic,
               lr_scheduler.composite, lr_scheduler.plateau)
    tree = ast.parse("\n".join(inspect.getsource(m) for m in modules))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and
                isinstance(n.op, ast.Pow)]

    def boom(*args, **kwargs):
        raise AssertionError("a transcendental was called")

    for name in _TRANSCENDENTALS:
        monkeypatch.setattr(math, name, boom)
        if hasattr(np, name):
            monkeypatch.setattr(np, name, boom)
    for make in CASES.values():
        if make is CASES["LambdaLR"]:
            continue  # its functions are the user's
        opt = _sgd(lr_scheduler)
        _run(lr_scheduler, opt, make(lr_scheduler, opt), per_step=True)
    opt = _sgd(lr_scheduler)
    sched = lr_scheduler.PolynomialLR(opt, total_iters=20, power=2.0)
    exp = lr_scheduler.ExponentialLR(_sgd(lr_scheduler), 0.75)
    for n in range(1, 25):
        sched.step()
        exp.step()
        left = 1 - Fraction(min(n, 20), 20)
        for g, base in enumerate(BASES):
            want = shortest(float(Fraction(base) * left * left))
            assert opt.param_groups[g]["lr"] == want
            want = Fraction(base) * Fraction(3, 4) ** n
            assert exp.optimizer.param_groups[g]["lr"] == shortest(float(want))


@pytest.mark.parametrize("name", lr_scheduler.__all__)
def test_signature_as_torch(name):
    """Every scheduler takes torch 2.13's arguments, in its order, with its defaults."""
    def params(cls):
        return [(p.name, p.default) for p in inspect.signature(cls).parameters.values()]

    assert params(getattr(lr_scheduler, name)) == params(getattr(torch.optim.lr_scheduler, name))
