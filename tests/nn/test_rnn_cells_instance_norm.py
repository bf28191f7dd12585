"""More of torch.nn, against PyTorch: the cells RNNCell, LSTMCell and GRUCell (over several steps,
h fed back), the Elman RNN, InstanceNorm1d/2d and F.instance_norm (running statistics too), the
activations hardsigmoid, selu, celu, glu, softmin, threshold, tanhshrink, softshrink and
hardshrink with their modules, and nn.utils.parameters_to_vector / vector_to_parameters.
Values and gradients (a random upstream gradient), PyTorch's gradient at every kink and ±1 ulp
around it, state names and order, loading PyTorch's weights through interop, initialisation,
exact-mode bits, and the errors for bad arguments."""
import warnings

import numpy as np
import pytest
from conftest import param_grads_match_torch

import onemodel as om
import onemodel.functional as F
from onemodel import interop, nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional
NAN, INF = float("nan"), float("inf")
TOL = 1e-6


def sample(rng, shape, scale=4.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def elementwise(ref):
    """torch's op one element at a time: its scalar kernel's convention at the kinks and NaN."""
    return lambda *xs: torch.stack([ref(*parts) for parts in zip(*xs)])


# -- activations ----------------------------------------------------------------------------
# name -> (ours, PyTorch's, kinks)
ACTIVATIONS = {
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid, [-3.0, 3.0, 0.0]),
    "selu": (F.selu, TF.selu, [0.0]),
    "celu": (F.celu, TF.celu, [0.0]),
    "celu_2.5": (lambda x: F.celu(x, 2.5), lambda x: TF.celu(x, 2.5), [0.0]),
    "celu_0.3": (lambda x: F.celu(x, 0.3), lambda x: TF.celu(x, 0.3), [0.0, -30.0]),
    "threshold": (lambda x: F.threshold(x, 0.5, -2.0), lambda x: TF.threshold(x, 0.5, -2.0),
                  [0.5]),
    "tanhshrink": (F.tanhshrink, TF.tanhshrink, [0.0]),
    "softshrink": (F.softshrink, TF.softshrink, [0.5, -0.5]),
    "softshrink_0": (lambda x: F.softshrink(x, 0.0), lambda x: TF.softshrink(x, 0.0), [0.0]),
    "softshrink_1.7": (lambda x: F.softshrink(x, 1.7), lambda x: TF.softshrink(x, 1.7),
                       [1.7, -1.7]),
    "hardshrink": (F.hardshrink, TF.hardshrink, [0.5, -0.5]),
    "hardshrink_-1": (lambda x: F.hardshrink(x, -1.0), lambda x: TF.hardshrink(x, -1.0),
                      [1.0, -1.0]),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_and_its_kinks_match_torch(rng, check_torch, check_exact, special_values,
                                              name):
    """Random values (and their exact-mode bits); then each kink, one ulp either side of it,
    ±0, ±inf, NaN, denormals and huge values, against torch element by element."""
    ours, ref, kinks = ACTIVATIONS[name]
    x = sample(rng, (6, 7))
    check_torch(ours, ref, x, tol=TOL)
    check_exact(ours, x)
    k = np.array(kinks, np.float32)
    around = [k, np.nextafter(k, np.float32(INF)), np.nextafter(k, np.float32(-INF))]
    check_torch(ours, elementwise(ref), np.concatenate([special_values] + around), tol=TOL)


@pytest.mark.parametrize("fn, x, value, grad", [
    (F.hardsigmoid, [-3.0, 3.0, 0.0, NAN, -4.0, 4.0], [0, 1, 0.5, NAN, 0, 1],
     [0, 0, 1 / 6, 0, 0, 0]),
    (lambda x: F.threshold(x, 1.0, -5.0), [1.0, NAN, 2.0, 0.0], [-5, NAN, 2, -5], [0, 1, 1, 0]),
    (F.softshrink, [0.5, -0.5, NAN, 0.2, 1.0, -1.0], [0, 0, NAN, 0, 0.5, -0.5],
     [0, 0, 1, 0, 1, 1]),
    (F.hardshrink, [0.5, -0.5, NAN, 0.2, 1.0, -1.0], [0, 0, NAN, 0, 1, -1], [0, 0, 1, 0, 1, 1]),
    (F.selu, [0.0, NAN], [0, NAN], [1.0507009873554805 * 1.6732632423543772, 1.0507009873554805]),
    (lambda x: F.celu(x, 2.0), [0.0, NAN], [0, NAN], [1, 1]),
    (F.tanhshrink, [0.0, NAN], [0, NAN], [0, NAN]),
])
def test_gradient_at_kinks_is_torchs(fn, x, value, grad):
    t = om.tensor(np.array(x, np.float32), requires_grad=True)
    y = fn(t)
    y.backward(om.ones(*y.shape))
    np.testing.assert_allclose(y.detach().numpy(), value, rtol=1e-6)
    np.testing.assert_allclose(t.grad.numpy(), np.array(grad, np.float32), rtol=1e-6)


def test_softshrink_keeps_the_sign_of_zero_as_torch():
    x = np.array([-0.2, 0.2, -0.0], np.float32)
    ours, ref = F.softshrink(om.tensor(x)).numpy(), TF.softshrink(torch.tensor(x)).numpy()
    assert np.signbit(ours).tolist() == np.signbit(ref).tolist() == [True, False, True]


@pytest.mark.parametrize("shape, dim", [((4, 6), -1), ((4, 6), 0), ((2, 3, 8), 2),
                                        ((2, 4, 5), 1), ((6,), 0), ((3, 0, 2), -1)])
def test_glu_matches_torch(rng, check_torch, check_exact, shape, dim):
    x = sample(rng, shape, 2.0)
    check_torch(lambda a: F.glu(a, dim), lambda a: TF.glu(a, dim), x, tol=TOL)
    check_exact(lambda a: F.glu(a, dim), x)


@pytest.mark.parametrize("shape, dim", [((4, 6), 1), ((4, 6), 0), ((2, 3, 5), -1), ((7,), 0)])
def test_softmin_matches_torch(rng, check_torch, check_exact, shape, dim):
    x = sample(rng, shape)
    check_torch(lambda a: F.softmin(a, dim), lambda a: TF.softmin(a, dim), x, tol=TOL)
    check_exact(lambda a: F.softmin(a, dim), x)


def test_softmin_without_dim_is_torchs_implicit_choice_with_its_warning(rng):
    x = sample(rng, (3, 4))
    with pytest.warns(UserWarning, match="softmin: implicit dimension"):
        ours = F.softmin(om.tensor(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(ours.numpy(), TF.softmin(torch.tensor(x)).numpy(), rtol=TOL)
    with pytest.warns(UserWarning, match="Softmin: implicit dimension"):
        nn.Softmin()(om.tensor(x))


# name, constructor arguments
MODULES = [("Hardsigmoid", ()), ("SELU", ()), ("CELU", ()), ("CELU", (0.5,)), ("GLU", ()),
           ("GLU", (1,)), ("Softmin", (1,)), ("Softmin", (-1,)), ("Threshold", (0.1, 20.0)),
           ("Tanhshrink", ()), ("Softshrink", ()), ("Softshrink", (1.5,)), ("Hardshrink", ()),
           ("Hardshrink", (2.0,)), ("ELU", (0.7,))]


@pytest.mark.parametrize("name, args", MODULES)
def test_activation_modules_match_torch(rng, check_torch, name, args):
    ours, ref = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    check_torch(lambda x: ours(x), lambda x: ref(x), sample(rng, (4, 6, 4)), tol=TOL)
    assert repr(ours) == repr(ref)
    assert list(ours.state_dict()) == list(ref.state_dict()) == []


def test_celu_module_is_not_an_elu():
    assert not isinstance(nn.CELU(), nn.ELU) and not isinstance(nn.Softshrink(), nn.Hardshrink)


@pytest.mark.parametrize("call, error, match", [
    (lambda: F.softshrink(om.ones(2), -1.0), ValueError,
     "softshrink: lambd must be >= 0, got -1.0"),
    (lambda: nn.Softshrink(-0.5)(om.ones(2)), ValueError, "softshrink: lambd must be >= 0"),
    (lambda: F.celu(om.ones(2), 0.0), ValueError, "celu: alpha must be positive, got 0.0"),
    (lambda: F.celu(om.ones(2), -1.0), ValueError, "celu: alpha must be positive"),
    (lambda: F.glu(om.ones(3)), ValueError,
     r"glu: dimension -1 of input \(3,\) has odd size 3; it must be halved"),
    (lambda: F.glu(om.ones(3, 2), 0), ValueError, r"glu: dimension 0 of input \(3, 2\) has odd"),
    (lambda: F.glu(om.tensor(1.0)), ValueError, "glu: input must have at least one dimension"),
    (lambda: F.glu(om.ones(2), 3), ValueError, "glu: dim 3 out of range for a tensor of rank 1"),
    (lambda: F.softmin(om.ones(2, 3), 2), ValueError, "softmin: dim 2 out of range"),
    (lambda: F.softmin(om.ones(2), 0, dtype=np.int64), TypeError, "softmin: dtype must be float32"),
    (lambda: F.hardsigmoid(om.tensor([1, 2])), TypeError, "hardsigmoid: input must be float32"),
    (lambda: F.threshold(om.tensor([1, 2]), 0, 1), TypeError, "threshold: input must be float32"),
    (lambda: F.tanhshrink(om.tensor([1, 2])), TypeError, "tanhshrink: input must be float32"),
    (lambda: F.hardshrink(om.tensor([1, 2])), TypeError, "hardshrink: input must be float32"),
])
def test_bad_activation_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- cells ----------------------------------------------------------------------------------
CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("RNNCell", {"bias": False}),
         ("LSTMCell", {}), ("LSTMCell", {"bias": False}), ("GRUCell", {}),
         ("GRUCell", {"bias": False})]


def _torch_cell_and_ours(name, kwargs, input_size=5, hidden=7):
    """A torch cell and ours holding its weights, loaded through interop."""
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(input_size, hidden, **kwargs)
    ours = getattr(nn, name)(input_size, hidden, **kwargs)
    assert list(ours.state_dict()) == list(ref.state_dict())
    for (key, a), b in zip(ours.state_dict().items(), ref.state_dict().values()):
        assert a.shape == tuple(b.shape), key
    interop.load_torch_state_dict(ours, ref.state_dict())
    return ours, ref


def _pair(state):
    return state if isinstance(state, tuple) else (state,)


@pytest.mark.parametrize("name, kwargs", CELLS)
@pytest.mark.parametrize("given_hx", [False, True])
def test_cell_over_several_steps_matches_torch(rng, assert_close, name, kwargs, given_hx):
    """Four steps with h (and c) fed back, the loss a random weighting of every step's states:
    the outputs, the input and initial-state gradients, and the weights' gradients."""
    ours, ref = _torch_cell_and_ours(name, kwargs)
    x = sample(rng, (4, 3, 5), 1.0)
    xo, xt = om.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    parts = 2 if name == "LSTMCell" else 1
    h0 = [sample(rng, (3, 7), 0.5) for _ in range(parts)]
    ho = [om.tensor(h, requires_grad=True) for h in h0]
    ht = [torch.tensor(h, requires_grad=True) for h in h0]
    so = (tuple(ho) if parts == 2 else ho[0]) if given_hx else None
    st = (tuple(ht) if parts == 2 else ht[0]) if given_hx else None
    loss, tloss = 0, 0
    for t in range(4):
        so, st = ours(xo[t], so), ref(xt[t], st)
        for a, b in zip(_pair(so), _pair(st)):
            assert_close(a.detach().numpy(), b.detach().numpy(), 1e-5, f"step {t}")
            r = sample(rng, a.shape, 1.0)
            loss, tloss = loss + (a * om.tensor(r)).sum(), tloss + (b * torch.tensor(r)).sum()
    loss.backward()
    tloss.backward()
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad input")
    if given_hx:
        for a, b in zip(ho, ht):
            assert_close(a.grad.numpy(), b.grad.numpy(), 1e-5, "grad hx")
    param_grads_match_torch(ours, ref, assert_close, 1e-5)


@pytest.mark.parametrize("name, kwargs", CELLS[:1] + CELLS[3:4] + CELLS[5:6])
def test_cell_unbatched_input_matches_torch(rng, assert_close, name, kwargs):
    ours, ref = _torch_cell_and_ours(name, kwargs)
    x = sample(rng, (5,), 1.0)
    hx = [sample(rng, (7,), 0.5) for _ in range(2 if name == "LSTMCell" else 1)]
    for given in (None, hx):
        so = ours(om.tensor(x), None if given is None else
                  (tuple(om.tensor(h) for h in given) if len(given) == 2 else om.tensor(given[0])))
        st = ref(torch.tensor(x), None if given is None else
                 (tuple(torch.tensor(h) for h in given) if len(given) == 2 else
                  torch.tensor(given[0])))
        for a, b in zip(_pair(so), _pair(st)):
            assert a.shape == (7,)
            assert_close(a.detach().numpy(), b.detach().numpy(), 1e-5, "unbatched")


@pytest.mark.parametrize("cell, layer", [("RNNCell", "RNN"), ("LSTMCell", "LSTM"),
                                         ("GRUCell", "GRU")])
def test_cells_draw_as_their_layers(cell, layer):
    """Uniform(±1/√hidden_size) as PyTorch's, in its order: a cell's weights are the bits of a
    one-layer layer's from the same seed, from the default generator or a generator= too."""
    c, m = getattr(nn, cell)(6, 16, seed=5), getattr(nn, layer)(6, 16, seed=5)
    for (key, a), b in zip(c.state_dict().items(), m.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=key)
    w = np.concatenate([a.numpy().ravel() for a in c.state_dict().values()])
    assert np.abs(w).max() <= np.float32(0.25) and np.abs(w).max() > 0.24  # 1/√16
    assert abs(w.mean()) < 0.02 and abs(w.std() - 0.25 / np.sqrt(3)) < 0.01
    om.manual_seed(3)
    first = getattr(nn, cell)(6, 16).weight_ih.detach().numpy()
    om.manual_seed(3)
    np.testing.assert_array_equal(first, getattr(nn, cell)(6, 16).weight_ih.detach().numpy())
    assert not np.array_equal(first, getattr(nn, cell)(6, 16).weight_ih.detach().numpy())
    g1, g2 = om.Generator(9), om.Generator(9)
    np.testing.assert_array_equal(getattr(nn, cell)(6, 16, generator=g1).bias_hh.detach().numpy(),
                                  getattr(nn, cell)(6, 16, generator=g2).bias_hh.detach().numpy())


def test_lstm_cell_loads_torch_weights_and_exports_them_back(rng):
    """Gate order (i, f, g, o) is torch's: its weights give its outputs, and ours load into it."""
    ours, ref = _torch_cell_and_ours("LSTMCell", {})
    x = sample(rng, (2, 5), 1.0)
    h, c = ours(om.tensor(x))
    th, tc = ref(torch.tensor(x))
    np.testing.assert_allclose(h.detach().numpy(), th.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(c.detach().numpy(), tc.detach().numpy(), atol=1e-6)
    mine = nn.LSTMCell(5, 7, seed=2)
    ref.load_state_dict(interop.to_torch_state_dict(mine))
    np.testing.assert_allclose(mine(om.tensor(x))[0].detach().numpy(),
                               ref(torch.tensor(x))[0].detach().numpy(), atol=1e-6)


def test_cell_reprs_and_attributes_are_torchs():
    for args, kwargs in (((3, 4), {}), ((3, 4), {"bias": False}),
                         ((3, 4), {"nonlinearity": "relu"})):
        ours, ref = nn.RNNCell(*args, **kwargs), torch.nn.RNNCell(*args, **kwargs)
        assert repr(ours) == repr(ref)
        assert (ours.input_size, ours.hidden_size, ours.bias, ours.nonlinearity) == (
            ref.input_size, ref.hidden_size, ref.bias, ref.nonlinearity)
    assert repr(nn.GRUCell(3, 4)) == repr(torch.nn.GRUCell(3, 4))
    assert repr(nn.LSTMCell(3, 4, bias=False)) == repr(torch.nn.LSTMCell(3, 4, bias=False))


def test_cells_give_the_same_bits_everywhere(rng, check_exact):
    x, h = sample(rng, (5, 6), 1.0), sample(rng, (5, 9), 0.5)
    for cell in (nn.RNNCell(6, 9, seed=1), nn.GRUCell(6, 9, seed=1)):
        check_exact(lambda a, b, m=cell: m(a, b), x, h)
    lstm = nn.LSTMCell(6, 9, seed=1)
    check_exact(lambda a, b, c: lstm(a, (b, c))[0], x, h, h.copy())


@pytest.mark.parametrize("call, error, match", [
    (lambda: nn.RNNCell(3, 4)(om.ones(2, 5)), ValueError,
     r"RNNCell: input of shape \(2, 5\) must be \(batch, 3\) or unbatched \(3,\)"),
    (lambda: nn.GRUCell(3, 4)(om.ones(1, 2, 3)), ValueError,
     r"GRUCell: input of shape \(1, 2, 3\)"),
    (lambda: nn.RNNCell(3, 4)(om.ones(2, 3), om.ones(3, 4)), ValueError,
     r"RNNCell: hx has shape \(3, 4\), expected \(2, 4\) for input \(2, 3\)"),
    (lambda: nn.GRUCell(3, 4)(om.ones(3), om.ones(1, 4)), ValueError,
     r"GRUCell: hx has shape \(1, 4\), expected \(4,\)"),
    (lambda: nn.LSTMCell(3, 4)(om.ones(2, 3), (om.ones(2, 4), om.ones(2, 5))), ValueError,
     r"LSTMCell: hx\[1\] has shape \(2, 5\), expected \(2, 4\)"),
    (lambda: nn.LSTMCell(3, 4)(om.ones(2, 3), om.ones(2, 4)), TypeError,
     r"LSTMCell: hx must be a pair \(h_0, c_0\) or None"),
    (lambda: nn.RNNCell(3, 4, nonlinearity="gelu"), ValueError,
     "RNNCell: nonlinearity must be 'tanh' or 'relu', got 'gelu'"),
    (lambda: nn.LSTMCell(0, 4), ValueError, "LSTMCell: input_size must be a positive integer"),
    (lambda: nn.GRUCell(3, -1), ValueError, "GRUCell: hidden_size must be a positive integer"),
])
def test_bad_cell_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- RNN ------------------------------------------------------------------------------------
def _torch_rnn_and_ours(**kwargs):
    torch.manual_seed(0)
    ref = torch.nn.RNN(5, 6, **kwargs)
    ours = nn.RNN(5, 6, **kwargs)
    assert list(ours.state_dict()) == list(ref.state_dict())
    interop.load_torch_state_dict(ours, ref.state_dict())
    return ours, ref


@pytest.mark.parametrize("kwargs", [
    {}, {"nonlinearity": "relu"}, {"num_layers": 2, "bidirectional": True},
    {"num_layers": 3, "batch_first": True, "nonlinearity": "relu"}, {"bias": False},
    {"num_layers": 2, "bidirectional": True, "batch_first": True, "bias": False}])
def test_rnn_matches_torch(rng, assert_close, kwargs):
    ours, ref = _torch_rnn_and_ours(**kwargs)
    d = 2 if kwargs.get("bidirectional") else 1
    x = sample(rng, (3, 4, 5) if kwargs.get("batch_first") else (4, 3, 5), 1.0)
    h0 = sample(rng, (kwargs.get("num_layers", 1) * d, 3, 6), 0.5)
    xo, ho = om.tensor(x, requires_grad=True), om.tensor(h0, requires_grad=True)
    xt, ht = torch.tensor(x, requires_grad=True), torch.tensor(h0, requires_grad=True)
    (y, h), (yt, hn) = ours(xo, ho), ref(xt, ht)
    assert_close(y.detach().numpy(), yt.detach().numpy(), 1e-5, "output")
    assert_close(h.detach().numpy(), hn.detach().numpy(), 1e-5, "h_n")
    r, s = sample(rng, y.shape, 1.0), sample(rng, h.shape, 1.0)
    ((y * om.tensor(r)).sum() + (h * om.tensor(s)).sum()).backward()
    ((yt * torch.tensor(r)).sum() + (hn * torch.tensor(s)).sum()).backward()
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad x")
    assert_close(ho.grad.numpy(), ht.grad.numpy(), 1e-5, "grad h0")
    param_grads_match_torch(ours, ref, assert_close, 1e-5)


def test_rnn_unbatched_and_default_state_match_torch(rng, assert_close):
    ours, ref = _torch_rnn_and_ours(num_layers=2, bidirectional=True)
    x = sample(rng, (4, 5), 1.0)
    (y, h), (yt, ht) = ours(om.tensor(x)), ref(torch.tensor(x))
    assert y.shape == (4, 12) and h.shape == (4, 6)
    assert_close(y.detach().numpy(), yt.detach().numpy(), 1e-5, "output")
    assert_close(h.detach().numpy(), ht.detach().numpy(), 1e-5, "h_n")


def test_rnn_lengths_match_torch_packed(rng, assert_close):
    ours, ref = _torch_rnn_and_ours(num_layers=2, bidirectional=True, batch_first=True)
    lengths = np.array([3, 6, 1, 4])
    x = sample(rng, (4, 6, 5), 1.0)
    y, h = ours(om.tensor(x), lengths=lengths)
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), torch.tensor(lengths),
                                                     batch_first=True, enforce_sorted=False)
    yp, ht = ref(packed)
    yt, _ = torch.nn.utils.rnn.pad_packed_sequence(yp, batch_first=True, total_length=6)
    assert_close(y.detach().numpy(), yt.detach().numpy(), 1e-5, "output")
    assert_close(h.detach().numpy(), ht.detach().numpy(), 1e-5, "h_n")


def test_rnn_gives_the_same_bits_everywhere(rng, check_exact):
    m = nn.RNN(4, 8, 2, "relu", bidirectional=True, seed=1)
    check_exact(lambda x: m(x, lengths=np.array([3, 1]))[0], sample(rng, (3, 2, 4), 1.0))


def test_rnn_positional_arguments_are_torchs():
    ours = nn.RNN(3, 4, 2, "relu", False, True, 0.0, True)
    ref = torch.nn.RNN(3, 4, 2, "relu", False, True, 0.0, True)
    for attr in ("num_layers", "nonlinearity", "bias", "batch_first", "dropout",
                 "bidirectional"):
        assert getattr(ours, attr) == getattr(ref, attr), attr
    assert list(ours.state_dict()) == list(ref.state_dict())


@pytest.mark.parametrize("call, error, match", [
    (lambda: nn.RNN(3, 4, nonlinearity="sigmoid"), ValueError,
     "RNN: nonlinearity must be 'tanh' or 'relu', got 'sigmoid'"),
    (lambda: nn.RNN(3, 4, 2, dropout=1.5), ValueError, "RNN: dropout"),
    (lambda: nn.RNN(3, 4, proj_size=2), TypeError, "proj_size"),
    (lambda: nn.RNN(3, 4)(om.ones(2, 1, 5)), ValueError, r"RNN: input of shape \(2, 1, 5\)"),
    (lambda: nn.RNN(3, 4)(om.ones(2, 1, 3), om.ones(1, 2, 4)), ValueError,
     r"RNN: h0 has shape \(1, 2, 4\), expected \(1, 1, 4\)"),
    (lambda: F.recurrent.rnn_cell(om.ones(2, 4), om.ones(2, 4), om.ones(4, 4), None, "elu"),
     ValueError, "rnn_cell: nonlinearity must be 'tanh' or 'relu'"),
])
def test_bad_rnn_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- instance norm --------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 5), (1, 2, 7), (4, 1, 3)])
@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_matches_torch(rng, check_torch, check_exact, shape, affine):
    x = sample(rng, shape)
    c = shape[1]
    params = [rng.uniform(0.5, 1.5, c).astype(np.float32), sample(rng, (c,), 1.0)] \
        if affine else []

    def ours(a, *wb):
        return F.instance_norm(a, None, None, *wb)

    def ref(a, *wb):
        return TF.instance_norm(a, None, None, *wb)

    check_torch(ours, ref, x, *params, tol=1e-5)
    check_exact(ours, x, *params)


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_running_statistics_are_torchs(rng, assert_close, use_input_stats):
    x = sample(rng, (3, 4, 6))
    rm, rv = sample(rng, (4,), 1.0), rng.uniform(0.5, 2.0, 4).astype(np.float32)
    ours_stats = [om.tensor(rm.copy()), om.tensor(rv.copy())]
    ref_stats = [torch.tensor(rm.copy()), torch.tensor(rv.copy())]
    xo, xt = om.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y = F.instance_norm(xo, *ours_stats, use_input_stats=use_input_stats, momentum=0.3)
    yt = TF.instance_norm(xt, *ref_stats, use_input_stats=use_input_stats, momentum=0.3)
    assert_close(y.detach().numpy(), yt.detach().numpy(), 1e-5, "output")
    for a, b, name in zip(ours_stats, ref_stats, ("running_mean", "running_var")):
        assert_close(a.numpy(), b.numpy(), 1e-6, name)
    if not use_input_stats:
        np.testing.assert_array_equal(ours_stats[0].numpy(), rm)
    g = sample(rng, y.shape, 1.0)
    y.backward(om.tensor(g))
    yt.backward(torch.tensor(g))
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad x")


