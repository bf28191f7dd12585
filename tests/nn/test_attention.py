"""MultiheadAttention and the transformer encoder against PyTorch (weights moved through
onemodel.interop), masks, dropout streams, finite differences, init order, exact-mode bits."""
import copy

import numpy as np
import pytest

import onemodel as om
from onemodel import interop, nn
from onemodel.functional.dropout import dropout_mask

torch = pytest.importorskip("torch")


def _t(a, grad=False):
    return torch.from_numpy(np.array(a)).requires_grad_(grad)


def _load_into_torch(m, t):
    t.load_state_dict(interop.to_torch_state_dict(m))


def _compare_grads(m, t, assert_close, tol=1e-5):
    """m's parameter gradients, moved to PyTorch's names and layouts through interop (as
    values of a copy of m), against t's."""
    twin = copy.deepcopy(m)
    state = m.state_dict()
    for name, p in m.named_parameters():
        state[name] = p.grad.numpy() if p.grad is not None else np.zeros(p.shape, np.float32)
    twin.load_state_dict(state)
    theirs = dict(t.named_parameters())
    for name, g in interop.to_torch_arrays(twin).items():
        assert_close(g, theirs[name].grad.numpy(), tol, f"grad {name}")


def _backward_both(m, t, out, tout, ours, theirs, rng, assert_close):
    """One upstream gradient through both attentions: query, key, value and weight grads."""
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(_t(g))
    for name, a, ta in zip("qkv", ours, theirs):
        assert_close(a.grad.numpy(), ta.grad.numpy(), 1e-5, f"grad {name}")
    _compare_grads(m, t, assert_close)


def _encoder_both(m, t, x, rng, assert_close, **masks):
    """An encoder (layer) forward and backward in both engines with the same masks: output,
    input and weight gradients."""
    xo, xt = om.tensor(x, requires_grad=True), _t(x, True)
    out = m(xo, **masks)
    tout = t(xt, **{name: _t(mask) for name, mask in masks.items()})
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(_t(g))
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad x")
    _compare_grads(m, t, assert_close, 1e-4)
    return out


def _inputs(rng, b, lq, lk, e):
    q = rng.standard_normal((b, lq, e)).astype(np.float32)
    k = rng.standard_normal((b, lk, e)).astype(np.float32)
    v = rng.standard_normal((b, lk, e)).astype(np.float32)
    return q, k, v


MASKS = {
    "none": lambda b, lq, lk, h: (None, None),
    "padding": lambda b, lq, lk, h: (np.arange(lk)[None, :] >= np.array([lk, 2, 3])[:b, None],
                                     None),
    "causal_bool": lambda b, lq, lk, h: (None, np.triu(np.ones((lq, lk), bool), 1)),
    "float_2d": lambda b, lq, lk, h: (None, np.random.default_rng(0).standard_normal(
        (lq, lk)).astype(np.float32)),
    "float_3d_and_padding": lambda b, lq, lk, h: (
        np.arange(lk)[None, :] >= np.array([lk, 1, 4])[:b, None],
        np.random.default_rng(1).standard_normal((b * h, lq, lk)).astype(np.float32)),
}


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_matches_torch(mask, batch_first, rng, assert_close):
    b, lq, lk, e, h = 3, 5, 6, 16, 4
    m = nn.MultiheadAttention(e, h, batch_first=batch_first, seed=4)
    t = torch.nn.MultiheadAttention(e, h, batch_first=batch_first)
    _load_into_torch(m, t)
    q, k, v = _inputs(rng, b, lq, lk, e)
    if not batch_first:
        q, k, v = (a.transpose(1, 0, 2).copy() for a in (q, k, v))
    kpm, am = MASKS[mask](b, lq, lk, h)
    ours = [om.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [_t(a, True) for a in (q, k, v)]
    out, w = m(*ours, key_padding_mask=kpm, attn_mask=am, need_weights=True)
    tout, tw = t(*theirs, key_padding_mask=None if kpm is None else _t(kpm),
                 attn_mask=None if am is None else _t(am), need_weights=True)
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    assert_close(w.detach().numpy(), tw.detach().numpy(), 1e-5, "weights")
    _, per_head = m(*ours, key_padding_mask=kpm, attn_mask=am, need_weights=True,
                    average_attn_weights=False)
    _, tper_head = t(*theirs, key_padding_mask=None if kpm is None else _t(kpm),
                     attn_mask=None if am is None else _t(am), average_attn_weights=False)
    assert_close(per_head.detach().numpy(), tper_head.detach().numpy(), 1e-5, "head weights")
    _backward_both(m, t, out, tout, ours, theirs, rng, assert_close)


def test_mha_without_weights_and_bias(rng, assert_close):
    m = nn.MultiheadAttention(8, 2, bias=False, batch_first=True, seed=1)
    assert [n for n, _ in m.named_parameters()] == ["q.weight", "k.weight", "v.weight",
                                                    "o.weight"]
    t = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True)
    _load_into_torch(m, t)
    q, _, _ = _inputs(rng, 2, 4, 4, 8)
    out, w = m(om.tensor(q), om.tensor(q), om.tensor(q), need_weights=False)
    assert w is None
    assert_close(out.detach().numpy(), t(_t(q), _t(q), _t(q))[0].detach().numpy(), 1e-5)


