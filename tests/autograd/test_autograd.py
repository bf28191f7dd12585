"""The backward pass: accumulation, no_grad, retain_graph, a fixed order of gradient sums,
protection of saved tensors, explicit upstream gradients, detach, deep graphs.

The ops here are written in the test on `record` (the op pattern of onemodel.functional), so
each check sees exactly the gradients it states.
"""
import gc
import sys

import numpy as np
import pytest

import onemodel.functional as F
from onemodel import autograd
from onemodel.functional import _core
from onemodel.tensor import Tensor, tensor, zeros


def scale(x: Tensor, c: float) -> Tensor:
    """c·x."""
    c32 = np.float32(c)
    return _core.record("scale", x._data * c32, (x,), lambda g: (g * c32,))


def add(a: Tensor, b: Tensor) -> Tensor:
    """a + b, handing the same gradient array to both inputs."""
    return _core.record("add", a._data + b._data, (a, b), lambda g: (g, g))


def mul(a: Tensor, b: Tensor) -> Tensor:
    """a·b, saving both inputs."""
    return _core.record("mul", a._data * b._data, (a, b),
                        lambda g: (g * b._data, g * a._data), saved=(a, b))


def total(x: Tensor) -> Tensor:
    """Sum of all elements, rank 0."""
    shape = x.shape
    return _core.record("total", np.array(np.sum(x._data, dtype=np.float32)), (x,),
                        lambda g: (np.full(shape, g, np.float32),))


def param(values) -> Tensor:
    return tensor(np.asarray(values, np.float32), requires_grad=True)


def test_grad_accumulates_over_two_backward_calls():
    w = param([1.0, 2.0, 3.0])
    total(scale(w, 2.0)).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0, 2.0])
    first, memory = w.grad, w.grad.numpy()
    total(scale(w, 3.0)).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [5.0, 5.0, 5.0])
    assert w.grad.dtype == np.float32 and not w.grad.requires_grad
    # In place, as torch's AccumulateGrad: the same tensor and memory, its version bumped.
    assert w.grad is first and np.shares_memory(w.grad.numpy(), memory)
    assert first._version == 1


def test_accumulation_into_a_read_only_assigned_grad_is_out_of_place():
    w = param([1.0, 2.0])
    frozen = np.zeros(2, np.float32)
    frozen.setflags(write=False)
    w.grad = Tensor._wrap(frozen)   # memory the accumulation must not write
    total(scale(w, 2.0)).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])
    assert not frozen.any()


def test_no_grad_records_nothing_and_restores_state():
    w = param([1.0, 2.0])
    with autograd.no_grad():
        y = scale(w, 2.0)
        assert not autograd.is_grad_enabled()
        with autograd.enable_grad():
            z = scale(w, 2.0)
    assert autograd.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    assert z.requires_grad and z.grad_fn == "scale"
    with pytest.raises(RuntimeError, match="does not require grad"):
        total(y).backward()
    with pytest.raises(ZeroDivisionError):
        with autograd.no_grad():
            1 / 0
    assert autograd.is_grad_enabled()


def test_ops_on_tensors_without_grad_record_nothing():
    y = scale(tensor([1.0, 2.0]), 2.0)
    assert not y.requires_grad and y._node is None


def test_second_backward_needs_retain_graph():
    w = param([1.0, -1.0])
    loss = total(mul(w, w))
    loss.backward()
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        loss.backward()


def test_retain_graph_allows_a_second_backward_that_doubles_the_grad():
    w = param([1.5, -1.0])
    loss = total(mul(w, w))
    loss.backward(retain_graph=True)
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, -2.0])
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [6.0, -4.0])


def _diamond() -> np.ndarray:
    """One leaf reaching the loss through three paths whose gradients are 1, 1e8 and -1e8:
    in float32 the sum is 1 if the 1e8 terms meet first and 0 otherwise."""
    x = param([1.0])
    a = scale(x, 1.0)
    b = scale(x, 1e8)
    c = scale(x, -1e8)
    total(add(add(a, b), c)).backward()
    return x.grad.numpy()


def test_backward_order_is_fixed_and_stated():
    # Nodes run newest first, so the contributions reach x in the order c, b, a:
    # (-1e8 + 1e8) + 1 = 1. The order a, b, c would give (1 + 1e8) - 1e8 = 0.
    first = _diamond()
    np.testing.assert_array_equal(first, [1.0])
    for _ in range(20):
        assert _diamond().tobytes() == first.tobytes()


def test_diamond_through_real_ops_is_reproducible():
    rng = np.random.default_rng(0)
    x0, w0 = rng.standard_normal((8, 16), np.float32), rng.standard_normal((16, 16), np.float32)

    def run() -> bytes:
        x = tensor(x0, requires_grad=True)
        w = tensor(w0, requires_grad=True)
        h = F.matmul(x, w)
        y = F.cat([F.matmul(h, w), F.transpose(F.transpose(h, 0, 1), 0, 1), h[::2]], 0)
        y.backward(np.ones(y.shape, np.float32))
        return x.grad.numpy().tobytes() + w.grad.numpy().tobytes()

    reference = run()
    assert all(run() == reference for _ in range(5))


