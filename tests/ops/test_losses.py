"""Losses (docs/spec/training.txt section 2) against PyTorch, finite differences and own rules."""
import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
REDUCTIONS = ("mean", "sum", "none")


def _logits(rng, n=6, c=5):
    return (rng.standard_normal((n, c)) * 2).astype(np.float32)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.7])
def test_cross_entropy_matches_torch(rng, check_torch, reduction, smoothing):
    x = _logits(rng)
    target = np.array([0, 4, 2, -100, 1, 3], np.int64)
    check_torch(
        lambda a, t: F.cross_entropy(a, t, reduction=reduction, label_smoothing=smoothing),
        lambda a, t: TF.cross_entropy(a, t, reduction=reduction, label_smoothing=smoothing),
        x, target)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_matches_torch(rng, check_torch, reduction):
    logp = np.log(np.random.default_rng(3).dirichlet(np.ones(4), 7)).astype(np.float32)
    target = np.array([3, 0, -1, 2, 2, 1, 0], np.int64)
    check_torch(lambda a, t: F.nll_loss(a, t, ignore_index=-1, reduction=reduction),
                lambda a, t: TF.nll_loss(a, t, ignore_index=-1, reduction=reduction),
                logp, target)


def test_cross_entropy_gradient_by_finite_differences(rng, check_grad):
    x = _logits(rng, 4, 3)
    target = np.array([2, 0, 1, 1], np.int64)

    def ref64(a, t):
        shifted = a - a.max(1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
        nll = -logp[np.arange(len(t)), t].mean()
        return 0.8 * nll + 0.2 * (-logp.mean(1)).mean()

    check_grad(lambda a, t: F.cross_entropy(a, t, label_smoothing=0.2), x, target, ref64=ref64)


def test_cross_entropy_with_no_counted_row_is_nan(rng):
    x = om.tensor(_logits(rng, 3, 4), requires_grad=True)
    loss = F.cross_entropy(x, [-100, -100, -100])
    assert loss.shape == () and np.isnan(loss.item())
    assert F.cross_entropy(x, [-100, -100, -100], reduction="sum").item() == 0.0


def test_losses_are_rank_zero(rng):
    x = om.tensor(_logits(rng), requires_grad=True)
    assert F.cross_entropy(x, [0, 1, 2, 3, 4, 0]).shape == ()
    assert F.mse_loss(x, om.zeros(6, 5)).shape == ()
    assert F.l1_loss(x, om.zeros(6, 5), reduction="sum").shape == ()


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_and_l1_match_torch(rng, check_torch, reduction):
    p, t = rng.standard_normal((3, 4), np.float32), rng.standard_normal((3, 4), np.float32)
    t[0, :2] = p[0, :2]  # |d| = 0: the gradient there is 0, as PyTorch's
    check_torch(lambda a, b: F.mse_loss(a, b, reduction=reduction),
                lambda a, b: TF.mse_loss(a, b, reduction=reduction), p, t)
    check_torch(lambda a, b: F.l1_loss(a, b, reduction=reduction),
                lambda a, b: TF.l1_loss(a, b, reduction=reduction), p, t)


def test_losses_take_torch_positional_arguments(rng, check_torch):
    """PyTorch's slots: weight third, then size_average, ignore_index, reduce, reduction (and
    label_smoothing); mse_loss and l1_loss: size_average, reduce, reduction, weight."""
    x, w = _logits(rng), rng.uniform(0.5, 2, 5).astype(np.float32)
    target = np.array([0, 2, 4, 1, 2, 3])
    check_torch(lambda a: F.cross_entropy(a, target, om.tensor(w), None, 2, None, "sum", 0.1),
                lambda a: TF.cross_entropy(a, torch.from_numpy(target), torch.from_numpy(w),
                                           None, 2, None, "sum", 0.1), x)
    check_torch(lambda a: F.nll_loss(a, target, om.tensor(w), None, 1, None, "none"),
                lambda a: TF.nll_loss(a, torch.from_numpy(target), torch.from_numpy(w), None, 1,
                                      None, "none"), x)
    t = rng.standard_normal(x.shape).astype(np.float32)
    for ours, theirs in ((F.mse_loss, TF.mse_loss), (F.l1_loss, TF.l1_loss)):
        check_torch(lambda a, b: ours(a, b, None, None, "sum"),
                    lambda a, b: theirs(a, b, None, None, "sum"), x, t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_mse_and_l1_match_torch(rng, check_torch, check_grad, check_exact, reduction):
    """weight of the input's shape; its mean is Σ w·loss / Σ w, as PyTorch's."""
    p, t = rng.standard_normal((3, 4), np.float32), rng.standard_normal((3, 4), np.float32)
    w = rng.uniform(0.1, 2, (3, 4)).astype(np.float32)
    for ours, theirs in ((F.mse_loss, TF.mse_loss), (F.l1_loss, TF.l1_loss)):
        check_torch(lambda a, b, c: ours(a, b, reduction=reduction, weight=c),
                    lambda a, b, c: theirs(a, b, reduction=reduction, weight=c), p, t, w)
        check_exact(lambda a, b, c: ours(a, b, reduction=reduction, weight=c), p, t, w)
    ref64 = {"mean": lambda a, c: np.sum(c * (a - t) ** 2) / np.sum(c),
             "sum": lambda a, c: np.sum(c * (a - t) ** 2), "none": lambda a, c: c * (a - t) ** 2}
    check_grad(lambda a, c: F.mse_loss(a, t, reduction=reduction, weight=c), p, w,
               ref64=ref64[reduction])


def test_l1_gradient_is_zero_where_prediction_equals_target():
    p = om.tensor([1.0, 2.0, 3.0], requires_grad=True)
    F.l1_loss(p, om.tensor([1.0, 0.0, 5.0]), reduction="sum").backward()
    assert p.grad.numpy().tolist() == [0.0, 1.0, -1.0]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_matches_torch(rng, check_torch, reduction):
    x = (rng.standard_normal((4, 5)) * 3).astype(np.float32)
    t = rng.uniform(0, 1, (4, 5)).astype(np.float32)
    check_torch(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
                lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction),
                x, t, requires_grad=[True, False])


def test_bce_with_logits_is_stable_for_huge_logits():
    x = om.tensor([-1e4, -100.0, 100.0, 1e4, 0.0], requires_grad=True)
    t = om.tensor([0.0, 1.0, 0.0, 1.0, 0.5])
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [0.0, 100.0, 100.0, 0.0, np.log(2.0)],
                               rtol=1e-6, atol=0)
    loss.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_losses_give_the_same_bits_everywhere(rng, check_exact):
    x = _logits(rng, 20, 17)
    target = rng.integers(0, 17, 20)
    check_exact(lambda a, t: F.cross_entropy(a, t, label_smoothing=0.1), x, target)
    check_exact(F.binary_cross_entropy_with_logits, x, rng.uniform(0, 1, x.shape).astype(
        np.float32), requires_grad=[True, False])


