"""The float32 matrix product kernel (onemodel._kernels._gemm).

Contract: every output element is acc = +0.0; acc = fma(A[i,k], B[k,j], acc) for k in order,
one rounding per step, on every instruction-set path and thread count. The reference below
implements that chain independently: the fused multiply-add is emulated in float64 with
round-to-odd, which then rounds to float32 correctly (53 >= 24 + 2 bits).
"""
from fractions import Fraction

import numpy as np
import pytest

from onemodel import _config, _kernels
from onemodel._kernels import _gemm

ISAS = _kernels.available_isas()
# Around the micro-tiles (MR x NR: AVX-512 8 x 32, AVX2 6 x 16, SSE2 4 x 8, scalar 4 x 16) and
# the K block of 256.
SHAPES = [(1, 1, 1), (1, 5, 3), (13, 31, 7), (14, 32, 16), (15, 33, 17), (29, 65, 257),
          (6, 16, 1), (7, 17, 2), (40, 3, 5)]


def fma_f32(a, b, c):
    """Correctly rounded float32 fma(a, b, c), elementwise, via round-to-odd in float64."""
    a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b                                # exact: 24 + 24 bits fit in 53
        s = p + c
        bb = s - p
        err = (p - (s - bb)) + (c - bb)          # TwoSum: p + c == s + err exactly
        even = (s.view(np.int64) & 1) == 0
        fix = np.isfinite(s) & (err != 0) & even
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def reference(a, b):
    """op(A) (m, k) @ op(B) (k, n) as the exact fma chain over k."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = fma_f32(a[:, k, None], b[None, k, :], acc)
    return acc


def run(a, b, trans_a=False, trans_b=False, nthreads=1, batch=None):
    """Stores the operands in the layout the flags name and returns the kernel's result."""
    sa = np.ascontiguousarray(np.swapaxes(a, -1, -2) if trans_a else a)
    sb = np.ascontiguousarray(np.swapaxes(b, -1, -2) if trans_b else b)
    m, n = a.shape[-2], b.shape[-1]
    out = np.full((m, n) if batch is None else (batch, m, n), np.nan, np.float32)
    _gemm.gemm(sa, sb, out, trans_a, trans_b, nthreads)
    return out


@pytest.fixture
def isa():
    """Yields a function that selects a path; the original path is restored afterwards."""
    original = _config.isa()
    yield _kernels.select_isa
    _kernels.select_isa(original)


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_fma_emulation_against_exact_rationals():
    rng = np.random.default_rng(1)
    a, b, c = rand(rng, 300), rand(rng, 300), rand(rng, 300)
    # Products that nearly cancel c, where a float64 sum rounded twice would go wrong.
    c[:100] = (-(a[:100].astype(np.float64) * b[:100])).astype(np.float32)
    a[100:120] = 1 + 2.0 ** -12
    b[100:120] = 1 + 2.0 ** -12
    c[100:120] = np.float32(2.0 ** -60) * np.sign(rng.standard_normal(20)).astype(np.float32)
    got = fma_f32(a, b, c)
    for x, y, z, r in zip(a, b, c, got):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        lo = np.float32(float(exact))
        # Correct rounding: no float32 is closer to the exact value than the result.
        cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
        best = min(cands, key=lambda v: (abs(Fraction(float(v)) - exact),
                                         int(np.float32(v).view(np.int32)) & 1))
        assert r == best, (x, y, z, r, best)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_close_to_float64_all_layouts(trans_a, trans_b):
    rng = np.random.default_rng(2)
    for m, n, k in SHAPES + [(70, 100, 600)]:
        a, b = rand(rng, m, k), rand(rng, k, n)
        out = run(a, b, trans_a, trans_b, nthreads=2)
        ref = a.astype(np.float64) @ b
        np.testing.assert_allclose(out, ref, rtol=0, atol=4e-7 * k * np.sqrt(k) + 1e-6)


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True),
                                             (True, True)])
def test_exact_fma_chain_every_path(isa, trans_a, trans_b):
    rng = np.random.default_rng(3)
    for m, n, k in [(15, 33, 300), (3, 5, 1), (17, 18, 19)]:
        a, b = rand(rng, m, k), rand(rng, k, n)
        want = reference(a, b)
        for name in ISAS:
            isa(name)
            got = run(a, b, trans_a, trans_b, nthreads=2)
            assert np.array_equal(got.view(np.int32), want.view(np.int32)), (name, m, n, k)


