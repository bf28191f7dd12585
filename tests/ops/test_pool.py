"""max_pool2d, avg_pool2d, adaptive_avg_pool2d and their modules against PyTorch, central
differences, PyTorch's tie and NaN conventions, exact-mode bits on every path and thread count."""
import numpy as np
import pytest

from onemodel.functional.conv import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from onemodel.nn.conv import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# kernel_size, stride, padding
WINDOWS = [(2, None, 0), (3, 2, 1), (3, 1, 1), ((2, 3), (1, 2), (1, 0)), (1, 1, 0), (4, 3, 2),
           (5, 1, 0)]


@pytest.mark.parametrize("k, s, p", WINDOWS)
def test_max_pool_matches_torch(check_torch, rng, k, s, p):
    x = rng.standard_normal((2, 3, 9, 8), dtype=np.float32)
    check_torch(lambda x: max_pool2d(x, k, s, p), lambda x: TF.max_pool2d(x, k, s, p), x)
    check_torch(lambda x: max_pool2d(x[0], k, s, p), lambda x: TF.max_pool2d(x[0], k, s, p), x)


@pytest.mark.parametrize("k, s, p", WINDOWS)
@pytest.mark.parametrize("include", [True, False])
def test_avg_pool_matches_torch(check_torch, rng, k, s, p, include):
    x = rng.standard_normal((2, 3, 9, 8), dtype=np.float32)
    check_torch(lambda x: avg_pool2d(x, k, s, p, count_include_pad=include),
                lambda x: TF.avg_pool2d(x, k, s, p, count_include_pad=include), x)


# kernel_size, stride, padding, dilation: taps dilation apart, windows that start in the padding
# or end past the input, an even and an odd span
DILATED = [(2, 1, 0, 2), (3, 2, 1, 2), (3, 1, 1, (2, 3)), ((2, 3), (1, 2), (1, 0), (3, 1)),
           (2, 2, 1, 3)]


@pytest.mark.parametrize("k, s, p, d", DILATED)
@pytest.mark.parametrize("ceil", [False, True])
def test_dilated_max_pool_matches_torch(check_torch, rng, k, s, p, d, ceil):
    x = rng.standard_normal((2, 3, 11, 10), dtype=np.float32)
    check_torch(lambda x: max_pool2d(x, k, s, p, d, ceil),
                lambda x: TF.max_pool2d(x, k, s, p, d, ceil), x)
    y, idx = max_pool2d(tensor(x), k, s, p, d, ceil, return_indices=True)
    _, tidx = TF.max_pool2d(torch.from_numpy(x), k, s, p, d, ceil, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


def test_dilated_max_pool_bits_every_path_and_thread_count(check_exact, rng):
    check_exact(lambda x: max_pool2d(x, 3, 2, 1, 2), rng.standard_normal((3, 5, 17, 16),
                                                                           dtype=np.float32))


# ceil_mode keeps a last, partial window, except one that would start in the right padding
# (size 5, padding 1, kernel 2, stride 2: a fourth window would start at 3 * 2 - 1 = 5, past
# the input, and PyTorch drops it).
@pytest.mark.parametrize("shape, k, s, p", [((2, 3, 9, 8), k, s, p) for k, s, p in WINDOWS]
                         + [((1, 2, 5, 5), 2, 2, 1), ((1, 2, 6, 7), 3, 2, 1),
                            ((1, 1, 4, 4), 3, 3, 0)])
@pytest.mark.parametrize("include", [True, False])
def test_ceil_mode_matches_torch(check_torch, rng, shape, k, s, p, include):
    x = rng.standard_normal(shape, dtype=np.float32)
    check_torch(lambda x: max_pool2d(x, k, s, p, ceil_mode=True),
                lambda x: TF.max_pool2d(x, k, s, p, ceil_mode=True), x)
    check_torch(lambda x: avg_pool2d(x, k, s, p, True, include),
                lambda x: TF.avg_pool2d(x, k, s, p, ceil_mode=True, count_include_pad=include),
                x)


@pytest.mark.parametrize("size", [1, (3, 5), (7, 6), (10, 9), (None, 2), (4, 1)])
def test_adaptive_avg_pool_matches_torch(check_torch, rng, size):
    x = rng.standard_normal((2, 3, 7, 6), dtype=np.float32)
    check_torch(lambda x: adaptive_avg_pool2d(x, size), lambda x: TF.adaptive_avg_pool2d(x, size),
                x)


def test_max_pool_ties_go_to_the_first_maximum_as_in_torch(rng):
    # Few distinct values: most windows hold several maxima; overlapping windows (stride 1).
    x = rng.integers(0, 3, (2, 2, 7, 7)).astype(np.float32)
    g = rng.standard_normal((2, 2, 5, 5), dtype=np.float32)
    a = tensor(x, requires_grad=True)
    y, idx = max_pool2d(a, 3, 1, 0, return_indices=True)
    y.backward(g)
    t = torch.from_numpy(x).requires_grad_()
    ty, tidx = TF.max_pool2d(t, 3, 1, 0, return_indices=True)
    ty.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())


