"""The torch.nn that ported scripts reach for next, against PyTorch: the activations relu6,
hardtanh, hardswish, mish, softsign, logsigmoid, prelu (and the Softplus, LogSoftmax modules),
the losses smooth_l1_loss, huber_loss, kl_div, cosine_similarity, pairwise_distance, the shape
layers Unflatten, PixelShuffle / PixelUnshuffle, ZeroPad2d / ConstantPad1d / ConstantPad2d,
MaxPool1d, AdaptiveAvgPool1d, and ParameterDict. Values and gradients (a random upstream
gradient), PyTorch's convention at every breakpoint, reductions, exact-mode bits, reprs and
state names, and the errors for bad arguments."""
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional
NAN, INF = float("nan"), float("inf")
TOL = 1e-6
REDUCTIONS = ("mean", "sum", "none")


def sample(rng, shape, scale=4.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def elementwise(ref):
    """torch's op one element at a time: its scalar kernel, whose convention at NaN its
    vector kernels do not all follow (hardtanh's gradient there is 1 in the scalar code and 0
    in AVX2 lanes)."""
    return lambda *xs: torch.stack([ref(*parts) for parts in zip(*xs)])


# -- activations ----------------------------------------------------------------------------
# name -> (ours, PyTorch's, breakpoints)
ACTIVATIONS = {
    "relu6": (F.relu6, TF.relu6, [0.0, 6.0]),
    "hardtanh": (F.hardtanh, TF.hardtanh, [-1.0, 1.0]),
    "hardtanh_-2_3": (lambda x: F.hardtanh(x, -2.0, 3.0), lambda x: TF.hardtanh(x, -2.0, 3.0),
                      [-2.0, 3.0]),
    "hardswish": (F.hardswish, TF.hardswish, [-3.0, 3.0, -1.5, 0.0]),
    "mish": (F.mish, TF.mish, [0.0, 20.0, -20.0]),
    "softsign": (F.softsign, TF.softsign, [0.0]),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid, [0.0, 20.0, -20.0]),
    "prelu": (lambda x: F.prelu(x, om.tensor([0.3])),
              lambda x: TF.prelu(x, torch.tensor([0.3])), [0.0]),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_matches_torch(rng, check_torch, check_exact, name):
    ours, ref, _ = ACTIVATIONS[name]
    x = sample(rng, (6, 7))
    check_torch(ours, ref, x, tol=TOL)
    check_exact(ours, x)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_breakpoints_and_special_values_match_torch(check_torch, special_values,
                                                               name):
    ours, ref, kinks = ACTIVATIONS[name]
    k = np.array(kinks, np.float32)
    x = np.concatenate([special_values, k, np.nextafter(k, np.float32(INF)),
                        np.nextafter(k, np.float32(-INF))])
    if name == "softsign":  # see test_softsign_gradient_at_huge_inputs_is_torchs
        x = x[~(np.abs(x) > 1e19)]
    check_torch(ours, elementwise(ref), x, tol=TOL)


def test_softsign_gradient_at_huge_inputs_is_torchs():
    """div's backward is torch's -g·((x/y)/y): -g·x/(y·y) would overflow to NaN here."""
    x, g = np.array([3e38, -3e38], np.float32), np.array([2.0, 2.0], np.float32)
    ours, ref = om.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.softsign(ours).backward(om.tensor(g))
    TF.softsign(ref).backward(torch.tensor(g))
    np.testing.assert_array_equal(ours.grad.numpy(), ref.grad.numpy())


@pytest.mark.parametrize("fn, x, value, grad", [
    (F.relu6, [0.0, 6.0, 3.0, NAN, -1.0, 7.0], [0, 6, 3, NAN, 0, 6], [0, 0, 1, 1, 0, 0]),
    (F.hardtanh, [-1.0, 1.0, 0.5, NAN], [-1, 1, 0.5, NAN], [0, 0, 1, 1]),
    (F.hardswish, [-3.0, 3.0, 0.0, NAN, -1.5, 4.0], [0, 3, 0, NAN, -0.375, 4],
     [0, 1, 0.5, 1, 0, 1]),
    (lambda x: F.prelu(x, om.tensor([0.25])), [0.0, -2.0, 2.0], [0, -0.5, 2], [0.25, 0.25, 1]),
    (F.softsign, [0.0, 1.0], [0, 0.5], [1, 0.25]),
    (F.logsigmoid, [0.0], [-math.log(2)], [0.5]),
])
def test_gradient_at_breakpoints_is_torchs(fn, x, value, grad):
    t = om.tensor(np.array(x, np.float32), requires_grad=True)
    y = fn(t)
    y.backward(om.ones(*y.shape))
    np.testing.assert_allclose(y.detach().numpy(), value, rtol=1e-6)
    np.testing.assert_array_equal(t.grad.numpy(), np.array(grad, np.float32))


@pytest.mark.parametrize("xshape, wshape", [((4, 3, 5), (3,)), ((4, 3), (3,)), ((4, 3, 2, 2), (1,)),
                                            ((5,), (1,)), ((), (1,)), ((2, 3), ())])
def test_prelu_matches_torch_with_weight_gradient(rng, check_torch, xshape, wshape):
    x = sample(rng, xshape)
    w = rng.uniform(-0.5, 0.5, wshape).astype(np.float32)
    check_torch(F.prelu, TF.prelu, x, w, tol=TOL)


# name, constructor arguments
MODULES = [("ReLU6", ()), ("Hardtanh", ()), ("Hardtanh", (-2, 3)), ("Hardswish", ()),
           ("Mish", ()), ("Softsign", ()), ("LogSigmoid", ()), ("Softplus", ()),
           ("Softplus", (2, 5)), ("LogSoftmax", (1,)), ("LogSoftmax", (-1,)), ("PReLU", ()),
           ("PReLU", (3, 0.1))]


@pytest.mark.parametrize("name, args", MODULES)
def test_activation_modules_match_torch(rng, check_torch, name, args):
    ours, ref = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    check_torch(lambda x: ours(x), lambda x: ref(x), sample(rng, (4, 3, 5)), tol=TOL)
    assert repr(ours) == repr(ref)
    state, theirs = ours.state_dict(), ref.state_dict()
    assert list(state) == list(theirs)
    for key in state:
        np.testing.assert_array_equal(state[key], theirs[key].numpy())


def test_log_softmax_module_without_dim_is_torchs_implicit_choice(rng, check_torch):
    ours, ref = nn.LogSoftmax(), torch.nn.LogSoftmax()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_torch(lambda x: ours(x), lambda x: ref(x), sample(rng, (3, 4)), tol=TOL)
    with pytest.warns(UserWarning, match="LogSoftmax: implicit dimension"):
        ours(om.ones(3, 4))


def test_prelu_module_trains_as_torchs(rng):
    """The weight loaded from torch's state dict, and both gradients after a backward."""
    ref = torch.nn.PReLU(3, init=0.1)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor([0.1, -0.2, 0.7]))
    ours = nn.PReLU(3)
    ours.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()})
    x = sample(rng, (2, 3, 4))
    g = sample(rng, (2, 3, 4), 1.0)
    xo, xt = om.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours(xo).backward(om.tensor(g))
    ref(xt).backward(torch.tensor(g))
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=TOL)
    np.testing.assert_allclose(ours.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=TOL)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]