def test_bit_identical_across_paths_and_threads(isa):
    rng = np.random.default_rng(4)
    # At 2 threads on the AVX-512 tile (8 x 32), (264, 700, 300) and (300, 170, 600) split
    # their rows when stored as given, and their columns when both are transposed: then the
    # threads share one packed A over two or three K blocks (264 rows: two row blocks of 256).
    cases = [(71, 97, 300, 1), (264, 700, 300, 1), (300, 170, 600, 1), (33, 65, 20, 3),
             (1, 200, 513, 2), (200, 1, 40, 1)]
    for m, n, k, batch in cases:
        a, b = rand(rng, batch, m, k), rand(rng, batch, k, n)
        a[0, 0, :3] = [0.0, -0.0, 1e-40]     # a denormal and signed zeros in the mix
        base = None
        for name in ISAS:
            isa(name)
            for threads in (1, 2, 3):
                for ta, tb in ((False, False), (True, True)):
                    got = run(a, b, ta, tb, threads, batch).view(np.int32)
                    if base is None:
                        base = got
                    assert np.array_equal(got, base), (name, threads, ta, tb, m, n, k)


def test_batched_with_broadcast():
    rng = np.random.default_rng(5)
    a, b = rand(rng, 4, 9, 30), rand(rng, 1, 30, 40)
    want = reference(a.reshape(36, 30), b[0]).reshape(4, 9, 40)
    for ta, tb in ((False, False), (True, False), (False, True), (True, True)):
        sa = np.ascontiguousarray(a.swapaxes(1, 2)) if ta else a
        sb = np.ascontiguousarray(b.swapaxes(1, 2)) if tb else b
        for b_arg in (sb, sb[0]):                   # batch of one, or 2-D
            out = np.empty((4, 9, 40), np.float32)
            _gemm.gemm(sa, b_arg, out, ta, tb, 2)
            assert np.array_equal(out.view(np.int32), want.view(np.int32)), (ta, tb)
    # Broadcast on the left: (4, 40, 9) = b^T (40, 30) @ a^T per batch.
    out = np.empty((4, 40, 9), np.float32)
    _gemm.gemm(b, a, out, True, True, 3)
    np.testing.assert_allclose(out, np.swapaxes(a.astype(np.float64) @ b, 1, 2), atol=1e-4)


def test_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    a, b = rand(rng, 3, 50, 200), rand(rng, 3, 200, 70)
    out = run(a, b, batch=3, nthreads=2)
    want = torch.matmul(torch.from_numpy(a).double(), torch.from_numpy(b).double()).numpy()
    np.testing.assert_allclose(out, want, atol=1e-4)
    np.testing.assert_allclose(out, torch.matmul(torch.from_numpy(a), torch.from_numpy(b)),
                               atol=1e-4)


def test_empty_dimensions():
    out = np.full((3, 4), np.nan, np.float32)
    _gemm.gemm(np.empty((3, 0), np.float32), np.empty((0, 4), np.float32), out, False, False, 2)
    assert np.array_equal(out.view(np.int32), np.zeros((3, 4), np.int32))   # +0.0, not -0.0
    for m, n in ((0, 4), (3, 0)):
        out = np.empty((m, n), np.float32)
        _gemm.gemm(np.ones((m, 5), np.float32), np.ones((5, n), np.float32), out, False, False, 1)


def test_special_values(isa):
    rng = np.random.default_rng(7)
    m, n, k = 15, 33, 40
    a, b = rand(rng, m, k), rand(rng, k, n)
    a[0, 3], a[1, 5], a[2, 7] = np.nan, np.inf, -np.inf
    b[9, 4], b[10, 6] = np.inf, 0.0                 # inf * 0 gives NaN where they meet
    a[3, 10] = 0.0
    a[4] = -0.0                                     # a row of -0 gives +0 (fma from +0)
    a[5] *= np.float32(1e-42)                       # denormal products
    a[6] *= np.float32(1e30)                        # overflow to inf
    a[7, :2] = [3e38, 3e38]
    b[:2, :] = 3e38
    want = reference(a, b)
    assert np.isnan(want).any() and np.isinf(want).any()
    for name in ISAS:
        isa(name)
        got = run(a, b, nthreads=2)
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        mask = ~np.isnan(want)
        assert np.array_equal(got[mask].view(np.int32), want[mask].view(np.int32)), name


