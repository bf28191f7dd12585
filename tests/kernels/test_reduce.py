"""Sums along an axis, softmax / log_softmax, layer norm and index_add_rows (_kernels._reduce).

The sum is checked bit for bit against an independent numpy spelling of the project's order
(16 lanes, fixed tree, chunks of 65536 added in order; sequential over a non-innermost axis);
softmax and layer norm against PyTorch in float64; every kernel for the same bits on every ISA
path at 1, 2 and 3 threads.
"""
from __future__ import annotations

import numpy as np
import pytest

import onemodel  # noqa: F401  (selects the ISA path at import)
from onemodel._kernels import _reduce as R

torch = pytest.importorskip("torch")

LANES, CHUNK = 16, 65536
SIZES = (0, 1, 15, 16, 17, 1000)


def spread(rng, shape) -> np.ndarray:
    """Values over many magnitudes, so that a different association order changes the bits."""
    mag = np.exp2(rng.integers(-12, 12, size=shape)).astype(np.float32)
    return (rng.standard_normal(shape).astype(np.float32) * mag).astype(np.float32)


# ---- the order, written independently in float32 numpy ----

@np.errstate(all="ignore")
def lane_sum_ref(x: np.ndarray) -> np.float32:
    total = np.float32(0.0)
    for c in range(0, x.size, CHUNK):
        chunk = x[c:c + CHUNK]
        full = chunk.size // LANES * LANES
        lanes = np.zeros(LANES, np.float32)
        if full:
            blocks = np.vstack([lanes, chunk[:full].reshape(-1, LANES)])
            lanes = np.add.accumulate(blocks, axis=0, dtype=np.float32)[-1].copy()
        tail = chunk[full:]
        lanes[:tail.size] = lanes[:tail.size] + tail
        for half in (8, 4, 2):
            lanes[:half] = lanes[:half] + lanes[half:2 * half]
        total = np.float32(total + np.float32(lanes[0] + lanes[1]))
    return total


def column_sum_ref(x3: np.ndarray) -> np.ndarray:
    """(outer, n, inner) -> (outer, inner), each column added in increasing n from +0.0."""
    outer, n, inner = x3.shape
    start = np.zeros((outer, 1, inner), np.float32)
    return np.add.accumulate(np.concatenate([start, x3], axis=1), axis=1, dtype=np.float32)[:, -1]


# ---- sum ----

@pytest.mark.parametrize("n", SIZES + (CHUNK - 1, CHUNK + 17, 3 * CHUNK + 5))
def test_sum_vector_is_the_lane_order(n, isa, same_bits_everywhere):
    x = spread(np.random.default_rng(n), n)
    out = same_bits_everywhere(lambda t: [_sum(x, 1, n, 1, t)])[0]
    assert out.tobytes() == np.array([lane_sum_ref(x)], np.float32).tobytes()
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5,
                               atol=1e-5 * np.abs(x).sum())


def test_lane_order_is_not_sequential():
    # The reference itself must be sensitive to the order, or the bit test proves little.
    x = spread(np.random.default_rng(5), 1000)
    sequential = np.add.accumulate(x, dtype=np.float32)[-1]
    assert lane_sum_ref(x) != sequential


def _sum(x, outer, n, inner, t):
    out = np.empty(outer * inner, np.float32)
    R.sum_axis(x, out, outer, n, inner, t)
    return out


@pytest.mark.parametrize("outer,n,inner", [(7, 17, 1), (300, 200, 1), (3, 0, 1), (0, 5, 1),
                                           (2, 33, 5), (3, 100, 17), (2, 300, 600),
                                           (1, 1000, 257), (4, 0, 3)])
def test_sum_axis_shapes(outer, n, inner, isa, same_bits_everywhere):
    x = spread(np.random.default_rng(outer * 1000 + n + inner), (outer, n, inner))
    out = same_bits_everywhere(lambda t: [_sum(x, outer, n, inner, t)])[0]
    if inner == 1:
        expected = np.array([lane_sum_ref(r) for r in x.reshape(outer, n)], np.float32)
    else:
        expected = column_sum_ref(x).reshape(-1)
    assert out.tobytes() == expected.tobytes()


