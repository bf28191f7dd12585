"""scaled_dot_product_attention against PyTorch (masks, is_causal, broadcast batches, grouped
heads, fully masked rows), finite differences, exact-mode bits, its dropout stream; the
is_causal hint of MultiheadAttention and the transformer encoder against PyTorch."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F
from onemodel import interop, nn
from onemodel.functional.dropout import dropout_mask

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _qkv(rng, batch, lq, lk, e, ev=None):
    return (rng.standard_normal(batch + (lq, e)).astype(np.float32),
            rng.standard_normal(batch + (lk, e)).astype(np.float32),
            rng.standard_normal(batch + (lk, ev or e)).astype(np.float32))


def _masks(lq, lk):
    keep = np.random.default_rng(3).random((lq, lk)) > 0.3
    keep[:, 0] = True
    return {
        "bool": keep,
        "bool_batched": np.broadcast_to(keep, (2, 1, lq, lk)).copy(),
        "float": np.random.default_rng(4).standard_normal((lq, lk)).astype(np.float32),
        "float_row": np.random.default_rng(5).standard_normal((1, lk)).astype(np.float32),
    }


@pytest.mark.parametrize("mask", [None, "bool", "bool_batched", "float", "float_row"])
def test_matches_torch_with_masks(mask, rng, check_torch):
    q, k, v = _qkv(rng, (2, 3), 4, 5, 6, 7)
    m = None if mask is None else _masks(4, 5)[mask]
    check_torch(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
                lambda a, b, c: TF.scaled_dot_product_attention(
                    a, b, c, attn_mask=None if m is None else torch.from_numpy(m)), q, k, v)


@pytest.mark.parametrize("lq, lk", [(5, 5), (3, 6), (6, 3)])
def test_causal_matches_torch(lq, lk, rng, check_torch):
    q, k, v = _qkv(rng, (2,), lq, lk, 4)
    check_torch(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v)


def test_scale_broadcast_batches_and_unbatched(rng, check_torch):
    q, _, _ = _qkv(rng, (2, 3), 4, 5, 6)
    _, k, v = _qkv(rng, (3,), 4, 5, 6)
    check_torch(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, scale=0.3),
                lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, scale=0.3), q, k, v)
    q2, k2, v2 = _qkv(rng, (), 4, 5, 6)
    check_torch(F.scaled_dot_product_attention, TF.scaled_dot_product_attention, q2, k2, v2)


def test_grouped_query_heads(rng, check_torch):
    q, _, _ = _qkv(rng, (2, 6), 3, 4, 5)
    _, k, v = _qkv(rng, (2, 2), 3, 4, 5)
    check_torch(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, enable_gqa=True),
                lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, enable_gqa=True),
                q, k, v)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_give_zero(kind, rng, check_torch):
    q, k, v = _qkv(rng, (2,), 4, 5, 3)
    keep = np.ones((4, 5), bool)
    keep[1] = False
    m = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(np.float32)
    check_torch(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=m),
                lambda a, b, c: TF.scaled_dot_product_attention(
                    a, b, c, attn_mask=torch.from_numpy(m)), q, k, v)
    out = F.scaled_dot_product_attention(om.tensor(q), om.tensor(k), om.tensor(v),
                                         attn_mask=m)
    assert np.all(out.numpy()[:, 1] == 0)


def _sdpa64(q, k, v, m):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]) + m
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def test_gradient_by_finite_differences(rng, check_grad):
    q, k, v = _qkv(rng, (2,), 3, 4, 3)
    m = _masks(3, 4)["float"]
    check_grad(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=m), q, k, v,
               ref64=lambda a, b, c: _sdpa64(a, b, c, m.astype(np.float64)))


def test_exact_bits(rng, check_exact):
    q, k, v = _qkv(rng, (2, 2), 5, 7, 8)
    check_exact(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), q, k, v)


def _opinfo_samples():
    """torch's own OpInfo samples for scaled_dot_product_attention, drawn as the sweep draws
    them (tools/opinfo_sweep.py), without dropout."""
    from torch.testing._internal.common_methods_invocations import op_db
    info = next(o for o in op_db if o.name == "nn.functional.scaled_dot_product_attention")
    torch.manual_seed(0)
    return [s for s in info.sample_inputs("cpu", torch.float32, requires_grad=False)
            if not s.kwargs.get("dropout_p")]


def test_opinfo_samples_round_as_torch():
    """Scores up to ±100 turn one rounding of q·scale into ~1e-5 of the output: the scale
    multiplies q·kᵀ, as PyTorch's CPU kernel does (with q·scale two samples missed by 1.4e-5)."""
    samples = _opinfo_samples()
    assert len(samples) >= 5
    for s in samples:
        q, k, v = (t.numpy() for t in (s.input,) + tuple(s.args))
        kwargs = {n: om.tensor(t.numpy()) if isinstance(t, torch.Tensor) else t
                  for n, t in s.kwargs.items()}
        ours = F.scaled_dot_product_attention(*map(om.tensor, (q, k, v)), **kwargs).numpy()
        t32, t64 = (torch.nn.functional.scaled_dot_product_attention(
            *(t.double() if double else t for t in (s.input,) + tuple(s.args)),
            **{n: t.double() if double and isinstance(t, torch.Tensor) else t
               for n, t in s.kwargs.items()}).numpy() for double in (False, True))

        def err(a, b):
            return (np.abs(a - b) / np.maximum(1, np.abs(b))).max()

        # The sweep's rule: within 1e-5 of torch, or as close to float64 as torch (2x).
        assert err(ours, t32) <= 1e-5 or err(ours, t64) <= 2 * err(t32, t64), (
            q.shape, k.shape, list(s.kwargs), err(ours, t32))


