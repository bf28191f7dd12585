"""Loss modules against torch.nn's (forward and backward, every reduction and option the
functional losses support), central differences, and the refusal of unsupported arguments."""
import numpy as np
import pytest

from onemodel import nn

torch = pytest.importorskip("torch")
REDUCTIONS = ("mean", "sum", "none")


def logits(rng, n=6, c=5):
    return (rng.standard_normal((n, c)) * 2).astype(np.float32)


def pair(name, **kwargs):
    """The forward of our loss module and of torch's, built with the same arguments."""
    ours, ref = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    return (lambda *a: ours(*a)), (lambda *a: ref(*a))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [{}, {"ignore_index": 2}, {"label_smoothing": 0.2},
                                   {"ignore_index": 1, "label_smoothing": 0.5}])
def test_cross_entropy_loss_matches_torch(rng, check_torch, reduction, extra):
    target = np.array([0, 1, 2, 3, 4, 2])
    check_torch(*pair("CrossEntropyLoss", reduction=reduction, **extra), logits(rng), target)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("extra", [{}, {"ignore_index": 3}])
def test_nll_loss_matches_torch(rng, check_torch, reduction, extra):
    logp = np.log(np.abs(logits(rng)) + 0.1).astype(np.float32)
    check_torch(*pair("NLLLoss", reduction=reduction, **extra), logp, np.array([3, 1, 0, 3, 4, 2]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["CrossEntropyLoss", "NLLLoss"])
def test_class_weights_and_spatial_inputs_match_torch(rng, check_torch, reduction, name):
    w = rng.uniform(0.2, 2.0, 5).astype(np.float32)
    ours = getattr(nn, name)(weight=w, reduction=reduction,
                             ignore_index=2)
    ref = getattr(torch.nn, name)(weight=torch.from_numpy(w), reduction=reduction,
                                  ignore_index=2)
    x = (rng.standard_normal((3, 5, 4)) * 2).astype(np.float32)
    target = rng.integers(0, 5, (3, 4))
    check_torch(ours, ref, x, target)
    np.testing.assert_array_equal(ours.state_dict()["weight"], w)
    assert list(ref.state_dict()) == list(ours.state_dict()) == ["weight"]


def test_cross_entropy_loss_takes_probabilities(rng, check_torch):
    p = rng.dirichlet(np.ones(5), 6).astype(np.float32)
    check_torch(nn.CrossEntropyLoss(label_smoothing=0.1),
                torch.nn.CrossEntropyLoss(label_smoothing=0.1), logits(rng), p)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["MSELoss", "L1Loss", "BCEWithLogitsLoss"])
def test_elementwise_losses_match_torch(rng, check_torch, reduction, name):
    x = logits(rng, 4, 3)
    t = rng.uniform(0, 1, (4, 3)).astype(np.float32)
    check_torch(*pair(name, reduction=reduction), x, t, requires_grad=[True, False])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_matches_torch(rng, check_torch, reduction, zero_infinity):
    x = rng.standard_normal((8, 3, 5)).astype(np.float32)
    targets = np.array([[2, 3, 3], [1, 4, 0], [1, 1, 1]])
    ours, ref = pair("CTCLoss", blank=0, reduction=reduction, zero_infinity=zero_infinity)
    il, tl = np.array([8, 6, 4]), np.array([3, 2, 3])  # the last cannot be aligned
    check_torch(lambda v, t: ours(v.log_softmax(2), t, il, tl),
                lambda v, t: ref(v.log_softmax(2), t, torch.from_numpy(il),
                                 torch.from_numpy(tl)), x, targets, grad_tol=1e-4)


def test_ctc_loss_other_blank_matches_torch(rng, check_torch):
    x = rng.standard_normal((6, 2, 4)).astype(np.float32)
    ours, ref = pair("CTCLoss", blank=3)
    il, tl = np.array([6, 5]), np.array([2, 1])
    check_torch(lambda v, t: ours(v.log_softmax(2), t, il, tl),
                lambda v, t: ref(v.log_softmax(2), t, torch.from_numpy(il),
                                 torch.from_numpy(tl)), x, np.array([[0, 2], [1, 1]]),
                grad_tol=1e-4)


def test_cross_entropy_loss_gradient_by_central_differences(rng, check_grad):
    loss = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=4)
    check_grad(lambda x: loss(x, np.array([0, 4, 2, 1])), logits(rng, 4, 5))


def test_mse_loss_gradient_by_central_differences(rng, check_grad):
    t = rng.standard_normal((3, 2)).astype(np.float32)
    check_grad(nn.MSELoss(reduction="sum"), logits(rng, 3, 2), t, requires_grad=[True, False],
               ref64=lambda x, t: np.sum((x - t) ** 2))


@pytest.mark.parametrize("name, kwargs, match", [
    ("L1Loss", {"reduction": "avg"}, "L1Loss: reduction must be one of mean, sum, none"),
    ("CTCLoss", {"reduction": "batchmean"}, "CTCLoss: reduction must be"),
    ("CTCLoss", {"blank": -1}, "CTCLoss: blank must be a non-negative"),
    ("CrossEntropyLoss", {"label_smoothing": 1.5}, "label_smoothing must be in"),
])
def test_unsupported_or_bad_arguments_are_refused(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        getattr(nn, name)(**kwargs)


def test_defaults_and_argument_order_are_torch():
    import inspect
    for name in ("CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss",
                 "BCELoss", "CTCLoss"):
        ours = inspect.signature(getattr(nn, name)).parameters
        ref = inspect.signature(getattr(torch.nn, name)).parameters
        assert [(p.name, p.default) for p in ours.values()] == [
            (p.name, p.default) for p in ref.values()], name


def test_loss_modules_have_no_state_and_repr(rng):
    loss = nn.CrossEntropyLoss(reduction="sum")
    assert loss.state_dict() == {} and list(loss.parameters()) == []
    assert loss.weight is None
    assert repr(loss) == "CrossEntropyLoss(reduction='sum')"