def test_sum_special_values(special_values, isa, same_bits_everywhere):
    x = special_values
    for values in (x, x[np.isfinite(x)], np.array([-0.0, -0.0], np.float32),
                   np.array([3e38, 3e38], np.float32), np.array([1e-45] * 40, np.float32)):
        out = same_bits_everywhere(lambda t: [_sum(values, 1, values.size, 1, t)])[0]
        assert out.tobytes() == np.array([lane_sum_ref(values)], np.float32).tobytes()
    assert np.isnan(_sum(x, 1, x.size, 1, 1)[0])
    assert _sum(np.array([3e38, 3e38], np.float32), 1, 2, 1, 1)[0] == np.inf
    tiny = np.float32(1e-45)  # the smallest denormal: 40 of them add exactly
    assert _sum(np.array([tiny] * 40, np.float32), 1, 40, 1, 1)[0] == tiny * np.float32(40)


# ---- softmax ----

def _softmax(x, outer, n, inner, log, t):
    y = np.empty_like(x)
    R.softmax(x, y, outer, n, inner, log, t)
    return y


def _softmax_bwd(y, g, outer, n, inner, log, t):
    dx = np.empty_like(y)
    R.softmax_backward(y, g, dx, outer, n, inner, log, t)
    return dx


def _torch_softmax(x, dim, log, g):
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    yt = (torch.log_softmax if log else torch.softmax)(xt, dim)
    yt.backward(torch.from_numpy(g.astype(np.float64)))
    return yt.detach().numpy(), xt.grad.numpy()


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", [((5, n), 1) for n in SIZES]
                         + [((2, 3, 70000), 2), ((4, 17, 3), 1), ((40, 9), 0),
                            ((3, 20, 300), 1), ((1, 0, 4), 1)])
def test_softmax_against_torch(shape, dim, log, assert_close):
    rng = np.random.default_rng(sum(shape) + dim)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    outer = int(np.prod(shape[:dim]))
    n, inner = shape[dim], int(np.prod(shape[dim + 1:]))
    y = _softmax(x, outer, n, inner, log, 1)
    ref_y, ref_dx = _torch_softmax(x, dim, log, g)
    assert_close(y, ref_y, 1e-4, "y")
    dx = _softmax_bwd(y, g, outer, n, inner, log, 1)
    assert_close(dx, ref_dx, 1e-4, "dx")


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("outer,n,inner", [(600, 100, 1), (64, 17, 1), (3, 1000, 1),
                                           (1, 70000, 1), (5, 40, 300), (6, 33, 7)])
def test_softmax_same_bits_everywhere(outer, n, inner, log, isa, same_bits_everywhere):
    rng = np.random.default_rng(outer + n + inner)
    x = (rng.standard_normal((outer, n, inner)) * 5).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)

    def run(t):
        y = _softmax(x, outer, n, inner, log, t)
        return y, _softmax_bwd(y, g, outer, n, inner, log, t)
    same_bits_everywhere(run)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("inner", [1, 3])
def test_softmax_special_values(log, inner, special_values, isa, same_bits_everywhere):
    n = 20
    rows = [np.full(n, -np.inf), np.r_[np.full(n - 1, -np.inf), 2.0], np.r_[np.nan, np.ones(n - 1)],
            np.r_[np.inf, np.ones(n - 1)], np.r_[-np.inf, np.zeros(n - 1)], np.full(n, 88.0),
            np.r_[-0.0, np.zeros(n - 1)], np.r_[1e-40, -1e-40, 3e38, np.zeros(n - 3)],
            special_values[:n]]
    x2 = np.array(rows, np.float32)
    x = np.repeat(x2[:, :, None], inner, axis=2).copy() if inner > 1 else x2
    y = same_bits_everywhere(lambda t: [_softmax(x, len(rows), n, inner, log, t)])[0]
    ref = (torch.log_softmax if log else torch.softmax)(torch.from_numpy(x), 1).numpy()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(y[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)])
    np.testing.assert_allclose(y[finite], ref[finite], rtol=1e-5, atol=1e-6)


