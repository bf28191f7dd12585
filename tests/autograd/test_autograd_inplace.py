"""In-place ops on tensors in the graph (onemodel/_inplace.py), against torch 2.13: values and
gradients of the same program written with in-place ops, the leaf and version errors, bits
equal to the out-of-place ops'."""
import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
C = (RNG.random((3, 4)) + 0.5).astype(np.float32)  # positive, away from 0


# Each program gets the library and two leaves x, w that require grad, and returns a tensor;
# the same source runs on onemodel and on torch.
PROGRAMS = {
    "iadd_loop": lambda L, x, w: _loop_loss(L, x, w),
    "add_alpha": lambda L, x, w: (x * 2).add_(w, alpha=0.5),
    "sub_alpha": lambda L, x, w: (x * 2).sub_(w, alpha=3),
    "mul_tensor": lambda L, x, w: (x + 1).mul_(w),
    "imul_scalar": lambda L, x, w: _apply(x + w, lambda y: y.__imul__(2.5)),
    "div_tensor": lambda L, x, w: (x * w).div_(w * w + 1),
    "itruediv": lambda L, x, w: _apply(x * w, lambda y: y.__itruediv__(255)),
    "isub": lambda L, x, w: _apply(x * 1, lambda y: y.__isub__(w)),
    "clamp_": lambda L, x, w: (x * w).clamp_(-0.3, 0.4),
    "clip_": lambda L, x, w: (x * w).clip_(min=-0.2),
    "clamp_min_": lambda L, x, w: (x + w).clamp_min_(0.1),
    "clamp_max_": lambda L, x, w: (x + w).clamp_max_(0.1),
    "masked_fill_": lambda L, x, w: (x * w).masked_fill_(x > 0, -1.5),
    "pow_": lambda L, x, w: (x * w).pow_(2),
    "pow_tensor": lambda L, x, w: (x * 0 + 1.5).pow_(w),
    "neg_": lambda L, x, w: (x * w).neg_(),
    "abs_": lambda L, x, w: (x - w).abs_(),
    "exp_": lambda L, x, w: (x * w).exp_(),
    "sqrt_": lambda L, x, w: (x * x + w * w).sqrt_(),
    "relu_": lambda L, x, w: (x + w).relu_(),
    "sigmoid_": lambda L, x, w: (x + w).sigmoid_(),
    "tanh_": lambda L, x, w: (x + w).tanh_(),
    "copy_": lambda L, x, w: (x * 2).copy_(w * 3),
    "copy_broadcast": lambda L, x, w: (x * 2).copy_(w[0] * 3),
    "fill_": lambda L, x, w: (x * w).fill_(2.0) * x,
    "zero_": lambda L, x, w: (x * w).zero_() + w,
    "setitem_column": lambda L, x, w: _set(x * 1, (slice(None), 0), w[:, 1] * 2),
    "setitem_row_broadcast": lambda L, x, w: _set(x * w, 1, w[0, 0]),
    "setitem_scalar": lambda L, x, w: _set(x * w, (0, 2), 7.0),
    "setitem_mask": lambda L, x, w: _set(x * 1, x > 0.5, w[x > 0.5]),
    "setitem_into_plain": lambda L, x, w: _set(L.zeros(3, 4), (slice(0, 2),), w[1:] * x[:2]),
    "iadd_into_plain": lambda L, x, w: _apply(L.zeros(3, 4), lambda z: z.__iadd__(w * x)),
    "mul_into_plain": lambda L, x, w: L.ones(3, 4).mul_(w),
    "chain": lambda L, x, w: (x * w).add_(1).mul_(x).div_(2).clamp_(-1, 1).relu_(),
}


def _apply(t, method):
    return method(t)


def _set(t, index, value):
    t[index] = value
    return t


def _loop_loss(L, x, w):
    loss = L.zeros(())
    for k in range(4):
        loss += (x * w * k).sum()
    return loss


