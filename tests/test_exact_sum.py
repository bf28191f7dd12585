"""The exact gradient sum of distributed.py: against exact rationals, and order-free."""
from fractions import Fraction

import numpy as np
import pytest

import onemodel as om
from onemodel import distributed
from onemodel.distributed import ExactSum


def adversarial(m, n, seed):
    """m micro-batches of n elements: wide exponents, cancelling pairs, zeros, subnormals."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((m, n)) * 2.0 ** rng.integers(-40, 20, (m, n))
    g[:, : n // 8] = 0.0
    g[1::2, n // 8: n // 4] = -g[0::2, n // 8: n // 4][: len(g[1::2])]  # exact cancellation
    g[0, n // 4: n // 4 + 8] = 1e-45  # subnormals beside normal values
    g[-1, n // 4 + 8: n // 4 + 16] = 2.0 ** 24 * 3 + 1  # large, odd: every bit counts
    return g.astype(np.float32)


def exact_sum(rows, weights=None):
    weights = weights or [1] * len(rows)
    return [sum(Fraction(float(r[e])) * w for r, w in zip(rows, weights))
            for e in range(rows.shape[1])]


def reduce_split(rows, world, weights=None, prior=None, order=None):
    """The sum as `world` workers would compute it (strided shares, integer partial sums
    added in `order`)."""
    weights = weights or [1] * len(rows)
    parts = []
    for r in range(world):
        acc = ExactSum([rows.shape[1]])
        acc.exponents = [prior if prior is not None else _prior(rows, weights)]
        for i in range(r, len(rows), world):
            acc.add([rows[i]], weights[i])
        acc.normalise()
        parts.append(acc)
    total = ExactSum([rows.shape[1]])
    total.exponents = parts[0].exponents
    for p in [parts[k] for k in (order if order is not None else range(world))]:
        total.lo += p.lo
        total.hi += p.hi
        total.counts += p.counts
    return total.results(1, update_priors=False)[0]


def f32(x):
    """The float32 nearest the rational x (ties to even), exactly."""
    c = np.float32(float(x))
    best = None
    for cand in (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))):
        if not np.isfinite(cand):
            continue
        d = abs(Fraction(float(cand)) - x)
        key = (d, int(np.array(cand).view(np.int32)) & 1)
        if best is None or key < best[0]:
            best = (key, cand)
    return best[1]


def _prior(rows, weights):
    top = max(distributed.max_exponent(r.astype(np.float64) * w) or -200
              for r, w in zip(rows, weights))
    return top + len(rows).bit_length()


def test_the_sum_is_the_exact_sum_rounded_once():
    rows = adversarial(12, 512, 0)
    exact = exact_sum(rows)
    got = reduce_split(rows, 1)
    want = np.array([f32(x) for x in exact], np.float32)
    err = np.array([abs(Fraction(float(g)) - x) for g, x in zip(got, exact)], dtype=object)
    tree = distributed.tree_sum(list(rows))
    tree_err = np.array([abs(Fraction(float(t)) - x) for t, x in zip(tree, exact)],
                        dtype=object)
    absolute = np.array([sum(abs(Fraction(float(r[e]))) for r in rows)
                         for e in range(rows.shape[1])], dtype=object)
    # Normwise (the largest error against the largest sum of |terms| of the tensor, the
    # condition of a vector sum): no worse than float32's pairwise tree (here 3.7e-8 against
    # 6.5e-8: only the final rounding is left). Componentwise, elements more than 2^31 below
    # the tensor's largest sum lie on the last bits of its grid.
    ours = float(max(err) / max(absolute))
    theirs = float(max(tree_err) / max(absolute))
    assert ours <= theirs and ours <= 2.0 ** -24, (ours, theirs)  # the final rounding alone
    # Correctly rounded wherever every term lies on the grid.
    grid = Fraction(2) ** (_prior(rows, [1] * len(rows)) - 54)
    on_grid = [all(Fraction(float(r[e])) % grid == 0 for r in rows)
               for e in range(rows.shape[1])]
    assert all(g == w for g, w, k in zip(got, want, on_grid) if k) and sum(on_grid) > 32
    assert (got == want).sum() > (tree == want).sum()


@pytest.mark.parametrize("seed", [1, 2])
def test_same_bits_for_every_split_and_order(seed):
    rows = adversarial(12, 300, seed)
    weights = [8] * 11 + [5]
    first = reduce_split(rows, 1, weights)
    rng = np.random.default_rng(seed)
    for world in (2, 3, 4, 6, 12):
        order = list(rng.permutation(world))
        assert reduce_split(rows, world, weights, order=order).tobytes() == first.tobytes()


def test_weights_count_samples():
    # A micro-batch of 8 and one of 4: the mean over the 12 samples.
    rows = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
    acc = ExactSum([64])
    acc.add([rows[0]], 8)
    acc.add([rows[1]], 4)
    got = acc.results(12)[0]
    want = [f32((8 * Fraction(float(a)) + 4 * Fraction(float(b))) / 12)
            for a, b in zip(rows[0], rows[1])]
    assert got.tolist() == np.array(want, np.float32).tolist()


def test_non_finite_elements_stay_non_finite_and_clamped_ones_warn():
    acc = ExactSum([4])
    acc.add([np.array([1.0, np.inf, np.nan, -np.inf], np.float32)])
    acc.add([np.array([1.0, -np.inf, 2.0, -np.inf], np.float32)])
    got = acc.results(2)[0]
    assert got[0] == 1.0 and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == -np.inf
    acc = ExactSum([2])
    acc.add([np.array([1.0, 2.0 ** 50], np.float32)])
    with pytest.warns(RuntimeWarning, match="clamped"):
        acc.results(1)
    assert acc.exponents[0] == 44  # the prior follows the result


def test_all_reduce_gradients_takes_counts_and_keeps_missing_none():
    a = om.tensor(np.zeros(2, np.float32), requires_grad=True)
    b = om.tensor(np.zeros(2, np.float32), requires_grad=True)
    g = np.array([1.0, 3.0], np.float32)
    distributed.all_reduce_gradients([a, b], [(0, [g, None], 8), (1, [g * 4, None], 4)])
    assert a.grad.numpy().tolist() == [2.0, 6.0] and b.grad is None
    distributed.all_reduce_gradients([a, b], [(0, [g, None]), (1, [g * 3, None])])
    assert a.grad.numpy().tolist() == [2.0, 6.0]


def test_rounding_of_wide_sums_is_exact():
    # The two-limb path: sums far above the grid's int64 range.
    rng = np.random.default_rng(4)
    rows = (rng.standard_normal((6, 200)) * 2.0 ** 30).astype(np.float32)
    acc = ExactSum([200])
    acc.exponents = [0]  # a stale prior: the sums are 2^30 larger than it
    for r in rows:
        acc.add([r], 3)
    got = acc.results(7, update_priors=False)[0]
    want = [f32(sum(3 * Fraction(float(r[e])) for r in rows) / 7) for e in range(200)]
    assert got.tolist() == np.array(want, np.float32).tolist()
