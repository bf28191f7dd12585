"""ctc_loss against PyTorch (float32 and float64), central differences, argument errors, and the
same bits on every ISA path and thread count."""
from __future__ import annotations

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def batch(rng, steps=12, size=6, classes=5, max_target=4, blank=0):
    """Random logits, padded targets without the blank, and lengths with the edge cases: an
    empty target, an empty input, a full-length input, repeated labels."""
    x = rng.standard_normal((steps, size, classes)).astype(np.float32) * 2
    labels = [c for c in range(classes) if c != blank]
    targets = rng.choice(labels, (size, max_target))
    target_lengths = rng.integers(1, max_target + 1, size)
    input_lengths = rng.integers(2 * max_target + 1, steps + 1, size)
    target_lengths[0] = 0
    input_lengths[1], target_lengths[1] = 0, 0
    input_lengths[2] = steps
    targets[3, :2] = labels[0]
    return x, targets, input_lengths, target_lengths


def torch_loss(x, targets, il, tl, dtype=torch.float32, **kw):
    xt = torch.tensor(x, dtype=dtype, requires_grad=True)
    loss = TF.ctc_loss(xt.log_softmax(2), torch.tensor(targets), torch.tensor(il),
                       torch.tensor(tl), **kw)
    return xt, loss


def om_loss(x, targets, il, tl, **kw):
    xo = om.tensor(x, requires_grad=True)
    return xo, F.ctc_loss(F.log_softmax(xo, 2), targets, il, tl, **kw)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_matches_torch(rng, assert_close, reduction, zero_infinity):
    x, targets, il, tl = batch(rng)
    il[4], tl[4] = 2, 2
    targets[4, 1] = targets[4, 0]  # a repeated label needs 3 steps: inf, or 0 with zero_infinity
    kw = dict(reduction=reduction, zero_infinity=zero_infinity)
    xt, lt = torch_loss(x, targets, il, tl, **kw)
    xo, lo = om_loss(x, targets, il, tl, **kw)
    assert_close(lo.detach().numpy(), lt.detach().numpy(), 1e-6, "loss")
    g = rng.standard_normal(lt.shape).astype(np.float32)
    lt.backward(torch.tensor(g))
    lo.backward(g)
    # The posterior exp(alpha + beta + nll - lp) carries the rounding of nll (float32 ulp of a
    # loss near 20) into every entry, in PyTorch as here: about 1e-5 of the largest gradient.
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-4, "grad")


def test_closer_to_float64_than_torch_float32(rng):
    x, targets, il, tl = batch(rng, steps=40, size=8, classes=20, max_target=12)
    x64, l64 = torch_loss(x, targets, il, tl, torch.float64, reduction="sum")
    x32, l32 = torch_loss(x, targets, il, tl, reduction="sum")
    xo, lo = om_loss(x, targets, il, tl, reduction="sum")
    for t in (l64, l32):
        t.backward()
    lo.backward()
    ref = x64.grad.numpy()
    ours = np.abs(xo.grad.numpy() - ref).max()
    theirs = np.abs(x32.grad.numpy() - ref).max()
    assert ours <= 1.5 * theirs, (ours, theirs)
    assert abs(lo.item() - l64.item()) <= 2 * abs(l32.item() - l64.item()) + 1e-5


def test_gradient_convention_on_arbitrary_inputs(rng, assert_close):
    # PyTorch returns exp(lp) - posterior whatever lp is; so do we.
    x, targets, il, tl = batch(rng)
    xt = torch.tensor(x, requires_grad=True)
    TF.ctc_loss(xt, torch.tensor(targets), torch.tensor(il), torch.tensor(tl),
                reduction="sum").backward()
    xo = om.tensor(x, requires_grad=True)
    F.ctc_loss(xo, targets, il, tl, reduction="sum").backward()
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-4, "grad")


def test_concatenated_targets_equal_padded(rng):
    x, targets, il, tl = batch(rng)
    flat = np.concatenate([targets[b, :tl[b]] for b in range(len(tl))])
    lp = F.log_softmax(om.tensor(x), 2)
    a = F.ctc_loss(lp, targets, il, tl, reduction="none").numpy()
    b = F.ctc_loss(lp, flat, il, tl, reduction="none").numpy()
    assert a.tobytes() == b.tobytes()


def test_edge_values(rng):
    x, targets, il, tl = batch(rng)
    il[4], tl[4] = 2, 2
    targets[4, :2] = 1  # a repeated label needs three steps
    loss = F.ctc_loss(F.log_softmax(om.tensor(x), 2), targets, il, tl, reduction="none")
    assert loss.numpy()[1] == 0.0  # empty input, empty target
    assert loss.numpy()[4] == np.inf
    assert np.isfinite(np.delete(loss.numpy(), 4)).all()
    il[4] = 3
    loss = F.ctc_loss(F.log_softmax(om.tensor(x), 2), targets, il, tl, reduction="none")
    assert np.isfinite(loss.numpy()[4])


def test_mean_divides_by_clamped_target_lengths(rng):
    x, targets, il, tl = batch(rng)
    lp = F.log_softmax(om.tensor(x), 2)
    none = F.ctc_loss(lp, targets, il, tl, reduction="none").numpy().astype(np.float64)
    mean = F.ctc_loss(lp, targets, il, tl).item()
    assert mean == pytest.approx(np.mean(none / np.maximum(tl, 1)), rel=1e-6)


