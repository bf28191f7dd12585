"""Embedding's PyTorch options against PyTorch: padding_idx, max_norm (the in-place renorm of
the looked-up rows), scale_grad_by_freq, _weight/_freeze, from_pretrained; errors; exact bits."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F
from onemodel import interop, nn

torch = pytest.importorskip("torch")

IDX = np.array([[1, 2, 3, 3], [3, 0, 2, 7]])


def _twins(num=8, dim=5, **kwargs):
    """Our Embedding and PyTorch's with the same weight (ours loaded into torch)."""
    m = nn.Embedding(num, dim, seed=2, **kwargs)
    t = torch.nn.Embedding(num, dim, **kwargs)
    t.load_state_dict(interop.to_torch_state_dict(m))
    return m, t


def _forward_backward(m, t, idx, rng):
    out, tout = m(om.tensor(idx)), t(torch.from_numpy(idx))
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(torch.from_numpy(g))
    return out, tout


@pytest.mark.parametrize("padding_idx", [2, -6])
def test_padding_idx_row_starts_zero_and_gets_no_gradient(padding_idx, rng, assert_close):
    m, t = _twins(padding_idx=padding_idx)
    assert m.padding_idx == 2 and t.padding_idx == 2
    w = m.weight.detach().numpy()
    assert not w[2].any() and w[[0, 1, 3]].all()
    out, tout = _forward_backward(m, t, IDX, rng)
    assert_close(out.detach().numpy(), tout.detach().numpy(), 0)
    assert not m.weight.grad.numpy()[2].any()
    assert_close(m.weight.grad.numpy(), t.weight.grad.numpy(), 1e-6, "grad weight")


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, float("inf")])
def test_max_norm_renormalises_looked_up_rows_in_place(norm_type, rng, assert_close):
    m, t = _twins(max_norm=1.5, norm_type=norm_type)
    before = m.weight.detach().numpy().copy()
    out, tout = _forward_backward(m, t, IDX, rng)
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-6, "output")
    after = m.weight.detach().numpy()
    assert_close(after, t.weight.detach().numpy(), 1e-6, "renormalised weight")
    untouched = [i for i in range(8) if i not in IDX]
    np.testing.assert_array_equal(after[untouched], before[untouched])
    assert not np.array_equal(after[IDX.ravel()], before[IDX.ravel()]), "nothing renormalised"
    norms = np.linalg.norm(after[np.unique(IDX)].astype(np.float64), ord=norm_type, axis=1)
    assert np.all(norms <= 1.5 * (1 + 1e-6))
    assert_close(m.weight.grad.numpy(), t.weight.grad.numpy(), 1e-6, "grad weight")


def test_max_norm_bumps_the_version_as_torch(rng):
    """A graph that saved the weight before the renorm refuses to run backward, as PyTorch."""
    m, t = _twins(max_norm=0.5)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    tied = F.linear(om.tensor(x, requires_grad=True), m.weight)  # x's gradient needs weight
    m(om.tensor(IDX))
    with pytest.raises(RuntimeError, match="in-place"):
        tied.sum().backward()
    ttied = torch.from_numpy(x).requires_grad_() @ t.weight.T
    t(torch.from_numpy(IDX))
    with pytest.raises(RuntimeError, match="inplace"):
        ttied.sum().backward()


@pytest.mark.parametrize("padding_idx", [None, 3])
def test_scale_grad_by_freq(padding_idx, rng, assert_close):
    m, t = _twins(scale_grad_by_freq=True, padding_idx=padding_idx)
    idx = np.array([[3, 3, 3, 1], [1, 5, 3, 0]])
    _forward_backward(m, t, idx, rng)
    assert_close(m.weight.grad.numpy(), t.weight.grad.numpy(), 1e-6, "grad weight")


def test_functional_with_every_option_by_keyword(rng, assert_close):
    w = rng.standard_normal((6, 4)).astype(np.float32)
    wo, wt = om.tensor(w.copy(), requires_grad=True), torch.from_numpy(w.copy())
    wt.requires_grad_()
    idx = np.array([5, 0, 5, 2])
    out = F.embedding(input=om.tensor(idx), weight=wo, padding_idx=0, max_norm=1.0,
                      norm_type=2.0, scale_grad_by_freq=True, sparse=False)
    tout = torch.nn.functional.embedding(torch.from_numpy(idx), wt, padding_idx=0,
                                         max_norm=1.0, scale_grad_by_freq=True)
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-6)
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(torch.from_numpy(g))
    assert_close(wo.grad.numpy(), wt.grad.numpy(), 1e-6, "grad weight")


