"""Indexing with a Python range, as torch's: the range's integers as an index list."""
import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

X = np.arange(40, dtype=np.float32).reshape(8, 5)


@pytest.mark.parametrize("make_index", [
    lambda: range(8), lambda: range(1, 7, 2), lambda: range(7, 0, -3), lambda: range(3, 3),
    lambda: (range(2, 6), range(4, 0, -1)), lambda: (slice(None), range(0, 5, 2)),
    lambda: (range(3), 2)])
def test_range_index_values_and_gradients_are_torchs(make_index):
    results = []
    for lib in (om, torch):
        x = lib.tensor(X, requires_grad=True)
        out = x[make_index()]
        (out * out).sum().backward()
        results.append((out.detach().numpy(), x.grad.numpy()))
    (o, og), (t, tg) = results
    assert o.shape == t.shape
    np.testing.assert_array_equal(o, t)
    np.testing.assert_array_equal(og, tg)


def test_range_past_the_end_is_an_index_error():
    with pytest.raises(IndexError, match="index"):
        om.tensor(X)[range(9)]
