"""nn.Transformer (encoder, decoder, their final norms) against torch.nn.Transformer: state
names, outputs and gradients with every mask, the causal mask it generates, its Xavier draws and
dropout seeds, and the arguments it refuses."""
import numpy as np
import pytest
from conftest import param_grads_match_torch

import onemodel as om
from onemodel import interop, nn

torch = pytest.importorskip("torch")


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.filterwarnings("ignore:Support for mismatched")
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_matches_torch(batch_first, norm_first, rng, assert_close):
    d, h, b, ls, lt = 8, 2, 2, 6, 5
    m = nn.Transformer(d, h, 2, 1, 12, dropout=0.0, batch_first=batch_first,
                       norm_first=norm_first, seed=4)
    t = torch.nn.Transformer(d, h, 2, 1, 12, dropout=0.0, batch_first=batch_first,
                             norm_first=norm_first)
    assert list(interop.to_torch_arrays(m)) == list(t.state_dict())  # names and order
    t.load_state_dict(interop.to_torch_state_dict(m))
    shape = (lambda n: (b, n, d)) if batch_first else (lambda n: (n, b, d))
    src, tgt = (rng.standard_normal(shape(n)).astype(np.float32) for n in (ls, lt))
    masks = dict(tgt_mask=nn.Transformer.generate_square_subsequent_mask(lt).numpy(),
                 src_key_padding_mask=np.arange(ls)[None] >= np.array([ls, 4])[:, None],
                 memory_key_padding_mask=np.arange(ls)[None] >= np.array([ls, 4])[:, None])
    ours = [om.tensor(a, requires_grad=True) for a in (src, tgt)]
    theirs = [torch.from_numpy(a).requires_grad_() for a in (src, tgt)]
    out = m(*ours, **masks)
    tout = t(*theirs, **{k: torch.from_numpy(v) for k, v in masks.items()})
    assert_close(out.detach().numpy(), tout.detach().numpy(), 1e-5, "output")
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(torch.from_numpy(g))
    for name, a, ta in zip(("src", "tgt"), ours, theirs):
        assert_close(a.grad.numpy(), ta.grad.numpy(), 1e-5, f"grad {name}")
    param_grads_match_torch(m, t, assert_close, 1e-4)


def test_generate_square_subsequent_mask_is_torchs():
    for sz in (1, 4, 9):
        ours = nn.Transformer.generate_square_subsequent_mask(sz)
        theirs = torch.nn.Transformer.generate_square_subsequent_mask(sz)
        assert ours.dtype == np.float32 and ours.numpy().tobytes() == theirs.numpy().tobytes()
    assert nn.Transformer.generate_square_subsequent_mask(3, "cpu", torch.float32).shape == (3, 3)
    with pytest.raises(TypeError, match="to: only the CPU and float32"):
        nn.Transformer.generate_square_subsequent_mask(3, device="cuda")
    with pytest.raises(ValueError, match="sz must be"):
        nn.Transformer.generate_square_subsequent_mask(0)


def test_xavier_draws_and_dropout_seeds():
    m = nn.Transformer(8, 2, 2, 3, 12, seed=7)
    again = nn.Transformer(8, 2, 2, 3, 12, seed=7)
    other = nn.Transformer(8, 2, 2, 3, 12, seed=8)
    arrays = [{k: v.numpy() for k, v in x.state_dict().items()} for x in (m, again, other)]
    for (name, p), q, r in zip(arrays[0].items(), arrays[1].values(), arrays[2].values()):
        assert p.tobytes() == q.tobytes(), name
        if p.ndim > 1:  # each matrix drawn again from Xavier-uniform, as torch
            fan_out, fan_in = p.shape[0], int(np.prod(p.shape[1:]))
            assert np.abs(p).max() <= np.sqrt(6.0 / (fan_in + fan_out)), name
            assert p.tobytes() != r.tobytes(), name
    # beyond the layers' own bound, 1/sqrt(fan_in), which Linear draws from: drawn again
    ff1 = arrays[0]["encoder.layer0.ff1.weight"]
    assert np.abs(ff1).max() > 1 / np.sqrt(8)
    seeds = [d.seed for d in m.modules() if isinstance(d, nn.Dropout)]
    assert len(seeds) == 4 * 2 + 6 * 3 and len(set(seeds)) == len(seeds)


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="Transformer: custom_encoder and custom_decoder"):
        nn.Transformer(8, 2, 1, 1, 8, custom_encoder=nn.Identity())
    with pytest.raises(ValueError, match="Transformer: num_decoder_layers must be"):
        nn.Transformer(8, 2, 1, 0, 8)
    m = nn.Transformer(8, 2, 1, 1, 8, dropout=0.0, seed=0)
    with pytest.raises(ValueError, match=r"differ in batch size \(dimension 1"):
        m(om.ones(4, 2, 8), om.ones(3, 5, 8))
    with pytest.raises(ValueError, match="must have d_model = 8 features last"):
        m(om.ones(4, 2, 8), om.ones(3, 2, 6))
