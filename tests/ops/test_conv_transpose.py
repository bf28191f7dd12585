"""conv_transpose1d/2d and nn.ConvTranspose1d/2d: PyTorch over a table of stride, padding,
output_padding, dilation and groups (forward and the three gradients), exact-mode bits on every
ISA path and thread count, autocast's rounding, the modules' signatures, reprs, initialisation
and state dicts, and the errors."""
import inspect

import numpy as np
import pytest

import onemodel as om
from onemodel import amp, interop, nn
from onemodel.functional.conv import conv2d, conv_transpose1d, conv_transpose2d
from onemodel.nn.conv import ConvTranspose1d, ConvTranspose2d
from onemodel.random import Generator
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _operands(rng, xs, ws, groups, bias=True):
    """Input of shape xs, weight (xs's channels, out_channels/groups, *kernel) from ws =
    (out_channels/groups, *kernel), and a bias (None without)."""
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal((xs[-len(ws)],) + ws, dtype=np.float32)
    return x, w, rng.standard_normal(ws[0] * groups, dtype=np.float32) if bias else None


# input shape, (out_channels/groups, kernel...), stride, padding, output_padding, groups,
# dilation, bias
CASES_2D = [
    ((2, 3, 5, 5), (4, 3, 3), 1, 0, 0, 1, 1, True),
    ((2, 4, 5, 6), (3, 3, 2), (2, 3), (1, 0), (1, 2), 1, 1, True),   # non-square everything
    ((2, 4, 6, 5), (2, 3, 3), 2, 1, 1, 2, 1, False),
    ((3, 4, 4), (5, 2, 3), 3, (2, 1), (2, 0), 1, (1, 2), True),      # unbatched
    ((2, 6, 4, 5), (1, 3, 3), 2, 1, 0, 6, 1, True),                  # depthwise
    ((1, 4, 5, 6), (3, 3, 2), 1, 0, (1, 1), 1, 2, True),   # output padding >= stride
    ((2, 6, 3, 4), (2, 2, 3), 2, 3, (1, 2), 3, (2, 3), True),        # all at once
    ((2, 2, 1, 1), (3, 1, 1), 1, 0, 0, 1, 1, True),                  # 1x1 image, 1x1 kernel
    ((0, 3, 4, 4), (2, 3, 3), 2, 1, 1, 1, 1, True),                  # empty batch
    ((2, 16, 9, 9), (8, 3, 3), 2, 1, 1, 2, 1, True),  # 8 channels per group: taps packed
]
CASES_1D = [
    ((2, 3, 7), (4, 3), 1, 0, 0, 1, 1, True),
    ((2, 4, 6), (3, 4), 3, 2, 2, 2, 1, False),
    ((4, 5), (2, 3), 2, 1, 1, 1, 2, True),                            # unbatched
    ((2, 6, 5), (1, 2), 1, 0, 1, 3, 2, True),                         # output padding >= stride
]


def _call(fn, args):
    stride, padding, output_padding, groups, dilation = args
    return lambda x, w, b=None: fn(x, w, b, stride, padding, output_padding, groups, dilation)


@pytest.mark.parametrize("case", CASES_2D + CASES_1D)
def test_forward_and_gradients_match_torch(check_torch, rng, case):
    xs, ws, *args, bias = case
    ours, theirs = ((conv_transpose2d, TF.conv_transpose2d) if len(ws) == 3 else
                    (conv_transpose1d, TF.conv_transpose1d))
    operands = [a for a in _operands(rng, xs, ws, args[3], bias) if a is not None]
    check_torch(_call(ours, args), _call(theirs, args), *operands, tol=1e-5)


@pytest.mark.parametrize("case", [CASES_2D[i] for i in (1, 3, 5, 6, 8, 9)] + CASES_1D[1:]
                         + [((1, 32, 17, 17), (16, 3, 3), 2, 1, 1, 1, 1, True),   # threads
                            ((12, 8, 8, 8), (8, 3, 3), 1, 1, 0, 1, 1, True)])     # split
def test_same_bits_on_every_path_and_thread_count(check_exact, rng, case):
    xs, ws, *args, bias = case
    fn = conv_transpose2d if len(ws) == 3 else conv_transpose1d
    check_exact(_call(fn, args), *[a for a in _operands(rng, xs, ws, args[3], bias)
                                   if a is not None])


