"""The direct paths of the small ops (onemodel._kernels._direct) against the general paths they
short-cut: the same bits, dtypes, shapes, graph and errors, whether a case takes the direct
path or misses it; no numpy warning from either; and gemm's small-product path against the
blocked product, bit for bit."""
import warnings

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel._kernels import _direct, _gemm

RNG = np.random.default_rng(7)


@pytest.fixture
def general(monkeypatch):
    """Every op on its general path: each direct function declines."""
    def as_general():
        for name in ("binary", "unary", "reduce", "matmul"):
            monkeypatch.setattr(_direct, name, lambda *args: None)
    return as_general


def _values(shape, dtype=np.float32):
    x = RNG.standard_normal(shape) * 3
    if dtype == np.float32:
        x = x.astype(np.float32)
        flat = x.reshape(-1)
        flat[:3] = [np.inf, -np.inf, np.nan][:flat.size]  # special values where there is room
        return x
    return x.astype(dtype)


def _run(fn, general, *, grad=False):
    """fn() on the direct and on the general path: results (and gradients) as arrays, or the
    exception each raised."""
    def once():
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001 (the errors are what is compared)
            return type(e), str(e)
        if isinstance(out, tuple):
            out = out[0]
        assert type(out) is om.Tensor
        return out._data.copy(), out.requires_grad, out.grad_fn is not None
    direct = once()
    general()
    return direct, once()


def _same(direct, general_result):
    if isinstance(direct[0], type):
        assert direct == general_result
        return
    (a, ga, na), (b, gb, nb) = direct, general_result
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()
    assert (ga, na) == (gb, nb)


OPERANDS = [
    ((4,), (4,)), ((2, 3), (2, 3)), ((), ()),          # taken: float32 tensors of one shape
    ((3, 4), (4,)), ((2, 1), (1, 3)), ((3,), (4,)),    # missed: broadcasting, or an error
]
SCALARS = [2.0, -0.0, 1e30, float("nan"), 3, 0, 2 ** 53, 2 ** 53 + 1, 2 ** 70, True,
           np.float32(1.5), np.float64(1.5)]


@pytest.mark.parametrize("op", [F.add, F.sub, F.mul, F.div])
@pytest.mark.parametrize("shapes", OPERANDS)
@pytest.mark.parametrize("grad", [False, True])
def test_tensor_pairs(general, op, shapes, grad):
    a = om.tensor(_values(shapes[0]), requires_grad=grad)
    b = om.tensor(_values(shapes[1]))
    _same(*_run(lambda: op(a, b), general))


@pytest.mark.parametrize("op", [F.add, F.sub, F.mul, F.div])
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
@pytest.mark.parametrize("left", [False, True])
def test_tensor_and_number(general, op, scalar, left):
    a = om.tensor(_values((5,)))
    _same(*_run(lambda: op(scalar, a) if left else op(a, scalar), general))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("other", ["tensor", 2, 2.5])
def test_integer_and_bool_tensors_keep_their_promotion(general, dtype, other):
    a = om.tensor(_values((4,), dtype))
    b = om.tensor(_values((4,), dtype)) if other == "tensor" else other
    for op in (F.add, F.mul, F.div):
        _same(*_run(lambda: op(a, b), general))


def test_non_contiguous_and_mixed_dtypes_take_the_general_path(general):
    a = om.tensor(_values((4, 4))).t()
    b = om.tensor(_values((4, 4)))
    i = om.tensor(np.arange(16).reshape(4, 4))
    for fn in (lambda: a + b, lambda: b * a, lambda: b + i, lambda: a - 1.0):
        _same(*_run(fn, general))


def test_operator_spellings_match_the_general_path(general):
    a = om.tensor(_values((6,)))
    b = om.tensor(_values((6,)))
    fns = [lambda: a + b, lambda: a - b, lambda: a * b, lambda: a / b, lambda: 2.0 * a,
           lambda: 1 - a, lambda: 3 / a, lambda: a / 0.0]
    for fn in fns:
        _same(*_run(fn, general))


