"""nn.init.orthogonal_, eye_, dirac_ and sparse_ against torch 2.13 (orthogonal_: torch's QR of
the same N(0, 1) draws), and their argument checks."""
import math

import numpy as np
import pytest

import onemodel as om
from onemodel.nn import init
from onemodel.random import standard_normals

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 2, 3), (6, 6), (1, 7), (7, 1),
                                   (40, 33)])
@pytest.mark.parametrize("gain", [1.0, 1.5])
def test_orthogonal_is_torchs_qr_of_the_same_draws(shape, gain):
    t = om.empty(*shape)
    assert init.orthogonal_(t, gain=gain, generator=om.Generator().manual_seed(3)) is t
    rows = shape[0]
    cols = math.prod(shape) // rows
    z = torch.tensor(standard_normals(om.Generator().manual_seed(3), rows * cols)).reshape(
        rows, cols)
    z = z.t() if rows < cols else z
    q, r = torch.linalg.qr(z)
    q = q * torch.diag(r).sign()
    q = (q.t() if rows < cols else q) * gain
    np.testing.assert_allclose(t.numpy().reshape(rows, cols), q.numpy(), atol=3e-6)
    flat = t.numpy().reshape(rows, cols).astype(np.float64) / gain
    small = flat @ flat.T if rows < cols else flat.T @ flat
    np.testing.assert_allclose(small, np.eye(min(rows, cols)), atol=1e-5)


def test_orthogonal_draws_from_the_default_generator_and_is_reproducible():
    om.manual_seed(7)
    a = init.orthogonal_(om.empty(6, 4)).numpy().copy()
    b = init.orthogonal_(om.empty(6, 4)).numpy().copy()
    om.manual_seed(7)
    np.testing.assert_array_equal(a, init.orthogonal_(om.empty(6, 4)).numpy())
    assert not np.array_equal(a, b)


def test_eye_and_dirac_match_torch():
    for shape in [(3, 5), (4, 4), (6, 2)]:
        np.testing.assert_array_equal(init.eye_(om.empty(*shape)).numpy(),
                                      torch.nn.init.eye_(torch.empty(shape)).numpy())
    for shape, groups in [((4, 3, 5), 1), ((6, 2, 3, 3), 2), ((4, 4, 3, 2, 5), 4),
                          ((2, 5, 3, 3), 1)]:
        ours = init.dirac_(om.ones(*shape), groups).numpy()
        theirs = torch.nn.init.dirac_(torch.ones(shape), groups).numpy()
        np.testing.assert_array_equal(ours, theirs)


def test_sparse_zeroes_the_same_count_in_every_column_as_torch():
    t = init.sparse_(om.empty(10, 6), 0.25, std=0.5, generator=om.Generator().manual_seed(1))
    theirs = torch.nn.init.sparse_(torch.empty(10, 6), 0.25, std=0.5)
    assert ((t.numpy() == 0).sum(0) == (theirs.numpy() == 0).sum(0)).all()
    assert ((t.numpy() == 0).sum(0) == 3).all()
    nonzero = t.numpy()[t.numpy() != 0]
    assert 0.2 < nonzero.std() < 0.9


def test_missing_names_of_torch_init_are_none_of_these():
    for name in ("orthogonal_", "eye_", "dirac_", "sparse_"):
        assert hasattr(torch.nn.init, name) and hasattr(init, name)


@pytest.mark.parametrize("call,match", [
    (lambda: init.orthogonal_(om.empty(4)), "orthogonal_: only tensors with 2 or more"),
    (lambda: init.eye_(om.empty(2, 2, 2)), "eye_: only tensors with 2 dimensions"),
    (lambda: init.dirac_(om.empty(3, 3)), "dirac_: only tensors with 3, 4, or 5"),
    (lambda: init.dirac_(om.empty(3, 3, 3), groups=2), "dirac_: dim 0 .* divisible by groups"),
    (lambda: init.sparse_(om.empty(3, 3, 3), 0.1), "sparse_: only tensors with 2"),
    (lambda: init.sparse_(om.empty(3, 3), 1.5), "sparse_: sparsity must be in"),
])
def test_bad_arguments_are_refused_by_name(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_every_torch_init_name_exists_and_old_spellings_warn_as_torchs():
    public = {n for n in dir(torch.nn.init) if not n.startswith("_") and callable(
        getattr(torch.nn.init, n)) and getattr(torch.nn.init, n).__module__ == "torch.nn.init"}
    assert public - set(dir(init)) == set()
    for old in ("uniform", "normal", "xavier_normal", "orthogonal", "eye"):
        with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor "
                                               f"of `nn.init.{old}_`"):
            t = getattr(init, old)(om.empty(3, 3))
        assert t.shape == (3, 3)
    with pytest.warns(FutureWarning):
        np.testing.assert_array_equal(init.constant(om.empty(2, 2), 0.5).numpy(),
                                      np.full((2, 2), 0.5, np.float32))