def _torch_attention(t, x, keep):
    """PyTorch's MHA arithmetic with an explicit multiplier on the attention weights."""
    b, s, e = x.shape
    h = t.num_heads
    qkv = torch.nn.functional.linear(x, t.in_proj_weight, t.in_proj_bias)
    q, k, v = (a.reshape(b, s, h, e // h).transpose(1, 2) for a in qkv.chunk(3, -1))
    w = torch.softmax((q / (e // h) ** 0.5) @ k.transpose(-1, -2), -1) * keep
    return t.out_proj((w @ v).transpose(1, 2).reshape(b, s, e))


def test_mha_dropout_stream(rng, assert_close):
    b, s, e, h, p = 2, 5, 8, 2, 0.3
    m = nn.MultiheadAttention(e, h, dropout=p, batch_first=True, seed=9)
    t = torch.nn.MultiheadAttention(e, h, batch_first=True)
    _load_into_torch(m, t)
    x = rng.standard_normal((b, s, e)).astype(np.float32)
    for draw in range(2):  # each call takes the next draw of the counter
        out, _ = m(om.tensor(x), om.tensor(x), om.tensor(x))
        keep = _t(dropout_mask((b, h, s, s), p, 9, draw))
        assert_close(out.detach().numpy(), _torch_attention(t, _t(x), keep).detach().numpy(), 1e-5)
    assert int(m.dropout.draws.numpy()) == 2
    m.eval()
    out, _ = m(om.tensor(x), om.tensor(x), om.tensor(x))
    assert_close(out.detach().numpy(), t(_t(x), _t(x), _t(x))[0].detach().numpy(), 1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation, rng, assert_close):
    d, h, ff = 16, 4, 24
    m = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, activation=activation,
                                   norm_first=norm_first, batch_first=True, seed=2)
    t = torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, activation=activation,
                                         norm_first=norm_first, batch_first=True)
    _load_into_torch(m, t)
    x = rng.standard_normal((3, 7, d)).astype(np.float32)
    kpm = np.arange(7)[None, :] >= np.array([7, 3, 5])[:, None]
    _encoder_both(m, t, x, rng, assert_close, src_key_padding_mask=kpm)
    m.eval()
    t.eval()
    with torch.no_grad():
        assert_close(m(om.tensor(x), src_key_padding_mask=kpm).detach().numpy(),
                     t(_t(x), src_key_padding_mask=_t(kpm)).numpy(), 1e-5, "eval output")


def test_encoder_layer_training_dropout(rng, assert_close):
    d, h, ff, p, seed = 8, 2, 12, 0.25, 5
    m = nn.TransformerEncoderLayer(d, h, ff, dropout=p, batch_first=True, seed=seed)
    t = torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=True)
    _load_into_torch(m, t)
    x = rng.standard_normal((2, 4, d)).astype(np.float32)
    out = m(om.tensor(x))

    def keep(shape, s):
        return _t(dropout_mask(shape, p, s, 0))

    xt = _t(x)
    a = _torch_attention(t.self_attn, xt, keep((2, h, 4, 4), seed)) * keep((2, 4, d), seed + 2)
    y = t.norm1(xt + a)
    f = t.linear2(torch.relu(t.linear1(y)) * keep((2, 4, ff), seed + 1)) * keep((2, 4, d),
                                                                                seed + 3)
    assert_close(out.detach().numpy(), t.norm2(y + f).detach().numpy(), 1e-5)


def test_encoder_names_copies_and_torch(rng, assert_close):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True, seed=3)
    enc = nn.TransformerEncoder(layer, 2)
    names = list(enc.state_dict())
    assert names[:3] == ["layer0.attn.q.weight", "layer0.attn.q.bias", "layer0.attn.k.weight"]
    assert "layer1.ff2.bias" in names
    sd = enc.state_dict()
    np.testing.assert_array_equal(sd["layer0.ff1.weight"], sd["layer1.ff1.weight"])
    seeds = [mod.seed for mod in enc.modules() if isinstance(mod, nn.Dropout)]
    assert len(set(seeds)) == len(seeds) == 8
    t = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2,
        enable_nested_tensor=False)
    _load_into_torch(enc, t)
    enc.eval()
    t.eval()
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    causal = np.triu(np.ones((5, 5), bool), 1)
    with torch.no_grad():
        expected = t(_t(x), mask=_t(causal)).numpy()
    assert_close(enc(om.tensor(x), mask=causal).detach().numpy(), expected, 1e-5)


