"""ModuleList, ModuleDict and ParameterList against torch.nn's: registration, state names and
order, indexing, mutation and renumbering, errors before anything changes."""
from collections import OrderedDict

import numpy as np
import pytest

import onemodel as om
from onemodel import nn

torch = pytest.importorskip("torch")


def names(module):
    return list(module.state_dict())


def both(build):
    """The same construction in onemodel and in torch (build gets the nn namespace)."""
    return build(nn), build(torch.nn)


def test_module_list_state_names_and_order_match_torch():
    def build(n):
        class Net(n.Module):
            def __init__(self):
                super().__init__()
                self.head = n.Linear(2, 2)
                self.layers = n.ModuleList([n.Linear(2, 3), n.ReLU(), n.Linear(3, 2)])
        return Net()

    ours, ref = both(build)
    assert names(ours) == list(ref.state_dict()) == [
        "head.weight", "head.bias", "layers.0.weight", "layers.0.bias", "layers.2.weight",
        "layers.2.bias"]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in ref.named_modules()]


def test_module_list_indexing_and_mutation_match_torch():
    ours, ref = both(lambda n: n.ModuleList([n.Linear(1, 1), n.ReLU(), n.Tanh()]))
    kinds = lambda ml: [type(m).__name__ for m in ml]  # noqa: E731
    assert kinds(ours) == kinds(ref) and len(ours) == len(ref) == 3
    assert ours[-1] is list(ours)[2] and isinstance(ours[1:], nn.ModuleList)
    assert kinds(ours[::2]) == kinds(ref[::2])
    for ml, n in ((ours, nn), (ref, torch.nn)):
        ml.insert(1, n.Sigmoid())
        ml.insert(len(ml), n.GELU())
        ml.append(n.Linear(2, 2))
        ml.extend([n.ReLU()])
        ml += [n.Tanh()]
        ml[0] = n.Linear(3, 3)
        del ml[2]
        ml.pop(1)
    assert kinds(ours) == kinds(ref)
    assert names(ours) == list(ref.state_dict())
    assert [n for n, _ in ours.named_children()] == [str(i) for i in range(len(ours))]
    assert kinds(ours + nn.ModuleList([nn.ReLU()])) == kinds(ref + torch.nn.ModuleList(
        [torch.nn.ReLU()]))


def test_module_list_insert_clamps_like_a_list():
    # torch.nn.ModuleList.insert fails on a negative index (KeyError, half-shifted) and
    # registers "99" past the end; here the positions are list.insert's.
    items = [nn.ReLU(), nn.Tanh(), nn.GELU()]
    expected = list(items)
    ml = nn.ModuleList(items)
    for index, m in ((-1, nn.Sigmoid()), (99, nn.Identity()), (-99, nn.Flatten())):
        ml.insert(index, m)
        expected.insert(index, m)
        assert list(ml) == expected
    assert [n for n, _ in ml.named_children()] == [str(i) for i in range(6)]


def test_module_list_errors_change_nothing():
    ml = nn.ModuleList([nn.ReLU()])
    with pytest.raises(IndexError, match="ModuleList: index 1 is out of range for length 1"):
        ml[1]
    with pytest.raises(IndexError, match="index -2"):
        ml[-2] = nn.Tanh()
    with pytest.raises(TypeError, match="ModuleList.extend: entry 1 must be a Module"):
        ml.extend([nn.Tanh(), 3])
    with pytest.raises(TypeError, match="ModuleList.insert must be a Module or None, got int"):
        ml.insert(0, 3)
    with pytest.raises(TypeError, match="use append for one entry"):
        ml.extend(nn.Tanh())
    with pytest.raises(TypeError, match="indices must be integers"):
        ml["0"]
    assert [type(m).__name__ for m in ml] == ["ReLU"]


def test_module_dict_matches_torch():
    def build(n):
        return n.ModuleDict(OrderedDict([("enc", n.Linear(2, 3)), ("act", n.ReLU())]))

    ours, ref = both(build)
    for md, n in ((ours, nn), (ref, torch.nn)):
        md["dec"] = n.Linear(3, 2)
        md.update([("extra", n.Linear(1, 1)), ("enc", n.Linear(2, 4))])
        md.update({"z": n.Tanh()})
        del md["act"]
    assert list(ours) == list(ref) and list(ours.keys()) == list(ref.keys())
    assert names(ours) == list(ref.state_dict())
    assert ours["enc"].weight.shape == tuple(ref["enc"].weight.shape) == (4, 2)
    assert "dec" in ours and "act" not in ours and len(ours) == len(ref) == 4
    assert [k for k, _ in ours.items()] == list(ref.keys())
    assert isinstance(ours.pop("z"), nn.Tanh) and "z" not in ours
    ours.clear()
    assert len(ours) == 0 and names(ours) == []


def test_module_dict_errors_change_nothing():
    md = nn.ModuleDict({"a": nn.ReLU()})
    with pytest.raises(KeyError):
        md["missing"]
    with pytest.raises(ValueError, match="ModuleDict.update: entry 1 must be a"):
        md.update([("b", nn.ReLU()), ("c",)])
    with pytest.raises(KeyError, match="contain no '.'"):
        md.update([("b", nn.ReLU()), ("c.d", nn.ReLU())])
    with pytest.raises(TypeError, match="entry 'c' must be a Module"):
        md.update({"b": nn.ReLU(), "c": 1})
    assert list(md) == ["a"]


def test_parameter_list_matches_torch():
    arrays = [np.full((2,), 1.0, np.float32), np.full((3, 1), 2.0, np.float32)]
    ours = nn.ParameterList([nn.Parameter(arrays[0]), om.tensor(arrays[1])])
    ref = torch.nn.ParameterList([torch.nn.Parameter(torch.from_numpy(a)) for a in arrays])
    for pl, make in ((ours, lambda a: om.tensor(a)), (ref, torch.from_numpy)):
        pl.append(make(np.zeros(4, np.float32)))
        pl.extend([make(np.ones(1, np.float32))])
        pl += [make(np.ones(5, np.float32))]
        pl[0] = make(np.ones(6, np.float32))
    assert names(ours) == list(ref.state_dict()) == ["0", "1", "2", "3", "4"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in ours)
    assert [tuple(p.shape) for p in ours] == [tuple(p.shape) for p in ref]
    assert len(ours) == 5 and ours[-1].shape == (5,) and len(ours[1:3]) == 2

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = ours

    assert [n for n, _ in Net().named_parameters()] == [f"scales.{i}" for i in range(5)]


def test_parameter_list_errors_change_nothing():
    pl = nn.ParameterList([om.ones(2)])
    with pytest.raises(TypeError,
                       match="ParameterList.extend: entry 1 must be a Parameter or a Tensor"):
        pl.extend([om.ones(1), np.ones(1)])
    with pytest.raises(IndexError, match="ParameterList: index 3"):
        pl[3] = om.ones(1)
    with pytest.raises(TypeError, match="use append for one entry"):
        pl.extend(om.ones(2))
    assert len(pl) == 1


def test_containers_train_and_load_like_any_module():
    ours = nn.ModuleList([nn.Linear(2, 2, seed=1), nn.Dropout(0.5)])
    ours.eval()
    assert not ours[1].training
    other = nn.ModuleList([nn.Linear(2, 2, seed=2), nn.Dropout(0.5)])
    other.load_state_dict(ours.state_dict())
    np.testing.assert_array_equal(other[0].weight.detach().numpy(),
                                  ours[0].weight.detach().numpy())
    with pytest.raises(NotImplementedError):
        ours(om.ones(2))
