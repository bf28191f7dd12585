"""Mixed precision: operand rounding, autocast products against torch.autocast, GradScaler."""
import gc
import math
import tracemalloc
import weakref

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import _config, amp
from onemodel._kernels import _gemm
from onemodel.functional import recurrent
from onemodel.optim import SGD

torch = pytest.importorskip("torch")

HALF = {"bf16": 1, "fp16": 2}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, 1.17e-38,
                    3.4028235e38, -3.4028235e38, 1.0, 1.00390625, 1.005859375, 1.001953125,
                    65504.0, 65519.99, 65520.0, 6e-8, 3e-8, 2.9e-8, 5.96e-8, 2.98e-8, 1e-30,
                    6.1e-5, 6.103515625e-05, 6.1e-05 * 1.0001], np.float32)


def _values():
    rng = np.random.default_rng(0)
    normal = rng.normal(size=4000).astype(np.float32) * np.float32(100.0)
    bits = rng.integers(0, 2 ** 32, size=20000, dtype=np.uint64).astype(np.uint32)
    small = (rng.normal(size=4000) * 1e-5).astype(np.float32)  # float16 subnormals
    nan_bits = (np.uint32(0x7F800001) + np.arange(0, 1 << 23, 4099, dtype=np.uint32))
    return np.concatenate([SPECIAL, normal, small, bits.view(np.float32),
                           nan_bits.view(np.float32), (-nan_bits.view(np.float32))])


def _same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    assert np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


# -- the independent reference: numpy rounding and the kernel's order of operations ------------
def round_bits(x, dtype):
    """Rounded 2-byte bits, by numpy alone: bfloat16 by integer arithmetic, float16 by numpy's
    conversion; a NaN made quiet with its payload truncated (as F16C does; numpy keeps a
    signalling NaN signalling)."""
    x = np.ascontiguousarray(x, np.float32)
    if dtype == "fp16":
        with np.errstate(over="ignore", invalid="ignore"):
            r = x.astype(np.float16).view(np.uint16)
        u = x.view(np.uint32)
        quiet = ((u >> 16) & 0x8000) | 0x7E00 | ((u >> 13) & 0x3FF)
        return np.where(np.isnan(x), quiet.astype(np.uint16), r)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = ((u[nan] | 0x400000) >> 16).astype(np.uint16)
    return r


def widen(bits, dtype):
    if dtype == "fp16":
        return bits.view(np.float16).astype(np.float32)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def rnd(x, dtype):
    return widen(round_bits(x, dtype), dtype)


def ref_product(a, b, dtype):
    """(m, k) @ (k, n) as the kernel computes it: operands rounded, then per output element a
    float32 chain acc = acc + a[i, k]·b[k, j] over k from +0 (each product exact in float32)."""
    a, b = rnd(a, dtype), rnd(b, dtype)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = acc + np.multiply.outer(a[:, k], b[k])
    return acc


@pytest.mark.filterwarnings("ignore:overflow")
@pytest.mark.parametrize("dtype, torch_dtype", [("bf16", torch.bfloat16),
                                                ("fp16", torch.float16)])
