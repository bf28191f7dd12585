"""Exact-mode transcendentals (onemodel._kernels._vmath): accuracy, bit identity, PyTorch.

The full accuracy sweep over all 2^32 inputs is tools/ulp_sweep.py; here a strided subset of it
(windows spread over every exponent and both signs) and the special values keep the bounds
honest in a few seconds.
"""
from __future__ import annotations

import hashlib
from fractions import Fraction

import numpy as np
import pytest

from onemodel._kernels import _vmath

OPS = _vmath.OPS
# Max error in ulp over all 2^32 inputs, from tools/ulp_sweep.py (also stated in vmath.h).
MAX_ULP = {"exp": 1.0, "log": 1.0, "tanh": 1.25, "sigmoid": 2.0, "erf": 2.0, "softplus": 2.0,
           "gelu": 2.0, "gelu_tanh": 2.0, "relu": 0.0, "sin": 0.501, "cos": 0.501,
           "expm1": 1.55, "log1p": 1.0}
SIZES = (0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 10_007)
THREADS = (1, 2, 3)


def forward(op, x, nthreads=1):
    out = np.empty_like(x)
    _vmath.unary(op, x, out, nthreads)
    return out


def backward(op, saved, g, nthreads=1):
    out = np.empty_like(g)
    _vmath.unary_backward(op, saved, g, out, nthreads)
    return out


def inputs(rng, n):
    """Values over the whole float32 range: every exponent, both signs, specials first."""
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32).copy()
    mixed = rng.standard_normal(n).astype(np.float32) * np.float32(4.0)
    x[n // 2:] = mixed[n // 2:]  # half in the range where the functions are not flat
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -3e-39,
                        1.1754944e-38, -1.1754944e-38, 3e38, -3e38, 88.72, 88.73, -103.9, -104.1,
                        89.0, -87.3, 20.0, -20.0, 15.9, -16.1, 9.0, -9.0, 0.625, -0.625,
                        0.9, -0.9, 0.7071, -0.7072, 0.5, 1.0, -1.0, 2.0, 1e-7, -1e-7,
                        1048576.0, -1048575.9, 5000.0],
                       np.float32)
    x[:min(n, special.size)] = special[:n]
    return x


@pytest.mark.parametrize("op", OPS)
def test_ulp_bound_on_strided_sweep(op):
    """Windows of 256 consecutive patterns every 2^24: both signs, every exponent."""
    worst, worst_bits = 0.0, 0
    for start in range(0, 2**32, 2**24):
        ulp, bits, mismatches = _vmath.ulp_sweep(op, start, start + 256, 2)
        assert mismatches == 0, f"{op}: selected path differs from scalar near {start:#x}"
        if ulp > worst:
            worst, worst_bits = ulp, bits
    assert worst <= MAX_ULP[op], f"{op}: {worst:.3f} ulp at {worst_bits:#010x}"


def test_gelu_negative_side_within_two_ulp(isa):
    """Below -1/sqrt(2) gelu is 0.5 x erfc(-x/sqrt(2)) itself, which a float32 erfc gets only to
    6.6 ulp (worst near -1.8365): dense windows there, and every 2^18 patterns from -0.71 down
    to the underflow of the result near -14, keep 2 ulp and the scalar bits on every path."""
    worst = int(np.float32(-1.8365).view(np.uint32))
    lo, hi = (int(np.float32(v).view(np.uint32)) for v in (-0.71, -14.0))
    starts = [worst - 4096, worst] + list(range(lo, hi, 1 << 18))
    for start in starts:
        ulp, bits, mismatches = _vmath.ulp_sweep("gelu", start, start + 4096, 1)
        assert mismatches == 0, f"gelu: {isa} differs from scalar near {start:#x}"
        assert ulp <= 2.0, f"gelu: {ulp:.3f} ulp at {bits:#010x}"


