"""matmul and linear: forward and backward against PyTorch and float64 central differences,
the same bits on every ISA path and thread count in exact mode, errors before any kernel."""
import contextlib

import numpy as np
import pytest

import onemodel.functional as F
from onemodel._kernels import _gemm
from onemodel.tensor import tensor

torch = pytest.importorskip("torch")

# (a shape, b shape): every 1-D, folded, batched and broadcast rule of torch.matmul, edges of
# the 16-lane vectors, empty operands, and K longer than one K block (256).
MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((1, 3, 4), (2, 4, 5)),
    ((17, 15), (15, 16)),
    ((1, 1), (1, 1)),
    ((0, 4), (4, 5)),
    ((3, 0), (0, 5)),
    ((2, 0, 3), (3, 4)),
]


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES)
def test_matmul_matches_torch(sa, sb, rng, check_torch):
    check_torch(F.matmul, torch.matmul, _rand(rng, sa), _rand(rng, sb), tol=1e-4)


@pytest.mark.parametrize("sa, sb", [s for s in MATMUL_SHAPES if np.prod(s[0]) * np.prod(s[1])
                                    <= 1000])
def test_matmul_grad_central_differences(sa, sb, rng, check_grad):
    check_grad(F.matmul, _rand(rng, sa), _rand(rng, sb), ref64=np.matmul)


def test_matmul_operator_and_one_side_grad(rng, check_torch):
    a, b = _rand(rng, (5, 6)), _rand(rng, (6, 3))
    check_torch(lambda x, y: x @ y, lambda x, y: x @ y, a, b, tol=1e-4,
                requires_grad=[False, True])
    check_torch(lambda x, y: x @ y, lambda x, y: x @ y, a, b, tol=1e-4,
                requires_grad=[True, False])


def test_matmul_large_crosses_blocks(rng, check_torch):
    check_torch(F.matmul, torch.matmul, _rand(rng, (130, 300)), _rand(rng, (300, 70)), tol=1e-4)


@pytest.mark.parametrize("sa, sb", [((130, 300), (300, 70)), ((3, 33, 40), (40, 17)),
                                    ((3, 33, 40), (3, 40, 17)), ((40,), (2, 40, 9))])
def test_matmul_exact_every_isa_and_thread_count(sa, sb, rng, check_exact):
    a = _rand(rng, sa)
    a.reshape(-1)[:5] = [1e-40, -3e-39, 0.0, -0.0, 1e30]  # denormals, zeros, huge
    check_exact(F.matmul, a, _rand(rng, sb))


@pytest.mark.parametrize("sa, sb", [((3, 4), (5, 4)), ((2, 3, 4), (2, 5, 4)),
                                     ((2, 1, 3, 4), (5, 6, 4)), ((1, 3, 4), (2, 5, 4)),
                                     ((2, 3, 4), (5, 4)), ((2, 17, 300), (2, 19, 300)),
                                     ((2, 0, 4), (2, 5, 4))])
@pytest.mark.parametrize("half", [None, "bfloat16"])
def test_matmul_nt_has_the_bits_of_matmul_of_the_transpose(sa, sb, half, rng):
    """a @ bᵀ read transposed by the kernel (attention's q·kᵀ) gives the bits of matmul of the
    transposed copy: the product, both gradients (broadcast batches summed), under bf16
    autocast too."""
    from onemodel import amp
    from onemodel.functional.linalg import matmul_nt
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    out_shape = np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-2])
    g = rng.standard_normal(out_shape).astype(np.float32)
    results = []
    for product in (matmul_nt, lambda x, y: F.matmul(x, F.transpose(y, -2, -1))):
        x, y = tensor(a, requires_grad=True), tensor(b, requires_grad=True)
        with amp.autocast(half) if half else contextlib.nullcontext():
            # inputs that are not leaves: the bf16 path keeps 2-byte copies of them
            out = product(x * 1.0, y * 1.0)
        out.backward(tensor(g))
        results.append([t.tobytes() for t in (out.detach().numpy(), x.grad.numpy(),
                                              y.grad.numpy())])
    assert results[0] == results[1]


def test_matmul_special_values():
    a = np.ones((3, 4), np.float32)
    b = np.ones((4, 2), np.float32)
    a[0, 1] = np.nan
    a[1, 2] = np.inf
    out = F.matmul(tensor(a), tensor(b)).numpy()
    assert np.isnan(out[0]).all()
    assert np.isposinf(out[1]).all()
    np.testing.assert_array_equal(out[2], [4.0, 4.0])
    # Denormal products are kept (no flush to zero).
    tiny = F.matmul(tensor([[1e-20]]), tensor([[1e-20]])).numpy()
    assert tiny[0, 0] == np.float32(1e-20) * np.float32(1e-20) != 0.0


