"""Sparse COO tensors against torch's: construction, coalescing, to_dense/to_sparse, and the
sparse x dense product with gradients to both operands, in a fixed order (same bits on every
path and thread count)."""
import warnings

import numpy as np
import pytest

import onemodel as om

torch = pytest.importorskip("torch")
warnings.filterwarnings("ignore", "Sparse invariant checks", UserWarning)

# (3, 4) with a duplicate at (1, 2) and an uncoalesced order
INDICES = [[1, 0, 2, 1, 0, 2], [2, 3, 0, 2, 0, 1]]


def _values(rng, n=6):
    return rng.standard_normal(n, dtype=np.float32)


def _graph(rng, nodes=7, edges=20):
    """A random adjacency with self-loops and repeated edges."""
    src = rng.integers(0, nodes, edges)
    dst = rng.integers(0, nodes, edges)
    return np.stack([np.r_[src, np.arange(nodes)], np.r_[dst, np.arange(nodes)]])


def test_coalesce_indices_values_as_torch(rng):
    v = _values(rng)
    ours = om.sparse_coo_tensor(INDICES, v, (3, 4))
    theirs = torch.sparse_coo_tensor(INDICES, torch.from_numpy(v), (3, 4))
    assert ours.is_sparse and not om.ones(1).is_sparse
    assert not ours.is_coalesced()
    c, ct = ours.coalesce(), theirs.coalesce()
    assert c.is_coalesced() and c._nnz() == ct._nnz() == 5
    np.testing.assert_array_equal(c.indices().numpy(), ct.indices().numpy())
    np.testing.assert_array_equal(c.values().numpy(), ct.values().numpy())
    np.testing.assert_array_equal(ours.to_dense().numpy(), theirs.to_dense().numpy())
    assert ours.shape == tuple(theirs.shape) and ours.size(1) == 4 and ours.dim() == 2


def test_duplicates_summed_in_the_order_given():
    v = np.array([1e8, 1.0, -1e8, 1.0], np.float32)
    s = om.sparse_coo_tensor([[0, 0, 0, 0], [0, 0, 0, 0]], v, (1, 1)).coalesce()
    expected = ((v[0] + v[1]) + v[2]) + v[3]  # float32, left to right
    assert s.values().numpy()[0] == expected


def test_uncoalesced_indices_and_values_refused_as_torch(rng):
    s = om.sparse_coo_tensor(INDICES, _values(rng), (3, 4))
    with pytest.raises(RuntimeError, match="values: cannot get values on an uncoalesced"):
        s.values()
    with pytest.raises(RuntimeError, match="indices: cannot get indices on an uncoalesced"):
        s.indices()
    np.testing.assert_array_equal(s._indices().numpy(), INDICES)


def test_size_inferred_as_torch(rng):
    v = _values(rng)
    assert om.sparse_coo_tensor(INDICES, v).shape == tuple(
        torch.sparse_coo_tensor(INDICES, torch.from_numpy(v)).shape)


@pytest.mark.parametrize("indices,values,size,message", [
    ([0, 1], [1.0, 2.0], (2,), "indices must be a 2-D integer array"),
    ([[0, 1]], [1.0], (2,), "2 index columns but 1 values"),
    ([[0, 3]], [1.0, 2.0], (3,), "index 3 is out of bounds for dimension 0 of size 3"),
    ([[0, -1]], [1.0, 2.0], (3,), "indices must be >= 0"),
    ([[0, 1]], [1.0, 2.0], (3, 3), "size .3, 3. has 2 dimensions but the indices 1"),
])
def test_construction_errors(indices, values, size, message):
    with pytest.raises(ValueError, match="sparse_coo_tensor: " + message):
        om.sparse_coo_tensor(indices, values, size)


