"""autograd.grad / autograd.backward (onemodel/_grad.py), tensor hooks and retain_grad
(onemodel/_hooks.py), inference_mode and detach_, against torch 2.13."""
import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
A = RNG.standard_normal((2, 3)).astype(np.float32)
B = RNG.standard_normal((2, 3)).astype(np.float32)
U = RNG.standard_normal((3,)).astype(np.float32)


def _leaves(L):
    return [L.tensor(a, requires_grad=True) for a in (A, B, U)]


def _graph(L, x, w, u):
    h = x * w + u
    return (h.tanh() * w).sum(), (h * h).sum(dim=0), h


def _np(t):
    return None if t is None else np.array(t.detach().numpy())


@pytest.mark.parametrize("case", ["one", "two_outputs", "grad_outputs", "non_leaf_input"])
def test_grad_matches_torch_and_touches_no_grad(case):
    results = []
    for L in (om, torch):
        x, w, u = _leaves(L)
        y, v, h = _graph(L, x, w, u)
        if case == "one":
            got = L.autograd.grad(y, [x, w, u])
        elif case == "two_outputs":
            got = L.autograd.grad([y, v.sum()], (w, x))
        elif case == "grad_outputs":
            got = L.autograd.grad([y, v], [u, x],
                                  grad_outputs=[L.tensor(2.0), L.tensor(np.float32([1, -2, 3]))])
        else:
            got = L.autograd.grad(y, [h, x])
        assert x.grad is None and w.grad is None and u.grad is None
        results.append([_np(g) for g in got])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_grad_has_the_bits_backward_gives():
    x, w, u = _leaves(om)
    y = _graph(om, x, w, u)[0]
    got = om.autograd.grad(y, [x, w, u], retain_graph=True)
    y.backward()
    for g, t in zip(got, (x, w, u)):
        assert g.numpy().tobytes() == t.grad.numpy().tobytes()


def test_allow_unused_and_materialize_grads_as_torch():
    for L in (om, torch):
        x, w, u = _leaves(L)
        y = (x * 3).sum()
        with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to "
                                               "not have been used in the graph"):
            L.autograd.grad(y, [x, w], retain_graph=True)
        gx, gw = L.autograd.grad(y, [x, w], allow_unused=True, retain_graph=True)
        assert gw is None
        np.testing.assert_array_equal(_np(gx), np.full((2, 3), 3, np.float32))
        _, gw = L.autograd.grad(y, [x, w], materialize_grads=True)
        np.testing.assert_array_equal(_np(gw), np.zeros((2, 3), np.float32))


def test_grad_errors_as_torch():
    for L in (om, torch):
        x, w, _ = _leaves(L)
        y = (x * w).sum()
        with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
            L.autograd.grad(L.ones(2).sum(), [x])
        with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not "
                                               "require grad"):
            L.autograd.grad(y, [L.ones(2)])
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
            L.autograd.grad(x * w, [x])
        L.autograd.grad(y, [x])  # frees the graph (retain_graph defaults to create_graph)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            L.autograd.grad(y, [x])


def test_create_graph_is_refused_clearly():
    x, w, _ = _leaves(om)
    with pytest.raises(NotImplementedError, match="grad: create_graph=True"):
        om.autograd.grad((x * w).sum(), [x], create_graph=True)