@pytest.mark.parametrize("op", OPS)
def test_special_values(op):
    x = inputs(np.random.default_rng(0), 40)
    y = forward(op, x)
    nan_in = np.isnan(x)
    assert np.isnan(y[nan_in]).all(), f"{op}: NaN in must give NaN out"
    ref = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
           "expm1": np.expm1, "log1p": np.log1p}.get(op)
    if ref is not None:
        with np.errstate(all="ignore"):
            expected = ref(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(np.isinf(y), np.isinf(expected))
        np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
        np.testing.assert_array_equal(y[np.isinf(y)], expected[np.isinf(expected)])


def test_limits():
    inf = np.float32(np.inf)
    x = np.array([inf, -inf, 0.0, -0.0, 1e-45, -1e-45], np.float32)
    np.testing.assert_array_equal(forward("exp", x)[:2], [inf, 0.0])
    assert forward("exp", np.array([-103.0], np.float32))[0] > 0  # gradual underflow
    assert forward("exp", np.array([88.73], np.float32))[0] == inf
    np.testing.assert_array_equal(forward("log", x)[:4], [inf, np.nan, -inf, -inf])
    tiny = np.array([1e-45], np.float32)  # the smallest denormal, 2^-149
    assert abs(forward("log", tiny)[0] - np.log(tiny.astype(np.float64))[0]) < 1e-5
    for op, at_inf, at_minus_inf in [("tanh", 1, -1), ("sigmoid", 1, 0), ("erf", 1, -1),
                                     ("softplus", inf, 0), ("gelu", inf, 0),
                                     ("gelu_tanh", inf, 0)]:
        y = forward(op, x)
        assert y[0] == at_inf and y[1] == at_minus_inf, (op, y[:2])
        if op in ("tanh", "erf", "gelu", "gelu_tanh"):  # the sign of zero is kept
            assert np.signbit(y[3]) and y[2] == 0 and not np.signbit(y[2]), op
    assert forward("sigmoid", np.array([-100.0], np.float32))[0] > 0  # denormal, not 0
    assert forward("gelu", np.array([-12.0], np.float32))[0] < 0


def test_tanh_interval_edges(isa):
    """tanh switches polynomial every quarter binade from 0.078125 to 10 (the bits of |x| index
    the table) and clamps at 9.5: windows around every switch, both signs, keep the bound and
    the scalar bits; tiny and denormal x give x exactly."""
    lo, hi = (int(np.float32(v).view(np.uint32)) for v in (0.078125, 12.0))
    edges = list(range(lo, hi, 1 << 21)) + [int(np.float32(9.5).view(np.uint32))]
    for edge in edges:
        for sign in (0, 1 << 31):
            ulp, bits, mismatches = _vmath.ulp_sweep("tanh", sign + edge - 64, sign + edge + 64, 1)
            assert mismatches == 0, f"tanh: {isa} differs from scalar near {edge:#x}"
            assert ulp <= MAX_ULP["tanh"], f"tanh: {ulp:.3f} ulp at {bits:#010x}"
    tiny = np.array([2.0**-13, -2.0**-13, 1e-30, -3e-39, 1e-45, -1e-45, 2.0**-20], np.float32)
    assert forward("tanh", tiny).tobytes() == tiny.tobytes()


def test_sin_cos_reductions_meet_at_their_switch(isa):
    """sin and cos reduce |x| < 2^20 in double (Cody-Waite) and larger |x| lane by lane (Payne-
    Hanek over the bits of 2/pi, whose window moves with the exponent): windows on both sides
    of the switch and at the start of every binade up to the largest float, both signs, keep
    the bound and the scalar bits on every path."""
    switch = int(np.float32(2.0**20).view(np.uint32))
    starts = [switch - 2048, 0x7f7fffff - 2047]
    starts += [int(np.float32(2.0**e).view(np.uint32)) - 1024 for e in range(21, 128)]
    for op in ("sin", "cos"):
        for start in starts:
            for sign in (0, 1 << 31):
                ulp, bits, mismatches = _vmath.ulp_sweep(op, sign + start, sign + start + 2048, 1)
                assert mismatches == 0, f"{op}: {isa} differs from scalar near {start:#x}"
                assert ulp <= MAX_ULP[op], f"{op}: {ulp:.4f} ulp at {bits:#010x}"


def test_sin_is_odd_and_cos_even_bit_for_bit():
    """Both reductions and both polynomials are symmetric in x, so sin(-x) = -sin(x) and
    cos(-x) = cos(x) exactly, zeros keep their sign in sin, and inf gives NaN."""
    x = inputs(np.random.default_rng(7), 20_000)
    x = x[np.isfinite(x)]
    assert forward("sin", -x).tobytes() == (-forward("sin", x)).tobytes()
    assert forward("cos", -x).tobytes() == forward("cos", x).tobytes()
    zeros = np.array([0.0, -0.0, 1e-45, -1e-45, 2.0**-13], np.float32)
    assert forward("sin", zeros).tobytes() == zeros.tobytes()
    assert (forward("cos", zeros) == 1).all()
    assert np.isnan(forward("sin", np.float32([np.inf, -np.inf]))).all()


def test_exp_is_zero_exactly_where_it_rounds_to_zero(isa, same_bits_everywhere):
    """exp computes the lanes at or below -103.972084 (whose exp rounds to +0) apart, without
    the underflowing products: every float32 in [-110, -100], alone and beside ordinary and
    NaN lanes, gives +0 there and the gradual underflow above, the same bits on every path."""
    edge = np.float32(-103.972084)
    bits = np.arange(np.float32(-100.0).view(np.uint32), np.float32(-110.0).view(np.uint32) + 1,
                     dtype=np.uint32)
    x = bits.view(np.float32)
    mixed = np.stack([x, np.full_like(x, 1.5), np.full_like(x, np.nan)], 1).ravel()
    y, y_mixed = same_bits_everywhere(lambda _: [forward("exp", x), forward("exp", mixed)],
                                      threads=(1,))
    assert y_mixed[0::3].tobytes() == y.tobytes()
    assert (y_mixed[1::3] == np.exp(np.float32(1.5))).all() and np.isnan(y_mixed[2::3]).all()
    zero = x <= edge
    assert (y[zero].view(np.uint32) == 0).all()  # +0
    assert (y[~zero] > 0).all() and y[x == np.nextafter(edge, np.float32(0))][0] == 1e-45


def test_every_path_matches_scalar_bit_for_bit(isa, same_bits_everywhere):
    rng = np.random.default_rng(1)
    base = inputs(rng, 10_008)
    grad = rng.standard_normal(base.size).astype(np.float32)

    def run(op):
        results = []
        for n in SIZES:
            for offset in (0, 1):  # offset 1: misaligned start
                x = base[offset:offset + n]
                y = forward(op, x)
                s = y if _vmath.saves_output(op) else x
                results += [y, backward(op, s, grad[offset:offset + n])]
        return results
    for op in OPS:
        same_bits_everywhere(lambda _: run(op), threads=(1,))


def test_one_special_lane_among_ordinary_values(isa, same_bits_everywhere):
    """Vector code skips the special-value selects when no lane needs them: every special value
    at every lane position of an otherwise ordinary vector must still get the scalar bits."""
    special = inputs(np.random.default_rng(5), 40)
    lanes = 16
    x = np.full((special.size * lanes, lanes), 1.5, np.float32)
    x[np.arange(x.shape[0]), np.arange(x.shape[0]) % lanes] = np.repeat(special, lanes)
    x = x.ravel()
    for op in OPS:
        same_bits_everywhere(lambda _: [forward(op, x)], threads=(1,))


def round_to_float32(q):
    """The float32 nearest the rational q, ties to even (no double rounding through float64)."""
    y = np.float32(float(q))
    candidates = [y, np.nextafter(y, np.float32(-np.inf)), np.nextafter(y, np.float32(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - q),
                                          int(np.array(c).view(np.uint32)) & 1))


def fused(a, b, c):
    return round_to_float32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def separate(a, b, c):
    return a * b + c


# vmath.h's OM_LOG_P7..P0, OM_LOG_LN2_HI and OM_LOG_LN2_LO
LOG_POLY = np.array([-0.07636439, 0.12762217, -0.1315961, 0.1420158, -0.16623409, 0.20001242,
                     -0.2500082, 0.3333333], np.float32)
LN2_HI, LN2_LO = np.float32(6.9313812256e-01), np.float32(9.0580006145e-06)


def log_model(x, fma):
    """om_log_core of vmath.h on a positive normal float32, with fma as its multiply-add."""
    ix = (int(np.array(x).view(np.uint32)) - 0x3f3504f3) % 2**32
    k = ((ix + 0x3f800000) % 2**32 >> 23) - 127
    f = np.array((ix & 0x7fffff) + 0x3f3504f3, np.uint32).view(np.float32)[()] - np.float32(1)
    dk = np.float32(k)
    p = LOG_POLY[0]
    for c in LOG_POLY[1:]:
        p = fma(p, f, c)
    y = fma(f * f, fma(f, p, np.float32(-0.5)), dk * LN2_LO)
    return fma(dk, LN2_HI, y + f)


@pytest.fixture(scope="module")
def log_cases():
    """Inputs near 1 and over every exponent, and the exact model's fused results."""
    rng = np.random.default_rng(6)
    near_one = (1 + rng.uniform(-0.3, 0.42, 1500)).astype(np.float32)
    anywhere = (rng.integers(0x00800000, 0x7f800000, 1500, dtype=np.uint64)
                .astype(np.uint32).view(np.float32))
    x = np.concatenate([near_one, anywhere])
    with np.errstate(over="ignore"):
        expected = np.array([log_model(v, fused) for v in x], np.float32)
        unfused = np.array([log_model(v, separate) for v in x], np.float32)
    assert (expected != unfused).sum() >= 5  # the test below tells the two apart
    return x, expected


def test_log_fuses_its_multiply_adds_on_every_path(isa, log_cases):
    """log's polynomial and tail are fused multiply-adds, each rounded once (fmaf, or the
    path's FMA instruction, or fmaf per lane on SSE2): every path gives the bits of an exact
    rational model of the scalar reference, including on inputs where separate products and
    sums would give other bits."""
    x, expected = log_cases
    np.testing.assert_array_equal(forward("log", x).view(np.uint32), expected.view(np.uint32))


def test_gelu_gathering_keeps_the_bits_of_the_full_function(isa):
    """gelu's kernels compute the erfc only for the elements that need it (gathered per block,
    the others by the small-argument form alone): forward and backward over every 997th float
    pattern (NaN, infinities, subnormals), those within +-40 again, and 100,000 normal samples
    give the digest the straight loop over the full functions gave before (pinned), on every
    path, in one call each (blocks of every mix)."""
    bits = np.arange(0, 2**32, 997, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = np.concatenate([x, x[np.abs(x) < 40],
                        np.random.default_rng(0).standard_normal(100_000).astype(np.float32)])
    g = np.random.default_rng(1).standard_normal(x.size).astype(np.float32)
    y, d = np.empty_like(x), np.empty_like(x)
    _vmath.unary("gelu", x, y, 1)
    _vmath.unary_backward("gelu", x, g, d, 2)
    digest = hashlib.sha256(y.tobytes() + d.tobytes()).hexdigest()[:16]
    assert digest == "cc7f2d1a49937400"


@pytest.mark.parametrize("op", OPS)
def test_thread_counts_and_in_place_give_same_bits(op):
    x = inputs(np.random.default_rng(2), 3 * 32_770)  # enough for 3 threads
    g = np.random.default_rng(3).standard_normal(x.size).astype(np.float32)
    ref = forward(op, x, 1)
    s = ref if _vmath.saves_output(op) else x
    gref = backward(op, s, g, 1)
    for n in THREADS[1:]:
        assert forward(op, x, n).tobytes() == ref.tobytes()
        assert backward(op, s, g, n).tobytes() == gref.tobytes()
    inplace = x.reshape(-1, 3).copy()
    _vmath.unary(op, inplace, inplace, 2)
    assert inplace.tobytes() == ref.tobytes()
    g2 = g.copy()
    _vmath.unary_backward(op, s, g2, g2, 2)
    assert g2.tobytes() == gref.tobytes()


def torch_fns(torch):
    F = torch.nn.functional
    return {"exp": torch.exp, "log": torch.log, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
            "erf": torch.erf, "softplus": F.softplus, "gelu": F.gelu,
            "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "relu": torch.relu,
            "sin": torch.sin, "cos": torch.cos, "expm1": torch.expm1, "log1p": torch.log1p}


def scaled_error(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1.0)))


