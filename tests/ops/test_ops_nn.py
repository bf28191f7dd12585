"""softmax, log_softmax, layer_norm, embedding, normalize: forward and backward against PyTorch
and float64, exact-mode bit identity, special values, and argument errors."""
import numpy as np
import pytest

import onemodel.functional as F
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")

TOL = 1e-4


def _softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 7), 1), ((3, 7), 0), ((2, 3, 4), 1),
                                       ((2, 3, 17), -1), ((4, 16), 1), ((2, 15), 1),
                                       ((2, 1000), 1), ((0, 5), 1), ((), 0)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches_torch(shape, dim, log, rng, check_torch, check_exact):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    ours = (lambda t: F.log_softmax(t, dim)) if log else (lambda t: F.softmax(t, dim))
    theirs = (lambda t: torch.log_softmax(t, dim)) if log else (lambda t: torch.softmax(t, dim))
    check_torch(ours, theirs, x, tol=TOL)
    check_exact(ours, x)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_against_finite_differences(log, rng, check_grad):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    if log:
        check_grad(lambda t: F.log_softmax(t, 0), x,
                   ref64=lambda a: np.log(_softmax64(a, 0)))
    else:
        check_grad(lambda t: F.softmax(t, -1), x, ref64=lambda a: _softmax64(a, -1))


def test_softmax_special_values(check_torch):
    x = np.array([[1e30, 1e30, -1e30], [0.0, -np.inf, 1.0], [-np.inf, -np.inf, 5.0],
                  [88.0, 100.0, -100.0], [np.nan, 1.0, 2.0]], np.float32)
    check_torch(lambda t: F.softmax(t, 1), lambda t: torch.softmax(t, 1), x, tol=TOL)
    check_torch(lambda t: F.log_softmax(t, 1), lambda t: torch.log_softmax(t, 1), x[:4],
                tol=TOL)


def _layer_norm64(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


@pytest.mark.parametrize("shape,norm", [((4, 10), (10,)), ((2, 3, 8), (3, 8)), ((5, 3), 3),
                                        ((3, 17), 17), ((2, 1000), 1000), ((0, 4), 4),
                                        ((16,), (16,))])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_matches_torch(shape, norm, affine, rng, check_torch, check_exact):
    x = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
    nshape = (norm,) if isinstance(norm, int) else norm
    args = [x]
    if affine:
        args += [rng.standard_normal(nshape).astype(np.float32),
                 rng.standard_normal(nshape).astype(np.float32)]
    check_torch(lambda *t: F.layer_norm(t[0], norm, *t[1:]),
                lambda *t: torch.nn.functional.layer_norm(t[0], nshape, *t[1:]), *args, tol=TOL)
    check_exact(lambda *t: F.layer_norm(t[0], norm, *t[1:]), *args)


def test_layer_norm_weight_only_and_finite_differences(rng, check_torch, check_grad):
    x = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    check_torch(lambda t, u: F.layer_norm(t, 6, u, eps=1e-3),
                lambda t, u: torch.nn.functional.layer_norm(t, (6,), u, eps=1e-3), x, w, tol=TOL)
    check_grad(lambda t, u, v: F.layer_norm(t, (6,), u, v), x, w, b,
               ref64=lambda a, u, v: _layer_norm64(a, 1, u, v))
    check_grad(lambda t: F.layer_norm(t, (3, 6)), x, ref64=lambda a: _layer_norm64(a, 2))


def test_layer_norm_constant_rows_and_large_values(check_torch):
    x = np.array([[3.0, 3.0, 3.0, 3.0], [1e20, -1e20, 1e20, -1e20], [0.0, 0.0, 0.0, 1e-30]],
                 np.float32)
    check_torch(lambda t: F.layer_norm(t, 4), lambda t: torch.nn.functional.layer_norm(t, (4,)),
                x, tol=TOL)


def test_embedding_matches_torch(rng, check_torch, check_exact):
    w = rng.standard_normal((7, 5)).astype(np.float32)
    idx = np.array([[0, 3, 3], [6, 0, 3]], np.int64)
    check_torch(lambda i, t: F.embedding(i, t), lambda i, t: torch.nn.functional.embedding(i, t),
                idx, w)
    check_torch(lambda i, t: F.embedding(i, t, padding_idx=3),
                lambda i, t: torch.nn.functional.embedding(i, t, padding_idx=3), idx, w)
    check_exact(lambda i, t: F.embedding(i, t), idx, w)
    out = F.embedding(tensor(np.array([], np.int64)), tensor(w))
    assert out.shape == (0, 5)


def test_embedding_gradient_adds_repeats_in_index_order():
    w = tensor(np.zeros((3, 2), np.float32), requires_grad=True)
    idx = np.array([1, 1, 1, 2], np.int32)
    g = np.array([[1e8, 1.0], [1.0, 1.0], [-1e8, 1.0], [2.0, 3.0]], np.float32)
    F.embedding(idx, w).backward(g)
    # In index order: (1e8 + 1) rounds to 1e8, then - 1e8 gives 0.
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [0, 3], [2, 3]])


