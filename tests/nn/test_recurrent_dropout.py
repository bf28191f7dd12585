"""RNN/LSTM/GRU(dropout=p): PyTorch's argument order, checks and meaning (each layer's output
but the last's goes through dropout in training; nothing in eval or with one layer)."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

LAYERS = {"LSTM": (om.nn.LSTM, torch.nn.LSTM), "GRU": (om.nn.GRU, torch.nn.GRU),
          "RNN": (om.nn.RNN, torch.nn.RNN)}
X = np.random.default_rng(0).standard_normal((5, 3, 4)).astype(np.float32)


def _pair(kind, **kwargs):
    ours, theirs = (cls(4, 6, 3, **kwargs) for cls in LAYERS[kind])
    with om.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            p.copy_(om.from_numpy(q.detach().numpy()))
    return ours, theirs


def _output(module, lib):
    out = module(lib.tensor(X))[0]
    return out.detach().numpy()


@pytest.mark.parametrize("kind", list(LAYERS))
def test_dropout_is_the_sixth_positional_argument_as_torchs(kind):
    ours = LAYERS[kind][0](4, 6, 2, True, False, 0.25, True) if kind != "RNN" else \
        om.nn.RNN(4, 6, 2, "tanh", True, False, 0.25, True)
    assert ours.dropout == 0.25 and ours.bidirectional


@pytest.mark.parametrize("kind", list(LAYERS))
def test_eval_mode_gives_torchs_outputs_whatever_the_dropout(kind):
    ours, theirs = _pair(kind, dropout=0.5)
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(_output(ours, om), _output(theirs, torch), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", list(LAYERS))
def test_dropout_one_zeroes_what_reaches_the_last_layer_as_torchs(kind):
    # p = 1 draws no randomness: the last layer sees zeros in both libraries.
    ours, theirs = _pair(kind, dropout=1.0)
    np.testing.assert_allclose(_output(ours, om), _output(theirs, torch), rtol=1e-5, atol=1e-6)


def test_training_applies_dropout_between_layers_only(monkeypatch):
    ours, _ = _pair("GRU", dropout=0.3)
    seen = []
    real = F.dropout

    def spy(x, p, training=True, *args, **kwargs):
        seen.append((tuple(x.shape), p, training))
        return real(x, p, training, *args, **kwargs)
    monkeypatch.setattr(F, "dropout", spy)
    out, _ = ours(om.tensor(X))
    assert seen == [((5, 3, 6), 0.3, True)] * 2  # after layers 0 and 1, not after layer 2
    ours.eval()
    ours(om.tensor(X))
    assert len(seen) == 2
    out.sum().backward()  # the masks are in the graph
    assert ours.weight_ih_l0.grad is not None


def test_training_with_dropout_differs_from_eval_and_keeps_scale():
    ours, _ = _pair("LSTM", dropout=0.5)
    trained = _output(ours, om)
    ours.eval()
    assert not np.array_equal(trained, _output(ours, om))


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.2", True])
def test_bad_dropout_is_refused_as_torch(bad):
    with pytest.raises(ValueError, match="LSTM: dropout should be a number in range"):
        om.nn.LSTM(4, 6, 2, dropout=bad)
    with pytest.raises((ValueError, TypeError)):
        torch.nn.LSTM(4, 6, 2, dropout=bad)


def test_one_layer_with_dropout_warns_as_torch():
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        om.nn.GRU(4, 6, 1, dropout=0.2)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        torch.nn.GRU(4, 6, 1, dropout=0.2)