def test_inplace_false_is_accepted():
    x = om.tensor([-1.0, 2.0, 7.0])
    assert F.relu6(x, inplace=False).tolist() == nn.ReLU6(inplace=False)(x).tolist() == [
        0.0, 2.0, 6.0]


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.hardtanh(om.ones(2), 2.0, 1.0), ValueError,
     "hardtanh: min_val 2.0 cannot be greater than max_val 1.0"),
    (lambda: nn.Hardtanh(1.0, 1.0), ValueError,
     r"Hardtanh: max_val \(1.0\) must be greater than min_val \(1.0\)"),
    (lambda: F.relu6(om.tensor([1, 2])), TypeError, "relu6: input must be float32"),
    (lambda: F.mish(om.tensor([1, 2])), TypeError, "mish: input must be float32"),
    (lambda: F.prelu(om.ones(2, 3), om.ones(1, 3)), ValueError,
     r"prelu: weight must be a scalar or 1-D, got shape \(1, 3\)"),
    (lambda: F.prelu(om.ones(2, 3), om.ones(2)), ValueError,
     r"prelu: 2 weights for input \(2, 3\) with 3 channels"),
    (lambda: F.prelu(om.ones(4), om.ones(4)), ValueError, "prelu: 4 weights for input"),
    (lambda: F.prelu(om.ones(2), om.tensor([1, 2])), TypeError,
     "prelu: weight must be float32"),
    (lambda: nn.PReLU(0), ValueError, "PReLU: num_parameters must be a positive integer"),
    (lambda: nn.PReLU(2, dtype=torch.float64), TypeError, "only the CPU and float32"),
])
def test_bad_activation_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- losses ---------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name, cut", [("smooth_l1_loss", 1.0), ("smooth_l1_loss", 0.5),
                                       ("smooth_l1_loss", 0.0), ("huber_loss", 1.0),
                                       ("huber_loss", 2.5)])