def test_a_nan_sum_is_the_default_quiet_nan(isa, same_bits_everywhere):
    """A row whose sum of exponentials is NaN (a NaN of either sign, or two of opposite signs)
    gives the default quiet NaN (0x7fc00000) at every element that was not NaN itself, on every
    path: which NaN an add keeps depends on its operand order, which compilers choose freely, so
    the tree sum returns the one NaN."""
    negative_nan = np.array([0xffc00000], np.uint32).view(np.float32)[0]
    rows = np.array([[negative_nan, 1.0, 2.0, 3.0], [np.nan, 1.0, negative_nan, 3.0],
                     [1.0, negative_nan, 0.5, np.nan]], np.float32)
    y = same_bits_everywhere(lambda t: [_softmax(rows, 3, 4, 1, False, t)])[0]
    ordinary = ~np.isnan(rows)
    assert (y[ordinary].view(np.uint32) == 0x7fc00000).all(), y.view(np.uint32)


def test_softmax_in_place():
    x = np.random.default_rng(0).standard_normal((10, 50)).astype(np.float32)
    for log in (False, True):
        expected = _softmax(x, 10, 50, 1, log, 1)
        inplace = x.copy()
        R.softmax(inplace, inplace, 10, 50, 1, log, 2)
        assert inplace.tobytes() == expected.tobytes()
        expected = _softmax(x, 2, 5, 50, log, 1)
        inplace = x.copy()
        R.softmax(inplace, inplace, 2, 5, 50, log, 2)
        assert inplace.tobytes() == expected.tobytes()


# ---- layer norm ----

def _layer_norm(x, w, b, eps, t):
    rows, n = x.shape
    y, mean, rstd = np.empty_like(x), np.empty(rows, np.float32), np.empty(rows, np.float32)
    R.layer_norm(x, w, b, eps, y, mean, rstd, rows, n, t)
    return y, mean, rstd


def _layer_norm_bwd(g, x, mean, rstd, w, affine, t):
    rows, n = x.shape
    dx = np.empty_like(x)
    dw = np.empty(n, np.float32) if affine else None
    db = np.empty(n, np.float32) if affine else None
    R.layer_norm_backward(g, x, mean, rstd, w, dx, dw, db, rows, n, t)
    return dx, dw, db


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("rows,n", [(3, n) for n in SIZES[1:]] + [(0, 8), (70, 300),
                                                                  (2, 70000)])
