"""Edge cases where torch 2.13 refuses or answers NaN: std/var without degrees of freedom, flip
with a repeated dim, index_select with an index outside the dim."""
import warnings

import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")

# (values, dim, correction): every case leaves no degrees of freedom (N <= correction).
NO_FREEDOM = [
    ([3.0], None, 1),                      # one entry, the default correction
    ([1.0, 2.0, 4.0], None, 3),            # N == correction, entries differ: inf
    ([1.0, 2.0, 4.0], None, 5),            # correction beyond N: inf, never negative
    ([2.0, 2.0, 2.0], None, 4),            # equal entries: 0/0
    ([[1.0], [5.0], [7.0]], 1, 1),         # per row, one entry each
    ([[1.0, 1.0], [5.0, 6.0]], 1, 2),      # per row: one row equal, one not
]


def _torch_with_warning(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("values,dim,correction", NO_FREEDOM)
def test_no_degrees_of_freedom_is_torch_answer_with_its_warning(name, values, dim, correction):
    kwargs = {"correction": correction} if dim is None else {"dim": dim, "correction": correction}
    expected, torch_warned = _torch_with_warning(getattr(torch, name), torch.tensor(values),
                                                 **kwargs)
    with pytest.warns(UserWarning, match=rf"{name}\(\): degrees of freedom is <= 0"):
        got = getattr(om, name)(om.tensor(values), **kwargs)
    assert torch_warned  # the oracle warns too
    np.testing.assert_array_equal(got.numpy(), expected.numpy())  # NaN where NaN, inf where inf
    assert not np.signbit(got.numpy()[~np.isnan(got.numpy())]).any()  # never -0.0 or -inf


@pytest.mark.parametrize("name", ["var", "std"])
def test_no_degrees_of_freedom_gradient_of_equal_entries_is_nan_as_torch(name):
    t = torch.tensor([3.0, 3.0], requires_grad=True)
    o = om.tensor([3.0, 3.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(torch, name)(t, correction=2).backward()
        getattr(o, name)(correction=2).backward()
    np.testing.assert_array_equal(o.grad.numpy(), t.grad.numpy())
    assert np.isnan(o.grad.numpy()).all()


@pytest.mark.parametrize("name", ["var", "std"])
def test_degrees_of_freedom_left_still_match_torch_without_warning(name, check_torch):
    x = np.array([[1.0, 2.0, 4.0], [0.5, -3.0, 2.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_torch(lambda a: getattr(om, name)(a, dim=1, correction=2),
                    lambda a: getattr(torch, name)(a, dim=1, correction=2), x)
        check_torch(lambda a: getattr(om, name)(a, correction=2.5),
                    lambda a: getattr(torch, name)(a, correction=2.5), x)


@pytest.mark.parametrize("dims", [(0, 0), (1, -1), (0, 1, 0)])
def test_flip_refuses_a_repeated_dim_as_torch(dims):
    with pytest.raises(RuntimeError, match="appears multiple times"):
        torch.flip(torch.ones(2, 3), dims)
    with pytest.raises(RuntimeError, match=r"flip: dim \d appears multiple times"):
        om.flip(om.ones(2, 3), dims)
    with pytest.raises(RuntimeError, match="flip: dim"):
        om.ones(2, 3).flip(*dims)


def test_flip_of_distinct_dims_still_matches_torch(check_torch):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check_torch(lambda a: om.flip(a, (0, -1)), lambda a: torch.flip(a, (0, -1)), x)


@pytest.mark.parametrize("index", [[-1], [0, -3], [3], [1, 7]])
def test_index_select_refuses_an_index_outside_the_dim_as_torch(index):
    # torch raises IndexError along dim 0, RuntimeError along others; onemodel IndexError
    with pytest.raises(IndexError):
        torch.index_select(torch.ones(3, 2), 0, torch.tensor(index))
    with pytest.raises(RuntimeError):
        torch.index_select(torch.ones(2, 3), 1, torch.tensor(index))
    x = om.ones(2, 3)
    with pytest.raises(IndexError, match=r"index_select: index -?\d+ is out of range for dim 1"):
        om.index_select(x, 1, om.tensor(index))
    with pytest.raises(IndexError, match="index_select"):
        x.index_select(-1, om.tensor(index))


def test_index_select_in_range_and_empty_still_match_torch(check_torch):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for index in ([2, 0, 2], []):
        check_torch(lambda a, i=index: om.index_select(a, 0, om.tensor(i, dtype=om.int64)),
                    lambda a, i=index: torch.index_select(a, 0, torch.tensor(i,
                                                                             dtype=torch.long)),
                    x)
