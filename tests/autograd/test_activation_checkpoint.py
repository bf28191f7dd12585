"""onemodel.utils.checkpoint: the gradients of a checkpointed run have the bits of the plain
run (dropout inside included), randomness is left where the plain run leaves it, and the peak
memory of a deep MLP's training step drops."""
import tracemalloc
import warnings

import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F
from onemodel.utils.checkpoint import checkpoint, checkpoint_sequential

torch = pytest.importorskip("torch")


def _mlp(depth, width, p=0.1, seed=0):
    om.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [om.nn.Linear(width, width), om.nn.ReLU(), om.nn.Dropout(p)]
    return om.nn.Sequential(*layers)


def _state(model, x):
    return ([p.grad.numpy().tobytes() for p in model.parameters()],
            None if x.grad is None else x.grad.numpy().tobytes(),
            [int(m.draws) for m in model.modules() if isinstance(m, om.nn.Dropout)],
            om.get_rng_state())


def _step(model, x, forward):
    out = forward(model, x)
    (out * out).mean().backward()
    return _state(model, x)


def _fresh(depth=6, width=16, batch=5):
    model = _mlp(depth, width)
    x = om.randn(batch, width, requires_grad=True)
    om.manual_seed(11)
    return model, x


def _plain(model, x):
    return model(x)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_same_bits_as_plain(use_reentrant):
    plain = _step(*_fresh(), _plain)
    for segments in (1, 2, 3, 6):
        got = _step(*_fresh(), lambda m, x: checkpoint_sequential(
            m, segments, x, use_reentrant=use_reentrant))
        assert got == plain
    # twice in a row: the dropout counters moved on, and both runs drew the same masks
    model, x = _fresh()
    twice = [_step(model, x, _plain) for _ in range(2)]
    model, x = _fresh()
    checked = [_step(model, x, lambda m, t: checkpoint_sequential(
        m, 3, t, use_reentrant=use_reentrant)) for _ in range(2)]
    assert checked == twice


def test_functional_dropout_replays_the_default_generator():
    def block(t, w):
        return F.dropout(F.linear(t, w).tanh(), 0.3) * 2  # seed from the default generator

    def run(checkpointed):
        om.manual_seed(0)
        w = om.randn(8, 8, requires_grad=True)
        x = om.randn(4, 8, requires_grad=True)
        om.manual_seed(5)
        h = checkpoint(block, x, w, use_reentrant=False) if checkpointed else block(x, w)
        (block(h, w) ** 2).sum().backward()
        return w.grad.numpy().tobytes(), x.grad.numpy().tobytes(), om.get_rng_state()

    assert run(True) == run(False)


def test_tuple_outputs_kwargs_and_non_tensor_arguments():
    def block(a, b, scale, *, shift):
        return (a * b + shift) * scale, (a - b).relu()

    def run(checkpointed):
        a = om.tensor(np.linspace(-1, 1, 6, dtype=np.float32), requires_grad=True)
        b = om.tensor(np.linspace(2, -2, 6, dtype=np.float32), requires_grad=True)
        if checkpointed:
            p, q = checkpoint(block, a, b, 1.5, shift=0.25, use_reentrant=False)
        else:
            p, q = block(a, b, 1.5, shift=0.25)
        (p * p + q).sum().backward()
        return a.grad.numpy().tobytes(), b.grad.numpy().tobytes()

    assert run(True) == run(False)
    with pytest.raises(ValueError, match="only supported with use_reentrant=False"):
        checkpoint(block, om.ones(2), om.ones(2), 1.0, shift=0.0, use_reentrant=True)


def test_use_reentrant_warnings_and_no_grad_inputs_as_torch():
    for lib, ck in ((om, checkpoint), (torch, torch.utils.checkpoint.checkpoint)):
        layer = lib.nn.Linear(3, 2)
        x = lib.ones(4, 3)
        with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "None of the inputs")
                ck(layer, x)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            out = ck(layer, x, use_reentrant=True)
        assert not out.requires_grad  # reentrant: nothing to differentiate, as torch's
        ck(layer, x, use_reentrant=False).sum().backward()
        np.testing.assert_array_equal(layer.bias.grad.numpy(), [4.0, 4.0])


def test_checkpoint_needs_a_callable():
    with pytest.raises(TypeError, match="checkpoint: function must be callable"):
        checkpoint(3, om.ones(2), use_reentrant=False)


def _peak(forward):
    model = _mlp(16, 128)
    x = om.randn(1024, 128)
    tracemalloc.start()
    out = forward(model, x)
    (out * out).mean().backward()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_checkpointing_lowers_the_peak_memory_of_a_deep_mlp():
    plain = _peak(_plain)
    checked = _peak(lambda m, x: checkpoint_sequential(m, 4, x, use_reentrant=False))
    assert checked < 0.6 * plain, (checked, plain)


def test_checkpoint_refuses_autograd_grad_as_torch_reentrant():
    layer = om.nn.Linear(3, 2)
    x = om.ones(4, 3, requires_grad=True)
    out = checkpoint(layer, x, use_reentrant=False).sum()
    with pytest.raises(RuntimeError, match="checkpoint: not compatible with autograd.grad"):
        om.autograd.grad(out, [x])
    assert layer.weight.grad is None
