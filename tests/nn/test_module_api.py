"""Module methods a PyTorch training script calls, against torch.nn.Module: apply,
requires_grad_, named_modules, load_state_dict(strict=False) and its named tuple, weight tying
(one parameter, listed once, under every name in state_dict), and checkpoints of a tied model."""
import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn

torch = pytest.importorskip("torch")


def build(n, seed=None):
    kw = {} if n is torch.nn else {"seed": seed}

    class Tied(n.Module):
        def __init__(self):
            super().__init__()
            self.embed = n.Linear(3, 4, **kw)
            self.body = n.Sequential(n.Linear(4, 4, **kw), n.ReLU())
            self.out = n.Linear(3, 4, **kw)
            self.out.weight = self.embed.weight  # tied
            self.again = self.body  # one module under two names

    return Tied()


def names(pairs):
    return [name for name, _ in pairs]


def test_tied_weights_and_shared_modules_are_listed_like_torch():
    ours, ref = build(nn, 1), build(torch.nn)
    assert names(ours.named_parameters()) == names(ref.named_parameters())
    assert names(ours.named_parameters(remove_duplicate=False)) == names(
        ref.named_parameters(remove_duplicate=False))
    assert len(list(ours.parameters())) == len(list(ref.parameters())) == 5
    assert names(ours.named_modules()) == names(ref.named_modules())
    assert names(ours.named_modules(remove_duplicate=False)) == names(
        ref.named_modules(remove_duplicate=False))
    assert names(ours.named_modules(prefix="net")) == names(ref.named_modules(prefix="net"))
    assert len(list(ours.modules())) == len(list(ref.modules()))
    # state_dict keeps every name of a tied tensor, as PyTorch's does.
    assert list(ours.state_dict()) == list(ref.state_dict())


def test_shared_buffers_are_listed_once_like_torch():
    def make(n):
        m = n.Module()
        m.a, m.b = n.BatchNorm1d(2), n.BatchNorm1d(2)
        m.b.running_mean = m.a.running_mean
        return m

    ours, ref = make(nn), make(torch.nn)
    assert names(ours.named_buffers()) == names(ref.named_buffers())
    assert names(ours.named_buffers(remove_duplicate=False)) == names(
        ref.named_buffers(remove_duplicate=False))


def test_tied_weight_trains_as_one_parameter():
    m = build(nn, 1)
    x = om.tensor(np.ones((2, 3), np.float32))
    (m.embed(x).sum() + m.out(x).sum() * 2).backward()
    assert m.out.weight is m.embed.weight
    np.testing.assert_array_equal(m.embed.weight.grad.numpy(), np.full((4, 3), 6, np.float32))
    sd = m.state_dict()
    sd["embed.weight"] = sd["out.weight"] = np.full((4, 3), 0.5, np.float32)
    m.load_state_dict(sd)
    assert m.out.weight is m.embed.weight
    assert float(m.out.weight.detach().numpy()[0, 0]) == 0.5


def test_checkpoint_of_a_tied_model_round_trips():
    src, dst = build(nn, 1), build(nn, 2)
    data = checkpoint.to_bytes(src)
    checkpoint.from_bytes(data, dst)
    assert dst.out.weight is dst.embed.weight
    for name, value in src.state_dict().items():
        np.testing.assert_array_equal(dst.state_dict()[name], value, err_msg=name)
    assert checkpoint.state_hash(dst) == checkpoint.state_hash(src)


def test_apply_visits_children_first_like_torch():
    ours, ref = build(nn, 1), build(torch.nn)
    seen_ours, seen_ref = [], []
    assert ours.apply(lambda m: seen_ours.append(type(m).__name__)) is ours
    ref.apply(lambda m: seen_ref.append(type(m).__name__))
    assert seen_ours == seen_ref


def test_requires_grad_freezes_and_unfreezes():
    m = build(nn, 1)
    assert m.body.requires_grad_(False) is m.body
    assert [p.requires_grad for p in m.parameters()] == [True, True, False, False, True]
    x = om.tensor(np.ones((1, 3), np.float32))
    m.body(m.embed(x)).sum().backward()
    assert m.body[0].weight.grad is None and m.embed.weight.grad is not None
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())


def test_load_state_dict_returns_torch_named_tuple():
    m = build(nn, 1)
    result = m.load_state_dict(m.state_dict())
    assert result == ([], []) and result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == repr(build(torch.nn).load_state_dict(build(torch.nn).state_dict()))


