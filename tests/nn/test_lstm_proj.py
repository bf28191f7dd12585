"""LSTM with proj_size against PyTorch (forward, gradients of the input, the initial states and
every parameter; torch state dicts through interop), packed-sequence lengths, float64 central
differences of the projected step, errors, exact-mode bits."""
import numpy as np
import pytest

import onemodel as om
from onemodel import interop, nn
from onemodel.functional.recurrent import lstm_projected_directions

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections")


def _twin(m):
    t = torch.nn.LSTM(m.input_size, m.hidden_size, m.num_layers, bias=m.bias,
                      batch_first=m.batch_first, bidirectional=m.bidirectional,
                      proj_size=m.proj_size)
    t.load_state_dict(interop.to_torch_state_dict(m))
    return t


def _run_both(m, t, x, states, rng, assert_close):
    """Forward and one random weighting of (y, h_n, c_n) backward in both engines."""
    xo = om.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x).requires_grad_()
    so = None if states is None else tuple(om.tensor(s, requires_grad=True) for s in states)
    st = None if states is None else tuple(torch.from_numpy(s).requires_grad_() for s in states)
    y, (h, c) = m(xo, so)
    yt, (ht, ct) = t(xt, st)
    loss, tloss = 0, 0
    for name, o, ot in (("y", y, yt), ("h_n", h, ht), ("c_n", c, ct)):
        assert_close(o.detach().numpy(), ot.detach().numpy(), 1e-5, name)
        r = rng.standard_normal(o.shape).astype(np.float32)
        loss = loss + (o * om.tensor(r)).sum()
        tloss = tloss + (ot * torch.from_numpy(r)).sum()
    loss.backward()
    tloss.backward()
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad input")
    if states is not None:
        for name, a, b in zip(("h0", "c0"), so, st):
            assert_close(a.grad.numpy(), b.grad.numpy(), 1e-5, f"grad {name}")
    theirs = dict(t.named_parameters())
    for name, p in m.named_parameters():
        assert_close(p.grad.numpy(), theirs[name].grad.numpy(), 1e-5, f"grad {name}")
    return y, h, c


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("given_state", [False, True])
def test_matches_torch(bidirectional, batch_first, given_state, rng, assert_close):
    m = nn.LSTM(5, 7, 2, batch_first=batch_first, bidirectional=bidirectional, proj_size=3,
                seed=4)
    t = _twin(m)
    d = 2 if bidirectional else 1
    x = rng.standard_normal((3, 6, 5) if batch_first else (6, 3, 5)).astype(np.float32)
    states = None
    if given_state:
        states = (rng.standard_normal((2 * d, 3, 3)).astype(np.float32),
                  rng.standard_normal((2 * d, 3, 7)).astype(np.float32))
    y, h, c = _run_both(m, t, x, states, rng, assert_close)
    assert y.shape == ((3, 6, 3 * d) if batch_first else (6, 3, 3 * d))
    assert h.shape == (2 * d, 3, 3) and c.shape == (2 * d, 3, 7)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_unbatched_and_no_bias_match_torch(bidirectional, rng, assert_close):
    m = nn.LSTM(4, 6, 1, bias=False, bidirectional=bidirectional, proj_size=2, seed=1)
    t = _twin(m)
    d = 2 if bidirectional else 1
    x = rng.standard_normal((5, 4)).astype(np.float32)
    states = (rng.standard_normal((d, 2)).astype(np.float32),
              rng.standard_normal((d, 6)).astype(np.float32))
    y, h, c = _run_both(m, t, x, states, rng, assert_close)
    assert y.shape == (5, 2 * d) and h.shape == (d, 2) and c.shape == (d, 6)


