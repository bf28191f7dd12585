"""nn.init's in-place initialisers: PyTorch's signatures, fans and gains; the distributions'
bounds and moments against PyTorch's formulas; the stream they draw (SplitMix64, so the values
are not PyTorch's); in-place writes that keep identity; errors before anything changes."""
import inspect
import math

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import nn

torch = pytest.importorskip("torch")
init = nn.init
NAMES = ("uniform_", "normal_", "trunc_normal_", "constant_", "zeros_", "ones_",
         "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
         "calculate_gain")
SHAPES = [(4, 3), (8, 3, 5, 5), (2, 6, 3), (7, 1, 2, 3, 2)]


def big(*shape):
    return nn.Parameter(np.zeros(shape or (400, 500), np.float32))


def moments(t):
    x = t.detach().numpy().astype(np.float64).ravel()
    return x.mean(), x.std()


def normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def ks_statistic(x, cdf):
    x = np.sort(np.asarray(x, np.float64).ravel())
    n = len(x)
    c = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n))


@pytest.mark.parametrize("name", NAMES)
def test_signatures_are_torch(name):
    ours = inspect.signature(getattr(init, name)).parameters
    ref = inspect.signature(getattr(torch.nn.init, name)).parameters
    assert [(p.name, p.default) for p in ours.values()] == [
        (p.name, p.default) for p in ref.values()]


@pytest.mark.parametrize("shape", SHAPES)
def test_fans_are_torch(shape):
    assert init._calculate_fan_in_and_fan_out(om.zeros(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(shape))


@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",),
                                  ("leaky_relu",), ("leaky_relu", 0.2), ("leaky_relu", 0),
                                  ("selu",)])
def test_gains_are_torch(args):
    assert init.calculate_gain(*args) == pytest.approx(torch.nn.init.calculate_gain(*args),
                                                       rel=1e-15)


def test_uniform_draws_training_txt_stream_in_place():
    w = big(3, 5)
    data = w._data
    out = init.uniform_(w, -0.5, 2.0, generator=om.Generator(7))
    assert out is w and w._data is data and w.requires_grad and w.grad is None
    np.testing.assert_array_equal(w.detach().numpy(),
                                  om.Generator(7).uniform(-0.5, 2.0, (3, 5)).numpy())


def test_default_generator_in_call_order():
    om.manual_seed(3)
    a, b = init.normal_(big(2, 3)), init.uniform_(big(2, 3))
    om.manual_seed(3)
    assert np.array_equal(init.normal_(big(2, 3)).detach().numpy(), a.detach().numpy())
    assert np.array_equal(init.uniform_(big(2, 3)).detach().numpy(), b.detach().numpy())
    assert not np.array_equal(a.detach().numpy(), init.normal_(big(2, 3)).detach().numpy())


def reference_normals(seed, n):
    """The polar method one pair at a time: (u, v) = 2·NextSingle − 1, kept when 0 < s < 1."""
    g = om.Generator(seed)
    out = []
    while len(out) < n:
        u, v = (np.float32(-1) + np.float32(2) * np.float32(g.next_single()) for _ in range(2))
        s = u * u + v * v
        if 0 < s < 1:
            log_s = F.log(om.tensor(np.array([s], np.float32))).numpy()[0]
            f = np.sqrt(np.float32(-2) * log_s / s)
            out += [u * f, v * f]
    return np.array(out[:n], np.float32), g.state


@pytest.mark.parametrize("n", [1, 2, 7, 5000])
def test_normal_stream_is_the_one_pair_at_a_time_polar_method(n):
    g = om.Generator(11)
    w = init.normal_(big(n), generator=g)
    expected, state = reference_normals(11, n + (n % 2))
    np.testing.assert_array_equal(w.detach().numpy(), expected[:n])
    assert g.state == state  # advanced past the last pair used, no further


def test_normal_moments_and_shape():
    w = init.normal_(big(), mean=1.5, std=0.25, generator=om.Generator(1))
    mean, std = moments(w)
    assert abs(mean - 1.5) < 0.003 and abs(std / 0.25 - 1) < 0.01
    z = (w.detach().numpy() - 1.5) / 0.25
    assert ks_statistic(z, normal_cdf) < 0.005


