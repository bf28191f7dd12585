"""Elementwise ops: forward and backward against PyTorch and float64 central differences,
broadcasting, special values, exact-mode bit identity, and argument errors."""
import math
import warnings

import numpy as np
import pytest

import onemodel
import onemodel.functional as F
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = 1e-5
BROADCASTS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()), ((), (2, 3)),
              ((1, 17), (16, 1)), ((0, 3), (3,))]
BINARY = [(F.add, torch.add, np.add), (F.sub, torch.sub, np.subtract),
          (F.mul, torch.mul, np.multiply), (F.div, torch.div, np.divide)]
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _normal64(x):
    return 0.5 * (1 + _erf64(x / np.sqrt(2)))


def _gelu_tanh64(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


# name -> (ours, PyTorch's, float64 formula, input sampler)
UNARY = {
    "neg": (F.neg, torch.neg, np.negative, None),
    "abs": (F.abs, torch.abs, np.abs, None),
    "sqrt": (F.sqrt, torch.sqrt, np.sqrt, "positive"),
    "exp": (F.exp, torch.exp, np.exp, None),
    "log": (F.log, torch.log, np.log, "positive"),
    "tanh": (F.tanh, torch.tanh, np.tanh, None),
    "sigmoid": (F.sigmoid, torch.sigmoid, lambda x: 1 / (1 + np.exp(-x)), None),
    "erf": (F.erf, torch.erf, _erf64, None),
    "expm1": (F.expm1, torch.expm1, np.expm1, None),
    "log1p": (F.log1p, torch.log1p, np.log1p, "positive"),
    "sin": (F.sin, torch.sin, np.sin, None),
    "cos": (F.cos, torch.cos, np.cos, None),
    "softplus": (F.softplus, TF.softplus, lambda x: np.logaddexp(0, x), None),
    "gelu": (F.gelu, TF.gelu, lambda x: x * _normal64(x), None),
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"), lambda t: TF.gelu(t, approximate="tanh"),
                  _gelu_tanh64, None),
    "relu": (F.relu, torch.relu, lambda x: np.maximum(x, 0), "away_from_0"),
    "square": (lambda t: F.pow(t, 2), lambda t: t ** 2, lambda x: x ** 2, None),
    "pow_half": (lambda t: F.pow(t, 0.5), lambda t: t ** 0.5, np.sqrt, "positive"),
    "pow_3": (lambda t: t ** 3, lambda t: t ** 3, lambda x: x ** 3, None),
    "pow_-2": (lambda t: t ** -2, lambda t: t ** -2, lambda x: x ** -2.0, "positive"),
    "pow_7": (lambda t: t ** 7, lambda t: t ** 7, lambda x: x ** 7, None),
    "pow_1.5": (lambda t: t ** 1.5, lambda t: t ** 1.5, lambda x: x ** 1.5, "positive"),
    "pow_-0.7": (lambda t: t ** -0.7, lambda t: t ** -0.7, lambda x: x ** -0.7, "positive"),
    "rpow": (lambda t: 2.5 ** t, lambda t: 2.5 ** t, lambda x: 2.5 ** x, None),
    "clamp": (lambda t: F.clamp(t, -0.5, 0.7), lambda t: torch.clamp(t, -0.5, 0.7),
              lambda x: np.clip(x, -0.5, 0.7), "away_from_bounds"),
    "clamp_min": (lambda t: F.clamp(t, min=0.1), lambda t: torch.clamp(t, min=0.1),
                  lambda x: np.maximum(x, 0.1), "away_from_bounds"),
    "clamp_max": (lambda t: F.clamp(t, max=-0.2), lambda t: torch.clamp(t, max=-0.2),
                  lambda x: np.minimum(x, -0.2), "away_from_bounds"),
}


