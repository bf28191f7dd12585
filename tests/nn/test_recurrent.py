"""LSTM and GRU: PyTorch parity, packed-sequence lengths, finite differences, exact-mode bits."""
import numpy as np
import pytest

import onemodel as om
from onemodel import nn
from onemodel.functional.recurrent import gru_layer, lstm_layer

torch = pytest.importorskip("torch")

CELLS = [(nn.LSTM, "LSTM"), (nn.GRU, "GRU")]


def _torch_twin(m, name):
    t = getattr(torch.nn, name)(m.input_size, m.hidden_size, m.num_layers, bias=m.bias,
                                batch_first=m.batch_first, bidirectional=m.bidirectional)
    t.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in m.state_dict().items()})
    return t


def _states(h, name):
    return list(h) if name == "LSTM" else [h]


def _outputs_then_backward(outs, touts, rng, assert_close):
    """Compares every output, then back-propagates one random weighting of all of them."""
    loss, tloss = 0, 0
    for k, (o, ot) in enumerate(zip(outs, touts)):
        assert_close(o.detach().numpy(), ot.detach().numpy(), 1e-5, f"output {k}")
        r = rng.standard_normal(o.shape).astype(np.float32)
        loss = loss + (o * om.tensor(r)).sum()
        tloss = tloss + (ot * torch.from_numpy(r)).sum()
    loss.backward()
    tloss.backward()