def test_parameter_names_shapes_and_torch_state_dict(rng, assert_close):
    t = torch.nn.LSTM(3, 8, 2, bidirectional=True, proj_size=5)
    m = nn.LSTM(3, 8, 2, bidirectional=True, proj_size=5)
    assert [(k, v.shape) for k, v in m.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in t.state_dict().items()]
    interop.load_torch_state_dict(m, t.state_dict())
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    y, _ = m(om.tensor(x))
    assert_close(y.detach().numpy(), t(torch.from_numpy(x))[0].detach().numpy(), 1e-5)
    assert "proj_size=5" in repr(m)


def test_draw_order_and_bound():
    """weight_hr is drawn after each direction's biases, from Uniform(±1/√hidden_size)."""
    m = nn.LSTM(3, 4, proj_size=2, seed=7)
    names = [n for n, _ in m.named_parameters()]
    assert names == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                     "weight_hr_l0"]
    g = om.Generator(7)
    bound = np.float32(0.5)
    for name in names:
        p = getattr(m, name).detach().numpy()
        np.testing.assert_array_equal(p, g.uniform(-bound, bound, p.shape))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lengths_match_rows_run_alone(bidirectional, rng):
    m = nn.LSTM(3, 5, 2, bidirectional=bidirectional, proj_size=2, seed=3)
    lengths = np.array([4, 1, 6])
    x = rng.standard_normal((6, 3, 3)).astype(np.float32)
    xo = om.tensor(x, requires_grad=True)
    y, (h, c) = m(xo, lengths=lengths)
    for b, n in enumerate(lengths):
        y1, (h1, c1) = m(om.tensor(x[:n, b:b + 1]))
        np.testing.assert_array_equal(y.detach().numpy()[:n, b:b + 1], y1.detach().numpy())
        np.testing.assert_array_equal(h.detach().numpy()[:, b:b + 1], h1.detach().numpy())
        np.testing.assert_array_equal(c.detach().numpy()[:, b:b + 1], c1.detach().numpy())
        assert not y.detach().numpy()[n:, b].any(), "padded outputs must be exactly zero"
    y.backward(rng.standard_normal(y.shape).astype(np.float32))
    for b, n in enumerate(lengths):
        assert not xo.grad.numpy()[n:, b].any(), "padded inputs must get zero gradient"


def test_lengths_match_torch_packed(rng, assert_close):
    m = nn.LSTM(4, 9, 2, bidirectional=True, batch_first=True, proj_size=3, seed=2)
    t = _twin(m)
    lengths = np.array([3, 6, 1, 4])
    x = rng.standard_normal((4, 6, 4)).astype(np.float32)
    xo, xt = om.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    y, (h, c) = m(xo, lengths=lengths)
    packed = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.from_numpy(lengths),
                                                     batch_first=True, enforce_sorted=False)
    yp, (ht, ct) = t(packed)
    yt, _ = torch.nn.utils.rnn.pad_packed_sequence(yp, batch_first=True, total_length=6)
    for name, a, b in (("output", y, yt), ("h_n", h, ht), ("c_n", c, ct)):
        assert_close(a.detach().numpy(), b.detach().numpy(), 1e-5, name)
    g = rng.standard_normal(y.shape).astype(np.float32)
    (y * om.tensor(g)).sum().backward()
    (yt * torch.from_numpy(g)).sum().backward()
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad input")
    theirs = dict(t.named_parameters())
    for name, p in m.named_parameters():
        assert_close(p.grad.numpy(), theirs[name].grad.numpy(), 1e-5, f"grad {name}")


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def _projected64(xw, w_hh, b_hh, w_hr, h0, c0, lengths, reverse):
    """The projected LSTM direction in float64 numpy: y, h_n, c_n joined into one vector."""
    steps, hidden = xw.shape[0], w_hh.shape[0] // 4
    h, c, ys = h0, c0, np.zeros((steps,) + h0.shape)
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        z = xw[t] + h @ w_hh.T + b_hh
        i, f, g, o = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
        c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h_new = (_sigmoid(o) * np.tanh(c_new)) @ w_hr.T
        live = (t < lengths)[:, None]
        h, c = np.where(live, h_new, h), np.where(live, c_new, c)
        ys[t] = np.where(live, h_new, 0.0)
    return np.concatenate([ys.ravel(), h.ravel(), c.ravel()])