def _sample(rng, shape, kind=None):
    x = rng.standard_normal(shape) * 1.5
    if kind == "positive":
        x = np.abs(x) + 0.2
    elif kind in ("away_from_0", "away_from_bounds"):
        x = np.where(np.abs(x) < 0.05, x + 0.3, x)
        if kind == "away_from_bounds":
            for bound in (-0.5, 0.7, 0.1, -0.2):
                x = np.where(np.abs(x - bound) < 0.05, x + 0.12, x)
    return x.astype(np.float32)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000])
def test_unary_matches_torch(name, n, rng, check_torch):
    ours, theirs, _, kind = UNARY[name]
    check_torch(ours, theirs, _sample(rng, (n,), kind))


@pytest.mark.parametrize("name", UNARY)
def test_unary_against_finite_differences(name, rng, check_grad):
    ours, _, ref64, kind = UNARY[name]
    check_grad(ours, _sample(rng, (2, 5), kind), ref64=ref64)


@pytest.mark.parametrize("name", UNARY)
def test_unary_exact(name, rng, check_exact):
    ours, _, _, kind = UNARY[name]
    check_exact(ours, _sample(rng, (3, 37), kind))


@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values(name, special_values, check_torch):
    ours, theirs, _, _ = UNARY[name]
    x = special_values
    if name.startswith("gelu"):
        # PyTorch's vectorised gelu overflows past 1e38 and gives NaN at +inf (erf form) and
        # -inf (tanh form); the limits are x and 0.
        x = x[np.abs(x) < 1e30]
        big = np.array([3e38, np.inf, -np.inf], np.float32)
        out = F.gelu(tensor(big), approximate="none" if name == "gelu" else "tanh").numpy()
        np.testing.assert_array_equal(out[:2], big[:2])
        assert abs(out[2]) < 1e-30
    check_torch(ours, theirs, x, requires_grad=[False])


@pytest.mark.parametrize("op,top,ref", BINARY)
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_binary_broadcasting_matches_torch(op, top, ref, shapes, rng, check_torch):
    a = _sample(rng, shapes[0])
    b = _sample(rng, shapes[1], "positive" if op is F.div else None)
    check_torch(op, top, a, b)


@pytest.mark.parametrize("op,top,ref", BINARY)
def test_binary_against_finite_differences(op, top, ref, rng, check_grad, check_exact):
    a = _sample(rng, (2, 3))
    b = _sample(rng, (3,), "positive")
    check_grad(op, a, b, ref64=ref)
    check_grad(op, b, a, ref64=ref) if op is not F.div else check_grad(op, a, b + 1, ref64=ref)
    check_exact(op, _sample(rng, (4, 33)), _sample(rng, (33,), "positive"))


@pytest.mark.parametrize("op,top,ref", BINARY)
def test_binary_with_python_scalars(op, top, ref, rng, check_torch):
    a = _sample(rng, (2, 3), "positive")
    check_torch(lambda t: op(t, 2.5), lambda t: top(t, 2.5), a)
    check_torch(lambda t: op(3, t), lambda t: top(3, t), a)
    check_torch(lambda t: op(t, np.float32(-1.25)), lambda t: top(t, -1.25), a)


def test_operators_route_to_the_ops(rng):
    a, b = _sample(rng, (3,)), _sample(rng, (3,), "positive")
    ta, tb = tensor(a), tensor(b)
    np.testing.assert_array_equal((ta + tb).numpy(), a + b)
    np.testing.assert_array_equal((1 - ta).numpy(), 1 - a)
    np.testing.assert_array_equal((ta * 2).numpy(), a * 2)
    np.testing.assert_array_equal((ta / tb).numpy(), a / b)
    np.testing.assert_array_equal((2 / tb).numpy(), 2 / b)
    np.testing.assert_array_equal((-ta).numpy(), -a)
    np.testing.assert_array_equal(abs(ta).numpy(), np.abs(a))
    np.testing.assert_array_equal((tb ** 2).numpy(), b * b)