def test_forward_is_the_input_gradient_of_conv2d(rng):
    """The same bits as conv2d's input gradient (the kernel's own), bias added after."""
    x, w, b = _operands(rng, (2, 4, 5, 5), (3, 3, 3), 1)
    images = tensor(np.zeros((2, 3, 9, 9), np.float32), requires_grad=True)
    conv2d(images, tensor(w), stride=2, padding=1, dilation=1).backward(x)
    y = conv_transpose2d(tensor(x), tensor(w), tensor(b), 2, 1, 0)
    assert y.numpy().tobytes() == (images.grad.numpy() + b[:, None, None]).tobytes()


def _rounded(a, dtype):
    return torch.from_numpy(a).to(getattr(torch, dtype)).float().numpy()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_autocast_rounds_as_the_convolutions_do(dtype, isa, same_bits_everywhere):
    """Under autocast: the float32 transposed convolution of the rounded operands, and
    gradients of rounded operands and upstream gradient (bias: float32), on every path."""
    rng = np.random.default_rng(5)
    x, w, b = _operands(rng, (2, 8, 5, 6), (3, 3, 3), 2)
    x *= 10

    def run(xv, wv, gv, cast):
        xt, wt, bt = (tensor(v, requires_grad=True) for v in (xv, wv, b))
        with amp.autocast(dtype, enabled=cast):
            y = conv_transpose2d(xt * np.float32(1.0), wt, bt, (2, 3), 1, (1, 2), 2, (1, 2))
        y.backward(gv)
        return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()

    g = rng.standard_normal((2, 6, 10, 20), dtype=np.float32)
    y, gx, gw, gb = same_bits_everywhere(lambda _: run(x, w, g, True))
    rx, rw, rg = (_rounded(a, dtype) for a in (x, w, g))
    ref = run(rx, rw, g, False)
    assert y.tobytes() == ref[0].tobytes() and gb.tobytes() == ref[3].tobytes()
    assert gx.tobytes() == run(x, rw, rg, False)[1].tobytes()
    assert gw.tobytes() == run(rx, w, rg, False)[2].tobytes()
    assert y.tobytes() != run(x, w, g, False)[0].tobytes()


# -- modules --------------------------------------------------------------------------------
MODULES = [
    (ConvTranspose2d, torch.nn.ConvTranspose2d, (4, 6, 3), {}),
    (ConvTranspose2d, torch.nn.ConvTranspose2d, (4, 6, (3, 2)),
     dict(stride=2, padding=(1, 0), output_padding=1, groups=2, bias=False, dilation=(1, 2))),
    (ConvTranspose1d, torch.nn.ConvTranspose1d, (4, 6, 3), dict(stride=3, output_padding=2)),
    (ConvTranspose1d, torch.nn.ConvTranspose1d, (6, 4, 5),
     dict(padding=2, groups=2, dilation=2, bias=False)),
]


def _params(fn):
    return [p for p in inspect.signature(fn).parameters.values()
            if p.name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD]


@pytest.mark.parametrize("ours, theirs", [(ConvTranspose1d, torch.nn.ConvTranspose1d),
                                          (ConvTranspose2d, torch.nn.ConvTranspose2d)])
def test_module_signatures_are_torch(ours, theirs):
    for method in ("__init__", "forward"):
        mine = [(p.name, p.default) for p in _params(getattr(ours, method))]
        assert mine == [(p.name, p.default) for p in _params(getattr(theirs, method))][:len(mine)]
        assert len(mine) == (12 if method == "__init__" else 2)  # up to device, dtype


@pytest.mark.parametrize("fn", [conv_transpose1d, conv_transpose2d])
def test_function_signatures_are_torch(fn):
    doc = getattr(TF, fn.__name__).__doc__.strip().splitlines()[0]
    mine = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default}"
                     for p in _params(fn))
    assert doc == f"{fn.__name__}({mine}) -> Tensor"


