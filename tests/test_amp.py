"""Mixed precision: operand rounding, autocast products against torch.autocast, GradScaler."""
import math

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import amp
from onemodel.optim import SGD

torch = pytest.importorskip("torch")

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1.17e-38,
                    3.4028235e38, -3.4028235e38, 1.0, 1.00390625, 1.005859375, 1.001953125,
                    65504.0, 65520.0, 6e-8, 3e-8, 2.9e-8, 1e-30], np.float32)


def _values():
    rng = np.random.default_rng(0)
    normal = rng.normal(size=4000).astype(np.float32) * np.float32(100.0)
    bits = rng.integers(0, 2 ** 32, size=4000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([SPECIAL, normal, bits.view(np.float32)])


def _same_bits(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    assert np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@pytest.mark.filterwarnings("ignore:overflow")
@pytest.mark.parametrize("dtype, torch_dtype", [("bf16", torch.bfloat16),
                                                ("fp16", torch.float16)])
def test_rounding_matches_torch_conversion(dtype, torch_dtype):
    x = _values()
    expected = torch.from_numpy(x.copy()).to(torch_dtype).float().numpy()
    _same_bits(amp.round_operand(x, dtype), expected)
    assert amp.round_operand(x, None) is x


def _pair(m=13, k=37, n=9, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(m, k)).astype(np.float32),
            rng.normal(size=(k, n)).astype(np.float32))


def test_bf16_matmul_against_torch_autocast():
    a, b = _pair()
    with amp.autocast("bf16"):
        ours = (om.from_numpy(a) @ om.from_numpy(b)).numpy()
    assert ours.dtype == np.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = (torch.from_numpy(a) @ torch.from_numpy(b))
    assert theirs.dtype == torch.bfloat16
    # torch rounds its float32-accumulated result to bfloat16; ours stays float32.
    np.testing.assert_allclose(ours, theirs.float().numpy(), rtol=2 ** -7, atol=1e-2)
    # Products of bf16 operands are exact in float32: ours is the float64 product of the
    # rounded operands up to float32 accumulation.
    ra, rb = amp.round_bf16(a).astype(np.float64), amp.round_bf16(b).astype(np.float64)
    np.testing.assert_allclose(ours, ra @ rb, rtol=1e-5, atol=1e-5)
    assert np.abs(ours - a.astype(np.float64) @ b).max() > 1e-3  # the rounding did happen


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
    tol = dict(rtol=2 ** -6, atol=5e-2)
    np.testing.assert_allclose(out.detach().numpy(), tout.float().detach().numpy(), **tol)
    np.testing.assert_allclose(xs.grad.numpy(), tx.grad.numpy(), **tol)
    np.testing.assert_allclose(ws.grad.numpy(), tw.grad.numpy(), **tol)
    # Exactly: the float64 products of the rounded operands, up to float32 accumulation.
    r = lambda v: amp.round_bf16(v).astype(np.float64)  # noqa: E731
    np.testing.assert_allclose(ws.grad.numpy(), r(g).T @ r(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xs.grad.numpy(), r(g) @ r(w), rtol=1e-5, atol=1e-5)


def test_outside_autocast_and_nesting_keep_float32():
    a, b = _pair(seed=3)
    plain = (om.from_numpy(a) @ om.from_numpy(b)).numpy()
    with amp.autocast("fp16"):
        with amp.autocast("bf16", enabled=False):
            inner = (om.from_numpy(a) @ om.from_numpy(b)).numpy()
            assert amp.operand_dtype() is None
        assert amp.operand_dtype() == "fp16"
        half = (om.from_numpy(a) @ om.from_numpy(b)).numpy()
    assert amp.operand_dtype() is None
    _same_bits(inner, plain)
    ra, rb = (v.astype(np.float16).astype(np.float64) for v in (a, b))
    np.testing.assert_allclose(half, ra @ rb, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="fp8"):
        with amp.autocast("fp8"):
            pass


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
