"""Gradient clipping: the norm in double in order, the float32 coefficient, PyTorch's
clip_grad_norm_ and clamp, special values, and the same bits on every ISA and thread count."""
from __future__ import annotations

import math

import numpy as np
import pytest

from onemodel._kernels import _optim
from onemodel.optim import clip_grad_norm, clip_grad_value
from onemodel.tensor import tensor

f32 = np.float32
SHAPES = [(0,), (1,), (15,), (16,), (17,), (31, 33), (1000,)]


def params_with_grads(grads):
    ps = []
    for g in grads:
        p = tensor(np.zeros(3 if g is None else g.shape, np.float32), requires_grad=True)
        p.grad = None if g is None else tensor(g)
        ps.append(p)
    return ps


def ref_norm(grads):
    total = 0.0
    for g in grads:
        for x in g.reshape(-1).astype(np.float64):   # one square at a time, in order
            total += x * x
    return math.sqrt(total)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 100003])
def test_sumsq_kernel_adds_the_double_squares_in_index_order(n):
    mag = np.exp2(np.random.default_rng(n).integers(-12, 12, n)).astype(np.float32)
    x = np.random.default_rng(n + 1).standard_normal(n).astype(np.float32) * mag
    squares = x.astype(np.float64) ** 2
    assert _optim.sumsq_f64(x) == np.add.accumulate(np.r_[0.0, squares])[-1]
    # The accumulator carries on from where the previous tensor left it.
    assert _optim.sumsq_f64(x, 2.5) == np.add.accumulate(np.r_[2.5, squares])[-1]
    if n < 2000:
        total = 0.0
        for v in x.tolist():
            total += v * v
        assert _optim.sumsq_f64(x) == total


def test_sumsq_kernel_special_values(special_values):
    assert np.isnan(_optim.sumsq_f64(special_values))
    assert _optim.sumsq_f64(np.array([3e38, 3e38], np.float32)) == 2 * float(f32(3e38)) ** 2
    assert _optim.sumsq_f64(np.array([1e-40], np.float32)) == float(f32(1e-40)) ** 2


def test_norm_is_the_ordered_double_sum_and_scales_by_float32_coef(rng):
    grads = [rng.standard_normal(s).astype(np.float32) * 3 for s in SHAPES]
    ps = params_with_grads(grads)
    norm = ref_norm(grads)
    got = clip_grad_norm(ps, 1.5)
    assert got == float(f32(norm))
    coef = f32(float(f32(1.5)) / (norm + 1e-6))
    for p, g in zip(ps, grads):
        assert p.grad._data.tobytes() == (g * coef).tobytes()


def test_no_scaling_when_coef_is_at_least_one_and_none_grads_skipped(rng):
    grads = [rng.standard_normal(50).astype(np.float32), None]
    ps = params_with_grads(grads)
    norm = clip_grad_norm(ps, 1e3)
    assert ps[0].grad._data.tobytes() == grads[0].tobytes() and ps[1].grad is None
    assert norm == float(f32(np.linalg.norm(grads[0].astype(np.float64))))
    assert clip_grad_norm(params_with_grads([None]), 1.0) == 0.0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_norm_is_returned_without_scaling(bad):
    for norm_type in (2.0, float("inf")):
        g = np.array([1.0, bad, 3.0], np.float32)
        ps = params_with_grads([g.copy(), np.full(3, 9.0, np.float32)])
        norm = clip_grad_norm(ps, 1.0, norm_type)
        expected_nan = np.isnan(bad)
        assert math.isnan(norm) if expected_nan else norm == math.inf
        assert ps[1].grad._data.tobytes() == np.full(3, 9.0, np.float32).tobytes()


def test_infinity_norm(rng):
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads[3][5] = -7.25
    ps = params_with_grads(grads)
    assert clip_grad_norm(ps, 2.0, norm_type=float("inf")) == 7.25
    coef = f32(float(f32(2.0)) / (7.25 + 1e-6))
    assert ps[3].grad._data.tobytes() == (grads[3] * coef).tobytes()


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
def test_against_torch(rng, norm_type):
    torch = pytest.importorskip("torch")
    grads = [rng.standard_normal(s).astype(np.float32) for s in [(64, 33), (129,), (7, 3, 3)]]
    ps = params_with_grads(grads)
    tps = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for t, g in zip(tps, grads):
        t.grad = torch.tensor(g)
    norm = clip_grad_norm(ps, 0.5, norm_type)
    tnorm = torch.nn.utils.clip_grad_norm_(tps, 0.5, norm_type, foreach=False)
    assert norm == pytest.approx(float(tnorm), rel=1.7e-7)
    for p, t in zip(ps, tps):
        want = t.grad.numpy().astype(np.float64)
        assert np.max(np.abs(p.grad._data - want)) / np.max(np.abs(want)) <= 1.7e-7


def test_clip_value_clamps_and_keeps_nan(rng, special_values):
    torch = pytest.importorskip("torch")
    g = np.concatenate([special_values, rng.standard_normal(100).astype(np.float32)])
    ps = params_with_grads([g.copy(), None])
    clip_grad_value(ps, 0.75)
    want = torch.clamp(torch.tensor(g), -0.75, 0.75).numpy()
    assert ps[0].grad._data.tobytes() == want.tobytes()
    assert np.signbit(ps[0].grad._data[1]) and ps[1].grad is None


def test_same_bits_on_every_isa_and_thread_count(rng, isa, same_bits_everywhere):
    grads = [rng.standard_normal(n).astype(np.float32) * 10 for n in (0, 1, 15, 16, 17, 300_001)]
    grads[-1][:5] = [np.nan, 0.0, -0.0, 1e-40, -3e38]

    def run(_):
        ps = params_with_grads([g.copy() for g in grads])
        clip_grad_value(ps, 5.0)
        ps[-1].grad._data[0] = 1.0
        norm = clip_grad_norm(ps, 1.0)
        return [norm] + [p.grad._data for p in ps]
    same_bits_everywhere(run)


@pytest.mark.parametrize("call,name", [
    (lambda ps: clip_grad_norm(ps, -1.0), "max_norm"),
    (lambda ps: clip_grad_norm(ps, float("nan")), "max_norm"),
    (lambda ps: clip_grad_norm(ps, 1.0, norm_type=1.0), "norm_type"),
    (lambda ps: clip_grad_value(ps, -0.5), "clip_value"),
    (lambda ps: clip_grad_value(ps, "x"), "clip_value"),
    (lambda ps: clip_grad_norm([np.ones(3)], 1.0), "params"),
])
def test_bad_arguments(call, name):
    ps = params_with_grads([np.ones(3, np.float32)])
    with pytest.raises(ValueError, match=name):
        call(ps)
