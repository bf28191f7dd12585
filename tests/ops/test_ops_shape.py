"""Shape ops: forward and backward against PyTorch and float64 central differences, the same
bits in exact mode on every path, outputs that never alias their input, and clear errors."""
import numpy as np
import pytest

import onemodel.functional as F
from onemodel.tensor import Tensor, tensor

torch = pytest.importorskip("torch")


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


# (name, onemodel op, torch op, input shape, numpy float64 reference)
UNARY = [
    ("reshape", lambda x: F.reshape(x, (4, -1)), lambda x: x.reshape(4, -1), (2, 3, 4),
     lambda x: x.reshape(4, -1)),
    ("reshape_0d", lambda x: F.reshape(x, ()), lambda x: x.reshape(()), (1, 1),
     lambda x: x.reshape(())),
    ("reshape_empty", lambda x: F.reshape(x, (0, 5)), lambda x: x.reshape(0, 5), (5, 0),
     lambda x: x.reshape(0, 5)),
    ("method_view", lambda x: x.view(3, 8), lambda x: x.view(3, 8), (2, 3, 4),
     lambda x: x.reshape(3, 8)),
    ("flatten", F.flatten, torch.flatten, (2, 3, 4), lambda x: x.reshape(-1)),
    ("flatten_mid", lambda x: F.flatten(x, 1, 2), lambda x: torch.flatten(x, 1, 2),
     (2, 3, 4, 5), lambda x: x.reshape(2, 12, 5)),
    ("flatten_0d", F.flatten, torch.flatten, (), lambda x: x.reshape(1)),
    ("squeeze_all", F.squeeze, torch.squeeze, (1, 3, 1, 2), lambda x: x.reshape(3, 2)),
    ("squeeze_dim", lambda x: F.squeeze(x, -2), lambda x: torch.squeeze(x, -2), (1, 3, 1, 2),
     lambda x: x.reshape(1, 3, 2)),
    ("squeeze_not_one", lambda x: F.squeeze(x, 1), lambda x: torch.squeeze(x, 1), (1, 3, 1),
     lambda x: x),
    ("squeeze_tuple", lambda x: F.squeeze(x, (0, 2)), lambda x: torch.squeeze(x, (0, 2)),
     (1, 3, 1, 2), lambda x: x.reshape(3, 2)),
    ("unsqueeze", lambda x: F.unsqueeze(x, 1), lambda x: torch.unsqueeze(x, 1), (3, 4),
     lambda x: x[:, None]),
    ("unsqueeze_neg", lambda x: F.unsqueeze(x, -1), lambda x: torch.unsqueeze(x, -1), (3, 4),
     lambda x: x[..., None]),
    ("transpose", lambda x: F.transpose(x, 0, 2), lambda x: torch.transpose(x, 0, 2),
     (2, 3, 4), lambda x: np.swapaxes(x, 0, 2)),
    ("transpose_neg", lambda x: F.transpose(x, -1, -2), lambda x: torch.transpose(x, -1, -2),
     (2, 17, 16), lambda x: np.swapaxes(x, -1, -2)),
    ("permute", lambda x: F.permute(x, (2, 0, 1)), lambda x: x.permute(2, 0, 1), (2, 3, 4),
     lambda x: np.transpose(x, (2, 0, 1))),
    ("T", lambda x: x.T, lambda x: x.T, (3, 5), lambda x: x.T),
    ("clone", F.clone, torch.clone, (3, 4), lambda x: x.copy()),
    ("pad_last", lambda x: F.pad(x, (1, 2)), lambda x: torch.nn.functional.pad(x, (1, 2)),
     (2, 3), lambda x: np.pad(x, ((0, 0), (1, 2)))),
    ("pad_two_dims_value", lambda x: F.pad(x, (1, 0, 0, 2), value=1.5),
     lambda x: torch.nn.functional.pad(x, (1, 0, 0, 2), value=1.5), (2, 3, 4),
     lambda x: np.pad(x, ((0, 0), (0, 2), (1, 0)), constant_values=1.5)),
    ("pad_crop", lambda x: F.pad(x, (-1, 2, 1, -2)),
     lambda x: torch.nn.functional.pad(x, (-1, 2, 1, -2)), (4, 5),
     lambda x: np.pad(x[:2, 1:], ((1, 0), (0, 2)))),
]