def test_uniform_bounds_and_moments():
    w = init.uniform_(big(), -1.0, 3.0, generator=om.Generator(2))
    x = w.detach().numpy()
    assert x.min() >= -1.0 and x.max() < 3.0
    mean, std = moments(w)
    assert abs(mean - 1.0) < 0.01 and abs(std - 4 / math.sqrt(12)) < 0.01
    assert ks_statistic(x, lambda v: (v + 1) / 4) < 0.005


@pytest.mark.parametrize("shape", [(400, 500), (64, 32, 3, 3)])
@pytest.mark.parametrize("kind", ["uniform", "normal"])
@pytest.mark.parametrize("kw", [{}, {"mode": "fan_out"}, {"a": 0.2},
                                {"nonlinearity": "relu"}, {"nonlinearity": "tanh"}])
def test_kaiming_matches_torch_formula(shape, kind, kw):
    ours = getattr(init, f"kaiming_{kind}_")(big(*shape), generator=om.Generator(5), **kw)
    ref = getattr(torch.nn.init, f"kaiming_{kind}_")(torch.zeros(shape), **kw)
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(ref)
    fan = fan_out if kw.get("mode") == "fan_out" else fan_in
    gain = torch.nn.init.calculate_gain(kw.get("nonlinearity", "leaky_relu"), kw.get("a", 0))
    std = gain / math.sqrt(fan)
    x = ours.detach().numpy()
    _, measured = moments(ours)
    assert abs(measured / std - 1) < 0.02
    assert abs(measured / float(ref.std()) - 1) < 0.04  # PyTorch's own draws agree
    if kind == "uniform":
        bound = math.sqrt(3) * std
        assert np.abs(x).max() <= np.float32(bound) and np.abs(x).max() > 0.99 * bound


@pytest.mark.parametrize("shape", [(400, 500), (64, 32, 3, 3)])
@pytest.mark.parametrize("gain", [1.0, 2.5])
def test_xavier_matches_torch_formula(shape, gain):
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(shape))
    std = gain * math.sqrt(2 / (fan_in + fan_out))
    u = init.xavier_uniform_(big(*shape), gain=gain, generator=om.Generator(8))
    n = init.xavier_normal_(big(*shape), gain=gain, generator=om.Generator(8))
    for t in (u, n):
        assert abs(moments(t)[1] / std - 1) < 0.02
    x = u.detach().numpy()
    bound = math.sqrt(3) * std
    assert np.abs(x).max() <= np.float32(bound) and np.abs(x).max() > 0.99 * bound


def truncated_moments(mean, std, a, b):
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    z = float(normal_cdf(beta) - normal_cdf(alpha))
    m = mean + std * (pdf(alpha) - pdf(beta)) / z
    var = std ** 2 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z
                      - ((pdf(alpha) - pdf(beta)) / z) ** 2)
    return m, math.sqrt(var)


@pytest.mark.parametrize("args", [(0.0, 1.0, -2.0, 2.0), (0.5, 0.02, 0.48, 0.6),
                                  (0.0, 1.0, 1.0, 3.0), (2.0, 3.0, -1.0, 0.0)])
def test_trunc_normal_bounds_and_moments(args):
    mean, std, a, b = args
    w = init.trunc_normal_(big(), mean, std, a, b, generator=om.Generator(4))
    x = w.detach().numpy()
    assert x.min() >= np.float32(a) and x.max() <= np.float32(b)
    m, s = truncated_moments(mean, std, a, b)
    measured_mean, measured_std = moments(w)
    assert abs(measured_mean - m) < 0.01 * s and abs(measured_std / s - 1) < 0.01
    ref = torch.nn.init.trunc_normal_(torch.zeros(400, 500), mean, std, a, b)
    assert abs(float(ref.std()) / s - 1) < 0.01  # the formula is PyTorch's distribution


def test_constants_in_place_on_any_dtype():
    w = big(2, 3)
    assert init.constant_(w, 0.3) is w and np.all(w.detach().numpy() == np.float32(0.3))
    assert not init.zeros_(w).detach().numpy().any()
    assert np.all(init.ones_(w).detach().numpy() == 1) and w.requires_grad
    counts = om.zeros(3, dtype=np.int64)
    assert init.constant_(counts, 4).numpy().tolist() == [4, 4, 4]


def test_zero_element_kaiming_is_a_no_op():
    w = big(0, 3)
    g = om.Generator(1)
    assert init.kaiming_uniform_(w, generator=g) is w and g.state == om.Generator(1).state
    assert init.kaiming_normal_(big(3, 0)).shape == (3, 0)


