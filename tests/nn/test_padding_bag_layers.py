"""Reflection/replication/circular padding layers and F.pad's modes, EmbeddingBag and
F.embedding_bag, Dropout3d and Dropout2d on unbatched inputs, Bilinear: each against torch,
values and gradients."""
import warnings

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@pytest.mark.parametrize("name,shape,padding", [
    ("ReflectionPad1d", (2, 3, 6), 2), ("ReflectionPad1d", (3, 5), (1, 3)),
    ("ReflectionPad2d", (1, 2, 4, 5), (1, 2, 3, 0)), ("ReflectionPad2d", (2, 4, 4), 3),
    ("ReplicationPad1d", (2, 3, 4), (3, 1)), ("ReplicationPad2d", (1, 2, 3, 4), 2),
    ("CircularPad1d", (2, 3, 5), (2, 1)), ("CircularPad2d", (1, 2, 4, 5), (1, 2, 2, 1)),
])
def test_padding_layers_as_torch(check_torch, check_grad, rng, name, shape, padding):
    x = rng.standard_normal(shape, dtype=np.float32)
    ours, theirs = getattr(nn, name)(padding), getattr(torch.nn, name)(padding)
    check_torch(ours, theirs, x)
    check_grad(ours, x)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 3, 5), (1, 2)), ((2, 3, 5, 6), (2, 0, 1, 3)),
                                       ((3, 5, 6), (1, 1, 2, 2))])
def test_functional_pad_modes_as_torch(check_torch, rng, mode, shape, pad):
    x = rng.standard_normal(shape, dtype=np.float32)
    check_torch(lambda t: F.pad(t, pad, mode=mode), lambda t: TF.pad(t, pad, mode=mode), x)


def test_padding_layer_refuses_wrong_sides():
    with pytest.raises(ValueError, match="ReflectionPad2d: padding must be an int or 4 ints"):
        nn.ReflectionPad2d((1, 2))


def _bag_inputs(rng):
    weight = rng.standard_normal((10, 4), dtype=np.float32)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0], np.int64)
    offsets = np.array([0, 4, 4, 7], np.int64)  # the third bag is empty
    return weight, idx, offsets


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 0, 4])
def test_embedding_bag_offsets_as_torch(check_torch, rng, mode, padding_idx):
    weight, idx, offsets = _bag_inputs(rng)
    check_torch(
        lambda w: F.embedding_bag(om.tensor(idx), w, om.tensor(offsets), mode=mode,
                                  padding_idx=padding_idx),
        lambda w: TF.embedding_bag(torch.from_numpy(idx), w, torch.from_numpy(offsets),
                                   mode=mode, padding_idx=padding_idx), weight)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_input_and_last_offset(check_torch, rng, mode):
    weight, idx, offsets = _bag_inputs(rng)
    rows = idx.reshape(2, 5)
    check_torch(lambda w: F.embedding_bag(om.tensor(rows), w, mode=mode),
                lambda w: TF.embedding_bag(torch.from_numpy(rows), w, mode=mode), weight)
    last = np.r_[offsets, len(idx)]
    check_torch(
        lambda w: F.embedding_bag(om.tensor(idx), w, om.tensor(last), mode=mode,
                                  include_last_offset=True),
        lambda w: TF.embedding_bag(torch.from_numpy(idx), w, torch.from_numpy(last), mode=mode,
                                   include_last_offset=True), weight)


def test_embedding_bag_per_sample_weights_gradients(check_torch, check_grad, rng):
    weight, idx, offsets = _bag_inputs(rng)
    psw = rng.standard_normal(len(idx), dtype=np.float32)
    check_torch(
        lambda w, p: F.embedding_bag(om.tensor(idx), w, om.tensor(offsets), mode="sum",
                                     per_sample_weights=p),
        lambda w, p: TF.embedding_bag(torch.from_numpy(idx), w, torch.from_numpy(offsets),
                                      mode="sum", per_sample_weights=p), weight, psw)
    check_grad(lambda w, p: F.embedding_bag(om.tensor(idx), w, om.tensor(offsets), mode="sum",
                                            per_sample_weights=p), weight, psw)