@pytest.mark.parametrize("name, om_fn, th_fn, shape, ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary_shape_op(name, om_fn, th_fn, shape, ref, rng, check_torch, check_grad):
    x = _rand(rng, shape)
    check_torch(om_fn, th_fn, x)
    check_grad(om_fn, x, ref64=ref)


@pytest.mark.parametrize("name, om_fn, th_fn, shape, ref", UNARY[::3],
                         ids=[u[0] for u in UNARY[::3]])
def test_unary_shape_op_exact(name, om_fn, th_fn, shape, ref, rng, check_exact):
    check_exact(om_fn, _rand(rng, shape), threads=(1, 2))


def test_outputs_are_fresh_contiguous_copies(rng):
    x = tensor(_rand(rng, (4, 6)))
    outs = [F.reshape(x, (6, 4)), F.flatten(x), F.squeeze(x), F.unsqueeze(x, 0),
            F.transpose(x, 0, 1), F.permute(x, (0, 1)), F.index(x, (slice(None), 1)),
            F.index(x, 2), F.clone(x), F.pad(x, (0, 0)), F.cat([x], 0), F.stack([x], 0),
            F.gather(x, 1, tensor(np.zeros((4, 1), np.int64)))]
    for out in outs:
        assert out.numpy().flags.c_contiguous
        assert not np.shares_memory(out.numpy(), x.numpy())
    before = x.numpy().copy()
    for out in outs:
        out.numpy()[...] = 7.0
    np.testing.assert_array_equal(x.numpy(), before)


# -- indexing ------------------------------------------------------------------------------
INDICES = [
    ("int", lambda: 1),
    ("neg_int", lambda: -1),
    ("slice", lambda: slice(1, None, 2)),
    ("neg_slice", lambda: (slice(None), slice(-3, -1))),
    ("none_ellipsis", lambda: (None, Ellipsis, 0)),
    ("int_array", lambda: np.array([2, 0, 2, -1])),
    ("int_list", lambda: [0, 0, 3]),
    ("int_tensor_2d", lambda: (slice(None), tensor([[1, 1], [0, 4]]))),
    ("bool_mask", lambda: np.array([True, False, True, True])),
    ("bool_tensor_full", lambda: tensor(np.arange(20).reshape(4, 5) % 3 == 0)),
    ("mixed", lambda: (np.array([1, 1, 3]), slice(None, 4))),
    ("int32_tensor", lambda: tensor(np.array([3, 3, 0], np.int32))),
    ("empty", lambda: np.array([], np.int64)),
]


def _torch_index(idx):
    parts = idx if isinstance(idx, tuple) else (idx,)
    conv = []
    for p in parts:
        if isinstance(p, Tensor):
            p = p.numpy()
        if isinstance(p, np.ndarray):
            p = torch.from_numpy(p.astype(np.int64) if p.dtype == np.int32 else p)
        conv.append(p)
    return tuple(conv) if isinstance(idx, tuple) else conv[0]


@pytest.mark.parametrize("name, make", INDICES, ids=[i[0] for i in INDICES])
def test_index(name, make, rng, check_torch, check_grad):
    x = _rand(rng, (4, 5))
    idx = make()
    th_idx = _torch_index(idx)
    check_torch(lambda t: t[idx], lambda t: t[th_idx], x)
    np_idx = _torch_index(idx)
    np_idx = tuple(p.numpy() if isinstance(p, torch.Tensor) else p for p in np_idx) \
        if isinstance(np_idx, tuple) else (np_idx.numpy() if isinstance(np_idx, torch.Tensor)
                                          else np_idx)
    check_grad(lambda t: F.index(t, idx), x, ref64=lambda v: v[np_idx])


def test_index_repeated_entries_add_up():
    x = tensor(np.arange(4, dtype=np.float32), requires_grad=True)
    x[np.array([0, 2, 0, 0])].backward(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 0.0, 2.0, 0.0])


def test_index_errors():
    x = tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(IndexError, match=r"index: .*\(tensor of shape \(3, 4\)\)"):
        x[3]
    with pytest.raises(IndexError, match=r"index: .*\(3, 4\)"):
        x[0, 0, 0]
    with pytest.raises(TypeError, match=r"index: .*float32.*\(3, 4\)"):
        x[tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match=r"index: unsupported index 'a'"):
        x["a"]


# -- gather --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, dim, ishape", [((4, 5), 1, (4, 3)), ((4, 5), 0, (6, 5)),
                                                ((3, 4, 5), -1, (2, 3, 7)),
                                                ((4, 5), 1, (4, 1)), ((4, 5), 0, (0, 5))])
def test_gather(shape, dim, ishape, rng, check_torch, check_grad, check_exact):
    x = _rand(rng, shape)
    idx = rng.integers(0, shape[dim], ishape).astype(np.int64)
    ti = torch.from_numpy(idx)
    check_torch(lambda t: F.gather(t, dim, tensor(idx)), lambda t: torch.gather(t, dim, ti), x)

    def ref64(v):
        return torch.gather(torch.from_numpy(v), dim, ti).numpy()
    check_grad(lambda t: F.gather(t, dim, tensor(idx)), x, ref64=ref64)
    check_exact(lambda t: F.gather(t, dim, tensor(idx)), x, threads=(1, 2))


