"""Tensor's in-place shape methods (unsqueeze_, squeeze_, transpose_, t_, resize_) against
torch: the shape, the values, the version bump, the gradient through them, and the refusals."""
import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")

CASES = [
    ("unsqueeze_", (2, 3), (-1,)),
    ("unsqueeze_", (2, 3), (0,)),
    ("squeeze_", (2, 1, 3, 1), ()),
    ("squeeze_", (2, 1, 3, 1), (1,)),
    ("transpose_", (2, 3, 4), (0, 2)),
    ("t_", (2, 3), ()),
    ("t_", (3,), ()),
]


@pytest.mark.parametrize("name, shape, args", CASES)
def test_values_shape_and_version_as_torch(name, shape, args):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ours, theirs = om.from_numpy(x.copy()), torch.from_numpy(x.copy())
    v0, w0 = ours._version, theirs._version
    assert getattr(ours, name)(*args) is ours
    getattr(theirs, name)(*args)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert ours._version - v0 == theirs._version - w0


@pytest.mark.parametrize("name, shape, args", CASES)
def test_gradient_through_the_in_place_method_as_torch(name, shape, args):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    weight = np.random.default_rng(1).standard_normal(x.size).astype(np.float32)
    grads = []
    for lib in (om, torch):
        leaf = lib.tensor(x, requires_grad=True)
        y = leaf * 2.0
        getattr(y, name)(*args)
        (y.reshape(-1) * lib.tensor(weight)).sum().backward()
        grads.append(leaf.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_unsqueeze_keeps_memory_shared_with_a_detached_alias():
    t = om.zeros(3)
    alias = t.detach()
    t.unsqueeze_(0)
    t.add_(1.0)
    np.testing.assert_array_equal(alias.numpy(), np.ones(3, np.float32))
    assert tuple(alias.shape) == (3,)


def test_a_leaf_that_requires_grad_is_refused_as_by_torch():
    leaf = om.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="unsqueeze_"):
        leaf.unsqueeze_(0)
    assert tuple(leaf.shape) == (2,)


def test_bad_dimension_refused_before_anything_changes():
    t = om.zeros(2, 3)
    with pytest.raises(Exception):
        t.transpose_(0, 5)
    assert tuple(t.shape) == (2, 3) and t._version == 0


@pytest.mark.parametrize("sizes", [(2, 2), ((3,),), (6,)])
def test_resize_keeps_the_leading_values_as_torch(sizes):
    ours, theirs = om.arange(6.0), torch.arange(6.0)
    ours.resize_(*sizes)
    theirs.resize_(*sizes)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_resize_grows_with_the_old_values_first():
    t = om.arange(4.0)
    t.resize_(2, 3)
    assert tuple(t.shape) == (2, 3)
    np.testing.assert_array_equal(t.numpy().reshape(-1)[:4], np.arange(4.0, dtype=np.float32))


def test_resize_refuses_a_tensor_that_requires_grad_even_under_no_grad():
    leaf = om.ones(2, requires_grad=True)
    with om.no_grad(), pytest.raises(RuntimeError, match="resize_"):
        leaf.resize_(3)
    with torch.no_grad(), pytest.raises(RuntimeError):
        torch.ones(2, requires_grad=True).resize_(3)



def test_a_view_of_a_non_leaf_may_change_its_shape_as_in_torch():
    # A shape change writes nothing, so the tensor the view came from is not concerned.
    grads = []
    for lib in (om, torch):
        w = lib.tensor(np.arange(6, dtype=np.float32), requires_grad=True)
        base = w * 2.0
        view = base.reshape(2, 3)
        view.t_()
        (view * lib.tensor(np.arange(6, dtype=np.float32).reshape(3, 2))).sum().backward()
        grads.append(w.grad.numpy())
        assert tuple(base.shape) == (6,)
    np.testing.assert_array_equal(grads[0], grads[1])


def test_a_view_of_a_leaf_is_refused_as_by_torch():
    for lib in (om, torch):
        view = lib.ones(6, requires_grad=True).reshape(2, 3)
        with pytest.raises(RuntimeError, match="view of a leaf Variable"):
            view.t_()
        assert tuple(view.shape) == (2, 3)
