"""Module state: registration, the state order, strict all-or-nothing loading, modes."""
import numpy as np
import pytest

import onemodel as om
from onemodel import nn


def param(*shape, fill=0.0):
    return nn.Parameter(np.full(shape, fill, np.float32))


def buffer(value, dtype=np.int64):
    t = om.zeros(np.shape(value), dtype=dtype)
    t.numpy()[...] = value
    return t


class Leaf(nn.Module):
    def __init__(self, fill):
        super().__init__()
        self.weight = param(2, 3, fill=fill)
        self.register_buffer("count", buffer(0))
        self.bias = param(2, fill=fill + 1)  # registered after the buffer, listed before it


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = Leaf(1.0)
        self.scale = param(1, fill=0.5)
        self.register_buffer("running", buffer(np.zeros(3), np.float32))
        self.inner = nn.Sequential(Leaf(3.0), nn.ReLU(), Leaf(5.0))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = Block()
        self.head = Leaf(7.0)
        self.gain = param(3, fill=2.0)


STATE_ORDER = [
    "gain",
    "layer0.scale", "layer0.running",
    "layer0.q.weight", "layer0.q.bias", "layer0.q.count",
    "layer0.inner.0.weight", "layer0.inner.0.bias", "layer0.inner.0.count",
    "layer0.inner.2.weight", "layer0.inner.2.bias", "layer0.inner.2.count",
    "head.weight", "head.bias", "head.count",
]


def test_state_order_nested():
    m = Model()
    sd = m.state_dict()
    assert list(sd) == STATE_ORDER
    buffers = {"layer0.running", "layer0.q.count", "layer0.inner.0.count",
               "layer0.inner.2.count", "head.count"}
    assert [n for n, _ in m.named_parameters()] == [n for n in STATE_ORDER if n not in buffers]
    assert [n for n, _ in m.named_buffers()] == [n for n in STATE_ORDER if n in buffers]
    assert len(list(m.parameters())) == 10 and len(list(m.buffers())) == 5
    assert sd["layer0.inner.2.weight"].dtype == np.float32
    assert float(sd["layer0.inner.2.weight"][0, 0]) == 5.0
    assert sd["head.count"].dtype == np.int64 and sd["head.count"].shape == ()


def test_state_dict_shares_memory_like_torch():
    m = Leaf(1.0)
    sd = m.state_dict()
    assert not sd["weight"].requires_grad
    sd["weight"].numpy()[...] = 9.0
    assert float(m.weight.detach().numpy()[0, 0]) == 9.0


def test_children_and_modules():
    m = Model()
    assert [n for n, _ in m.named_children()] == ["layer0", "head"]
    assert list(m.children()) == [m.layer0, m.head]
    names = [n for n, _ in m.named_modules()]
    assert names == ["", "layer0", "layer0.q", "layer0.inner", "layer0.inner.0",
                     "layer0.inner.1", "layer0.inner.2", "head"]
    assert next(iter(m.modules())) is m
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["gain"]


def test_registration_rules():
    m = nn.Module()
    m.a = param(1)
    m.b = param(1)
    m.a = param(2)  # reassignment keeps the slot's position
    assert [n for n, _ in m.named_parameters()] == ["a", "b"]
    assert m.a.shape == (2,)
    with pytest.raises(TypeError):
        m.a = om.zeros(2)  # a plain tensor is not a parameter
    m.a = None
    assert [n for n, _ in m.named_parameters()] == ["b"]
    m.register_buffer("buf", om.zeros(3))
    m.buf = om.ones(3)  # assignment to a registered buffer replaces it
    np.testing.assert_array_equal(m.state_dict()["buf"], np.ones(3, np.float32))
    with pytest.raises(TypeError):
        m.register_buffer("p", param(1))
    with pytest.raises(KeyError):
        m.register_buffer("x.y", om.zeros(1))
    m.plain = 3  # ordinary attributes stay ordinary
    assert m.plain == 3 and "plain" not in m.state_dict()
    del m.b
    assert [n for n, _ in m.named_parameters()] == []
    with pytest.raises(AttributeError):
        m.missing


def test_shared_parameter_listed_once():
    m = nn.Module()
    m.x = nn.Linear(2, 2)
    m.y = nn.Linear(2, 2)
    m.y.weight = m.x.weight
    assert [n for n, _ in m.named_parameters()] == ["x.weight", "x.bias", "y.bias"]
    assert list(m.state_dict()) == ["x.weight", "x.bias", "y.weight", "y.bias"]


def test_parameter():
    p = nn.Parameter(np.arange(3, dtype=np.float64))
    assert p.dtype == np.float32 and p.requires_grad and p.is_leaf and p.grad is None
    with pytest.raises(TypeError):
        nn.Parameter(np.arange(3))
    t = om.ones(2)
    copy = nn.Parameter(t)
    assert copy._data is not t._data and isinstance(copy, om.Tensor)
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    assert repr(copy).startswith("Parameter containing:")


def snapshot(m):
    return {k: v.numpy().copy() for k, v in m.state_dict().items()}


def assert_unchanged(m, before):
    after = m.state_dict()
    assert list(after) == list(before)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)