def test_smooth_l1_and_huber_match_torch(rng, check_torch, name, cut, reduction):
    arg = "beta" if name == "smooth_l1_loss" else "delta"
    kwargs = {"reduction": reduction, arg: cut}
    check_torch(lambda a, b: getattr(F, name)(a, b, **kwargs),
                lambda a, b: getattr(TF, name)(a, b, **kwargs),
                sample(rng, (5, 6), 2.0), sample(rng, (5, 6), 1.0), tol=TOL)


@pytest.mark.parametrize("name, cut", [("smooth_l1_loss", 1.0), ("smooth_l1_loss", 0.5),
                                       ("huber_loss", 2.0)])
def test_smooth_l1_and_huber_breakpoints_match_torch(check_torch, special_values, name, cut):
    arg = "beta" if name == "smooth_l1_loss" else "delta"
    c = np.float32(cut)
    d = np.concatenate([special_values, [c, -c, np.nextafter(c, c + 1), np.nextafter(c, 0)]])
    d = d.astype(np.float32)

    def ours(a, b):
        return getattr(F, name)(a, b, reduction="none", **{arg: cut})

    def ref(a, b):
        return getattr(TF, name)(a, b, reduction="none", **{arg: cut})

    check_torch(ours, elementwise(ref), d, np.zeros_like(d), tol=TOL)
    x = om.tensor(np.array([cut, -cut, INF, -INF, 0.0], np.float32), requires_grad=True)
    ours(x, om.zeros(5)).backward(om.ones(5))
    slope = 1.0 if name == "smooth_l1_loss" else cut  # linear side's slope, also at ±cut
    assert x.grad.tolist() == [slope, -slope, slope, -slope, 0.0]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_huber_weight_matches_torch(rng, check_torch, reduction):
    w = rng.uniform(0.1, 2.0, (4, 5)).astype(np.float32)
    check_torch(lambda a, b, c: F.huber_loss(a, b, reduction, 1.5, c),
                lambda a, b, c: TF.huber_loss(a, b, reduction, 1.5, c),
                sample(rng, (4, 5), 2.0), sample(rng, (4, 5), 1.0), w, tol=TOL)


def kl_inputs(rng, shape=(4, 5)):
    logp = TF.log_softmax(torch.from_numpy(sample(rng, shape, 1.0)), -1).numpy()
    p = TF.softmax(torch.from_numpy(sample(rng, shape, 2.0)), -1).numpy()
    p[0, 1] = 0.0  # a zero probability: its term is 0 (xlogy), its target gradient NaN
    return logp, p


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(rng, check_torch, reduction, log_target):
    logp, p = kl_inputs(rng)
    target = np.log(p + np.float32(0.01)).astype(np.float32) if log_target else p
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note on reduction="mean"
        check_torch(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
                    lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
                    logp, target, tol=TOL)


def test_kl_div_batchmean_divides_by_the_batch_and_broadcasts(rng, check_torch):
    logp, p = kl_inputs(rng, (3, 4))
    check_torch(lambda a, b: F.kl_div(a, b, reduction="batchmean"),
                lambda a, b: TF.kl_div(a, b, reduction="batchmean"), logp, p[0], tol=TOL)
    total = F.kl_div(om.tensor(logp), om.tensor(p), reduction="sum").item()
    assert F.kl_div(om.tensor(logp), om.tensor(p), reduction="batchmean").item() == \
        np.float32(total) / np.float32(3)
    scalar = F.kl_div(om.tensor(np.float32(-1.0)), om.tensor(np.float32(0.5)),
                      reduction="batchmean")
    assert scalar.item() == pytest.approx(TF.kl_div(torch.tensor(-1.0), torch.tensor(0.5),
                                                    reduction="batchmean").item(), rel=TOL)


@pytest.mark.parametrize("s1, s2, dim", [((4, 5), (4, 5), 1), ((4, 5), (4, 5), 0),
                                         ((3, 1, 5), (4, 5), -1), ((4, 1, 5), (1, 3, 5), 2),
                                         ((6,), (6,), 0), ((2, 3, 4), (3, 4), 1)])