def test_packing_rounds_as_torch_converts(dtype, torch_dtype, isa):
    # Both layouts of op(A): a column (runs of one value along the depth) and a transposed row
    # (runs of the tile's height, each k's values side by side: AVX2's short-run code).
    x = _values()
    expected = torch.from_numpy(x.copy()).to(torch_dtype).float().numpy()
    for shape, trans in (((x.size, 1), False), ((1, x.size), True)):
        ours = np.empty(shape, np.uint16)
        out = np.empty((x.size, 1), np.float32)
        _gemm.gemm(x.reshape(shape), np.ones((1, 1), np.float32), out, trans, False, 1,
                   half=HALF[dtype], save_a=ours)
        _same_bits(widen(ours.ravel(), dtype), expected)
        assert np.array_equal(ours.ravel(), round_bits(x, dtype)), (isa, trans)
        # Widening every 2-byte pattern: the product by 1 gives it back (up to the sign of 0),
        # but for bfloat16 subnormals, which the dot-product rule reads as zero.
        every = np.arange(1 << 16, dtype=np.uint16)
        one = round_bits(np.ones((1, 1), np.float32), dtype)
        wide = np.empty((every.size, 1), np.float32)
        _gemm.gemm(every.reshape(1, -1) if trans else every.reshape(-1, 1), one, wide, trans,
                   False, 2, half=HALF[dtype])
        wanted = widen(every, dtype).reshape(-1, 1) + np.float32(0)
        if dtype == "bf16":
            wanted[(every & 0x7F80) == 0] = 0.0
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(wide, wanted, err_msg=f"{isa} {trans}")


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_rounding_in_the_packing_is_the_product_of_the_rounded_operands(
        dtype, trans_a, trans_b, isa, same_bits_everywhere):
    rng = np.random.default_rng(trans_a * 2 + trans_b)
    # 300 columns: a depth of op(B) converted in two stretches; 260 rows: op(A) in two blocks.
    for m, k, n, batch in ((13, 37, 9, None), (70, 300, 45, None), (5, 17, 33, 3),
                           (1, 1, 1, None), (260, 520, 70, None), (20, 40, 300, None)):
        sa, sb = ((k, m) if trans_a else (m, k)), ((n, k) if trans_b else (k, n))
        if batch:
            sa, sb = (batch,) + sa, (batch,) + sb
        a = (rng.normal(size=sa) * 100).astype(np.float32)
        b = rng.normal(size=sb).astype(np.float32)
        shape = ((batch,) if batch else ()) + (m, n)

        def run(_):
            out, widened = np.empty(shape, np.float32), np.empty(shape, np.float32)
            save_a, save_b = np.empty(sa, np.uint16), np.empty(sb, np.uint16)
            _gemm.gemm(a, b, out, trans_a, trans_b, _config.num_threads(), half=HALF[dtype],
                       save_a=save_a, save_b=save_b)
            _gemm.gemm(save_a, save_b, widened, trans_a, trans_b, _config.num_threads(),
                       half=HALF[dtype])
            return out, widened, save_a, save_b

        out, widened, save_a, save_b = same_bits_everywhere(run)
        # Today's answer: the float32 product of operands rounded beforehand.
        before = np.empty(shape, np.float32)
        _gemm.gemm(rnd(a, dtype), rnd(b, dtype), before, trans_a, trans_b, 1)
        assert out.tobytes() == before.tobytes() == widened.tobytes()
        assert np.array_equal(save_a, round_bits(a, dtype))
        assert np.array_equal(save_b, round_bits(b, dtype))
        if batch is None and k < 400:
            ta = a.T if trans_a else a
            tb = b.T if trans_b else b
            _same_bits(out, ref_product(ta, tb, dtype))


def test_bad_half_arguments():
    a = np.ones((2, 3), np.float32)
    out = np.empty((2, 2), np.float32)
    with pytest.raises(ValueError, match="half"):
        _gemm.gemm(a, np.ones((3, 2), np.float32), out, False, False, 1, half=3)
    with pytest.raises(TypeError, match="uint16"):
        _gemm.gemm(a, np.ones((3, 2), np.float16), out, False, False, 1, half=2)
    with pytest.raises(TypeError, match="float32"):
        _gemm.gemm(a, np.ones((3, 2), np.uint16), out, False, False, 1)
    with pytest.raises(ValueError, match="save_a"):
        _gemm.gemm(a, np.ones((3, 2), np.float32), out, False, False, 1, half=1,
                   save_a=np.empty((3, 2), np.uint16))
    with pytest.raises(ValueError, match="save_b"):
        _gemm.gemm(a, np.ones((3, 2), np.float32), out, False, False, 1,
                   save_b=np.empty((3, 2), np.uint16))


