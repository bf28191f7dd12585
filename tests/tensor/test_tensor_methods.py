"""Tensor methods a PyTorch script calls (view_as, expand, repeat, split, chunk, masked_fill,
where, argmax/argmin with keepdim, requires_grad_, .data) against torch.Tensor's, forward and
backward, with central differences and errors that name the method and the shapes."""
import numpy as np
import pytest

import onemodel as om
from onemodel import functional as F

torch = pytest.importorskip("torch")


def outputs(result):
    return result if isinstance(result, tuple) else (result,)


def stacked(fn):
    """A method returning a tuple, as one flat tensor per engine (check_torch compares one)."""
    def run(x):
        parts = outputs(fn(x))
        if isinstance(x, torch.Tensor):
            return torch.cat([p.reshape(-1) for p in parts])
        return om.functional.cat([p.reshape(-1) for p in parts])
    return run


METHODS = {
    "expand": (lambda t: t.expand(5, 2, 4, 3), (2, 1, 3)),
    "expand_-1": (lambda t: t.expand(2, -1, -1), (1, 5, 2)),
    "expand_list": (lambda t: t.expand([3, 2]), (2,)),
    "repeat": (lambda t: t.repeat(2, 3), (2, 3)),
    "repeat_lead": (lambda t: t.repeat(2, 1, 2, 1), (3, 2, 1)),
    "repeat_tuple": (lambda t: t.repeat((1, 2)), (4,)),
    "view_as": (lambda t: t.view_as(t.reshape(3, 2)), (2, 3)),
    "split_size": (stacked(lambda t: t.split(2, 1)), (3, 5)),
    "split_sections": (stacked(lambda t: t.split([1, 3, 1], dim=-1)), (2, 5)),
    "chunk": (stacked(lambda t: t.chunk(3)), (7, 2)),
    "chunk_dim": (stacked(lambda t: t.chunk(2, dim=1)), (2, 5)),
    "masked_fill": (lambda t: t.masked_fill(t > 0.3, -1.5), (3, 4)),
    "where": (lambda t: t.where(t < 0, 0.25), (3, 4)),
}


@pytest.mark.parametrize("name", METHODS)
def test_method_matches_torch(rng, check_torch, check_grad, name):
    fn, shape = METHODS[name]
    x = rng.standard_normal(shape).astype(np.float32)
    check_torch(fn, fn, x)
    check_grad(fn, x)


@pytest.mark.parametrize("name", ["split_size", "chunk"])
def test_pieces_match_torch_one_by_one(rng, name):
    split = {"split_size": lambda t: t.split(3, 0), "chunk": lambda t: t.chunk(4, 0)}[name]
    x = rng.standard_normal((10, 2)).astype(np.float32)
    ours, ref = split(om.tensor(x)), split(torch.from_numpy(x))
    assert [p.shape for p in ours] == [tuple(p.shape) for p in ref]
    for a, b in zip(ours, ref):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_expand_keeps_signed_zero_and_nan():
    x = om.tensor(np.array([[-0.0], [np.nan]], np.float32))
    y = x.expand(2, 3).numpy()
    assert np.signbit(y[0]).all() and np.isnan(y[1]).all()


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_match_torch(rng, op, dim, keepdim):
    x = rng.integers(0, 3, (4, 5)).astype(np.float32)  # ties: the first index, as torch
    ref = getattr(torch.from_numpy(x), op)(dim, keepdim=keepdim)
    # the method, and the function at the top level and in functional (torch.argmax)
    for ours in (getattr(om.tensor(x), op)(dim, keepdim=keepdim),
                 getattr(om, op)(om.tensor(x), dim, keepdim), getattr(F, op)(om.tensor(x), dim)
                 if not keepdim else getattr(F, op)(om.tensor(x), dim=dim, keepdim=True)):
        assert ours.dtype == np.int64 and ours.shape == tuple(ref.shape)
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_requires_grad_and_data():
    x = om.ones(2, 3)
    assert x.requires_grad_() is x and x.requires_grad
    d = x.data
    assert not d.requires_grad and d._data is x._data
    d.mul_(2.0)  # a write through .data reaches the tensor, outside the graph
    assert float(x.detach().numpy()[0, 0]) == 2.0
    assert not x.requires_grad_(False).requires_grad
    with pytest.raises(TypeError, match="requires_grad: only float32"):
        om.tensor([1, 2]).requires_grad_()


@pytest.mark.parametrize("call, match", [
    (lambda t: t.expand(3, 3), r"expand: shape \(2, 3\) cannot be expanded to \(3, 3\)"),
    (lambda t: t.expand(3), r"expand: 1 sizes \(3,\) for a tensor of shape \(2, 3\)"),
    (lambda t: t.repeat(2), r"repeat: sizes \(2,\) must be >= 0 and at least one per"),
    (lambda t: t.split(0), "split: split_size must be positive"),
    (lambda t: t.split([1, 3]), r"split: sections \[1, 3\] must be >= 0 and add up to 2"),
    (lambda t: t.chunk(0), "chunk: chunks must be a positive integer"),
    (lambda t: t.split(1, dim=2), "split: dim 2 out of range"),
    (lambda t: t.argmax(3), "argmax: dim 3 out of range"),
    (lambda t: om.argmin(t[:0]), r"argmin: the tensor of shape \(0, 3\) has no elements"),
    (lambda t: t.masked_fill(t, 0.0), "where: condition must be a bool tensor"),
])
def test_bad_arguments_raise_naming_them(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(om.ones(2, 3))
