"""Parameter groups (docs/spec/clarifications.md), zero_grad(set_to_none),
state_dict/load_state_dict and the PyTorch-named clipping aliases: against PyTorch, against separate
one-group optimizers bit for bit, checkpoints with groups, and errors raised before anything
changes."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn, optim
from onemodel.optim.lr import cosine
from onemodel.tensor import tensor

f32 = np.float32


def model(seed: int = 0) -> nn.Module:
    return nn.Sequential(nn.Linear(4, 3, seed=seed), nn.Linear(3, 2, seed=seed + 1))


def split(m: nn.Module) -> tuple[list, list]:
    """Matrices (decayed) and vectors (not), the usual two groups."""
    ps = list(m.parameters())
    return [p for p in ps if p.ndim == 2], [p for p in ps if p.ndim != 2]


def decay_groups(m: nn.Module, **extra) -> list[dict]:
    mats, vecs = split(m)
    return [{"params": mats}, {"params": vecs, "weight_decay": 0.0, **extra}]


def feed(params, rng, skip=()):
    for i, p in enumerate(params):
        p.grad = None if i in skip else tensor(rng.standard_normal(p.shape).astype(np.float32))


def train(opt, steps, seed=0, start=0):
    rng = np.random.default_rng(seed)
    for s in range(start + steps):
        grads_skip = (1,) if s % 3 == 1 else ()
        if s < start:  # the same draws as the uninterrupted run
            feed(opt.params, rng, grads_skip)
            continue
        feed(opt.params, rng, grads_skip)
        opt.step()


def bits(params):
    return b"".join(p._data.tobytes() for p in params)


# -- arithmetic ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls,kw,group_kw", [
    ("AdamW", dict(lr=1e-2, weight_decay=0.1), dict()),
    ("Adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True), dict(lr=3e-2, betas=(0.8, 0.99))),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01), dict(lr=0.05, nesterov=True)),
    ("SGD", dict(lr=0.1, momentum=0.9), dict(momentum=0.0, lr=0.2)),
], ids=["adamw-decay-on-matrices", "adam-amsgrad-betas", "sgd-nesterov-group", "sgd-no-momentum"])
def test_against_torch_two_groups(cls, kw, group_kw):
    torch = pytest.importorskip("torch")
    m = model()
    ours = getattr(optim, cls)(decay_groups(m, **group_kw), **kw)
    ref = [torch.tensor(p._data.copy(), requires_grad=True) for p in ours.params]
    n0 = len(ours.param_groups[0]["params"])
    theirs = getattr(torch.optim, cls)([{"params": ref[:n0]},
                                        {"params": ref[n0:], "weight_decay": 0.0,
                                         **group_kw}], **kw)
    rng = np.random.default_rng(1)
    for _ in range(5):
        feed(ours.params, rng)
        for t, p in zip(ref, ours.params):
            t.grad = torch.tensor(p.grad._data)
        ours.step()
        theirs.step()
    # Relative to the largest parameter: a small bias is the difference of larger updates,
    # each one rounding within an ulp of PyTorch's (test_optim.py's TWO_ULPS).
    got = np.concatenate([p._data.reshape(-1) for p in ours.params])
    want = np.concatenate([t.detach().numpy().reshape(-1) for t in ref]).astype(np.float64)
    assert np.max(np.abs(got - want)) <= 1e-6 * np.max(np.abs(want))


@pytest.mark.parametrize("make", [
    lambda ps, **g: optim.AdamW(ps, lr=1e-2, weight_decay=0.1, **g),
    lambda ps, **g: optim.Adam(ps, lr=1e-2, weight_decay=0.1, **g),
    lambda ps, **g: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01, **g),
], ids=["adamw", "adam", "sgd"])
def test_each_group_steps_like_its_own_optimizer_bit_for_bit(make):
    """Group g of one optimizer = a one-group optimizer with g's hyper-parameters, at the same
    global step count (section 3's arithmetic per group)."""
    a, b = model(), model()
    mats_b, vecs_b = split(b)
    grouped = make([{"params": split(a)[0]}, {"params": split(a)[1], "lr": 3e-2,
                                              "weight_decay": 0.0}])
    alone = [make(mats_b), make(vecs_b)]
    alone[1].param_groups[0]["lr"], alone[1].param_groups[0]["weight_decay"] = 3e-2, 0.0
    rng_a, rng_b = np.random.default_rng(2), np.random.default_rng(2)
    for s in range(4):
        feed(grouped.params, rng_a, skip=(1,) if s == 1 else ())
        feed(mats_b + vecs_b, rng_b, skip=(1,) if s == 1 else ())
        grouped.step()
        for o in alone:
            o.step()
    assert bits(grouped.params) == bits(mats_b + vecs_b)
    state = list(grouped.state_tensors().values())
    assert b"".join(x.tobytes() for x in state) == b"".join(
        x.tobytes() for i, o in enumerate(alone) for x in o.state_tensors().values())


def test_one_group_as_a_dict_is_todays_optimizer_bytes():
    a, b = model(), model()
    plain = optim.AdamW(a.parameters(), lr=1e-2)
    as_dict = optim.AdamW([{"params": list(b.parameters())}], lr=1e-2)
    train(plain, 3)
    train(as_dict, 3)
    assert checkpoint.to_bytes(a, plain) == checkpoint.to_bytes(b, as_dict)
    assert list(plain.hyper_parameters()) == ["lr", "beta1", "beta2", "eps", "weight_decay",
                                              "amsgrad"]


def test_group_settings_take_effect_at_the_next_step_as_float32():
    p = tensor(np.ones(3, np.float32), requires_grad=True)
    q = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1)
    opt.param_groups[1]["lr"] = 0.3
    opt.param_groups[1]["weight_decay"] = 0.1
    # Shown as given (as PyTorch shows them), held for checkpoints and used as float32.
    assert opt.param_groups[1]["lr"] == 0.3 and opt.param_groups[1]["weight_decay"] == 0.1
    assert opt.hyper_parameters()["lr.1"] == float(f32(0.3))
    assert opt.hyper_parameters()["weight_decay.1"] == float(f32(0.1))
    p.grad, q.grad = tensor(np.ones(3, np.float32)), tensor(np.ones(2, np.float32))
    opt.step()
    assert np.all(p._data == f32(1) - f32(0.1) * f32(1))
    assert np.all(q._data == f32(1) - f32(0.3) * (f32(1) + f32(0.1) * f32(1)))


