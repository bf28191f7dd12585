"""Dropout: the counter-based mask of docs/spec/training.txt 1.2, bit for bit, and its counter."""
import time

import numpy as np
import pytest

import onemodel as om
from onemodel import nn
from onemodel.functional.dropout import dropout, dropout1d, dropout2d, dropout_mask

GOLDEN = 0x9E3779B97F4A7C15
MASK = 2 ** 64 - 1


def mix(z):
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def ref_mask(n, p, seed, draw):
    """The multiplier of each element, straight from the formula, one element at a time."""
    stream = mix(seed + draw * GOLDEN)
    scale = np.float32(1.0 / (1.0 - p))
    out = []
    for i in range(n):
        u = np.float32((mix(stream + (i + 1) * GOLDEN) >> 40) / 2 ** 24)
        out.append(scale if u >= np.float32(p) else np.float32(0.0))
    return np.array(out, np.float32)


def bits(x):
    return np.ascontiguousarray(x, np.float32).view(np.uint32)


@pytest.mark.parametrize("p,seed,draw", [(0.5, 0, 0), (0.3, 5, 1), (0.1, 2 ** 63 + 7, 12345),
                                         (0.9, MASK, 3), (1.0 / 3.0, 77, 2 ** 40)])
@pytest.mark.parametrize("shape", [(0,), (1,), (17,), (4, 7), (2, 3, 5)])
def test_mask_bits(p, seed, draw, shape):
    n = int(np.prod(shape))
    mask = dropout_mask(shape, p, seed, draw)
    assert mask.shape == shape and mask.dtype == np.float32
    np.testing.assert_array_equal(bits(mask.ravel()), bits(ref_mask(n, p, seed, draw)))


def test_functional_dropout_output_and_backward(rng):
    x = rng.standard_normal((6, 9)).astype(np.float32)
    xt = om.tensor(x, requires_grad=True)
    y = dropout(xt, 0.4, seed=3, draw=2)
    mask = ref_mask(x.size, 0.4, 3, 2).reshape(x.shape)
    np.testing.assert_array_equal(bits(y.detach().numpy()), bits(x * mask))
    g = rng.standard_normal(x.shape).astype(np.float32)
    y.backward(g)
    np.testing.assert_array_equal(bits(xt.grad.numpy()), bits(g * mask))


def test_functional_identity_cases():
    x = om.ones(3, 4)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    with pytest.raises(ValueError):
        dropout(x, 1.5)
    with pytest.raises(TypeError):
        dropout(om.arange(3), 0.5)


def test_p_one_zeroes_everything():
    x = om.tensor(np.arange(1, 41, dtype=np.float32).reshape(5, 8))
    y = nn.Dropout(1.0)(x).numpy()
    np.testing.assert_array_equal(y, np.zeros((5, 8), np.float32))


def test_module_counter_advances():
    drop = nn.Dropout(0.25, seed=9)
    x = np.linspace(-2, 2, 50, dtype=np.float32).reshape(5, 10)
    assert list(drop.state_dict()) == ["draws"]
    assert drop.state_dict()["draws"].dtype == np.int64
    assert drop.state_dict()["draws"].shape == ()
    for d in range(4):
        assert int(drop.draws.numpy()) == d
        y = drop(om.tensor(x)).numpy()
        np.testing.assert_array_equal(bits(y), bits(x * ref_mask(50, 0.25, 9, d).reshape(5, 10)))
    assert int(drop.draws.numpy()) == 4


def test_eval_and_p_zero_return_input_without_drawing():
    x = om.ones(4, 4)
    drop = nn.Dropout(0.5)
    drop.eval()
    assert drop(x) is x
    drop.train()
    assert nn.Dropout(0.0)(x) is x
    assert int(drop.draws.numpy()) == 0
    drop(x)
    assert int(drop.draws.numpy()) == 1


