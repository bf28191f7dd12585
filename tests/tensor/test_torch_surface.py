"""torch.Tensor's and torch's remaining spellings that ported programs use: mm, mT/mH/T,
nelement, type(), diag/diagonal/diag_embed, the legacy typed constructors, size=, and float64
data converted with one warning; each against torch."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")


def test_mm_as_torch(check_torch, rng):
    a = rng.standard_normal((3, 4), dtype=np.float32)
    b = rng.standard_normal((4, 5), dtype=np.float32)
    check_torch(om.mm, torch.mm, a, b)
    check_torch(lambda x, y: x.mm(y), lambda x, y: x.mm(y), a, b)


def test_mm_refuses_what_torch_refuses(rng):
    a = om.tensor(rng.standard_normal((2, 3, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"mm: expected \(n, m\) and \(m, p\)"):
        om.mm(a, a)
    with pytest.raises(ValueError, match="mm:"):
        om.mm(om.ones(2, 3), om.ones(4, 2))


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 1, 3, 5)])
def test_mT_mH_as_torch(check_torch, rng, shape):
    x = rng.standard_normal(shape, dtype=np.float32)
    check_torch(lambda t: t.mT * 1, lambda t: t.mT * 1, x)
    check_torch(lambda t: t.mH * 1, lambda t: t.mH * 1, x)


def test_mT_needs_a_matrix():
    with pytest.raises(ValueError, match="mT: expected a matrix"):
        om.ones(3).mT


@pytest.mark.parametrize("shape", [(), (3,), (3, 4), (2, 3, 4)])
def test_T_as_torch_with_its_warning_but_on_matrices(check_torch, rng, shape):
    x = rng.standard_normal(shape, dtype=np.float32)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        got = om.tensor(x).T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns once per process
        np.testing.assert_array_equal(got.numpy(), torch.from_numpy(x).T.numpy())
    assert len(ours) == (len(shape) != 2)
    assert all(("0-D" if not shape else "`x.T` on tensors of dimension other than 2")
               in str(w.message) for w in ours)
    check_torch(lambda t: t.T * 1, lambda t: t.T * 1, rng.standard_normal((3, 4), dtype=np.float32))


def test_H_of_a_matrix():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(om.tensor(x).H.numpy(), torch.from_numpy(x).H.numpy())


def test_nelement():
    assert om.ones(2, 3, 4).nelement() == torch.ones(2, 3, 4).nelement() == 24


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "bool"])
def test_type_string_and_conversions(dtype):
    x = np.array([0, 1.5, 2], np.float32)
    ours = om.tensor(x.astype(dtype))
    theirs = torch.from_numpy(x.astype(dtype))
    assert ours.type() == theirs.type()
    for target in ("torch.FloatTensor", "torch.LongTensor", "torch.IntTensor",
                   "torch.BoolTensor"):
        np.testing.assert_array_equal(ours.type(target).numpy(), theirs.type(target).numpy())
    np.testing.assert_array_equal(ours.type(om.long).numpy(), theirs.type(torch.long).numpy())
    np.testing.assert_array_equal(ours.type(om.float).numpy(),
                                  theirs.type(torch.float).numpy())


def test_type_to_its_own_dtype_is_itself():
    x = om.ones(2)
    assert x.type(om.float) is x and x.type("torch.FloatTensor") is x


def test_type_refuses_float64_and_unknown_names():
    with pytest.raises(TypeError, match="type: torch.DoubleTensor .float64. is not supported"):
        om.ones(2).type("torch.DoubleTensor")
    with pytest.raises(ValueError, match="type: invalid type 'torch.FooTensor'"):
        om.ones(2).type("torch.FooTensor")


@pytest.mark.parametrize("n,k", [(3, 0), (3, 1), (3, -2), (1, 0), (4, 5)])
def test_diag_of_a_vector(check_torch, check_grad, rng, n, k):
    x = rng.standard_normal(n, dtype=np.float32)
    check_torch(lambda t: om.diag(t, k), lambda t: torch.diag(t, k), x)
    check_torch(lambda t: t.diag(diagonal=k), lambda t: t.diag(diagonal=k), x)
    check_grad(lambda t: om.diag(t, k), x)


@pytest.mark.parametrize("shape,k", [((3, 3), 0), ((3, 5), 1), ((5, 3), -1), ((2, 4), 3),
                                     ((2, 4), -3)])
def test_diag_of_a_matrix(check_torch, check_grad, rng, shape, k):
    x = rng.standard_normal(shape, dtype=np.float32)
    check_torch(lambda t: om.diag(t, k), lambda t: torch.diag(t, k), x)
    check_grad(lambda t: om.diag(t, k), x)


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, -1, -3)])
def test_diagonal_as_torch(check_torch, rng, offset, d1, d2):
    x = rng.standard_normal((3, 4, 5), dtype=np.float32)
    check_torch(lambda t: om.diagonal(t, offset, d1, d2),
                lambda t: torch.diagonal(t, offset, d1, d2), x)
    check_torch(lambda t: t.diagonal(offset=offset, dim1=d1, dim2=d2),
                lambda t: t.diagonal(offset=offset, dim1=d1, dim2=d2), x)


@pytest.mark.parametrize("offset,d1,d2", [(0, -2, -1), (1, 0, 2), (-2, 2, 0), (0, 1, 0)])
def test_diag_embed_as_torch(check_torch, check_grad, rng, offset, d1, d2):
    x = rng.standard_normal((2, 3), dtype=np.float32)
    check_torch(lambda t: om.diag_embed(t, offset, d1, d2),
                lambda t: torch.diag_embed(t, offset, d1, d2), x)
    check_torch(lambda t: t.diag_embed(offset, d1, d2),
                lambda t: t.diag_embed(offset, d1, d2), x)
    check_grad(lambda t: om.diag_embed(t, offset, d1, d2), x)


def test_diagonal_errors():
    with pytest.raises(ValueError, match="diag: expected a 1-D or 2-D tensor"):
        om.diag(om.ones(2, 2, 2))
    with pytest.raises(ValueError, match="diagonal: dim1 and dim2 cannot be the same"):
        om.diagonal(om.ones(2, 2), 0, 1, 1)
    with pytest.raises(TypeError, match="diag_embed: offset must be an integer"):
        om.diag_embed(om.ones(2), 0.5)


@pytest.mark.parametrize("name,dtype", [("FloatTensor", np.float32), ("LongTensor", np.int64),
                                        ("IntTensor", np.int32), ("BoolTensor", np.bool_)])
def test_legacy_typed_constructors(name, dtype):
    ours, theirs = getattr(om, name), getattr(torch, name)
    t = ours(2, 3)
    assert t.shape == tuple(theirs(2, 3).shape) and t.dtype == dtype
    assert np.all(t.numpy() == 0)  # torch's are uninitialised; ours never are
    data = [[0, 1.5], [2.7, -1]]
    np.testing.assert_array_equal(ours(data).numpy(), theirs(data).numpy())
    np.testing.assert_array_equal(ours(np.array(data)).numpy(),
                                  theirs(np.array(data)).numpy())
    assert ours().shape == tuple(theirs().shape) == (0,)
    for other in ("FloatTensor", "LongTensor", "IntTensor", "BoolTensor"):
        th = getattr(torch, other)([1])
        assert isinstance(getattr(om, other)([1]), ours) == isinstance(th, theirs)


def test_legacy_constructor_refuses_a_tensor_of_another_dtype():
    with pytest.raises(TypeError, match="FloatTensor: expected a tensor of float32"):
        om.FloatTensor(om.ones(2, dtype=om.long))
    with pytest.raises(TypeError):
        torch.FloatTensor(torch.ones(2, dtype=torch.long))
    with pytest.raises(TypeError, match="LongTensor: expected sizes"):
        om.LongTensor(2, 2.5)


def test_tensor_legacy_constructor_with_sizes():
    assert om.Tensor(2, 3).shape == tuple(torch.Tensor(2, 3).shape)
    assert om.Tensor(2, 3).dtype == np.float32
    assert om.Tensor().shape == (0,) and om.Tensor().dtype == np.float32
    assert om.Tensor(4, requires_grad=True).requires_grad
    np.testing.assert_array_equal(om.Tensor([1.5, 2]).numpy(), torch.Tensor([1.5, 2]).numpy())


@pytest.mark.parametrize("factory", ["zeros", "ones", "empty", "rand", "randn"])
def test_factories_take_size_keyword(factory):
    t = getattr(om, factory)(size=(2, 3))
    assert t.shape == tuple(getattr(torch, factory)(size=(2, 3)).shape)
    assert getattr(om, factory)(size=[4]).shape == (4,)
    with pytest.raises(TypeError, match="got the shape both as arguments|got the size both"):
        getattr(om, factory)(2, size=(2, 3))


def test_random_draws_take_float32_dtype_only():
    assert om.randn(2, dtype=om.float32).dtype == np.float32
    with pytest.raises(TypeError, match="rand: the draws are float32"):
        om.rand(2, dtype=om.long)


@pytest.mark.parametrize("call", ["om.from_numpy(a)", "om.tensor(a)", "om.as_tensor(a)"])
def test_float64_data_converts_with_one_warning_per_process(call):
    script = (
        "import warnings, numpy as np, onemodel as om\n"
        "a = np.array([0.1, 1e-50, 3.0])\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    t = {call}\n"
        "    for _ in range(3):\n"
        "        om.from_numpy(a), om.tensor(a), om.as_tensor(a)\n"
        "assert t.dtype == np.float32, t.dtype\n"
        "assert (t.numpy() == a.astype(np.float32)).all()\n"
        "print(len(w)); print(w[0].message)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0] == "1"
    assert "float64 data converted to float32" in out[1] and call[3:].split("(")[0] in out[1]


def test_float32_python_data_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        om.tensor([0.5, 1.0])
        om.as_tensor(np.ones(2, np.float32))


def test_as_tensor_as_torch():
    t = om.ones(3)
    assert om.as_tensor(t) is t
    assert om.as_tensor(t, dtype=om.long).dtype == np.int64
    a = np.array([1, 2], np.int64)
    assert om.as_tensor(a).dtype == torch.as_tensor(a).numpy().dtype
    with pytest.raises(ValueError, match="as_tensor: onemodel runs on the CPU only"):
        om.as_tensor(a, device="cuda")


@pytest.mark.parametrize("call,name", [
    ("om.zeros(2, dtype=om.float64)", "zeros"), ("om.tensor([1.0], dtype=om.double)", "tensor"),
    ("om.ones(2).double()", "double"), ("om.nn.Linear(2, 2).double()", "Linear.double"),
    ("om.full((2,), 1.0, dtype=om.float64)", "full")])
def test_float64_refused_by_name(call, name):
    with pytest.raises(TypeError, match=f"{name}: .*float64.*not supported yet"):
        eval(call)


@pytest.mark.parametrize("source", ["float32", "int64", "int32", "bool"])
@pytest.mark.parametrize("dtype", [None, "float32", "int64", "int32"])
def test_cumsum_dtype_as_torch(source, dtype):
    x = np.array([[1, 0, 2], [3, 1, 1]]).astype(source)
    ours = om.cumsum(om.tensor(x), 1, dtype=None if dtype is None else getattr(om, dtype))
    theirs = torch.cumsum(torch.from_numpy(x), 1,
                          dtype=None if dtype is None else getattr(torch, dtype))
    assert ours.dtype == theirs.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal(om.tensor(x).cumsum(0, dtype=om.float32).numpy(),
                                  torch.from_numpy(x).cumsum(0, dtype=torch.float32).numpy())


def test_cumsum_dtype_keeps_the_gradient(check_torch, rng):
    check_torch(lambda t: om.cumsum(t, 0, dtype=om.float32),
                lambda t: torch.cumsum(t, 0, dtype=torch.float32),
                rng.standard_normal((4, 3), dtype=np.float32))