def test_dropout_uses_the_default_generator(rng, assert_close):
    q, k, v = _qkv(rng, (2,), 3, 4, 5)
    p = 0.4
    om.manual_seed(11)
    seed = om.Generator(11).next_u64()  # what F.dropout draws first
    out = F.scaled_dot_product_attention(om.tensor(q), om.tensor(k), om.tensor(v), dropout_p=p)
    s = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) / np.sqrt(5)
    w = torch.softmax(s, -1) * torch.from_numpy(dropout_mask((2, 3, 4), p, seed, 0))
    assert_close(out.numpy(), (w @ torch.from_numpy(v)).numpy(), 1e-5)
    again = F.scaled_dot_product_attention(om.tensor(q), om.tensor(k), om.tensor(v),
                                           dropout_p=p)
    assert not np.array_equal(again.numpy(), out.numpy())  # a fresh stream per call


def _three():
    return om.tensor(np.zeros((3, 4, 3), np.float32))


@pytest.mark.parametrize("call, message", [
    (lambda q, k, v: F.scaled_dot_product_attention(q, k[..., :2], v), "must agree in features"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v[:, :2]), "must agree in features"),
    (lambda q, k, v: F.scaled_dot_product_attention(_three(), k, v), "cannot be broadcast"),
    (lambda q, k, v: F.scaled_dot_product_attention(q[0, 0], k[0, 0], v[0, 0]),
     "at least 2 dimensions"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 3), bool)),
     r"attn_mask of shape \(3, 3\) does not broadcast"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((4, 5), int)),
     "bool or floating point"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, np.ones((4, 5), bool),
                                                    is_causal=True), "must be None"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=1.5), r"\[0, 1\]"),
    (lambda q, k, v: F.scaled_dot_product_attention(_three(), k, v, enable_gqa=True),
     "query heads a multiple"),
])
def test_bad_input_is_refused(call, message, rng):
    q, k, v = (om.tensor(a) for a in _qkv(rng, (2,), 4, 5, 3))
    with pytest.raises((ValueError, TypeError), match="scaled_dot_product_attention: .*" + message):
        call(q, k, v)


# -- the is_causal hint of the modules ------------------------------------------------------
def _causal_bool(length):
    return np.triu(np.ones((length, length), bool), 1)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("padding", [False, True])
def test_mha_is_causal_hint_as_torch(need_weights, padding, rng, assert_close):
    """With a wrong mask as hint, PyTorch's result shows when it acts on the hint."""
    b, length, e, h = 2, 5, 8, 2
    m = nn.MultiheadAttention(e, h, seed=1)
    t = torch.nn.MultiheadAttention(e, h)
    t.load_state_dict(interop.to_torch_state_dict(m))
    x = rng.standard_normal((length, b, e)).astype(np.float32)
    wrong = np.zeros((length, length), bool)
    wrong[:, -1] = True  # not the causal mask
    kpm = np.zeros((b, length), bool) if padding else None
    xo = om.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x).requires_grad_(True)
    out = m(xo, xo, xo, key_padding_mask=kpm, attn_mask=wrong, need_weights=need_weights,
            is_causal=True)[0]
    tout = t(xt, xt, xt, key_padding_mask=None if kpm is None else torch.from_numpy(kpm),
             attn_mask=torch.from_numpy(wrong), need_weights=need_weights, is_causal=True)[0]
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(torch.from_numpy(g))
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad")
    with pytest.raises(RuntimeError, match="MultiheadAttention: is_causal=True .* needs attn_mask"):
        m(xo, xo, xo, is_causal=True)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_is_causal_as_torch(norm_first, rng, assert_close):
    d, h, length = 8, 2, 6
    layer = nn.TransformerEncoderLayer(d, h, 16, dropout=0.0, norm_first=norm_first, seed=3)
    enc = nn.TransformerEncoder(layer, 2)
    tlayer = torch.nn.TransformerEncoderLayer(d, h, 16, dropout=0.0, norm_first=norm_first)
    tenc = torch.nn.TransformerEncoder(tlayer, 2, enable_nested_tensor=False)
    tenc.load_state_dict(interop.to_torch_state_dict(enc))
    tlayer.load_state_dict(interop.to_torch_state_dict(layer))
    x = rng.standard_normal((length, 3, d)).astype(np.float32)
    mask = _causal_bool(length)
    for ours, theirs in ((enc(om.tensor(x), mask, is_causal=True),
                          tenc(torch.from_numpy(x), torch.from_numpy(mask), is_causal=True)),
                         (enc(om.tensor(x), mask),
                          tenc(torch.from_numpy(x), torch.from_numpy(mask))),
                         (layer(om.tensor(x), mask, is_causal=True),
                          tlayer(torch.from_numpy(x), torch.from_numpy(mask), is_causal=True))):
        assert_close(ours.detach().numpy(), theirs.detach().numpy(), 1e-5)
    unmasked = enc(om.tensor(x)).detach().numpy()
    assert not np.allclose(unmasked, enc(om.tensor(x), mask).detach().numpy())
    with pytest.raises(RuntimeError, match="needs attn_mask"):
        enc(om.tensor(x), is_causal=True)
