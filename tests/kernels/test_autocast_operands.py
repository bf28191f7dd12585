"""_autocast.Operands, what a product keeps of its operands for backward: the float32 values
outside autocast and for a leaf, a 2-byte copy the kernel's packing fills for an intermediate
(shared by the next product of the same values at the same version), nothing where no gradient
needs it; and which inputs an in-place write must then leave alone."""
import numpy as np
import pytest

import onemodel as om
from onemodel import _autocast


def _intermediate() -> om.Tensor:
    leaf = om.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    return leaf * 1.0


def test_outside_autocast_the_float32_values_are_kept_and_protected() -> None:
    x, bias = _intermediate(), om.tensor([1.0, 2.0])
    ops = _autocast.Operands(_autocast.half_code())
    assert ops.keep(x, x._data, True) is x._data
    assert ops.saves == [None]
    assert ops.protected((x, bias)) == (x, bias)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_an_intermediate_keeps_a_two_byte_copy_shared_at_its_version(dtype: str) -> None:
    x, leaf = _intermediate(), om.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    with om.amp.autocast(dtype):
        ops = _autocast.Operands(_autocast.half_code())
        keep = ops.keep(x, x._data, True)
        assert keep is not None and keep.dtype == np.uint16 and keep.shape == (2, 3)
        assert ops.saves[0] is keep
        assert ops.keep(leaf, leaf._data, True) is leaf._data  # alive anyway: not copied
        assert ops.protected((x, leaf)) == (leaf,)  # x's values are no longer read
        ops.packed(np.empty((2, 2), np.float32))

        again = _autocast.Operands(_autocast.half_code())
        shared = again.keep(x, x._data, True)
        assert shared is not None and np.shares_memory(shared, keep)
        assert again.saves == [None]  # the packing need not write it twice

        with om.no_grad():
            x.mul_(2.0)  # a new version: new values, a copy of their own
        later = _autocast.Operands(_autocast.half_code())
        fresh = later.keep(x, x._data, True)
        assert fresh is not None and not np.shares_memory(fresh, keep)
        later.packed(np.empty((0, 2), np.float32))  # an empty product packed nothing
        unpacked = _autocast.Operands(_autocast.half_code()).keep(x, x._data, True)
        assert unpacked is not None and not np.shares_memory(unpacked, fresh)
        later.packed(np.empty((2, 2), np.float32))
        offered = _autocast.Operands(_autocast.half_code()).keep(x, x._data, True)
        assert offered is not None and np.shares_memory(offered, fresh)
    # the copies go when the outermost autocast ends
    with om.amp.autocast(dtype):
        unshared = _autocast.Operands(_autocast.half_code()).keep(x, x._data, True)
        assert unshared is not None and not np.shares_memory(unshared, fresh)


def test_an_operand_no_gradient_needs_is_not_kept_and_stays_protected() -> None:
    x = _intermediate()
    with om.amp.autocast("bf16"):
        ops = _autocast.Operands(_autocast.half_code())
        assert ops.keep(x, x._data, False) is None
        assert ops.saves == [None]
        assert ops.protected((x,)) == (x,)
