"""Conv padding modes, avg_pool options (ceil_mode, count_include_pad, divisor_override,
avg_pool1d) and binary cross entropy with weight / pos_weight: against PyTorch forward and
backward, against float64 central differences, exact-mode bits, and the errors."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F
from onemodel import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _x(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# -- conv padding modes ---------------------------------------------------------------------
def _conv_pair(dims, *args, **kwargs):
    ours = getattr(nn, f"Conv{dims}d")(*args, **kwargs)
    theirs = getattr(torch.nn, f"Conv{dims}d")(*args, **kwargs)
    ours.load_state_dict({k: om.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    return ours, theirs


CONV_CASES = [
    (1, (2, 3, 9), dict(kernel_size=3, padding=2)),
    (1, (3, 8), dict(kernel_size=4, padding="same", dilation=2)),
    (1, (2, 3, 9), dict(kernel_size=3, padding=1, stride=2)),
    (2, (2, 3, 6, 7), dict(kernel_size=3, padding=(1, 2))),
    (2, (2, 3, 6, 7), dict(kernel_size=(2, 4), padding="same")),
    (2, (3, 5, 6), dict(kernel_size=3, padding=1, stride=(2, 1), dilation=(1, 2))),
    (2, (2, 3, 6, 7), dict(kernel_size=3, padding="valid")),
]


# Zero 'same' padding of an even kernel is asymmetric, which functional conv refuses.
@pytest.mark.parametrize("dims, shape, kwargs, mode", [
    case + (mode,) for case in CONV_CASES for mode in ("reflect", "replicate", "circular", "zeros")
    if mode != "zeros" or not (case[2].get("padding") == "same" and case[2]["kernel_size"] in (
        4, (2, 4)))])
def test_conv_padding_modes_match_torch(dims, shape, kwargs, mode, rng, assert_close):
    ours, theirs = _conv_pair(dims, 3, 4, padding_mode=mode, **kwargs)
    x = _x(rng, *shape)
    a, b = om.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    y, ty = ours(a), theirs(b)
    assert_close(y.detach().numpy(), ty.detach().numpy(), 1e-5)
    g = _x(rng, *ty.shape)
    y.backward(g)
    ty.backward(torch.from_numpy(g))
    assert_close(a.grad.numpy(), b.grad.numpy(), 1e-5, "input grad")
    assert_close(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), 1e-5, "weight grad")
    assert_close(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), 1e-5, "bias grad")
    assert repr(ours).endswith("" if mode == "zeros" else f"padding_mode={mode!r})")


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_mode_gradient_and_bits(mode, rng, check_grad, check_exact):
    ours, theirs = _conv_pair(2, 2, 3, kernel_size=3, padding=(2, 1), padding_mode=mode)
    theirs = theirs.double()
    check_grad(ours, _x(rng, 1, 2, 4, 3),
               ref64=lambda a: theirs(torch.from_numpy(a)).detach().numpy())
    check_exact(ours, _x(rng, 2, 2, 5, 6))


@pytest.mark.parametrize("make, error, message", [
    (lambda: nn.Conv2d(2, 2, 3, padding_mode="mirror"), ValueError,
     "Conv2d: padding_mode must be one of zeros, reflect, replicate, circular"),
    (lambda: nn.Conv1d(2, 2, 3, padding="same", stride=2, padding_mode="reflect"), ValueError,
     r"Conv1d: padding='same' needs stride 1, got stride \(2,\)"),
    (lambda: nn.Conv2d(2, 2, 3, padding="full"), ValueError, "Conv2d: padding must be"),
])
def test_conv_padding_mode_bad_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_reflect_padding_wider_than_the_input_is_refused(rng):
    m = nn.Conv1d(2, 2, 3, padding=4, padding_mode="reflect")
    with pytest.raises(ValueError, match=r"pad: padding \(4, 4\) of dim 2 \(size 3\)"):
        m(om.tensor(_x(rng, 1, 2, 3)))


# -- average pooling ------------------------------------------------------------------------
POOL_CASES = [
    ((2, 3, 7, 8), (3, 2, 1)),
    ((2, 3, 7, 8), ((3, 2), (2, 3), (1, 1))),
    ((1, 2, 5, 5), (2, 3, 1)),  # with ceil_mode a last window would start in the padding
    ((1, 2, 6, 5), (3, None, 1)),
    ((3, 5, 6), (2, 1, 0)),
    ((1, 1, 4, 9), ((1, 4), (1, 3), (0, 2))),
    ((2, 3, 9, 9), ((3, 3), (1, 1), (1,))),  # a 1-tuple stands for both axes
    ((1, 1, 4, 4), ((2, 2), (), (0,))),  # an empty stride is the default, the kernel size
]


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("divisor_override", [None, 5, -2])
@pytest.mark.parametrize("shape, args", POOL_CASES)
def test_avg_pool2d_matches_torch(shape, args, ceil_mode, count_include_pad, divisor_override,
                                  rng, check_torch):
    full = args + (ceil_mode, count_include_pad, divisor_override)  # positional, as torch
    check_torch(lambda a: F.avg_pool2d(a, *full), lambda a: TF.avg_pool2d(a, *full),
                _x(rng, *shape), tol=1e-6, grad_tol=1e-6)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("shape, args", [((2, 3, 9), (3, 2, 1)), ((3, 7), (2, None, 1)),
                                         ((1, 2, 5), ((4,), (3,), (2,))), ((2, 2, 6), (1,))])
def test_avg_pool1d_matches_torch(shape, args, ceil_mode, count_include_pad, rng, check_torch):
    kwargs = dict(ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    check_torch(lambda a: F.avg_pool1d(a, *args, **kwargs),
                lambda a: TF.avg_pool1d(a, *args, **kwargs), _x(rng, *shape), tol=1e-6,
                grad_tol=1e-6)


@pytest.mark.parametrize("name, args, kwargs", [
    ("AvgPool2d", (3, 2, 1), dict(ceil_mode=True, count_include_pad=False)),
    ("AvgPool2d", (2,), dict(divisor_override=3)),
    ("AvgPool1d", (3, 2, 1), dict(ceil_mode=True)),
    ("AvgPool1d", (2,), dict(count_include_pad=False)),
])
def test_avg_pool_modules_match_torch(name, args, kwargs, rng, check_torch):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    shape = (2, 3, 7, 6) if name == "AvgPool2d" else (2, 3, 7)
    check_torch(ours, theirs, _x(rng, *shape), tol=1e-6, grad_tol=1e-6)
    if name == "AvgPool1d":
        assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                    dict(kernel_size=2, divisor_override=3),
                                    dict(kernel_size=3, padding=1, count_include_pad=False)])
def test_avg_pool2d_gradient_and_bits(kwargs, rng, check_grad, check_exact):
    check_grad(lambda a: F.avg_pool2d(a, **kwargs), _x(rng, 1, 2, 5, 4),
               ref64=lambda a: TF.avg_pool2d(torch.from_numpy(a), **kwargs).numpy())
    check_exact(lambda a: F.avg_pool2d(a, **kwargs), _x(rng, 2, 3, 9, 8))
    check_exact(lambda a: F.avg_pool1d(a, 3, 2, 1, True), _x(rng, 2, 3, 9))


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.avg_pool2d(x, 2, divisor_override=0), ValueError,
     "avg_pool2d: divisor_override must be a non-zero integer or None, got 0"),
    (lambda x: F.avg_pool2d(x, 2, divisor_override=1.5), ValueError, "got 1.5"),
    (lambda x: F.avg_pool1d(x, 2), ValueError,
     r"avg_pool1d: input must be \(N, C, L\) or \(C, L\), got shape \(1, 2, 4, 4\)"),
    (lambda x: F.avg_pool1d(x[0], (2, 2)), TypeError,
     "avg_pool1d: kernel_size must be an int or a tuple of 1 ints"),
    (lambda x: F.avg_pool1d(x[0], 2, padding=2), ValueError,
     "avg_pool1d: padding .* must be at most half of kernel_size"),
])
def test_avg_pool_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call(om.tensor(np.ones((1, 2, 4, 4), np.float32)))


# -- binary cross entropy -------------------------------------------------------------------
REDUCTIONS = ["mean", "sum", "none"]
BCE_WEIGHTS = [(None, None), ((4, 5), None), ((5,), None), ((4, 1), None), (None, (5,)),
               (None, (4, 5)), (None, (1,)), ((1, 5), (5,))]


def _weights(rng, weight, pos_weight):
    return [None if s is None else rng.uniform(0.2, 2.0, s).astype(np.float32)
            for s in (weight, pos_weight)]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight, pos_weight", BCE_WEIGHTS)
def test_bce_with_logits_weights_match_torch(weight, pos_weight, reduction, rng, check_torch):
    x = (_x(rng, 4, 5) * 4).astype(np.float32)
    t = rng.uniform(0, 1, (4, 5)).astype(np.float32)
    w, p = _weights(rng, weight, pos_weight)
    inputs = [x, t] + [a for a in (w, p) if a is not None]

    def call(fn):
        def run(x, t, *rest):
            rest = list(rest)
            kw = dict(weight=rest.pop(0) if w is not None else None,
                      pos_weight=rest.pop(0) if p is not None else None)
            return fn(x, t, reduction=reduction, **kw)
        return run

    # Gradients for input and target (PyTorch differentiates neither weight).
    check_torch(call(F.binary_cross_entropy_with_logits),
                call(TF.binary_cross_entropy_with_logits), *inputs, tol=1e-6, grad_tol=1e-5,
                requires_grad=[True, True] + [False] * (len(inputs) - 2))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight", [None, (4, 5), (5,), (4, 1)])
def test_bce_matches_torch(weight, reduction, rng, check_torch):
    x = rng.uniform(0.02, 0.98, (4, 5)).astype(np.float32)
    t = rng.uniform(0, 1, (4, 5)).astype(np.float32)
    w = _weights(rng, weight, None)[0]
    check_torch(lambda a, b: F.binary_cross_entropy(a, b, None if w is None else om.tensor(w),
                                                    reduction=reduction),
                lambda a, b: TF.binary_cross_entropy(a, b, None if w is None else
                                                     torch.from_numpy(w), reduction=reduction),
                x, t, tol=1e-6, grad_tol=1e-5)


def test_bce_of_rank_0_tensors(rng, check_torch):
    w = np.float32(1.5)
    check_torch(lambda a, b: F.binary_cross_entropy(a, b, om.tensor(w)),
                lambda a, b: TF.binary_cross_entropy(a, b, torch.tensor(w)),
                np.array(0.3, np.float32), np.array(0.6, np.float32), tol=1e-6)


def test_bce_at_probabilities_zero_and_one(assert_close):
    # Each log is clamped at -100; the input gradient divides by max(x(1-x), 1e-12), as torch.
    x = np.array([0.0, 1.0, 0.0, 1.0, 1e-30, 0.5], np.float32)
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.5, 0.25], np.float32)
    a, b = om.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    ta, tb = om.tensor(t, requires_grad=True), torch.from_numpy(t).requires_grad_()
    loss, ref = F.binary_cross_entropy(a, ta, reduction="none"), TF.binary_cross_entropy(
        b, tb, reduction="none")
    assert_close(loss.detach().numpy(), ref.detach().numpy(), 1e-6)
    loss.sum().backward()
    ref.sum().backward()
    assert_close(a.grad.numpy(), b.grad.numpy(), 1e-6, "input grad")
    assert_close(ta.grad.numpy(), tb.grad.numpy(), 1e-6, "target grad")


def test_bce_gradients_central_differences(rng, check_grad):
    x = rng.uniform(0.1, 0.9, (3, 4)).astype(np.float32)
    t = rng.uniform(0, 1, (3, 4)).astype(np.float32)
    w = rng.uniform(0.5, 2, (4,)).astype(np.float32)

    def bce64(x, t, w):
        return np.sum(-w * (t * np.log(x) + (1 - t) * np.log(1 - x)))

    check_grad(lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction="sum"), x, t, w,
               ref64=bce64)
    z = _x(rng, 3, 4) * 3
    p = rng.uniform(0.5, 3, (4,)).astype(np.float32)

    def logits64(z, t, w, p):
        log_sigmoid = -np.logaddexp(0, -z)
        return np.mean(-w * (p * t * log_sigmoid + (1 - t) * (log_sigmoid - z)))

    check_grad(lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, pos_weight=d),
               z, t, w, p, ref64=logits64)


def test_bce_bits(rng, check_exact):
    x = rng.uniform(0.01, 0.99, (6, 7)).astype(np.float32)
    t = rng.uniform(0, 1, (6, 7)).astype(np.float32)
    w = rng.uniform(0.5, 2, (7,)).astype(np.float32)
    check_exact(lambda a, b: F.binary_cross_entropy(a, b, w), x, t)
    check_exact(lambda a, b: F.binary_cross_entropy_with_logits(a, b, w, pos_weight=w), x, t)


def test_bce_with_logits_pos_weight_stays_stable_for_huge_logits():
    x = om.tensor([-1e4, 1e4, 20.0, -100.0], requires_grad=True)
    t = om.tensor([0.0, 1.0, 1.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(x, t, pos_weight=om.tensor([3.0]),
                                              reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [0.0, 0.0, 3 * np.exp(-20.0), 0.0],
                               rtol=1e-6, atol=0)
    loss.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("name, kwargs", [
    ("BCELoss", dict(weight=(3,))), ("BCELoss", dict(reduction="sum")),
    ("BCEWithLogitsLoss", dict(weight=(2, 3), pos_weight=(3,))),
    ("BCEWithLogitsLoss", dict(pos_weight=(3,), reduction="none")),
])
def test_bce_modules_match_torch(name, kwargs, rng, check_torch):
    arrays = {k: rng.uniform(0.5, 2, v).astype(np.float32) for k, v in kwargs.items()
              if k != "reduction"}
    extra = {k: v for k, v in kwargs.items() if k == "reduction"}
    ours = getattr(nn, name)(**{k: om.tensor(v) for k, v in arrays.items()}, **extra)
    theirs = getattr(torch.nn, name)(**{k: torch.from_numpy(v) for k, v in arrays.items()},
                                     **extra)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = rng.uniform(0.05, 0.95, (2, 3)).astype(np.float32) if name == "BCELoss" else _x(rng, 2, 3)
    t = rng.uniform(0, 1, (2, 3)).astype(np.float32)
    check_torch(ours, theirs, x, t, tol=1e-6, grad_tol=1e-5)


@pytest.mark.parametrize("call, error, message", [
    (lambda x, t: F.binary_cross_entropy(x * 2, t), ValueError,
     r"binary_cross_entropy: input values must be in \[0, 1\]"),
    (lambda x, t: F.binary_cross_entropy(x, t[0]), ValueError,
     r"target of shape \(3,\) must match input of shape \(2, 3\)"),
    (lambda x, t: F.binary_cross_entropy(x, t, om.ones(2)), ValueError,
     r"binary_cross_entropy: weight of shape \(2,\) does not broadcast to the input's shape"),
    (lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=om.ones(2, 2, 3)),
     ValueError, r"pos_weight of shape \(2, 2, 3\) does not broadcast"),
    (lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="avg"), ValueError,
     "reduction must be one of"),
    (lambda x, t: F.binary_cross_entropy(x, t.numpy().astype(np.int64)), TypeError,
     "binary_cross_entropy: target must be float32"),
])
def test_bce_bad_arguments(call, error, message):
    x = om.tensor(np.full((2, 3), 0.6, np.float32))
    with pytest.raises(error, match=message):
        call(x, om.tensor(np.full((2, 3), 1.0, np.float32)))
