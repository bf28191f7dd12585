"""Basic layers against torch.nn with the same weights: forward values and every gradient."""
import numpy as np
import pytest

import onemodel as om
from onemodel import nn

torch = pytest.importorskip("torch")


def load_from_torch(ours, theirs):
    """Our state names and shapes are PyTorch's, so its state dict loads as it is."""
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})


def run_both(ours, theirs, x, rng, tol=1e-5, requires_grad=True, assert_close=None):
    """Forward and backward in both engines; compares output, input grad and parameter grads."""
    xo = om.tensor(x, requires_grad=requires_grad)
    xt = torch.from_numpy(x.copy()).requires_grad_(requires_grad)
    yo, yt = ours(xo), theirs(xt)
    assert_close(yo.detach().numpy(), yt.detach().numpy(), tol, "output")
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yo.backward(g)
    yt.backward(torch.from_numpy(g))
    if requires_grad:
        assert_close(xo.grad.numpy(), xt.grad.numpy(), tol, "input grad")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad.numpy(), theirs_params[name].grad.numpy(), tol, f"{name} grad")


@pytest.mark.parametrize("shape,bias", [((5, 3), True), ((2, 4, 3), True), ((1, 3), False),
                                        ((0, 3), True)])
def test_linear(shape, bias, rng, assert_close):
    ours, theirs = nn.Linear(3, 4, bias=bias, seed=1), torch.nn.Linear(3, 4, bias=bias)
    with torch.no_grad():  # the other direction: our initial weights into PyTorch
        theirs.weight.copy_(torch.from_numpy(ours.weight.detach().numpy()))
        if bias:
            theirs.bias.copy_(torch.from_numpy(ours.bias.detach().numpy()))
    x = rng.standard_normal(shape).astype(np.float32)
    run_both(ours, theirs, x, rng, assert_close=assert_close)


@pytest.mark.parametrize("normalized_shape,shape", [(6, (4, 6)), ((2, 3), (5, 2, 3)),
                                                    (17, (3, 17))])
def test_layer_norm(normalized_shape, shape, rng, assert_close):
    torch.manual_seed(0)
    ours, theirs = nn.LayerNorm(normalized_shape), torch.nn.LayerNorm(normalized_shape)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        theirs.bias.uniform_(-0.5, 0.5)
    load_from_torch(ours, theirs)
    x = (3.0 * rng.standard_normal(shape) + 1.0).astype(np.float32)
    run_both(ours, theirs, x, rng, tol=1e-5, assert_close=assert_close)


def test_layer_norm_without_bias(rng, assert_close):
    ours, theirs = nn.LayerNorm((2, 3), 1e-4, True, False), torch.nn.LayerNorm((2, 3), 1e-4, True,
                                                                            False)
    assert ours.bias is None and list(ours.state_dict()) == list(theirs.state_dict()) == [
        "weight"]
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
    load_from_torch(ours, theirs)
    x = (3.0 * rng.standard_normal((4, 2, 3)) + 1.0).astype(np.float32)
    run_both(ours, theirs, x, rng, tol=1e-5, assert_close=assert_close)
    assert list(nn.LayerNorm(4, elementwise_affine=False, bias=False).state_dict()) == []


def test_embedding(rng, assert_close):
    ours, theirs = nn.Embedding(7, 3, seed=4), torch.nn.Embedding(7, 3)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.detach().numpy()))
    idx = np.array([[0, 6, 2, 2], [6, 6, 1, 0]], np.int64)  # repeated rows sum their gradients
    yo, yt = ours(om.tensor(idx)), theirs(torch.from_numpy(idx))
    assert_close(yo.detach().numpy(), yt.detach().numpy(), 0.0, "output")
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yo.backward(g)
    yt.backward(torch.from_numpy(g))
    assert_close(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), 1e-6, "weight grad")


@pytest.mark.parametrize("ours,theirs", [
    (nn.ReLU(), torch.nn.ReLU()), (nn.GELU(), torch.nn.GELU()),
    (nn.GELU("tanh"), torch.nn.GELU("tanh")), (nn.Tanh(), torch.nn.Tanh()),
    (nn.Sigmoid(), torch.nn.Sigmoid()), (nn.Identity(), torch.nn.Identity()),
    (nn.Flatten(), torch.nn.Flatten()), (nn.Flatten(0, 1), torch.nn.Flatten(0, 1)),
    (nn.Flatten(1, 2), torch.nn.Flatten(1, 2)),
], ids=lambda m: repr(m))
def test_stateless_layers(ours, theirs, rng, assert_close):
    x = (2.0 * rng.standard_normal((2, 3, 4, 5))).astype(np.float32)
    run_both(ours, theirs, x, rng, assert_close=assert_close)


def test_identity_returns_its_input():
    x = om.ones(2)
    assert nn.Identity()(x) is x


def test_sequential(rng, assert_close):
    ours = nn.Sequential(nn.Linear(4, 8, seed=1), nn.GELU(), nn.LayerNorm(8),
                         nn.Linear(8, 2, seed=2), nn.Tanh())
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8),
                                 torch.nn.Linear(8, 2), torch.nn.Tanh())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    load_from_torch(ours, theirs)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    run_both(ours, theirs, x, rng, tol=1e-5, assert_close=assert_close)

    assert len(ours) == 5 and isinstance(ours[1], nn.GELU) and ours[-1] is ours[4]
    head = ours[:2]
    assert isinstance(head, nn.Sequential) and head[0] is ours[0]
    with pytest.raises(IndexError):
        ours[5]
    ours.append(nn.ReLU())
    assert [n for n, _ in ours.named_children()][-1] == "5"
    assert list(iter(ours))[5] is ours[5]