def test_layer_norm_against_torch(rows, n, affine, assert_close):
    rng = np.random.default_rng(rows * 7 + n)
    x = (rng.standard_normal((rows, n)) * 3 + 1).astype(np.float32)
    g = rng.standard_normal((rows, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32) if affine else None
    b = rng.standard_normal(n).astype(np.float32) if affine else None
    y, mean, rstd = _layer_norm(x, w, b, 1e-5, 1)
    dx, dw, db = _layer_norm_bwd(g, x, mean, rstd, w, affine, 1)

    def t64(a):
        return None if a is None else torch.from_numpy(a.astype(np.float64)).requires_grad_(True)
    xt, wt, bt = t64(x), t64(w), t64(b)
    yt = torch.nn.functional.layer_norm(xt, (n,), wt, bt, 1e-5)
    yt.backward(torch.from_numpy(g.astype(np.float64)))
    x64 = x.astype(np.float64)
    assert_close(y, yt.detach().numpy(), 1e-4, "y")
    assert_close(mean, x64.mean(axis=1), 1e-5, "mean")
    assert_close(rstd, 1 / np.sqrt(x64.var(axis=1) + 1e-5), 1e-4, "rstd")
    assert_close(dx, xt.grad.numpy(), 1e-4, "dx")
    if affine and n == 1:
        assert (dw == 0).all()  # x - mean is exactly 0; PyTorch's dw holds rounding noise
    elif affine:
        assert_close(dw, wt.grad.numpy(), 1e-4, "dw")
        assert_close(db, bt.grad.numpy(), 1e-4, "db")


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("rows,n", [(300, 100), (33, 1000), (5, 17), (1, 70000), (200, 600)])
def test_layer_norm_same_bits_everywhere(rows, n, affine, isa, same_bits_everywhere):
    rng = np.random.default_rng(rows + n)
    x = spread(rng, (rows, n))
    g = rng.standard_normal((rows, n)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32) if affine else None
    b = rng.standard_normal(n).astype(np.float32) if affine else None

    def run(t):
        y, mean, rstd = _layer_norm(x, w, b, 1e-5, t)
        grads = _layer_norm_bwd(g, x, mean, rstd, w, affine, t)
        return [y, mean, rstd] + [a for a in grads if a is not None]
    same_bits_everywhere(run)


def test_layer_norm_statistics_use_the_lane_order():
    x = spread(np.random.default_rng(3), (4, 1000))
    _, mean, rstd = _layer_norm(x, None, None, 1e-5, 1)
    for row, mu, rs in zip(x, mean, rstd):
        expected_mu = np.float32(lane_sum_ref(row) / np.float32(row.size))
        d = (row - expected_mu).astype(np.float32)
        var = np.float32(lane_sum_ref((d * d).astype(np.float32)) / np.float32(row.size))
        assert mu.tobytes() == expected_mu.tobytes()
        assert rs == np.float32(1) / np.sqrt(np.float32(var + np.float32(1e-5)))


def test_layer_norm_weight_grads_are_sequential_over_rows():
    rng = np.random.default_rng(9)
    x, g = spread(rng, (50, 40)), spread(rng, (50, 40))
    w = rng.standard_normal(40).astype(np.float32)
    _, mean, rstd = _layer_norm(x, w, None, 1e-5, 1)
    _, dw, db = _layer_norm_bwd(g, x, mean, rstd, w, True, 2)
    xh = ((x - mean[:, None]) * rstd[:, None]).astype(np.float32)
    assert db.tobytes() == column_sum_ref(g[None]).reshape(-1).tobytes()
    assert dw.tobytes() == column_sum_ref((g * xh)[None]).reshape(-1).tobytes()


def test_layer_norm_special_values(special_values, isa, same_bits_everywhere):
    x = np.array([special_values[:16], np.full(16, 5.0), np.r_[np.full(15, 0.0), 1e-40]],
                 np.float32)
    y, mean, rstd = same_bits_everywhere(lambda t: _layer_norm(x, None, None, 1e-5, t))
    ref, ref_mean, ref_rstd = torch.native_layer_norm(torch.from_numpy(x), (16,), None, None,
                                                      1e-5)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref.numpy()))
    assert np.isnan(y[0]).all() and (y[1] == 0).all()
    np.testing.assert_allclose(y[2], ref[2].numpy(), rtol=1e-5, atol=1e-44)
    np.testing.assert_allclose(mean, ref_mean.numpy().ravel(), rtol=1e-6)
    # A variance that overflows float32 is inf, so rstd is 1/sqrt(inf) = 0 and y is 0 (PyTorch
    # gives NaN there): IEEE arithmetic on the defined formula, the same on every path.
    huge = np.array([[3e38, -3e38] + [0.0] * 14], np.float32)
    y, _, rstd = _layer_norm(huge, None, None, 1e-5, 1)
    assert rstd[0] == 0 and (y == 0).all()


