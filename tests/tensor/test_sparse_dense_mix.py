"""A dense tensor plus, minus or times a sparse COO one, and torch.spmm: dense results with
gradients, as torch's."""
import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

IDX = np.array([[0, 1, 2, 2], [1, 0, 2, 0]])
VALS = np.array([2.0, -1.5, 0.5, 3.0], np.float32)
DENSE = np.arange(9, dtype=np.float32).reshape(3, 3) / 4


def _both(lib, values_grad):
    values = lib.tensor(VALS, requires_grad=values_grad)
    s = lib.sparse_coo_tensor(lib.tensor(IDX), values, (3, 3))
    d = lib.tensor(DENSE, requires_grad=True)
    return s, d, values


@pytest.mark.parametrize("expr", ["d + s", "d - s", "torch.add(d, s)", "torch.sub(d, s)",
                                  "d @ s", "torch.mm(d, s)", "torch.spmm(s, d)",
                                  "torch.spmm(d, d)", "torch.matmul(d, s)"])
def test_dense_and_sparse_give_torchs_dense_values_and_gradients(expr):
    results = []
    for lib in (om, torch):
        s, d, values = _both(lib, values_grad=True)
        out = eval(expr, {"torch": lib, "s": s, "d": d})
        assert not getattr(out, "is_sparse", False)
        weights = lib.tensor(np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3))
        (out * weights).sum().backward()
        results.append([out.detach().numpy(), d.grad.numpy(),
                        None if values.grad is None else values.grad.numpy()])
    for ours, theirs in zip(*results):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def test_integer_sparse_added_to_float_dense_is_float():
    s = om.sparse_coo_tensor(IDX, om.ones(4, dtype=om.int64), (3, 3))
    out = om.eye(3) + s
    ref = torch.eye(3) + torch.sparse_coo_tensor(IDX, torch.ones(4, dtype=torch.int64), (3, 3))
    assert out.dtype == om.float32
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_sparse_added_with_another_size_is_refused():
    s, _, _ = _both(om, values_grad=False)
    with pytest.raises(ValueError, match="add: a sparse other"):
        om.ones(3) + s


def test_sparse_to_cpu_is_itself_and_to_float_converts_values():
    s = om.sparse_coo_tensor(IDX, om.ones(4, dtype=om.int64), (3, 3))
    assert s.to("cpu") is s
    f = s.to(om.float32)
    assert f.dtype == om.float32 and f.is_sparse
    np.testing.assert_array_equal(f.to_dense().numpy(), s.to_dense().numpy())