@pytest.mark.parametrize("call, error, match", [
    (lambda: init.kaiming_uniform_(big(5)), ValueError, r"fewer than 2 dimensions \(shape"),
    (lambda: init.xavier_normal_(big(5)), ValueError, "fewer than 2 dimensions"),
    (lambda: init.kaiming_normal_(big(2, 2), mode="fan"), ValueError, "kaiming_normal_: mode"),
    (lambda: init.kaiming_uniform_(big(2, 2), nonlinearity="swish"), ValueError,
     "unsupported nonlinearity 'swish'"),
    (lambda: init.uniform_(om.zeros(2, dtype=np.int64)), TypeError,
     r"uniform_: tensor must be float32, got int64 \(shape \(2,\)\)"),
    (lambda: init.normal_(np.zeros(2, np.float32)), TypeError, "normal_: tensor must be an"),
    (lambda: init.normal_(big(2), std=-1.0), ValueError, "normal_: std must be >= 0"),
    (lambda: init.uniform_(big(2), 1.0, 0.0), ValueError, "uniform_: a must be <= b"),
    (lambda: init.trunc_normal_(big(2), a=1.0, b=1.0), ValueError, "a must be < b"),
    (lambda: init.trunc_normal_(big(2), a=9.0, b=10.0), ValueError, "holds only"),
    (lambda: init.normal_(big(2), generator=np.random.default_rng()), TypeError,
     "generator must be an onemodel.Generator"),
])
def test_bad_arguments_raise_before_anything_changes(call, error, match):
    state = om.default_generator.state
    with pytest.raises(error, match=match):
        call()
    assert om.default_generator.state == state


def test_initialisers_work_on_graph_leaves_and_keep_them_trainable():
    m = nn.Linear(3, 2, seed=0)
    opt_ref = m.weight
    init.kaiming_normal_(m.weight, nonlinearity="relu")
    init.zeros_(m.bias)
    m(om.ones(1, 3)).sum().backward()
    assert m.weight is opt_ref and m.weight.grad is not None


def test_apply_initialises_in_place():
    m = nn.Sequential(nn.Linear(2, 3, seed=0), nn.ReLU(), nn.Linear(3, 1, seed=0))

    def init(module):
        if isinstance(module, nn.Linear):
            nn.init.constant_(module.weight, 0.25)
            nn.init.zeros_(module.bias)

    m.apply(init)
    assert all(float(v) == 0.25 for v in m[0].weight.detach().numpy().ravel())
    assert not m[2].bias.detach().numpy().any()




def test_tensor_uniform_and_normal_are_nn_init_draws_in_place():
    """Tensor.uniform_(a, b) and Tensor.normal_(mean, std), as PyTorch scripts write them on a
    parameter's .data, are nn.init's draws (the same bits from the same generator state),
    written into the parameter itself; the default generator when none is given."""
    for method, fn, args in (("uniform_", init.uniform_, (-0.1, 0.1)),
                             ("normal_", init.normal_, (0.0, 0.02))):
        ours, ref = big(30, 7), big(30, 7)
        before = id(ours._data)
        om.manual_seed(3)
        assert getattr(ours.data, method)(*args) is not None
        om.manual_seed(3)
        fn(ref, *args)
        assert ours.detach().numpy().tobytes() == ref.detach().numpy().tobytes()
        assert id(ours._data) == before and ours.requires_grad
        g1, g2 = om.Generator(5), om.Generator(5)
        t = om.zeros(11)
        getattr(t, method)(*args, generator=g1)
        assert t.numpy().tobytes() == fn(om.zeros(11), *args, generator=g2).numpy().tobytes()
    t = om.zeros(100_000)
    lo, hi = t.uniform_(-2.0, 3.0).numpy().min(), t.numpy().max()
    assert -2.0 <= lo < -1.99 and 2.99 < hi < 3.0
    mean, std = moments(t.normal_(1.5, 0.5))
    assert abs(mean - 1.5) < 0.01 and abs(std - 0.5) < 0.01
    t = om.zeros(3)
    with pytest.raises(ValueError, match="uniform_: a must be <= b"):
        t.uniform_(1.0, 0.0)
    with pytest.raises(ValueError, match="normal_: std must be >= 0"):
        t.normal_(0.0, -1.0)
    with pytest.raises(TypeError, match="normal_: tensor must be float32, got int64"):
        om.zeros(3, dtype=np.int64).normal_()
    assert t.numpy().tolist() == [0.0, 0.0, 0.0]