@pytest.mark.parametrize("cls,name", CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_matches_torch(cls, name, bidirectional, batch_first, rng, assert_close):
    m = cls(5, 17, num_layers=2, bidirectional=bidirectional, batch_first=batch_first, seed=3)
    t = _torch_twin(m, name)
    d = 2 if bidirectional else 1
    x = rng.standard_normal((4, 6, 5) if batch_first else (6, 4, 5)).astype(np.float32)
    init = [rng.standard_normal((2 * d, 4, 17)).astype(np.float32)
            for _ in range(2 if name == "LSTM" else 1)]
    xo = om.tensor(x, requires_grad=True)
    io = [om.tensor(a, requires_grad=True) for a in init]
    xt = torch.from_numpy(x).requires_grad_()
    it = [torch.from_numpy(a).requires_grad_() for a in init]
    y, h = m(xo, tuple(io) if name == "LSTM" else io[0])
    yt, ht = t(xt, tuple(it) if name == "LSTM" else it[0])
    _outputs_then_backward([y] + _states(h, name), [yt] + _states(ht, name), rng, assert_close)
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad x")
    for a, b in zip(io, it):
        assert_close(a.grad.numpy(), b.grad.numpy(), 1e-5, "grad h0")
    for (pname, p), tp in zip(m.named_parameters(), t.parameters()):
        assert_close(p.grad.numpy(), tp.grad.numpy(), 1e-4, f"grad {pname}")


@pytest.mark.parametrize("cls,name", CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lengths_match_rows_run_alone(cls, name, bidirectional, rng):
    m = cls(3, 16 + 1, num_layers=2, bidirectional=bidirectional, seed=1)
    lengths = np.array([5, 2, 7, 1])
    x = rng.standard_normal((7, 4, 3)).astype(np.float32)
    xo = om.tensor(x, requires_grad=True)
    y, h = m(xo, lengths=lengths)
    y_np = y.detach().numpy()
    states = [s.detach().numpy() for s in _states(h, name)]
    for b, n in enumerate(lengths):
        y1, h1 = m(om.tensor(x[:n, b:b + 1]))
        np.testing.assert_array_equal(y_np[:n, b:b + 1], y1.detach().numpy())
        for s, s1 in zip(states, _states(h1, name)):
            np.testing.assert_array_equal(s[:, b:b + 1], s1.detach().numpy())
        assert not y_np[n:, b].any(), "padded outputs must be exactly zero"
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(g)
    for b, n in enumerate(lengths):
        assert not xo.grad.numpy()[n:, b].any(), "padded inputs must get zero gradient"


@pytest.mark.parametrize("cls,name", CELLS)
def test_lengths_match_torch_packed(cls, name, rng, assert_close):
    m = cls(4, 9, num_layers=2, bidirectional=True, batch_first=True, seed=2)
    t = _torch_twin(m, name)
    lengths = np.array([3, 6, 1, 4])
    x = rng.standard_normal((4, 6, 4)).astype(np.float32)
    xo = om.tensor(x, requires_grad=True)
    y, h = m(xo, lengths=lengths)
    xt = torch.from_numpy(x).requires_grad_()
    packed = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.from_numpy(lengths),
                                                     batch_first=True, enforce_sorted=False)
    yp, ht = t(packed)
    yt, _ = torch.nn.utils.rnn.pad_packed_sequence(yp, batch_first=True, total_length=6)
    assert_close(y.detach().numpy(), yt.detach().numpy(), 1e-5, "output")
    for s, st in zip(_states(h, name), _states(ht, name)):
        assert_close(s.detach().numpy(), st.detach().numpy(), 1e-5, "final state")
    g = rng.standard_normal(y.shape).astype(np.float32)
    hs = _states(h, name)
    loss = (y * om.tensor(g)).sum() + hs[0].sum()
    (yt * torch.from_numpy(g)).sum().add(_states(ht, name)[0].sum()).backward()
    loss.backward()
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad x")
    for (pname, p), tp in zip(m.named_parameters(), t.parameters()):
        assert_close(p.grad.numpy(), tp.grad.numpy(), 1e-4, f"grad {pname}")


def _joined(y, *states):
    return om.functional.cat([om.functional.reshape(t, (-1,)) for t in (y,) + states], 0)


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_finite_differences(reverse, check_grad, rng):
    h = 3
    xw, w, b = (rng.standard_normal(s).astype(np.float32) * 0.5
                for s in ((4, 2, 4 * h), (4 * h, h), (4 * h,)))
    h0, c0 = (rng.standard_normal((2, h)).astype(np.float32) for _ in range(2))
    lengths = np.array([4, 2])
    check_grad(lambda *a: _joined(*lstm_layer(*a, lengths=lengths, reverse=reverse)),
               xw, w, b, h0, c0, step=1e-2, tol=1e-2)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_finite_differences(reverse, check_grad, rng):
    h = 3
    xw, w, b = (rng.standard_normal(s).astype(np.float32) * 0.5
                for s in ((4, 2, 3 * h), (3 * h, h), (3 * h,)))
    h0 = rng.standard_normal((2, h)).astype(np.float32)
    lengths = np.array([3, 4])
    check_grad(lambda *a: _joined(*gru_layer(*a, lengths=lengths, reverse=reverse)),
               xw, w, b, h0, step=1e-2, tol=1e-2)


@pytest.mark.parametrize("h", [1, 15, 16, 17, 33])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_exact_bits_across_isa_and_threads(cell, h, check_exact, rng):
    g = 4 if cell == "lstm" else 3
    xw = rng.standard_normal((5, 3, g * h)).astype(np.float32)
    w = rng.standard_normal((g * h, h)).astype(np.float32) * 0.3
    b = rng.standard_normal(g * h).astype(np.float32)
    h0 = rng.standard_normal((3, h)).astype(np.float32)
    lengths = np.array([5, 1, 3])
    if cell == "lstm":
        c0 = rng.standard_normal((3, h)).astype(np.float32)
        check_exact(lambda *a: _joined(*lstm_layer(*a, lengths=lengths, reverse=True)),
                    xw, w, b, h0, c0)
    else:
        check_exact(lambda *a: _joined(*gru_layer(*a, lengths=lengths, reverse=True)),
                    xw, w, b, h0)


@pytest.mark.parametrize("cls,name", CELLS)
def test_hidden_wider_than_a_k_block_matches_torch(cls, name, rng, assert_close):
    """Hidden 300: the step products run over several K blocks of W_hh packed once per call
    (forward K = 300, backward K = 1200 or 900), so a wrong block offset would show."""
    m = cls(7, 300, seed=4)
    t = _torch_twin(m, name)
    x = rng.standard_normal((3, 2, 7)).astype(np.float32)
    xo, xt = om.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    y, yt = m(xo)[0], t(xt)[0]
    assert_close(y.detach().numpy(), yt.detach().numpy(), 1e-5, "output")
    r = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(r)
    yt.backward(torch.from_numpy(r))
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-4, "grad x")
    for (pname, p), tp in zip(m.named_parameters(), t.parameters()):
        assert_close(p.grad.numpy(), tp.grad.numpy(), 1e-4, f"grad {pname}")


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_exact_bits_wide_hidden(cell, check_exact, rng):
    h, g = 300, 4 if cell == "lstm" else 3
    xw = rng.standard_normal((3, 2, g * h)).astype(np.float32)
    w = rng.standard_normal((g * h, h)).astype(np.float32) * 0.05
    b = rng.standard_normal(g * h).astype(np.float32)
    h0 = rng.standard_normal((2, h)).astype(np.float32)
    if cell == "lstm":
        c0 = rng.standard_normal((2, h)).astype(np.float32)
        check_exact(lambda *a: _joined(*lstm_layer(*a)), xw, w, b, h0, c0)
    else:
        check_exact(lambda *a: _joined(*gru_layer(*a)), xw, w, b, h0)