def test_init_draw_order():
    m = nn.MultiheadAttention(6, 3, seed=21)
    g = om.Generator(21)
    bound = np.float32(1 / np.sqrt(6.0))
    for name in ("q", "k", "v", "o"):
        lin = getattr(m, name)
        np.testing.assert_array_equal(lin.weight.detach().numpy(),
                                      g.uniform(-bound, bound, (6, 6)))
        np.testing.assert_array_equal(lin.bias.detach().numpy(), g.uniform(-bound, bound, (6,)))
    layer = nn.TransformerEncoderLayer(6, 3, 10, seed=21)
    np.testing.assert_array_equal(layer.attn.o.weight.detach().numpy(),
                                  m.o.weight.detach().numpy())
    g = om.Generator(21)
    for _ in range(4):
        g.uniform(-bound, bound, (6, 6)), g.uniform(-bound, bound, (6,))
    np.testing.assert_array_equal(layer.ff1.weight.detach().numpy(),
                                  g.uniform(-bound, bound, (10, 6)))
    shared = om.Generator(21)
    a = nn.MultiheadAttention(6, 3, generator=shared)
    b = nn.MultiheadAttention(6, 3, generator=shared)
    assert not np.array_equal(a.q.weight.detach().numpy(), b.q.weight.detach().numpy())


def test_mha_finite_differences(check_grad, rng):
    m = nn.MultiheadAttention(4, 2, batch_first=True, seed=0)
    q, k, v = _inputs(rng, 2, 3, 4, 4)
    kpm = np.array([[False] * 4, [False, False, True, True]])
    check_grad(lambda a, b, c: m(a, b, c, key_padding_mask=kpm)[0], q, k, v, step=1e-2,
               tol=1e-2)


def test_encoder_layer_finite_differences(check_grad, rng):
    m = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation="gelu", batch_first=True,
                                   seed=0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    check_grad(lambda a: m(a), x, step=1e-2, tol=2e-2)