def test_lr_setter_scales_every_group_by_group_0s_factor():
    p = tensor(np.ones(3, np.float32), requires_grad=True)
    q = tensor(np.ones(2, np.float32), requires_grad=True)
    opt = optim.AdamW([{"params": [p]}, {"params": [q], "lr": 0.01}], lr=0.1)
    opt.lr = 0.05
    assert opt.lr == 0.05 and opt.hyper_parameters()["lr"] == float(f32(0.05))
    assert opt.param_groups[1]["lr"] == float(f32(float(f32(0.01)) * (
        float(f32(0.05)) / float(f32(0.1)))))
    sched = cosine(0.1, 10)
    opt.step_count = 5
    assert sched.apply(opt) == opt.lr
    assert opt.param_groups[1]["lr"] == pytest.approx(0.005, rel=1e-6)
    with pytest.raises(ValueError, match="lr"):
        opt.lr = -1.0
    assert opt.param_groups[1]["lr"] == pytest.approx(0.005, rel=1e-6)


def test_step_count_is_the_optimizers():
    m = model()
    opt = optim.Adam(decay_groups(m), lr=1e-2)
    train(opt, 2)
    assert opt.step_count == 2


# -- errors ------------------------------------------------------------------------------------
def _tensors(n=3):
    return [tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(n)]


@pytest.mark.parametrize("make,match", [
    (lambda a, b, c: optim.SGD([{"params": [a, b]}, {"params": [b]}], lr=0.1),
     r"param_groups\[1\].*also in param_groups\[0\]"),
    (lambda a, b, c: optim.Adam([{"params": [a]}, {"params": []}]), r"param_groups\[1\].*empty"),
    (lambda a, b, c: optim.Adam([{"params": [a], "betas": (0.9, 1.5)}]), r"betas\[1\]"),
    (lambda a, b, c: optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.0}]),
     r"param_groups\[1\]: lr"),
    (lambda a, b, c: optim.SGD([{"params": [a], "weight_decy": 0.1}], lr=0.1),
     "unknown key 'weight_decy'"),
    (lambda a, b, c: optim.SGD([{"params": [a]}, b], lr=0.1), r"params\[1\] must be a dict"),
    (lambda a, b, c: optim.SGD([{"lr": 0.1}], lr=0.1), "'params' key"),
    (lambda a, b, c: optim.SGD([{"params": [a]}, {"params": [b], "nesterov": True}], lr=0.1),
     r"param_groups\[1\]: nesterov"),
    (lambda a, b, c: optim.SR4([{"params": [a]}]), "groups are not supported"),
])
def test_bad_groups_raise_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make(*_tensors())


