"""The backward pass's buffer policy (onemodel/_grad_buffers.py): a closure overwrites its
incoming gradient only when nothing else holds that array; a leaf's .grad is added into in
place, as torch's is; a .grad shares memory with no other gradient and not with the caller's.

The ops are written on `record` (the op pattern of onemodel.functional): `doubled` writes its
result into the incoming gradient whenever it may, and says whether it did.
"""
import numpy as np
import pytest

from onemodel import _grad_buffers, autograd
from onemodel.functional import _core
from onemodel.tensor import Tensor, tensor

overwritten: list[bool] = []


def doubled(x: Tensor) -> Tensor:
    """2·x, whose backward writes 2·g into g where the pass lets it."""
    def backward(g: np.ndarray) -> tuple:
        mine = _grad_buffers.may_overwrite(g)
        overwritten.append(mine)
        if mine:
            np.multiply(g, np.float32(2), out=g)
            return (g,)
        return (g * np.float32(2),)
    return _core.record("doubled", x._data * np.float32(2), (x,), backward)


def tripled(x: Tensor) -> Tensor:
    """3·x, whose backward makes a new array (one the next closure may overwrite)."""
    return _core.record("tripled", x._data * np.float32(3), (x,),
                        lambda g: (g * np.float32(3),))


def setup_function() -> None:
    overwritten.clear()


def test_offer_lets_a_closure_overwrite_only_an_array_nothing_else_holds() -> None:
    g = np.ones(4, np.float32)
    _grad_buffers.offer(g, False)
    assert _grad_buffers.may_overwrite(g)
    assert not _grad_buffers.may_overwrite(np.ones(4, np.float32))
    _grad_buffers.withdraw()
    assert not _grad_buffers.may_overwrite(g)
    other = g  # a second holder
    _grad_buffers.offer(g, False)
    assert not _grad_buffers.may_overwrite(other)
    del other
    view = g[1:]  # a view holds its base
    _grad_buffers.offer(g, False)
    assert not _grad_buffers.may_overwrite(g)
    del view
    for unfit in (np.ones(4, np.float64), np.ones((4, 4), np.float32)[:, 0],
                  np.broadcast_to(np.float32(1), (4,))):
        _grad_buffers.offer(unfit, False)
        assert not _grad_buffers.may_overwrite(unfit)
    _grad_buffers.offer(g, True)  # autograd.grad returns it
    assert not _grad_buffers.may_overwrite(g)
    _grad_buffers.withdraw()


def test_a_gradient_only_the_pass_holds_is_overwritten() -> None:
    x = tensor([1.0, -2.0], requires_grad=True)
    tripled(doubled(x)).sum().backward()
    assert overwritten == [True]
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


def test_the_callers_gradient_is_never_written() -> None:
    x = tensor([1.0, -2.0], requires_grad=True)
    g = tensor([1.0, 5.0])
    doubled(x).backward(g)
    assert overwritten == [False]
    np.testing.assert_array_equal(g.numpy(), [1.0, 5.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 10.0])


def test_a_gradient_a_hook_kept_is_not_written() -> None:
    # (the hook is given a copy: the closure may still overwrite its own array)
    x = tensor([1.0, -2.0], requires_grad=True)
    h = tripled(x * 1.0)
    kept: list[Tensor] = []
    y = doubled(h)
    y.register_hook(lambda g: kept.append(g))
    tripled(y).sum().backward()
    np.testing.assert_array_equal(kept[0].numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [18.0, 18.0])


def test_a_retained_gradient_is_not_written() -> None:
    x = tensor([1.0, -2.0], requires_grad=True)
    y = doubled(x * 1.0)
    y.retain_grad()
    tripled(y).sum().backward()
    assert y.grad is not None and x.grad is not None
    np.testing.assert_array_equal(y.grad.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 6.0])


def test_a_gradient_a_function_keeps_is_never_written() -> None:
    class Keeps(autograd.Function):
        kept = np.full(2, 7.0, np.float32)

        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return Tensor._wrap(Keeps.kept)

    x = tensor([1.0, -2.0], requires_grad=True)
    Keeps.apply(doubled(x)).sum().backward()
    assert overwritten == [False]
    np.testing.assert_array_equal(Keeps.kept, [7.0, 7.0])
    np.testing.assert_array_equal(x.grad.numpy(), [14.0, 14.0])


def test_a_kept_grad_sees_the_next_backward_as_in_torch() -> None:
    torch = pytest.importorskip("torch")
    # torch's AccumulateGrad adds into .grad in place: a reference taken before the second
    # backward is the same tensor, holding the sum.
    t = torch.tensor([1.0, -2.0], requires_grad=True)
    (t * 2).sum().backward()
    t_first = t.grad
    (t * 3).sum().backward()
    x = tensor([1.0, -2.0], requires_grad=True)
    (x * 2).sum().backward()
    first, data = x.grad, x.grad._data
    (x * 3).sum().backward()
    assert (first is x.grad) == (t_first is t.grad) and first is x.grad
    assert data is x.grad._data
    np.testing.assert_array_equal(first.numpy(), t_first.numpy())


@pytest.mark.parametrize("early", [True, False], ids=["finished-early", "at-the-end"])
def test_a_grad_shares_memory_with_no_other_gradient_nor_the_callers(early: bool) -> None:
    a = tensor([1.0, 2.0], requires_grad=True)
    b = tensor([3.0, 4.0], requires_grad=True)
    # add hands one array to both sides; with two roots no leaf is finished early
    y = _core.record("add", a._data + b._data, (a, b), lambda g: (g, g))
    g = np.array([1.0, 5.0], np.float32)
    if early:
        y.backward(tensor(g))
    else:
        autograd.backward([y, a * 0.0], [tensor(g), tensor([0.0, 0.0])])
    assert a.grad is not None and b.grad is not None
    assert not np.shares_memory(a.grad._data, b.grad._data)
    a.grad._data += 1
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 5.0])
    np.testing.assert_array_equal(g, [1.0, 5.0])


def test_a_leaf_root_copies_the_callers_gradient() -> None:
    x = tensor([1.0, 2.0], requires_grad=True)
    g = tensor([4.0, 5.0])
    x.backward(g)
    assert x.grad is not None and not np.shares_memory(x.grad._data, g._data)


def test_a_fresh_gradient_becomes_grad_without_a_copy() -> None:
    made: list[np.ndarray] = []

    def backward(g: np.ndarray) -> tuple:
        made.append(g * np.float32(2))
        return (made[-1],)

    x = tensor([1.0, 2.0], requires_grad=True)
    _core.record("twice", x._data * 2, (x,), backward).sum().backward()
    assert x.grad is not None and x.grad._data is made[0]