def test_max_pool_special_values_as_in_torch(rng, special_values):
    x = rng.permutation(np.resize(special_values, 2 * 64)).reshape(2, 1, 8, 8)
    g = rng.standard_normal((2, 1, 4, 4), dtype=np.float32)
    a = tensor(x, requires_grad=True)
    y, idx = max_pool2d(a, 3, 2, 1, return_indices=True)
    y.backward(g)
    t = torch.from_numpy(x).requires_grad_()
    ty, tidx = TF.max_pool2d(t, 3, 2, 1, return_indices=True)
    ty.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())


def _avg64(x, k):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // k, k, w // k, k).mean(axis=(3, 5))


def test_central_differences(check_grad, rng):
    x = rng.standard_normal((1, 2, 4, 6), dtype=np.float32)
    check_grad(lambda x: avg_pool2d(x, 2), x, ref64=lambda x: _avg64(x, 2))
    check_grad(lambda x: adaptive_avg_pool2d(x, (2, 3)), x, ref64=lambda x: _avg64(x, 2))
    check_grad(lambda x: adaptive_avg_pool2d(x, 1), x,
               ref64=lambda x: x.mean(axis=(2, 3), keepdims=True))
    # Max pooling away from ties: the gradient routes through the maxima.
    check_grad(lambda x: max_pool2d(x, 2), x,
               ref64=lambda x: x.reshape(1, 2, 2, 2, 3, 2).max(axis=(3, 5)))


@pytest.mark.parametrize("shape", [(0, 3, 6, 6), (1, 1, 1, 1), (2, 17, 15, 16), (3, 4, 33, 31)])
def test_exact_bits_every_path_and_thread_count(check_exact, rng, shape):
    x = rng.standard_normal(shape, dtype=np.float32)
    check_exact(lambda x: max_pool2d(x, 1 if shape[2] == 1 else 3, 2, 0), x)
    check_exact(lambda x: avg_pool2d(x, 1, 1, 0) if shape[2] == 1 else avg_pool2d(x, 3, 2, 1), x)
    check_exact(lambda x: adaptive_avg_pool2d(x, (5, 3)), x)


@pytest.mark.parametrize("fn, error, words", [
    (lambda x: max_pool2d(x, 3, 1, 2), ValueError, "at most half"),
    (lambda x: avg_pool2d(x, 7), ValueError, "larger than the padded input"),
    (lambda x: max_pool2d(x, 0), ValueError, "kernel_size"),
    (lambda x: max_pool2d(x, 2, 0), ValueError, "stride"),
    (lambda x: max_pool2d(x, 2.5), TypeError, "kernel_size"),
    (lambda x: adaptive_avg_pool2d(x, 0), ValueError, "output_size"),
    (lambda x: adaptive_avg_pool2d(x, (1, 2, 3)), ValueError, "output_size"),
    (lambda x: max_pool2d(x[0, 0], 2), ValueError, "(C, H, W)"),
    (lambda x: max_pool2d(x, 2, 1, 0, 0), ValueError, "dilation"),
    (lambda x: max_pool2d(x, 3, 1, 0, 3), ValueError, "dilation 3"),
])
def test_bad_arguments_raise(fn, error, words):
    with pytest.raises(error) as info:
        fn(tensor(np.zeros((2, 3, 5, 5), np.float32)))
    assert words in str(info.value)


def test_bad_dtype_raises():
    with pytest.raises(TypeError, match="max_pool2d: input must be float32"):
        max_pool2d(tensor(np.zeros((1, 1, 4, 4), np.int64)), 2)


def test_modules_match_torch(assert_close, rng):
    x = rng.standard_normal((2, 3, 9, 9), dtype=np.float32)
    for ours, theirs in [(MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
                         (AvgPool2d(2), torch.nn.AvgPool2d(2)),
                         (AvgPool2d(3, 2, 1, count_include_pad=False),
                          torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False)),
                         (MaxPool2d(2, ceil_mode=True), torch.nn.MaxPool2d(2, ceil_mode=True)),
                         (AvgPool2d(2, ceil_mode=True), torch.nn.AvgPool2d(2, ceil_mode=True)),
                         (AdaptiveAvgPool2d(1), torch.nn.AdaptiveAvgPool2d(1)),
                         (AdaptiveAvgPool2d((4, 2)), torch.nn.AdaptiveAvgPool2d((4, 2))),
                         # torch's positional order: dilation, return_indices, ceil_mode and
                         # ceil_mode, count_include_pad
                         (MaxPool2d(3, 2, 1, 2, False, True),
                          torch.nn.MaxPool2d(3, 2, 1, 2, False, True)),
                         (AvgPool2d(3, 2, 1, True, False),
                          torch.nn.AvgPool2d(3, 2, 1, True, False))]:
        assert_close(ours(tensor(x)).numpy(), theirs(torch.from_numpy(x)).numpy())
        assert list(ours.state_dict()) == []
    y, idx = MaxPool2d(3, 2, 1, 2, True)(tensor(x))
    ty, tidx = torch.nn.MaxPool2d(3, 2, 1, 2, True)(torch.from_numpy(x))
    assert_close(y.numpy(), ty.numpy())
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