def test_inplace_write_to_saved_tensor_raises_on_backward():
    w = param([1.0, 2.0])
    x = tensor([3.0, 4.0])
    loss = total(mul(x, w))
    x.mul_(2.0)
    with pytest.raises(RuntimeError, match=r"mul: a tensor of shape \(2,\) saved for the "
                                           r"backward pass was modified by an in-place"):
        loss.backward()


def test_inplace_write_through_detached_alias_raises_on_backward():
    w = param([1.0, 2.0])
    loss = total(mul(w, w))
    w.detach().add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()


def test_parameter_update_under_no_grad_then_new_graph_works():
    w = param([1.0, 2.0])
    total(mul(w, w)).backward()
    with autograd.no_grad():
        w -= 0.5 * w.grad.numpy()
    np.testing.assert_array_equal(w.detach().numpy(), [0.0, 0.0])
    w.grad = None
    total(mul(w, w)).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])


def test_inplace_on_leaf_requiring_grad_raises():
    w = param([1.0, 2.0])
    for op in (lambda: w.add_(1.0), lambda: w.mul_(2.0), lambda: w.zero_(),
               lambda: w.__setitem__(0, 5.0), lambda: w.copy_(tensor([0.0, 0.0]))):
        with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
            op()
    np.testing.assert_array_equal(w.detach().numpy(), [1.0, 2.0])
    with autograd.no_grad():
        w.add_(1.0)
    np.testing.assert_array_equal(w.detach().numpy(), [2.0, 3.0])


def test_inplace_on_graph_tensor_is_differentiated():
    # (refused before in-place ops joined the graph; test_autograd_inplace.py covers them)
    w = param([1.0])
    y = scale(w, 2.0)
    y.add_(1.0)
    y.mul_(3.0)
    total(y).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [6.0])


def test_backward_of_non_scalar_needs_a_gradient():
    y = scale(param([1.0, 2.0]), 2.0)
    with pytest.raises(RuntimeError, match=r"implicitly created only for scalar outputs, got "
                                           r"shape \(2,\)"):
        y.backward()


def test_explicit_upstream_gradient():
    w = param([[1.0, 2.0], [3.0, 4.0]])
    y = scale(w, 3.0)
    g = np.array([[1.0, 0.5], [-1.0, 2.0]], np.float32)
    y.backward(tensor(g))
    np.testing.assert_array_equal(w.grad.numpy(), 3.0 * g)
    with pytest.raises(ValueError, match=r"backward: gradient of shape \(3,\) for a tensor of "
                                         r"shape \(2, 2\)"):
        scale(w, 1.0).backward(np.ones(3, np.float32))


def test_grads_never_share_storage():
    a, b = param([1.0, 2.0]), param([3.0, 4.0])
    g = np.array([1.0, 1.0], np.float32)
    add(a, b).backward(g)
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    assert not np.shares_memory(a.grad.numpy(), g)
    a.grad.numpy()[0] = 10.0
    assert b.grad.numpy()[0] == 1.0 and g[0] == 1.0
    x = param([1.0])
    x.backward(g[:1])  # a leaf as the root: its grad is the caller's array, copied
    assert not np.shares_memory(x.grad.numpy(), g)


def test_detach():
    w = param([1.0, 2.0])
    y = scale(w, 2.0)
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert np.shares_memory(d.numpy(), y._data)
    z = scale(d, 2.0)
    assert not z.requires_grad
    assert w.detach().numpy().tolist() == [1.0, 2.0]


def test_requires_grad_only_on_float32():
    with pytest.raises(TypeError, match="only float32 tensors can require gradients, not int64"):
        tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="not bool"):
        zeros(2, dtype=np.bool_, requires_grad=True)
    t = tensor([1, 2], dtype=np.int32)
    with pytest.raises(TypeError, match="not int32"):
        t.requires_grad = True


def test_requires_grad_cannot_be_cleared_on_a_non_leaf():
    y = scale(param([1.0]), 2.0)
    with pytest.raises(RuntimeError, match="non-leaf"):
        y.requires_grad = False


def test_inputs_without_grad_get_none():
    w = param([2.0])
    x = tensor([5.0])
    total(mul(w, x)).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [5.0])
    assert x.grad is None


def test_deep_graph_has_no_recursion_limit():
    depth = 10_000
    assert depth > sys.getrecursionlimit()
    w = param([1.0, 2.0])
    y = w
    for _ in range(depth):
        y = F.clone(y)
    total(y).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])
    del y
    gc.collect()  # freeing the chain must not recurse either