def test_gradients_through_the_direct_path_match():
    torch = pytest.importorskip("torch")
    x = torch.tensor(_values((5,)), requires_grad=True)
    y = torch.tensor(_values((5,)), requires_grad=True)
    a = om.tensor(x.detach().numpy(), requires_grad=True)
    b = om.tensor(y.detach().numpy(), requires_grad=True)
    for ours, theirs in ((a * b + a - b / b, x * y + x - y / y),):
        ours.sum().backward()
        theirs.sum().backward()
    for ours_t, theirs_t in ((a, x), (b, y)):
        np.testing.assert_array_equal(ours_t.grad.numpy(), theirs_t.grad.numpy())


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "enabled"])
def test_graph_modes(general, mode):
    a = om.tensor(_values((4,)), requires_grad=True)
    b = om.tensor(_values((4,)), requires_grad=True)
    ctx = {"no_grad": om.no_grad, "inference_mode": om.inference_mode,
           "enabled": om.enable_grad}[mode]

    def fn():
        with ctx():
            return a * b
    _same(*_run(fn, general))


@pytest.mark.parametrize("values", [[np.inf, 1.0], [1e38, 3e38]])
def test_no_numpy_warning_on_the_direct_path(values):
    a = om.tensor(np.array(values, np.float32))
    b = om.tensor(np.array([-np.inf, 1e38], np.float32))
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        out = [a + b, a * b, a * 1e30, a / 0.0, 0.0 / (a - a), a - b]
    assert all(np.isnan(t.numpy()).any() or np.isinf(t.numpy()).any() for t in out)
    torch = pytest.importorskip("torch")
    ref = torch.tensor(np.array(values, np.float32))
    np.testing.assert_array_equal((a * 1e30).numpy(), (ref * 1e30).numpy())


@pytest.mark.parametrize("shape", [(16,), (3, 5), (0,), ()])
@pytest.mark.parametrize("op", [F.exp, F.relu, F.sigmoid, F.log])
@pytest.mark.parametrize("grad", [False, True])
def test_unary(general, shape, op, grad):
    x = om.tensor(_values(shape), requires_grad=grad)
    _same(*_run(lambda: op(x), general))


def test_unary_of_integers(general):
    x = om.tensor(np.arange(-3, 3))
    for op in (F.exp, F.relu):
        _same(*_run(lambda: op(x), general))


@pytest.mark.parametrize("shape", [(4, 8), (7,), (2, 3, 5), (), (0, 3)])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, 3, -4, (0,), True])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum(general, shape, dim, keepdim):
    x = om.tensor(_values(shape))
    _same(*_run(lambda: F.sum(x, dim, keepdim), general))


def test_sum_with_a_graph_and_of_integers(general):
    x = om.tensor(_values((4, 8)), requires_grad=True)
    i = om.tensor(np.arange(12).reshape(3, 4))
    for fn in (lambda: x.sum(1), lambda: x.sum(), lambda: i.sum(0), lambda: i.sum()):
        _same(*_run(fn, general))


@pytest.mark.parametrize("shape", [(8, 16), (5,), (2, 3, 4), (), (0, 4)])
@pytest.mark.parametrize("dim", [0, -1, 1, 2, -3])
@pytest.mark.parametrize("op", [F.softmax, F.log_softmax])
def test_softmax(general, shape, dim, op):
    x = om.tensor(_values(shape))
    _same(*_run(lambda: op(x, dim), general))


def test_softmax_with_a_graph_or_a_dtype(general):
    x = om.tensor(_values((3, 4)), requires_grad=True)
    y = om.tensor(_values((3, 4)))
    for fn in (lambda: F.softmax(x, 1), lambda: F.softmax(y, 1, dtype=np.float32)):
        _same(*_run(fn, general))


PRODUCTS = [((4, 4), (4, 4)), ((1, 3), (3, 1)), ((2, 0), (0, 3)), ((3, 5), (4, 2)), ((4,), (4, 3)),
            ((2, 3, 4), (4, 5)), ((30, 20), (20, 10))]


@pytest.mark.parametrize("shapes", PRODUCTS)
@pytest.mark.parametrize("grad", [False, True])
def test_matmul(general, shapes, grad):
    a = om.tensor(_values(shapes[0]), requires_grad=grad)
    b = om.tensor(_values(shapes[1]))
    _same(*_run(lambda: a @ b, general))


@pytest.mark.parametrize("shapes", [((2, 8), (4, 8), (4,)), ((2, 8), (4, 8), None),
                                    ((3, 2, 8), (4, 8), (4,)), ((2, 8), (4, 8), (3,)),
                                    ((2, 7), (4, 8), None), ((40, 30), (20, 30), (20,))])
