"""bfloat16 products follow the AVX512_BF16 dot-product instruction on every path.

VDPBF16PS adds each pair's two products in order, each rounded once, reads bf16 subnormals as
zero and replaces a sum that is tiny after rounding (below FLT_MIN when rounded to 24 bits with an
unbounded exponent) by a zero of its sign (csrc/gemm.c).
The other paths emulate that rule, so exact mode has one answer on every machine: checked
against an exact rational reference, on hand-worked cases, across every path and thread
count, and against the instruction itself where the CPU has it.
"""
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import _config, _kernels
from onemodel._kernels import _gemm

ISAS = _kernels.available_isas()
FLT_MIN = Fraction(2) ** -126
HAS_DOT = "avx512" in ISAS and _gemm.bf16_dot_available()


def bf16(x):
    """float32 values rounded to bfloat16 (nearest even), as float32."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)


def product(a, b, trans_a=False, trans_b=False, threads=1):
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    out = np.empty((m, n), np.float32)
    _gemm.gemm(np.ascontiguousarray(a), np.ascontiguousarray(b), out, trans_a, trans_b, threads,
               half=1)
    return out


def round_f32(x: Fraction, unbounded: bool = False) -> float:
    """A rational rounded to float32, nearest even, with overflow and gradual underflow (or, if
    unbounded, to 24 bits whatever the exponent)."""
    if x == 0:
        return 0.0
    sign, a = (1 if x > 0 else -1), abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e = e - 1 if Fraction(2) ** e > a else e
    e = e + 1 if Fraction(2) ** (e + 1) <= a else e
    ulp = Fraction(2) ** ((e if unbounded else max(e, -126)) - 23)
    q, rest = divmod(a, ulp)
    q += rest > ulp / 2 or (rest == ulp / 2 and q % 2 == 1)
    r = q * ulp
    return sign * (float("inf") if r >= Fraction(2) ** 128 else float(r))


def dot_rule(a, b):
    """The instruction's lane by exact rationals: (m, k) @ (k, n) of bf16-valued float32, an odd
    depth padded with a zero, each step's exact sum rounded once, or flushed to a zero of its
    sign when tiny after rounding."""
    k = a.shape[1]
    if k % 2:
        a, b = np.hstack([a, np.zeros((a.shape[0], 1), np.float32)]), np.vstack(
            [b, np.zeros((1, b.shape[1]), np.float32)])
    def daz(v):
        return 0.0 if 0 < abs(v) < 2.0 ** -126 else float(v)
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            t = 0.0
            for kk in range(a.shape[1]):
                p = Fraction(daz(a[i, kk])) * Fraction(daz(b[kk, j]))
                exact = Fraction(t) + p
                if exact != 0 and abs(round_f32(exact, unbounded=True)) < FLT_MIN:
                    t = 0.0 if exact > 0 else -0.0
                elif exact == 0:  # IEEE: -0 only when both addends are -0
                    neg_p = np.signbit(daz(a[i, kk])) != np.signbit(daz(b[kk, j]))
                    t = -0.0 if (np.signbit(t) and (p != 0 or neg_p)) else 0.0
                else:
                    t = round_f32(exact)
            out[i, j] = t
    return out


def adversarial(rng, m, k, n, kind):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    if kind == "tiny":      # products and sums near FLT_MIN: the rule's flushes
        a *= (2.0 ** rng.integers(-75, -50, a.shape)).astype(np.float32)
        b *= (2.0 ** rng.integers(-75, -50, b.shape)).astype(np.float32)
    elif kind == "wide":    # exponents over the whole range, cancellation included
        a *= (2.0 ** rng.integers(-100, 60, a.shape)).astype(np.float32)
        b *= (2.0 ** rng.integers(-100, 60, b.shape)).astype(np.float32)
        a[:, ::3] = -a[:, ::3]
    elif kind == "subnormal":  # bf16 subnormal inputs
        a[rng.random(a.shape) < 0.3] = np.float32(2.0 ** -130)
        b[rng.random(b.shape) < 0.3] = np.float32(-(2.0 ** -129))
    return bf16(a), bf16(b)


@pytest.mark.parametrize("kind", ["normal", "tiny", "wide", "subnormal"])
def test_products_follow_the_rule_exactly(kind, isa):
    rng = np.random.default_rng(["normal", "tiny", "wide", "subnormal"].index(kind))
    for m, k, n in [(3, 7, 5), (9, 12, 33), (2, 1, 3), (8, 6, 32)]:
        a, b = adversarial(rng, m, k, n, kind)
        got, want = product(a, b), dot_rule(a, b)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (isa, kind, m, k, n)


def test_hand_worked_cases(isa):
    def two(e):
        return np.float32(2.0 ** e)
    cases = [
        # A product below FLT_MIN (2^-140) is a zero, not a subnormal.
        ([[two(-70)]], [[two(-70)]], 0.0),
        # 2^-126 - 0.75 * 2^-150 rounds to FLT_MIN in float32, but to 2^-126 - 2^-150 with an
        # unbounded exponent: tiny, flushed.
        ([[two(-63), two(-75)]], [[two(-63)], [-two(-76) * np.float32(1.5)]], 0.0),
        # 2^-126 - 0.25 * 2^-150 rounds to FLT_MIN either way: kept.
        ([[two(-63), two(-75)]], [[two(-63)], [-two(-77)]], 2.0 ** -126),
        # A bf16 subnormal operand counts as zero: 2^-130 * 2^10 gives 0, not 2^-120.
        ([[two(-130)]], [[two(10)]], 0.0),
        # Cancelling to a tiny negative value gives -0.
        ([[two(-63), two(-63)]], [[-two(-63) * np.float32(1.5)], [two(-63)]], -0.0),
        # Operands just below 2^-56 beside ones at 2^-56: the exponent sum is one short of the
        # fma chain's bound, and 128 * 130 - 129 * 129 units of 2^-127 cancel to -2^-127 (the
        # widening paths' check for values below 2^-56 must catch the lowest octave).
        ([[two(-57), two(-57) * np.float32(129 / 128)]],
         [[two(-56) * np.float32(130 / 128)], [-two(-56) * np.float32(129 / 128)]], -0.0),
    ]
    for a, b, want in cases:
        got = product(np.array(a, np.float32), np.array(b, np.float32))[0, 0]
        assert got == want and np.signbit(got) == np.signbit(want), (isa, a, b, got)



def test_a_partial_sum_carried_into_the_next_k_block(isa):
    """The first K block (256 deep) leaves 2^-112 + 2^-130, a partial sum that is no multiple
    of 2^-126 (its tile needs the rule in C: 2^-65 * 2^-65 is too small); the second block's
    product, -2^-112, is large enough for the fma chain on its own, but the sum it makes,
    2^-130, is tiny: the rule flushes it to +0, where a plain fma chain keeps 2^-130. Only the
    look at the carried sum tells the two apart."""
    a, b = np.zeros((1, 257), np.float32), np.zeros((257, 1), np.float32)
    a[0, 0] = b[0, 0] = 2.0 ** -56
    a[0, 1] = b[1, 0] = 2.0 ** -65
    a[0, 256], b[256, 0] = 2.0 ** -56, -(2.0 ** -56)
    got = product(a, b)[0, 0]
    assert got == 0.0 and not np.signbit(got), got
    assert dot_rule(a, b)[0, 0] == 0.0
    plain = np.float32(0.0)
    for k in range(257):   # the chain without the rule keeps the subnormal
        plain = np.float32(plain + a[0, k] * b[k, 0])
    assert plain == np.float32(2.0 ** -130)

@pytest.fixture(params=[True, False] if HAS_DOT else [False],
                ids=lambda on: "dot" if on else "widening")
def bf16_dot(request):
    """With and without the dot-product kernel, where the CPU has it."""
    before = _gemm.bf16_dot()
    _gemm.bf16_dot(request.param)
    yield request.param
    _gemm.bf16_dot(before)


@pytest.mark.parametrize("kind", ["normal", "tiny", "wide", "subnormal"])
def test_every_path_and_thread_count_agree(kind, isa, bf16_dot, same_bits_everywhere):
    rng = np.random.default_rng(10 + ["normal", "tiny", "wide", "subnormal"].index(kind))
    # Edge tiles, odd depths, several K blocks (256 deep), transposed operands, and sizes
    # large enough for the threads to split one product.
    shapes = [(1, 1, 1), (7, 3, 31), (8, 257, 32), (17, 513, 45), (64, 300, 200), (130, 64, 9)]
    cases = []
    for i, (m, k, n) in enumerate(shapes):
        a, b = adversarial(rng, m, k, n, kind)
        cases.append((a if i % 2 == 0 else np.ascontiguousarray(a.T), i % 2 == 1,
                      b if i % 3 == 0 else np.ascontiguousarray(b.T), i % 3 != 0))
    same_bits_everywhere(lambda t: [product(a, b, ta, tb, t) for a, ta, b, tb in cases])


@pytest.mark.parametrize("kind", ["tiny", "subnormal"])
@pytest.mark.parametrize("transposed", [False, True])
def test_saved_operands_read_the_same_as_rounded_ones(kind, transposed, isa):
    """The saved bits read as an operand give the product of the values they were saved from:
    tiny and subnormal values in runs along the depth, and (transposed) in runs across it,
    tile-high runs included."""
    rng = np.random.default_rng(3)
    a, b = adversarial(rng, 20, 38, 36, kind)   # depth 32 + 6: a short run of 6
    if transposed:
        a, b = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
    save_a, save_b = np.empty(a.shape, np.uint16), np.empty(b.shape, np.uint16)
    out = np.empty((20, 36), np.float32)
    _gemm.gemm(a, b, out, transposed, transposed, 1, half=1, save_a=save_a, save_b=save_b)
    again = np.empty_like(out)
    _gemm.gemm(save_a, save_b, again, transposed, transposed, 1, half=1)
    assert np.array_equal(out.view(np.uint32), again.view(np.uint32))



def _values_to_pack():
    """float32 values for packing: every exponent with random mantissas, the subnormals (a
    vector of them leaves the instruction's rounding, which reads them as zero), those that
    round up to FLT_MIN, to a carry into the exponent, to inf, ties, NaNs and signed zeros."""
    rng = np.random.default_rng(7)
    exponents = np.repeat(np.arange(256, dtype=np.uint32), 24) << 23
    mantissas = rng.integers(0, 1 << 23, exponents.size, dtype=np.uint32)
    mantissas[::6] |= 0x7F8000   # carries into the exponent
    mantissas[1::6] = 0x8000 | (mantissas[1::6] & ~np.uint32(0xFFFF))
    signs = rng.integers(0, 2, exponents.size, dtype=np.uint32) << 31
    edges = np.array([0x007F8000, 0x007FFFFF, 0x007F7FFF, 0x00000001, 0x80000001, 0x7F7FFFFF,
                      0x7F7F8000, 0x0, 0x80000000, 0x7F800000, 0x7FC00001, 0xFF800001],
                     np.uint32)
    return np.concatenate([edges, signs | exponents | mantissas]).view(np.float32)


def _product_by_identity(layout, x, saved=None):
    """op(A) = x or op(B) = x^T in the given layout, times the identity: the product (m, k) as
    x is laid out. x holds float32 values or bf16 bits (uint16); saved (m, k), if given,
    receives the bits packed from float32 values."""
    m, k = x.shape
    eye = np.eye(k, dtype=np.float32)
    save = saved.T.copy() if saved is not None and layout in ("A columns", "B rows") else saved
    if layout == "A rows":
        out = np.empty((m, k), np.float32)
        _gemm.gemm(x, eye, out, False, False, 1, half=1, save_a=save)
    elif layout == "A columns":
        out = np.empty((m, k), np.float32)
        _gemm.gemm(np.ascontiguousarray(x.T), eye, out, True, False, 1, half=1, save_a=save)
    elif layout == "B rows":
        out = np.empty((k, m), np.float32)
        _gemm.gemm(eye, np.ascontiguousarray(x.T), out, False, False, 1, half=1, save_b=save)
        out = out.T
    else:
        out = np.empty((k, m), np.float32)
        _gemm.gemm(eye, x, out, False, True, 1, half=1, save_b=save)
        out = out.T
    if save is not saved:
        saved[...] = save.T
    return out


@pytest.mark.filterwarnings("ignore:invalid value")
@pytest.mark.parametrize("odd", [True, False])
@pytest.mark.parametrize("layout", ["A rows", "A columns", "B rows", "B columns"])
def test_pair_packing_at_every_width(layout, odd, isa, bf16_dot):
    """Packing writes each operand's bf16 words from runs along the depth or from rows across
    it, 16, 8 and fewer values at a time: every value's saved bits are its rounding, and a
    product with the identity gives every packed value back (subnormals read as zero), from
    the float32 values and again from the saved bits as the operand. The last few values of a
    run or row: an odd number of them (which AVX2 reads one by one from 2-byte bits), or 6."""
    values = _values_to_pack()
    m, k = 13, 37          # runs of 37 (16 + 16 + 5) and rows of 8 + 5 lanes (the A tile)
    if layout.startswith("B"):
        m, k = 45, 37      # rows of 32 + 13 lanes (the B tile)
    m, k = (m, k) if odd else (m + 1, k + 1)
    chunk = m * k
    for start in range(0, values.size, chunk):
        x = np.resize(values[start:start + chunk], (m, k))   # (m, k): op(A), or op(B)^T
        saved = np.empty((m, k), np.uint16)
        _product_by_identity(layout, x, saved)
        u = x.view(np.uint32).astype(np.uint64)
        want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(x)
        want[nan] = ((u[nan] | 0x400000) >> 16).astype(np.uint16)
        assert np.array_equal(saved, want), (isa, layout, start)
        # The product by the identity, with the values that are or round to inf or NaN made
        # ones (their zero products would spread along the row).
        packed = (want.astype(np.uint32) << 16).view(np.float32).copy()
        packed[(want & 0x7F80) == 0] = 0.0
        ones = ~np.isfinite(packed)
        packed[ones] = 1.0
        from_values = _product_by_identity(layout, np.where(ones, np.float32(1), x))
        from_bits = _product_by_identity(layout, np.where(ones, np.uint16(0x3F80), saved))
        for got, source in ((from_values, "float32"), (from_bits, "bf16 bits")):
            np.testing.assert_array_equal(got, packed + np.float32(0),
                                          err_msg=f"{isa} {layout} {start} from {source}")


@pytest.mark.parametrize("layout", ["A rows", "A columns", "B rows", "B columns"])
def test_a_lone_subnormal_reads_as_zero(layout, isa):
    """A subnormal among ones reads as zero wherever packing meets it (whole vectors, the
    short rest of a run or row, the values read one by one), from float32 values and from
    bf16 bits: it is the only value that tells the tile rule that the panel is tiny."""
    m, k = 14, 38          # the rests: 6 of a run, 6 of a row (A), 6 of the B tile's 40 + 6
    if layout.startswith("B"):
        m = 46
    spots = [(i, j) for i in (0, m - 1) for j in range(k)] + \
            [(i, j) for i in range(m) for j in (0, k - 1)]
    for bits in (0x0040, 0x8001):
        for i, j in spots:
            x = np.full((m, k), 0x3F80, np.uint16)
            x[i, j] = bits
            want = np.ones((m, k), np.float32)
            want[i, j] = 0.0
            for source in (x, (x.astype(np.uint32) << 16).view(np.float32)):
                got = _product_by_identity(layout, source)
                assert np.array_equal(got, want), (layout, hex(bits), i, j, source.dtype)


@pytest.mark.skipif(not HAS_DOT, reason="this CPU (or build) has no AVX512_BF16: the "
                    "dot-product kernel cannot run here; the widening paths are tested above")
def test_the_instruction_itself_on_random_bits():
    """Random bit patterns (NaN, inf, subnormal, huge) through the instruction and through the
    widening avx512 path: the same bits, NaNs aside (their payloads are not specified)."""
    rng = np.random.default_rng(4)
    def bits(shape):
        return rng.integers(0, 2 ** 16, shape, dtype=np.uint32).astype(np.uint16)
    a, b = bits((40, 301)), bits((301, 50))
    from conftest import isa_path
    results = []
    before = _gemm.bf16_dot()
    with isa_path("avx512"):
        for dot in (True, False):
            _gemm.bf16_dot(dot)
            out = np.empty((40, 50), np.float32)
            _gemm.gemm(a, b, out, False, False, 2, half=1)
            results.append(out)
    _gemm.bf16_dot(before)
    nan = np.isnan(results[0])
    assert np.array_equal(nan, np.isnan(results[1]))
    assert np.array_equal(results[0][~nan].view(np.uint32), results[1][~nan].view(np.uint32))


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f
                         if line.startswith("flags")), set())
    except OSError:
        return set()


@pytest.mark.skipif(not _cpu_flags(), reason="no /proc/cpuinfo to read the CPU's flags from")
def test_the_kernel_is_the_default_where_it_is_the_faster():
    """A fresh process uses the instruction where the CPU has AVX512_BF16, except on CPUs with
    AMX-BF16 (Sapphire Rapids), where VDPBF16PS was measured slower than widening."""
    flags = _cpu_flags()
    code = ("from onemodel._kernels import _gemm; "
            "print(_gemm.bf16_dot_available(), _gemm.bf16_dot())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    available = "avx512_bf16" in flags and "avx512" in ISAS
    assert out == [str(available), str(available and "amx_bf16" not in flags)]


def test_config_says_whether_the_instruction_runs():
    assert om.config()["bf16_dot"] == (_config.isa() == "avx512" and _gemm.bf16_dot())
    if not HAS_DOT:
        with pytest.raises(RuntimeError, match="AVX512_BF16"):
            _gemm.bf16_dot(True)


@pytest.mark.parametrize("scale", [1.0, 2.0 ** -64])
def test_recurrent_products_follow_the_rule(scale, isa, bf16_dot, same_bits_everywhere):
    """An LSTM's recurrent product under bf16 autocast (W_hh packed once per call) gives the
    unpacked product's bits, tiny sums flushed included: with x·W_ih = 0, bias 0 and c0 = 0, one
    step's gates are h0·W_hhᵀ itself, so the float32 layer run on that product as its input
    projection (and W_hh = 0) must give the same outputs."""
    from onemodel import amp
    from onemodel.functional import recurrent

    rng = np.random.default_rng(21)
    batch, hidden = 3, 12
    h0 = bf16(rng.normal(size=(batch, hidden)) * scale)
    w_hh = bf16(rng.normal(size=(4 * hidden, hidden)) * scale)
    zeros = [om.from_numpy(np.zeros(s, np.float32))
             for s in ((1, batch, 4 * hidden), (4 * hidden,), (batch, hidden))]

    def run(_):
        with amp.autocast("bf16"):
            y = recurrent.lstm_layer(zeros[0], om.from_numpy(w_hh), zeros[1],
                                     om.from_numpy(h0), zeros[2])[0]
        return [y.numpy()]

    (y,) = same_bits_everywhere(run)
    hw = product(h0, w_hh, trans_b=True)
    chain = (h0.astype(np.float64) @ w_hh.T.astype(np.float64)).astype(np.float32)
    # the tiny case flushes sums that a plain chain keeps as subnormals
    assert scale == 1.0 or np.count_nonzero(hw) < np.count_nonzero(chain)
    ref = recurrent.lstm_layer(om.from_numpy(hw[None]), om.from_numpy(np.zeros_like(w_hh)),
                               zeros[1], om.from_numpy(h0), zeros[2])[0]
    assert np.array_equal(y.view(np.uint32), ref.numpy().view(np.uint32))


def _conv_bf16(x, w, gy, **kwargs):
    """conv2d under bf16 autocast: the output and the gradients of x and w for upstream gy."""
    from onemodel import amp

    xs, ws = om.tensor(x, requires_grad=True), om.tensor(w, requires_grad=True)
    with amp.autocast("bf16"):
        y = F.conv2d(xs, ws, **kwargs)
    y.backward(om.from_numpy(gy))
    return [y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()]


def _taps(x, kh, kw, stride, padding, dilation):
    """For each row (c, i, j) of the column matrix and output position (oy, ox): the input pixel
    the tap reads, or None in the padding."""
    _, c, h, w = x.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    rows = []
    for ch in range(c):
        for i in range(kh):
            for j in range(kw):
                row = []
                for oy in range(oh):
                    for ox in range(ow):
                        y, xx = oy * sh - ph + i * dh, ox * sw - pw + j * dw
                        row.append((ch, y, xx) if 0 <= y < h and 0 <= xx < w else None)
                rows.append(row)
    return rows, (oh, ow)


def _conv_by_the_rule(x, w, gy, groups, **geometry):
    """One image's bf16 convolution by the rule: every product (forward W·col, weight
    gradient dY·colᵀ over the positions, column gradient Wᵀ·dY) by dot_rule, the column
    gradient then added into dx tap by tap in order (c, i, j), from +0, in float32."""
    k, cg, kh, kw = w.shape
    rows, (oh, ow) = _taps(x, kh, kw, **geometry)
    col = np.array([[0.0 if t is None else x[0][t] for t in row] for row in rows], np.float32)
    kg, rg = k // groups, cg * kh * kw
    g2 = gy[0].reshape(k, oh * ow)
    y, gw = np.empty((k, oh * ow), np.float32), np.empty((k, rg), np.float32)
    dx = np.zeros(x.shape[1:], np.float32)
    for g in range(groups):
        wg, colg, gyg = w[g * kg:(g + 1) * kg].reshape(kg, rg), col[g * rg:(g + 1) * rg], \
            g2[g * kg:(g + 1) * kg]
        y[g * kg:(g + 1) * kg] = dot_rule(wg, colg)
        gw[g * kg:(g + 1) * kg] = dot_rule(gyg, np.ascontiguousarray(colg.T))
        dcol = dot_rule(np.ascontiguousarray(wg.T), gyg)
        for r in range(rg):
            for p, t in enumerate(rows[g * rg + r]):
                if t is not None:
                    dx[t] = np.float32(dx[t] + dcol[r, p])
    return [y.reshape(1, k, oh, ow), dx[None], gw.reshape(w.shape)]


@pytest.mark.parametrize("kind", ["normal", "tiny", "wide", "subnormal"])
@pytest.mark.parametrize("shapes, kwargs", [
    (((1, 3, 5, 5), (4, 3, 3, 3)), dict(padding=1)),       # odd depths: 27 taps, 25 positions
    (((1, 4, 6, 5), (6, 2, 3, 2)), dict(stride=2, padding=(1, 0), dilation=(1, 2), groups=2)),
    (((1, 58, 3, 3), (2, 58, 3, 3)), dict(padding=1)),     # 522 taps: 2 blocks, cut at even depth
])
def test_convolutions_follow_the_rule_exactly(kind, shapes, kwargs, isa, bf16_dot):
    """A bf16 convolution's products follow the instruction's rule like any other product
    (an odd depth padded with a zero, tiny sums flushed), on every path, the dot kernel's
    included: forward, weight and input gradients against the exact reference."""
    rng = np.random.default_rng(30 + ["normal", "tiny", "wide", "subnormal"].index(kind))
    xs, ws = shapes
    x = adversarial(rng, int(np.prod(xs[:2])), int(np.prod(xs[2:])), 1, kind)[0].reshape(xs)
    w = adversarial(rng, ws[0], int(np.prod(ws[1:])), 1, kind)[0].reshape(ws)
    geometry = {name: kwargs.get(name, 0 if name == "padding" else 1)
                for name in ("stride", "padding", "dilation")}
    geometry = {name: v if isinstance(v, tuple) else (v, v) for name, v in geometry.items()}
    _, (oh, ow) = _taps(x, ws[2], ws[3], **geometry)
    gy = adversarial(rng, ws[0], oh * ow, 1, kind)[0].reshape(1, ws[0], oh, ow)
    got = _conv_bf16(x, w, gy, **kwargs)
    want = _conv_by_the_rule(x, w, gy, kwargs.get("groups", 1), **geometry)
    for name, g, r in zip(("y", "dx", "dw"), got, want):
        assert np.array_equal(g.view(np.uint32), r.view(np.uint32)), (isa, kind, name)


@pytest.mark.parametrize("kind", ["normal", "tiny"])
def test_convolutions_agree_on_every_path_and_thread_count(kind, isa, bf16_dot,
                                                         same_bits_everywhere):
    """Batches of images in several jobs and weight-gradient chunks, split across threads, a
    first layer (3 channels) and a strided one: the same bits everywhere, with or without the
    dot kernel."""
    rng = np.random.default_rng(40 + ["normal", "tiny"].index(kind))
    cases = [((8, 3, 12, 12), (16, 3, 3, 3), dict(padding=1)),
             ((8, 16, 9, 9), (24, 16, 3, 3), dict(padding=1)),
             ((9, 8, 9, 8), (12, 8, 3, 3), dict(stride=2, padding=1))]
    runs = []
    for xs, ws, kwargs in cases:
        x = adversarial(rng, int(np.prod(xs[:2])), int(np.prod(xs[2:])), 1, kind)[0]
        w = adversarial(rng, ws[0], int(np.prod(ws[1:])), 1, kind)[0]
        runs.append((x.reshape(xs), w.reshape(ws), kwargs))

    def run(_):
        out = []
        for x, w, kwargs in runs:
            shape = F.conv2d(om.from_numpy(x), om.from_numpy(w), **kwargs).shape
            gy = bf16(np.random.default_rng(7).standard_normal(shape).astype(np.float32)
                      * np.float32(2.0 ** -60 if kind == "tiny" else 1.0))
            out += _conv_bf16(x, w, gy, **kwargs)
        return out

    same_bits_everywhere(run)


def test_a_partial_sum_carried_into_the_next_image(isa, bf16_dot):
    """The weight gradient's chain runs on from one image to the next (two images per chunk
    at a batch of 16): image 0 leaves 2^-112 + 2^-130 (its tile needs the rule in C), image 1
    adds -2^-112, a product large enough for the fma chain on its own, making the tiny 2^-130,
    which the rule flushes to +0. Only a look at the sum carried in from image 0 sees it."""
    x, gy = np.zeros((16, 1, 1, 2), np.float32), np.zeros((16, 1, 1, 2), np.float32)
    x[0, 0, 0], gy[0, 0, 0] = [2.0 ** -56, 2.0 ** -65], [2.0 ** -56, 2.0 ** -65]
    x[1, 0, 0, 0], gy[1, 0, 0, 0] = 2.0 ** -56, -(2.0 ** -56)
    gw = _conv_bf16(x, np.ones((1, 1, 1, 1), np.float32), gy)[2]
    assert gw.item() == 0.0 and not np.signbit(gw.item()), gw.item()