def test_cosine_similarity_matches_torch(rng, check_torch, s1, s2, dim):
    check_torch(lambda a, b: F.cosine_similarity(a, b, dim),
                lambda a, b: TF.cosine_similarity(a, b, dim), sample(rng, s1), sample(rng, s2),
                tol=TOL)


def test_cosine_similarity_broadcasts_along_dim_before_the_norms(rng, check_torch):
    """x1 (4, 1) against x2 (4, 6) along dim 1: x1's norm is that of its 6 copies, as torch's
    (its own gradient is 0 up to rounding, so only x2's is compared)."""
    check_torch(F.cosine_similarity, TF.cosine_similarity, sample(rng, (4, 1)),
                sample(rng, (4, 6)), tol=TOL, requires_grad=(False, True))
    assert F.cosine_similarity(om.ones(3, 1), om.ones(3, 4)).tolist() == pytest.approx([1.0] * 3)


def test_cosine_similarity_of_zero_and_tiny_vectors_has_torchs_gradient(check_torch):
    """torch clamps the norms to eps outside the graph: the gradient flows as if unclamped,
    so a vector below eps gets the quotient's gradient, and a zero one x2 / (eps·‖x2‖)."""
    a = np.array([[0.0, 0.0, 0.0], [1e-9, 0.0, 0.0], [1.0, 2.0, 3.0], [0.1, 0.2, -0.3]],
                 np.float32)
    b = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.1, 0.2]],
                 np.float32)
    check_torch(F.cosine_similarity, TF.cosine_similarity, a, b, tol=TOL)
    check_torch(lambda x, y: F.cosine_similarity(x, y, 1, 0.5),
                lambda x, y: TF.cosine_similarity(x, y, 1, 0.5), a, b, tol=TOL)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 1.5, math.inf])
@pytest.mark.parametrize("s1, s2, keepdim", [((4, 5), (4, 5), False), ((4, 5), (5,), True),
                                             ((6,), (6,), False), ((6,), (6,), True),
                                             ((2, 3, 4), (3, 4), False)])
def test_pairwise_distance_matches_torch(rng, check_torch, p, s1, s2, keepdim):
    check_torch(lambda a, b: F.pairwise_distance(a, b, p, keepdim=keepdim),
                lambda a, b: TF.pairwise_distance(a, b, p, keepdim=keepdim),
                sample(rng, s1), sample(rng, s2), tol=TOL)


def test_pairwise_distance_adds_eps_to_the_difference(check_torch):
    x = np.array([[1.0, 2.0], [0.0, 0.0]], np.float32)
    check_torch(lambda a: F.pairwise_distance(a, om.tensor(x), eps=1e-3),
                lambda a: TF.pairwise_distance(a, torch.tensor(x), eps=1e-3), x.copy(),
                tol=TOL)
    assert F.pairwise_distance(om.tensor(x), om.tensor(x)).tolist() == pytest.approx(
        [1e-6 * math.sqrt(2)] * 2, rel=1e-6)


# name, constructor keywords, input shapes
LOSS_MODULES = [
    ("SmoothL1Loss", {}, ((4, 5), (4, 5))), ("SmoothL1Loss", {"beta": 0.5}, ((4, 5), (4, 5))),
    ("SmoothL1Loss", {"reduction": "none", "beta": 2.0}, ((4, 5), (4, 5))),
    ("HuberLoss", {}, ((4, 5), (4, 5))), ("HuberLoss", {"delta": 2.0, "reduction": "sum"},
                                          ((4, 5), (4, 5))),
    ("KLDivLoss", {"reduction": "batchmean"}, None),
    ("KLDivLoss", {"reduction": "sum", "log_target": True}, None),
    ("CosineSimilarity", {}, ((4, 5), (4, 5))), ("CosineSimilarity", {"dim": 0, "eps": 0.1},
                                                 ((4, 5), (4, 5))),
    ("PairwiseDistance", {}, ((4, 5), (4, 5))),
    ("PairwiseDistance", {"p": 1.0, "eps": 0.0, "keepdim": True}, ((4, 5), (5,))),
]


@pytest.mark.parametrize("name, kwargs, shapes", LOSS_MODULES)
def test_loss_modules_match_torch(rng, check_torch, name, kwargs, shapes):
    ours, ref = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    inputs = kl_inputs(rng) if shapes is None else [sample(rng, s) for s in shapes]
    if kwargs.get("log_target"):
        inputs = (inputs[0], np.log(inputs[1] + np.float32(0.1)).astype(np.float32))
    check_torch(lambda a, b: ours(a, b), lambda a, b: ref(a, b), *inputs, tol=TOL)
    for attr in ("reduction", "beta", "delta", "log_target", "dim", "eps", "norm", "keepdim"):
        assert getattr(ours, attr, None) == getattr(ref, attr, None), attr


