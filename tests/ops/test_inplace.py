"""torch's inplace=True on the activations and dropout (functional.elementwise.in_place): the
input itself comes back holding the result, with torch's gradients, in and out of the graph."""
from __future__ import annotations

import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F
from onemodel import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# (ours, torch's) with inplace as their last positional argument
CASES = {
    "relu": (F.relu, TF.relu), "silu": (F.silu, TF.silu),
    "leaky_relu": (lambda x, i: F.leaky_relu(x, 0.2, i), lambda x, i: TF.leaky_relu(x, 0.2, i)),
    "elu": (lambda x, i: F.elu(x, 0.7, i), lambda x, i: TF.elu(x, 0.7, i)),
    "celu": (lambda x, i: F.celu(x, 0.7, i), lambda x, i: TF.celu(x, 0.7, i)),
    "selu": (F.selu, TF.selu), "hardtanh": (lambda x, i: F.hardtanh(x, -0.5, 0.5, i),
                                             lambda x, i: TF.hardtanh(x, -0.5, 0.5, i)),
    "relu6": (F.relu6, TF.relu6), "hardswish": (F.hardswish, TF.hardswish),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid), "mish": (F.mish, TF.mish),
    "threshold": (lambda x, i: F.threshold(x, 0.1, -2.0, i),
                  lambda x, i: TF.threshold(x, 0.1, -2.0, i)),
}
VALUES = np.array([[-3.5, -1.0, -0.2, 0.0], [0.05, 0.3, 2.0, 7.0]], np.float32)


@pytest.mark.parametrize("name", CASES)
def test_inplace_returns_the_input_with_the_result_and_torch_gradients(name):
    ours, theirs = CASES[name]
    g = np.random.default_rng(0).standard_normal(VALUES.shape).astype(np.float32)
    # In the graph: an intermediate tensor, as after a layer.
    w = om.tensor(VALUES, requires_grad=True)
    h = w * 1.5
    out = ours(h, True)
    assert out is h and h.requires_grad
    tw = torch.tensor(VALUES, requires_grad=True)
    th = tw * 1.5
    ref = theirs(th, True)
    np.testing.assert_allclose(h.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    assert out.detach().numpy().tobytes() == ours(w * 1.5, False).detach().numpy().tobytes()
    (h * om.tensor(g)).sum().backward()
    (th * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-7)
    # Outside the graph: the values are written into the tensor's own memory.
    x = om.tensor(VALUES)
    memory = x.numpy()
    assert ours(x, True) is x and np.array_equal(memory, x.numpy())
    np.testing.assert_allclose(memory, theirs(torch.tensor(VALUES), True).numpy(), rtol=1e-6)


def test_inplace_rules_as_torch():
    leaf = om.tensor(VALUES, requires_grad=True)
    with pytest.raises(RuntimeError, match="relu: a leaf tensor that requires grad is used in "
                                           "an in-place operation"):
        F.relu(leaf, inplace=True)
    with om.no_grad():
        assert F.relu(leaf, inplace=True) is leaf and leaf.detach().numpy().min() == 0
    # A node that saved the overwritten tensor refuses to run, as torch's does.
    w = om.tensor(VALUES, requires_grad=True)
    h = w + 1
    saved = h * h  # mul keeps h for its backward
    F.relu(h, inplace=True)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        saved.sum().backward()
    with pytest.raises(TypeError, match="relu: inplace=True needs a Tensor input, got ndarray"):
        F.relu(VALUES, inplace=True)


def test_modules_with_inplace_as_torchvision_writes_them():
    model = nn.Sequential(nn.Linear(4, 6, seed=0), nn.ReLU(inplace=True), nn.Linear(6, 6, seed=1),
                          nn.LeakyReLU(0.2, inplace=True), nn.Dropout(0.5), nn.ELU(inplace=True),
                          nn.Hardtanh(inplace=True), nn.Threshold(0.0, 0.5, True))
    plain = nn.Sequential(nn.Linear(4, 6, seed=0), nn.ReLU(), nn.Linear(6, 6, seed=1),
                          nn.LeakyReLU(0.2), nn.Dropout(0.5), nn.ELU(), nn.Hardtanh(),
                          nn.Threshold(0.0, 0.5))
    plain.load_state_dict(model.state_dict())
    assert repr(model[1]) == "ReLU(inplace=True)" == repr(torch.nn.ReLU(inplace=True))
    assert repr(model[3]) == repr(torch.nn.LeakyReLU(0.2, inplace=True))
    x = om.tensor(np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32))
    for m in (model, plain):
        m.eval()
    y, z = model(x), plain(x)
    assert y.detach().numpy().tobytes() == z.detach().numpy().tobytes()
    y.sum().backward()
    z.sum().backward()
    for (name, a), (_, b) in zip(model.named_parameters(), plain.named_parameters()):
        assert a.grad.numpy().tobytes() == b.grad.numpy().tobytes(), name


def test_dropout_inplace_writes_its_result_into_the_input():
    x = om.ones(4, 8)
    out = F.dropout(x, 0.5, True, True, seed=3)
    assert out is x
    fresh = F.dropout(om.ones(4, 8), 0.5, True, False, seed=3)
    assert x.numpy().tobytes() == fresh.numpy().tobytes()
    y = om.ones(4, 8)
    assert F.dropout(y, 0.5, False, True) is y and (y.numpy() == 1).all()
