"""sum, mean, max: forward and backward against PyTorch and float64, the fixed summation order,
exact-mode bit identity, and argument errors."""
import numpy as np
import pytest

import onemodel.functional as F
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")

TOL = 1e-4
# (shape, dim): whole tensor, single axes, adjacent and separated runs of axes.
CASES = [
    ((7,), None), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1), ((3, 4), (0, 1)),
    ((2, 3, 4), (0, 2)), ((2, 3, 4), (1, 2)), ((2, 3, 4), (0, 1)), ((2, 3, 4, 5), (0, 1, 3)),
    ((2, 3, 4, 5), [3, 0]), ((4, 1, 5), 1), ((3, 0, 2), 1), ((3, 0, 2), None), ((), None),
    ((), 0), ((5, 33), 1),
]


def _torch_dim(dim):
    return tuple(dim) if isinstance(dim, list) else dim


def _data(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_matches_torch(shape, dim, keepdim, rng, check_torch):
    x = _data(rng, shape)
    if dim is None:
        check_torch(lambda t: F.sum(t, None, keepdim) if keepdim else F.sum(t),
                    lambda t: torch.sum(t) if not keepdim else torch.sum(
                        t, tuple(range(t.ndim)), keepdim=True) if t.ndim else torch.sum(t),
                    x, tol=TOL)
    else:
        check_torch(lambda t: F.sum(t, dim, keepdim),
                    lambda t: torch.sum(t, _torch_dim(dim), keepdim=keepdim), x, tol=TOL)


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean_matches_torch(shape, dim, keepdim, rng, check_torch):
    x = _data(rng, shape)
    tdim = tuple(range(len(shape))) if dim is None else _torch_dim(dim)
    check_torch(lambda t: F.mean(t, dim, keepdim),
                lambda t: torch.mean(t, tdim, keepdim=keepdim) if t.ndim else torch.mean(t),
                x, tol=TOL)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 65536 + 17])
def test_whole_sum_follows_the_vector_order(n, rng, check_exact):
    """A whole-tensor sum is one reduction of the flattened vector: the same bits as the
    kernel's own vector sum, whatever the shape."""
    x = _data(rng, (n,))
    flat = F.sum(tensor(x)).numpy()
    if n % 17 == 0 and n:
        np.testing.assert_array_equal(F.sum(tensor(x.reshape(17, -1))).numpy(), flat)
    np.testing.assert_allclose(flat, np.sum(x.astype(np.float64)), rtol=1e-5, atol=1e-5)
    check_exact(F.sum, x)


@pytest.mark.parametrize("shape,dim", [((3, 4, 5), (0, 2)), ((6, 40), 0), ((40, 6), 1),
                                       ((2, 3, 4, 5), (1, 2))])
def test_sum_and_mean_exact(shape, dim, rng, check_exact):
    x = _data(rng, shape)
    check_exact(lambda t: F.sum(t, dim), x)
    check_exact(lambda t: F.mean(t, dim, True), x)


def test_sum_against_finite_differences(rng, check_grad):
    x = _data(rng, (3, 4, 2))
    check_grad(lambda t: F.sum(t, (0, 2)), x, ref64=lambda a: a.sum(axis=(0, 2)))
    check_grad(lambda t: F.mean(t, 1, True), x, ref64=lambda a: a.mean(axis=1, keepdims=True))


def test_sum_special_values(special_values, check_torch):
    x = special_values.reshape(1, -1)
    check_torch(lambda t: F.sum(t, 0), lambda t: torch.sum(t, 0), x)
    assert np.isnan(F.sum(tensor(special_values)).item())
    assert F.sum(tensor(np.array([np.inf, 1.0, 3e38, 3e38], np.float32))).item() == np.inf
    tiny = np.full(64, 1e-45, np.float32)  # denormals add exactly
    assert F.sum(tensor(tiny)).item() == tiny[0] * np.float32(64)


def test_integer_sum_is_exact_int64():
    x = np.array([[2 ** 40, 1], [3, -7]], np.int64)
    np.testing.assert_array_equal(F.sum(tensor(x), 0).numpy(), x.sum(axis=0))
    out = F.sum(tensor(np.array([True, True, False])))
    assert out.dtype == np.int64 and out.item() == 2


def test_mean_of_nothing_is_nan():
    assert np.isnan(F.mean(tensor(np.zeros((0, 3), np.float32))).item())
    assert F.mean(tensor(np.zeros((0, 3), np.float32)), 1).shape == (0,)


