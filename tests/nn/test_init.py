"""Generator (SplitMix64) and layer initialisation, bit for bit against docs/spec/training.txt 1.1.

The reference below is the formula itself in plain Python integers and numpy float32 scalars.
"""
import math
import time

import numpy as np
import pytest

import onemodel as om
from onemodel import nn

GOLDEN = 0x9E3779B97F4A7C15
MASK = 2 ** 64 - 1


def ref_outputs(seed, n, start=0):
    """Outputs start..start+n-1 of SplitMix64 seeded with seed."""
    out = []
    for k in range(start + 1, start + n + 1):
        z = (seed + k * GOLDEN) & MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def ref_single(u):
    return np.float32((u >> 40) / 2 ** 24)


def ref_uniform(a, b, outputs):
    a, b = np.float32(a), np.float32(b)
    return np.array([a + (b - a) * ref_single(u) for u in outputs], np.float32)


def bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


def test_known_first_output():
    # The published first output of SplitMix64 from state 0.
    assert om.Generator(0).next_u64() == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("seed", [0, 1, 42, 2 ** 63, MASK, 0x0123456789ABCDEF])
def test_next_u64_and_single(seed):
    g = om.Generator(seed)
    assert [g.next_u64() for _ in range(20)] == ref_outputs(seed, 20)
    expected = [float(ref_single(u)) for u in ref_outputs(seed, 10, start=20)]
    assert [g.next_single() for _ in range(10)] == expected


def test_negative_seed_wraps():
    assert om.Generator(-1).next_u64() == om.Generator(MASK).next_u64()
    with pytest.raises(TypeError):
        om.Generator(1.5)


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 5), (2, 3, 4)])
def test_uniform_matches_formula(shape):
    g = om.Generator(7)
    g.next_u64()  # the bulk draw continues the scalar stream
    out = g.uniform(-0.3, 0.7, shape)
    n = int(np.prod(shape))
    assert out.shape == shape and out.dtype == np.float32
    np.testing.assert_array_equal(bits(out.numpy().ravel()),
                                  bits(ref_uniform(-0.3, 0.7, ref_outputs(7, n, start=1))))
    assert g.next_u64() == ref_outputs(7, 1, start=1 + n)[0]


def test_uniform_large_is_vectorised():
    g = om.Generator(3)
    n = 1 << 20
    start = time.perf_counter()
    out = g.uniform(-1.0, 1.0, (1024, 1024)).numpy().ravel()
    assert time.perf_counter() - start < 0.5  # a Python loop per element takes seconds
    picks = [0, 1, 12345, n - 1]
    for i in picks:
        expected = ref_uniform(-1.0, 1.0, ref_outputs(3, 1, start=i))[0]
        assert bits(out[i]) == bits(expected)
    assert g.state == (3 + n * GOLDEN) & MASK
    assert np.all(out >= -1.0) and np.all(out < 1.0)


def linear_reference(seed, fan_in, n_weight, n_bias):
    bound = np.float32(1.0 / math.sqrt(fan_in))
    draws = ref_outputs(seed, n_weight + n_bias)
    return ref_uniform(-bound, bound, draws[:n_weight]), ref_uniform(-bound, bound,
                                                                      draws[n_weight:])


@pytest.mark.parametrize("fan_in,fan_out", [(1, 1), (3, 4), (7, 2), (10, 5)])
def test_linear_init_bits(fan_in, fan_out):
    layer = nn.Linear(fan_in, fan_out, seed=11)
    w, b = linear_reference(11, fan_in, fan_in * fan_out, fan_out)
    assert layer.weight.shape == (fan_out, fan_in) and layer.bias.shape == (fan_out,)
    np.testing.assert_array_equal(bits(layer.weight.detach().numpy().ravel()), bits(w))
    np.testing.assert_array_equal(bits(layer.bias.detach().numpy()), bits(b))
    assert layer.weight.requires_grad and layer.weight.is_leaf


def test_linear_without_bias():
    layer = nn.Linear(3, 2, bias=False, seed=5)
    assert layer.bias is None
    assert [n for n, _ in layer.named_parameters()] == ["weight"]
    w, _ = linear_reference(5, 3, 6, 0)
    np.testing.assert_array_equal(bits(layer.weight.detach().numpy().ravel()), bits(w))


def test_shared_generator_draws_in_construction_order():
    g = om.Generator(99)
    a = nn.Linear(4, 3, generator=g)
    e = nn.Embedding(5, 2, generator=g)
    b = nn.Linear(2, 2, generator=g)
    draws = ref_outputs(99, 12 + 3 + 10 + 4 + 2)
    bound_a, bound_b = np.float32(1 / math.sqrt(4)), np.float32(1 / math.sqrt(2))
    s3 = np.float32(math.sqrt(3))
    expected = np.concatenate([ref_uniform(-bound_a, bound_a, draws[:15]),
                               ref_uniform(-s3, s3, draws[15:25]),
                               ref_uniform(-bound_b, bound_b, draws[25:])])
    got = np.concatenate([p.detach().numpy().ravel()
                          for m in (a, e, b) for p in m.parameters()])
    np.testing.assert_array_equal(bits(got), bits(expected))
    assert g.state == (99 + len(draws) * GOLDEN) & MASK


def test_container_helper():
    g = om.Generator(1)
    assert nn.init.resolve_generator(g) is g
    assert nn.init.resolve_generator(None, 5).state == 5
    with pytest.raises(TypeError):
        nn.init.resolve_generator(np.random.default_rng(0))
    assert nn.init.fan_in_bound(3) == np.float32(1.0 / math.sqrt(3.0))
    with pytest.raises(ValueError):
        nn.init.fan_in_bound(0)


def test_embedding_init_bits():
    layer = nn.Embedding(6, 3, seed=2)
    s3 = np.float32(math.sqrt(3))
    expected = ref_uniform(-s3, s3, ref_outputs(2, 18))
    np.testing.assert_array_equal(bits(layer.weight.detach().numpy().ravel()), bits(expected))
    assert layer.weight.shape == (6, 3)


def test_layer_norm_init():
    layer = nn.LayerNorm((2, 3))
    np.testing.assert_array_equal(layer.weight.detach().numpy(), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(layer.bias.detach().numpy(), np.zeros((2, 3), np.float32))
    assert nn.LayerNorm(4, elementwise_affine=False).weight is None


@pytest.mark.parametrize("args", [(0, 3), (3, -1), (2.5, 3)])
def test_bad_sizes(args):
    with pytest.raises(ValueError):
        nn.Linear(*args)
    with pytest.raises(ValueError):
        nn.Embedding(*args)
