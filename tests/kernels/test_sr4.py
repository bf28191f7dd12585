"""SR4 (docs/spec/sr4.txt, docs/spec/clarifications.md): the state, the step to the bit against a
plain implementation written here, unbiasedness and the Weyl stratum, every ISA path and thread
count, the ternary product, TernaryLinear's gradients against PyTorch, resume in a fresh
process, and argument errors."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import checkpoint, nn
from onemodel._kernels import _sr4
from onemodel.optim import SGD, SR4

C0 = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1


# -- a plain implementation of sections 1, 3 and 4 -----------------------------------------
def mix(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, np.uint64)
    with np.errstate(over="ignore"):  # wrapping unsigned 64-bit products
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def sr_hash(seed: int, counter: int, idx: np.ndarray) -> np.ndarray:
    a = int(mix(np.uint64(seed ^ C0)))
    b = int(mix(np.uint64(a ^ counter)))
    return mix(np.uint64(b) ^ idx.astype(np.uint64))


def ref_init(n: int, seed: int, idx_base: int, mag: int = 3) -> np.ndarray:
    x = int(mix(np.uint64(seed ^ idx_base ^ C0))) or C0
    q = np.empty(n, np.int64)
    for i in range(n):
        x ^= (x << 13) & MASK
        x ^= x >> 7
        x ^= (x << 17) & MASK
        r = ((x >> 32) * 1000) >> 32
        q[i] = -mag if r < 335 else 0 if r < 665 else mag
    return q


def ref_step(q, g, target_step, seed, counter, idx_base, q_clamp=7, dither=True):
    g = g.reshape(-1).astype(np.float32)
    mean = np.float32(np.cumsum(np.abs(g).astype(np.float64))[-1] / g.size)
    s = np.float32(target_step) / (mean + np.float32(1e-12))
    prop = ((-g) * s) * np.float32(256)
    step_fx = np.rint(np.clip(prop, -4096, 4096)).astype(np.int64)  # half to even
    k, f = step_fx >> 8, step_fx & 255
    idx = np.arange(idx_base, idx_base + g.size, dtype=np.uint64)
    if dither:
        h = sr_hash(seed, counter >> 8, idx) & np.uint64(255)
        u = (h.astype(np.int64) + 159 * (counter & 255)) % 256
    else:
        u = (sr_hash(seed, counter, idx) & np.uint64(255)).astype(np.int64)
    return np.clip(q + k + (u < f), -q_clamp, q_clamp)


def unpack(packed: np.ndarray, n: int) -> np.ndarray:
    nib = np.stack([packed & 15, packed >> 4], 1).reshape(-1)[:n].astype(np.int64)
    return (nib ^ 8) - 8


def ternary(q: np.ndarray, theta: int = 2) -> np.ndarray:
    return np.where(q >= theta, 1, np.where(q <= -theta, -1, 0)).astype(np.float32)


def leaf(shape) -> om.Tensor:
    return om.Tensor(np.zeros(shape, np.float32), requires_grad=True)


# -- the state --------------------------------------------------------------------------------
def test_mix_is_splitmix64_output_function():
    # SplitMix64 from state 0: the first output is mix(0 + golden) (docs/spec/training.txt 1.1).
    assert _sr4.mix(C0) == 0xE220A8397B1DCDAF
    for z in (0, 1, 0xDEADBEEF, MASK):
        assert _sr4.mix(z) == int(mix(np.uint64(z)))


def test_init_packed_low_nibble_first_and_proportions():
    params = [leaf((3, 5)), leaf((1,)), leaf((200, 300))]
    opt = SR4(params, seed=12345)
    assert opt.idx_base == [0, 15, 16]
    state = opt.state_tensors()
    assert list(state) == ["q.0", "q.1", "q.2", "seed"]
    for i, p in enumerate(params):
        q = state[f"q.{i}"]
        assert q.dtype == np.uint8 and q.shape == ((p.numel() + 1) // 2,)
        expected = ref_init(p.numel(), 12345, opt.idx_base[i]) if p.numel() < 100 else None
        values = unpack(q, p.numel())
        if expected is not None:
            assert (values == expected).all()
        if p.numel() % 2:
            assert q[-1] >> 4 == 0
        assert (p.detach().numpy().reshape(-1) == ternary(values)).all()
    big = unpack(state["q.2"], 60000)
    assert set(np.unique(big)) == {-3, 0, 3}
    for v, share in ((-3, 0.335), (0, 0.33), (3, 0.335)):
        assert abs(np.mean(big == v) - share) < 0.006
    # distinct matrices, distinct draws
    assert not (unpack(state["q.2"], 15) == unpack(state["q.0"], 15)).all()


def test_weyl_rotation_is_a_bijection():
    assert sorted((159 * j) % 256 for j in range(256)) == list(range(256))


# -- the step to the bit ------------------------------------------------------------------------
@pytest.mark.parametrize("dither", [True, False])
def test_step_matches_plain_implementation(dither):
    rng = np.random.default_rng(7)
    shapes = [(7, 9), (33,), (1,), (4, 4)]
    params = [leaf(s) for s in shapes]
    opt = SR4(params, target_step=0.3, seed=2**64 - 5, use_dither=dither)
    q = [ref_init(p.numel(), 2**64 - 5, b) for p, b in zip(params, opt.idx_base)]
    for step in range(300):  # crosses the stratum boundary at 256
        ts = [0.3, 0.02, 40.0][step % 3]  # 40: most steps hit the ±4096 clamp and saturate
        for i, p in enumerate(params):
            scale = 10.0 ** rng.integers(-6, 4)
            g = (rng.standard_normal(p.shape) * scale).astype(np.float32)
            if step % 7 == 0:
                g[...] = np.abs(g)  # every step negative
            p.grad = om.Tensor(g)
            q[i] = ref_step(q[i], g, ts, 2**64 - 5, step, opt.idx_base[i], dither=dither)
        # step 0 mod 3 runs at 0.3, the configured step: through lr, or by asking for <= 0
        opt.step(target_step=ts if step % 3 else None if step % 2 else -1.0)
    for i, p in enumerate(params):
        assert (unpack(opt.state_tensors()[f"q.{i}"], p.numel()) == q[i]).all()
        assert (p.detach().numpy().reshape(-1) == ternary(q[i])).all()
    assert any(np.abs(x).max() == 7 for x in q)


def test_default_target_step_and_zero_gradient():
    a, b = leaf((40,)), leaf((40,))
    opt_a, opt_b = SR4([a], target_step=0.5, seed=3), SR4([b], target_step=0.5, seed=3)
    g = np.random.default_rng(1).standard_normal(40).astype(np.float32)
    a.grad, b.grad = om.Tensor(g), om.Tensor(g)
    opt_a.step(target_step=0.0)
    opt_b.step()
    assert (opt_a.state_tensors()["q.0"] == opt_b.state_tensors()["q.0"]).all()
    before = opt_a.state_tensors()["q.0"].copy()
    a.grad = om.Tensor(np.zeros(40, np.float32))
    opt_a.step()
    assert (opt_a.state_tensors()["q.0"] == before).all()


def _single_step_bits(frac: int, counters, dither: bool, n: int) -> np.ndarray:
    """Fires of one step from q = 0 with step_fx = frac, for each counter."""
    g = np.full(n, -1.0, np.float32)
    fires = np.zeros(n, np.int64)
    for c in counters:
        q = np.zeros((n + 1) // 2, np.uint8)
        _sr4.step(q, g, None, frac / 256.0, 5, c, 0, 7, 2, dither, 1)
        fires += unpack(q, n)
    return fires


def test_weyl_stratum_fires_exactly_f_times():
    fires = _single_step_bits(77, range(512, 768), True, 1000)
    assert (fires == 77).all()


@pytest.mark.parametrize("dither", [True, False])
def test_rounding_is_unbiased(dither):
    n, f = 200000, 77
    rate = _single_step_bits(f, [3], dither, n).mean()
    sigma = np.sqrt(f / 256 * (1 - f / 256) / n)
    assert abs(rate - f / 256) < 5 * sigma
    # the expected increment of a negative step is step_fx / 256 as well
    g = np.full(n, 1.0, np.float32)
    q = np.full((n + 1) // 2, 0x33, np.uint8)  # q = 3
    _sr4.step(q, g, None, (256 + f) / 256.0, 9, 1000, 0, 7, 2, dither, 1)
    mean_step = unpack(q, n).mean() - 3
    assert abs(mean_step + (256 + f) / 256) < 5 * sigma


def test_every_isa_and_thread_count_gives_the_same_q(isa, same_bits_everywhere):
    rng = np.random.default_rng(3)
    n = 70001  # two threads' worth, odd
    g = (rng.standard_normal(n) * 1e-2).astype(np.float32)
    q0 = rng.integers(0, 256, (n + 1) // 2, dtype=np.uint8)
    q0[-1] &= 15

    def run(threads):
        states = []
        for dither in (True, False):
            for size in (0, 1, 7, 8, 15, 16, 17, 33, n):
                q = q0[:(size + 1) // 2].copy()
                if size % 2:
                    q[-1] &= 15
                w = np.empty(size, np.float32)
                _sr4.step(q, g[:size], w, 3.7, 11, 300, 5, 7, 2, dither, threads)
                states += [q, w]
        return states
    same_bits_everywhere(run)


# -- the ternary product -----------------------------------------------------------------------
def ref_pairs_product(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The documented order (csrc/sr4.h): per output, +0 plus the pair sums t[2p] + t[2p+1] in
    ascending p, t = +x, -x or +0 by the weight, float32 throughout."""
    m, k = x.shape
    t = np.where(w[None] == 1, x[:, None], np.where(w[None] == -1, -x[:, None],
                                                   np.float32(0)))
    if k % 2:
        t = np.concatenate([t, np.zeros(t.shape[:2] + (1,), np.float32)], 2)
    with np.errstate(invalid="ignore", over="ignore"):
        pairs = t[..., 0::2] + t[..., 1::2]
        acc = np.zeros((m, w.shape[0]), np.float32)
        for p in range(pairs.shape[2]):
            acc = acc + pairs[..., p]
    return acc


