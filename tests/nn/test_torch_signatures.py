"""Every onemodel.nn class that torch.nn also has takes PyTorch's arguments with PyTorch's
defaults (docs/spec/api.md: code ported from PyTorch must not change meaning silently).

For each argument both signatures have, the defaults are equal; and our positional arguments are
a prefix of PyTorch's, so a positional call either means the same in both or fails here. The
deliberate differences are listed below with their reasons.
"""
import ast
import inspect

import numpy as np
import pytest

import onemodel as om
from onemodel import nn

torch = pytest.importorskip("torch")

# (class, argument) -> why our default differs from PyTorch's.
DEFAULT_DIFFERENCES = {
    # PyTorch's default is the function F.relu; it also accepts "relu", which means the same.
    # Ours takes the names "relu" and "gelu" (docs/spec/api.md).
    ("TransformerEncoderLayer", "activation"): "relu",
    ("TransformerDecoderLayer", "activation"): "relu",
    ("Transformer", "activation"): "relu",
}

# class -> (our positional arguments, PyTorch's) where they differ by name or slot.
POSITIONAL_DIFFERENCES = {
    # docs/spec/api.md names the first argument `layer`; it is the same argument in the same slot.
    "TransformerEncoder": (["layer", "num_layers", "norm"],
                           ["encoder_layer", "num_layers", "norm"]),
    # Our second slot is seed, PyTorch's inplace; a bool there is refused (TypeError).
    "Dropout": (["p", "seed"], ["p", "inplace"]),
    "Dropout1d": (["p", "seed"], ["p", "inplace"]),
    "Dropout2d": (["p", "seed"], ["p", "inplace"]),
    "Dropout3d": (["p", "seed"], ["p", "inplace"]),
}


def _classes():
    for name in sorted(nn.__all__):
        ours = getattr(nn, name)
        if (inspect.isclass(ours) and issubclass(ours, nn.Module)
                and inspect.isclass(getattr(torch.nn, name, None))):
            yield name


def _torch_init(name):
    cls = getattr(torch.nn, name)
    if issubclass(cls, torch.nn.RNNBase) and name in ("LSTM", "GRU", "RNN"):
        # LSTM/GRU/RNN take (*args, **kwargs) and pass them to RNNBase after the mode; RNN
        # first takes nonlinearity out of the fourth slot.
        params = list(inspect.signature(torch.nn.RNNBase.__init__).parameters.values())
        params = [p for p in params if p.name != "mode"]
        if name == "RNN":
            params.insert(4, inspect.Parameter("nonlinearity", inspect.Parameter.
                                               POSITIONAL_OR_KEYWORD, default="tanh"))
        return params
    return list(inspect.signature(cls.__init__).parameters.values())


