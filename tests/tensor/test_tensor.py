"""Tensor: constructors and their dtype rules, properties, conversions, comparisons, in-place
writes, repr and errors."""
import numpy as np
import pytest

from onemodel import autograd
from onemodel.tensor import Tensor, arange, from_numpy, full, ones, tensor, zeros


# -- constructors --------------------------------------------------------------------------
@pytest.mark.parametrize("data, dtype", [
    ([1.0, 2.5], np.float32),
    ([1, 2], np.int64),
    ([True, False], np.bool_),
    (3.0, np.float32),
    (7, np.int64),
    (np.array([1.0], np.float64), np.float32),
    (np.array([1.0], np.float16), np.float32),
    (np.array([1], np.int32), np.int32),
    (np.array([1], np.uint8), np.int64),
    ([[1, 2], [3, 4]], np.int64),
])
def test_tensor_dtype_rules(data, dtype):
    t = tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))
    assert t.numpy().flags.c_contiguous
    assert t.shape == np.asarray(data).shape  # rank 0 stays rank 0


def test_tensor_copies_and_takes_dtype():
    src = np.arange(6, dtype=np.float32).reshape(2, 3).T  # not contiguous
    t = tensor(src)
    src[0, 0] = 100.0
    assert t.numpy()[0, 0] == 0.0 and t.numpy().flags.c_contiguous
    assert tensor([1, 2], dtype=np.float32).dtype == np.float32
    assert tensor([1.7, 2.2], dtype=np.int64).tolist() == [1, 2]
    assert tensor(tensor([1.0])).numpy() is not tensor([1.0]).numpy()
    with pytest.raises(TypeError, match="tensor: unsupported dtype float64"):
        tensor([1.0], dtype=np.float64)
    with pytest.raises(TypeError, match="tensor: unsupported dtype"):
        tensor(["a"])
    assert Tensor([1.0, 2.0]).dtype == np.float32


@pytest.mark.parametrize("src, dtype", [
    (np.array([1.5], np.float64), np.float32), (np.array([1.5], np.float32), np.float32),
    (np.array([1], np.int64), np.int64), (np.array([1], np.int32), np.int32),
    (np.array([1], np.int16), np.int64), (np.array([1], np.uint32), np.int64),
    (np.array([True]), np.bool_), (np.zeros((2, 0, 3)), np.float32), (np.array(2.0), np.float32),
])
def test_from_numpy_dtype_rules(src, dtype):
    t = from_numpy(src)
    assert t.dtype == dtype and t.shape == src.shape
    np.testing.assert_array_equal(t.numpy(), src)
    assert not np.shares_memory(t.numpy(), src)


def test_from_numpy_errors():
    with pytest.raises(TypeError, match="from_numpy: expected a numpy.ndarray, got list"):
        from_numpy([1.0])
    with pytest.raises(TypeError, match="from_numpy: unsupported dtype complex128"):
        from_numpy(np.zeros(2, np.complex128))
    # uint64 becomes int64: a value of 2^63 or more would wrap to a negative one.
    big = np.array([1, (1 << 63) + 5], np.uint64)
    with pytest.raises(ValueError, match="from_numpy: uint64 value 9223372036854775813 does "
                                         "not fit in int64"):
        from_numpy(big)
    assert from_numpy(np.array([(1 << 63) - 1], np.uint64)).tolist() == [(1 << 63) - 1]
    assert from_numpy(np.zeros((0, 2), np.uint64)).dtype == np.int64


def test_zeros_ones_full_arange():
    assert zeros(2, 3).shape == (2, 3) and zeros((2, 3)).shape == (2, 3)
    assert zeros([4]).shape == (4,) and zeros().shape == ()
    assert zeros(2, dtype=np.int64).dtype == np.int64
    assert ones(3).numpy().tolist() == [1.0, 1.0, 1.0] and ones(3).dtype == np.float32
    assert ones(2, 2, requires_grad=True).requires_grad
    assert full((2,), 1.5).dtype == np.float32 and full((2,), 1.5).tolist() == [1.5, 1.5]
    assert full(3, 7).dtype == np.int64
    assert full((1,), True).dtype == np.bool_
    assert full((2,), np.float32(0.5)).dtype == np.float32
    assert full((2,), 2, dtype=np.float32).tolist() == [2.0, 2.0]
    assert arange(4).tolist() == [0, 1, 2, 3] and arange(4).dtype == np.int64
    assert arange(1, 7, 2).tolist() == [1, 3, 5]
    assert arange(0.0, 1.0, 0.25).dtype == np.float32
    assert arange(3, dtype=np.float32).dtype == np.float32
    assert zeros(0, 5).numel() == 0
    with pytest.raises(ValueError, match=r"zeros: negative dimension in shape \(2, -1\)"):
        zeros(2, -1)
    with pytest.raises(TypeError, match="ones: unsupported dtype float64"):
        ones(2, dtype=np.float64)
    with pytest.raises(TypeError, match="arange: unsupported dtype"):
        arange(3, dtype=np.uint8)


# -- properties and conversions ------------------------------------------------------------
def test_properties():
    t = tensor(np.zeros((2, 3, 4), np.float32))
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.dim() == 3
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.numel() == 24
    assert len(t) == 2 and t.is_leaf and t.grad_fn is None and t.grad is None
    assert not t.requires_grad
    assert tensor([[1.0, 2.0]]).T.shape == (2, 1)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(tensor(1.0))