def test_binary_special_values(special_values, check_torch):
    a = special_values.reshape(-1, 1)
    b = special_values.reshape(1, -1)
    for op, top, _ in BINARY:
        check_torch(op, top, a, b, requires_grad=[False, False])


def test_special_values_give_nan_and_inf_without_numpy_warnings(special_values):
    # inf - inf, 0 * inf, x / 0 and overflow, forward and backward and in place: PyTorch is
    # silent, and so must onemodel be, whatever the caller's warning filters or np.seterr.
    a = special_values.reshape(-1, 1)
    b = special_values.reshape(1, -1)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        for op, top, _ in BINARY:
            ta, tb = tensor(a, requires_grad=True), tensor(b, requires_grad=True)
            out = op(ta, tb)
            out.backward(onemodel.tensor(np.full(out.shape, 3e38, np.float32)))
            want = top(torch.from_numpy(a), torch.from_numpy(b)).numpy()
            np.testing.assert_array_equal(out.detach().numpy(), want, err_msg=op.__name__)
            assert ta.grad.shape == a.shape and tb.grad.shape == b.shape
        for e in (2.0, 0.5, 3, -2, 1.7):
            t = tensor(special_values, requires_grad=True)
            (t ** e).sum().backward()
        t = tensor(special_values.copy())
        t.add_(np.float32(np.inf)).sub_(np.float32(np.inf)).mul_(np.float32(0)).div_(np.float32(0))
        assert np.isnan(t.numpy()).all()


def test_integer_arithmetic_follows_torch(check_torch):
    a = np.array([[7, -3, 0], [2, 5, -8]], np.int64)
    b = np.array([2, -4, 3], np.int64)
    for op, top, _ in BINARY:
        check_torch(op, top, a, b)
    check_torch(lambda t: F.add(t, 1.5), lambda t: torch.add(t, 1.5), a)
    assert F.add(tensor(a), 2).dtype == np.int64
    assert F.div(tensor(a), tensor(b)).dtype == np.float32


def test_pow_tensor_exponent(rng, check_torch, check_grad, check_exact):
    base = _sample(rng, (3, 4), "positive")
    expo = _sample(rng, (4,))
    check_torch(F.pow, torch.pow, base, expo)
    check_grad(F.pow, base, expo, ref64=np.power)
    check_exact(F.pow, base, expo)


def test_pow_special_cases_match_torch(check_torch):
    # (PyTorch's vectorised pow with a tensor exponent is not consistent at a base of -inf;
    # the loop over number exponents below covers it.)
    base = np.array([-2.0, -2.0, -2.0, 0.0, 0.0, 0.0, 1.0, np.nan, -0.5, np.inf, 3.0, -4.0],
                    np.float32)
    expo = np.array([2.0, 3.0, 0.5, 0.0, 2.0, -1.0, np.nan, 0.0, -3.0, -1.0, np.inf, 3.0],
                    np.float32)
    check_torch(F.pow, torch.pow, base, expo, requires_grad=[False, False])
    for e in (0, 1, 2, 3, -1, -2, 0.5, 1.5, -0.5, 40):
        check_torch(lambda t: F.pow(t, e), lambda t: torch.pow(t, e), base,
                    requires_grad=[False])
    check_torch(lambda t: F.pow(0.0, t), lambda t: torch.pow(0.0, t), expo,
                requires_grad=[False])


