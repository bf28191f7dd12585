"""Small pieces of torch's surface: Generator(device=), onemodel.version, Adam/AdamW's
implementation switches, and RandomSampler drawing with replacement as it is consumed."""
import inspect
import itertools

import numpy as np
import pytest

import onemodel as om
from onemodel.utils.data import RandomSampler

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("make", [
    lambda lib: lib.Generator(device="cpu"),
    lambda lib: lib.Generator("cpu"),
    lambda lib: lib.Generator(device=lib.device("cpu")),
    lambda lib: lib.Generator(lib.device("cpu")),
])
def test_generator_takes_torchs_device_forms(make):
    ours = make(om)
    assert str(ours.device) == str(make(torch).device) == "cpu"
    assert ours.manual_seed(2024) is ours
    np.testing.assert_array_equal(ours.uniform(0, 1, 5).numpy(),
                                  om.Generator(2024).uniform(0, 1, 5).numpy())


def test_generator_keeps_its_seed_keyword_and_refuses_other_devices():
    np.testing.assert_array_equal(om.Generator(seed=7, device="cpu").uniform(0, 1, 3).numpy(),
                                  om.Generator(7).uniform(0, 1, 3).numpy())
    with pytest.raises(ValueError, match="Generator"):
        om.Generator(device="cuda")
    with pytest.raises(TypeError, match="Generator"):
        om.Generator("cpu", device="cpu")


def test_version_module_has_torchs_names():
    assert om.version.__version__ == om.__version__
    for name in ("__version__", "cuda", "git_version", "hip", "debug"):
        assert hasattr(torch.version, name) and hasattr(om.version, name)
    assert om.version.cuda is None and isinstance(om.version.git_version, str)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_takes_torchs_switches_and_ignores_them(name):
    ours_params = inspect.signature(getattr(om.optim, name)).parameters
    for switch in ("foreach", "capturable", "differentiable", "fused"):
        assert switch in inspect.signature(getattr(torch.optim, name)).parameters
        assert ours_params[switch].kind is inspect.Parameter.KEYWORD_ONLY
    results = []
    for kwargs in ({}, dict(fused=False, foreach=None, capturable=False, differentiable=False),
                   dict(fused=True)):
        w = om.nn.Parameter(om.tensor([1.0, -2.0, 3.0]))
        opt = getattr(om.optim, name)([w], lr=0.1, **kwargs)
        for _ in range(3):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        results.append(w.detach().numpy())
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    with pytest.raises(ValueError, match="fused"):
        getattr(om.optim, name)([om.nn.Parameter(om.zeros(1))], fused="yes")


def test_sampler_with_replacement_draws_as_it_is_consumed():
    # torch's draws lazily too: a huge num_samples costs nothing until iterated.
    huge = 10 ** 10
    ours = RandomSampler(range(7), replacement=True, num_samples=huge,
                         generator=om.Generator(3))
    theirs = torch.utils.data.RandomSampler(range(7), replacement=True, num_samples=huge)
    assert len(ours) == len(theirs) == huge
    first = list(itertools.islice(iter(ours), 2500))
    assert len(first) == 2500 and all(0 <= i < 7 for i in first)
    next(iter(theirs))


@pytest.mark.parametrize("count", [1, 1023, 1024, 1025, 3000])
def test_sampler_with_replacement_gives_one_draw_of_count(count):
    sampler = RandomSampler(range(11), replacement=True, num_samples=count,
                            generator=om.Generator(5))
    expected = om.randint(0, 11, (count,), generator=om.Generator(5)).tolist()
    assert list(sampler) == expected


@pytest.mark.parametrize("data", [[0], [[1, 2], [3, 4]], [True, False], np.arange(3),
                                  np.ones(2, np.float64)])
def test_tensor_constructor_makes_float32_from_data_as_torch(data):
    ours, theirs = om.Tensor(data), torch.Tensor(data)
    assert ours.dtype == np.float32 and theirs.dtype == torch.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_tensor_constructor_keeps_a_tensors_dtype_as_torch():
    ours, theirs = om.Tensor(om.tensor([1, 2])), torch.Tensor(torch.tensor([1, 2]))
    assert ours.dtype == np.int64 and theirs.dtype == torch.int64
    loss = om.Tensor([0])
    loss += om.tensor([1.5], requires_grad=True) * 2.0  # char_rnn_generation's running sum
    assert loss.dtype == np.float32 and loss.requires_grad
