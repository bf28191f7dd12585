"""MultiheadAttention's add_bias_kv, add_zero_attn, kdim and vdim, and the decoder layer's
bias=False and unbatched input, against PyTorch (weights through onemodel.interop both ways):
outputs, weights, gradients of the inputs and of every parameter; init; errors; exact bits."""

import numpy as np
import pytest
from conftest import param_grads_match_torch

import onemodel as om
from onemodel import interop, nn

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")


def _t(a, grad=False):
    return torch.from_numpy(np.array(a)).requires_grad_(grad)


def _opt(a):
    return None if a is None else _t(a)




def _twins(e, h, **kwargs):
    m = nn.MultiheadAttention(e, h, seed=3, **kwargs)
    t = torch.nn.MultiheadAttention(e, h, **kwargs)
    t.load_state_dict(interop.to_torch_state_dict(m))
    return m, t


def _compare(m, t, inputs, rng, assert_close, **kwargs):
    """One call in both engines: output, weights, then input and parameter gradients."""
    ours = [om.tensor(a, requires_grad=True) for a in inputs]
    theirs = [_t(a, True) for a in inputs]
    out, w = m(*ours, **kwargs)
    tout, tw = t(*theirs, **{k: _opt(v) if isinstance(v, np.ndarray) else v
                             for k, v in kwargs.items()})
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    if tw is None:
        assert w is None
    else:
        assert_close(w.detach().numpy(), tw.detach().numpy(), 1e-5, "weights")
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(_t(g))
    for name, a, ta in zip(("query", "key", "value"), ours, theirs):
        assert_close(a.grad.numpy(), ta.grad.numpy(), 1e-5, f"grad {name}")
    param_grads_match_torch(m, t, assert_close, 1e-5)
    return out, w


def _masks(kind, b, lq, lk, h, rng):
    padding = np.arange(lk)[None, :] >= np.array([lk, 2, 4])[:b, None]
    return {
        "none": {},
        "padding": dict(key_padding_mask=padding),
        "bool_attn": dict(attn_mask=np.triu(np.ones((lq, lk), bool), 1)),
        "float_3d_and_padding": dict(
            key_padding_mask=padding,
            attn_mask=rng.standard_normal((b * h, lq, lk)).astype(np.float32)),
    }[kind]


OPTIONS = [dict(add_bias_kv=True), dict(add_zero_attn=True),
           dict(add_bias_kv=True, add_zero_attn=True)]