def test_resumed_counter_continues_stream(rng):
    x = om.tensor(rng.standard_normal((8, 8)).astype(np.float32))
    a = nn.Dropout(0.5, seed=4)
    for _ in range(3):
        a(x)
    saved = {k: v.clone() for k, v in a.state_dict().items()}  # torch's: shared, so kept
    expected = [a(x).numpy().copy() for _ in range(2)]
    b = nn.Dropout(0.5, seed=4)
    b.load_state_dict(saved)
    for e in expected:
        np.testing.assert_array_equal(bits(b(x).numpy()), bits(e))


def test_masks_differ_between_draws_and_seeds():
    x = om.ones(64)
    drop = nn.Dropout(0.5)
    first, second = drop(x).numpy().copy(), drop(x).numpy().copy()
    assert not np.array_equal(first, second)
    assert not np.array_equal(first, nn.Dropout(0.5, seed=1)(x).numpy())


def test_keep_rate_and_special_values(special_values):
    y = nn.Dropout(0.3, seed=1)(om.ones(100_000)).numpy()
    kept = np.count_nonzero(y) / y.size
    assert abs(kept - 0.7) < 0.01
    assert set(np.unique(y)) == {np.float32(0.0), np.float32(1.0 / 0.7)}
    # Through a multiply: a dropped inf or NaN gives NaN, as x * 0 does in PyTorch.
    x = special_values
    mask = ref_mask(x.size, 0.5, 0, 0)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = x * mask
    np.testing.assert_array_equal(bits(dropout(om.tensor(x), 0.5, seed=0).numpy()), bits(expected))


def test_large_mask_is_vectorised():
    start = time.perf_counter()
    y = dropout(om.ones(1 << 20), 0.5, seed=1, draw=7).numpy()
    assert time.perf_counter() - start < 0.5  # a Python loop per element takes seconds
    i = (1 << 20) - 1
    assert y[0] == ref_mask(1, 0.5, 1, 7)[0]
    stream = mix(1 + 7 * GOLDEN)
    u = np.float32((mix(stream + (i + 1) * GOLDEN) >> 40) / 2 ** 24)
    assert y[i] == (np.float32(2.0) if u >= np.float32(0.5) else np.float32(0.0))


def test_exact_across_isa_and_threads(check_exact, rng):
    x = rng.standard_normal((33, 17)).astype(np.float32)
    check_exact(lambda t: dropout(t, 0.2, seed=5, draw=1), x)


def test_keep_boundary_is_inclusive():
    # Element 0's u is k / 2^24 exactly: p = u keeps it, the next float32 above drops it.
    k = mix(mix(3 + 0 * GOLDEN) + GOLDEN) >> 40
    assert dropout_mask((1,), k / 2 ** 24, 3, 0)[0] != 0
    assert dropout_mask((1,), (k + 1) / 2 ** 24, 3, 0)[0] == 0


@pytest.mark.parametrize("p", [1.0 - 1e-9, 1.0 - 2.0 ** -24, 0.999])
def test_p_near_one(p):
    n = 4000
    np.testing.assert_array_equal(bits(dropout_mask((n,), p, 8, 1)), bits(ref_mask(n, p, 8, 1)))


def numpy_mask(shape, p, seed, draw):
    """The multiplier computed in numpy uint64 arithmetic, a reference independent of the
    kernel (a whole array at once: fast enough for large masks)."""
    n = int(np.prod(shape))
    stream = mix(seed + draw * GOLDEN)
    z = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GOLDEN) + np.uint64(stream)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    u = ((z >> np.uint64(40)).astype(np.float64) / 2 ** 24).astype(np.float32)
    keep = u >= np.float32(p)
    return np.where(keep, np.float32(1.0 / (1.0 - p)), np.float32(0)).reshape(shape)


@pytest.mark.parametrize("op,shape,lead", [(dropout, (3, 70_001), None),
                                           (dropout2d, (6, 5, 101, 203), 2),
                                           (dropout1d, (3, 7, 30_011), 2)])