def test_new_ops_give_the_same_bits_everywhere(rng, check_exact):
    a, b = sample(rng, (6, 9)), sample(rng, (6, 9))
    logp, p = kl_inputs(rng)
    check_exact(lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), a, b)
    check_exact(lambda x, y: F.huber_loss(x, y, delta=2.0), a, b)
    check_exact(lambda x, y: F.kl_div(x, y, reduction="batchmean"), logp, p)
    check_exact(F.cosine_similarity, a, b)
    check_exact(lambda x, y: F.pairwise_distance(x, y, 3.0), a, b)
    check_exact(lambda x: F.max_pool1d(x, 3, 2, 1), sample(rng, (2, 3, 11)))
    check_exact(lambda x: F.adaptive_avg_pool1d(x, 4), sample(rng, (2, 3, 11)))


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.smooth_l1_loss(om.ones(2), om.ones(2), beta=-1.0), ValueError,
     "smooth_l1_loss: beta must be >= 0, got -1.0"),
    (lambda: nn.SmoothL1Loss(beta=-0.5), ValueError, "SmoothL1Loss: beta must be >= 0"),
    (lambda: F.huber_loss(om.ones(2), om.ones(2), delta=0.0), ValueError,
     "huber_loss: delta must be > 0, got 0.0"),
    (lambda: nn.HuberLoss(delta=-1.0), ValueError, "HuberLoss: delta must be > 0"),
    (lambda: F.huber_loss(om.ones(2, 3), om.ones(2, 3), weight=om.ones(3)), ValueError,
     r"huber_loss: weight of shape \(3,\) must have the input's shape \(2, 3\)"),
    (lambda: F.smooth_l1_loss(om.ones(2), om.ones(2), reduction="batchmean"), ValueError,
     "smooth_l1_loss: reduction must be one of mean, sum, none, got 'batchmean'"),
    (lambda: nn.HuberLoss("avg"), ValueError, "HuberLoss: reduction must be one of"),
    (lambda: F.kl_div(om.ones(2), om.ones(2), reduction="avg"), ValueError,
     "kl_div: reduction must be one of mean, sum, none, batchmean, got 'avg'"),
    (lambda: nn.KLDivLoss(reduction="avg"), ValueError, "KLDivLoss: reduction must be one of"),
    (lambda: F.kl_div(om.ones(2, 3), om.ones(2, 4)), ValueError,
     r"kl_div: shapes \(2, 3\) and \(2, 4\) cannot be broadcast together"),
    (lambda: F.kl_div(om.ones(2), om.tensor([1, 0])), TypeError,
     "kl_div: target must be float32"),
    (lambda: F.smooth_l1_loss(om.tensor([1, 2]), om.ones(2)), TypeError,
     "smooth_l1_loss: input must be float32"),
    (lambda: F.cosine_similarity(om.ones(3, 2), om.ones(3, 4)), ValueError,
     r"cosine_similarity: shapes \(3, 2\) and \(3, 4\) cannot be broadcast together"),
    (lambda: F.cosine_similarity(om.ones(3, 2), om.ones(3, 2), dim=2), ValueError,
     "cosine_similarity: dim 2 out of range for a tensor of rank 2"),
    (lambda: F.cosine_similarity(om.ones(2), om.tensor([1, 2])), TypeError,
     "cosine_similarity: x2 must be float32"),
    (lambda: F.pairwise_distance(om.ones(3, 2), om.ones(3, 4)), ValueError,
     "pairwise_distance: shapes"),
    (lambda: F.pairwise_distance(om.ones(3), om.ones(3), p=0), ValueError,
     "pairwise_distance: p must be > 0, got 0"),
    (lambda: F.pairwise_distance(om.ones(3), om.ones(3), p=-1.0), ValueError,
     "pairwise_distance: p must be > 0"),
])
def test_bad_loss_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- shape layers ---------------------------------------------------------------------------
@pytest.mark.parametrize("dim, sizes, shape", [(1, (2, 4), (3, 8, 2)), (-1, [2, -1], (3, 8)),
                                               (0, (1, 3, 1), (3, 2)), (2, (-1, 5), (2, 1, 5))])