def test_load_state_dict_round_trip_keeps_identity():
    src, dst = Model(), Model()
    for i, (_, p) in enumerate(src.named_parameters()):
        p.detach().numpy()[...] = i + 0.25
    src.head.count.numpy()[...] = 17
    tensors = {n: t for n, t in dst._named_state()}
    arrays = {n: t._data for n, t in tensors.items()}
    versions = {n: t._version for n, t in tensors.items()}
    dst.head.weight.grad = om.ones(2, 3)
    dst.load_state_dict(src.state_dict())
    for n, t in dst._named_state():
        assert t is tensors[n] and t._data is arrays[n]
        assert t._version == versions[n] + 1
    assert_unchanged(dst, snapshot(src))
    assert int(dst.head.count.numpy()) == 17
    assert dst.head.weight.grad is not None  # gradients stay valid


def test_load_state_dict_accepts_tensors():
    m = Leaf(0.0)
    m.load_state_dict({k: buffer(v, v.dtype) for k, v in Leaf(4.0).state_dict().items()})
    assert float(m.weight.detach().numpy()[1, 2]) == 4.0


@pytest.mark.parametrize("corrupt,named", [
    (lambda sd: sd.__setitem__("layer0.q.weight", np.zeros((3, 2), np.float32)),
     ["layer0.q.weight", "shape (3, 2) != expected (2, 3)"]),
    (lambda sd: sd.pop("head.count"), ["missing keys: head.count"]),
    (lambda sd: sd.__setitem__("head.extra", np.zeros(1, np.float32)),
     ["unexpected keys: head.extra"]),
    (lambda sd: sd.__setitem__("gain", np.zeros(3, np.float64)),
     ["gain", "dtype float64 != expected float32"]),
    (lambda sd: sd.__setitem__("head.count", np.zeros((), np.int32)),
     ["head.count", "dtype int32 != expected int64"]),
    (lambda sd: sd.__setitem__("gain", [1.0, 2.0, 3.0]), ["gain", "list"]),
])
def test_load_state_dict_one_bad_entry_changes_nothing(corrupt, named):
    m = Model()
    before = snapshot(m)
    sd = {k: v + 1 for k, v in m.state_dict().items()}
    corrupt(sd)
    with pytest.raises(ValueError) as err:
        m.load_state_dict(sd)
    for text in named:
        assert text in str(err.value)
    assert_unchanged(m, before)


def test_load_state_dict_names_every_bad_key():
    m = Model()
    before = snapshot(m)
    sd = m.state_dict()
    del sd["gain"], sd["layer0.q.bias"]
    sd["zzz"] = np.zeros(1, np.float32)
    sd["layer0.running"] = np.zeros(4, np.float32)
    sd["head.weight"] = np.zeros((2, 3), np.float64)
    with pytest.raises(ValueError) as err:
        m.load_state_dict(sd)
    message = str(err.value)
    for key in ("gain", "layer0.q.bias", "zzz", "layer0.running", "head.weight"):
        assert key in message
    assert_unchanged(m, before)


def test_train_eval_recursive():
    m = Model()
    assert all(x.training for x in m.modules())
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m.layer0.train()
    assert m.layer0.inner[2].training and not m.training and not m.head.training
    m.train()
    assert all(x.training for x in m.modules())


def test_zero_grad_sets_none():
    m = Model()
    for p in m.parameters():
        p.grad = om.ones(*p.shape)
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_call_runs_forward():
    class Double(nn.Module):
        def forward(self, x, k=2):
            return x * k

    assert Double()(3, k=4) == 12
    with pytest.raises(NotImplementedError):
        nn.Module()(1)


def test_repr():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Dropout(0.1, seed=0)))
    assert repr(m) == ("Sequential(\n"
                       "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
                       "  (1): ReLU()\n"
                       "  (2): Sequential(\n"
                       "    (0): Dropout(p=0.1, seed=0)\n"
                       "  )\n"
                       ")")


def test_deepcopy_is_independent():
    import copy
    m = Model()
    c = copy.deepcopy(m)
    assert list(c.state_dict()) == STATE_ORDER
    assert c.gain is not m.gain and isinstance(c.gain, nn.Parameter)
    c.gain.detach().numpy()[...] = 5.0
    assert float(m.gain.detach().numpy()[0]) == 2.0


class _NoSuperInit(nn.Module):
    def __init__(self, what):
        if what == "parameter":
            self.weight = nn.Parameter(np.ones(2, np.float32))
        elif what == "module":
            self.inner = nn.Linear(2, 2, seed=0)
        elif what == "buffer":
            self.register_buffer("count", om.zeros(1))
        else:
            self.scale = 2.0  # plain attributes are allowed, as in PyTorch

    def forward(self, x):
        return x * self.scale


@pytest.mark.parametrize("what", ["parameter", "module", "buffer"])
def test_assigning_state_without_super_init_says_so(what):
    with pytest.raises(AttributeError, match=r"_NoSuperInit: Module.__init__\(\) was not "
                                             r"called; call super\(\).__init__\(\) first"):
        _NoSuperInit(what)


@pytest.mark.parametrize("use", [lambda m: m(om.ones(2)), lambda m: list(m.parameters()),
                                 lambda m: m.state_dict(), lambda m: m.train(),
                                 lambda m: m.training],
                         ids=["call", "parameters", "state_dict", "train", "training"])
def test_using_a_module_without_super_init_says_so(use):
    m = _NoSuperInit("plain")
    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\) first in "
                                             r"_NoSuperInit.__init__"):
        use(m)
