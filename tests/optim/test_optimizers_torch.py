"""RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam (docs/spec/optimizers.md): 20 steps
against torch.optim from the same weights and gradients (parameters and every state array, by
torch's state names), against an independent reference of the spec's formulas to the bit, the
same bits on every ISA path and thread count, state_dict and checkpoint round trips mid-run,
param_groups as given, and bad arguments refused by name before anything changes."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn, optim

SHAPES = [(37,), (3, 4)]
STEPS = 20

# (optimizer, settings): every flag and option of each.
CASES = [
    ("RMSprop", {}),
    ("RMSprop", {"momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"centered": True, "alpha": 0.875}),
    ("RMSprop", {"centered": True, "momentum": 0.5, "maximize": True, "eps": 1e-3}),
    ("Adagrad", {}),
    ("Adagrad", {"lr_decay": 0.01, "weight_decay": 0.1, "initial_accumulator_value": 0.1}),
    ("Adagrad", {"maximize": True, "eps": 1e-4}),
    ("Adadelta", {}),
    ("Adadelta", {"rho": 0.5, "weight_decay": 0.1, "lr": 0.5}),
    ("Adadelta", {"maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"betas": (0.5, 0.99), "weight_decay": 0.1}),
    ("Adamax", {"maximize": True, "eps": 1e-3}),
    ("NAdam", {}),
    ("NAdam", {"weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("RAdam", {}),
    ("RAdam", {"betas": (0.8, 0.9), "weight_decay": 0.1}),
    ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
]
IDS = [f"{name}-{'-'.join(kw) or 'defaults'}" for name, kw in CASES]


def rounded(settings: dict) -> dict:
    """The settings as onemodel computes with them: lr and weight decay as float32 values."""
    return {k: float(np.float32(v)) if k in ("lr", "weight_decay") else v
            for k, v in settings.items()}


def data(seed: int = 0, steps: int = STEPS, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(steps)]
    return weights, grads


def om_run(name: str, settings: dict, weights, grads, start: int = 0, params=None, opt=None):
    params = params or [om.tensor(w.copy(), requires_grad=True) for w in weights]
    opt = opt or getattr(optim, name)(params, **settings)
    for step in grads[start:]:
        for p, g in zip(params, step):
            p.grad = om.tensor(g)
        opt.step()
    return params, opt


@pytest.mark.parametrize("name, settings", CASES, ids=IDS)
def test_against_torch(name, settings):
    torch = pytest.importorskip("torch")
    weights, grads = data()
    op = [om.tensor(w.copy(), requires_grad=True) for w in weights]
    oop = getattr(optim, name)(op, **settings)
    tp = [torch.tensor(w.copy(), requires_grad=True) for w in weights]
    top = getattr(torch.optim, name)(tp, **rounded({"lr": oop.lr, **settings}))
    for step in grads:
        for t, o, g in zip(tp, op, step):
            t.grad, o.grad = torch.tensor(g), om.tensor(g)
        top.step()
        oop.step()
        for t, o in zip(tp, op):
            a, b = t.detach().numpy(), o.detach().numpy()
            # torch's CPU kernels fuse multiply-adds and round sqrt to 1 ulp: a few ulps of the
            # tensor's scale after 20 steps, never more.
            assert np.abs(a - b).max() <= 16 * np.spacing(np.abs(a).max()), (name, a, b)
    state = oop.state_tensors()
    for i, t in enumerate(tp):
        theirs = {k: v for k, v in top.state[t].items() if k != "step"}
        ours = {k.rpartition(".")[0]: v for k, v in state.items() if k.endswith(f".{i}")}
        assert sorted(ours) == sorted(theirs)
        for key, value in theirs.items():
            a = value.numpy()
            assert np.abs(a - ours[key]).max() <= 16 * np.spacing(np.abs(a).max()), key


# -- the spec's formulas, to the bit --------------------------------------------------------------
# Each operation of docs/spec/optimizers.md in double, rounded to float32 after it: for + − × ÷
# and sqrt of float32 values that is the float32 operation itself, so these give the spec's bits
# by another route than the implementation's. lr and weight decay are read as float32, the fixed
# settings as given.
def r32(x):
    return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


def lerp(a, b, w):
    w = r32(w)
    return r32(a + r32(w * r32(b - a))) if w < 0.5 else r32(b - r32(r32(b - a) * r32(1 - w)))


def ipow(x, n):
    r = 1.0
    while n:
        if n & 1:
            r *= x
        n >>= 1
        if n:
            x *= x
    return r


def decay(s, p, g):
    if s.get("maximize"):
        g = -g
    wd = float(r32(s.get("weight_decay", 0.0)))
    if wd and s.get("decoupled_weight_decay"):
        p = r32(p * r32(1.0 - float(r32(s["lr"])) * wd))
    elif wd:
        g = r32(g + r32(wd * p))
    return p, g


def ref_rmsprop(s, p, g, st, t):
    p, g = decay(s, p, g)
    a, lr = s["alpha"], float(r32(s["lr"]))
    st["square_avg"] = v = r32(r32(st["square_avg"] * r32(a)) + r32(r32(r32(1 - a) * g) * g))
    if s["centered"]:
        st["grad_avg"] = m = lerp(st["grad_avg"], g, 1 - a)
        d = r32(np.sqrt(r32(v + r32(r32(-m) * m))))
    else:
        d = r32(np.sqrt(v))
    d = r32(d + r32(s["eps"]))
    if s["momentum"] > 0:
        st["momentum_buffer"] = b = r32(r32(st["momentum_buffer"] * r32(s["momentum"]))
                                        + r32(g / d))
        return r32(p + r32(r32(-lr) * b))
    return r32(p + r32(r32(-lr) * r32(g / d)))


def ref_adagrad(s, p, g, st, t):
    p, g = decay(s, p, g)
    clr = float(r32(s["lr"])) / (1 + (t - 1) * s["lr_decay"])
    st["sum"] = v = r32(st["sum"] + r32(g * g))
    return r32(p + r32(r32(-clr) * r32(g / r32(r32(np.sqrt(v)) + r32(s["eps"])))))


def ref_adadelta(s, p, g, st, t):
    p, g = decay(s, p, g)
    rho, eps, keep = r32(s["rho"]), r32(s["eps"]), r32(1 - s["rho"])
    st["square_avg"] = v = r32(r32(st["square_avg"] * rho) + r32(r32(keep * g) * g))
    u = st["acc_delta"]
    delta = r32(r32(r32(np.sqrt(r32(u + eps))) / r32(np.sqrt(r32(v + eps)))) * g)
    st["acc_delta"] = r32(r32(u * rho) + r32(r32(keep * delta) * delta))
    return r32(p + r32(r32(-r32(s["lr"])) * delta))


def ref_adamax(s, p, g, st, t):
    p, g = decay(s, p, g)
    b1, b2 = s["betas"]
    st["exp_avg"] = m = lerp(st["exp_avg"], g, 1 - b1)
    st["exp_inf"] = u = np.maximum(r32(st["exp_inf"] * r32(b2)), r32(np.abs(g) + r32(s["eps"])))
    clr = float(r32(s["lr"])) / (1 - ipow(b1, t))
    return r32(p + r32(r32(-clr) * r32(m / u)))


def ref_nadam(s, p, g, st, t):
    p, g = decay(s, p, g)
    lr, (b1, b2), psi = float(r32(s["lr"])), s["betas"], s["momentum_decay"]
    mu, mu_next = (b1 * (1 - 0.5 * 0.96 ** (k * psi)) for k in (t, t + 1))
    st["mu_product"] = pi = r32(st["mu_product"] * r32(mu))
    st["exp_avg"] = m = lerp(st["exp_avg"], g, 1 - b1)
    st["exp_avg_sq"] = v = r32(r32(st["exp_avg_sq"] * r32(b2)) + r32(r32(r32(1 - b2) * g) * g))
    d = r32(r32(np.sqrt(r32(v / r32(1 - ipow(b2, t))))) + r32(s["eps"]))
    pi = float(pi)
    p = r32(p + r32(r32(-lr * (1 - mu) / (1 - pi)) * r32(g / d)))
    return r32(p + r32(r32(-lr * mu_next / (1 - pi * mu_next)) * r32(m / d)))


def ref_radam(s, p, g, st, t):
    p, g = decay(s, p, g)
    lr, (b1, b2) = float(r32(s["lr"])), s["betas"]
    st["exp_avg"] = m = lerp(st["exp_avg"], g, 1 - b1)
    st["exp_avg_sq"] = v = r32(r32(st["exp_avg_sq"] * r32(b2)) + r32(r32(r32(1 - b2) * g) * g))
    bc2 = 1 - ipow(b2, t)
    u = r32(r32(m / r32(1 - ipow(b1, t))) * r32(lr))
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * ipow(b2, t) / bc2
    if rho_t > 5:
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
        adaptive = r32(r32(1 / r32(r32(np.sqrt(v)) + r32(s["eps"]))) * r32(bc2 ** 0.5))
        u = r32(r32(u * adaptive) * r32(rect))
    return r32(p - u)


REFERENCES = {"RMSprop": ref_rmsprop, "Adagrad": ref_adagrad, "Adadelta": ref_adadelta,
              "Adamax": ref_adamax, "NAdam": ref_nadam, "RAdam": ref_radam}


@pytest.mark.parametrize("name, settings", CASES, ids=IDS)
def test_spec_formula_to_the_bit(name, settings):
    weights, grads = data(1, steps=8, shapes=[(23,)])
    params, opt = om_run(name, settings, weights, grads)
    full = {k: v for k, v in opt.param_groups[0].items() if k != "params"}
    state = {k.rpartition(".")[0]: np.asarray(v, np.float64) * 0 for k, v in
             opt.state_tensors().items()}
    state.update({"sum": np.full(23, r32(full.get("initial_accumulator_value", 0.0))),
                  "mu_product": np.float64(1.0)})
    p = r32(weights[0])
    for t, step in enumerate(grads, 1):
        p = REFERENCES[name](full, p, r32(step[0]), state, t)
    assert params[0].detach().numpy().tobytes() == p.astype(np.float32).tobytes()


# -- the same bits everywhere ---------------------------------------------------------------------
@pytest.mark.parametrize("name, settings", CASES[::3], ids=IDS[::3])
def test_same_bits_on_every_path_and_thread_count(name, settings, isa, same_bits_everywhere):
    weights, grads = data(2, steps=5, shapes=[(1000,), (17, 3)])

    def run(n):
        params, opt = om_run(name, settings, weights, grads)
        return [p.detach().numpy() for p in params] + list(opt.state_tensors().values())

    same_bits_everywhere(run)


# -- resuming -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, settings", CASES[1::3], ids=IDS[1::3])
def test_state_dict_round_trip_continues_bit_for_bit(name, settings):
    weights, grads = data(3)
    whole, _ = om_run(name, settings, weights, grads)
    half, opt = om_run(name, settings, weights, grads[:10])
    saved = opt.state_dict()
    params = [om.tensor(p.detach().numpy().copy(), requires_grad=True) for p in half]
    fresh = getattr(optim, name)(params, **settings)
    fresh.load_state_dict(saved)
    assert fresh.step_count == 10
    om_run(name, settings, weights, grads, start=10, params=params, opt=fresh)
    for a, b in zip(whole, params):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


@pytest.mark.parametrize("name, settings", CASES[2::3], ids=IDS[2::3])
def test_checkpoint_round_trip_continues_bit_for_bit(name, settings):
    weights, grads = data(4, shapes=[(3, 4), (3,)])

    def model():
        m = nn.Linear(4, 3)
        m.weight.data.numpy()[...] = weights[0]
        m.bias.data.numpy()[...] = weights[1]
        return m

    whole = model()
    om_run(name, settings, weights, grads, params=list(whole.parameters()))
    half = model()
    opt = getattr(optim, name)(half.parameters(), **settings)
    om_run(name, settings, weights, grads[:7], params=list(half.parameters()), opt=opt)
    blob = checkpoint.to_bytes(half, opt)
    resumed = model()
    fresh = getattr(optim, name)(resumed.parameters(), **settings)
    checkpoint.from_bytes(blob, resumed, fresh)
    om_run(name, settings, weights, grads, start=7, params=list(resumed.parameters()),
           opt=fresh)
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


def test_checkpoint_refuses_other_fixed_settings():
    m = nn.Linear(2, 2)
    blob = checkpoint.to_bytes(m, optim.RMSprop(m.parameters(), alpha=0.9))
    with pytest.raises(checkpoint.Mismatch, match="alpha"):
        checkpoint.from_bytes(blob, m, optim.RMSprop(m.parameters(), alpha=0.8))


# -- param_groups as given ------------------------------------------------------------------------
def test_param_groups_show_the_values_given_and_compute_with_float32():
    torch = pytest.importorskip("torch")
    p = om.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = optim.RMSprop([p], lr=0.05, alpha=0.9, weight_decay=0.01)
    theirs = torch.optim.RMSprop([torch.ones(3, requires_grad=True)], lr=0.05, alpha=0.9,
                                 weight_decay=0.01).param_groups[0]
    for key in ("lr", "alpha", "eps", "weight_decay", "momentum", "centered", "maximize"):
        assert opt.param_groups[0][key] == theirs[key], key
    assert repr(opt.param_groups[0]["lr"]) == "0.05"
    opt.param_groups[0]["lr"] = 0.1
    assert opt.param_groups[0]["lr"] == 0.1 and opt.lr == 0.1
    hyper = opt.hyper_parameters()
    assert hyper["lr"] == float(np.float32(0.1)) and hyper["alpha"] == float(np.float32(0.9))
    assert optim.NAdam([p], betas=(0.8, 0.95)).param_groups[0]["betas"] == (0.8, 0.95)


@pytest.mark.parametrize("name, settings", [
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.003, "betas": (0.8, 0.95), "eps": 1e-7, "weight_decay": 0.01}),
    ("AdamW", {"lr": 0.003, "weight_decay": 0.3}),
])
def test_sgd_and_adam_groups_show_the_values_given_and_keep_their_bits(name, settings):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    w = rng.standard_normal(6).astype(np.float32)
    p = om.tensor(w.copy(), requires_grad=True)
    opt = getattr(optim, name)([p], **settings)
    theirs = getattr(torch.optim, name)([torch.ones(1, requires_grad=True)],
                                        **settings).param_groups[0]
    for key in opt.param_groups[0]:
        if key != "params":
            assert opt.param_groups[0][key] == theirs[key], key
    # The arithmetic is training.txt section 3's on the float32 values: the same bits as an
    # optimizer given those float32 values.
    rounded_settings = {k: tuple(float(np.float32(b)) for b in v) if isinstance(v, tuple)
                        else float(np.float32(v)) for k, v in settings.items()}
    q = om.tensor(w.copy(), requires_grad=True)
    twin = getattr(optim, name)([q], **rounded_settings)
    for _ in range(3):
        g = rng.standard_normal(6).astype(np.float32)
        p.grad, q.grad = om.tensor(g), om.tensor(g)
        opt.step()
        twin.step()
    assert p.detach().numpy().tobytes() == q.detach().numpy().tobytes()
    assert opt.hyper_parameters() == twin.hyper_parameters()


# -- bad arguments --------------------------------------------------------------------------------
BAD = [
    ("RMSprop", {"lr": -0.1}, "lr"),
    ("RMSprop", {"alpha": 1.5}, "alpha"),
    ("RMSprop", {"momentum": -0.5}, "momentum"),
    ("RMSprop", {"eps": -1e-8}, "eps"),
    ("RMSprop", {"centered": "yes"}, "centered"),
    ("RMSprop", {"foreach": "yes"}, "foreach"),
    ("Adagrad", {"lr_decay": -1.0}, "lr_decay"),
    ("Adagrad", {"initial_accumulator_value": -1.0}, "initial_accumulator_value"),
    ("Adagrad", {"weight_decay": -1.0}, "weight_decay"),
    ("Adadelta", {"rho": 1.5}, "rho"),
    ("Adadelta", {"lr": float("nan")}, "lr"),
    ("Adamax", {"betas": (1.0, 0.999)}, r"betas\[0\]"),
    ("Adamax", {"betas": (0.9, -0.1)}, r"betas\[1\]"),
    ("NAdam", {"betas": 0.9}, "betas"),
    ("NAdam", {"momentum_decay": -1.0}, "momentum_decay"),
    ("NAdam", {"decoupled_weight_decay": 1}, "decoupled_weight_decay"),
    ("RAdam", {"betas": (0.9, 0.999999999)}, r"betas\[1\] rounds to 1"),
    ("RAdam", {"maximize": None}, "maximize"),
]


@pytest.mark.parametrize("name, settings, match", BAD,
                         ids=[f"{n}-{m}" for n, _, m in BAD])
def test_bad_arguments_named(name, settings, match):
    p = om.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(ValueError, match=f"{name}.*{match}"):
        getattr(optim, name)([p], **settings)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_bad_gradient_or_setting_changes_nothing(name):
    a = om.tensor(np.ones(3, np.float32), requires_grad=True)
    b = om.tensor(np.ones(4, np.float32), requires_grad=True)
    opt = getattr(optim, name)([a, b])
    a.grad, b.grad = om.tensor(np.ones(3, np.float32)), om.tensor(np.ones(4, np.float32))
    opt.step()
    before = [x.copy() for x in [a.detach().numpy(), b.detach().numpy(),
                                 *opt.state_tensors().values()]]
    b.grad = om.tensor(np.ones(5, np.float32))
    with pytest.raises(ValueError, match=rf"{name}.step: params\[1\]"):
        opt.step()
    with pytest.raises(ValueError, match="lr"):
        opt.param_groups[0]["lr"] = -1.0
    with pytest.raises(ValueError, match="cannot be set"):
        opt.param_groups[0]["eps"] = 1.0
    after = [a.detach().numpy(), b.detach().numpy(), *opt.state_tensors().values()]
    assert all(x.tobytes() == y.tobytes() for x, y in zip(before, after))
    assert opt.step_count == 1 and opt.lr == getattr(optim, name)([a]).lr


@pytest.mark.parametrize("name", sorted(REFERENCES) + ["LBFGS"])
def test_signature_is_torchs(name):
    torch = pytest.importorskip("torch")

    def shape(cls):
        return [(p.name, p.kind, p.default) for p in
                inspect.signature(cls.__init__).parameters.values()]

    assert shape(getattr(optim, name)) == shape(getattr(torch.optim, name))