@pytest.mark.parametrize("op", OPS)
def test_forward_and_backward_match_pytorch(op):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(20_000) * 6).astype(np.float32)
    x[:9] = [0.0, -0.0, 1e-40, -1e-40, 30.0, -30.0, 80.0, -80.0, 5.0]
    if op == "log":
        x = np.abs(x) + np.float32(1e-30)
    if op == "log1p":
        x = np.abs(x) - np.float32(0.999)
    g = rng.standard_normal(x.size).astype(np.float32)
    t = torch.from_numpy(x.copy()).requires_grad_(True)
    ty = torch_fns(torch)[op](t)
    ty.backward(torch.from_numpy(g))
    y = forward(op, x, 2)
    assert scaled_error(y, ty.detach().numpy()) <= 1e-5
    saved = y if _vmath.saves_output(op) else x
    assert scaled_error(backward(op, saved, g, 2), t.grad.numpy()) <= 1e-5


def test_backward_against_float64_derivatives():
    x = np.linspace(-6, 6, 1001).astype(np.float32)
    g = np.ones_like(x)
    x64 = x.astype(np.float64)
    sig = 1 / (1 + np.exp(-x64))
    import math
    erf64 = np.vectorize(math.erf)
    cdf = 0.5 * (1 + erf64(x64 / np.sqrt(2)))
    expected = {"softplus": sig, "erf": 2 / np.sqrt(np.pi) * np.exp(-x64 ** 2),
                "gelu": cdf + x64 * np.exp(-x64 ** 2 / 2) / np.sqrt(2 * np.pi),
                "sin": np.cos(x64), "cos": -np.sin(x64)}
    for op, d in expected.items():
        assert scaled_error(backward(op, x, g), d) <= 1e-6, op
    y = forward("tanh", x)
    assert scaled_error(backward("tanh", y, g), 1 - np.tanh(x64) ** 2) <= 1e-6
    assert scaled_error(backward("expm1", forward("expm1", x), g), np.exp(x64)) <= 1e-6
    above = x[x > -0.9]
    assert scaled_error(backward("log1p", above, g[:above.size]),
                        1 / (1 + above.astype(np.float64))) <= 1e-6


def test_validation_names_the_op():
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="unknown op"):
        _vmath.unary("tan", x, x, 1)
    with pytest.raises(TypeError, match="tanh: x must be float32"):
        _vmath.unary("tanh", np.ones(4), x, 1)
    with pytest.raises(TypeError, match="exp: out must be a numpy.ndarray"):
        _vmath.unary("exp", x, [0.0] * 4, 1)
    with pytest.raises(ValueError, match=r"gelu: x of shape \(4,\) and out of shape \(5,\)"):
        _vmath.unary("gelu", x, np.ones(5, np.float32), 1)
    with pytest.raises(ValueError, match="log: x of shape .* C-contiguous"):
        _vmath.unary("log", np.ones(8, np.float32)[::2], x, 1)
    with pytest.raises(ValueError, match="sigmoid: nthreads"):
        _vmath.unary("sigmoid", x, x, 0)
    with pytest.raises(ValueError, match="softplus_backward: saved"):
        _vmath.unary_backward("softplus", x, x, np.ones(3, np.float32), 1)
    with pytest.raises(ValueError, match="ulp_sweep"):
        _vmath.ulp_sweep("exp", 5, 2**33, 1)