@pytest.mark.parametrize("e", [16, 17 * 2])
def test_exact_bits(e, check_exact, rng):
    m = nn.TransformerEncoderLayer(e, 2, 3 * e, dropout=0.1, batch_first=True, seed=0)
    x = rng.standard_normal((2, 9, e)).astype(np.float32)

    def run(a):
        m.dropout.draws.numpy()[...] = 0  # the same masks on every run
        m.dropout1.draws.numpy()[...] = 0
        m.dropout2.draws.numpy()[...] = 0
        m.attn.dropout.draws.numpy()[...] = 0
        return m(a, src_key_padding_mask=np.arange(9)[None] >= np.array([[9], [4]]))

    check_exact(run, x)


def test_errors():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    m = nn.MultiheadAttention(4, 2, batch_first=True)
    x = om.tensor(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match="attn_mask"):
        m(x, x, x, attn_mask=np.zeros((2, 3), bool))
    with pytest.raises(ValueError, match="embed_dim"):
        m(om.tensor(np.zeros((2, 3, 5), np.float32)), x, x)
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("average", [True, False])
def test_mha_unbatched_matches_torch(batch_first, average, rng, assert_close):
    lq, lk, e, h = 4, 6, 8, 2
    m = nn.MultiheadAttention(e, h, batch_first=batch_first, seed=9)
    t = torch.nn.MultiheadAttention(e, h, batch_first=batch_first)
    _load_into_torch(m, t)
    q = rng.standard_normal((lq, e)).astype(np.float32)
    k, v = (rng.standard_normal((lk, e)).astype(np.float32) for _ in range(2))
    kpm = np.arange(lk) >= 4
    am = rng.standard_normal((h, lq, lk)).astype(np.float32)
    ours = [om.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [_t(a, True) for a in (q, k, v)]
    out, w = m(*ours, key_padding_mask=kpm, attn_mask=am, average_attn_weights=average)
    tout, tw = t(*theirs, key_padding_mask=_t(kpm), attn_mask=_t(am),
                 average_attn_weights=average)
    assert out.shape == (lq, e) and w.shape == ((lq, lk) if average else (h, lq, lk))
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    assert_close(w.detach().numpy(), tw.detach().numpy(), 1e-5, "weights")
    _backward_both(m, t, out, tout, ours, theirs, rng, assert_close)


@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_unbatched_matches_torch(batch_first, rng, assert_close):
    d, h, ff, length = 8, 2, 12, 5
    layer = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=batch_first, seed=4)
    enc = nn.TransformerEncoder(layer, 2)
    t = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, batch_first=batch_first), 2,
        enable_nested_tensor=False)
    _load_into_torch(enc, t)
    x = rng.standard_normal((length, d)).astype(np.float32)
    causal = np.triu(np.ones((length, length), bool), 1)
    kpm = np.arange(length) >= 4
    out = _encoder_both(enc, t, x, rng, assert_close, mask=causal, src_key_padding_mask=kpm)
    assert out.shape == (length, d)


def test_mha_unbatched_errors():
    m = nn.MultiheadAttention(4, 2)
    x2 = om.tensor(np.zeros((3, 4), np.float32))
    x3 = om.tensor(np.zeros((3, 1, 4), np.float32))
    with pytest.raises(ValueError, match=r"key of shape \(3, 1, 4\) must be 2-D"):
        m(x2, x3, x3)
    with pytest.raises(ValueError, match="key_padding_mask"):
        m(x2, x2, x2, key_padding_mask=np.zeros(4, bool))


def test_encoder_layer_without_bias_matches_torch(rng, assert_close):
    d, h, ff = 8, 2, 12
    m = nn.TransformerEncoderLayer(d, h, ff, 0.0, "relu", 1e-5, True, False, False, seed=6)
    t = torch.nn.TransformerEncoderLayer(d, h, ff, 0.0, "relu", 1e-5, True, False, False)
    assert not any(n.endswith("bias") for n, _ in m.named_parameters())
    _load_into_torch(m, t)
    x = rng.standard_normal((2, 5, d)).astype(np.float32)
    _encoder_both(m, t, x, rng, assert_close)
