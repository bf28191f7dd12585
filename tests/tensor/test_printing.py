"""Tensors print as PyTorch's do (values, widths, scientific notation, summaries, suffixes), and
set_printoptions changes them as torch.set_printoptions does."""
import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
CASES = {
    "decimals": np.array([[-2.9920306, 5.9840612, -8.976091]], np.float32),
    "integers": np.array([1.0, 2.0, 3.0], np.float32),
    "zeros": np.zeros(2, np.float32),
    "tiny": np.array([1e-5, 1.0], np.float32),
    "huge": np.array([1e9, 2.0], np.float32),
    "wide range": np.array([123456.789, 0.5], np.float32),
    "special": np.array([np.nan, 1.0, np.inf, -np.inf], np.float32),
    "negative zero": np.array([-0.0, 1.5], np.float32),
    "int64": np.arange(12).reshape(3, 4),
    "int32": np.arange(5, dtype=np.int32),
    "bool": np.array([True, False]),
    "empty": np.zeros(0, np.float32),
    "empty 2-d": np.zeros((0, 3), np.float32),
    "scalar": np.float32(2.2380619),
    "wraps": rng.standard_normal(40).astype(np.float32),
    "3-d": rng.standard_normal((2, 3, 4)).astype(np.float32),
    "summarised": rng.standard_normal((40, 40)).astype(np.float32),
    "summarised ints": np.arange(2000),
}


@pytest.fixture(autouse=True)
def default_options():
    yield
    om.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


def _torch_repr(values: np.ndarray) -> str:
    return repr(torch.tensor(values)).replace("torch.", "onemodel.")


@pytest.mark.parametrize("name", CASES)
def test_repr_as_torch(name):
    assert repr(om.tensor(CASES[name])) == _torch_repr(CASES[name])


def test_suffixes_as_torch():
    x = om.tensor([1.0, 2.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == repr(tx)
    assert repr(x * 2) == repr(tx * 2)  # grad_fn=<MulBackward0>
    assert str(x.detach()) == str(tx.detach())


@pytest.mark.parametrize("options", [{"precision": 2}, {"precision": 8}, {"sci_mode": True},
                                     {"sci_mode": False}, {"threshold": 5, "edgeitems": 1},
                                     {"linewidth": 40}, {"profile": "short"},
                                     {"profile": "full"}])
def test_set_printoptions_as_torch(options):
    om.set_printoptions(**options)
    torch.set_printoptions(**options)
    for name in ("decimals", "tiny", "wraps", "summarised", "3-d"):
        assert repr(om.tensor(CASES[name])) == _torch_repr(CASES[name]), name


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="unknown profile 'long'"):
        om.set_printoptions(profile="long")
