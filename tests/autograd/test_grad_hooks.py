"""Post-accumulate-grad hooks (autograd.py): when they run, what they see, against PyTorch."""
import numpy as np
import pytest

import onemodel as om
import onemodel.functional as F

torch = pytest.importorskip("torch")


def _mlp(lib, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) * 0.3
              for s in ((6, 5), (6,), (4, 6), (4,))]
    if lib == "om":
        return [om.tensor(a, requires_grad=True) for a in arrays]
    return [torch.tensor(a, requires_grad=True) for a in arrays]


def _loss(lib, params, x):
    w1, b1, w2, b2 = params
    if lib == "om":
        h = F.tanh(F.linear(om.tensor(x), w1, b1))
        return (F.linear(h, w2, b2) * F.linear(h, w1[:4, :4] @ w2[:, :4].T @ w2, b2)).sum()
    h = torch.tanh(torch.nn.functional.linear(torch.tensor(x), w1, b1))
    return (torch.nn.functional.linear(h, w2, b2)
            * torch.nn.functional.linear(h, w1[:4, :4] @ w2[:, :4].T @ w2, b2)).sum()


def test_each_hook_sees_its_complete_gradient_once_as_pytorch():
    # w1 and w2 are used in several places (their gradient sums several contributions): each
    # hook runs once, with .grad complete, and the gradients are PyTorch's.
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    seen = {}
    for lib in ("om", "torch"):
        params = _mlp(lib)
        calls = seen[lib] = {}
        for k, p in enumerate(params):
            p.register_post_accumulate_grad_hook(
                lambda t, k=k, calls=calls: calls.setdefault(k, []).append(
                    np.array(t.grad.detach().numpy() if lib == "torch" else t.grad.numpy())))
        _loss(lib, params, x).backward()
    assert sorted(seen["om"]) == sorted(seen["torch"]) == [0, 1, 2, 3]
    for k in range(4):
        assert len(seen["om"][k]) == len(seen["torch"][k]) == 1
        np.testing.assert_allclose(seen["om"][k][0], seen["torch"][k][0], rtol=1e-5, atol=1e-6)


def test_hooks_run_during_backward_and_change_no_bit():
    # The last layer's gradient is complete before the first layer's: its hook runs while the
    # first layer has no gradient yet. With or without hooks, the same bits.
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    plain = _mlp("om")
    _loss("om", plain, x).backward()
    params = _mlp("om")
    first_seen = []
    params[3].register_post_accumulate_grad_hook(
        lambda t: first_seen.append(params[1].grad is None))
    handles = [p.register_post_accumulate_grad_hook(lambda t: None) for p in params]
    _loss("om", params, x).backward()
    assert first_seen == [True]
    for p, q in zip(params, plain):
        assert p.grad.numpy().tobytes() == q.grad.numpy().tobytes()
    for h in handles:
        h.remove()
    params[3].grad = None
    _loss("om", params, x).backward()  # accumulates into the others' .grad
    assert len(first_seen) == 2
    assert params[3].grad.numpy().tobytes() == plain[3].grad.numpy().tobytes()
    assert params[0].grad.numpy().tobytes() == (plain[0].grad.numpy() * 2).tobytes()


def test_a_hook_may_take_the_gradient_and_no_two_gradients_share_memory():
    a = om.tensor(np.ones(3, np.float32), requires_grad=True)
    b = om.tensor(np.ones(3, np.float32), requires_grad=True)
    taken = []

    def take(t):
        taken.append(t.grad)
        t.grad = None

    a.register_post_accumulate_grad_hook(take)
    b.register_post_accumulate_grad_hook(lambda t: None)
    out = a + b  # add hands the same array to both sides
    seed = np.full(3, 2.0, np.float32)
    out.backward(seed)
    assert a.grad is None and taken[0].numpy().tolist() == [2.0] * 3
    assert not np.shares_memory(taken[0].numpy(), b.grad.numpy())
    assert not np.shares_memory(b.grad.numpy(), seed)


def test_hooks_go_on_leaves_that_require_grad():
    a = om.tensor(np.ones(2, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        (a * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="leaf"):
        om.tensor(np.ones(2, np.float32)).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="callable"):
        a.register_post_accumulate_grad_hook(3)


def test_a_trainer_does_not_live_on_in_its_model_hooks():
    import gc
    import weakref

    from onemodel import nn
    from onemodel.data import DataLoader
    from onemodel.optim import SGD
    from onemodel.train import SingleProcess, Trainer
    x = np.random.default_rng(3).standard_normal((8, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = nn.Linear(3, 2, generator=om.Generator(1))
    t = Trainer(model, F.cross_entropy, SGD(model.parameters(), lr=0.1),
                DataLoader((x, y), 4, shuffle=True), strategy=SingleProcess(2), callbacks=[])
    t.train_step()
    gone = weakref.ref(t)
    del t
    gc.collect()
    assert gone() is None
    loss = F.cross_entropy(model(om.tensor(x)), om.tensor(y))
    loss.backward()  # the dead trainer's hooks do nothing but leave: the gradient stays
    assert model.weight.grad is not None
    from onemodel import autograd
    assert autograd._post_hooks[id(model.weight)][1] == []