def test_max_whole_tensor_shares_ties(check_torch, check_grad, check_exact):
    x = np.array([[1.0, 3.0, -2.0], [3.0, 0.5, 3.0]], np.float32)
    check_torch(F.max, torch.amax, x)
    t = tensor(x, requires_grad=True)
    F.max(t).backward()
    np.testing.assert_array_equal(t.grad.numpy(), (x == 3.0) / np.float32(3))
    check_exact(F.max, x)


def test_max_whole_tensor_nan():
    x = np.array([1.0, np.nan, 2.0, np.nan], np.float32)
    t = tensor(x, requires_grad=True)
    out = F.max(t)
    assert np.isnan(out.item())
    out.backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 0.5, 0.0, 0.5])


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -2),
                                       ((2, 3, 17), 2), ((), 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_dim_matches_torch(shape, dim, keepdim, rng, check_torch, check_exact):
    x = rng.permutation(int(np.prod(shape))).astype(np.float32).reshape(shape)  # no ties
    check_torch(lambda t: F.max(t, dim, keepdim), lambda t: torch.max(t, dim, keepdim), x)
    check_exact(lambda t: F.max(t, dim, keepdim), x)


def test_max_dim_result_is_a_named_pair():
    x = tensor(np.array([[1.0, 5.0], [7.0, 2.0]], np.float32))
    out = F.max(x, 1)
    values, indices = out
    assert out.values is values and out.indices is indices
    np.testing.assert_array_equal(values.numpy(), [5.0, 7.0])
    assert indices.dtype == np.int64 and indices.tolist() == [1, 0]


def test_max_dim_first_of_ties_and_nan(check_torch):
    x = np.array([[2.0, 2.0, 1.0], [0.0, np.nan, 5.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    check_torch(lambda t: F.max(t, 1), lambda t: torch.max(t, 1), x)


def test_method_spellings():
    x = tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.sum().item() == 15.0 and x.mean(1).tolist() == [1.0, 4.0]
    assert x.max().item() == 5.0 and x.max(0).indices.tolist() == [1, 1, 1]


@pytest.mark.parametrize("call,error,words", [
    (lambda x: F.sum(x, 2), ValueError, ["sum", "dim 2", "rank 2"]),
    (lambda x: F.sum(x, (0, -2)), ValueError, ["sum", "more than once"]),
    (lambda x: F.mean(x, 1.5), TypeError, ["mean", "dim"]),
    (lambda x: F.mean(tensor(np.ones(3, np.int64))), TypeError, ["mean", "int64"]),
    (lambda x: F.max(tensor(np.zeros((0, 2), np.float32))), ValueError, ["max", "(0, 2)"]),
    (lambda x: F.max(tensor(np.zeros((0, 2), np.float32)), 0), ValueError, ["max", "size 0"]),
    (lambda x: F.max(x, -3), ValueError, ["max", "dim -3"]),
])
def test_errors_name_the_op(call, error, words):
    x = tensor(np.ones((2, 3), np.float32))
    with pytest.raises(error) as info:
        call(x)
    for word in words:
        assert word in str(info.value)


def test_min_whole_and_along_dim_match_torch(rng, check_torch, check_exact):
    x = np.array([[1.0, -3.0, 2.0], [-3.0, 0.5, -3.0]], np.float32)
    check_torch(F.min, torch.amin, x)  # ties share the gradient
    nan = np.array([[2.0, 1.0, 1.0], [0.0, np.nan, -5.0]], np.float32)
    check_torch(lambda t: F.min(t, 1), lambda t: torch.min(t, 1), nan)
    y = rng.permutation(24).astype(np.float32).reshape(2, 3, 4)
    for dim, keepdim in ((0, False), (-1, True), (1, False)):
        check_torch(lambda t: F.min(t, dim, keepdim), lambda t: torch.min(t, dim, keepdim), y)
    check_exact(lambda t: F.min(t, 1), y)
    out = tensor(y).min(2)
    assert type(out).__name__ == "min" and out.indices.dtype == np.int64
    with pytest.raises(ValueError, match=r"min: input of shape \(0,\) is empty"):
        F.min(tensor(np.zeros(0, np.float32)))


def test_max_and_min_of_two_tensors_are_elementwise(rng, check_torch):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    check_torch(F.max, torch.max, a, b)
    check_torch(F.min, torch.min, a, b)
    ta, tb = tensor(a), tensor(b)
    np.testing.assert_array_equal(ta.max(tb).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(ta.min(tb).numpy(), np.minimum(a, b))
