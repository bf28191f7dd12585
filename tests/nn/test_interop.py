"""onemodel.interop: PyTorch state dicts into onemodel modules and back, names and layouts."""
import subprocess
import sys

import numpy as np
import pytest

import onemodel as om
from onemodel import interop, nn

torch = pytest.importorskip("torch")


def _pairs():
    tn = torch.nn
    return {
        "linear": (lambda: nn.Linear(3, 4), lambda: tn.Linear(3, 4)),
        "conv_bn": (lambda: nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU()),
                    lambda: tn.Sequential(tn.Conv2d(2, 3, 3), tn.BatchNorm2d(3), tn.ReLU())),
        "embedding_norm": (lambda: nn.Sequential(nn.Embedding(5, 4), nn.LayerNorm(4)),
                           lambda: tn.Sequential(tn.Embedding(5, 4), tn.LayerNorm(4))),
        "lstm": (lambda: nn.LSTM(3, 5, 2, bidirectional=True),
                 lambda: tn.LSTM(3, 5, 2, bidirectional=True)),
        "gru": (lambda: nn.GRU(3, 5, bias=False), lambda: tn.GRU(3, 5, bias=False)),
        "mha": (lambda: nn.MultiheadAttention(8, 2, dropout=0.1),
                lambda: tn.MultiheadAttention(8, 2, dropout=0.1)),
        "encoder": (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 12), 2),
                    lambda: tn.TransformerEncoder(tn.TransformerEncoderLayer(8, 2, 12), 2,
                                                  enable_nested_tensor=False)),
    }


@pytest.mark.parametrize("kind", list(_pairs()))
def test_round_trip(kind):
    make_ours, make_theirs = _pairs()[kind]
    ours, theirs = make_ours(), make_theirs()
    # Ours -> PyTorch: a strict load of the tensors succeeds and carries every value.
    exported = interop.to_torch_state_dict(ours)
    assert all(isinstance(v, torch.Tensor) for v in exported.values())
    theirs.load_state_dict(exported)
    assert list(exported) == list(theirs.state_dict())
    for k, v in theirs.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), interop.to_torch_arrays(ours)[k], err_msg=k)
    # PyTorch -> ours, from fresh random values, then back again: the same bits.
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    expected = {k: v.numpy() for k, v in theirs.state_dict().items()}
    interop.load_torch_state_dict(ours, theirs.state_dict())
    back = interop.to_torch_arrays(ours)
    assert list(back) == list(expected)
    for k in expected:
        np.testing.assert_array_equal(back[k], expected[k], err_msg=k)


def test_attention_layout():
    m = nn.MultiheadAttention(4, 2, seed=3)
    sd = interop.to_torch_arrays(m)
    assert list(sd) == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    np.testing.assert_array_equal(sd["in_proj_weight"][4:8], m.k.weight.detach().numpy())
    np.testing.assert_array_equal(sd["in_proj_bias"][8:], m.v.bias.detach().numpy())
    np.testing.assert_array_equal(sd["out_proj.weight"], m.o.weight.detach().numpy())