@pytest.mark.parametrize("options", OPTIONS, ids=["bias_kv", "zero_attn", "both"])
@pytest.mark.parametrize("mask", ["none", "padding", "bool_attn", "float_3d_and_padding"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_bias_kv_and_zero_attn_match_torch(options, mask, batch_first, rng, assert_close):
    b, lq, lk, e, h = 3, 4, 5, 8, 2
    m, t = _twins(e, h, batch_first=batch_first, **options)
    shape = (lambda n: (b, n, e)) if batch_first else (lambda n: (n, b, e))
    inputs = [rng.standard_normal(shape(n)).astype(np.float32) for n in (lq, lk, lk)]
    _, w = _compare(m, t, inputs, rng, assert_close, average_attn_weights=False,
                    **_masks(mask, b, lq, lk, h, rng))
    extra = options.get("add_bias_kv", False) + options.get("add_zero_attn", False)
    assert w.shape == (b, h, lq, lk + extra)


@pytest.mark.parametrize("options", OPTIONS, ids=["bias_kv", "zero_attn", "both"])
def test_unbatched_and_causal_hint_match_torch(options, rng, assert_close):
    lq, e, h = 5, 8, 4
    m, t = _twins(e, h, **options)
    x = rng.standard_normal((lq, e)).astype(np.float32)
    causal = np.triu(np.ones((lq, lq), bool), 1)
    _compare(m, t, [x, x, x], rng, assert_close, key_padding_mask=np.arange(lq) >= 3)
    m.zero_grad(), t.zero_grad()
    _compare(m, t, [x, x, x], rng, assert_close, attn_mask=causal, is_causal=True,
             need_weights=False)


@pytest.mark.parametrize("kdim,vdim", [(3, 5), (8, 6), (4, 8)])
def test_kdim_vdim_match_torch(kdim, vdim, rng, assert_close):
    b, lq, lk, e, h = 2, 3, 6, 8, 2
    m, t = _twins(e, h, kdim=kdim, vdim=vdim, add_bias_kv=True, batch_first=True)
    assert (m.k.in_features, m.v.in_features) == (kdim, vdim)
    assert list(interop.to_torch_state_dict(m)) == list(t.state_dict())
    inputs = [rng.standard_normal(s).astype(np.float32)
              for s in ((b, lq, e), (b, lk, kdim), (b, lk, vdim))]
    _compare(m, t, inputs, rng, assert_close,
             key_padding_mask=np.arange(lk)[None] >= np.array([[6], [2]]))
    back = nn.MultiheadAttention(e, h, kdim=kdim, vdim=vdim, add_bias_kv=True)
    interop.load_torch_state_dict(back, t.state_dict())
    for name, value in back.state_dict().items():
        np.testing.assert_array_equal(value, m.state_dict()[name])
    assert f"kdim={kdim}" in repr(m) or kdim == e


def test_torch_positional_signature_and_init():
    """PyTorch's positional order; bias_k and bias_v drawn after o from N(0, 1/E), their
    state names PyTorch's."""
    e = 64
    m = nn.MultiheadAttention(e, 4, 0.0, True, True, True, None, None, True, seed=5)
    assert m.batch_first and m.add_zero_attn and m.bias_k.shape == (1, 1, e)
    plain = nn.MultiheadAttention(e, 4, seed=5)
    for name in ("q", "k", "v", "o"):
        np.testing.assert_array_equal(getattr(m, name).weight.detach().numpy(),
                                      getattr(plain, name).weight.detach().numpy())
    bk = np.concatenate([m.bias_k.detach().numpy().ravel(), m.bias_v.detach().numpy().ravel()])
    assert abs(bk.std() - (1 / e) ** 0.5) < 0.3 * (1 / e) ** 0.5
    assert not np.array_equal(m.bias_k.detach().numpy(), m.bias_v.detach().numpy())
    assert list(interop.to_torch_state_dict(m)) == list(
        torch.nn.MultiheadAttention(e, 4, add_bias_kv=True).state_dict())
    assert plain.bias_k is None and plain.bias_v is None
    assert "bias_k" not in plain.state_dict()


def test_mha_options_finite_differences(check_grad, rng):
    m = nn.MultiheadAttention(4, 2, add_bias_kv=True, add_zero_attn=True, kdim=3,
                              batch_first=True, seed=0)
    q = rng.standard_normal((2, 3, 4)).astype(np.float32)
    k = rng.standard_normal((2, 4, 3)).astype(np.float32)
    v = rng.standard_normal((2, 4, 4)).astype(np.float32)
    kpm = np.array([[False] * 4, [False, False, True, True]])
    check_grad(lambda a, b, c: m(a, b, c, key_padding_mask=kpm)[0], q, k, v, step=1e-2,
               tol=1e-2)


def test_errors():
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=5, batch_first=True)
    q = om.tensor(np.zeros((2, 3, 4), np.float32))
    k = om.tensor(np.zeros((2, 6, 3), np.float32))
    v = om.tensor(np.zeros((2, 6, 5), np.float32))
    m(q, k, v)
    with pytest.raises(ValueError, match=r"key of shape \(2, 6, 4\).*kdim 3"):
        m(q, om.tensor(np.zeros((2, 6, 4), np.float32)), v)
    with pytest.raises(ValueError, match=r"value of shape \(2, 6, 3\).*vdim 5"):
        m(q, k, om.tensor(np.zeros((2, 6, 3), np.float32)))
    with pytest.raises(ValueError, match="kdim must be a positive integer"):
        nn.MultiheadAttention(4, 2, kdim=0)
    with pytest.raises(ValueError, match=r"key_padding_mask of shape \(2, 7\)"):
        m(q, k, v, key_padding_mask=np.zeros((2, 7), bool))


def test_exact_bits(check_exact, rng):
    m = nn.MultiheadAttention(34, 2, add_bias_kv=True, add_zero_attn=True, batch_first=True,
                              seed=1)
    x = rng.standard_normal((2, 9, 34)).astype(np.float32)
    kpm = np.arange(9)[None] >= np.array([[9], [4]])
    check_exact(lambda a: m(a, a, a, key_padding_mask=kpm)[0], x)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_without_bias_matches_torch(norm_first, rng, assert_close):
    d, h, ff = 8, 2, 12
    m = nn.TransformerDecoderLayer(d, h, ff, 0.0, "relu", 1e-5, True, norm_first, False, seed=6)
    t = torch.nn.TransformerDecoderLayer(d, h, ff, 0.0, "relu", 1e-5, True, norm_first, False)
    assert not any(n.endswith("bias") for n, _ in m.named_parameters())
    assert list(interop.to_torch_state_dict(m)) == list(t.state_dict())
    t.load_state_dict(interop.to_torch_state_dict(m))
    x, mem = (rng.standard_normal((2, n, d)).astype(np.float32) for n in (5, 6))
    _decoder_both(m, t, x, mem, rng, assert_close,
                  tgt_mask=np.triu(np.ones((5, 5), bool), 1))


def _decoder_both(m, t, x, mem, rng, assert_close, **masks):
    xo, mo = om.tensor(x, requires_grad=True), om.tensor(mem, requires_grad=True)
    xt, mt = _t(x, True), _t(mem, True)
    out = m(xo, mo, **masks)
    tout = t(xt, mt, **{k: _t(v) for k, v in masks.items()})
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(_t(g))
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad tgt")
    assert_close(mo.grad.numpy(), mt.grad.numpy(), 1e-5, "grad memory")
    param_grads_match_torch(m, t, assert_close, 1e-4)
    return out


@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_unbatched_matches_torch(batch_first, rng, assert_close):
    d, h, ff = 8, 2, 12
    m = nn.TransformerDecoderLayer(d, h, ff, dropout=0.0, batch_first=batch_first, seed=2)
    t = torch.nn.TransformerDecoderLayer(d, h, ff, dropout=0.0, batch_first=batch_first)
    t.load_state_dict(interop.to_torch_state_dict(m))
    x, mem = (rng.standard_normal((n, d)).astype(np.float32) for n in (4, 7))
    out = _decoder_both(m, t, x, mem, rng, assert_close,
                        memory_key_padding_mask=np.arange(7) >= 5)
    assert out.shape == (4, d)


@pytest.mark.parametrize("layer", [nn.TransformerEncoderLayer, nn.TransformerDecoderLayer])
def test_activation_given_as_function(layer):
    for fn, name in ((om.functional.gelu, "gelu"), (om.functional.relu, "relu")):
        assert layer(8, 2, 12, activation=fn).activation == name
    with pytest.raises(ValueError, match=r"activation must be 'relu', 'gelu', F.relu or F.gelu"):
        layer(8, 2, 12, activation=om.functional.tanh)