# -- autocast ops: bit for bit the reference, on every path ---------------------------------------
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_linear_forward_and_gradients_are_the_reference(dtype, isa, same_bits_everywhere):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 20)).astype(np.float32)
    w = rng.normal(size=(35, 20)).astype(np.float32)
    bias = rng.normal(size=35).astype(np.float32)
    g = rng.normal(size=(2, 6, 35)).astype(np.float32)

    def run(_):
        xs, ws, bs = (om.tensor(v, requires_grad=True) for v in (x, w, bias))
        h = xs * np.float32(1.0)   # an intermediate operand: saved in 2 bytes
        with amp.autocast(dtype):
            out = F.linear(h, ws, bs)
        out.backward(om.from_numpy(g))
        return out.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()

    out, gx, gw = same_bits_everywhere(run)
    x2, g2 = x.reshape(12, 20), g.reshape(12, 35)
    _same_bits(out.reshape(12, 35), ref_product(x2, w.T, dtype) + bias)
    _same_bits(gx.reshape(12, 20), ref_product(g2, w, dtype))
    _same_bits(gw, ref_product(g2.T, x2, dtype))


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_matmul_batched_and_broadcast_are_the_reference(dtype, isa, same_bits_everywhere):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 7, 19)).astype(np.float32)
    b = rng.normal(size=(19, 11)).astype(np.float32)
    c = rng.normal(size=(3, 11, 5)).astype(np.float32)
    g = rng.normal(size=(3, 7, 5)).astype(np.float32)

    def run(_):
        ts = [om.tensor(v, requires_grad=True) for v in (a, b, c)]
        with amp.autocast(dtype):
            ab = ts[0] @ ts[1]                 # 2-D right operand: folded rows
            out = ab @ (ts[2] * np.float32(1.0))   # batched, both operands intermediate
        out.backward(om.from_numpy(g))
        return (ab.detach().numpy(), out.detach().numpy()) + tuple(t.grad.numpy() for t in ts)

    ab, out, ga, gb, gc = same_bits_everywhere(run)
    _same_bits(ab.reshape(21, 11), ref_product(a.reshape(21, 19), b, dtype))
    for i in range(3):
        _same_bits(out[i], ref_product(ab[i], c[i], dtype))
        _same_bits(gc[i], ref_product(ab[i].T, g[i], dtype))
    gab = np.stack([ref_product(g[i], c[i].T, dtype) for i in range(3)])
    _same_bits(gb, ref_product(a.reshape(21, 19).T, gab.reshape(21, 11), dtype))
    _same_bits(ga.reshape(21, 19), ref_product(gab.reshape(21, 11), b.T, dtype))


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_attention_and_lstm_agree_on_every_path(dtype, isa, same_bits_everywhere):
    rng = np.random.default_rng(4)
    attn = om.nn.MultiheadAttention(16, 4, batch_first=True, seed=1)
    lstm = om.nn.LSTM(16, 12, 1, seed=2)
    x = om.from_numpy(rng.normal(size=(3, 5, 16)).astype(np.float32))

    def run(_):
        for p in list(attn.parameters()) + list(lstm.parameters()):
            p.grad = None
        with amp.autocast(dtype):
            y, _ = attn(x, x, x)
            z, _ = lstm(y)
        (z * z).sum().backward()
        return [y.detach().numpy(), z.detach().numpy()] + [
            p.grad.numpy() for p in list(attn.parameters()) + list(lstm.parameters())]

    results = same_bits_everywhere(run)
    with amp.autocast(dtype, enabled=False):
        plain = om.nn.MultiheadAttention(16, 4, batch_first=True, seed=1)(x, x, x)[0]
    assert not np.array_equal(results[0], plain.detach().numpy())  # the rounding did happen
    np.testing.assert_allclose(results[0], plain.detach().numpy(), rtol=0.1, atol=0.05)


def _kernel_fn(fn, x):
    """The library's own element function (the recurrent row kernels call the same ones)."""
    return fn(om.from_numpy(np.ascontiguousarray(x, np.float32))).numpy()


def ref_lstm(xw, w_hh, b, h0, c0, gy, dtype):
    """An LSTM direction as the kernel computes it under autocast: per step hw = h·W_hhᵀ by
    ref_product (operands rounded), the gates in float32 in the kernel's order; backward by
    the cell's formulas, dh_prev = dgates·W_hh and dW_hh = dgatesᵀ·h_prev by ref_product.
    Returns (y, dxw, dW_hh, dh0) for the loss sum(y * gy)."""
    sig, tanh = (lambda x: _kernel_fn(F.sigmoid, x)), (lambda x: _kernel_fn(F.tanh, x))
    steps, hidden = xw.shape[0], h0.shape[1]
    h, c, ys, cs, gates, prevs = h0, c0, [], [], [], []
    for t in range(steps):
        pre = xw[t] + (ref_product(h, w_hh.T, dtype) + b)
        i, f, o = (sig(pre[:, k * hidden:(k + 1) * hidden]) for k in (0, 1, 3))
        g = tanh(pre[:, 2 * hidden:3 * hidden])
        prevs.append((h, c))
        c = f * c + i * g
        h = o * tanh(c)
        ys.append(h), cs.append(c), gates.append((i, f, g, o))
    one = np.float32(1.0)
    dh, dc = np.zeros_like(h0), np.zeros_like(c0)
    dgs = [None] * steps
    for t in reversed(range(steps)):
        i, f, g, o = gates[t]
        d, tc = dh + gy[t], tanh(cs[t])
        dct = dc + (d * o) * (one - tc * tc)
        dgs[t] = np.concatenate([((dct * g) * (one - i)) * i,
                                 ((dct * prevs[t][1]) * (one - f)) * f,
                                 (dct * i) * (one - g * g), ((d * tc) * (one - o)) * o], 1)
        dc = dct * f
        dh = ref_product(dgs[t], w_hh, dtype)
    dg = np.concatenate(dgs)
    h_prev = np.concatenate([p[0] for p in prevs])
    return np.stack(ys), dg.reshape(xw.shape), ref_product(dg.T, h_prev, dtype), dh


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_lstm_recurrent_products_are_the_reference(dtype, isa, same_bits_everywhere):
    """Under autocast the recurrent products take rounded operands too (as torch's CPU autocast
    runs the whole LSTM in low precision): outputs and gradients equal the reference bit for
    bit on every path and thread count."""
    rng = np.random.default_rng(8)
    steps, batch, hidden = 5, 3, 12
    xw = rng.normal(size=(steps, batch, 4 * hidden)).astype(np.float32)
    w_hh = (rng.normal(size=(4 * hidden, hidden)) * 0.4).astype(np.float32)
    b = rng.normal(size=4 * hidden).astype(np.float32)
    h0, c0 = (rng.normal(size=(batch, hidden)).astype(np.float32) for _ in range(2))
    gy = rng.normal(size=(steps, batch, hidden)).astype(np.float32)

    def run(_):
        x, w, h = (om.tensor(a, requires_grad=True) for a in (xw, w_hh, h0))
        with amp.autocast(dtype):
            y, _, _ = recurrent.lstm_layer(x, w, om.from_numpy(b), h, om.from_numpy(c0))
        (y * om.from_numpy(gy)).sum().backward()
        return [y.detach().numpy(), x.grad.numpy(), w.grad.numpy(), h.grad.numpy()]

    results = same_bits_everywhere(run)
    for got, want in zip(results, ref_lstm(xw, w_hh, b, h0, c0, gy, dtype)):
        _same_bits(got, want)
    y = results[0]
    plain = recurrent.lstm_layer(om.from_numpy(xw), om.from_numpy(w_hh), om.from_numpy(b),
                         om.from_numpy(h0), om.from_numpy(c0))[0].numpy()
    assert not np.array_equal(y, plain)  # the rounding did happen
    np.testing.assert_allclose(y, plain, atol=0.05)