@pytest.mark.parametrize("call, message", [
    (lambda x: F.cross_entropy(x, [0, 1, 2, 5, 0, 0]), "target 5 out of range"),
    (lambda x: F.cross_entropy(x, [0, 1, 2]), "does not match input"),
    (lambda x: F.cross_entropy(x, [0.0] * 6), "integer class indices"),
    (lambda x: F.cross_entropy(x, [0] * 6, reduction="avg"), "reduction must be one of"),
    (lambda x: F.cross_entropy(x, [0] * 6, label_smoothing=1.5), "label_smoothing"),
    (lambda x: F.nll_loss(x.sum(), 0), "input must have shape"),
    (lambda x: F.nll_loss(x[0], [0]), r"target of shape \(1,\) does not match input of shape "
                                      r"\(5,\): expected \(\)"),
    (lambda x: F.cross_entropy(x, [0] * 6, weight=om.ones(4)), r"weight of shape \(4,\)"),
    (lambda x: F.cross_entropy(x, [0] * 6, om.ones(4)), r"weight of shape \(4,\)"),
    (lambda x: F.mse_loss(x, x, weight=om.ones(5)), r"mse_loss: weight of shape \(5,\) must "
                                                    r"have the input's shape \(6, 5\)"),
    (lambda x: F.l1_loss(x, x, weight=om.tensor([1, 2])), "l1_loss: weight must be float32"),
    (lambda x: F.cross_entropy(x, om.zeros(6, 4)), r"class probabilities .* \(6, 5\)"),
    (lambda x: F.binary_cross_entropy_with_logits(x, om.zeros(6)), "must match input"),
])
def test_bad_arguments_raise_naming_them(rng, call, message):
    x = om.tensor(_logits(rng), requires_grad=True)
    with pytest.raises((ValueError, TypeError), match=message):
        call(x)


def _cross_entropy_pair(reduction, smoothing, w):
    """Our cross_entropy and PyTorch's with the same options (w: a class weight or None)."""
    return (lambda a, b: F.cross_entropy(a, b, reduction=reduction, label_smoothing=smoothing,
                                         weight=None if w is None else om.tensor(w)),
            lambda a, b: TF.cross_entropy(a, b, reduction=reduction, label_smoothing=smoothing,
                                          weight=None if w is None else torch.from_numpy(w)))


