"""F.affine_grid and F.grid_sample against torch 2.13 (values, gradients of input, grid and
theta), finite differences, exact-mode reproducibility and argument checks."""
import itertools
import warnings

import numpy as np
import pytest
from conftest import check_exact, check_grad

import onemodel as om
from onemodel import functional as F

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
THETA = (np.array([[1, 0, 0], [0, 1, 0]]) + 0.4 * RNG.standard_normal((2, 2, 3))).astype(
    np.float32)
# A grid reaching past [-1, 1], so every padding mode has work to do.
GRID = (1.6 * RNG.random((2, 4, 7, 2)) - 0.8).astype(np.float32) * 1.5


def _run(lib, mode, padding_mode, align_corners, size=(2, 3, 4, 7), scale=1.3):
    fn = lib.nn.functional
    x = lib.tensor(X, requires_grad=True)
    theta = lib.tensor(THETA, requires_grad=True)
    grid = fn.affine_grid(theta, size, align_corners=align_corners) * scale
    out = fn.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                         align_corners=align_corners)
    weights = lib.tensor(np.linspace(-1, 1, out.numel(), dtype=np.float32).reshape(
        tuple(out.shape)))
    (out * weights).sum().backward()
    return [t.detach().numpy() for t in (grid, out, x.grad, theta.grad)]


@pytest.mark.parametrize("mode,padding_mode,align_corners", list(itertools.product(
    ["bilinear", "nearest"], ["zeros", "border", "reflection"], [False, True])))
def test_affine_grid_and_grid_sample_match_torch(mode, padding_mode, align_corners):
    ours = _run(om, mode, padding_mode, align_corners)
    theirs = _run(torch, mode, padding_mode, align_corners)
    for name, a, b in zip(("grid", "output", "input grad", "theta grad"), ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("size", [(1, 1, 1, 1), (1, 2, 1, 5), (3, 1, 6, 1)])
def test_degenerate_sizes_match_torch(size):
    theta = THETA[:1].repeat(size[0], 0)
    for align in (False, True):
        ours = F.affine_grid(om.tensor(theta), size, align_corners=align).numpy()
        theirs = torch.nn.functional.affine_grid(torch.tensor(theta), size,
                                                 align_corners=align).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_gradients_match_finite_differences(padding_mode):
    # Inside and outside the image, off the pixel lattice and away from the clipping and
    # reflection points, where the map is smooth.
    xs, ys = [-1.3, -0.41, 0.27, 1.18], [-1.25, 0.33, 1.17]
    grid = np.array([[[[x, y] for x in xs] for y in ys]], np.float32)

    def fn(x, g):
        return F.grid_sample(x, g, padding_mode=padding_mode, align_corners=True)
    check_grad(fn, X[:1, :2], grid)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_is_bit_reproducible_in_exact_mode(mode):
    check_exact(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode="reflection",
                                           align_corners=True), X, GRID)


def test_input_gradient_adds_corners_in_index_order():
    # Every output reads the same four pixels: each pixel's gradient is the sum, in output
    # order, of g times its weight, as a sequential loop adds them.
    grid = np.full((1, 3, 1, 2), 0.1, np.float32)
    g = np.array([1e8, 1.0, -1e8], np.float32).reshape(1, 1, 3, 1)
    x = om.tensor(X[:1, :1], requires_grad=True)
    out = F.grid_sample(x, om.tensor(grid), align_corners=True)
    (out * om.tensor(g)).sum().backward()
    ix, iy = (0.1 + 1) / 2 * 5, (0.1 + 1) / 2 * 4
    fx, fy = np.float32(ix) - np.float32(2), np.float32(iy) - np.float32(2)
    w_nw = (np.float32(1) - fx) * (np.float32(1) - fy)
    expected = np.float32(0)
    for gi in g.ravel():
        expected = np.float32(expected + np.float32(gi * w_nw))
    assert x.grad.numpy()[0, 0, 2, 2] == expected


def test_align_corners_none_warns_and_means_false():
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        ours = F.affine_grid(om.tensor(THETA), (2, 3, 4, 7)).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(
            ours, F.affine_grid(om.tensor(THETA), (2, 3, 4, 7), align_corners=False).numpy())
    with pytest.warns(UserWarning, match="align_corners=False"):
        F.grid_sample(om.tensor(X), om.tensor(GRID))


@pytest.mark.parametrize("call,error,match", [
    (lambda: F.affine_grid(om.tensor(THETA), (2, 3, 4)), NotImplementedError, "4-D sizes"),
    (lambda: F.affine_grid(om.tensor(THETA[:1]), (2, 3, 4, 7), False), ValueError, "theta"),
    (lambda: F.affine_grid(om.tensor(THETA.astype(np.int64)), (2, 3, 4, 7), False), TypeError,
     "theta must be float32"),
    (lambda: F.grid_sample(om.tensor(X), om.tensor(GRID), mode="cubic"), ValueError, "mode"),
    (lambda: F.grid_sample(om.tensor(X), om.tensor(GRID), mode="bicubic"),
     NotImplementedError, "bicubic"),
    (lambda: F.grid_sample(om.tensor(X), om.tensor(GRID), padding_mode="wrap"), ValueError,
     "padding_mode"),
    (lambda: F.grid_sample(om.tensor(X), om.tensor(GRID[:1])), ValueError, "grid must be"),
    (lambda: F.grid_sample(om.tensor(X[0]), om.tensor(GRID)), NotImplementedError, "4-D"),
])
def test_bad_arguments_are_refused_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()