def ref_gru(xw, w_hh, b, h0, gy, dtype):
    """A GRU direction as the kernel computes it under autocast (as ref_lstm): per step
    hw = h·W_hhᵀ by ref_product, the cell in float32 in the kernel's order
    (n = tanh(x_n + r·(hw_n + b_n)), h = n + z·(h_prev - n)); backward by the cell's formulas,
    dh_prev = d·z + dgates_h·W_hh and dW_hh = dgates_hᵀ·h_prev by ref_product. Returns
    (y, dxw, dW_hh, dh0) for the loss sum(y * gy)."""
    sig, tanh = (lambda x: _kernel_fn(F.sigmoid, x)), (lambda x: _kernel_fn(F.tanh, x))
    steps, hidden = xw.shape[0], h0.shape[1]
    parts = [slice(k * hidden, (k + 1) * hidden) for k in range(3)]
    h, ys, saved = h0, [], []
    for t in range(steps):
        hw = ref_product(h, w_hh.T, dtype)
        r, z = (sig(xw[t][:, p] + (hw[:, p] + b[p])) for p in parts[:2])
        hl = hw[:, parts[2]] + b[parts[2]]
        n = tanh(xw[t][:, parts[2]] + r * hl)
        saved.append((h, r, z, n, hl))
        h = n + z * (h - n)
        ys.append(h)
    one = np.float32(1.0)
    dh = np.zeros_like(h0)
    dgx, dgh = [None] * steps, [None] * steps
    for t in reversed(range(steps)):
        h_prev, r, z, n, hl = saved[t]
        d = dh + gy[t]
        dnp = (d * (one - z)) * (one - n * n)
        drp = ((dnp * hl) * (one - r)) * r
        dzp = ((d * (h_prev - n)) * (one - z)) * z
        dgx[t] = np.concatenate([drp, dzp, dnp], 1)
        dgh[t] = np.concatenate([drp, dzp, dnp * r], 1)
        dh = d * z + ref_product(dgh[t], w_hh, dtype)
    h_prev = np.concatenate([s[0] for s in saved])
    return (np.stack(ys), np.stack(dgx), ref_product(np.concatenate(dgh).T, h_prev, dtype), dh)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_gru_recurrent_products_are_the_reference(dtype, isa, same_bits_everywhere):
    """The GRU under autocast: outputs and gradients (xw, W_hh, h0) equal ref_gru bit for bit
    on every path and thread count."""
    rng = np.random.default_rng(9)
    steps, batch, hidden = 4, 3, 10
    xw = rng.normal(size=(steps, batch, 3 * hidden)).astype(np.float32)
    w_hh = (rng.normal(size=(3 * hidden, hidden)) * 0.4).astype(np.float32)
    b = rng.normal(size=3 * hidden).astype(np.float32)
    h0 = rng.normal(size=(batch, hidden)).astype(np.float32)
    gy = rng.normal(size=(steps, batch, hidden)).astype(np.float32)

    def run(_):
        x, w, h = (om.tensor(a, requires_grad=True) for a in (xw, w_hh, h0))
        with amp.autocast(dtype):
            y = recurrent.gru_layer(x, w, om.from_numpy(b), h)[0]
        (y * om.from_numpy(gy)).sum().backward()
        return [y.detach().numpy(), x.grad.numpy(), w.grad.numpy(), h.grad.numpy()]

    for got, want in zip(same_bits_everywhere(run), ref_gru(xw, w_hh, b, h0, gy, dtype)):
        _same_bits(got, want)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 9, 11), dict(padding=1)),                          # "same", unit stride
    ((3, 4, 8, 7), dict(stride=2, padding=(1, 0), dilation=(1, 2))),
    ((2, 8, 6, 6), dict(padding=1, groups=2)),
    ((1, 16, 5, 5), dict(padding=1)),                          # taps packed by channel
])
def test_conv2d_is_the_float32_convolution_of_the_rounded_operands(dtype, shape, kwargs, isa,
                                                                   same_bits_everywhere):
    rng = np.random.default_rng(6)
    cin = shape[1] // kwargs.get("groups", 1)
    x = (rng.normal(size=shape) * 10).astype(np.float32)
    w = rng.normal(size=(6, cin, 3, 3)).astype(np.float32)
    bias = rng.normal(size=6).astype(np.float32)

    def conv(xv, wv, cast, g=None):
        xs, ws, bs = (om.tensor(v, requires_grad=True) for v in (xv, wv, bias))
        with amp.autocast(dtype, enabled=cast):
            out = F.conv2d(xs * np.float32(1.0), ws, bs, **kwargs)
        out.backward(om.from_numpy(np.ones(out.shape, np.float32) if g is None else g))
        return out.detach().numpy(), xs.grad.numpy(), ws.grad.numpy(), bs.grad.numpy()

    g = rng.normal(size=conv(x, w, False)[0].shape).astype(np.float32)
    out, gx, gw, gb = same_bits_everywhere(lambda _: conv(x, w, True, g))
    # The reference: float32 convolutions of rounded operands (the kernel of float32 mode).
    ref_out = conv(rnd(x, dtype), rnd(w, dtype), False, g)
    _same_bits(out, ref_out[0])
    _same_bits(gb, ref_out[3])
    _same_bits(gw, conv(rnd(x, dtype), w, False, rnd(g, dtype))[2])
    _same_bits(gx, conv(x, rnd(w, dtype), False, rnd(g, dtype))[1])


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", [
    (5, 3, 7, 9),       # runs of 63 values: 32 runs converted at a time, the last block short
    (3, 2, 2100),       # runs longer than a block: 2048 values and a tail
    (300, 4),           # (N, C): runs of one value
])
def test_batch_norm_reads_its_input_rounded_and_keeps_it_in_two_bytes(dtype, shape, isa,
                                                                      same_bits_everywhere):
    """Under autocast batch norm normalises its input rounded to 2 bytes (torch's reads a
    convolution's 2-byte output): output, running statistics and gradients are float32 batch
    norm's on the rounded values, on every path and thread count, training and eval."""
    rng = np.random.default_rng(8)
    c = shape[1]
    x = (rng.normal(size=shape) * 3 + 1).astype(np.float32)
    x[:, 1] *= np.float32(1e-39)   # a channel of bfloat16 subnormals: kept (products read 0)
    g = rng.normal(size=shape).astype(np.float32)
    weight, bias = rng.normal(size=c).astype(np.float32), rng.normal(size=c).astype(np.float32)

    def bn(xv, cast, training):
        xs, ws, bs = (om.tensor(v, requires_grad=True) for v in (xv, weight, bias))
        rm, rv = om.zeros(c), om.ones(c)
        with amp.autocast(dtype, enabled=cast):
            out = F.batch_norm(xs * np.float32(1.0), rm, rv, ws, bs, training=training)
        out.backward(om.from_numpy(g))
        return [a.detach().numpy() for a in (out, rm, rv, xs.grad, ws.grad, bs.grad)]

    for training in (True, False):
        got = same_bits_everywhere(lambda _: bn(x, True, training))
        for a, b in zip(got, bn(rnd(x, dtype), False, training)):
            _same_bits(a, b)