def plan_of(q: np.ndarray, n: int, k: int, theta: int = 2) -> np.ndarray:
    codes = np.empty(_sr4.plan_size(n, k), np.uint8)
    _sr4.ternary_plan(q, n, k, theta, codes, 1)
    return codes


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bytes, NaNs of any payload counting as one."""
    a, b = np.where(np.isnan(a), np.nan, a), np.where(np.isnan(b), np.nan, b)
    return a.tobytes() == b.tobytes()


# Rows around the blocks of 16, 32 and 64 rows, columns around blocks of 16 pairs, odd sizes,
# odd output counts (outputs go two at a time on AVX-512).
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 0, 5), (0, 4, 2), (1, 2, 3), (17, 45, 5),
                                   (32, 64, 9), (33, 17, 4), (63, 31, 2), (64, 32, 17),
                                   (65, 33, 3), (130, 70, 33), (16, 300, 64)])
def test_ternary_matmul_is_the_pair_order_on_every_path(m, k, n, isa):
    rng = np.random.default_rng(m + k + n)
    # Magnitudes over many octaves so that the order of the additions shows in the bits.
    x = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-12, 12, (m, k))).astype(np.float32)
    q = np.zeros((n * k + 1) // 2, np.uint8)
    _sr4.init(q, n * k, 1, 0, 3)
    w = np.empty(n * k, np.float32)
    _sr4.materialize(q, w, 2, 1)
    w = w.reshape(n, k)
    expect = ref_pairs_product(x, w)
    np.testing.assert_allclose(expect, x.astype(np.float64) @ w.T.astype(np.float64),
                               rtol=1e-4, atol=1e-3)
    codes = plan_of(q, n, k)
    for threads in (1, 2, 3):
        out = np.full((m, n), np.nan, np.float32)
        _sr4.ternary_matmul(x, codes, n, out, threads)
        assert out.tobytes() == expect.tobytes(), (isa, threads)


def test_pair_order_differs_from_the_sequential_sum():
    """The reference above is not vacuous: on such data the k-sequential sum differs."""
    rng = np.random.default_rng(5)
    m, k, n = 64, 64, 16
    x = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-12, 12, (m, k))).astype(np.float32)
    w = rng.integers(-1, 2, (n, k)).astype(np.float32)
    seq = np.zeros((m, n), np.float32)
    for c in range(k):
        seq = seq + np.where(w[:, c] == 1, x[:, c:c + 1], np.where(w[:, c] == -1, -x[:, c:c + 1],
                                                                  np.float32(0)))
    assert seq.tobytes() != ref_pairs_product(x, w).tobytes()


def test_ternary_matmul_special_values(isa):
    rng = np.random.default_rng(2)
    m, k, n = 70, 67, 9
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45, 3e38, -3e38],
                        np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    x.reshape(-1)[rng.integers(0, m * k, 400)] = rng.choice(specials, 400)
    x[0] = -0.0  # a row of negative zeros: every sum is +0
    q = np.zeros((n * k + 1) // 2, np.uint8)
    _sr4.init(q, n * k, 3, 0, 3)
    w = np.empty(n * k, np.float32)
    _sr4.materialize(q, w, 2, 1)
    expect = ref_pairs_product(x, w.reshape(n, k))
    codes = plan_of(q, n, k)
    for threads in (1, 2):
        out = np.empty((m, n), np.float32)
        _sr4.ternary_matmul(x, codes, n, out, threads)
        assert same_bits(out, expect), (isa, threads)
    assert np.signbit(expect[0]).sum() == 0


def test_ternary_matmul_skips_zero_weights_for_inf():
    q = np.array([0x03], np.uint8)  # w = [+1, 0]
    out = np.empty((1, 1), np.float32)
    _sr4.ternary_matmul(np.array([[2.0, np.inf]], np.float32), plan_of(q, 1, 2), 1, out, 1)
    assert out[0, 0] == 2.0


@pytest.mark.parametrize("theta", [1, 2, 5])
def test_plan_matches_materialised_weights_on_every_path(theta, isa, same_bits_everywhere):
    rng = np.random.default_rng(theta)
    # Even k: one byte per pair (vector paths, 16 to 64 bytes at a time, tails); odd k: nibbles.
    for n, k in [(3, 7), (5, 32), (2, 33), (4, 100), (3, 162), (2, 258)]:
        q = rng.integers(0, 256, (n * k + 1) // 2).astype(np.uint8)
        if n * k % 2:
            q[-1] &= 15
        w = ternary(unpack(q, n * k), theta).reshape(n, k)
        x = rng.standard_normal((5, k)).astype(np.float32)
        codes = same_bits_everywhere(lambda _: [plan_of(q, n, k, theta)], threads=(1,))[0]
        out = np.empty((5, n), np.float32)
        _sr4.ternary_matmul(x, codes, n, out, 1)
        assert out.tobytes() == ref_pairs_product(x, w).tobytes(), (n, k, isa)


def test_ternary_plan_and_product_check_sizes():
    q = np.zeros(6, np.uint8)
    with pytest.raises(ValueError, match="ternary_plan"):
        _sr4.ternary_plan(q, 3, 4, 2, np.empty(5, np.uint8), 1)
    with pytest.raises(ValueError, match="ternary_matmul"):
        _sr4.ternary_matmul(np.zeros((2, 4), np.float32), plan_of(q, 3, 4), 4,
                            np.empty((2, 4), np.float32), 1)


def test_layer_plan_follows_q_changed_in_place():
    layer = nn.TernaryLinear(6, 2, bias=False)
    SR4(nn.ternary_weights(layer), seed=1)
    x = om.Tensor(np.ones((1, 6), np.float32))
    layer(x)
    layer.weight.packed[:] = 0x22  # every q = 2: every weight +1
    out = layer(x).detach().numpy()
    np.testing.assert_array_equal(out, layer.scale.detach().numpy()[None] * 6)
    assert (layer.weight.detach().numpy() == 1).all()


# -- TernaryLinear --------------------------------------------------------------------------------
def test_ternary_linear_forward_and_gradients_against_torch():
    torch = pytest.importorskip("torch")
    layer = nn.TernaryLinear(20, 7)
    opt = SR4(nn.ternary_weights(layer), seed=4)
    rng = np.random.default_rng(0)
    layer.scale._data[...] = rng.uniform(0.5, 2, 7).astype(np.float32)
    layer.bias._data[...] = rng.standard_normal(7).astype(np.float32)
    x = rng.standard_normal((2, 3, 20)).astype(np.float32)
    w = unpack(opt.state_tensors()["q.0"], 140).reshape(7, 20)
    w = ternary(w)
    xo = om.Tensor(x, requires_grad=True)
    y = layer(xo)
    (y * y).sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    st = torch.tensor(layer.scale.detach().numpy(), requires_grad=True)
    bt = torch.tensor(layer.bias.detach().numpy(), requires_grad=True)
    yt = (xt @ wt.T) * st + bt
    (yt * yt).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    for ours, theirs in ((xo.grad, xt.grad), (layer.weight.grad, wt.grad),
                         (layer.scale.grad, st.grad), (layer.bias.grad, bt.grad)):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)
    assert [n for n, _ in layer.named_parameters()] == ["scale", "bias"]


def test_ternary_linear_trains_and_state_is_four_bits():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    y = (x[:, :4].sum(1) > 0).astype(np.int64)
    model = nn.Sequential(nn.TernaryLinear(16, 32), nn.ReLU(), nn.TernaryLinear(32, 2))
    opt = SR4(nn.ternary_weights(model), target_step=0.05, seed=1)
    sgd = SGD(model.parameters(), lr=0.05)
    for _ in range(150):
        loss = F.cross_entropy(model(om.Tensor(x)), om.tensor(y))
        opt.zero_grad()
        sgd.zero_grad()
        loss.backward()
        opt.step()
        sgd.step()
    with om.no_grad():
        acc = (model(om.Tensor(x)).numpy().argmax(1) == y).mean()
    assert acc > 0.9
    q_bytes = sum(a.nbytes for k, a in opt.state_tensors().items() if k.startswith("q."))
    assert q_bytes * 8 / (16 * 32 + 32 * 2) == 4.0


# -- checkpoints and resume ------------------------------------------------------------------
RESUME = textwrap.dedent("""
    import sys, numpy as np
    import onemodel as om, onemodel.functional as F
    from onemodel import checkpoint, nn
    from onemodel.optim import SGD, SR4
    mode, path, k, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 12)).astype(np.float32)
    y = rng.integers(0, 3, 64)
    model = nn.Sequential(nn.TernaryLinear(12, 9), nn.ReLU(), nn.TernaryLinear(9, 3))
    opt = SR4(nn.ternary_weights(model), target_step=0.2, seed=2**63 + 9)
    sgd = SGD(model.parameters(), lr=0.05)
    start = 0
    if mode == "resume":
        start = checkpoint.load(path, model, opt)["step"]
    for step in range(start, total):
        if mode == "save" and step == k:
            checkpoint.save(path, model, opt, extra={"step": step})
        opt.lr = 0.2 * (1 - step / total)  # a schedule through lr
        loss = F.cross_entropy(model(om.Tensor(x[step % 4::4])), om.tensor(y[step % 4::4]))
        opt.zero_grad(); sgd.zero_grad(); loss.backward(); opt.step(); sgd.step()
    print(checkpoint.state_hash(model, opt))
