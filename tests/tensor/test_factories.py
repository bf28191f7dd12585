"""Random factories (rand, randn, randint, randperm) over the default generator, and *_like."""
import numpy as np
import pytest

import onemodel as om


def test_random_factories_draw_from_the_default_generator_reproducibly():
    for factory in (lambda: om.rand(3, 4), lambda: om.randn((5,)), lambda: om.randint(9, (6,)),
                    lambda: om.randperm(7)):
        om.manual_seed(3)
        first, second = factory().numpy(), factory().numpy()
        om.manual_seed(3)
        assert np.array_equal(factory().numpy(), first)
        assert not np.array_equal(first, second)  # the generator moved on


def test_a_given_generator_leaves_the_default_one_alone():
    before = om.get_rng_state()
    a = om.rand(4, generator=om.Generator(8)).numpy()
    assert om.get_rng_state() == before
    assert np.array_equal(a, om.Generator(8).uniform(0.0, 1.0, (4,)).numpy())
    assert np.array_equal(om.randperm(5, generator=om.Generator(1)).numpy(),
                          om.randperm(5, generator=om.Generator(1)).numpy())


def test_distributions():
    om.manual_seed(0)
    z = om.randn(200_000).numpy()
    assert z.dtype == np.float32 and abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    k = om.randint(-3, 5, (80_000,)).numpy()
    assert k.dtype == np.int64 and k.min() == -3 and k.max() == 4
    counts = np.bincount(k + 3)
    assert counts.min() > 0.95 * len(k) / 8
    p = om.randperm(1000).numpy()
    assert sorted(p.tolist()) == list(range(1000)) and p.tolist() != list(range(1000))
    u = om.rand(10_000).numpy()
    assert 0.0 <= u.min() and u.max() < 1.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="low must be < high"):
        om.randint(5, 5, (2,))
    with pytest.raises(TypeError, match="size must be integers"):
        om.rand(2.5)
    with pytest.raises(ValueError, match="negative"):
        om.randn(-1)
    with pytest.raises(ValueError, match="randperm"):
        om.randperm(-2)
    with pytest.raises(TypeError, match="zeros_like: expected a Tensor"):
        om.zeros_like(np.zeros(2))


def test_like_factories_take_shape_and_dtype():
    t = om.arange(6).reshape(2, 3)
    assert om.zeros_like(t).numpy().tolist() == [[0, 0, 0], [0, 0, 0]]
    assert om.zeros_like(t).dtype == t.dtype
    assert om.ones_like(t, dtype="float32").numpy().dtype == np.float32
    assert om.full_like(t, 7).numpy().tolist() == [[7, 7, 7], [7, 7, 7]]
    assert om.empty_like(t).shape == (2, 3) and om.empty(2, 2).numpy().sum() == 0
    assert om.ones_like(om.zeros(2), requires_grad=True).requires_grad