def test_pow_tensor_exponent_at_signed_zero_bases_matches_torch_bits():
    # IEEE pow: (-0) ** odd is -0 for a positive exponent and -inf for a negative one.
    base = np.array([-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, 0.0, 0.0, -0.0], np.float32)
    expo = np.array([-3.0, 3.0, -2.0, 2.0, 0.5, -0.5, -3.0, 3.0, 0.0], np.float32)
    ours = F.pow(tensor(base), tensor(expo)).numpy()
    want = torch.pow(torch.from_numpy(base), torch.from_numpy(expo)).numpy()
    np.testing.assert_array_equal(ours, want)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(want))
    number = F.pow(-0.0, tensor(expo)).numpy()
    np.testing.assert_array_equal(np.signbit(number), np.signbit(torch.pow(-0.0, torch.from_numpy(
        expo)).numpy()))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_pow_of_integers_is_exact_integer_as_torch(dtype):
    base = np.array([2, 3, -3, 0, 0, 5, 1, -1, -1, 2, 7, 3], dtype)
    expo = np.array([3, 2, 3, 0, 5, 0, -4, -3, -2, -1, 20, 40], dtype)
    tb, te = torch.from_numpy(base), torch.from_numpy(expo)
    cases = [(F.pow(tensor(base), tensor(expo)), torch.pow(tb, te)),
             (tensor(base) ** 3, tb ** 3), (tensor(base) ** 0, tb ** 0),
             (F.pow(2, tensor(np.abs(expo[:8]))), torch.pow(2, te[:8].abs())),
             (tensor(base) ** 2.0, tb ** 2.0)]
    for ours, want in cases:
        assert ours.dtype == np.dtype(str(want.dtype).replace("torch.", ""))
        np.testing.assert_array_equal(ours.numpy(), want.numpy())
    with pytest.raises(ValueError, match="pow: integers to negative integer powers"):
        tensor(base) ** -1
    with pytest.raises(TypeError, match="pow: not defined for bool"):
        F.pow(tensor(np.array([True])), tensor(np.array([True])))


def test_pow_gradients_at_edges(check_torch):
    x = np.array([0.0, 1.0, -1.5, 2.0], np.float32)
    for e in (0, 1, 2, 3, -1):
        check_torch(lambda t: F.pow(t, e), lambda t: torch.pow(t, e), x)
    base = np.array([0.0, 0.0, 2.0, 1.0], np.float32)
    expo = np.array([0.0, 2.0, 1.0, -2.0], np.float32)
    check_torch(F.pow, torch.pow, base, expo)


def test_abs_relu_clamp_gradients_at_kinks(check_torch):
    x = np.array([-1.0, -0.0, 0.0, 0.5, 1.0, 2.0, np.nan], np.float32)
    check_torch(F.abs, torch.abs, x)
    check_torch(F.relu, torch.relu, x)
    check_torch(lambda t: F.clamp(t, 0.0, 1.0), lambda t: torch.clamp(t, 0.0, 1.0), x)
    check_torch(lambda t: F.clamp(t, max=0.5), lambda t: torch.clamp(t, max=0.5), x)


def test_relu_bits_equal_pytorch_on_signed_zeros_nan_and_inf():
    """relu(x) = x < 0 ? +0 : x keeps -0 and NaN as PyTorch does; its gradient is g where the
    output is > 0 or NaN (a -0 g stays -0) and +0 elsewhere, even where g is inf."""
    x = np.array([-0.0, 0.0, np.nan, -1.0, 2.0, -np.inf, np.inf, 1e-45, -1e-45], np.float32)
    g = np.array([-0.0, -1.0, 3.0, np.inf, -0.0, -np.inf, 5.0, -2.0, np.nan], np.float32)
    ours = tensor(x, requires_grad=True)
    y = F.relu(ours)
    y.backward(g)
    theirs = torch.from_numpy(x.copy()).requires_grad_()
    ty = torch.relu(theirs)
    ty.backward(torch.from_numpy(g))
    assert y.detach().numpy().tobytes() == ty.detach().numpy().tobytes()
    assert ours.grad.numpy().tobytes() == theirs.grad.numpy().tobytes()


def test_clamp_integers(check_torch):
    x = np.array([-5, 0, 3, 9], np.int64)
    check_torch(lambda t: F.clamp(t, -1, 4), lambda t: torch.clamp(t, -1, 4), x)