def test_unflatten_matches_torch(rng, check_torch, dim, sizes, shape):
    ours, ref = nn.Unflatten(dim, sizes), torch.nn.Unflatten(dim, sizes)
    check_torch(lambda x: ours(x), lambda x: ref(x), sample(rng, shape), tol=0)
    assert repr(ours) == repr(ref)


@pytest.mark.parametrize("call, error, match", [
    (lambda: nn.Unflatten(1, (2, 4))(om.ones(3, 7)), ValueError,
     r"Unflatten: sizes \(2, 4\) do not multiply up to the size 7 of dim 1 of input \(3, 7\)"),
    (lambda: nn.Unflatten(1, (-1, 4))(om.ones(3, 6)), ValueError, "do not multiply up"),
    (lambda: nn.Unflatten(1, (-1, -1))(om.ones(3, 6)), ValueError, "do not multiply up"),
    (lambda: nn.Unflatten(3, (2, 4))(om.ones(3, 8)), ValueError,
     "Unflatten: dim 3 out of range for a tensor of rank 2"),
    (lambda: nn.Unflatten(1, 5), TypeError,
     "Unflatten: unflattened_size must be a tuple or list of ints, got 5"),
    (lambda: nn.Unflatten(1, (2.0, 3)), TypeError, "unflattened_size must be a tuple or list"),
])
def test_bad_unflatten_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("shape, r", [((2, 8, 3, 3), 2), ((8, 3, 2), 2), ((1, 2, 9, 2, 2), 3),
                                      ((2, 3, 2, 4), 1)])
def test_pixel_shuffle_matches_torch_and_unshuffle_inverts_it(rng, check_torch, shape, r):
    x = sample(rng, shape)
    check_torch(lambda t: F.pixel_shuffle(t, r), lambda t: TF.pixel_shuffle(t, r), x, tol=0)
    y = TF.pixel_shuffle(torch.from_numpy(x), r).numpy()
    check_torch(lambda t: F.pixel_unshuffle(t, r), lambda t: TF.pixel_unshuffle(t, r), y, tol=0)
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(om.tensor(x), r), r).numpy(),
                                  x)
    for ours, ref in ((nn.PixelShuffle(r), torch.nn.PixelShuffle(r)),
                      (nn.PixelUnshuffle(r), torch.nn.PixelUnshuffle(r))):
        assert repr(ours) == repr(ref)
        inp = x if isinstance(ours, nn.PixelShuffle) else y
        np.testing.assert_array_equal(ours(om.tensor(inp)).numpy(),
                                      ref(torch.from_numpy(inp)).numpy())


@pytest.mark.parametrize("call, match", [
    (lambda: F.pixel_shuffle(om.ones(2, 5, 3, 3), 2),
     r"pixel_shuffle: channels 5 of input \(2, 5, 3, 3\) must be divisible by upscale_factor"),
    (lambda: F.pixel_shuffle(om.ones(8, 3), 2),
     r"pixel_shuffle: input must have at least 3 dimensions \(\*, C, H, W\), got shape \(8, 3\)"),
    (lambda: F.pixel_shuffle(om.ones(2, 8, 3, 3), 0),
     "pixel_shuffle: upscale_factor must be a positive integer, got 0"),
    (lambda: F.pixel_unshuffle(om.ones(2, 2, 5, 6), 2),
     r"pixel_unshuffle: height 5 and width 6 of input \(2, 2, 5, 6\) must be divisible by "
     "downscale_factor 2"),
    (lambda: F.pixel_unshuffle(om.ones(2, 2, 4, 4), 2.0),
     "pixel_unshuffle: downscale_factor must be a positive integer, got 2.0"),
])
def test_bad_pixel_shuffle_arguments_raise_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("name, args, shape", [
    ("ZeroPad2d", (1,), (2, 3, 4, 5)), ("ZeroPad2d", ((1, 2, 0, 3),), (3, 4, 5)),
    ("ZeroPad2d", ((1, 2),), (2, 3)), ("ConstantPad1d", (2, 3.5), (2, 3, 4)),
    ("ConstantPad1d", ((1, 0), -1.0), (3, 4)), ("ConstantPad1d", ((-1, 2), 1), (2, 5)),
    ("ConstantPad2d", ((1, 1, 2, 0), 0.5), (2, 3, 4, 5)), ("ConstantPad2d", (1, 2.0), (3, 4, 5)),
])
def test_padding_modules_match_torch(rng, check_torch, name, args, shape):
    ours, ref = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    check_torch(lambda x: ours(x), lambda x: ref(x), sample(rng, shape), tol=0)
    assert repr(ours) == repr(ref)
    assert ours.padding == ref.padding and ours.value == ref.value