@pytest.mark.parametrize("ours, theirs, args, kwargs", MODULES)
def test_module_repr_parameters_and_outputs_are_torch(ours, theirs, args, kwargs, rng,
                                                      assert_close):
    m, t = ours(*args, **kwargs, seed=3), theirs(*args, **kwargs)
    assert repr(m) == repr(t)
    assert [(n, p.shape) for n, p in m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    interop.load_torch_state_dict(m, t.state_dict())  # PyTorch's layout, unchanged
    for name, p in t.state_dict().items():
        assert m.state_dict()[name].numpy().tobytes() == p.numpy().tobytes()
    x = rng.standard_normal((2, args[0]) + (5,) * (len(m.kernel_size)), dtype=np.float32)
    for xv in (x, x[0]):
        y, ty = m(tensor(xv, requires_grad=True)), t(torch.from_numpy(xv))
        assert_close(y.detach().numpy(), ty.detach().numpy())


def test_module_draws_weight_then_bias_with_torchs_fan():
    m = ConvTranspose2d(4, 6, (3, 2), groups=2, seed=7)
    t = torch.nn.ConvTranspose2d(4, 6, (3, 2), groups=2)
    fan_in = torch.nn.init._calculate_fan_in_and_fan_out(t.weight)[0]
    assert fan_in == 6 // 2 * 3 * 2
    bound = np.float32(1.0 / np.sqrt(fan_in))
    g = Generator(7)
    assert m.weight.detach().numpy().tobytes() == g.uniform(-bound, bound, (4, 3, 3, 2)).numpy()\
        .tobytes()
    assert m.bias.detach().numpy().tobytes() == g.uniform(-bound, bound, (6,)).numpy().tobytes()
    assert ConvTranspose1d(4, 6, 3, generator=Generator(7)).weight.detach().numpy().tobytes() \
        == Generator(7).uniform(-1 / np.sqrt(18), 1 / np.sqrt(18), (4, 6, 3)).numpy().tobytes()


@pytest.mark.parametrize("ours, theirs, args", [
    (ConvTranspose2d, torch.nn.ConvTranspose2d, (64, 48, (3, 5))),
    (ConvTranspose1d, torch.nn.ConvTranspose1d, (96, 20, 7)),
])
def test_module_initialisation_is_torchs_distribution(ours, theirs, args):
    """Weight and bias from Uniform(±1/√fan_in), fan_in as torch computes it for its weight (its
    kaiming_uniform with a = √5): ours and torch's samples both fit it, as statistics."""
    m, t = ours(*args, groups=4, seed=11), theirs(*args, groups=4)
    bound = np.float32(1 / np.sqrt(torch.nn.init._calculate_fan_in_and_fan_out(t.weight)[0]))
    for name in ("weight", "bias"):
        for a in (getattr(m, name).detach().numpy(), getattr(t, name).detach().numpy()):
            # |a| / bound is uniform on [0, 1]: its mean 1/2 within 5 standard deviations, its
            # maximum above 1 - 10/n (missed with probability e^-10).
            u = np.abs(a.astype(np.float64)) / bound
            assert u.max() <= 1 and u.max() >= 1 - 10 / u.size
            assert abs(u.mean() - 0.5) < 5 / np.sqrt(12 * u.size)


def test_output_size_picks_the_output_padding(rng, assert_close):
    m = ConvTranspose2d(4, 3, 3, stride=(2, 3), padding=1, seed=1)
    t = torch.nn.ConvTranspose2d(4, 3, 3, stride=(2, 3), padding=1)
    interop.load_torch_state_dict(m, t.state_dict())
    x = rng.standard_normal((2, 4, 5, 4), dtype=np.float32)
    for size in ([10, 11], (2, 3, 9, 12), [9, 10]):
        y, ty = m(tensor(x), size), t(torch.from_numpy(x), list(size))
        assert y.shape == tuple(ty.shape)
        assert_close(y.detach().numpy(), ty.detach().numpy())
    assert m(tensor(x[0]), [10, 12]).shape == (3, 10, 12)


def test_torch_loads_ours_and_a_decoder_computes_the_same(rng, assert_close):
    ours = nn.Sequential(ConvTranspose2d(8, 4, 4, stride=2, padding=1, seed=2), nn.ReLU(),
                         ConvTranspose2d(4, 1, 3, padding=1, bias=False, seed=3))
    theirs = torch.nn.Sequential(torch.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1),
                                 torch.nn.ReLU(), torch.nn.ConvTranspose2d(4, 1, 3, padding=1,
                                                                           bias=False))
    theirs.load_state_dict(interop.to_torch_state_dict(ours))
    x = rng.standard_normal((3, 8, 4, 4), dtype=np.float32)
    y, ty = ours(om.tensor(x)), theirs(torch.from_numpy(x))
    assert y.shape == (3, 1, 8, 8)
    assert_close(y.detach().numpy(), ty.detach().numpy())


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("xs, ws, kwargs, error, words", [
    ((2, 3, 5, 5), (4, 2, 3, 3), {}, ValueError, "input channels must be 4"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"groups": 3}, ValueError, "divisible by 3"),
    ((2, 4, 5, 5), (4, 2, 3), {}, ValueError, "weight must be (in_channels, out_channels"),
    ((4, 5), (4, 2, 3, 3), {}, ValueError, "input must be (N, C, H, W)"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"stride": 0}, ValueError, "stride must be >= 1"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"padding": -1}, ValueError, "padding must be >= 0"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"padding": "same"}, TypeError, "padding must be an int"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"dilation": (1, 0)}, ValueError, "dilation must be >= 1"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"output_padding": -1}, ValueError, "output_padding must be"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"output_padding": 1}, ValueError,
     "output_padding (1, 1) must be smaller than the stride (1, 1) or the dilation (1, 1)"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"groups": 0}, ValueError, "groups must be a positive"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"padding": 4}, ValueError, "output of size (-1, -1)"),
    ((2, 4, 0, 5), (4, 2, 3, 3), {}, ValueError, "every size must be positive"),
    ((2, 4, 5, 5), (4, 2, 0, 3), {}, ValueError, "every size must be positive"),
    ((2, 4, 5, 5), (4, 2, 3, 3), {"bias": np.zeros(4, np.float32)}, ValueError,
     "bias of shape (4,) for weight (4, 2, 3, 3), expected (2,)"),
])
def test_bad_arguments_raise_naming_them(xs, ws, kwargs, error, words):
    x = tensor(np.zeros(xs, np.float32), requires_grad=True)
    w = tensor(np.zeros(ws, np.float32), requires_grad=True)
    kwargs = {k: tensor(v) if k == "bias" else v for k, v in kwargs.items()}
    with pytest.raises(error, match="conv_transpose2d") as info:
        conv_transpose2d(x, w, **kwargs)
    assert words in str(info.value)
    assert x.grad is None and w.grad is None