# (input shape, target shape): an input (C,), (N, C) or (N, C, d1, ...) and its class indices.
CLASS_SHAPES = [((5,), ()), ((6, 5), (6,)), ((3, 5, 4), (3, 4)), ((2, 5, 3, 2), (2, 3, 2))]


def _targets(rng, shape, classes, ignore=True):
    t = rng.integers(0, classes, shape)
    if ignore and t.size > 1:
        t.reshape(-1)[1] = -100
    return np.asarray(t, np.int64)


@pytest.mark.parametrize("shape,tshape", CLASS_SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_shapes_and_weights_match_torch(rng, check_torch, shape, tshape,
                                                      reduction, weighted, smoothing):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    t = _targets(rng, tshape, 5)
    w = rng.uniform(0.2, 2.0, 5).astype(np.float32) if weighted else None
    check_torch(*_cross_entropy_pair(reduction, smoothing, w), x, t)


@pytest.mark.parametrize("shape,tshape", CLASS_SHAPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_shapes_and_weights_match_torch(rng, check_torch, shape, tshape, reduction,
                                                 weighted):
    logp = np.log(rng.dirichlet(np.ones(5), int(np.prod(shape)) // 5)).astype(np.float32)
    logp = np.moveaxis(logp.reshape(tshape + (5,)), -1, min(1, len(shape) - 1)).copy()
    t = _targets(rng, tshape, 5)
    w = rng.uniform(0.2, 2.0, 5).astype(np.float32) if weighted else None
    check_torch(
        lambda a, b: F.nll_loss(a, b, reduction=reduction,
                                weight=None if w is None else om.tensor(w)),
        lambda a, b: TF.nll_loss(a, b, reduction=reduction,
                                 weight=None if w is None else torch.from_numpy(w)),
        logp, t)


@pytest.mark.parametrize("shape", [(5,), (6, 5), (3, 5, 4)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probability_targets_match_torch(rng, check_torch, shape, reduction,
                                                       weighted, smoothing):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    p = np.moveaxis(rng.dirichlet(np.ones(5), int(np.prod(shape)) // 5).astype(np.float32)
                    .reshape(shape[:1] + shape[2:] + (5,) if len(shape) > 1 else (5,)),
                    -1, min(1, len(shape) - 1)).copy()
    w = rng.uniform(0.2, 2.0, 5).astype(np.float32) if weighted else None
    # The probabilities are differentiable too, as in PyTorch.
    check_torch(*_cross_entropy_pair(reduction, smoothing, w), x, p)


def test_weighted_and_soft_cross_entropy_by_finite_differences(rng, check_grad):
    x = (rng.standard_normal((2, 3, 2)) * 2).astype(np.float32)
    t = np.array([[2, 0], [-100, 1]], np.int64)
    w = om.tensor(np.float32([0.5, 2.0, 1.5]))

    def soft64(a, p):
        z = a - a.max(1, keepdims=True)
        logq = z - np.log(np.exp(z).sum(1, keepdims=True))
        return -(logq * (p * 0.8 + 0.2 / 3)).sum(1).mean()

    check_grad(lambda a: F.cross_entropy(a, t, weight=w, label_smoothing=0.1), x)
    check_grad(lambda a: F.nll_loss(a, t, weight=w, reduction="sum"), x)
    p = rng.dirichlet(np.ones(3), 4).reshape(2, 2, 3).transpose(0, 2, 1).astype(np.float32)
    check_grad(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.2), x, p.copy(),
               ref64=soft64)


def test_new_loss_forms_give_the_same_bits_everywhere(rng, check_exact):
    x = (rng.standard_normal((4, 17, 6)) * 2).astype(np.float32)
    t = rng.integers(0, 17, (4, 6))
    w = om.tensor(rng.uniform(0.5, 2, 17).astype(np.float32))
    check_exact(lambda a, b: F.cross_entropy(a, b, weight=w, label_smoothing=0.1), x, t)
    p = rng.dirichlet(np.ones(17), 24).reshape(4, 6, 17).transpose(0, 2, 1).astype(np.float32)
    check_exact(lambda a, b: F.cross_entropy(a, b, weight=w), x, p.copy(),
                requires_grad=[True, False])


def test_weighted_mean_with_every_row_ignored_is_nan():
    x = om.tensor(np.zeros((2, 3), np.float32), requires_grad=True)
    loss = F.nll_loss(x, [-100, -100], weight=om.ones(3))
    assert np.isnan(loss.item())
    assert F.cross_entropy(x, [-100, -100], reduction="none", weight=om.ones(3)).tolist() == \
        [0.0, 0.0]