def test_fixed_settings_and_bad_values_cannot_be_set():
    a, b, _ = _tensors()
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}])
    for key, value in [("betas", (0.5, 0.5)), ("amsgrad", True), ("params", [a]), ("foo", 1)]:
        with pytest.raises(ValueError, match="cannot be set"):
            opt.param_groups[1][key] = value
    for value in (-0.1, float("nan"), float("inf"), "0.1", 1e39):
        with pytest.raises(ValueError, match="lr"):
            opt.param_groups[1]["lr"] = value
    with pytest.raises(ValueError, match="deleted"):
        del opt.param_groups[0]["lr"]
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["betas"] == (0.9, 0.999)
    assert opt.hyper_parameters()["beta1.1"] == float(f32(0.9))


# -- zero_grad ---------------------------------------------------------------------------------
def test_zero_grad_set_to_none_by_default_or_zeroes_in_place():
    a, b, c = _tensors()
    opt = optim.SGD([a, b, c], lr=0.1)
    a.grad, b.grad = tensor(np.ones(2, np.float32)), tensor(np.ones(2, np.float32))
    grad, version = b.grad, b.grad._version
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and b.grad is grad and c.grad is None
    assert np.all(b.grad._data == 0) and b.grad._version == version + 1
    opt.zero_grad()
    assert a.grad is None and b.grad is None


# -- checkpoints -----------------------------------------------------------------------------
def test_checkpoint_with_groups_round_trips_and_resumes_bit_for_bit():
    m = model()
    opt = optim.AdamW(decay_groups(m, lr=3e-2), lr=1e-2, weight_decay=0.1)
    hp = list(opt.hyper_parameters())
    assert hp == ["lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "params.1",
                  "lr.1", "beta1.1", "beta2.1", "eps.1", "weight_decay.1", "amsgrad.1"]
    assert set(opt.fixed_hyper_parameters) == {"beta1", "beta2", "eps", "amsgrad", "params.1",
                                               "beta1.1", "beta2.1", "eps.1", "amsgrad.1"}
    train(opt, 3)
    opt.param_groups[1]["weight_decay"] = 0.25
    data = checkpoint.to_bytes(m, opt)
    train(opt, 3, seed=0, start=3)

    m2 = model(7)
    opt2 = optim.AdamW(decay_groups(m2, lr=3e-2), lr=0.5, weight_decay=0.0)
    checkpoint.from_bytes(data, m2, opt2)
    assert checkpoint.to_bytes(m2, opt2) == data
    # Restored from float32 bits, shown as the shortest decimal with those bits.
    assert opt2.param_groups[1]["weight_decay"] == 0.25 and opt2.lr == 1e-2
    assert opt2.hyper_parameters()["lr"] == float(f32(1e-2))
    train(opt2, 3, seed=0, start=3)
    assert checkpoint.to_bytes(m2, opt2) == checkpoint.to_bytes(m, opt)


@pytest.mark.parametrize("make,match", [
    (lambda m: optim.AdamW(list(m.parameters()), lr=1e-2), "hyper-parameters"),
    (lambda m: optim.AdamW([{"params": list(m.parameters())[:3]},
                            {"params": list(m.parameters())[3:]}], lr=1e-2), "params.1"),
    (lambda m: optim.AdamW(decay_groups(m, betas=(0.8, 0.999)), lr=1e-2), "beta1.1"),
    (lambda m: optim.AdamW(decay_groups(m), lr=1e-2, eps=1e-6), "eps"),
])
def test_checkpoint_checks_group_count_sizes_and_fixed_settings(make, match):
    m = model()
    opt = optim.AdamW(decay_groups(m), lr=1e-2)
    train(opt, 2)
    data = checkpoint.to_bytes(m, opt)
    target = model(3)
    target_opt = make(target)
    before = checkpoint.to_bytes(target, target_opt)
    with pytest.raises(checkpoint.Mismatch, match=match):
        checkpoint.from_bytes(data, target, target_opt)
    assert checkpoint.to_bytes(target, target_opt) == before


def test_sgd_without_momentum_checks_group_sizes_though_it_has_no_state():
    m = model()
    opt = optim.SGD(decay_groups(m), lr=0.1)
    assert not opt.state_tensors()
    data = checkpoint.to_bytes(m, opt)
    ps = list(m.parameters())
    other = optim.SGD([{"params": ps[:1]}, {"params": ps[1:]}], lr=0.1)
    with pytest.raises(checkpoint.Mismatch, match="params.1"):
        checkpoint.from_bytes(data, m, other)