def _run(lib, program):
    L = om if lib == "om" else torch
    x = L.tensor(A, requires_grad=True)
    w = L.tensor(B, requires_grad=True)
    out = program(L, x, w)
    weights = L.tensor(C[: out.shape[0]] if out.ndim else C[0, 0])
    (out * weights).sum().backward()
    arrays = [out.detach().numpy(), x.grad, w.grad]
    return [None if a is None else np.array(a.numpy() if hasattr(a, "numpy") else a)
            for a in arrays]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_torch(name):
    ours, theirs = _run("om", PROGRAMS[name]), _run("torch", PROGRAMS[name])
    for got, want in zip(ours, theirs):
        if want is None:  # torch gives no gradient: neither do we (or a zero one)
            assert got is None or not got.any()
            continue
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method, function", [
    ("add_", lambda y, o: y + o), ("sub_", lambda y, o: y - o), ("mul_", lambda y, o: y * o),
    ("div_", lambda y, o: y / o), ("pow_", lambda y, o: y ** o)])
@pytest.mark.parametrize("graph", [True, False])
def test_bits_are_the_out_of_place_ops(method, function, graph):
    x = om.tensor(C, requires_grad=graph)
    o = om.tensor(B, requires_grad=graph)
    with om.enable_grad():
        expected = function(x * 3, o)
        expected_grads = om.autograd.grad(expected.sum(), [x, o]) if graph else None
        y = x * 3
        getattr(y, method)(o)
        assert y.detach().numpy().tobytes() == expected.detach().numpy().tobytes()
        if graph:
            got = om.autograd.grad(y.sum(), [x, o])
            for g, e in zip(got, expected_grads):
                assert g.numpy().tobytes() == e.numpy().tobytes()


def test_result_is_self_with_its_memory_and_a_grad_fn():
    x = om.tensor(A, requires_grad=True)
    y = x * 2
    memory, alias = y._data, y.detach()
    assert y.add_(1) is y and y.exp_() is y
    assert y._data is memory and y.grad_fn == "exp" and not y.is_leaf and y.requires_grad
    np.testing.assert_array_equal(alias.numpy(), y.detach().numpy())  # the alias sees it


def test_leaf_requiring_grad_is_refused_as_torch_and_unchanged():
    for lib in (om, torch):
        w = lib.tensor(B, requires_grad=True)
        for op in (lambda: w.add_(1), lambda: w.mul_(w), lambda: w.relu_(),
                   lambda: w.clamp_(0, 1), lambda: w.__setitem__(0, 1.0),
                   lambda: w.masked_fill_(w > 0, 0.0), lambda: w.zero_(),
                   lambda: w.copy_(lib.tensor(A))):
            with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is "
                                                   "being used in an in-place operation"):
                op()
        np.testing.assert_array_equal(w.detach().numpy(), B)
        with lib.no_grad():
            w.add_(1).mul_(2)
        np.testing.assert_array_equal(w.detach().numpy(), (B + 1) * 2)
        assert w.is_leaf and w.grad_fn is None


@pytest.mark.parametrize("modify", [
    lambda y: y.add_(1), lambda y: y.mul_(2), lambda y: y.__setitem__(0, 0.0),
    lambda y: y.zero_(), lambda y: y.clamp_(0, 1), lambda y: y.detach().add_(1)])
def test_node_that_saved_a_modified_tensor_refuses_as_torch(modify):
    for lib in (om, torch):
        x = lib.tensor(A, requires_grad=True)
        y = x * 2
        z = (y * x).sum()  # mul saved y
        modify(y)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()


def test_node_that_did_not_save_the_tensor_still_runs_as_torch():
    grads = []
    for lib in (om, torch):
        x = lib.tensor(A, requires_grad=True)
        y = x * 2
        z = (y + 1).sum()  # add saves nothing: y may change
        y.mul_(3)
        (z + y.sum()).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_leaf_not_requiring_grad_joins_the_graph():
    x = om.tensor(A, requires_grad=True)
    z = om.zeros(3, 4)
    assert z.is_leaf and not z.requires_grad
    z += x * 2
    assert z.requires_grad and not z.is_leaf
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2, np.float32))