def test_autograd_backward_of_several_outputs_as_torch():
    results = []
    for L in (om, torch):
        x, w, u = _leaves(L)
        y, v, _ = _graph(L, x, w, u)
        L.autograd.backward([y, v], [None, L.tensor(np.float32([0.5, 1, 2]))])
        results.append([_np(t.grad) for t in (x, w, u)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_backward_with_inputs_fills_only_those():
    x, w, u = _leaves(om)
    y = _graph(om, x, w, u)[0]
    expected = om.autograd.grad(y, [w], retain_graph=True)[0]
    om.autograd.backward(y, inputs=[w])
    assert x.grad is None and u.grad is None
    assert w.grad.numpy().tobytes() == expected.numpy().tobytes()


def test_hooks_order_and_replacement_as_torch():
    logs = []
    for L in (om, torch):
        log = []
        x, w, u = _leaves(L)
        h = x * w
        h.register_hook(lambda g: log.append(("h1", _np(g).sum())))
        h.register_hook(lambda g: g * 2)  # replaces h's gradient for what follows
        h.register_hook(lambda g: log.append(("h3", _np(g).sum())))
        x.register_hook(lambda g: log.append(("x", _np(g).sum())))
        removed = w.register_hook(lambda g: log.append(("removed", 0)))
        removed.remove()
        w.register_hook(lambda g: g + 1)  # a leaf's hook: changes what reaches .grad
        (h.sigmoid() + h).sum().backward()
        log.append(("xgrad", _np(x.grad).sum()))
        log.append(("wgrad", _np(w.grad).sum()))
        logs.append(log)
    assert [k for k, _ in logs[0]] == [k for k, _ in logs[1]]
    np.testing.assert_allclose([v for _, v in logs[0]], [v for _, v in logs[1]], rtol=1e-5)


def test_hook_on_tensor_without_grad_refused_as_torch():
    for L in (om, torch):
        with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that "
                                               "doesn't require gradient"):
            L.ones(2).register_hook(lambda g: g)


def test_retain_grad_as_torch():
    results = []
    for L in (om, torch):
        x, w, u = _leaves(L)
        h = x * w
        h.retain_grad()
        k = h + u
        assert h.retains_grad and not k.retains_grad
        y = (k * k).sum()
        y.backward(retain_graph=True)
        first = _np(h.grad)
        y.backward()  # a second pass adds, as into a leaf's .grad
        results.append((first, _np(h.grad), k.grad))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-6)
    assert results[0][2] is None


def test_inference_mode_as_context_and_decorator():
    x = om.tensor(A, requires_grad=True)
    with om.inference_mode():
        assert om.is_inference_mode_enabled() and not om.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert om.is_grad_enabled() and not om.is_inference_mode_enabled()

    @om.inference_mode()
    def called(t):
        return t * 2

    @om.inference_mode
    def bare(t):
        return t * 2

    assert not called(x).requires_grad and not bare(x).requires_grad
    with om.inference_mode(False):
        assert (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_detach_and_requires_grad_in_place_as_torch():
    for L in (om, torch):
        x = L.tensor(A, requires_grad=True)
        y = x * 2
        assert y.detach_() is y
        assert y.is_leaf and not y.requires_grad and y.grad_fn is None
        y.requires_grad_()
        (y * y).sum().backward()
        np.testing.assert_array_equal(_np(y.grad), 4 * A)
        assert x.grad is None


def test_tensor_backward_takes_torchs_arguments():
    results = []
    for L in (om, torch):
        x, w, u = _leaves(L)
        y, v, _ = _graph(L, x, w, u)
        v.backward(gradient=L.tensor(np.float32([1, 2, 3])), retain_graph=True, inputs=[x, u])
        assert w.grad is None
        results.append([_np(x.grad), _np(u.grad)])
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        _graph(om, *_leaves(om))[0].backward(create_graph=True)


def test_leaf_hook_on_a_weight_with_a_grad_already_as_torch():
    # A product's weight gradient may be added straight into .grad (autograd.AddableGrad):
    # a hook on the weight must still see, and may replace, the gradient first.
    rng = np.random.default_rng(5)
    weight, data = rng.standard_normal((4, 3)).astype(np.float32), \
        rng.standard_normal((6, 3)).astype(np.float32)
    results = []
    for L, linear in ((om, om.functional.linear), (torch, torch.nn.functional.linear)):
        w = L.tensor(weight, requires_grad=True)
        seen = []
        w.register_hook(lambda g: seen.append(_np(g)) or g * 0.5)
        for _ in range(2):
            linear(L.tensor(data), w).tanh().sum().backward()
        results.append((_np(w.grad), seen))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    assert len(results[0][1]) == len(results[1][1]) == 2
    for ours, theirs in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_retain_grad_follows_an_in_place_op_as_torch():
    results = []
    for L in (om, torch):
        x = L.tensor(A, requires_grad=True)
        h = x * 2
        h.retain_grad()
        h.mul_(3)
        (h * h).sum().backward()
        results.append(_np(h.grad))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)