def test_softplus_beta_threshold(rng, check_torch, check_grad):
    x = _sample(rng, (40,)) * 8
    check_torch(lambda t: F.softplus(t, 2.0, 5.0), lambda t: TF.softplus(t, 2.0, 5.0), x)
    check_torch(lambda t: F.softplus(t, 0.5), lambda t: TF.softplus(t, 0.5), x)
    check_grad(lambda t: F.softplus(t, 2.0, 5.0), _sample(rng, (8,)),
               ref64=lambda a: np.where(2 * a > 5, a, np.logaddexp(0, 2 * a) / 2))


def test_rank_0_inputs(rng, check_torch):
    x = np.asarray(np.float32(0.75))
    for name in ("exp", "log", "sqrt", "softplus", "gelu", "pow_1.5", "rpow", "abs"):
        ours, theirs, _, _ = UNARY[name]
        check_torch(ours, theirs, x)
    check_torch(lambda t: F.softplus(t, 2.0, 1.0), lambda t: TF.softplus(t, 2.0, 1.0), x)
    check_torch(F.pow, torch.pow, x, np.asarray(np.float32(-1.5)))


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4), (3, 4)), ((3, 1), (4,), (3, 4)),
                                    ((4,), (2, 1), ())])
def test_where(shapes, rng, check_torch, check_exact):
    cond = rng.random(shapes[0]) > 0.5
    a, b = _sample(rng, shapes[1]), _sample(rng, shapes[2])
    check_torch(F.where, torch.where, cond, a, b)
    check_torch(lambda c, t: F.where(c, t, 0.0), lambda c, t: torch.where(c, t, 0.0), cond, a)
    check_exact(F.where, cond, a, b)


def test_method_spellings(rng):
    x = _sample(rng, (5,), "positive")
    t = tensor(x)
    for name in ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs"):
        np.testing.assert_array_equal(getattr(t, name)().numpy(),
                                      getattr(F, name)(tensor(x)).numpy())
    np.testing.assert_array_equal(t.clamp(0.5, 1.0).numpy(), np.clip(x, 0.5, 1.0))