def test_exact_bits_large_batch_threads(check_exact, rng):
    # Large enough that the row kernels split rows over threads; two directions run concurrently.
    m = nn.LSTM(8, 64, bidirectional=True, seed=5)
    check_exact(lambda x: m(x, lengths=np.arange(64) % 3 + 1)[0],
                rng.standard_normal((3, 64, 8)).astype(np.float32))


def test_special_values_propagate():
    m = nn.GRU(2, 3, seed=0)
    x = np.zeros((3, 2, 2), np.float32)
    x[1, 0, 0] = np.nan
    y, h = m(om.tensor(x))
    y = y.detach().numpy()
    assert np.isnan(y[1:, 0]).all() and not np.isnan(y[0, 0]).any()
    assert np.isfinite(y[:, 1]).all()


@pytest.mark.parametrize("cls,gates", [(nn.LSTM, 4), (nn.GRU, 3)])
def test_parameters_names_and_draw_order(cls, gates):
    m = cls(3, 5, num_layers=2, bidirectional=True, seed=11)
    names = [n for n, _ in m.named_parameters()]
    assert names[:8] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                         "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                         "bias_hh_l0_reverse"]
    assert m.weight_ih_l1.shape == (gates * 5, 10)
    g = om.Generator(11)
    bound = np.float32(1 / np.sqrt(5.0))
    for name, p in m.named_parameters():
        np.testing.assert_array_equal(p.detach().numpy(), g.uniform(-bound, bound, p.shape), name)