def test_matmul_uses_no_numpy_product(rng, monkeypatch):
    """Every product of matmul, @ and linear, forward and backward, runs in the gemm kernel.
    numpy's product functions raise and record the call (an op that caught the error would
    still fail); ndarray's own @ cannot be patched, so the kernel counts its calls: one per
    forward, one per operand gradient."""
    used = []

    def forbidden(name):
        def call(*args, **kwargs):
            used.append(name)
            raise AssertionError(f"np.{name} used by an op")
        return call
    for name in ("matmul", "dot", "tensordot", "einsum", "inner", "vdot", "outer", "kron"):
        monkeypatch.setattr(np, name, forbidden(name))
    monkeypatch.setattr(np.linalg, "multi_dot", forbidden("linalg.multi_dot"))
    kernel_calls = []
    gemm = _gemm.gemm

    def counted(*args, **kwargs):
        kernel_calls.append(args[2].shape)
        return gemm(*args, **kwargs)
    monkeypatch.setattr(_gemm, "gemm", counted)
    a = tensor(_rand(rng, (2, 3, 4)), requires_grad=True)
    b = tensor(_rand(rng, (4, 5)), requires_grad=True)
    w = tensor(_rand(rng, (6, 4)), requires_grad=True)
    for name, op, y in (("matmul", F.matmul, b), ("@", lambda p, q: p @ q, b),
                        ("linear", F.linear, w)):
        kernel_calls.clear()
        out = op(a, y)
        assert len(kernel_calls) == 1, f"{name} forward: {len(kernel_calls)} kernel calls"
        out.backward(np.ones(out.shape, np.float32))
        assert len(kernel_calls) == 3, f"{name} backward: {len(kernel_calls) - 1} kernel calls"
    assert used == []


@pytest.mark.parametrize("sa, sb, fragment", [
    ((3, 4), (5, 6), "inner dimensions 4 != 5"),
    ((2, 3, 4), (3, 4, 5), "cannot be broadcast"),
    ((), (3,), "at least one dimension"),
])
def test_matmul_shape_errors(sa, sb, fragment):
    a, b = tensor(np.ones(sa, np.float32)), tensor(np.ones(sb, np.float32))
    with pytest.raises(ValueError, match=fragment) as info:
        F.matmul(a, b)
    assert "matmul" in str(info.value)
    if fragment.startswith("inner"):
        assert f"{sa} @ {sb}" in str(info.value)


def test_matmul_dtype_error():
    with pytest.raises(TypeError, match=r"matmul: a must be float32, got int64 \(shape \(2, 2\)\)"):
        F.matmul(tensor([[1, 2], [3, 4]]), tensor(np.ones((2, 2), np.float32)))


# -- linear --------------------------------------------------------------------------------
LINEAR_SHAPES = [((5, 7), (3, 7)), ((7,), (3, 7)), ((2, 4, 7), (3, 7)), ((0, 7), (3, 7)),
                 ((4, 0), (3, 0)), ((17, 16), (15, 16))]


@pytest.mark.parametrize("sx, sw", LINEAR_SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(sx, sw, bias, rng, check_torch):
    x, w = _rand(rng, sx), _rand(rng, sw)
    if bias:
        check_torch(F.linear, torch.nn.functional.linear, x, w, _rand(rng, sw[:1]), tol=1e-4)
    else:
        check_torch(F.linear, torch.nn.functional.linear, x, w, tol=1e-4)


def _linear64(x, w, b=None):
    y = x @ w.T
    return y if b is None else y + b


@pytest.mark.parametrize("sx, sw", LINEAR_SHAPES[:3])
def test_linear_grad_central_differences(sx, sw, rng, check_grad):
    check_grad(F.linear, _rand(rng, sx), _rand(rng, sw), _rand(rng, sw[:1]), ref64=_linear64)


def test_linear_large_matches_torch(rng, check_torch):
    check_torch(F.linear, torch.nn.functional.linear, _rand(rng, (64, 300)),
                _rand(rng, (129, 300)), _rand(rng, (129,)), tol=1e-4)


def test_linear_exact_every_isa_and_thread_count(rng, check_exact):
    check_exact(F.linear, _rand(rng, (96, 300)), _rand(rng, (70, 300)), _rand(rng, (70,)))
    check_exact(F.linear, _rand(rng, (2, 5, 33)), _rand(rng, (17, 33)))


def test_linear_errors():
    x = tensor(np.ones((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"linear: input of shape \(4, 3\) and weight of "
                                         r"shape \(2, 5\)"):
        F.linear(x, tensor(np.ones((2, 5), np.float32)))
    with pytest.raises(ValueError, match=r"linear: weight must be 2-D.*\(3,\)"):
        F.linear(x, tensor(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match=r"linear: bias of shape \(3,\).*expected \(2,\)"):
        F.linear(x, tensor(np.ones((2, 3), np.float32)), tensor(np.ones(3, np.float32)))
    with pytest.raises(TypeError, match="linear: weight must be float32"):
        F.linear(x, tensor(np.ones((2, 3), np.int64)))