@pytest.mark.parametrize("name, shape", [("InstanceNorm1d", (3, 4, 6)), ("InstanceNorm1d", (4, 6)),
                                         ("InstanceNorm2d", (2, 4, 3, 5)),
                                         ("InstanceNorm2d", (4, 3, 5))])
@pytest.mark.parametrize("kwargs", [{}, {"affine": True}, {"track_running_stats": True},
                                    {"affine": True, "track_running_stats": True,
                                     "momentum": 0.4, "eps": 1e-3},
                                    {"affine": True, "bias": False},
                                    {"track_running_stats": True, "momentum": None}])
def test_instance_norm_modules_match_torch(rng, assert_close, name, shape, kwargs):
    """Training then evaluation: outputs, gradients, running statistics, state and repr."""
    ours, ref = getattr(nn, name)(4, **kwargs), getattr(torch.nn, name)(4, **kwargs)
    assert repr(ours) == repr(ref)
    assert list(ours.state_dict()) == list(ref.state_dict())
    if kwargs.get("affine"):  # weight and bias away from ones and zeros
        state = {k: rng.uniform(0.5, 1.5, v.shape).astype(np.float32)
                 if k in ("weight", "bias") else v.numpy() for k, v in ref.state_dict().items()}
        ref.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
        interop.load_torch_state_dict(ours, ref.state_dict())
    for training in (True, False, True):
        ours.train(training)
        ref.train(training)
        x = sample(rng, shape)
        xo, xt = om.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, yt = ours(xo), ref(xt)
        assert_close(y.detach().numpy(), yt.detach().numpy(), 1e-5, f"output ({training})")
        g = sample(rng, y.shape, 1.0)
        y.backward(om.tensor(g))
        yt.backward(torch.tensor(g))
        assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad x")
        for key, value in ref.state_dict().items():
            assert_close(ours.state_dict()[key], value.numpy(), 1e-6, key)
    for (key, p), q in zip(ours.named_parameters(), ref.parameters()):
        assert_close(p.grad.numpy(), q.grad.numpy(), 1e-5, f"grad {key}")