def test_no_bias():
    m = nn.LSTM(3, 4, bias=False)
    assert [n for n, _ in m.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    t = _torch_twin(m, "LSTM")
    x = np.ones((2, 1, 3), np.float32)
    np.testing.assert_allclose(m(om.tensor(x))[0].detach().numpy(),
                               t(torch.from_numpy(x))[0].detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("lengths,err", [([0, 2], ValueError), ([1, 9], ValueError),
                                         ([1, 2, 3], ValueError), ([1.0, 2.0], TypeError)])
def test_bad_lengths(lengths, err):
    m = nn.GRU(2, 3)
    with pytest.raises(err, match="lengths"):
        m(om.tensor(np.zeros((4, 2, 2), np.float32)), lengths=np.array(lengths))


def test_bad_shapes():
    m = nn.LSTM(2, 3, num_layers=2)
    with pytest.raises(ValueError, match="input_size"):
        m(om.tensor(np.zeros((4, 2, 5), np.float32)))
    with pytest.raises(ValueError, match="h0"):
        m(om.tensor(np.zeros((4, 2, 2), np.float32)),
          (om.tensor(np.zeros((1, 2, 3), np.float32)), om.tensor(np.zeros((2, 2, 3), np.float32))))
    with pytest.raises(ValueError, match="xw"):
        lstm_layer(np.zeros((2, 2, 5), np.float32), np.zeros((12, 3), np.float32), None,
                   np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32))


@pytest.mark.parametrize("cls,name", CELLS)
def test_empty_sequence_and_batch(cls, name, rng):
    m = cls(3, 4, 2, bidirectional=True, seed=0)
    init = [rng.standard_normal((4, 2, 4)).astype(np.float32)
            for _ in range(2 if name == "LSTM" else 1)]
    io = [om.tensor(a, requires_grad=True) for a in init]
    x = om.tensor(np.zeros((0, 2, 3), np.float32), requires_grad=True)
    y, h = m(x, tuple(io) if name == "LSTM" else io[0])
    assert y.shape == (0, 2, 8)
    states = _states(h, name)
    for s, a in zip(states, init):  # no step: the final state is the initial one
        np.testing.assert_array_equal(s.detach().numpy(), a)
    sum(s.sum() for s in states).backward()
    for a in io:
        np.testing.assert_array_equal(a.grad.numpy(), np.ones(a.shape, np.float32))
    y, h = m(om.tensor(np.zeros((3, 0, 3), np.float32)))
    assert y.shape == (3, 0, 8) and _states(h, name)[0].shape == (4, 0, 4)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_kernel_names_a_missing_array_before_running(cell):
    """The kernel wrapper refuses a direction that lacks an array the cell needs, naming it,
    in forward and in backward (a zero-filled output must stay untouched)."""
    from onemodel._kernels import _rnn

    t, b, h, g = 3, 2, 4, 4 if cell == "lstm" else 3
    lengths = np.full(b, t, np.int64)
    arrays = {"xw": np.ones((t, b, g * h), np.float32), "w_hh": np.ones((g * h, h), np.float32),
              "bias": np.ones(g * h, np.float32), "h0": np.zeros((b, h), np.float32),
              "gates": np.zeros((t, b, g * h), np.float32), "h_n": np.zeros((b, h), np.float32)}
    arrays.update({"c0": np.zeros((b, h), np.float32), "cs": np.zeros((t, b, h), np.float32),
                   "c_n": np.zeros((b, h), np.float32)} if cell == "lstm"
                  else {"hn_lin": np.zeros((t, b, h), np.float32)})
    with pytest.raises(ValueError, match=f"{cell}_forward: missing array 'y'"):
        _rnn.forward(cell, [arrays], lengths, 1)
    assert not arrays["h_n"].any() and not arrays["gates"].any()
    with pytest.raises(ValueError, match=f"{cell}_backward: missing array 'y'"):
        _rnn.backward(cell, [dict(arrays, reverse=True)], lengths, 1)


@pytest.mark.parametrize("cls,name", CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("given_state", [False, True])
def test_unbatched_input_matches_torch(cls, name, bidirectional, given_state, rng,
                                       assert_close):
    # batch_first=True must be ignored for a 2-D input, as in PyTorch.
    m = cls(3, 5, num_layers=2, bidirectional=bidirectional, batch_first=True, seed=7)
    t = _torch_twin(m, name)
    d = 2 if bidirectional else 1
    x = rng.standard_normal((6, 3)).astype(np.float32)
    init = [rng.standard_normal((2 * d, 5)).astype(np.float32)
            for _ in range(2 if name == "LSTM" else 1)] if given_state else []
    xo, xt = om.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_()
    io = [om.tensor(a, requires_grad=True) for a in init]
    it = [torch.from_numpy(a).requires_grad_() for a in init]
    state = (tuple(io) if name == "LSTM" else io[0]) if init else None
    tstate = (tuple(it) if name == "LSTM" else it[0]) if init else None
    y, h = m(xo, state)
    yt, ht = t(xt, tstate)
    assert y.shape == (6, 5 * d) and _states(h, name)[0].shape == (2 * d, 5)
    _outputs_then_backward([y] + _states(h, name), [yt] + _states(ht, name), rng, assert_close)
    assert_close(xo.grad.numpy(), xt.grad.numpy(), 1e-5, "grad x")
    for a, b in zip(io, it):
        assert_close(a.grad.numpy(), b.grad.numpy(), 1e-5, "grad h0")


def test_unbatched_state_must_be_2d():
    m = nn.GRU(2, 3)
    with pytest.raises(ValueError, match=r"h0 has shape \(1, 1, 3\).*unbatched"):
        m(om.tensor(np.zeros((4, 2), np.float32)), om.tensor(np.zeros((1, 1, 3), np.float32)))
    with pytest.raises(ValueError, match="unbatched"):
        m(om.tensor(np.zeros((4,), np.float32)))