def test_encoder_names():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6), 2)
    names = list(interop.to_torch_arrays(enc))
    assert names[:4] == ["layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                         "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias"]
    assert "layers.1.linear2.bias" in names and "layers.1.norm2.weight" in names
    assert not any("draws" in n for n in names)


def test_numpy_values_and_dropout_counter_kept():
    m = nn.MultiheadAttention(4, 2, dropout=0.5)
    m(*(om.tensor(np.ones((1, 2, 4), np.float32)),) * 3)
    assert int(m.dropout.draws.numpy()) == 1
    sd = {k: np.full(v.shape, 0.5, np.float64) for k, v in interop.to_torch_arrays(m).items()}
    interop.load_torch_state_dict(m, sd)
    assert int(m.dropout.draws.numpy()) == 1
    assert m.q.weight.dtype == np.float32 and (m.k.bias.detach().numpy() == 0.5).all()


def test_lstm_weights_give_torch_outputs(rng):
    t = torch.nn.LSTM(3, 4, batch_first=True)
    m = nn.LSTM(3, 4, batch_first=True)
    interop.load_torch_state_dict(m, t.state_dict())
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    np.testing.assert_allclose(m(om.tensor(x))[0].detach().numpy(),
                               t(torch.from_numpy(x))[0].detach().numpy(), atol=1e-6)


def test_strict_and_all_or_nothing():
    m = nn.TransformerEncoderLayer(4, 2, 6)
    before = m.state_dict()
    good = interop.to_torch_arrays(m)
    missing = {k: v for k, v in good.items() if k != "linear1.bias"}
    with pytest.raises(ValueError, match="missing keys: linear1.bias"):
        interop.load_torch_state_dict(m, missing)
    extra = dict(good, **{"self_attn.bias_k": np.zeros(4, np.float32)})
    with pytest.raises(ValueError, match="unexpected keys: self_attn.bias_k"):
        interop.load_torch_state_dict(m, extra)
    bad = {k: np.zeros_like(v) for k, v in good.items()}
    bad["self_attn.in_proj_weight"] = np.zeros((11, 4), np.float32)
    with pytest.raises(ValueError, match="in_proj_weight"):
        interop.load_torch_state_dict(m, bad)
    bad["self_attn.in_proj_weight"] = np.zeros((12, 4), np.float32)
    bad["linear2.weight"] = np.zeros((4, 5), np.float32)
    with pytest.raises(ValueError, match="ff2.weight"):
        interop.load_torch_state_dict(m, bad)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    with pytest.raises(TypeError):
        interop.load_torch_state_dict(m, [1, 2])


def test_numpy_input_does_not_import_torch():
    code = (
        "import sys, numpy as np\n"
        "from onemodel import nn, interop\n"
        "m = nn.MultiheadAttention(4, 2)\n"
        "interop.load_torch_state_dict(m, interop.to_torch_arrays(m))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_to_torch_state_dict_without_torch_says_so():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # as if PyTorch were not installed\n"
        "from onemodel import nn, interop\n"
        "try:\n"
        "    interop.to_torch_state_dict(nn.Linear(2, 2))\n"
        "except ImportError as e:\n"
        "    assert 'needs PyTorch' in str(e) and 'to_torch_arrays' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


class _Small(nn.Module):
    """Embedding, an encoder layer (sequence first, as PyTorch's default) and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids):
        return self.head(self.norm(self.enc(self.emb(ids))))


class _TorchSmall(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(11, 8)
        self.enc = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2,
            enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, ids):
        return self.head(self.norm(self.enc(self.emb(ids))))


def test_torch_model_loads_ours_directly_and_computes_the_same(rng):
    ours, theirs = _Small(), _TorchSmall()
    theirs.load_state_dict(interop.to_torch_state_dict(ours))
    ids = rng.integers(0, 11, (5, 3))  # (sequence, batch): both default to batch_first=False
    expected = theirs(torch.from_numpy(ids)).detach().numpy()
    np.testing.assert_allclose(ours(om.from_numpy(ids)).detach().numpy(), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("as_tensors", [True, False])
def test_load_torch_state_dict_takes_tensors_or_arrays(as_tensors, rng):
    theirs = _TorchSmall()
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-0.5, 0.5)
    sd = theirs.state_dict()
    if not as_tensors:
        sd = {k: v.numpy() for k, v in sd.items()}
    ours = _Small()
    interop.load_torch_state_dict(ours, sd)
    ids = rng.integers(0, 11, (4, 2))
    np.testing.assert_allclose(ours(om.from_numpy(ids)).detach().numpy(),
                               theirs(torch.from_numpy(ids)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_load_torch_state_dict_takes_reduced_precision_tensors():
    theirs = torch.nn.Linear(3, 2).to(torch.bfloat16)
    ours = nn.Linear(3, 2)
    interop.load_torch_state_dict(ours, theirs.state_dict())
    np.testing.assert_array_equal(ours.weight.detach().numpy(),
                                  theirs.weight.detach().float().numpy())