@pytest.mark.parametrize("reverse", [False, True])
def test_projected_step_finite_differences(reverse, check_grad, rng):
    hidden, proj, lengths = 3, 2, np.array([4, 2])
    shapes = ((4, 2, 4 * hidden), (4 * hidden, proj), (4 * hidden,), (proj, hidden),
              (2, proj), (2, hidden))
    args = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in shapes]

    def ours(xw, w_hh, b_hh, w_hr, h0, c0):
        y, h, c = lstm_projected_directions([xw], [w_hh], [b_hh], [w_hr], [h0], [c0],
                                            lengths, [reverse])[0]
        return om.functional.cat([om.functional.reshape(a, (-1,)) for a in (y, h, c)], 0)

    check_grad(ours, *args,
               ref64=lambda *a: _projected64(*a, lengths=lengths, reverse=reverse))


def test_errors():
    with pytest.raises(ValueError, match="proj_size 4 must be smaller than hidden_size 4"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="proj_size must be a non-negative integer"):
        nn.LSTM(3, 4, proj_size=-1)
    with pytest.raises(ValueError, match="GRU: proj_size is only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    # PyTorch's positional order: dropout, bidirectional, then proj_size.
    assert nn.LSTM(3, 4, 1, True, False, 0.0, False, 2).proj_size == 2
    m = nn.LSTM(3, 4, proj_size=2)
    x = om.tensor(np.zeros((5, 2, 3), np.float32))
    c0 = om.tensor(np.zeros((1, 2, 4), np.float32))
    with pytest.raises(ValueError, match=r"h0 has shape \(1, 2, 4\), expected \(1, 2, 2\).*"
                                         r"proj_size"):
        m(x, (om.tensor(np.zeros((1, 2, 4), np.float32)), c0))
    with pytest.raises(ValueError, match=r"c0 has shape \(1, 2, 2\), expected \(1, 2, 4\).*"
                                         r"hidden_size"):
        m(x, (om.tensor(np.zeros((1, 2, 2), np.float32)), om.tensor(np.zeros((1, 2, 2),
                                                                              np.float32))))
    with pytest.raises(ValueError, match=r"h0 has shape \(2,\), expected \(1, 2\)"):
        m(om.tensor(np.zeros((5, 3), np.float32)), (om.tensor(np.zeros(2, np.float32)),
                                                     om.tensor(np.zeros((1, 4), np.float32))))
    w = om.tensor(np.zeros((16, 2), np.float32))
    with pytest.raises(ValueError, match=r"w_hh of shape \(16, 2\) and w_hr of shape \(3, 4\)"):
        lstm_projected_directions([om.tensor(np.zeros((2, 1, 16), np.float32))], [w], [None],
                                  [om.tensor(np.zeros((3, 4), np.float32))],
                                  [np.zeros((1, 2), np.float32)],
                                  [np.zeros((1, 4), np.float32)], None, [False])


def test_exact_bits_across_isa_and_threads(check_exact, rng):
    """Forward and the gradients of the input, every weight and both states."""
    hidden, proj, steps, batch, width = 17, 5, 5, 9, 6
    shapes = ((steps, batch, width), (4 * hidden, width), (4 * hidden,), (4 * hidden, proj),
              (proj, hidden), (batch, proj), (batch, hidden))
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def run(x, w_ih, b, w_hh, w_hr, h0, c0):
        xw = om.functional.linear(x, w_ih, b)
        y, h, c = lstm_projected_directions([xw, xw], [w_hh, w_hh], [b, None], [w_hr, w_hr],
                                            [h0, h0], [c0, c0], None, [False, True])[1]
        return om.functional.cat([om.functional.reshape(a, (-1,)) for a in (y, h, c)], 0)

    check_exact(run, *args)