@pytest.mark.parametrize("grad", [False, True])
def test_linear(general, shapes, grad):
    x = om.tensor(_values(shapes[0]))
    w = om.tensor(_values(shapes[1]), requires_grad=grad)
    b = None if shapes[2] is None else om.tensor(_values(shapes[2]))
    _same(*_run(lambda: F.linear(x, w, b), general))


def test_matmul_under_autocast_takes_the_general_path(general):
    a, b = om.tensor(_values((4, 4))), om.tensor(_values((4, 4)))
    with om.amp.autocast("bf16"):
        _same(*_run(lambda: a @ b, general))


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (4, 4, 4), (2, 16, 16), (3, 5, 7), (1, 2, 256),
                                   (1, 1, 300), (8, 8, 8)])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_small_gemm_is_the_blocked_product(m, n, k, trans_a, trans_b):
    """A product small enough for the direct loop against the same rows of one too large for it
    (rows of a product are independent): the same bits, special values and subnormals too."""
    rows = max(m, 512 // (n * k) + 1)
    a = RNG.standard_normal((rows, k)).astype(np.float32)
    a[0, 0] = np.float32(1e-40)
    a[-1, -1] = np.inf
    b = RNG.standard_normal((k, n)).astype(np.float32)
    b[0, 0] = np.float32(-3e38)

    def product(x):
        xa = np.ascontiguousarray(x.T) if trans_a else x
        xb = np.ascontiguousarray(b.T) if trans_b else b
        out = np.empty((x.shape[0], n), np.float32)
        _gemm.gemm(xa, xb, out, trans_a, trans_b, 1)
        return out

    assert m * n * k <= 512 < rows * n * k
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(product(a[:m]).view(np.uint32),
                                      product(a)[:m].view(np.uint32))


def test_the_common_cases_take_the_direct_path():
    a, b = om.tensor(_values((4,))), om.tensor(_values((4,)))
    m = om.tensor(_values((4, 4)))
    g = om.tensor(_values((4,)), requires_grad=True)
    assert type(_direct.binary(_direct.ADD, a, b)) is om.Tensor
    assert type(_direct.binary(_direct.MUL, 2.0, a)) is om.Tensor
    assert type(_direct.binary(_direct.ADD, g, b)) is np.ndarray  # the op records the node
    assert type(_direct.binary(_direct.MUL, g, 2.0)) is np.ndarray
    assert type(_direct.unary(0, a, 1, False)) is om.Tensor
    assert type(_direct.unary(0, g, 1, True)) is np.ndarray
    assert type(_direct.reduce(_direct.SUM, m, 1, 1)) is om.Tensor
    assert type(_direct.reduce(_direct.SOFTMAX, m, -1, 1)) is om.Tensor
    assert type(_direct.matmul(m, m, a, True, 1)) is om.Tensor
    assert type(_direct.matmul(m, m, g, True, 1)) is np.ndarray


GRAPHS = {
    "mul by a number": (((5,),), lambda a: (a * 3.0 - 2 / a) * a),
    "tensors": (((5,), (5,)), lambda a, b: a * b + a / b - b),
    "exp": (((7,),), lambda a: F.exp(a) * a),
    "matmul": (((3, 4), (4, 2)), lambda a, b: a @ b),
    "linear": (((2, 8), (4, 8), (4,)), lambda x, w, b: F.linear(x, w, b)),
    "linear without bias": (((2, 8), (4, 8)), lambda x, w: F.linear(x, w) * x.sum()),
}


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("needs", [0, 1])
def test_backward_through_the_direct_paths(general, name, needs):
    """The gradients of a graph the direct paths recorded are the general path's, bit for bit
    (each input requiring gradients, or all but the first)."""
    shapes, fn = GRAPHS[name]
    values = [_values(s) for s in shapes]
    values = [np.where(np.isfinite(v), v, np.float32(0.5)) for v in values]

    def grads():
        first = min(needs, len(values) - 1)  # the first input that requires gradients
        ts = [om.tensor(v, requires_grad=i >= first) for i, v in enumerate(values)]
        out = fn(*ts)
        out.backward(om.tensor(np.linspace(-1, 1, out.numel(), dtype=np.float32)
                               .reshape(out.shape)))
        return [None if t.grad is None else t.grad.numpy().tobytes() for t in ts]
    direct = grads()
    general()
    assert direct == grads()