def _closure_arrays(t):
    fn = t._node.backward_fn
    return [c.cell_contents for c in fn.__closure__ or ()
            if isinstance(c.cell_contents, np.ndarray)]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_saved_operands_are_two_bytes_and_the_float32_inputs_are_freed(dtype):
    rng = np.random.default_rng(5)
    w = om.tensor(rng.normal(size=(8, 16)).astype(np.float32), requires_grad=True)
    x = om.tensor(rng.normal(size=(4, 16)).astype(np.float32), requires_grad=True)
    with amp.autocast(dtype):
        h = F.relu(x) * np.float32(2.0)
        y = F.linear(h, w)
        q = (x * np.float32(3.0)).reshape(4, 4, 4)
        s = q @ q
        image = (x * np.float32(0.5)).reshape(1, 4, 4, 4)
        c = F.conv2d(image, w.reshape(8, 2, 2, 4)[:, :, :, :2].reshape(8, 4, 2, 1) * 1.0)
        normed_input = c * np.float32(1.0)
        normed = F.batch_norm(normed_input, None, None, training=True)
    saved = _closure_arrays(y)
    assert [a.dtype for a in saved if a.size == h.numel()] == [np.uint16]
    assert {a.dtype for a in _closure_arrays(s)} == {np.dtype(np.uint16)}
    assert np.uint16 in [a.dtype for a in _closure_arrays(c)]
    assert [a.dtype for a in _closure_arrays(normed) if a.size == c.numel()] == [np.uint16]
    del c
    refs = weakref.ref(h), weakref.ref(q), weakref.ref(image), weakref.ref(normed_input)
    expected_bits = round_bits(h.detach().numpy(), dtype)
    del h, q, image, normed_input
    gc.collect()
    assert [r() for r in refs] == [None] * 4, "the graph keeps a float32 operand alive"
    assert np.array_equal([a for a in saved if a.size == expected_bits.size][0], expected_bits)
    (y.sum() + s.sum() + normed.sum()).backward()
    assert x.grad is not None and w.grad is not None