""")


def test_resume_in_a_fresh_process_is_bit_exact(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(RESUME)
    path = str(tmp_path / "k.ckpt")
    # The child imports the same onemodel as this process (installed, or a development tree).
    package_root = os.path.dirname(os.path.dirname(om.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root] + sys.path))

    def run(mode: str) -> str:
        out = subprocess.run([sys.executable, str(script), mode, path, "37", "80"], env=env,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    straight = run("save")
    assert run("resume") == straight


def test_checkpoint_round_trip_and_fixed_settings():
    layer = nn.TernaryLinear(9, 5)
    opt = SR4(nn.ternary_weights(layer), seed=2**64 - 1, target_step=0.25)
    data = checkpoint.to_bytes(layer, opt)
    other = nn.TernaryLinear(9, 5)
    opt2 = SR4(nn.ternary_weights(other), seed=1)
    checkpoint.from_bytes(data, other, opt2)
    assert opt2.seed == 2**64 - 1 and opt2.target_step == opt.target_step
    assert (opt2.state_tensors()["q.0"] == opt.state_tensors()["q.0"]).all()
    x = om.Tensor(np.ones((2, 9), np.float32))
    assert (other(x).detach().numpy() == layer(x).detach().numpy()).all()
    with pytest.raises(checkpoint.Mismatch):
        checkpoint.from_bytes(data, other, SR4(nn.ternary_weights(other), theta=3))


# -- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [dict(q_clamp=8), dict(q_clamp=0), dict(theta=0),
                                    dict(theta=3, q_clamp=2), dict(seed=-1), dict(seed=2**64),
                                    dict(target_step=0.0), dict(target_step=float("nan")),
                                    dict(target_step=float("inf")), dict(seed=1.5)])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        SR4([leaf((3,))], **kwargs)


def test_bad_gradient_changes_nothing():
    a, b = leaf((4,)), leaf((5,))
    opt = SR4([a, b])
    before = [v.copy() for v in opt.state_tensors().values()]
    a.grad = om.Tensor(np.ones(4, np.float32))
    b.grad = om.Tensor(np.array([1, np.inf, 0, 0, 0], np.float32))
    with pytest.raises(ValueError, match="non-finite"):
        opt.step()
    b.grad = om.Tensor(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="shape"):
        opt.step()
    with pytest.raises(ValueError, match="target_step"):
        opt.step(target_step=float("inf"))
    assert opt.step_count == 0
    for v, w in zip(before, opt.state_tensors().values()):
        assert (v == w).all()
    with pytest.raises(ValueError, match="last dimension"):
        nn.TernaryLinear(4, 2)(om.Tensor(np.ones((1, 5), np.float32)))


def test_abs_mean_is_the_sequential_double_sum(isa):
    rng = np.random.default_rng(5)
    cases = [(rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(np.float32)
             for n in (1, 7, 8, 9, 15, 16, 17, 1000, 4097) for _ in range(8)]
    cases.append(rng.standard_normal(70001).astype(np.float32))  # several chunks
    # A mean exactly halfway between two float32 values: only the sequential sum decides.
    cases.append(np.array([1.0, 1.0 + 2.0 ** -23], np.float32))
    expect = [np.float32(np.cumsum(np.abs(g).astype(np.float64))[-1] / g.size) for g in cases]
    assert expect[-1] == 1.0
    for threads in (1, 2, 3):
        got = [np.float32(_sr4.abs_mean(g, threads)) for g in cases]
        assert got == expect, (isa, threads)
    assert np.isnan(_sr4.abs_mean(np.array([1.0, np.nan], np.float32)))