def test_scale_grad_by_freq_finite_differences(check_grad, rng):
    """Without scaling the gradient is the derivative; with it, each index's count divides it,
    so count·(scaled gradient) is checked against central differences in float64."""
    idx = np.array([1, 1, 3, 1, 0])
    counts = np.bincount(idx, minlength=4).astype(np.float64)[:, None]
    w = rng.standard_normal((4, 3)).astype(np.float32)
    check_grad(lambda wt: F.embedding(om.tensor(idx), wt), w, ref64=lambda a: a[idx])
    wo = om.tensor(w, requires_grad=True)
    out = F.embedding(om.tensor(idx), wo, scale_grad_by_freq=True)
    g = rng.standard_normal(out.shape)
    out.backward(g.astype(np.float32))
    numeric = np.zeros((4, 3))
    np.add.at(numeric, idx, g)  # the derivative of sum(w[idx] * g)
    np.testing.assert_allclose(wo.grad.numpy() * np.maximum(counts, 1), numeric, rtol=1e-6,
                               atol=1e-6)


def test_weight_given_and_frozen():
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    e = nn.Embedding(4, 3, padding_idx=1, _weight=om.tensor(w), _freeze=True)
    np.testing.assert_array_equal(e.weight.detach().numpy(), w)  # not zeroed, as PyTorch
    assert not e.weight.requires_grad
    g = om.Generator(5)
    nn.Embedding(4, 3, _weight=om.tensor(w), generator=g)
    assert g.next_u64() == om.Generator(5).next_u64(), "a given weight draws nothing"
    assert nn.Embedding(4, 3, _freeze=True).weight.requires_grad is False


def test_from_pretrained_matches_torch(rng, assert_close):
    w = rng.standard_normal((5, 3)).astype(np.float32)
    e = nn.Embedding.from_pretrained(om.tensor(w), padding_idx=4)
    te = torch.nn.Embedding.from_pretrained(torch.from_numpy(w), padding_idx=4)
    assert not e.weight.requires_grad and not te.weight.requires_grad
    assert (e.num_embeddings, e.embedding_dim, e.padding_idx) == (5, 3, 4)
    idx = np.array([4, 0, 2])
    assert_close(e(om.tensor(idx)).detach().numpy(), te(torch.from_numpy(idx)).numpy(), 0)
    trainable = nn.Embedding.from_pretrained(om.tensor(w), freeze=False, max_norm=1.0)
    assert trainable.weight.requires_grad and trainable.max_norm == 1.0
    with pytest.raises(ValueError, match=r"from_pretrained: embeddings must be 2-D.*\(5,\)"):
        nn.Embedding.from_pretrained(om.tensor(w[:, 0]))


def test_state_dict_round_trip_with_torch(rng, assert_close):
    t = torch.nn.Embedding(7, 4, padding_idx=0, max_norm=2.0)
    m = nn.Embedding(7, 4, padding_idx=0, max_norm=2.0)
    interop.load_torch_state_dict(m, t.state_dict())
    assert_close(m.weight.detach().numpy(), t.weight.detach().numpy(), 0)
    back = interop.to_torch_state_dict(m)
    assert list(back) == list(t.state_dict())
    torch.nn.Embedding(7, 4).load_state_dict(back)


def test_errors():
    with pytest.raises(NotImplementedError, match="Embedding: sparse=True"):
        nn.Embedding(4, 3, sparse=True)
    w = om.tensor(np.ones((4, 3), np.float32))
    with pytest.raises(NotImplementedError, match=r"embedding: sparse=True.*\(4, 3\)"):
        F.embedding(om.tensor(np.array([0])), w, sparse=True)
    for bad in (4, -5, 1.5, True):
        with pytest.raises(ValueError, match=r"padding_idx must be an integer in \[-4, 4\)"):
            nn.Embedding(4, 3, padding_idx=bad)
        with pytest.raises(ValueError, match="embedding: padding_idx"):
            F.embedding(om.tensor(np.array([0])), w, padding_idx=bad)
    with pytest.raises(ValueError, match=r"_weight of shape \(4, 3\) does not match.*\(4, 2\)"):
        nn.Embedding(4, 2, _weight=w)
    with pytest.raises(ValueError, match="norm_type must be > 0"):
        F.embedding(om.tensor(np.array([0])), w, max_norm=1.0, norm_type=0.0)
    before = w.detach().numpy().copy()
    with pytest.raises(ValueError, match=r"index 4 out of range"):
        F.embedding(om.tensor(np.array([0, 4])), w, max_norm=0.1)
    np.testing.assert_array_equal(w.detach().numpy(), before)  # checked before the renorm


@pytest.mark.parametrize("norm_type", [2.0, 3.0])
def test_max_norm_exact_bits(norm_type, check_exact, rng):
    w = (rng.standard_normal((40, 37)) * 3).astype(np.float32)
    idx = rng.integers(0, 40, (6, 9))
    check_exact(lambda wt: F.embedding(om.tensor(idx), wt, max_norm=1.0, norm_type=norm_type,
                                       scale_grad_by_freq=True), w)