def test_in_place_backward():
    rng = np.random.default_rng(1)
    x, g = rng.standard_normal((6, 40)).astype(np.float32), rng.standard_normal((6, 40)).astype(
        np.float32)
    w = rng.standard_normal(40).astype(np.float32)
    _, mean, rstd = _layer_norm(x, w, None, 1e-5, 1)
    expected = _layer_norm_bwd(g, x, mean, rstd, w, True, 1)
    gi, dw, db = g.copy(), np.empty(40, np.float32), np.empty(40, np.float32)
    R.layer_norm_backward(gi, x, mean, rstd, w, gi, dw, db, 6, 40, 2)
    assert gi.tobytes() == expected[0].tobytes() and dw.tobytes() == expected[1].tobytes()
    y = _softmax(x, 6, 40, 1, False, 1)
    expected_dx = _softmax_bwd(y, g, 6, 40, 1, False, 1)
    gi = g.copy()
    R.softmax_backward(y, gi, gi, 6, 40, 1, False, 1)
    assert gi.tobytes() == expected_dx.tobytes()


def misaligned(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of a that starts one float past a 64-byte boundary."""
    buf = np.empty(a.size + 32, np.float32)
    start = (-(buf.ctypes.data // 4) % 16) + 1
    out = buf[start:start + a.size].reshape(a.shape)
    out[...] = a
    return out


def test_misaligned_inputs_and_outputs():
    rng = np.random.default_rng(2)
    x = spread(rng, (7, 45))
    g = rng.standard_normal((7, 45)).astype(np.float32)
    w = rng.standard_normal(45).astype(np.float32)
    assert _sum(misaligned(x), 7, 45, 1, 2).tobytes() == _sum(x, 7, 45, 1, 2).tobytes()
    assert _sum(misaligned(x), 1, 7, 45, 2).tobytes() == _sum(x, 1, 7, 45, 2).tobytes()
    for log in (False, True):
        for inner in (1, 5):
            y = _softmax(x, 7 * 45 // (9 * inner), 9, inner, log, 2)
            ym = misaligned(np.zeros_like(x))
            R.softmax(misaligned(x), ym, 7 * 45 // (9 * inner), 9, inner, log, 2)
            assert ym.tobytes() == y.tobytes()
    y, mean, rstd = _layer_norm(x, w, w, 1e-5, 2)
    ym, mm, rm = misaligned(y * 0), misaligned(mean * 0), misaligned(rstd * 0)
    R.layer_norm(misaligned(x), misaligned(w), misaligned(w), 1e-5, ym, mm, rm, 7, 45, 2)
    assert ym.tobytes() == y.tobytes() and mm.tobytes() == mean.tobytes()
    dx, dw, db = _layer_norm_bwd(g, x, mean, rstd, w, True, 2)
    dxm, dwm, dbm = misaligned(dx * 0), misaligned(dw * 0), misaligned(db * 0)
    R.layer_norm_backward(misaligned(g), misaligned(x), mm, rm, misaligned(w), dxm, dwm, dbm,
                          7, 45, 2)
    assert (dxm.tobytes(), dwm.tobytes(), dbm.tobytes()) == (dx.tobytes(), dw.tobytes(),
                                                             db.tobytes())


# ---- sum of squares in double ----

# ---- validation ----

def test_validation_messages():
    x = np.zeros((4, 5), np.float32)
    out = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"sum_axis: .*x must be float32, got float64"):
        R.sum_axis(x.astype(np.float64), out, 4, 5, 1, 1)
    with pytest.raises(TypeError, match=r"softmax: .*x must be a numpy array"):
        R.softmax([1.0], out, 1, 1, 1, False, 1)
    with pytest.raises(ValueError, match=r"sum_axis: \(outer, n, inner\) = \(4, 6, 1\): x has "
                                         r"shape \(4, 5\)"):
        R.sum_axis(x, out, 4, 6, 1, 1)
    with pytest.raises(ValueError, match=r"log_softmax: .*C-contiguous"):
        R.softmax(x.T, x.T.copy(), 5, 4, 1, True, 1)
    with pytest.raises(ValueError, match=r"nthreads must be >= 1"):
        R.sum_axis(x, out, 4, 5, 1, 0)
    with pytest.raises(ValueError, match=r"outer must be >= 0, got -4"):
        R.sum_axis(x, out, -4, -5, 1, 1)
    with pytest.raises(ValueError, match=r"sum_axis: .*out overlaps x"):
        R.sum_axis(x, x.reshape(-1)[:4], 4, 5, 1, 1)
    with pytest.raises(ValueError, match=r"softmax: .*out overlaps x"):
        R.softmax(x.reshape(-1)[:10], x.reshape(-1)[5:15], 2, 5, 1, False, 1)
    with pytest.raises(ValueError, match=r"writeable"):
        ro = np.zeros(4, np.float32)
        ro.flags.writeable = False
        R.sum_axis(x, ro, 4, 5, 1, 1)
    mean, rstd = np.zeros(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"layer_norm: \(rows, n\) = \(4, 5\): w has shape \(4,\)"):
        R.layer_norm(x, np.ones(4, np.float32), None, 1e-5, x.copy(), mean, rstd, 4, 5, 1)
    with pytest.raises(ValueError, match=r"layer_norm: .*mean overlaps rstd"):
        R.layer_norm(x, None, None, 1e-5, x.copy(), mean, mean, 4, 5, 1)
    with pytest.raises(ValueError, match=r"layer_norm_backward: .*dw overlaps db"):
        dw = np.zeros(5, np.float32)
        R.layer_norm_backward(x, x, mean, rstd, None, x.copy(), dw, dw, 4, 5, 1)


def test_index_add_rows_sums_in_position_order_at_any_thread_count():
    """The embedding gradient: out[index[p]] += rows[p] in position order; widths over one
    column block (256) split over threads without changing a bit."""
    rng = np.random.default_rng(7)
    for n, width, m in ((0, 5, 3), (1, 1, 1), (700, 300, 40), (64, 600, 5)):
        index = rng.integers(0, m, n)
        rows = (rng.standard_normal((n, width)) * 10.0 ** rng.integers(-6, 7, (n, 1))).astype(
            np.float32)
        want = np.zeros((m, width), np.float32)
        for i, r in zip(index, rows):
            want[i] = want[i] + r
        for threads in (1, 2, 3):
            out = np.zeros((m, width), np.float32)
            R.index_add_rows(index, rows, out, threads)
            assert out.tobytes() == want.tobytes(), (n, width, m, threads)


@pytest.mark.parametrize("index,rows,out,error,words", [
    (np.array([0, 3]), np.ones((2, 4), np.float32), np.zeros((3, 4), np.float32), IndexError,
     ["index_add_rows", "index 3", "[0, 3)"]),
    (np.array([-1]), np.ones((1, 4), np.float32), np.zeros((3, 4), np.float32), IndexError,
     ["index -1"]),
    (np.array([0], np.int32), np.ones((1, 4), np.float32), np.zeros((3, 4), np.float32),
     TypeError, ["index_add_rows", "int64", "int32"]),
    (np.array([0, 1]), np.ones((1, 4), np.float32), np.zeros((3, 4), np.float32), ValueError,
     ["index_add_rows", "rows (1, 4)", "index (2,)"]),
    (np.array([0]), np.ones((1, 5), np.float32), np.zeros((3, 4), np.float32), ValueError,
     ["out (3, 4)"]),
    (np.array([0]), np.ones((1, 4), np.float64), np.zeros((3, 4), np.float32), TypeError,
     ["rows", "float64"]),
    (np.array([0]), np.ones((1, 4), np.float32), np.zeros((3, 8), np.float32)[:, ::2],
     ValueError, ["out", "C-contiguous"]),
])
def test_index_add_rows_rejects_bad_input_before_writing(index, rows, out, error, words):
    before = out.copy()
    with pytest.raises(error) as e:
        R.index_add_rows(index, rows, out, 2)
    for w in words:
        assert w in str(e.value)
    assert out.tobytes() == before.tobytes()