@pytest.mark.parametrize("args", [(3,), (3, 2), (3, 2, 1), (2, 1, 1, 2), (3, 2, 0, 1, True),
                                  (4, 3, 2, 1, True), (1,)])
@pytest.mark.parametrize("shape", [(2, 3, 11), (3, 10)])
def test_max_pool1d_matches_torch_with_indices(rng, check_torch, args, shape):
    x = sample(rng, shape)
    check_torch(lambda t: F.max_pool1d(t, *args), lambda t: TF.max_pool1d(t, *args), x, tol=0)
    check_torch(lambda t: F.max_pool1d(t, *args, return_indices=True),
                lambda t: TF.max_pool1d(t, *args, return_indices=True), x, tol=0)
    ours, ref = nn.MaxPool1d(*args[:4], ceil_mode=args[4:] == (True,)), torch.nn.MaxPool1d(
        *args[:4], ceil_mode=args[4:] == (True,))
    check_torch(lambda t: ours(t), lambda t: ref(t), x, tol=0)
    assert repr(ours) == repr(ref)


def test_max_pool1d_and_max_pool2d_modules_default_stride_to_the_kernel():
    for ours, ref in ((nn.MaxPool1d(3), torch.nn.MaxPool1d(3)),
                      (nn.MaxPool2d(2), torch.nn.MaxPool2d(2))):
        assert ours.stride == ref.stride and repr(ours) == repr(ref)
    mine, theirs = nn.MaxPool1d(2, return_indices=True), torch.nn.MaxPool1d(2, return_indices=True)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::-1].copy()
    for a, b in zip(mine(om.tensor(x)), theirs(torch.from_numpy(x))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("size", [1, 3, 4, 7, (5,)])
@pytest.mark.parametrize("shape", [(2, 3, 7), (3, 7)])
def test_adaptive_avg_pool1d_matches_torch(rng, check_torch, size, shape):
    x = sample(rng, shape)
    check_torch(lambda t: F.adaptive_avg_pool1d(t, size),
                lambda t: TF.adaptive_avg_pool1d(t, size), x, tol=TOL)
    ours, ref = nn.AdaptiveAvgPool1d(size), torch.nn.AdaptiveAvgPool1d(size)
    check_torch(lambda t: ours(t), lambda t: ref(t), x, tol=TOL)
    assert repr(ours) == repr(ref)


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.max_pool1d(om.ones(1, 2, 3, 4), 2), ValueError,
     r"max_pool1d: input must be \(N, C, L\) or \(C, L\), got shape \(1, 2, 3, 4\)"),
    (lambda: F.max_pool1d(om.ones(2, 4), (2, 2)), TypeError,
     "max_pool1d: kernel_size must be an int or a tuple of 1 ints"),
    (lambda: F.max_pool1d(om.ones(2, 4), 2, padding=2), ValueError,
     "max_pool1d: padding"),
    (lambda: F.max_pool1d(om.ones(2, 4), 5), ValueError, "max_pool1d: kernel 5"),
    (lambda: F.max_pool1d(om.tensor([[1, 2]]), 1), TypeError, "max_pool1d: input must be float"),
    (lambda: F.adaptive_avg_pool1d(om.ones(2, 4), 0), ValueError,
     "adaptive_avg_pool1d: output_size must be >= 1"),
    (lambda: F.adaptive_avg_pool1d(om.ones(2, 0), 2), ValueError,
     r"adaptive_avg_pool1d: input \(2, 1, 0\) has an empty spatial dimension"),
    (lambda: F.adaptive_avg_pool1d(om.ones(4), 2), ValueError,
     r"adaptive_avg_pool1d: input must be \(N, C, L\) or \(C, L\)"),
    (lambda: F.avg_pool1d(om.ones(4), 2), ValueError, r"avg_pool1d: input must be \(N, C, L\)"),
])
def test_bad_pool1d_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- ParameterDict --------------------------------------------------------------------------
def both(build):
    """build(nn, tensor): the module in onemodel and in torch."""
    return build(nn, om.tensor), build(torch.nn, torch.tensor)