def test_products_of_one_intermediate_keep_one_two_byte_copy():
    """q, k and v of one input: the three products' backward read the copy the first one's
    packing wrote (same bits), until the input is written in place; the gradients are the same
    as with copies of their own, and the shared copy goes with its tensor."""
    rng = np.random.default_rng(8)
    ws = [om.tensor(rng.normal(size=(5, 16)).astype(np.float32), requires_grad=True)
          for _ in range(3)]
    x = om.tensor(rng.normal(size=(2, 4, 16)).astype(np.float32), requires_grad=True)

    def products(share: bool):
        with amp.autocast("bf16"):
            h = x * np.float32(1.5)
            outs = [F.linear(h if share else h * np.float32(1.0), w) for w in ws]
            outs.append(h @ ws[0].T)
            if share:
                with om.no_grad():
                    h.mul_(np.float32(2.0))  # a new version: its next product copies anew
                outs.append(F.linear(h, ws[1]))
        return h, outs

    h, outs = products(True)
    copies = [next(a for a in _closure_arrays(o) if a.dtype == np.uint16) for o in outs]
    assert all(np.shares_memory(c, copies[0]) for c in copies[1:4])
    assert not np.shares_memory(copies[4], copies[0])
    np.testing.assert_array_equal(copies[4].reshape(-1),
                                  round_bits(h.detach().numpy(), "bf16").reshape(-1))
    gone = weakref.ref(h)
    del h
    gc.collect()
    assert gone() is None
    sum(o.sum() for o in outs[:4]).backward()
    shared = [x.grad.numpy().copy()] + [w.grad.numpy().copy() for w in ws]
    for t in [x] + ws:
        t.grad = None
    _, alone = products(False)
    sum(o.sum() for o in alone).backward()
    for got, want in zip(shared, [x.grad.numpy()] + [w.grad.numpy() for w in ws]):
        _same_bits(got, want)


def test_a_shared_copy_is_only_one_packing_wrote_and_lives_in_its_autocast():
    """Batched products and convolutions share too; an empty product (its packing writes
    nothing) offers no copy; a copy does not outlive the outermost autocast."""
    rng = np.random.default_rng(9)
    x = om.tensor(rng.normal(size=(2, 4, 16)).astype(np.float32), requires_grad=True)
    wb = om.tensor(rng.normal(size=(2, 16, 3)).astype(np.float32), requires_grad=True)
    w = om.tensor(rng.normal(size=(5, 16)).astype(np.float32), requires_grad=True)
    empty = om.tensor(np.zeros((0, 16), np.float32), requires_grad=True)
    kernel = om.tensor(rng.normal(size=(3, 2, 3, 3)).astype(np.float32), requires_grad=True)

    def uint16_of(t):
        return next(a for a in _closure_arrays(t) if a.dtype == np.uint16)

    def products(share: bool):
        fresh = (lambda t: t) if share else (lambda t: t * np.float32(1.0))
        with amp.autocast("bf16"):
            h = x * np.float32(1.5)
            image = (x * np.float32(0.5)).reshape(2, 2, 4, 8)
            outs = [F.linear(fresh(h), empty), h @ wb, fresh(h) @ wb, F.linear(fresh(h), w),
                    F.conv2d(image, kernel), F.conv2d(fresh(image), kernel)]
        return h, outs

    h, outs = products(True)
    assert np.shares_memory(uint16_of(outs[1]), uint16_of(outs[2]))
    assert not np.shares_memory(uint16_of(outs[0]), uint16_of(outs[3]))
    assert np.shares_memory(uint16_of(outs[1]), uint16_of(outs[3]))
    assert np.shares_memory(uint16_of(outs[4]), uint16_of(outs[5]))
    with amp.autocast("bf16"):
        again = F.linear(h, w)
    assert not np.shares_memory(uint16_of(again), uint16_of(outs[3]))
    sum(o.sum() for o in outs).backward()
    shared = [t.grad.numpy().copy() for t in (x, wb, w, kernel)]
    for t in (x, wb, w, kernel, empty):
        t.grad = None
    _, alone = products(False)
    sum(o.sum() for o in alone).backward()
    for got, t in zip(shared, (x, wb, w, kernel)):
        _same_bits(got, t.grad.numpy())