def test_load_state_dict_non_strict_reports_like_torch_and_loads_the_rest():
    ours, ref = build(nn, 1), build(torch.nn)
    sd = {k: v.numpy() + 1 for k, v in ours.state_dict().items()}
    before = ours.body[0].bias.detach().numpy().copy()
    del sd["body.0.bias"], sd["again.0.bias"]
    sd["extra.weight"] = np.zeros(2, np.float32)
    result = ours.load_state_dict(sd, strict=False)
    expected = ref.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in sd.items()},
                                   strict=False)
    assert result.missing_keys == expected.missing_keys == ["body.0.bias", "again.0.bias"]
    assert result.unexpected_keys == expected.unexpected_keys == ["extra.weight"]
    assert result == tuple(expected)
    np.testing.assert_array_equal(ours.body[0].bias.detach().numpy(), before)
    np.testing.assert_array_equal(ours.embed.bias.detach().numpy(), sd["embed.bias"])


def test_load_state_dict_strict_lists_every_problem_before_changing_anything():
    m = build(nn, 1)
    before = m.state_dict()
    sd = {k: v + 1 for k, v in before.items()}
    del sd["embed.bias"]
    sd["extra"] = np.zeros(1, np.float32)
    with pytest.raises(ValueError, match="missing keys: embed.bias; unexpected keys: extra"):
        m.load_state_dict(sd)
    sd["embed.bias"] = np.zeros(7, np.float32)
    # A shape mismatch is refused even when not strict (PyTorch too), naming the shapes.
    with pytest.raises(ValueError, match=r"embed.bias \(shape \(7,\) != expected \(4,\)\)"):
        m.load_state_dict(sd, strict=False)
    for name, value in m.state_dict().items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_to_cpu_and_float32_return_the_module_like_torch():
    """`model = Net().to(device)`: the module itself for the CPU and float32, as torch returns
    its module; its parameters untouched."""
    ours, theirs = build(nn, seed=1), build(torch.nn)
    before = {k: v.numpy().copy() for k, v in ours.state_dict().items()}
    for args, kwargs in [(("cpu",), {}), ((torch.device("cpu"),), {}), ((torch.float32,), {}),
                         (("cpu", torch.float32), {"non_blocking": True}),
                         ((), {"device": "cpu", "dtype": torch.float32})]:
        assert ours.to(*args, **kwargs) is ours and theirs.to(*args, **kwargs) is theirs
    # numpy's spellings of float32 and a float32 tensor, as Tensor.to takes them
    assert ours.to(np.float32) is ours and ours.to(dtype="float32") is ours
    assert ours.to(om.ones(2, 3)) is ours
    assert ours.cpu() is ours and ours.float() is ours
    assert theirs.cpu() is theirs and theirs.float() is theirs
    after = ours.state_dict()
    assert all(after[k].dtype == np.float32 and np.array_equal(after[k], v)
               for k, v in before.items())


@pytest.mark.parametrize("target", ["cuda", "cuda:0", "meta", torch.float64, torch.float16,
                                    torch.bfloat16, np.int64])
def test_to_another_device_or_dtype_is_refused_with_the_module_named(target):
    model = nn.Linear(3, 2, seed=0)
    with pytest.raises(TypeError, match=r"to: only the CPU and float32 .*Linear: its "
                                        r"parameters are float32 .*amp\.autocast"):
        model.to(target)
    with pytest.raises(TypeError, match="to: expected to"):
        model.to("cpu", copy=True)


def test_a_ported_scripts_first_lines():
    """What a PyTorch script types before its model, with torch renamed: the functional module
    under torch's path, the device choice, and .to(device) on the model and the data."""
    import onemodel.nn.functional as F_ported
    from onemodel import functional
    assert F_ported is functional and om.nn.functional is functional
    dev = om.device("cuda" if om.cuda.is_available() else "cpu")
    assert om.cuda.device_count() == 0
    assert str(dev) == "cpu" and repr(dev) == repr(torch.device("cpu")) and dev.type == "cpu"
    assert dev == "cpu" and dev == om.device("cpu:0") == om.device("cpu", 0) and dev != "cuda"
    model = nn.Linear(3, 2, seed=0).to(dev)
    x = om.ones(4, 3).to(dev)
    assert model(x).shape == (4, 2)
    for other in ("cuda", "cuda:0", "mps", torch.device("cuda")):
        with pytest.raises(ValueError, match="device: onemodel runs on the CPU only"):
            om.device(other)