def test_gather_errors():
    x = tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="gather: index must be an integer tensor"):
        F.gather(x, 1, tensor([[0.0]]))
    with pytest.raises(ValueError, match=r"gather: index of shape \(3,\).*\(3, 4\)"):
        F.gather(x, 1, tensor([0, 1, 2]))
    with pytest.raises(IndexError, match=r"gather: index 4 is out of bounds for dim 1 with size 4"):
        F.gather(x, 1, tensor([[4]]))
    with pytest.raises(IndexError, match="gather: index -1"):
        F.gather(x, 1, tensor([[-1]]))
    with pytest.raises(ValueError, match="gather: dim 2 out of range"):
        F.gather(x, 2, tensor([[0]]))


@pytest.mark.parametrize("index_shape", [(2, 0), (0, 3, 4), (0,)])
def test_gather_of_an_empty_index_of_any_rank(index_shape, rng, check_torch):
    check_torch(lambda t: F.gather(t, 0, tensor(np.zeros(index_shape, np.int64))),
                lambda t: torch.gather(t, 0, torch.zeros(index_shape, dtype=torch.long)),
                _rand(rng, (5,)))
    with pytest.raises(ValueError, match="gather: dim 1 out of range"):
        F.gather(tensor(_rand(rng, (5,))), 1, tensor(np.zeros(index_shape, np.int64)))


# -- cat and stack -------------------------------------------------------------------------
@pytest.mark.parametrize("shapes, dim", [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0)], -1),
                                         ([(2, 3, 4), (2, 5, 4)], 1), ([(0, 3), (2, 3)], 0)])
def test_cat(shapes, dim, rng, check_torch, check_grad):
    xs = [_rand(rng, s) for s in shapes]
    check_torch(lambda *t: F.cat(list(t), dim), lambda *t: torch.cat(t, dim), *xs)
    check_grad(lambda *t: F.cat(t, dim), *xs, ref64=lambda *v: np.concatenate(v, dim))


@pytest.mark.parametrize("shapes, dim", [([(0,), (5, 5)], 1), ([(2, 3), (0,), (1, 3)], -2),
                                         ([(0,), (0,)], 0), ([(3,), (0,)], 0)])
def test_cat_skips_legacy_empty_tensors(shapes, dim, rng, check_torch, check_grad):
    """A tensor of shape (0,) among others of any rank is left out, as PyTorch (an OpInfo
    sample)."""
    xs = [_rand(rng, s) for s in shapes]
    check_torch(lambda *t: F.cat(list(t), dim), lambda *t: torch.cat(t, dim), *xs)
    check_grad(lambda *t: F.cat(t, dim), *xs, ref64=lambda *v: np.concatenate(
        [a for a in v if a.shape != (0,)] or v[:1], dim))


@pytest.mark.parametrize("shape, dim", [((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((), 0)])
def test_stack(shape, dim, rng, check_torch, check_grad):
    xs = [_rand(rng, shape) for _ in range(3)]
    check_torch(lambda *t: F.stack(list(t), dim), lambda *t: torch.stack(t, dim), *xs)
    check_grad(lambda *t: F.stack(t, dim), *xs, ref64=lambda *v: np.stack(v, dim))


def test_cat_stack_one_input_requires_grad(rng):
    a = tensor(_rand(rng, (2, 3)), requires_grad=True)
    b = tensor(_rand(rng, (2, 3)))
    F.cat([b, a], 1).backward(np.arange(12, dtype=np.float32).reshape(2, 6))
    np.testing.assert_array_equal(a.grad.numpy(), [[3, 4, 5], [9, 10, 11]])
    assert b.grad is None
    out = F.stack([tensor([1, 2]), tensor([3, 4])], 0)
    assert out.dtype == np.int64 and out.shape == (2, 2)


def test_cat_stack_errors():
    a = tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"cat: shapes \[\(2, 3\), \(3, 2\)\] must match"):
        F.cat([a, tensor(np.zeros((3, 2), np.float32))], 0)
    with pytest.raises(TypeError, match="cat: tensors have different dtypes"):
        F.cat([a, tensor(np.zeros((2, 3), np.int64))], 0)
    with pytest.raises(TypeError, match="cat: expected a non-empty list"):
        F.cat([], 0)
    with pytest.raises(ValueError, match="cat: dim 2 out of range"):
        F.cat([a, a], 2)
    with pytest.raises(ValueError, match=r"stack: all tensors must have the same shape, got "
                                         r"\[\(2, 3\), \(2, 2\)\]"):
        F.stack([a, tensor(np.zeros((2, 2), np.float32))])


# -- errors of the reshaping ops -----------------------------------------------------------
def test_shape_errors():
    x = tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"reshape: shape \(4, -1\) is invalid for a tensor of "
                                         r"shape \(2, 3\)"):
        F.reshape(x, (4, -1))
    with pytest.raises(ValueError, match="reshape: invalid shape"):
        F.reshape(x, (-1, -1))
    with pytest.raises(ValueError, match=r"permute: dims \(0, 0\) are not a permutation"):
        F.permute(x, (0, 0))
    with pytest.raises(ValueError, match="transpose: dim 2 out of range"):
        F.transpose(x, 0, 2)
    with pytest.raises(ValueError, match="unsqueeze: dim 3 out of range"):
        F.unsqueeze(x, 3)
    with pytest.raises(ValueError, match="flatten: start_dim 1 comes after end_dim 0"):
        F.flatten(x, 1, 0)
    with pytest.raises(ValueError, match=r"pad: 3 padding values for a tensor of shape \(2, 3\)"):
        F.pad(x, (1, 1, 1))
    with pytest.raises(ValueError, match=r"pad: padding \(-2, -2\) gives a negative size"):
        F.pad(x, (-2, -2))
    with pytest.raises(TypeError, match="reshape: expected a Tensor"):
        F.reshape(np.zeros(3), (3,))