def test_embedding_gradient_bits_equal_a_loop_over_positions(rng):
    """Many repeats in shuffled order, a row used once with -0 (the sum starts from +0), rows
    never used: each row of the gradient is the float32 sum of its positions' rows, from +0 in
    position order."""
    num, width = 50, 33
    idx = rng.integers(0, num - 5, (40, 16))
    g = (rng.standard_normal(idx.shape + (width,)) * 10.0 ** rng.integers(-6, 7, idx.shape +
                                                                         (1,))).astype(np.float32)
    idx[0, 0] = num - 1
    g[0, 0] = -0.0
    idx[idx == num - 1] = num - 1  # only position (0, 0) uses the last row
    idx.flat[1:][idx.flat[1:] == num - 1] = 0
    w = tensor(np.zeros((num, width), np.float32), requires_grad=True)
    F.embedding(idx, w).backward(g)
    want = np.zeros((num, width), np.float32)
    for row, grad_row in zip(idx.reshape(-1), g.reshape(-1, width)):
        want[row] = want[row] + grad_row
    assert w.grad.numpy().tobytes() == want.tobytes()
    assert not np.signbit(w.grad.numpy()[num - 1]).any()


@pytest.mark.parametrize("call,error,words", [
    (lambda x: F.softmax(x, 2), ValueError, ["softmax", "dim 2"]),
    (lambda x: F.log_softmax(tensor(np.ones(3, np.int64)), 0), TypeError,
     ["log_softmax", "int64"]),
    (lambda x: F.layer_norm(x, 4), ValueError, ["layer_norm", "(4,)", "(2, 3)"]),
    (lambda x: F.layer_norm(x, (2, 3, 1)), ValueError, ["layer_norm", "(2, 3, 1)"]),
    (lambda x: F.layer_norm(x, 3, tensor(np.ones(4, np.float32))), ValueError,
     ["layer_norm", "weight", "(4,)", "(3,)"]),
    (lambda x: F.layer_norm(x, 3, None, tensor(np.ones((1, 3), np.float32))), ValueError,
     ["layer_norm", "bias", "(1, 3)"]),
    (lambda x: F.embedding(np.array([0, 5]), x), ValueError, ["embedding", "5", "[0, 2)"]),
    (lambda x: F.embedding(np.array([-1]), x), ValueError, ["embedding", "-1", "[0, 2)"]),
    (lambda x: F.embedding(np.array([0.0]), x), TypeError, ["embedding", "float"]),
    (lambda x: F.embedding(np.array([0]), tensor(np.ones(3, np.float32))), ValueError,
     ["embedding", "(3,)"]),
])
def test_errors_name_the_op(call, error, words):
    x = tensor(np.ones((2, 3), np.float32))
    with pytest.raises(error) as info:
        call(x)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_dtype_converts_the_input_first(log, rng, check_torch):
    ours, theirs = (F.log_softmax, torch.log_softmax) if log else (F.softmax, torch.softmax)
    ints = rng.integers(-3, 4, (3, 5))
    check_torch(lambda t: ours(t, 1, dtype=np.float32),
                lambda t: theirs(t, 1, dtype=torch.float32), ints)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    check_torch(lambda t: ours(t, 0, torch.float32), lambda t: theirs(t, 0, torch.float32), x)
    np.testing.assert_array_equal(tensor(ints).softmax(1, "float32").numpy(),
                                  F.softmax(tensor(ints.astype(np.float32)), 1).numpy())
    with pytest.raises(TypeError, match=r"softmax: dtype must be float32 .* \(3, 5\)"):
        ours(tensor(ints), 1, dtype=np.float64)
    with pytest.raises(TypeError, match="must be float32, got int64"):
        ours(tensor(ints), 1)


NORMALIZE_PS = [0.0, -1.0, -2.5, 0.5, float("inf"), -float("inf")]


def _vector_norm64(v, p, dim):
    a = np.abs(v)
    if p == 0:
        return np.sum(a != 0, axis=dim, keepdims=True).astype(np.float64)
    if np.isinf(p):
        return (np.max if p > 0 else np.min)(a, axis=dim, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.sum(a ** p, axis=dim, keepdims=True) ** (1 / p)


@pytest.mark.parametrize("p", NORMALIZE_PS)
@pytest.mark.parametrize("dim", [1, 0, -1])
def test_normalize_any_p_matches_torch(p, dim, rng, check_torch, check_exact):
    """p = 0 counts non-zeros, p < 0 gives 0 for a slice holding a 0 (then eps), ±inf the
    largest / smallest |x|; zeros and an all-zero slice included."""
    x = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    x[0, 1, 2] = 0.0
    x[1, :, 3] = 0.0
    normalize = torch.nn.functional.normalize
    check_torch(lambda t: F.normalize(t, p, dim), lambda t: normalize(t, p, dim), x, tol=TOL)
    check_torch(lambda t: F.normalize(t, p, dim, eps=0.3), lambda t: normalize(t, p, dim, eps=0.3),
                x, tol=TOL)
    check_exact(lambda t: F.normalize(t, p, dim), x)


@pytest.mark.parametrize("p", NORMALIZE_PS)
def test_normalize_any_p_against_finite_differences(p, rng, check_grad):
    # Away from zeros and ties, where the norm is smooth (p = 0: constant).
    x = (rng.uniform(0.5, 1.5, (3, 4)) * rng.choice([-1, 1], (3, 4))).astype(np.float32)
    check_grad(lambda t: F.normalize(t, p, 1), x,
               ref64=lambda v: v / np.maximum(_vector_norm64(v, p, 1), 1e-12))


@pytest.mark.parametrize("p", [1.2, 0.0, -1.0])
def test_normalize_rank_0_as_torch(p, check_torch):
    # Forward only: x / |x| has gradient 0, which both compute to within rounding noise.
    check_torch(lambda t: F.normalize(t, p, 0), lambda t: torch.nn.functional.normalize(t, p, 0),
                np.array(-0.7, np.float32), requires_grad=[False])