# -- state_dict --------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda m: optim.AdamW(decay_groups(m, amsgrad=True), lr=1e-2),
    lambda m: optim.SGD(decay_groups(m, momentum=0.0), lr=0.1, momentum=0.9),
    lambda m: optim.Adam(m.parameters(), lr=1e-2),
], ids=["adamw-groups", "sgd-groups", "adam"])
def test_state_dict_round_trip_and_resume_bit_for_bit(make):
    m = model()
    opt = make(m)
    train(opt, 3)
    opt.param_groups[-1]["lr"] = 0.02
    sd = copy.deepcopy(opt.state_dict())  # torch's: the state tensors are the optimizer's
    assert list(sd) == ["state", "param_groups"]
    assert {int(s["step"].item()) for s in sd["state"].values()} == {3}
    sizes = [len(g["params"]) for g in opt.param_groups]
    assert [g["params"] for g in sd["param_groups"]] == [
        list(range(sum(sizes[:g]), sum(sizes[:g + 1]))) for g in range(len(sizes))]
    weights = copy.deepcopy(m.state_dict())
    train(opt, 3, start=3)

    m2 = model()
    m2.load_state_dict(weights)
    opt2 = make(m2)
    opt2.load_state_dict(copy.deepcopy(sd))
    assert opt2.param_groups[-1]["lr"] == 0.02 and opt2.step_count == 3
    train(opt2, 3, start=3)
    assert checkpoint.to_bytes(m2, opt2) == checkpoint.to_bytes(m, opt)


def _sd_cases():
    def drop_state(sd):
        del sd["state"][0]["exp_avg"]

    def extra_state(sd):
        sd["state"][0]["bogus"] = np.zeros(1, np.float32)

    def shape(sd):
        sd["state"][1]["exp_avg"] = np.zeros(7, np.float32)

    def beta(sd):
        sd["param_groups"][1]["betas"] = (0.8, 0.999)

    def sizes(sd):
        sd["param_groups"][0]["params"], sd["param_groups"][1]["params"] = [0], [1, 2, 3]

    def groups(sd):
        sd["param_groups"].pop()

    def bad_lr(sd):
        sd["param_groups"][1]["lr"] = -1.0

    def str_flag(sd):
        sd["param_groups"][0]["amsgrad"] = "False"

    def step(sd):
        sd["state"][0]["step"] = om.tensor(-1)

    def key(sd):
        sd["param_groups"][0]["momentum"] = 0.9

    return [(f, n) for f, n in [
        (drop_state, "exp_avg"), (extra_state, "besides the steps"), (shape, r"exp_avg\.1"),
        (beta, "beta1.1"), (sizes, "holds parameters"), (groups, "groups"),
        (bad_lr, "lr"), (str_flag, "amsgrad"), (step, r"state\[0\]\['step'\]"), (key, "keys")]]


@pytest.mark.parametrize("corrupt,match", _sd_cases(), ids=lambda x: getattr(x, "__name__", ""))
def test_load_state_dict_checks_everything_before_changing_anything(corrupt, match):
    m = model()
    opt = optim.AdamW(decay_groups(m), lr=1e-2)
    train(opt, 2)
    sd = opt.state_dict()
    corrupt(sd)
    target = optim.AdamW(decay_groups(model()), lr=1e-2)
    train(target, 1, seed=5)
    target.param_groups[1]["lr"] = 0.125
    before = (checkpoint.to_bytes(model(), target), target.step_count)
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(sd)
    assert (checkpoint.to_bytes(model(), target), target.step_count) == before


def test_sr4_state_dict_round_trip_rewrites_the_weights():
    p = tensor(np.zeros((4, 6), np.float32), requires_grad=True)
    opt = optim.SR4([p], seed=3)
    rng = np.random.default_rng(0)
    for _ in range(3):
        p.grad = tensor(rng.standard_normal(p.shape).astype(np.float32))
        opt.step()
    sd = opt.state_dict()
    assert set(sd["state"]) == {0, "seed"}
    want = p._data.copy()
    q = tensor(np.zeros((4, 6), np.float32), requires_grad=True)
    other = optim.SR4([q], seed=3)
    other.load_state_dict(sd)
    assert q._data.tobytes() == want.tobytes() and other.step_count == 3


# -- clipping aliases ------------------------------------------------------------------------
def test_clip_aliases_are_the_clipping_functions():
    assert optim.clip_grad_norm_ is optim.clip_grad_norm
    assert optim.clip_grad_value_ is optim.clip_grad_value
    assert om.nn.utils.clip_grad_norm_ is optim.clip_grad_norm
    assert om.nn.utils.clip_grad_value_ is optim.clip_grad_value