def test_grad_flows_through_chain(rng):
    x = tensor(_rand(rng, (2, 3, 4)), requires_grad=True)
    y = F.pad(F.transpose(F.reshape(x, (6, 4)), 0, 1), (1, 1))[2:4]
    y.backward(np.ones(y.shape, np.float32))
    expected = np.zeros((6, 4), np.float32)
    expected[:, 2:4] = 1.0  # rows 2, 3 of the transpose (the padding is along the other axis)
    np.testing.assert_array_equal(x.grad.numpy(), expected.reshape(2, 3, 4))


PAD_CASES = [((3, 4), (1, 2)), ((2, 3, 4), (3, 0)), ((2, 3, 4), (-1, 2)), ((2, 3, 4), (1, 2, 2, 1)),
             ((1, 2, 3, 4), (0, 3, 2, -1)), ((2, 2, 3, 4), (1, 1, 2, 0, 1, 1)),
             ((1, 2, 2, 3, 4), (2, 1, 1, 2, 1, 0)), ((2, 1, 1), (0, 0))]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,amounts", PAD_CASES)
def test_pad_modes_match_torch(mode, shape, amounts, rng, check_torch, check_exact):
    if mode == "reflect" and any(a >= s for a, s in zip(amounts, np.repeat(shape[::-1], 2))):
        pytest.skip("reflect needs padding smaller than the dim")
    x = _rand(rng, shape)
    check_torch(lambda t: F.pad(t, amounts, mode), lambda t: torch.nn.functional.pad(
        t, amounts, mode), x)
    check_exact(lambda t: F.pad(t, amounts, mode=mode), x)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_against_finite_differences(mode, rng, check_grad):
    # Padding wider than half the dim: several outputs read one source, their gradients add.
    check_grad(lambda t: F.pad(t, (2, 2, 1, 2), mode), _rand(rng, (1, 3, 3)),
               ref64=lambda a: np.pad(a, ((0, 0), (1, 2), (2, 2)),
                                      {"replicate": "edge", "circular": "wrap"}.get(mode, mode)))


def test_pad_modes_keep_integers_and_constant_mode_as_before():
    x = tensor(np.arange(6).reshape(2, 3))
    assert F.pad(x, (2, 1), "reflect").tolist() == [[2, 1, 0, 1, 2, 1], [5, 4, 3, 4, 5, 4]]
    y = tensor(np.ones((2, 2), np.float32))
    assert F.pad(y, (1, 0), "constant", 2.5).tolist() == [[2.5, 1, 1], [2.5, 1, 1]]
    assert F.pad(y, (1, 0), value=2.5).tolist() == F.pad(y, (1, 0), "constant", 2.5).tolist()


@pytest.mark.parametrize("call,message", [
    (lambda x: F.pad(x, (1, 1), "zeros"), "pad: mode must be one of constant, reflect"),
    (lambda x: F.pad(x, (1, 1), "reflect", 0.0), "pad: mode 'reflect' takes no value"),
    (lambda x: F.pad(x, (3, 0), "reflect"), r"padding \(3, 0\) of dim 1 \(size 3\)"),
    (lambda x: F.pad(x, (4, 0), "circular"), r"padding \(4, 0\) of dim 1 .* 'circular'"),
    (lambda x: F.pad(x, (1, 1, 1, 1), "replicate"), r"last 1 to 3 dims .* shape \(2, 3\)"),
    (lambda x: F.pad(x[0], (1, 1), "replicate"), r"shape \(3,\)"),
])
def test_pad_mode_errors(call, message):
    x = tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=message):
        call(x)
