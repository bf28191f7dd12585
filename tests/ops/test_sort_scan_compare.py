"""sort, topk, cumsum, tril/triu, comparisons, Tensor.to, in-place writes and om.multinomial
against PyTorch (values, indices and gradients), finite differences, and their errors."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F

torch = pytest.importorskip("torch")


def _x(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# -- sort and topk --------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_torch(dim, descending, rng, check_torch):
    x = _x(rng, 4, 5, 3)
    x[0, :2] = 1.5  # ties keep their order (stable)
    x[1, 1, 1] = np.nan  # NaN is the largest, as PyTorch
    check_torch(lambda a: F.sort(a, dim, descending),
                lambda a: torch.sort(a, dim=dim, descending=descending, stable=True), x)
    check_torch(lambda a: a.sort(dim, descending),
                lambda a: a.sort(dim=dim, descending=descending, stable=True), x)


@pytest.mark.parametrize("k, dim, largest", [(2, -1, True), (3, 0, False), (0, 1, True),
                                             (5, 1, True)])
def test_topk_matches_torch(k, dim, largest, rng, check_torch):
    x = rng.permutation(60).astype(np.float32).reshape(3, 5, 4)  # distinct: torch's tie order
    check_torch(lambda a: F.topk(a, k, dim, largest), lambda a: torch.topk(a, k, dim, largest), x)
    check_torch(lambda a: a.topk(k, dim=dim, largest=largest),
                lambda a: a.topk(k, dim=dim, largest=largest), x)


def test_sort_and_topk_of_integers_and_scalars():
    ints = om.tensor([3, -1, 2, 3])
    assert ints.sort(descending=True).indices.tolist() == [0, 3, 2, 1]
    assert om.tensor([True, False, True]).sort().values.tolist() == [False, True, True]
    values, indices = om.tensor(2.5).topk(1)
    assert values.shape == () and int(indices) == 0
    with pytest.raises(ValueError, match=r"topk: k must be an integer in \[0, 4\]"):
        ints.topk(5)
    with pytest.raises(ValueError, match="sort: dim 2 out of range"):
        ints.sort(2)


def test_sort_gradient_by_finite_differences(rng, check_grad):
    check_grad(lambda a: F.topk(a, 2, 0)[0], _x(rng, 4, 3))


# -- cumsum, tril, triu ---------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_matches_torch(dim, rng, check_torch, check_grad, check_exact):
    x = _x(rng, 3, 4, 5)
    check_torch(lambda a: F.cumsum(a, dim), lambda a: torch.cumsum(a, dim), x)
    check_grad(lambda a: a.cumsum(dim), _x(rng, 2, 3, 2), ref64=lambda a: np.cumsum(a, dim))
    check_exact(lambda a: a.cumsum(dim), _x(rng, 7, 9, 11))


def test_cumsum_of_integers_and_scalars():
    out = om.tensor([[1, 2], [3, 4]]).cumsum(0)
    assert out.dtype == np.int64 and out.tolist() == [[1, 2], [4, 6]]
    assert om.tensor([True, True, False]).cumsum(0).tolist() == [1, 2, 2]
    assert float(om.tensor(3.0).cumsum(0)) == 3.0
    with pytest.raises(ValueError, match="cumsum: dim 2 out of range"):
        om.tensor([1.0]).cumsum(2)


@pytest.mark.parametrize("diagonal", [-2, 0, 1, 4])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 5, 3)])
def test_tril_triu_match_torch(diagonal, shape, rng, check_torch):
    x = _x(rng, *shape)
    x[..., 0, -1] = np.inf  # zeroed above the diagonal, never inf · 0
    check_torch(lambda a: F.tril(a, diagonal), lambda a: torch.tril(a, diagonal), x)
    check_torch(lambda a: a.triu(diagonal), lambda a: a.triu(diagonal), x)


def test_tril_triu_errors_and_dtypes():
    assert om.tensor([[1, 2], [3, 4]]).tril().tolist() == [[1, 0], [3, 4]]
    with pytest.raises(ValueError, match=r"tril: input must have at least 2 dimensions, got "
                                         r"shape \(3,\)"):
        F.tril(om.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="triu: diagonal must be an integer"):
        F.triu(om.ones(2, 2), 0.5)


# -- comparisons ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_match_torch(name, rng):
    a = np.round(_x(rng, 3, 4))
    b = np.round(_x(rng, 4))
    a[0, 0] = np.nan
    for other, t_other in ((om.tensor(b), torch.from_numpy(b)), (0.0, 0.0)):
        expected = getattr(torch, name)(torch.from_numpy(a), t_other).numpy()
        np.testing.assert_array_equal(getattr(F, name)(om.tensor(a), other).numpy(), expected)
        np.testing.assert_array_equal(getattr(om.tensor(a), name)(other).numpy(), expected)
    with pytest.raises(ValueError, match=rf"{name}: shapes \(3, 4\) and \(3,\) cannot be "):
        getattr(F, name)(om.tensor(a), om.tensor(b[:3]))


# -- Tensor.to and in-place writes ----------------------------------------------------------
def test_to_float32_and_cpu_only():
    x = om.tensor([1.0, 2.0])
    assert x.to("cpu") is x and x.to(torch.float32) is x and x.to(np.float32) is x
    assert x.to(torch.device("cpu")) is x
    assert x.to("cpu", dtype="float32") is x and x.to(x) is x
    copied = x.to("cpu", copy=True)
    assert copied is not x and copied.tolist() == x.tolist()
    assert om.tensor([1, 2]).to(torch.float32).dtype == np.float32
    for bad in (torch.float64, "cuda", np.int64, "meta"):
        with pytest.raises(TypeError, match=r"to: only the CPU and float32 .* \(2,\)"):
            x.to(bad)
    with pytest.raises(TypeError, match="to: expected to"):
        x.to(memory_format=None)


def test_in_place_write_to_a_saved_tensor_is_caught_at_backward():
    w = om.tensor([1.0, 2.0], requires_grad=True)
    x = om.tensor([3.0, 4.0])
    y = (w * x).sum()
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()
    for write in (lambda t: t.mul_(2.0), lambda t: t.zero_(), lambda t: t.fill_(1.0),
                  lambda t: t.copy_(om.tensor([0.0, 0.0]))):
        x = om.tensor([3.0, 4.0])
        y = (w * x).sum()
        write(x.data)  # through an alias that shares the version counter
        with pytest.raises(RuntimeError, match="modified by an in-place operation"):
            y.backward()


# -- multinomial ----------------------------------------------------------------------------
def test_multinomial_with_replacement_frequencies():
    probs = np.array([0.1, 0.0, 0.6, 0.3], np.float32)
    draws = om.multinomial(om.tensor(probs), 20000, replacement=True,
                           generator=om.Generator(3)).numpy()
    assert draws.dtype == np.int64 and draws.shape == (20000,)
    freq = np.bincount(draws, minlength=4) / draws.size
    assert freq[1] == 0
    np.testing.assert_allclose(freq, probs, atol=0.015)
    again = om.multinomial(om.tensor(probs), 20000, True, generator=om.Generator(3)).numpy()
    np.testing.assert_array_equal(draws, again)


def test_multinomial_without_replacement_and_default_generator():
    weights = om.tensor([[1.0, 0.0, 2.0, 3.0, 4.0], [5.0, 1.0, 0.0, 0.0, 1.0]])
    om.manual_seed(5)
    out = om.multinomial(weights, 3)
    assert out.shape == (2, 3)
    for row, w in zip(out.numpy(), weights.numpy()):
        assert len(set(row)) == 3 and all(w[i] > 0 for i in row)
    om.manual_seed(5)
    np.testing.assert_array_equal(om.multinomial(weights, 3).numpy(), out.numpy())
    g = om.Generator(5)
    for _ in range(6):  # one draw per sample of each row
        g.next_u64()
    assert om.default_generator.state == g.state
    everything = om.multinomial(om.tensor([1.0, 2.0, 3.0]), 3, generator=om.Generator(1))
    assert sorted(everything.tolist()) == [0, 1, 2]


@pytest.mark.parametrize("weights, n, replacement, message", [
    ([[1.0, 0.0], [0.0, 1.0]], 2, False, "cannot draw 2 samples without replacement"),
    ([1.0, -1.0], 1, True, "finite and >= 0"),
    ([1.0, np.nan], 1, True, "finite and >= 0"),
    ([0.0, 0.0], 1, True, "no positive weight"),
    ([1, 2], 1, True, "floating-point"),
    ([1.0, 2.0], 0, True, "num_samples must be a positive integer"),
])
def test_multinomial_errors(weights, n, replacement, message):
    state = om.get_rng_state()
    with pytest.raises(ValueError, match="multinomial: .*" + message):
        om.multinomial(om.tensor(weights), n, replacement)
    assert om.get_rng_state() == state  # refused before anything was drawn