def test_outside_autocast_and_nesting_keep_float32():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(13, 37)).astype(np.float32)
    b = rng.normal(size=(37, 9)).astype(np.float32)
    plain = (om.from_numpy(a) @ om.from_numpy(b)).numpy()
    with amp.autocast("fp16"):
        with amp.autocast("bf16", enabled=False):
            inner = (om.from_numpy(a) @ om.from_numpy(b)).numpy()
            assert amp.operand_dtype() is None
        assert amp.operand_dtype() == "fp16"
        half = (om.from_numpy(a) @ om.from_numpy(b)).numpy()
    assert amp.operand_dtype() is None
    _same_bits(inner, plain)
    _same_bits(half, ref_product(a, b, "fp16"))


def test_bad_autocast_arguments_raise():
    with pytest.raises(ValueError, match="fp8"):
        with amp.autocast("fp8"):
            pass
    with pytest.raises(TypeError, match="string"):
        with amp.autocast(torch.bfloat16):
            pass
    with amp.autocast("bf16"):   # float64 values never reach a product: a clear TypeError
        with pytest.raises(TypeError, match="float64"):
            om.tensor(np.ones((2, 3)), dtype=np.float64)
        with pytest.raises(TypeError, match="float32"):
            F.linear(om.Tensor._wrap(np.ones((2, 3))), om.tensor(np.ones((4, 3), np.float32)))