def test_instance_norm_with_other_channel_count_warns_without_affine_as_torch(rng):
    x = om.tensor(sample(rng, (2, 3, 5)))
    with pytest.warns(UserWarning, match=r"InstanceNorm1d: input of shape \(2, 3, 5\) has 3 "
                                         "channels, num_features is 4"):
        y = nn.InstanceNorm1d(4)(x)
    np.testing.assert_allclose(y.numpy(), TF.instance_norm(torch.tensor(x.numpy())).numpy(),
                               atol=1e-5)
    with pytest.raises(ValueError, match="InstanceNorm1d: input of shape .* has 3 channels"):
        nn.InstanceNorm1d(4, affine=True)(x)


@pytest.mark.parametrize("call, error, match", [
    (lambda: nn.InstanceNorm1d(3)(om.ones(2, 3, 4, 5)), ValueError,
     r"InstanceNorm1d: expected a 2 or 3-D input, got shape \(2, 3, 4, 5\)"),
    (lambda: nn.InstanceNorm2d(3)(om.ones(3, 4)), ValueError,
     r"InstanceNorm2d: expected a 3 or 4-D input"),
    (lambda: F.instance_norm(om.ones(2, 3)), ValueError,
     r"instance_norm: expected more than 1 spatial element when using input statistics, got "
     r"input of shape \(2, 3\)"),
    (lambda: F.instance_norm(om.ones(2, 3, 1)), ValueError, "more than 1 spatial element"),
    (lambda: F.instance_norm(om.ones(3)), ValueError, r"instance_norm: input must be \(N, C, \*\)"),
    (lambda: F.instance_norm(om.ones(2, 3, 4), weight=om.ones(4)), ValueError,
     r"instance_norm: weight of shape \(4,\), expected \(3,\)"),
    (lambda: F.instance_norm(om.ones(2, 3, 4), om.zeros(3)), ValueError,
     "instance_norm: running_mean and running_var must both be given"),
    (lambda: F.instance_norm(om.ones(2, 3, 4), use_input_stats=False), ValueError,
     "instance_norm: running_mean and running_var must both be given"),
    (lambda: F.instance_norm(om.tensor(np.ones((2, 3, 4), np.int64))), TypeError,
     "instance_norm: input must be float32"),
    (lambda: nn.InstanceNorm2d(0), ValueError, "InstanceNorm2d: num_features must be a positive"),
])
def test_bad_instance_norm_arguments_raise_naming_them(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- parameters as a vector ------------------------------------------------------------------
def test_parameters_to_vector_and_back_are_torchs(rng):
    ours = nn.Sequential(nn.Linear(3, 4), nn.LSTMCell(4, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LSTMCell(4, 2))
    ref.load_state_dict(interop.to_torch_state_dict(ours))
    vec = nn.utils.parameters_to_vector(ours.parameters())
    tvec = torch.nn.utils.parameters_to_vector(ref.parameters())
    np.testing.assert_array_equal(vec.detach().numpy(), tvec.detach().numpy())
    g = sample(rng, vec.shape, 1.0)
    vec.backward(om.tensor(g))  # in the graph: each parameter gets its piece
    np.testing.assert_array_equal(np.concatenate([p.grad.numpy().ravel()
                                                  for p in ours.parameters()]), g)
    new = sample(rng, vec.shape, 1.0)
    nn.utils.vector_to_parameters(om.tensor(new), ours.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(new), ref.parameters())
    for (key, a), b in zip(ours.state_dict().items(), ref.state_dict().values()):
        np.testing.assert_array_equal(a, b.numpy(), err_msg=key)
    assert all(p.requires_grad for p in ours.parameters())


@pytest.mark.parametrize("vec, error, match", [
    (om.zeros(7), ValueError,
     r"vector_to_parameters: vec of shape \(7,\), expected \(6,\) for 2 parameters of 6"),
    (om.zeros(2, 3), ValueError, r"vector_to_parameters: vec of shape \(2, 3\)"),
    (np.zeros(6, np.float32), TypeError, "vector_to_parameters: vec must be a Tensor, got "
                                         "ndarray"),
])
def test_vector_to_parameters_refuses_a_wrong_vector_before_writing(vec, error, match):
    m = nn.Linear(2, 2)
    before = m.state_dict()
    with pytest.raises(error, match=match):
        nn.utils.vector_to_parameters(vec, m.parameters())
    for key, value in m.state_dict().items():
        np.testing.assert_array_equal(value, before[key])