def test_large_masks_at_every_thread_count(op, shape, lead, same_bits_everywhere, rng):
    """Masks and products large enough for the threads to split them (and for several blocks
    of the kernel per thread), against the numpy reference, forward and backward."""
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    mask = numpy_mask(shape[:lead] if lead else shape, 0.3, 11, 4)
    mask = mask.reshape(mask.shape + (1,) * (len(shape) - mask.ndim))

    def run(threads):
        xt = om.tensor(x, requires_grad=True)
        y = op(xt, 0.3, seed=11, draw=4)
        y.backward(g)
        return [y.detach().numpy(), xt.grad.numpy()]

    y, gx = same_bits_everywhere(run, threads=(1, 2, 3))
    np.testing.assert_array_equal(bits(y), bits(x * mask))
    np.testing.assert_array_equal(bits(gx), bits(g * mask))


@pytest.mark.parametrize("n", [*range(1, 36), 1023, 1025, 140_003])
def test_mask_on_every_path(isa, n):
    """Each path's draw (the vector ones take 4 to 8 lanes and a scalar tail; blocks of 1024
    and the threads' shares start anywhere) against the numpy reference, at 1 to 3 threads."""
    for threads in (1, 2, 3):
        om.set_num_threads(threads)
        np.testing.assert_array_equal(bits(dropout_mask((n,), 0.3, 2 ** 63 + 9, 7)),
                                      bits(numpy_mask((n,), 0.3, 2 ** 63 + 9, 7)),
                                      err_msg=f"{isa} path, {threads} threads")


def test_a_strided_input_gives_the_contiguous_inputs_bits(rng):
    x = rng.standard_normal((40, 30)).astype(np.float32)
    strided = dropout(om.tensor(x).T, 0.5, seed=2, draw=9).numpy()
    contiguous = dropout(om.tensor(np.ascontiguousarray(x.T)), 0.5, seed=2, draw=9).numpy()
    np.testing.assert_array_equal(bits(strided), bits(contiguous))


def test_the_kernel_refuses_bad_arrays():
    from onemodel._kernels import _dropout
    x = np.ones(8, np.float32)
    y = np.empty(8, np.float32)
    keep = np.empty(8, np.uint8)
    with pytest.raises(TypeError, match="x must be float32"):
        _dropout.forward(1, 100, 2.0, x.astype(np.float64), y, keep, 1)
    with pytest.raises(ValueError, match="differ in size"):
        _dropout.forward(1, 100, 2.0, x, np.empty(9, np.float32), keep, 1)
    with pytest.raises(ValueError, match="whole number of elements per mask element"):
        _dropout.forward(1, 100, 2.0, x, y, np.empty(3, np.uint8), 1)
    with pytest.raises(ValueError, match="keep must be a C-contiguous writeable uint8"):
        _dropout.forward(1, 100, 2.0, x, y, np.empty(8, np.int32), 1)
    with pytest.raises(ValueError, match="must not overlap"):
        _dropout.forward(1, 100, 2.0, x, x, keep, 1)
    with pytest.raises(ValueError, match="nthreads must be >= 1"):
        _dropout.forward(1, 100, 2.0, x, y, keep, 0)
    read_only = np.empty(8, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="y is read-only"):
        _dropout.forward(1, 100, 2.0, x, read_only, keep, 1)
    with pytest.raises(ValueError, match="g of shape"):
        _dropout.backward(keep, 2.0, x, np.empty(4, np.float32), 1)
    with pytest.raises(TypeError, match="g must be a numpy.ndarray"):
        _dropout.backward(keep, 2.0, [1.0] * 8, y, 1)
    # Nothing is written by a refused call.
    y[:] = 7.0
    few = np.full(3, 5, np.uint8)
    with pytest.raises(ValueError):
        _dropout.forward(1, 100, 2.0, x, y, few, 1)
    assert np.all(y == 7.0) and np.all(few == 5)
    with pytest.raises(ValueError, match="must not overlap"):
        _dropout.backward(keep, 2.0, x, x, 1)
    assert np.all(x == 1.0)