def test_linear_gradients_against_torch_autocast():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 20)).astype(np.float32)
    w = rng.normal(size=(5, 20)).astype(np.float32)
    bias = rng.normal(size=5).astype(np.float32)
    g = rng.normal(size=(6, 5)).astype(np.float32)
    xs, ws, bs = (om.tensor(v, requires_grad=True) for v in (x, w, bias))
    with amp.autocast("bf16"):
        out = F.linear(xs, ws, bs)
    out.backward(om.from_numpy(g))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, bias))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tout = torch.nn.functional.linear(tx, tw, tb)
    tout.backward(torch.from_numpy(g).bfloat16())
    # torch rounds its float32-accumulated results to bfloat16; ours stay float32.
    tol = dict(rtol=2 ** -6, atol=5e-2)
    np.testing.assert_allclose(out.detach().numpy(), tout.float().detach().numpy(), **tol)
    np.testing.assert_allclose(xs.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(ws.grad.numpy(), tw.grad.numpy(), **tol)


def test_fp16_gradients_underflow_without_scaling():
    # What loss scaling is for: a gradient of 1e-8 is 0 in float16, 1e-8·2^16 is not.
    x = om.tensor(np.ones((1, 4), np.float32))
    w = om.tensor(np.ones((1, 4), np.float32), requires_grad=True)
    for scale, expected in ((1.0, 0.0), (2.0 ** 16, 1e-8)):
        w.grad = None
        with amp.autocast("fp16"):
            out = F.linear(x, w)
        (out * np.float32(1e-8 * scale)).sum().backward()
        np.testing.assert_allclose(w.grad.numpy() / np.float32(scale), expected, rtol=1e-3)


# -- GradScaler ------------------------------------------------------------------------------
def _sgd_step(scaler, p, opt, bad):
    opt.zero_grad()
    scaler.scale((p * np.float32(2.0)).sum()).backward()
    if bad:
        p.grad.numpy()[0] = math.inf
    scaler.unscale_(opt)
    stepped = scaler.step(opt)
    scaler.update()
    return stepped


def test_scale_sequence_matches_torch_grad_scaler():
    pattern = [0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0]
    scaler = amp.GradScaler(init_scale=8.0, growth_interval=2)
    p = om.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = SGD([p], lr=0.1)
    ts = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    tp = torch.nn.Parameter(torch.ones(3))
    topt = torch.optim.SGD([tp], lr=0.1)
    for bad in pattern:
        stepped = _sgd_step(scaler, p, opt, bad)
        topt.zero_grad()
        ts.scale((tp * 2).sum()).backward()
        if bad:
            tp.grad[0] = math.inf
        ts.unscale_(topt)
        ts.step(topt)
        ts.update()
        assert stepped == (not bad)
        assert scaler.get_scale() == ts.get_scale()
        assert scaler.state_dict()["growth_tracker"] == ts.state_dict()["_growth_tracker"]
        np.testing.assert_array_equal(p.detach().numpy(), tp.detach().numpy())
    assert opt.step_count == pattern.count(0)


def test_unscale_is_in_place_as_torch_and_finds_nan_and_inf():
    # torch's unscale_ divides .grad in place: a reference taken before sees the true gradient,
    # and no second copy of the gradients is made (tracemalloc sees numpy's allocations).
    p = om.tensor(np.ones((256, 256), np.float32), requires_grad=True)
    tp = torch.nn.Parameter(torch.ones(256, 256))
    scaler, ts = amp.GradScaler(init_scale=1024.0), torch.amp.GradScaler("cpu", init_scale=1024.0)
    opt, topt = SGD([p], lr=0.1), torch.optim.SGD([tp], lr=0.1)
    scaler.scale((p * np.float32(3.0)).sum()).backward()
    ts.scale((tp * 3).sum()).backward()
    held, theld = p.grad, tp.grad
    tracemalloc.start()
    try:
        scaler.unscale_(opt)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    ts.unscale_(topt)
    # (numpy 1.x buffers a scalar operand's casting: 32 KiB; a copy would be 256 KiB)
    assert peak < p.grad.numpy().nbytes // 4
    assert p.grad is held and theld is tp.grad
    np.testing.assert_array_equal(held.numpy(), theld.numpy())
    for bad in (math.inf, -math.inf, math.nan):
        scaler.update()
        opt.zero_grad()
        scaler.scale((p * np.float32(3.0)).sum()).backward()
        p.grad.numpy()[7, 9] = bad
        scaler.unscale_(opt)
        assert not scaler.step(opt)
    scaler.update()
    q = om.tensor(np.ones(3, np.float32), requires_grad=True)
    q.grad = om.Tensor._wrap(np.broadcast_to(np.float32(4.0), (3,)))  # read-only: replaced
    scaler.unscale_(SGD([q], lr=0.1))
    assert q.grad.numpy().tolist() == [4.0 / scaler.get_scale()] * 3


def test_state_dict_is_integers_and_round_trips():
    scaler = amp.GradScaler(init_scale=2.0 ** 10, growth_interval=5)
    p = om.tensor(np.ones(2, np.float32), requires_grad=True)
    opt = SGD([p], lr=0.1)
    for bad in (0, 0, 1, 0, 0):
        _sgd_step(scaler, p, opt, bad)
    state = scaler.state_dict()
    assert state == {"scale_bits": int(np.float32(2.0 ** 9).view(np.uint32)),
                     "growth_tracker": 2}
    other = amp.GradScaler(growth_interval=5)
    other.load_state_dict(state)
    assert other.get_scale() == 2.0 ** 9 and other.state_dict() == state
    for bad in ({"scale_bits": 0x7F800000, "growth_tracker": 0},
                {"scale_bits": 1 << 32, "growth_tracker": 0},
                {"scale_bits": state["scale_bits"], "growth_tracker": 5}):
        with pytest.raises(ValueError):
            other.load_state_dict(bad)
    assert other.state_dict() == state


def test_misuse_and_disabled_scaler():
    p = om.tensor(np.ones(2, np.float32), requires_grad=True)
    opt = SGD([p], lr=0.1)
    scaler = amp.GradScaler()
    with pytest.raises(RuntimeError, match="update"):
        scaler.update()
    scaler.scale((p * np.float32(1.0)).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already"):
        scaler.unscale_(opt)
    off = amp.GradScaler(enabled=False)
    loss = (p * np.float32(3.0)).sum()
    assert off.scale(loss) is loss and off.get_scale() == 1.0
    p.grad = None
    loss.backward()
    assert off.step(opt) and opt.step_count == 1
    for kwargs in (dict(init_scale=0.0), dict(growth_factor=0.5), dict(backoff_factor=1.0),
                   dict(growth_interval=0)):
        with pytest.raises(ValueError):
            amp.GradScaler(**kwargs)
