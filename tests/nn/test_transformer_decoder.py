"""TransformerDecoderLayer and TransformerDecoder against PyTorch (weights through
onemodel.interop both ways), masks and the causal hints, state names, seeds, gradients."""

import numpy as np
import pytest
from conftest import param_grads_match_torch

import onemodel as om
from onemodel import interop, nn

torch = pytest.importorskip("torch")


def _t(a, grad=False):
    return torch.from_numpy(np.array(a)).requires_grad_(grad)


def _opt(a):
    return None if a is None else _t(a)




def _masks(kind, b, lt, lm):
    causal = np.triu(np.ones((lt, lt), bool), 1)
    pad_t = np.arange(lt)[None, :] >= np.array([lt, 3])[:b, None]
    pad_m = np.arange(lm)[None, :] >= np.array([lm, 4])[:b, None]
    memory = np.random.default_rng(2).standard_normal((lt, lm)).astype(np.float32)
    return {
        "none": {},
        "causal": dict(tgt_mask=causal, tgt_is_causal=True),
        "all": dict(tgt_mask=causal, memory_mask=memory, tgt_key_padding_mask=pad_t,
                    memory_key_padding_mask=pad_m),
    }[kind]


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("masks", ["none", "causal", "all"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch(masks, norm_first, batch_first, rng, assert_close):
    d, h, ff, b, lt, lm = 8, 2, 12, 2, 5, 6
    m = nn.TransformerDecoderLayer(d, h, ff, dropout=0.0, activation="gelu",
                                   norm_first=norm_first, batch_first=batch_first, seed=3)
    t = torch.nn.TransformerDecoderLayer(d, h, ff, dropout=0.0, activation="gelu",
                                         norm_first=norm_first, batch_first=batch_first)
    t.load_state_dict(interop.to_torch_state_dict(m))
    tgt = rng.standard_normal((b, lt, d) if batch_first else (lt, b, d)).astype(np.float32)
    mem = rng.standard_normal((b, lm, d) if batch_first else (lm, b, d)).astype(np.float32)
    kw = _masks(masks, b, lt, lm)
    tkw = {k: (v if isinstance(v, bool) else _t(v)) for k, v in kw.items()}
    ours = [om.tensor(a, requires_grad=True) for a in (tgt, mem)]
    theirs = [_t(a, True) for a in (tgt, mem)]
    out = m(*ours, **kw)
    tout = t(*theirs, **tkw)
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(_t(g))
    for name, a, ta in zip(("tgt", "memory"), ours, theirs):
        assert_close(a.grad.numpy(), ta.grad.numpy(), 1e-5, f"grad {name}")
    param_grads_match_torch(m, t, assert_close, 1e-4)


def test_decoder_stack_with_norm_matches_torch(rng, assert_close):
    d, h, lt, lm = 8, 2, 4, 5
    layer = nn.TransformerDecoderLayer(d, h, 16, dropout=0.0, seed=1)
    m = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(d))
    t = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(d, h, 16, dropout=0.0), 2,
                                    norm=torch.nn.LayerNorm(d))
    names = interop.to_torch_arrays(m)
    assert list(names) == list(t.state_dict())  # every name and in PyTorch's order
    t.load_state_dict(interop.to_torch_state_dict(m))
    tgt = rng.standard_normal((lt, 3, d)).astype(np.float32)
    mem = rng.standard_normal((lm, 3, d)).astype(np.float32)
    causal = np.triu(np.ones((lt, lt), bool), 1)
    out = m(om.tensor(tgt), om.tensor(mem), tgt_mask=causal)
    tout = t(_t(tgt), _t(mem), tgt_mask=_t(causal))
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5)
    # and back: PyTorch's state dict loads into a decoder with other initial weights
    fresh = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, 16, dropout=0.0, seed=9), 2,
                                  norm=nn.LayerNorm(d))
    interop.load_torch_state_dict(fresh, t.state_dict())
    assert_close(fresh(om.tensor(tgt), om.tensor(mem), tgt_mask=causal).detach().numpy(),
                 tout.detach().numpy(), 1e-5)
    assert nn.TransformerDecoder(layer, 1).norm is None


def test_state_names_and_init_order():
    m = nn.TransformerDecoderLayer(4, 2, 6, seed=5)
    names = list(m.state_dict())
    assert names[:2] == ["attn.q.weight", "attn.q.bias"]
    assert names.index("cross_attn.q.weight") < names.index("ff1.weight") < names.index(
        "ff2.weight") < names.index("norm1.weight") < names.index("norm3.weight")
    assert [n for n in names if n.endswith("draws")] == [
        "attn.dropout.draws", "cross_attn.dropout.draws", "dropout.draws", "dropout1.draws",
        "dropout2.draws", "dropout3.draws"]
    g = om.Generator(5)
    expected_q = nn.Linear(4, 4, generator=g).weight.detach().numpy()
    np.testing.assert_array_equal(m.attn.q.weight.detach().numpy(), expected_q)
    seeds = [d.seed for d in m.modules() if isinstance(d, nn.Dropout)]
    assert seeds == [5, 6, 7, 8, 9, 10]
    stack = nn.TransformerDecoder(m, 2)
    assert [d.seed for d in stack.layer1.modules() if isinstance(d, nn.Dropout)] == [
        11, 12, 13, 14, 15, 16]


def test_memory_is_causal_hint_as_torch(rng, assert_close):
    d, h, length = 8, 2, 5
    m = nn.TransformerDecoderLayer(d, h, 8, dropout=0.0, seed=2)
    t = torch.nn.TransformerDecoderLayer(d, h, 8, dropout=0.0)
    t.load_state_dict(interop.to_torch_state_dict(m))
    tgt = rng.standard_normal((length, 2, d)).astype(np.float32)
    mem = rng.standard_normal((length, 2, d)).astype(np.float32)
    wrong = np.zeros((length, length), bool)  # a wrong hint shows which mask is used
    out = m(om.tensor(tgt), om.tensor(mem), tgt_mask=wrong, memory_mask=wrong,
            tgt_is_causal=True, memory_is_causal=True)
    tout = t(_t(tgt), _t(mem), tgt_mask=_t(wrong), memory_mask=_t(wrong), tgt_is_causal=True,
             memory_is_causal=True)
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5)
    with pytest.raises(RuntimeError, match="needs attn_mask"):
        m(om.tensor(tgt), om.tensor(mem), tgt_is_causal=True)


def test_dropout_in_training_and_errors(rng):
    m = nn.TransformerDecoderLayer(8, 2, 8, dropout=0.5, seed=4)
    tgt, mem = (om.tensor(rng.standard_normal((3, 2, 8)).astype(np.float32)) for _ in range(2))
    a, b = m(tgt, mem), m(tgt, mem)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # a new draw per call
    m.eval()
    np.testing.assert_array_equal(m(tgt, mem).detach().numpy(), m(tgt, mem).detach().numpy())
    with pytest.raises(ValueError, match="TransformerDecoderLayer: activation must be"):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(TypeError, match="TransformerDecoder: norm must be a Module"):
        nn.TransformerDecoder(m, 2, norm="layer")
    with pytest.raises(ValueError, match="TransformerDecoder: num_layers must be"):
        nn.TransformerDecoder(m, 0)
