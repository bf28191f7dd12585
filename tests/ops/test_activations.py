"""SiLU, LeakyReLU, ELU, Softmax (modules and functions), one_hot and normalize against PyTorch,
forward and backward, float64 central differences, special values, exact-mode bits, errors."""
import warnings

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def sigmoid64(x):
    return 1 / (1 + np.exp(-x))


def elu64(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


# name -> (ours, PyTorch's, float64 formula)
ACTIVATIONS = {
    "silu": (F.silu, TF.silu, lambda x: x * sigmoid64(x)),
    "leaky_relu": (F.leaky_relu, TF.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
    "leaky_relu_0.3": (lambda x: F.leaky_relu(x, 0.3), lambda x: TF.leaky_relu(x, 0.3),
                       lambda x: np.where(x > 0, x, 0.3 * x)),
    "elu": (F.elu, TF.elu, elu64),
    "elu_2": (lambda x: F.elu(x, 2.0), lambda x: TF.elu(x, 2.0), lambda x: elu64(x, 2.0)),
}


def sample(rng, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    return np.where(np.abs(x) < 1e-2, np.float32(0.5), x)  # no kinks for central differences


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_matches_torch_and_central_differences(rng, check_torch, check_grad,
                                                          check_exact, name):
    ours, ref, ref64 = ACTIVATIONS[name]
    x = sample(rng, (5, 7))
    check_torch(ours, ref, x)
    check_grad(ours, sample(rng, (3, 4)), ref64=ref64)
    check_exact(ours, x)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_special_values_and_kinks_match_torch(check_torch, special_values, name):
    # torch's op one element at a time: its scalar formula. Its vector kernels do not always
    # follow it at a NaN (ELU's gradient there is 1 in the scalar code and NaN in AVX2 lanes,
    # so torch's own answer depends on the CPU and the element's position).
    ours, ref, _ = ACTIVATIONS[name]
    check_torch(ours, lambda x: torch.stack([ref(v) for v in x]), special_values)


def test_elu_keeps_the_digits_of_expm1_for_small_inputs():
    x = -np.logspace(-12, 1, 60).astype(np.float32)
    ours = F.elu(om.tensor(x)).numpy().astype(np.float64)
    exact = np.expm1(x.astype(np.float64))
    assert np.max(np.abs(ours - exact) / np.abs(exact)) < 4e-7  # a few float32 ulp


@pytest.mark.parametrize("module, args", [("SiLU", ()), ("LeakyReLU", ()), ("LeakyReLU", (0.2,)),
                                          ("ELU", ()), ("ELU", (0.5,)), ("Softmax", (1,)),
                                          ("Softmax", (-1,))])
def test_modules_match_torch(rng, check_torch, module, args):
    ours, ref = getattr(nn, module)(*args), getattr(torch.nn, module)(*args)
    check_torch(lambda x: ours(x), lambda x: ref(x), sample(rng, (4, 3, 5)))
    assert repr(ours) == repr(ref)
    assert ours.state_dict() == {}


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 2)])
def test_softmax_without_dim_picks_torch_implicit_dim(rng, check_torch, shape):
    ours, ref = nn.Softmax(), torch.nn.Softmax()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_torch(lambda x: ours(x), lambda x: ref(x), sample(rng, shape))
    with pytest.warns(UserWarning, match="implicit dimension"):
        ours(om.ones(*shape))


@pytest.mark.parametrize("num_classes", [-1, 6])
def test_one_hot_matches_torch(num_classes):
    idx = np.array([[0, 3, 1], [4, 4, 2]], np.int64)
    ours = F.one_hot(om.tensor(idx), num_classes)
    ref = TF.one_hot(torch.from_numpy(idx), num_classes)
    assert ours.dtype == np.int64 and ours.shape == tuple(ref.shape)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    assert F.one_hot(om.tensor(np.zeros(0, np.int64)), 3).shape == (0, 3)


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.one_hot(om.tensor([0, 3]), 3), ValueError,
     r"one_hot: class index 3 out of range \[0, 3\) \(tensor of shape \(2,\)\)"),
    (lambda: F.one_hot(om.tensor([0, -1]), 3), ValueError, "class index -1"),
    (lambda: F.one_hot(om.tensor([0.0, 1.0])), TypeError, "one_hot: tensor must hold integer"),
    (lambda: F.one_hot(om.tensor(np.zeros(0, np.int64))), ValueError, "cannot infer"),
    (lambda: F.one_hot(om.tensor([0]), -2), ValueError, "num_classes must be"),
    (lambda: F.elu(om.tensor([1, 2])), TypeError, "elu: input must be float32"),
    (lambda: F.normalize(om.ones(2, 3), p=float("nan")), ValueError,
     "normalize: p must be a number"),
    (lambda: F.normalize(om.ones(2, 3), dim=2), ValueError, "normalize: dim 2 out of range"),
    (lambda: F.normalize(om.ones(2, 3), out=om.ones(2, 3)), ValueError, "out= is not supp"),
])
def test_bad_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("dim", [1, 0, -1])
def test_normalize_matches_torch_and_central_differences(rng, check_torch, check_grad, p, dim):
    x = sample(rng, (3, 4, 2))
    check_torch(lambda t: F.normalize(t, p, dim), lambda t: TF.normalize(t, p, dim), x)

    def ref64(v):
        norm = np.sum(np.abs(v) ** p, axis=dim, keepdims=True) ** (1 / p)
        return v / np.maximum(norm, 1e-12)

    check_grad(lambda t: F.normalize(t, p, dim), x, ref64=ref64)


@pytest.mark.parametrize("p", [2.0, 1.0])
def test_normalize_of_a_zero_slice_has_torch_gradient(check_torch, p):
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]], np.float32)
    check_torch(lambda t: F.normalize(t, p), lambda t: TF.normalize(t, p), x)
    check_torch(lambda t: F.normalize(t, p, eps=0.5), lambda t: TF.normalize(t, p, eps=0.5),
                x * np.float32(0.1))


def test_relu_takes_torchs_inplace_false():
    x = om.tensor([-1.0, 0.5, 2.0])
    expected = [0.0, 0.5, 2.0]
    assert nn.ReLU(inplace=False)(x).tolist() == F.relu(x, inplace=False).tolist() == expected
