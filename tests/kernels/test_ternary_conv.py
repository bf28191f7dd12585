"""TernaryConv2d: the forward against a float convolution (PyTorch and a float64 unfolding
written here) and to the bit against the pair order of the ternary product, gradients against
PyTorch and central differences, the same bits on every path and thread count, argument
errors, and a small convnet that trains with SR4."""
import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel import _config, nn
from onemodel.functional.ternary import ternary_conv2d
from onemodel.optim import SGD, SR4

torch = pytest.importorskip("torch")


def layer_with_state(cin, cout, kernel, seed=3, **kw) -> nn.TernaryConv2d:
    layer = nn.TernaryConv2d(cin, cout, kernel, **kw)
    SR4(nn.ternary_weights(layer), seed=seed)  # initialises q: weights in {-1, 0, +1}
    rng = np.random.default_rng(seed)
    layer.scale._data[...] = rng.uniform(0.5, 2, cout).astype(np.float32)
    layer.bias._data[...] = rng.standard_normal(cout).astype(np.float32)
    return layer


def unfold_reference(x, w, stride, padding, dilation):
    """Windows in (channel, kernel row, kernel column) order, float64, written plainly."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * padding[0], wd + 2 * padding[1]), x.dtype)
    xp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd] = x
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    cols = np.empty((n, oh, ow, c, kh, kw), x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    cols[:, i, j, :, a, b] = xp[:, :, i * stride[0] + a * dilation[0],
                                                j * stride[1] + b * dilation[1]]
    return cols.reshape(n * oh * ow, -1), (n, oh, ow)


def pair_order(cols, w2):
    """The ternary product's documented order: pair sums, added in ascending order."""
    t = np.where(w2[None] == 1, cols[:, None], np.where(w2[None] == -1, -cols[:, None],
                                                        np.float32(0)))
    if t.shape[2] % 2:
        t = np.concatenate([t, np.zeros(t.shape[:2] + (1,), np.float32)], 2)
    pairs = t[..., 0::2] + t[..., 1::2]
    acc = np.zeros(t.shape[:2], np.float32)
    for p in range(pairs.shape[2]):
        acc = acc + pairs[..., p]
    return acc


@pytest.mark.parametrize("cin,cout,kernel,stride,padding,dilation,hw", [
    (1, 1, 1, 1, 0, 1, (1, 1)),
    (3, 4, 3, 1, 1, 1, (6, 5)),
    (2, 5, (3, 2), (2, 1), (1, 0), (1, 2), (9, 7)),
    (4, 3, 5, 2, 2, 1, (11, 12)),
])
def test_forward_against_float_convolutions_and_the_pair_order(cin, cout, kernel, stride, padding,
                                                               dilation, hw):
    layer = layer_with_state(cin, cout, kernel, stride=stride, padding=padding,
                             dilation=dilation)
    rng = np.random.default_rng(cin * cout)
    x = rng.standard_normal((2, cin) + hw).astype(np.float32)
    y = layer(om.Tensor(x)).detach().numpy()
    w = layer.weight.detach().numpy()
    assert set(np.unique(w)) <= {-1.0, 0.0, 1.0}
    scale, bias = layer.scale.detach().numpy(), layer.bias.detach().numpy()
    yt = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), None,
                                    layer.stride, layer.padding, layer.dilation)
    yt = yt * torch.from_numpy(scale)[:, None, None] + torch.from_numpy(bias)[:, None, None]
    np.testing.assert_allclose(y, yt.numpy(), rtol=1e-5, atol=1e-5)
    cols, (n, oh, ow) = unfold_reference(x.astype(np.float64), w, layer.stride, layer.padding,
                                         layer.dilation)
    z64 = (cols @ w.reshape(cout, -1).T.astype(np.float64)).reshape(n, oh, ow, cout)
    np.testing.assert_allclose(y, z64.transpose(0, 3, 1, 2) * scale[:, None, None]
                               + bias[:, None, None], rtol=1e-5, atol=1e-5)
    # The product to the bit: the unfolded windows summed in the documented pair order.
    z = ternary_conv2d(om.Tensor(x), layer.weight, layer.stride, layer.padding,
                       layer.dilation).detach().numpy()
    cols32, _ = unfold_reference(x, w, layer.stride, layer.padding, layer.dilation)
    expect = pair_order(cols32, w.reshape(cout, -1)).reshape(n, oh, ow, cout)
    assert z.tobytes() == np.ascontiguousarray(expect.transpose(0, 3, 1, 2)).tobytes()