def _positional(params):
    return [p.name for p in params if p.name != "self"
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _check(name, what, ours, theirs, default_differences):
    theirs_by_name = {p.name: p for p in theirs}
    for p in ours:
        if p.name == "self" or p.name not in theirs_by_name:
            continue
        if (name, p.name) in default_differences:
            assert p.default == default_differences[(name, p.name)]
            continue
        assert p.default == theirs_by_name[p.name].default, (
            f"{name}.{what}: {p.name}={p.default!r}, PyTorch's default is "
            f"{theirs_by_name[p.name].default!r}")
    mine, torch_order = _positional(ours), _positional(theirs)
    if what == "__init__" and name in POSITIONAL_DIFFERENCES:
        assert (mine, torch_order[:len(mine)]) == POSITIONAL_DIFFERENCES[name]
        return
    assert mine == torch_order[:len(mine)], (
        f"{name}.{what}: positional arguments {mine}, PyTorch's begin {torch_order[:len(mine)]}")


def test_every_shared_class_is_checked():
    names = set(_classes())
    assert {"Linear", "Conv2d", "Dropout", "MultiheadAttention", "TransformerEncoderLayer",
            "TransformerEncoder", "LSTM", "GRU", "BatchNorm2d", "LayerNorm", "Conv1d",
            "GroupNorm", "RMSNorm", "Dropout1d", "Dropout2d", "Upsample",
            "TransformerDecoderLayer", "TransformerDecoder", "RNN", "RNNCell", "LSTMCell",
            "GRUCell", "InstanceNorm1d", "InstanceNorm2d", "Softmin", "Threshold"} <= names


@pytest.mark.parametrize("name", list(_classes()))
def test_constructor_matches_torch(name):
    ours = list(inspect.signature(getattr(nn, name).__init__).parameters.values())
    _check(name, "__init__", ours, _torch_init(name), DEFAULT_DIFFERENCES)


def _forward_classes():
    for name in _classes():
        if name in ("Module", "ModuleList", "ModuleDict", "ParameterList"):
            continue  # containers: PyTorch's forward is the unimplemented placeholder
        yield name


@pytest.mark.parametrize("name", list(_forward_classes()))
def test_forward_matches_torch(name):
    """Every argument both forwards have has PyTorch's name in PyTorch's slot and its default;
    arguments of ours past PyTorch's last (LSTM's lengths) are onemodel's own."""
    ours = list(inspect.signature(getattr(nn, name).forward).parameters.values())
    theirs = list(inspect.signature(getattr(torch.nn, name).forward).parameters.values())
    mine, torch_order = _positional(ours), _positional(theirs)
    n = min(len(mine), len(torch_order))
    assert mine[:n] == torch_order[:n], (
        f"{name}.forward: positional arguments {mine}, PyTorch's {torch_order}")
    _check(name, "forward", [p for p in ours if p.name in mine[:n] or p.name not in mine],
           theirs, {})


def _torch_parameters(fn):
    """The parameters of a torch.nn.functional function. Its C builtins (linear, conv2d, ...)
    have no signature object, only the one their docstring opens with; max_pool2d dispatches
    on return_indices through (*args, **kwargs) to _max_pool2d, whose signature is PyTorch's."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except ValueError:
        doc = " ".join(line.strip() for line in (fn.__doc__ or "").strip().splitlines())
        args = ast.parse(f"def {doc[:doc.index(') ->') + 1]}: pass").body[0].args
        defaults = [inspect.Parameter.empty] * (len(args.args) - len(args.defaults))
        defaults += [ast.literal_eval(d) for d in args.defaults]
        params = [inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
                  for a, d in zip(args.args, defaults)]
        return params + [inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY,
                                           default=inspect.Parameter.empty if d is None
                                           else ast.literal_eval(d))
                         for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return _torch_parameters(getattr(torch.nn.functional, "_" + fn.__name__))
    return params


def _functions():
    """onemodel.functional's functions that torch.nn.functional also has."""
    for name in sorted(dir(om.functional)):
        ours, theirs = getattr(om.functional, name), getattr(torch.nn.functional, name, None)
        if not name.startswith("_") and callable(ours) and callable(theirs):
            yield name


def test_every_function_is_checked():
    assert {"linear", "conv1d", "conv2d", "avg_pool1d", "avg_pool2d", "max_pool2d", "pad",
            "dropout", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "normalize",
            "scaled_dot_product_attention", "batch_norm"} <= set(_functions())


@pytest.mark.parametrize("name", list(_functions()))
def test_functional_matches_torch(name):
    ours = list(inspect.signature(getattr(om.functional, name)).parameters.values())
    _check(name, "function", ours, _torch_parameters(getattr(torch.nn.functional, name)), {})


def test_input_by_keyword():
    """Ported calls that name the input: input=, hx=, and softmax's dim=None."""
    x = om.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert nn.Linear(3, 2)(input=x).shape == (2, 2)
    assert nn.LayerNorm(3)(input=x).shape == (2, 3)
    assert nn.Embedding(4, 2)(input=om.tensor(np.array([1, 3]))).shape == (2, 2)
    assert nn.Sequential(nn.ReLU(), nn.Tanh())(input=x).shape == (2, 3)
    y, (h, c) = nn.LSTM(3, 4)(input=x, hx=None)
    assert y.shape == (2, 4) and h.shape == c.shape == (1, 4)
    with pytest.warns(UserWarning, match="implicit dimension"):
        w = om.functional.softmax(input=x)
    np.testing.assert_array_equal(w.numpy(), om.functional.softmax(x, 1).numpy())
    np.testing.assert_array_equal(om.functional.log_softmax(x, 0, dtype=np.float32).numpy(),
                                  om.functional.log_softmax(x, 0).numpy())


def test_renamed_arguments_by_keyword():
    """The names ported code uses: input=, weight=, bias= and dropout's inplace in its slot."""
    F = om.functional
    x = om.tensor(np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4))
    assert nn.Conv2d(2, 3, 3)(input=x).shape == (1, 3, 2, 2)
    assert nn.Conv1d(2, 3, 3)(input=x[0, :, 0]).shape == (3, 2)
    for m in (nn.BatchNorm2d(2), nn.GroupNorm(1, 2), nn.MaxPool2d(2), nn.AvgPool2d(2),
              nn.AdaptiveAvgPool2d(1), nn.Upsample(scale_factor=2)):
        np.testing.assert_array_equal(m(input=x).detach().numpy(), m(x).detach().numpy())
    w, b = om.ones(3, 2, 1, 1), om.zeros(3)
    np.testing.assert_array_equal(F.conv2d(input=x, weight=w, bias=b).numpy(),
                                  F.conv2d(x, w, b).numpy())
    np.testing.assert_array_equal(F.linear(input=x, weight=om.ones(5, 4), bias=om.ones(5))
                                  .numpy(), F.linear(x, om.ones(5, 4), om.ones(5)).numpy())
    assert F.pad(input=x, pad=(1, 1)).shape == (1, 2, 4, 6)
    assert F.max_pool2d(input=x, kernel_size=2).shape == F.avg_pool2d(
        input=x, kernel_size=2).shape == (1, 2, 2, 2)
    assert F.dropout(x, 0.5, False, False) is x