def test_bad_arguments_raise_before_writing():
    f = np.float32
    cases = [
        ((3, 4), (5, 6), (3, 6), False, False, ValueError, "matmul: (3, 4) @ (5, 6): inner "
                                                          "dimensions 4 != 5"),
        ((4, 3), (5, 6), (3, 6), True, False, ValueError, "inner dimensions 4 != 5"),
        ((3, 4), (4, 6), (3, 5), False, False, ValueError, "out has shape (3, 5)"),
        ((2, 3, 4), (3, 4, 6), (2, 3, 6), False, False, ValueError, "batch of b is 3"),
        ((3, 4), (4, 6), (2, 3, 6), False, False, None, None),
    ]
    for sa, sb, so, ta, tb, exc, msg in cases:
        out = np.full(so, 7, f)
        if exc is None:
            _gemm.gemm(np.ones(sa, f), np.ones(sb, f), out, ta, tb, 1)
            assert (out == 4).all()
            continue
        with pytest.raises(exc) as info:
            _gemm.gemm(np.ones(sa, f), np.ones(sb, f), out, ta, tb, 1)
        assert msg in str(info.value) and str(info.value).startswith("matmul:")
        assert (out == 7).all()
    out = np.full((3, 6), 7, f)
    with pytest.raises(TypeError, match="float32"):
        _gemm.gemm(np.ones((3, 4)), np.ones((4, 6), f), out, False, False, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        _gemm.gemm(np.ones((4, 3), f).T, np.ones((4, 6), f), out, False, False, 1)
    with pytest.raises(ValueError, match="2-D or 3-D"):
        _gemm.gemm(np.ones(4, f), np.ones((4, 6), f), out, False, False, 1)
    with pytest.raises(ValueError, match="nthreads"):
        _gemm.gemm(np.ones((3, 4), f), np.ones((4, 6), f), out, False, False, 0)
    buf = np.full((6, 6), 7, f)
    with pytest.raises(ValueError, match="overlaps"):
        _gemm.gemm(buf[:3], np.ones((6, 6), f), buf[1:4], False, False, 1)
    assert (out == 7).all() and (buf == 7).all()


@pytest.mark.parametrize("batch", [None, 3])
def test_bias_is_one_rounded_add_after_the_product(isa, batch):
    """gemm(..., bias) equals the product followed by out += bias, bit for bit, on every path,
    also for k = 0 (out = bias) and for a batch."""
    rng = np.random.default_rng(5)
    for path in ISAS:
        isa(path)
        for m, n, k in [(5, 7, 9), (14, 33, 17), (3, 4, 0)]:
            a = rand(rng, *(((batch,) if batch else ()) + (m, k)))
            b = rand(rng, k, n)
            bias = rand(rng, n)
            expected = run(a, b, trans_b=True, batch=batch) + bias
            out = np.empty_like(expected)
            _gemm.gemm(a, np.ascontiguousarray(b.T), out, False, True, 2, bias)
            np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))
            if k == 0:
                np.testing.assert_array_equal(out, np.broadcast_to(bias, out.shape))


def test_bad_bias_raises_before_writing():
    f = np.float32
    a, b = np.ones((3, 4), f), np.ones((4, 6), f)
    out = np.full((3, 6), 7, f)
    for bias in (np.ones(5, f), np.ones((1, 6), f), np.ones(6), np.ones(12, f)[::2], [1.0] * 6):
        with pytest.raises(ValueError, match="bias must be a C-contiguous float32 vector of "
                                             "length 6"):
            _gemm.gemm(a, b, out, False, False, 1, bias)
        assert (out == 7).all()
    with pytest.raises(ValueError, match="overlaps"):
        _gemm.gemm(a, b, out, False, False, 1, out[0])


@pytest.mark.parametrize("half", [0, 1, 2])
def test_add_is_one_rounded_add_of_the_product_made_whole(isa, half):
    """gemm(..., add=True) leaves out + the product, bit for bit what adding the product made
    whole gives, on every path at 1-3 threads: aᵀ·b as a weight's gradient, depths 1 to KC,
    edge tiles, a 2-byte operand, tiny bfloat16 products (the dot rule's tiles), and special
    values in out (NaN, infinities, -0 plus +0)."""
    rng = np.random.default_rng(6)
    f32 = np.float32
    for path in ISAS:
        isa(path)
        for m, n, k in [(5, 7, 1), (14, 33, 17), (40, 70, _gemm.KC)]:
            a, b = rand(rng, k, m), rand(rng, k, n)
            a[0, :2] = [1e-38, 3e-39]
            old = rand(rng, m, n)
            old[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
            b[:, 3] = 0.0                     # a column of +0 products onto the -0
            operands = [b]
            if half:                          # b as its 2-byte bits too
                bits = np.empty(b.shape, np.uint16)
                _gemm.gemm(a, b, np.empty((m, n), f32), True, False, 1, None, half, None, bits)
                operands.append(bits)
            for operand in operands:
                made = np.empty((m, n), f32)
                _gemm.gemm(a, operand, made, True, False, 1, None, half)
                want = old + made
                for threads in (1, 2, 3):
                    out = old.copy()
                    _gemm.gemm(a, operand, out, True, False, threads, None, half, add=True)
                    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32),
                                                  err_msg=f"{path} {threads} {m, n, k}")


def test_add_refuses_a_bias_and_a_depth_outside_one_k_block_before_writing():
    f = np.float32
    for k, bias in ((0, None), (_gemm.KC + 1, None), (4, np.ones(6, f))):
        out = np.full((3, 6), 7, f)
        with pytest.raises(ValueError, match=f"adding into out needs no bias and a depth of 1 "
                                             f"to {_gemm.KC}, got {k}"):
            _gemm.gemm(np.ones((3, k), f), np.ones((k, 6), f), out, False, False, 1, bias,
                       add=True)
        assert (out == 7).all()