def ctc64(x, targets, il, tl):
    """Per-row negative log-likelihood in float64 by the textbook alpha recursion on log_softmax."""
    lp = x - np.log(np.exp(x - x.max(2, keepdims=True)).sum(2, keepdims=True)) \
        - x.max(2, keepdims=True)
    out = []
    for b in range(x.shape[1]):
        if il[b] == 0:
            out.append(0.0 if tl[b] == 0 else np.inf)
            continue
        ext = [0]
        for c in targets[b, :tl[b]]:
            ext += [int(c), 0]
        a = np.full(len(ext), -np.inf)
        a[0] = lp[0, b, ext[0]]
        if len(ext) > 1:
            a[1] = lp[0, b, ext[1]]
        for t in range(1, il[b]):
            prev = a.copy()
            for s in range(len(ext)):
                terms = [prev[s]] + ([prev[s - 1]] if s > 0 else []) + \
                    ([prev[s - 2]] if s > 1 and ext[s] != 0 and ext[s] != ext[s - 2] else [])
                a[s] = np.logaddexp.reduce(terms) + lp[t, b, ext[s]]
        out.append(-np.logaddexp.reduce(a[-2:]))
    return np.array(out)


def test_central_differences(rng, check_grad):
    x, targets, il, tl = batch(rng, steps=6, size=4, classes=4, max_target=2)
    check_grad(lambda v: F.ctc_loss(F.log_softmax(v, 2), targets, il, tl, reduction="none"),
               x, ref64=lambda v: ctc64(v, targets, il, tl), tol=1e-3)


def test_exact_on_every_path_and_thread_count(rng, check_exact):
    x, targets, il, tl = batch(rng, steps=30, size=7, classes=40, max_target=13)
    check_exact(lambda v: F.ctc_loss(v, targets, il, tl, reduction="none"),
                np.log(np.abs(x) + 1e-3).astype(np.float32) - 5)


@pytest.mark.parametrize("change, match", [
    (dict(targets=np.array([[1, 5]] * 6)), "targets must be class indices"),
    (dict(targets=np.array([[1, -1]] * 6)), "targets must be class indices"),
    (dict(targets=np.array([[1, 0]] * 6)), "other than the blank"),
    (dict(targets=np.ones((5, 2), np.int64)), "targets of shape"),
    (dict(targets=np.ones((6, 1), np.int64)), "longest target length 2"),
    (dict(targets=np.ones(11, np.int64)), "sum of target_lengths = 12"),
    (dict(targets=np.ones((6, 2, 1), np.int64)), "targets must be"),
    (dict(input_lengths=[12] * 5), "input_lengths of shape"),
    (dict(target_lengths=[2] * 7), "target_lengths of shape"),
    (dict(input_lengths=[13] + [12] * 5), "input_lengths must be <= 12"),
    (dict(input_lengths=[-1] + [12] * 5), "input_lengths must be >= 0"),
    (dict(target_lengths=[-1] + [2] * 5), "target_lengths must be >= 0"),
    (dict(blank=5), "blank must be"),
    (dict(blank=-1), "blank must be"),
    (dict(reduction="avg"), "reduction must be"),
])
def test_bad_arguments(rng, change, match):
    x = rng.standard_normal((12, 6, 5)).astype(np.float32)
    args = dict(log_probs=om.tensor(x), targets=np.ones((6, 2), np.int64),
                input_lengths=[12] * 6, target_lengths=[2] * 6)
    args.update(change)
    with pytest.raises(ValueError, match=match):
        F.ctc_loss(**args)


def test_bad_types(rng):
    x = om.tensor(rng.standard_normal((4, 2, 3)).astype(np.float32))
    with pytest.raises(TypeError, match="targets must hold integers"):
        F.ctc_loss(x, np.ones((2, 1), np.float32), [4, 4], [1, 1])
    with pytest.raises(ValueError, match=r"shape \(T, B, C\)"):
        F.ctc_loss(om.tensor(x.numpy()[0]), np.ones((2, 1)), [4, 4], [1, 1])
    with pytest.raises(TypeError, match="float32"):
        F.ctc_loss(om.tensor(np.zeros((4, 2, 3), np.int64)), np.ones((2, 1)), [4, 4], [1, 1])


def test_target_longer_than_input_counts_as_zero_with_zero_infinity(rng):
    x = rng.standard_normal((4, 2, 5)).astype(np.float32)
    xo = om.tensor(x, requires_grad=True)
    loss = F.ctc_loss(F.log_softmax(xo, 2), np.ones((2, 6), np.int64), [4, 4], [6, 2],
                      reduction="none", zero_infinity=True)
    xt = torch.tensor(x, requires_grad=True)
    expected = TF.ctc_loss(xt.log_softmax(2), torch.ones((2, 6), dtype=torch.long),
                           torch.tensor([4, 4]), torch.tensor([6, 2]), reduction="none",
                           zero_infinity=True)
    assert loss.detach().numpy()[0] == 0.0 and expected[0].item() == 0.0
    loss.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), atol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_unalignable_target_is_infinite_or_zero_never_an_error(rng, assert_close, reduction,
                                                               zero_infinity):
    # Row 0: longer than its input; row 1: fits only without the blank that "1 1" needs.
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    targets = np.array([[1, 2, 3, 4, 1, 2], [1, 1, 1, 0, 0, 0], [2, 3, 0, 0, 0, 0]])
    il, tl = [4, 4, 4], [6, 3, 2]
    xo, ours = om_loss(x, targets, il, tl, reduction=reduction, zero_infinity=zero_infinity)
    xt, want = torch_loss(x, targets, il, tl, reduction=reduction, zero_infinity=zero_infinity)
    assert_close(ours.detach().numpy(), want.detach().numpy())
    if not zero_infinity:
        assert np.isinf(ours.detach().numpy()).any()
    g = np.ones(ours.shape, np.float32)
    ours.backward(g)
    want.backward(torch.from_numpy(g))
    assert_close(xo.grad.numpy(), xt.grad.numpy())
    assert np.isnan(xo.grad.numpy()).any() != zero_infinity