def test_bad_conv_transpose1d_input_names_its_layout():
    with pytest.raises(ValueError, match=r"conv_transpose1d: input must be \(N, C, L\)"):
        conv_transpose1d(tensor(np.zeros((1, 2, 3, 3), np.float32)),
                         tensor(np.zeros((2, 1, 3), np.float32)))


@pytest.mark.parametrize("make, error, words", [
    (lambda: ConvTranspose2d(4, 6, 3, padding_mode="reflect"), ValueError,
     "ConvTranspose2d: padding_mode must be 'zeros'"),
    (lambda: ConvTranspose1d(4, 6, 3, padding_mode="circular"), ValueError,
     "ConvTranspose1d: padding_mode must be 'zeros'"),
    (lambda: ConvTranspose2d(4, 6, 3, padding="same"), TypeError,
     "ConvTranspose2d: padding must be an int"),
    (lambda: ConvTranspose2d(4, 6, 3, groups=4), ValueError, "divisible by groups 4"),
    (lambda: ConvTranspose2d(4, 6, 3, output_padding=(1, -1)), ValueError,
     "ConvTranspose2d: output_padding must be >= 0"),
    (lambda: ConvTranspose1d(4, 6, 3, output_padding=(1, 1)), TypeError,
     "ConvTranspose1d: output_padding must be an int or a tuple of 1 ints"),
    (lambda: ConvTranspose2d(4, 6, 3, stride=2)(om.zeros(1, 4, 5, 5), [13, 11]), ValueError,
     "ConvTranspose2d: output_size (13, 11) must lie between (11, 11) and (12, 12)"),
    (lambda: ConvTranspose2d(4, 6, 3, stride=2)(om.zeros(1, 4, 5, 5), [12]), ValueError,
     "ConvTranspose2d: output_size must have 2 or 4 elements"),
])
def test_bad_module_arguments_raise_naming_them(make, error, words):
    with pytest.raises(error) as info:
        make()
    assert words in str(info.value)