def test_embedding_bag_same_bits_everywhere(check_exact, rng):
    weight = rng.standard_normal((50, 33), dtype=np.float32)
    idx = rng.integers(0, 50, 400)
    offsets = np.sort(rng.integers(0, 400, 30))
    offsets[0] = 0
    check_exact(lambda w: F.embedding_bag(om.tensor(idx), w, om.tensor(offsets)), weight)


def test_embedding_bag_module_as_torch(rng):
    weight, idx, offsets = _bag_inputs(rng)
    ours = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0)
    theirs = torch.nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0)
    assert repr(ours) == repr(theirs)
    assert np.all(ours.weight.detach().numpy()[0] == 0)
    theirs.weight.data = torch.from_numpy(ours.weight.detach().numpy().copy())
    out = ours(om.tensor(idx), om.tensor(offsets))
    expected = theirs(torch.from_numpy(idx), torch.from_numpy(offsets))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-6,
                               atol=1e-6)
    out.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("call,error,message", [
    (lambda w: F.embedding_bag(om.tensor([1, 2]), w), ValueError, "offsets must be given"),
    (lambda w: F.embedding_bag(om.tensor([[1, 2]]), w, om.tensor([0])), ValueError,
     "offsets must be None for a 2-D input"),
    (lambda w: F.embedding_bag(om.tensor([1, 2]), w, om.tensor([1])), ValueError,
     "offsets must start at 0"),
    (lambda w: F.embedding_bag(om.tensor([1, 2]), w, om.tensor([0]), mode="prod"),
     ValueError, "mode must be one of"),
    (lambda w: F.embedding_bag(om.tensor([1, 2]), w, om.tensor([0]), mode="mean",
                               per_sample_weights=om.ones(2)), NotImplementedError,
     "per_sample_weights is only supported for mode='sum'"),
    (lambda w: F.embedding_bag(om.tensor([1, 12]), w, om.tensor([0])), ValueError,
     "index 12 out of range"),
])
def test_embedding_bag_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(om.ones(10, 4))


@pytest.mark.parametrize("shape,warns", [((2, 3, 2, 2, 2), False), ((3, 2, 2, 2), False),
                                         ((3, 4, 5), True)])
def test_dropout3d_as_torch(shape, warns):
    x = np.ones(shape, np.float32)
    layer = nn.Dropout3d(0.5)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        out = layer(om.tensor(x)).numpy()
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        torch.nn.Dropout3d(0.5)(torch.from_numpy(x))
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    assert len(ours) == warns
    # whole channels: the mask is constant over everything after (N, C), or after C unbatched
    lead = 2 if len(shape) == 5 else 1
    per_channel = out.reshape(shape[:lead] + (-1,))
    assert np.all(per_channel == per_channel[..., :1])
    assert set(np.unique(out)) <= {0.0, 2.0}
    np.testing.assert_array_equal(layer.eval()(om.tensor(x)).numpy(), x)


def test_dropout2d_on_3d_input_warns_as_torch():
    x = np.ones((2, 3, 4), np.float32)
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        out = nn.Dropout2d(0.5)(om.tensor(x)).numpy()
    assert np.all(out == out[:, :, :1])  # read as (N, C, L), as torch


@pytest.mark.parametrize("lead", [(5,), (2, 3), ()])
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_as_torch(check_torch, check_grad, rng, lead, bias):
    x1 = rng.standard_normal(lead + (3,), dtype=np.float32)
    x2 = rng.standard_normal(lead + (4,), dtype=np.float32)
    w = rng.standard_normal((2, 3, 4), dtype=np.float32)
    b = rng.standard_normal(2, dtype=np.float32) if bias else None
    args = (x1, x2, w) + ((b,) if bias else ())
    check_torch(F.bilinear, TF.bilinear, *args)
    check_grad(F.bilinear, *args)


def test_bilinear_module_as_torch(rng):
    ours, theirs = nn.Bilinear(3, 4, 2), torch.nn.Bilinear(3, 4, 2)
    assert repr(ours) == repr(theirs)
    assert ours.weight.shape == tuple(theirs.weight.shape)
    bound = 1 / np.sqrt(3)
    assert np.abs(ours.weight.detach().numpy()).max() <= bound
    with pytest.raises(ValueError, match="bilinear: expected input1"):
        ours(om.ones(2, 4), om.ones(2, 4))