def test_parameter_dict_state_names_and_order_match_torch():
    def build(n, tensor):
        m = n.Module()
        m.scales = n.ParameterDict(OrderedDict([("b", n.Parameter(tensor([1.0, 2.0]))),
                                                ("a", tensor([3.0]))]))
        m.plain = n.ParameterDict({"z": tensor([1.0]), "y": tensor([2.0, 3.0])})  # sorted
        m.pairs = n.ParameterDict([("q", tensor([4.0])), ("p", tensor([5.0]))])
        m.scales["c"] = tensor([[0.5]])
        m.scales.update({"e": tensor([6.0]), "d": tensor([7.0])})
        m.scales.update(n.ParameterDict(OrderedDict([("g", tensor([8.0])),
                                                     ("f", tensor([9.0]))])))
        del m.pairs["q"]
        return m

    ours, ref = both(build)
    assert list(ours.state_dict()) == list(ref.state_dict()) == [
        "scales.b", "scales.a", "scales.c", "scales.d", "scales.e", "scales.g", "scales.f",
        "plain.y", "plain.z", "pairs.p"]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    for (name, a), b in zip(ours.state_dict().items(), ref.state_dict().values()):
        np.testing.assert_array_equal(a, b.numpy(), err_msg=name)
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in ours.parameters())
    assert list(ours.scales) == list(ref.scales) and len(ours.scales) == len(ref.scales) == 7
    assert list(ours.scales.keys()) == list(ref.scales.keys())
    ours.load_state_dict({k: v.numpy() * 2 for k, v in ref.state_dict().items()})
    np.testing.assert_array_equal(ours.plain["y"].detach().numpy(), [4.0, 6.0])


def test_parameter_dict_access_like_a_dict():
    pd = nn.ParameterDict({"w": om.ones(2)})
    assert "w" in pd and "v" not in pd and pd.get("v") is None
    assert pd.get("w") is pd["w"] is pd.w
    assert [k for k, _ in pd.items()] == ["w"] and len(list(pd.values())) == 1
    popped = pd.pop("w")
    assert isinstance(popped, nn.Parameter) and len(pd) == 0 and list(pd.parameters()) == []
    pd["a"], pd["b"] = om.ones(1), om.zeros(1)
    pd.clear()
    assert len(pd) == 0 and pd.state_dict() == {}
    with pytest.raises(KeyError):
        pd["missing"]


@pytest.mark.parametrize("call, error, match", [
    (lambda pd: pd.update({"b": om.ones(1), "c": 1.0}), TypeError,
     "ParameterDict.update: entry 'c' must be a Parameter or a Tensor, got float"),
    (lambda pd: pd.update([("b", om.ones(1)), ("c",)]), ValueError,
     "ParameterDict.update: entry 1 must be a"),
    (lambda pd: pd.update([("b", om.ones(1)), ("c.d", om.ones(1))]), KeyError,
     "contain no '.'"),
    (lambda pd: pd.update(om.ones(2)), TypeError, "ParameterDict.update: expected a mapping"),
    (lambda pd: pd.__setitem__("c", [1.0]), TypeError,
     r"ParameterDict\['c'\] must be a Parameter or a Tensor, got list"),
])
def test_parameter_dict_errors_change_nothing(call, error, match):
    pd = nn.ParameterDict({"a": om.ones(1)})
    with pytest.raises(error, match=match):
        call(pd)
    assert list(pd) == ["a"]


def test_the_new_names_are_exported_and_checked_against_torchs_signatures():
    """test_torch_signatures.py checks every nn class and functional function that torch
    also has; these must be among them."""
    classes = {"ReLU6", "Hardtanh", "Hardswish", "Mish", "Softsign", "LogSigmoid", "Softplus",
               "LogSoftmax", "PReLU", "SmoothL1Loss", "HuberLoss", "KLDivLoss",
               "CosineSimilarity", "PairwiseDistance", "Unflatten", "PixelShuffle",
               "PixelUnshuffle", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "MaxPool1d",
               "AdaptiveAvgPool1d", "ParameterDict"}
    functions = {"relu6", "hardtanh", "hardswish", "mish", "softsign", "logsigmoid", "prelu",
                 "smooth_l1_loss", "huber_loss", "kl_div", "cosine_similarity",
                 "pairwise_distance", "pixel_shuffle", "pixel_unshuffle", "max_pool1d",
                 "adaptive_avg_pool1d"}
    assert classes <= set(nn.__all__) and all(hasattr(torch.nn, c) for c in classes)
    assert functions <= set(F.__all__) and all(hasattr(TF, f) for f in functions)
    assert all(getattr(nn.functional, f) is getattr(F, f) for f in functions)