def test_item_and_conversions():
    assert tensor([[2.5]]).item() == 2.5 and isinstance(tensor([[2.5]]).item(), float)
    assert tensor(3).item() == 3 and isinstance(tensor(3).item(), int)
    assert tensor(True).item() is True
    assert float(tensor(1.5)) == 1.5 and int(tensor(4)) == 4 and bool(tensor([1.0]))
    assert [10, 20, 30][tensor(1)] == 20
    with pytest.raises(ValueError, match=r"item: tensor of shape \(2,\) has 2 elements"):
        tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="only integer tensors can be used as an index"):
        [1, 2][tensor(1.0)]
    with pytest.raises(RuntimeError, match="requires grad; call detach\\(\\).numpy\\(\\)"):
        tensor([1.0], requires_grad=True).numpy()
    assert tensor([1, 2]).float().dtype == np.float32
    assert tensor([1.9]).long().tolist() == [1]
    assert tensor([[1.0, 5.0], [7.0, 2.0]]).argmax().item() == 2
    assert tensor([[1.0, 5.0], [7.0, 2.0]]).argmax(1).tolist() == [1, 0]
    assert tensor([1.0, 5.0]).argmax(0).shape == ()


def test_numpy_shares_storage():
    t = tensor([1.0, 2.0])
    assert t.numpy() is t.numpy()


def test_comparisons():
    a = tensor([1.0, 2.0, 3.0])
    b = tensor([3.0, 2.0, 1.0])
    assert (a == b).tolist() == [False, True, False] and (a == b).dtype == np.bool_
    assert (a != b).tolist() == [True, False, True]
    assert (a < b).tolist() == [True, False, False]
    assert (a <= 2.0).tolist() == [True, True, False]
    assert (a > 1).tolist() == [False, True, True]
    assert (a >= b).tolist() == [False, True, True]
    assert (tensor([2, 3]) == 2.5).tolist() == [False, False]  # not truncated to 2
    assert (tensor([2, 3]) < 2.5).tolist() == [True, False]
    # A Python float is compared in float32, as in PyTorch: float32(0.1) == 0.1 there.
    assert (tensor([0.1]) == 0.1).tolist() == [True]
    assert (tensor(1.0) == 1.0).shape == ()
    assert hash(a) != hash(b)


def test_repr():
    assert repr(tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"  # torch's (test_printing.py)
    assert repr(tensor([1, 2])) == "tensor([1, 2])"
    assert repr(tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert repr(tensor(2.0)) == "tensor(2.)"


# -- in-place writes -----------------------------------------------------------------------
def test_inplace_ops_and_versions():
    t = tensor([1.0, 2.0, 3.0])
    assert t._version == 0
    t.add_(1.0)
    t.add_(tensor([1.0, 1.0, 1.0]), alpha=2.0)
    t.sub_(1.0)
    t.mul_(tensor([2.0, 2.0, 2.0]))
    t.div_(4.0)
    assert t.tolist() == [1.5, 2.0, 2.5] and t._version == 5
    t += 1.0
    t -= tensor([1.0, 1.0, 1.0])
    t *= 2.0
    t /= 2.0
    assert t.tolist() == [1.5, 2.0, 2.5] and t._version == 9
    t.fill_(3.0)
    t.zero_()
    t.copy_(tensor([7.0]))
    t[0] = 1.0
    t[tensor([1])] = tensor([5.0])
    t[tensor([False, False, True])] = 9.0
    assert t.tolist() == [1.0, 5.0, 9.0] and t._version == 15
    assert t.dtype == np.float32
    i = tensor([1, 2])
    i.copy_(tensor([2.7, -1.5]))  # copy_ and fill_ convert, as in PyTorch
    assert i.tolist() == [2, -1]
    i.fill_(3.9)
    assert i.tolist() == [3, 3]
    buffer = t.numpy()
    t.add_(1.0)
    assert t.numpy() is buffer  # written in place


def test_inplace_keeps_float32_arithmetic():
    t = tensor([np.float32(0.1)])
    t.add_(0.2)  # 0.1f + 0.2f in float32, not via float64
    assert t.numpy()[0] == np.float32(0.1) + np.float32(0.2)


def test_inplace_errors():
    t = tensor([1, 2])
    with pytest.raises(TypeError, match=r"add_: cannot write a float64 result into a int64 "
                                        r"tensor of shape \(2,\)"):
        t.add_(2.5)
    assert t.tolist() == [1, 2] and t._version == 0
    with pytest.raises(ValueError, match=r"mul_: operand of shape \(3,\) does not broadcast to "
                                         r"\(2,\)"):
        tensor([1.0, 2.0]).mul_(tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"copy_: source of shape \(3,\) does not broadcast to "
                                         r"\(2,\)"):
        tensor([1.0, 2.0]).copy_(tensor([1.0, 2.0, 3.0]))


def test_detach_shares_storage_and_version():
    w = tensor([1.0, 2.0], requires_grad=True)
    d = w.detach()
    with autograd.no_grad():
        pass
    d.add_(1.0)
    assert w.detach().tolist() == [2.0, 3.0]
    assert w._version == d._version == 1