@pytest.mark.parametrize("call,error,words", [
    (lambda: F.add(tensor(np.ones((2, 3), np.float32)), tensor(np.ones((4,), np.float32))),
     ValueError, ["add", "(2, 3)", "(4,)"]),
    (lambda: F.mul(tensor(np.ones((2, 3), np.float32)), tensor(np.ones((3, 2), np.float32))),
     ValueError, ["mul", "(2, 3)", "(3, 2)"]),
    (lambda: F.div(tensor(np.ones(2, np.float32)), tensor(np.ones(3, np.float32))),
     ValueError, ["div", "(2,)", "(3,)"]),
    (lambda: F.pow(tensor(np.ones(2, np.float32)), tensor(np.ones(3, np.float32))),
     ValueError, ["pow", "(2,)", "(3,)"]),
    (lambda: F.where(np.ones(2, bool), tensor(np.ones(3, np.float32)), 0.0),
     ValueError, ["where", "(2,)", "(3,)"]),
    (lambda: F.where(np.ones(3), tensor(np.ones(3, np.float32)), 0.0),
     TypeError, ["where", "bool", "float64"]),
    (lambda: F.add(tensor(np.ones(2, np.float32)), "x"), TypeError, ["add", "str"]),
    (lambda: F.pow(tensor(np.ones(2, np.float32)), "2"), TypeError, ["pow", "str"]),
    (lambda: F.softplus(tensor(np.ones(2, np.int64))), TypeError, ["softplus", "int64", "(2,)"]),
    (lambda: F.gelu(tensor(np.ones(2, np.int32))), TypeError, ["gelu", "int32"]),
    (lambda: F.silu(tensor(np.ones(2, bool))), TypeError, ["silu", "bool"]),
    (lambda: F.gelu(tensor(np.ones(2, np.float32)), approximate="erf"), ValueError,
     ["gelu", "erf"]),
    (lambda: F.clamp(tensor(np.ones(2, np.float32))), ValueError, ["clamp", "min", "max"]),
    (lambda: F.clamp(tensor(np.ones(2, np.float32)), "0"), TypeError, ["clamp", "min"]),
    (lambda: F.neg(tensor(np.ones(2, bool))), TypeError, ["neg", "bool"]),
])
def test_errors_name_the_op_and_shapes(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_no_grad_and_constants_record_nothing(rng):
    x = tensor(_sample(rng, (3,)), requires_grad=True)
    with onemodel.no_grad():
        assert not F.exp(x).requires_grad and F.add(x, 1.0).grad_fn is None
    assert not F.mul(tensor(_sample(rng, (3,))), 2.0).requires_grad
    assert F.add(x, 1.0).grad_fn == "add" and F.tanh(x).grad_fn == "tanh"


def _assert_same_bits_but_nan_payloads(actual, expected):
    """Equal dtype, shape, NaN positions and every other bit (signed zeros included)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    assert actual[~nan].tobytes() == expected[~nan].tobytes()


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_modes_match_torch_bits(mode, special_values, rng):
    # Every pair of special values (±0 and ±inf divisors included), then ordinary quotients
    # near integers, whose floor is the delicate case; the gradient is 0, as PyTorch.
    ordinary = (rng.standard_normal(200) * 10).astype(np.float32)
    pairs = [(special_values.reshape(-1, 1), special_values.reshape(1, -1)),
             (ordinary, np.round(ordinary / 3).astype(np.float32) + np.float32(0.5)),
             (np.float32([6, -6, 0.3, -0.3, 1e38, -7]), np.float32([3, 3, 0.1, 0.1, 1e-3, 2]))]
    for a, b in pairs:
        ta, tb = tensor(a, requires_grad=True), tensor(b, requires_grad=True)
        out = F.div(ta, tb, rounding_mode=mode)
        want = torch.div(torch.from_numpy(a), torch.from_numpy(b), rounding_mode=mode)
        _assert_same_bits_but_nan_payloads(out.detach().numpy(), want.numpy())
        out.sum().backward()
        assert not ta.grad.numpy().any() and not tb.grad.numpy().any()
        assert ta.grad.shape == a.shape and tb.grad.shape == b.shape


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_div_rounding_modes_on_integers(mode, dtype, check_torch):
    a = np.array([[7, -7, 7, -7, 0, 6, -6, 1]], dtype)
    b = np.array([[2], [-3], [1]], dtype)
    check_torch(lambda x, y: F.div(x, y, rounding_mode=mode),
                lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    assert F.div(tensor(a), tensor(b), rounding_mode=mode).dtype == dtype
    # A float scalar promotes to float32, as torch.div(int_tensor, 2.5, rounding_mode=...).
    check_torch(lambda x: F.div(x, 2.5, rounding_mode=mode),
                lambda x: torch.div(x, 2.5, rounding_mode=mode), a)
    with pytest.raises(ZeroDivisionError, match=r"div: integer division by zero.*\(1, 8\)"):
        F.div(tensor(a), tensor(np.zeros(8, dtype)), rounding_mode=mode)


def test_div_methods_and_floordiv_operator(rng):
    a = _sample(rng, (4, 3))
    b = _sample(rng, (3,), "positive")
    ta, tb = tensor(a), tensor(b)
    for mode in (None, "trunc", "floor"):
        want = torch.div(torch.from_numpy(a), torch.from_numpy(b), rounding_mode=mode)
        assert ta.div(tb, rounding_mode=mode).numpy().tobytes() == want.numpy().tobytes()
    assert (ta // tb).numpy().tobytes() == (torch.from_numpy(a) // torch.from_numpy(b)
                                            ).numpy().tobytes()
    assert (7 // tensor(np.array([2, -2]))).tolist() == [3, -4]
    with pytest.raises(ValueError, match="div: rounding_mode.*'round'"):
        F.div(ta, tb, rounding_mode="round")
    with pytest.raises(TypeError, match="div: rounding_mode='floor'.*bool"):
        F.div(tensor(np.ones(2, bool)), tensor(np.ones(2, bool)), rounding_mode="floor")


TWO_SIDED = [(F.maximum, torch.maximum, np.maximum), (F.minimum, torch.minimum, np.minimum)]


@pytest.mark.parametrize("op,top,ref", TWO_SIDED)
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_maximum_minimum_match_torch(op, top, ref, shapes, rng, check_torch, check_grad,
                                     check_exact):
    a, b = _sample(rng, shapes[0]), _sample(rng, shapes[1])
    check_torch(op, top, a, b)
    check_exact(op, a, b)
    if a.size and b.size and a.size * b.size < 300:
        check_grad(op, a, b, ref64=ref)


@pytest.mark.parametrize("op,top,ref", TWO_SIDED)
def test_maximum_minimum_ties_nan_and_signed_zeros_as_torch(op, top, ref, special_values,
                                                             check_torch):
    # A tie gives each side half the gradient; a NaN on either side gives NaN and the whole
    # gradient to both sides; -0 against +0 keeps the first operand.
    a = special_values.reshape(-1, 1)
    b = special_values.reshape(1, -1)
    check_torch(op, top, a, b)
    _assert_same_bits_but_nan_payloads(op(tensor(a), tensor(b)).numpy(),
                                       top(torch.from_numpy(a), torch.from_numpy(b)).numpy())
    check_torch(op, top, np.float32([1.0, 2.0, np.nan, 3.0, np.nan]),
                np.float32([1.0, 3.0, 1.0, np.nan, np.nan]))


def test_maximum_minimum_promote_as_torch(check_torch):
    i = np.array([1, 5, -2], np.int64)
    f = np.array([1.5, 0.5, -2.0], np.float32)
    for op, top, _ in TWO_SIDED:
        check_torch(op, top, i, f)
        check_torch(op, top, i, np.array([2, 2, 2], np.int32))
        assert op(tensor(i), tensor(np.array([2, 2, 2], np.int32))).dtype == np.int64
    assert tensor(f).maximum(tensor(i)).dtype == np.float32
    with pytest.raises(ValueError, match=r"maximum: shapes \(3,\) and \(2,\)"):
        F.maximum(tensor(f), tensor(np.ones(2, np.float32)))


# PyTorch's clamp backward refuses an input narrower than the bounds: ours broadcasts it, as
# the forward does, and its gradient is checked against finite differences.
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)),
                                    ((2, 4), (2, 1), ()), ((2, 3), (), (3,))])
def test_clamp_tensor_bounds_match_torch(shapes, rng, check_torch, check_grad, check_exact):
    x, lo = _sample(rng, shapes[0]), _sample(rng, shapes[1]) - np.float32(0.5)
    hi = _sample(rng, shapes[2]) + np.float32(0.5)
    check_torch(F.clamp, torch.clamp, x, lo, hi)
    check_torch(lambda t, m: F.clamp(t, min=m), lambda t, m: torch.clamp(t, min=m), x, lo)
    check_torch(lambda t, m: F.clamp(t, max=m), lambda t, m: torch.clamp(t, max=m), x, hi)
    check_torch(F.clamp_min, torch.clamp_min, x, lo)
    check_torch(F.clamp_max, torch.clamp_max, x, hi)
    check_exact(F.clamp, x, lo, hi)
    check_grad(F.clamp, x, lo, hi, ref64=lambda a, b, c: np.minimum(np.maximum(a, b), c))
    check_grad(F.clamp, x[:1], lo, hi, ref64=lambda a, b, c: np.minimum(np.maximum(a, b), c))


def test_clamp_tensor_bounds_at_edges_as_torch(check_torch):
    # Ties, crossed bounds (min > max: the result is max, and max takes the gradient), NaN in
    # the input or in either bound.
    nan = np.nan
    x = np.float32([0, 1, 2, 3, nan, 1, 2, 5, 2])
    lo = np.float32([1, 1, nan, 1, 1, 3, 2, 4, 2])
    hi = np.float32([2, 2, 3, nan, 2, 2, 2, 4, 1])
    check_torch(F.clamp, torch.clamp, x, lo, hi)
    check_torch(F.clamp_min, torch.clamp_min, x, lo)
    check_torch(F.clamp_max, torch.clamp_max, x, hi)
    check_torch(lambda t: F.clamp(t, 2.5, 1.0), lambda t: torch.clamp(t, 2.5, 1.0), x)


def test_clamp_tensor_bounds_dtypes_and_methods(check_torch):
    i = np.array([1, 5, 9], np.int64)
    check_torch(F.clamp, torch.clamp, i, np.float32([2.5, 2.5, 2.5]))
    check_torch(F.clamp, torch.clamp, i, np.array([2, 2, 2], np.int64), np.array([4], np.int64))
    assert F.clamp(tensor(i), tensor(np.array([2])), tensor(np.array([4]))).dtype == np.int64
    t = tensor(np.float32([0.5, 3.0]))
    assert t.clamp_min(1.0).tolist() == [1.0, 3.0] and t.clamp_max(1.0).tolist() == [0.5, 1.0]
    assert t.clamp(tensor(np.float32([1.0, 1.0])), 2.0).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match=r"clamp: input \(2,\), min \(3,\) cannot be broadcast"):
        F.clamp(t, tensor(np.zeros(3, np.float32)))
    with pytest.raises(TypeError, match="clamp: max must be a number or a tensor, got list"):
        F.clamp(t, 0.0, [1.0])


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "sin", "cos",
                                  "expm1", "log1p"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_integer_and_bool_inputs_promote_to_float32_as_torch(name, dtype, check_torch):
    x = np.array([[0, 1, 2], [3, 7, 40]]).astype(dtype)
    ours, theirs = UNARY[name][:2]
    check_torch(ours, theirs, x)
    out = ours(tensor(x))
    assert out.dtype == np.float32 and not out.requires_grad
    np.testing.assert_array_equal(getattr(tensor(x), name)().numpy(), out.numpy())
    # The same bits as the float32 input itself: the promotion is the only difference.
    assert out.numpy().tobytes() == ours(tensor(x.astype(np.float32))).numpy().tobytes()


@pytest.mark.parametrize("op,top", [(F.add, torch.add), (F.sub, torch.sub)])
def test_add_sub_alpha_match_torch(op, top, rng, check_torch, check_grad):
    a, b = _sample(rng, (3, 4)), _sample(rng, (4,))
    check_torch(lambda x, y: op(x, y, alpha=2.5), lambda x, y: top(x, y, alpha=2.5), a, b)
    check_torch(lambda x: op(x, 3, alpha=-2), lambda x: top(x, 3, alpha=-2), a)
    i = np.array([1, 2, 3], np.int64)
    check_torch(lambda x, y: op(x, y, alpha=3), lambda x, y: top(x, y, alpha=3), i, i)
    sign = 1 if op is F.add else -1
    check_grad(lambda x, y: op(x, y, alpha=0.5), a, b, ref64=lambda x, y: x + sign * 0.5 * y)
    ta, tb = tensor(a), tensor(b)
    assert getattr(ta, op.__name__)(tb, alpha=2.5).numpy().tobytes() == op(
        ta, tb, alpha=2.5).numpy().tobytes()
    # alpha = 1 is the plain op, bit for bit.
    assert op(ta, tb, alpha=1).numpy().tobytes() == op(ta, tb).numpy().tobytes()
