"""optimizer.step(closure) on every optimizer and zero_grad(set_to_none) on optimizers and modules,
as torch's: the closure runs first under enable_grad (even inside no_grad) and its loss is
returned; without one step returns None."""
from __future__ import annotations

import numpy as np
import pytest

import onemodel as om
from onemodel import nn, optim

MAKERS = {
    "SGD": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    "Adam": lambda ps: optim.Adam(ps),
    "AdamW": lambda ps: optim.AdamW(ps),
    "RMSprop": lambda ps: optim.RMSprop(ps),
    "Adagrad": lambda ps: optim.Adagrad(ps),
    "Adadelta": lambda ps: optim.Adadelta(ps),
    "Adamax": lambda ps: optim.Adamax(ps),
    "NAdam": lambda ps: optim.NAdam(ps),
    "RAdam": lambda ps: optim.RAdam(ps),
}


def batch():
    rng = np.random.default_rng(0)
    return (om.tensor(rng.standard_normal((8, 4)).astype(np.float32)),
            om.tensor(rng.standard_normal((8, 2)).astype(np.float32)))


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_step_with_closure_equals_backward_then_step(name):
    x, y = batch()
    plain, closed = nn.Linear(4, 2, seed=1), nn.Linear(4, 2, seed=1)
    opt_plain, opt_closed = MAKERS[name](plain.parameters()), MAKERS[name](closed.parameters())
    for _ in range(3):
        opt_plain.zero_grad()
        expected = ((plain(x) - y) ** 2).mean()
        expected.backward()
        assert opt_plain.step() is None

        def closure():
            opt_closed.zero_grad()
            loss = ((closed(x) - y) ** 2).mean()
            loss.backward()
            return loss

        with om.no_grad():  # the closure still records its graph, as under torch
            loss = opt_closed.step(closure)
        assert isinstance(loss, om.Tensor) and loss.item() == expected.item()
    for a, b in zip(plain.parameters(), closed.parameters()):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


def test_sr4_step_takes_a_closure_and_a_target_step():
    w = nn.TernaryLinear(8, 4, bias=False)
    opt = optim.SR4(nn.ternary_weights(w), seed=1)
    x = om.tensor(np.ones((2, 8), np.float32))
    calls = []

    def closure():
        calls.append(1)
        loss = w(x).sum()
        loss.backward()
        return loss

    loss = opt.step(closure, target_step=1e-2)
    assert calls == [1] and isinstance(loss, om.Tensor) and opt.step_count == 1
    with pytest.raises(ValueError, match="target_step"):
        opt.step(closure, target_step=float("inf"))
    assert calls == [1] and opt.step_count == 1  # refused before the closure ran


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_closure_that_is_not_callable_is_refused(name):
    p = om.tensor(np.ones(2, np.float32), requires_grad=True)
    opt = MAKERS[name]([p])
    p.grad = om.tensor(np.ones(2, np.float32))
    with pytest.raises(TypeError, match=f"{name}.step: closure must be callable"):
        opt.step(0.5)
    assert opt.step_count == 0 and (p.detach().numpy() == 1.0).all()


def test_zero_grad_of_modules_and_optimizers_as_torch():
    torch = pytest.importorskip("torch")
    x, y = batch()
    ours = nn.Linear(4, 2, seed=0)
    theirs = torch.nn.Linear(4, 2)
    ((ours(x) - y) ** 2).mean().backward()
    theirs(torch.tensor(x.numpy())).sum().backward()
    grads = [p.grad for p in ours.parameters()]
    ours.zero_grad(set_to_none=False)
    theirs.zero_grad(set_to_none=False)
    for p, g, t in zip(ours.parameters(), grads, theirs.parameters()):
        assert p.grad is g and (p.grad.numpy() == 0).all()  # zeroed in place, as torch's
        assert (t.grad.numpy() == 0).all()
    ours.zero_grad()
    theirs.zero_grad()
    assert all(p.grad is None for p in ours.parameters())
    assert all(t.grad is None for t in theirs.parameters())
    opt = optim.RMSprop(ours.parameters())
    ((ours(x) - y) ** 2).mean().backward()
    opt.zero_grad(set_to_none=False)
    assert all((p.grad.numpy() == 0).all() for p in ours.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in ours.parameters())