def test_plain_tensors_are_written_in_place_and_version_bumped():
    t = om.tensor(A)
    memory, version = t._data, t._version
    t.add_(1).mul_(2).clamp_(-1, 1).relu_()
    assert t._data is memory and t._version == version + 4
    np.testing.assert_array_equal(t.numpy(), np.maximum(np.clip((A + 1) * 2, -1, 1), 0))


def test_errors_before_anything_changes():
    x = om.tensor(A, requires_grad=True)
    y = x * 2
    before, node = y.detach().numpy().copy(), y._node
    with pytest.raises(ValueError, match=r"add_: operand of shape \(5,\) does not broadcast"):
        y.add_(om.ones(5, requires_grad=True))
    with pytest.raises(ValueError, match=r"mul_: operand of shape \(2, 3, 4\) does not"):
        y.mul_(om.ones(2, 3, 4))
    with pytest.raises(ValueError, match="copy_: source of shape"):
        y.copy_(om.ones(4, 3))
    with pytest.raises(RuntimeError, match="fill_: only supports 0-dimension value"):
        y.fill_(om.ones(2))
    counts = om.zeros(3, 4, dtype=om.int64)
    with pytest.raises(TypeError, match="add_: cannot write a float32 result into a int64"):
        counts.add_(x)
    np.testing.assert_array_equal(y.detach().numpy(), before)
    assert y._node is node and not counts.requires_grad


def test_fill_with_a_tensor_value_is_differentiated_as_torch():
    grads = []
    for lib in (om, torch):
        v = lib.tensor(1.5, requires_grad=True)
        x = lib.tensor(A, requires_grad=True)
        y = (x * 2).fill_(v)
        (y * lib.tensor(C)).sum().backward()
        grads.append((v.grad.numpy(), x.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-6)
    np.testing.assert_array_equal(grads[0][1], grads[1][1])


def test_inplace_under_no_grad_records_nothing_as_torch():
    grads = []
    for lib in (om, torch):
        x = lib.tensor(A, requires_grad=True)
        y = x * 2
        with lib.no_grad():
            y.add_(1)  # allowed on a tensor in the graph, and recorded nowhere
        assert "Mul" in str(y.grad_fn) or y.grad_fn == "mul"
        (y * x).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_indexing_returns_a_copy_not_a_view():
    # onemodel has no views (onemodel/_inplace.py): a write into x[0] leaves x as it was.
    x = om.tensor(A)
    row = x[0]
    row.add_(1)
    np.testing.assert_array_equal(x.numpy(), A)
    assert not np.shares_memory(row.numpy(), x.numpy())


@pytest.mark.parametrize("view", [lambda y: y[0], lambda y: y[:, 1:], lambda y: y.view(12),
                                  lambda y: y.T, lambda y: y.unsqueeze(0), lambda y: y[[0, 2]]])
def test_write_through_a_view_of_a_graph_tensor_in_use_is_refused(view):
    # In torch the write would reach y; here it could not, so it is refused, y unchanged.
    x = om.tensor(A, requires_grad=True)
    y = x * 2
    v = view(y)
    for write in (lambda: v.add_(1), lambda: v.relu_(), lambda: v.__setitem__(0, 1.0)):
        with pytest.raises(RuntimeError, match="in torch it would be a view sharing that "
                                               "tensor's memory"):
            write()
    np.testing.assert_array_equal(y.detach().numpy(), 2 * A)
    with pytest.raises(RuntimeError, match="made by index from a leaf Variable that requires"):
        x[0].mul_(2)


def test_write_through_a_view_of_a_dropped_tensor_is_differentiated_as_torch():
    # Nothing holds the tensor the view came from, so nothing could tell the copy apart.
    grads = []
    for lib in (om, torch):
        x = lib.tensor(A, requires_grad=True)
        v = (x * 2).view(4, 3)
        v.mul_(3).add_(1)
        h = (x + 1)[1:]
        h[0] = x[0, 0] * 5
        (v.sum() + h.sum()).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
