"""Every onemodel.nn layer whose torch.nn counterpart takes device= and dtype= takes them too,
in torch's slot (so a subclass's `super().__init__(in, out, bias, device, dtype)` works), accepts
the CPU and float32 and refuses the others by name."""
import inspect

import numpy as np
import pytest

import onemodel as om
from onemodel import nn

torch = pytest.importorskip("torch")


def _torch_params(name):
    cls = getattr(torch.nn, name)
    if name in ("LSTM", "GRU", "RNN"):  # (*args, **kwargs) passed on to RNNBase
        return [p.name for p in inspect.signature(torch.nn.RNNBase.__init__).parameters.values()
                if p.name != "mode"]
    return list(inspect.signature(cls.__init__).parameters)


LAYERS = sorted(name for name in nn.__all__
                if inspect.isclass(getattr(nn, name)) and issubclass(getattr(nn, name), nn.Module)
                and inspect.isclass(getattr(torch.nn, name, None))
                and "device" in _torch_params(name))

# Arguments that build each layer (the smallest that make sense)
ARGS = {"Linear": (3, 2), "Bilinear": (3, 4, 2), "Embedding": (5, 3), "EmbeddingBag": (5, 3),
        "LayerNorm": (4,), "RMSNorm": (4,), "GroupNorm": (2, 4), "PReLU": (),
        "Conv1d": (2, 3, 3), "Conv2d": (2, 3, 3), "ConvTranspose1d": (2, 3, 3),
        "ConvTranspose2d": (2, 3, 3), "BatchNorm1d": (4,), "BatchNorm2d": (4,),
        "InstanceNorm1d": (4,), "InstanceNorm2d": (4,), "LSTM": (3, 4), "GRU": (3, 4),
        "RNN": (3, 4), "LSTMCell": (3, 4), "GRUCell": (3, 4), "RNNCell": (3, 4),
        "MultiheadAttention": (4, 2), "TransformerEncoderLayer": (4, 2),
        "TransformerDecoderLayer": (4, 2), "Transformer": (),
        "TransformerEncoder": None, "TransformerDecoder": None}


def test_the_layers_are_many():
    assert {"Linear", "Conv2d", "LayerNorm", "Embedding", "LSTM"} <= set(LAYERS)


@pytest.mark.parametrize("name", LAYERS)
def test_device_and_dtype_in_torch_s_slot(name):
    theirs = _torch_params(name)
    ours = list(inspect.signature(getattr(nn, name).__init__).parameters)
    if name in ("LSTM", "GRU", "RNN"):
        assert "device" in ours and "dtype" in ours
        return
    assert ours[:theirs.index("dtype") + 1] == theirs[:theirs.index("dtype") + 1]


@pytest.mark.parametrize("name", [n for n in LAYERS if ARGS.get(n) is not None])
def test_cpu_and_float32_accepted_others_refused(name):
    cls = getattr(nn, name)
    kwargs = {"d_model": 4, "nhead": 2, "num_encoder_layers": 1, "num_decoder_layers": 1,
              "dim_feedforward": 8} if name == "Transformer" else {}
    for device, dtype in ((None, None), ("cpu", om.float32), (om.device("cpu"), "torch.float32")):
        cls(*ARGS[name], device=device, dtype=dtype, **kwargs)
    with pytest.raises((TypeError, ValueError), match=f"{name}"):
        cls(*ARGS[name], dtype=om.float64, **kwargs)
    with pytest.raises((TypeError, ValueError), match=f"{name}"):
        cls(*ARGS[name], device="cuda", **kwargs)


def test_subclass_passes_them_positionally():
    class MyLinear(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)

    layer = MyLinear(3, 2, False, "cpu", om.float32)
    assert layer.bias is None and layer.weight.shape == (2, 3)
    out = layer(om.ones(1, 3))
    np.testing.assert_allclose(out.detach().numpy(), layer.weight.detach().numpy().sum(1)[None],
                               rtol=1e-6)