def test_attention_defaults_are_sequence_first_with_weights():
    m = nn.MultiheadAttention(4, 2)
    assert m.batch_first is False
    x = om.tensor(np.arange(24, dtype=np.float32).reshape(3, 2, 4))  # (L, B, E)
    out, weights = m(x, x, x)
    assert out.shape == (3, 2, 4) and weights.shape == (2, 3, 3)  # (B, Lq, Lk)
    assert nn.TransformerEncoderLayer(4, 2).batch_first is False
    assert nn.TransformerDecoderLayer(4, 2).batch_first is False


# Top-level functions whose torch docstring opens with another overload than ours: torch.max
# (input) before max(input, dim, keepdim), sum and mean (input, *, dtype) before (input, dim,
# keepdim, *, dtype), any, all and prod (input) before (input, dim, keepdim). Their dim/keepdim
# forms are checked by test_top_level_overloads.
OVERLOADED = {"max", "min", "sum", "mean", "argmax", "argmin", "any", "all", "prod"}
# torch's squeeze docstring shows the dim form first; ours also takes torch.squeeze(input).
TOP_DEFAULT_DIFFERENCES = {("squeeze", "dim"): None}
# No signature torch can show (no docstring signature, or a non-literal default): checked by
# calls in test_top_level_overloads.
NO_TORCH_SIGNATURE = {"clamp_max", "clamp_min", "clone", "einsum", "logsumexp"}


def _top_level():
    """The tensor functions onemodel exports at the top level as torch does (torch.cat, ...)."""
    for name in om.__all__:
        ours = getattr(om, name)
        if getattr(om.functional, name, None) is ours and callable(getattr(torch, name, None)):
            yield name


def test_top_level_names_are_the_functional_ones():
    names = set(_top_level())
    assert {"cat", "stack", "where", "matmul", "exp", "tanh", "softmax", "sum", "mean",
            "reshape", "permute", "transpose", "clamp", "maximum", "tril"} <= names
    assert set(om.__all__) <= set(dir(om))


@pytest.mark.parametrize("name", sorted(set(_top_level()) - OVERLOADED - NO_TORCH_SIGNATURE))
def test_top_level_matches_torch(name):
    # Where torch.nn.functional has it (relu, softmax, ...), ours is that one.
    fn = getattr(torch.nn.functional, name, None) or getattr(torch, name)
    theirs = _torch_parameters(fn)
    ours = list(inspect.signature(getattr(om, name)).parameters.values())
    _check(name, "function", ours, theirs, TOP_DEFAULT_DIFFERENCES)


def test_top_level_overloads():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t, tt = om.tensor(x), torch.from_numpy(x)
    for name in sorted(OVERLOADED):
        ours, theirs = getattr(om, name), getattr(torch, name)
        np.testing.assert_array_equal(ours(t).numpy(), theirs(tt).numpy())
        for args, kwargs in (((1,), {}), ((0, True), {}), ((), {"dim": 1, "keepdim": True})):
            got, want = ours(t, *args, **kwargs), theirs(tt, *args, **kwargs)
            if name in ("max", "min"):
                np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
                got, want = got[0], want[0]
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    for name, args in (("clamp_max", (5.0,)), ("clamp_min", (5.0,)), ("clone", ()),
                       ("logsumexp", (1,)), ("logsumexp", ((0, 1), True))):
        np.testing.assert_allclose(getattr(om, name)(t, *args).numpy(),
                                   getattr(torch, name)(tt, *args).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(om.topk(t, 2)[0].numpy(), torch.topk(tt, 2)[0].numpy())
    np.testing.assert_array_equal(om.einsum("ij,kj->ik", t, t).numpy(),
                                  torch.einsum("ij,kj->ik", tt, tt).numpy())
    np.testing.assert_array_equal(om.einsum("ij->j", [t]).numpy(),
                                  torch.einsum("ij->j", [tt]).numpy())
    np.testing.assert_array_equal(om.cat(tensors=[t, t], dim=1).numpy(),
                                  torch.cat(tensors=[tt, tt], dim=1).numpy())
    np.testing.assert_array_equal(om.matmul(input=t, other=t.T).numpy(),
                                  torch.matmul(input=tt, other=tt.T).numpy())