def test_gradients_against_torch_and_unbatched_input():
    layer = layer_with_state(3, 4, 3, padding=1, stride=(1, 2))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 7, 8)).astype(np.float32)  # (C, H, W)
    xo = om.Tensor(x, requires_grad=True)
    y = layer(xo)
    assert y.shape == (4, 7, 4)
    (y * y).sum().backward()
    xt = torch.tensor(x[None], requires_grad=True)
    wt = torch.tensor(layer.weight.detach().numpy(), requires_grad=True)
    st = torch.tensor(layer.scale.detach().numpy(), requires_grad=True)
    bt = torch.tensor(layer.bias.detach().numpy(), requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, wt, None, (1, 2), 1)
    yt = yt * st[:, None, None] + bt[:, None, None]
    (yt * yt).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy()[0], rtol=1e-5,
                               atol=1e-5)
    for ours, theirs in ((xo.grad.numpy(), xt.grad.numpy()[0]),
                         (layer.weight.grad.numpy(), wt.grad.numpy()),
                         (layer.scale.grad.numpy(), st.grad.numpy()),
                         (layer.bias.grad.numpy(), bt.grad.numpy())):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    assert [n for n, _ in layer.named_parameters()] == ["scale", "bias"]


def test_gradients_against_central_differences():
    # The loss is linear in x and in the scale: central differences are exact up to rounding.
    layer = layer_with_state(2, 3, 3, padding=1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    r = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)

    def loss(xv):
        with om.no_grad():
            return float((layer(om.Tensor(xv)) * om.Tensor(r)).sum().numpy())

    xo = om.Tensor(x, requires_grad=True)
    (layer(xo) * om.Tensor(r)).sum().backward()
    h = 0.25
    numeric = np.empty(x.size)
    for i in range(x.size):
        e = np.zeros(x.size, np.float32)
        e[i] = h
        e = e.reshape(x.shape)
        numeric[i] = (loss(x + e) - loss(x - e)) / (2 * h)
    np.testing.assert_allclose(xo.grad.numpy().reshape(-1), numeric, rtol=1e-3, atol=1e-3)
    s0 = layer.scale.detach().numpy().copy()
    for c in range(3):
        layer.scale._data[c] = s0[c] + h
        up = loss(x)
        layer.scale._data[c] = s0[c] - h
        down = loss(x)
        layer.scale._data[c] = s0[c]
        np.testing.assert_allclose(layer.scale.grad.numpy()[c], (up - down) / (2 * h),
                                   rtol=1e-3, atol=1e-3)


def test_same_bits_on_every_path_and_thread_count(isa, same_bits_everywhere):
    layer = layer_with_state(5, 7, 3, padding=1)
    x = np.random.default_rng(2).standard_normal((3, 5, 13, 11)).astype(np.float32)
    same_bits_everywhere(lambda _: [layer(om.Tensor(x)).detach().numpy()])


def test_bad_arguments():
    layer = layer_with_state(3, 2, 3)
    with pytest.raises(ValueError, match="ternary_conv2d"):
        layer(om.Tensor(np.zeros((1, 4, 5, 5), np.float32)))  # channels
    with pytest.raises(ValueError, match="ternary_conv2d"):
        layer(om.Tensor(np.zeros((1, 3, 2, 2), np.float32)))  # kernel larger than the input
    with pytest.raises(ValueError, match="ternary_conv2d"):
        layer(om.Tensor(np.zeros((3, 5, 5), np.float32)[None, None]))  # rank 5
    with pytest.raises(TypeError, match="ternary_conv2d"):
        ternary_conv2d(om.Tensor(np.zeros((1, 3, 5, 5), np.float32)),
                       om.Tensor(np.zeros((2, 3, 3, 3), np.float32)))
    with pytest.raises(ValueError, match="TernaryConv2d"):
        nn.TernaryConv2d(3, 2, 0)


def test_small_convnet_trains_with_sr4():
    """A ternary convnet on a 4-class toy task of oriented bars: from chance to >= 90 %."""
    rng = np.random.default_rng(0)
    n = 256
    y = rng.integers(0, 4, n)
    x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32) * 0.3
    for i, c in enumerate(y):
        p = rng.integers(1, 7)
        if c == 0:
            x[i, 0, p, 1:7] += 1.5
        elif c == 1:
            x[i, 0, 1:7, p] += 1.5
        elif c == 2:
            x[i, 0, np.arange(1, 7), np.arange(1, 7)] += 1.5
        else:
            x[i, 0, np.arange(1, 7), np.arange(6, 0, -1)] += 1.5
    model = nn.Sequential(nn.TernaryConv2d(1, 8, 3, padding=1), nn.ReLU(),
                          nn.TernaryConv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(),
                          nn.Flatten(), nn.TernaryLinear(128, 4))
    opt = SR4(nn.ternary_weights(model), target_step=0.05, seed=0)
    others = SGD(model.parameters(), lr=0.02)
    old = _config.num_threads()
    om.set_num_threads(1)  # tiny tensors: threads would only add waiting on a busy machine
    try:
        for step in range(80):
            idx = rng.choice(n, 32, replace=False)
            loss = F.cross_entropy(model(om.Tensor(x[idx])), om.tensor(y[idx]))
            opt.zero_grad()
            others.zero_grad()
            loss.backward()
            opt.step()
            others.step()
    finally:
        om.set_num_threads(old)
    with om.no_grad():
        acc = (model(om.Tensor(x)).numpy().argmax(1) == y).mean()
    assert acc >= 0.9