def test_to_sparse_and_back_with_gradients(check_torch, rng):
    x = rng.standard_normal((4, 5), dtype=np.float32) * (rng.random((4, 5)) < 0.4)
    x = x.astype(np.float32)
    s, st = om.tensor(x).to_sparse(), torch.from_numpy(x).to_sparse()
    np.testing.assert_array_equal(s.indices().numpy(), st.indices().numpy())
    np.testing.assert_array_equal(s.values().numpy(), st.values().numpy())
    check_torch(lambda t: t.to_sparse().to_dense() * 2, lambda t: t.to_sparse().to_dense() * 2,
                x)


@pytest.mark.parametrize("call", ["sparse.mm", "mm", "matmul", "method"])
def test_sparse_dense_product_and_gradients_as_torch(check_torch, rng, call):
    idx = _graph(rng)
    v = rng.standard_normal(idx.shape[1], dtype=np.float32)
    d = rng.standard_normal((7, 5), dtype=np.float32)

    def run(lib):
        def f(values, dense):
            s = lib.sparse_coo_tensor(idx, values, (7, 7))
            return {"sparse.mm": lambda: lib.sparse.mm(s, dense),
                    "mm": lambda: lib.mm(s, dense), "matmul": lambda: s @ dense,
                    "method": lambda: s.mm(dense)}[call]()
        return f
    check_torch(run(om), run(torch), v, d, tol=1e-5)


def test_product_is_the_row_sums_in_column_order(rng):
    """Each output element is the sum over its row's nonzeros (coalesced: columns ascending)
    of value x dense, added one at a time in float32."""
    idx = _graph(rng)
    v = rng.standard_normal(idx.shape[1], dtype=np.float32)
    d = rng.standard_normal((7, 3), dtype=np.float32)
    got = om.sparse.mm(om.sparse_coo_tensor(idx, v, (7, 7)), om.tensor(d)).numpy()
    c = om.sparse_coo_tensor(idx, v, (7, 7)).coalesce()
    rows, cols = c.indices().numpy()
    vals = c.values().numpy()
    expected = np.zeros((7, 3), np.float32)
    for k in range(len(rows)):
        expected[rows[k]] = expected[rows[k]] + vals[k] * d[cols[k]]
    np.testing.assert_array_equal(got, expected)


def test_gradients_against_central_differences(check_grad, rng):
    idx = _graph(rng, 5, 9)
    v = rng.standard_normal(idx.shape[1], dtype=np.float32)
    d = rng.standard_normal((5, 3), dtype=np.float32)
    check_grad(lambda a, b: om.sparse.mm(om.sparse_coo_tensor(idx, a, (5, 5)), b), v, d)


def test_leaf_sparse_tensor_gets_a_sparse_gradient(rng):
    v = _values(rng)
    d = rng.standard_normal((4, 2), dtype=np.float32)
    s = om.sparse_coo_tensor(INDICES, v, (3, 4), requires_grad=True)
    st = torch.sparse_coo_tensor(INDICES, torch.from_numpy(v), (3, 4), requires_grad=True)
    om.sparse.mm(s, om.tensor(d)).sum().backward()
    torch.sparse.mm(st, torch.from_numpy(d)).sum().backward()
    np.testing.assert_allclose(s.grad.to_dense().numpy(), st.grad.to_dense().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_same_bits_everywhere(check_exact, rng):
    idx = _graph(rng, 40, 300)
    v = rng.standard_normal(idx.shape[1], dtype=np.float32)
    d = rng.standard_normal((40, 33), dtype=np.float32)
    check_exact(lambda a, b: om.sparse.mm(om.sparse_coo_tensor(idx, a, (40, 40)), b), v, d)


def test_product_errors(rng):
    s = om.sparse_coo_tensor(INDICES, _values(rng), (3, 4))
    with pytest.raises(ValueError, match=r"sparse.mm: expected sparse \(n, m\) and dense"):
        om.sparse.mm(s, om.ones(3, 2))
    with pytest.raises(TypeError, match="sparse.mm: mat1 must be a sparse COO tensor"):
        om.sparse.mm(om.ones(3, 4), om.ones(4, 2))
    with pytest.raises(NotImplementedError, match="sparse.mm: reduce='max'"):
        om.sparse.mm(s, om.ones(4, 2), "max")
