"""The exact gradient sum of distributed.py: against exact rationals, and order-free."""
import math
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
    total.normalise()  # two limbs, zero
    for p in [parts[k] for k in (order if order is not None else range(world))]:
        total.lo += p.lo
        total.hi[0] += p.hi[0]
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


# -- the C passes against the numpy reference they replaced -------------------------------------
def _ref_bit_length(x):
    e = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    shift = np.maximum(e - 1, 0)
    return e - ((x >> shift) == 0) * (x > 0)


def _ref_finish(ax, sticky, exp, neg, n):
    shift = np.zeros(ax.shape, np.int64)
    small = ax < (n << 26)
    if small.any():
        idx = np.nonzero(small)[0]
        s = np.maximum(26 + n.bit_length() - _ref_bit_length(ax[idx]), 0)
        ax = ax.copy()
        ax[idx] <<= s
        shift[idx] = s
    q = ax // n
    z = q | np.minimum(ax - q * n, 1) | sticky
    with np.errstate(over="ignore"):
        f = np.ldexp(z.astype(np.float32), np.asarray(exp - shift, np.int32))
    return np.where(neg, -f, f).astype(np.float32)


def ref_to_float32(hi, lo, grid, n):
    """The numpy rounding of the limbs (the C pass's reference)."""
    hi = hi.astype(np.int64) + (lo >> 56)
    lo = lo & ((1 << 56) - 1)
    fits = (hi >= -16) & (hi < 16)
    out = np.empty(hi.shape, np.float32)
    i = np.nonzero(fits)[0]
    x = (hi[i] << 56) + lo[i]
    out[i] = _ref_finish(np.abs(x), 0, grid, x < 0, n)
    j = np.nonzero(~fits)[0]
    hi, lo = hi[j], lo[j]
    neg = hi < 0
    borrow = neg & (lo > 0)
    mh = np.where(neg, -hi - borrow, hi)
    ml = np.where(borrow, (1 << 56) - lo, lo)
    k = np.maximum(_ref_bit_length(mh) + 56 - 61, 0)
    inside = k <= 56
    ax = np.where(inside, (mh << np.clip(56 - k, 0, 63)) | (ml >> np.minimum(k, 63)),
                  mh >> np.clip(k - 56, 0, 63))
    cut_lo = ml & ((np.int64(1) << np.minimum(k, 56)) - 1)
    cut_hi = mh & ((np.int64(1) << np.clip(k - 56, 0, 62)) - 1)
    sticky = np.where(inside, cut_lo != 0, (ml != 0) | (cut_hi != 0)).astype(np.int64)
    out[j] = _ref_finish(ax, sticky, k + grid, neg, n)
    return out


def ref_quantise(g, scale, hi, lo, codes):
    """The numpy quantisation (the C pass's reference): returns (clamped, non-finite)."""
    limit = 2.0 ** 98 - 2.0 ** 45
    v = g.astype(np.float64) * scale
    bad = ~np.isfinite(v)
    codes[bad] |= np.where(np.isnan(v), 4, np.where(v > 0, 1, 2)).astype(np.uint8)[bad]
    v[bad] = 0.0
    clamped = int(np.count_nonzero(np.abs(v) > limit))
    np.clip(v, -limit, limit, out=v)
    t = np.floor(v * 2.0 ** -56)
    hi += t.astype(np.int64)
    lo += np.rint(v - t * 2.0 ** 56).astype(np.int64)
    return clamped, int(bad.sum())


def adversarial_limbs(n, seed):
    """Limbs of every kind: one int64 or two, carries pending, ties, both signs, zeros."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 118, n)
    mag = [int(rng.integers(0, 1 << 62)) >> max(62 - int(b), 0) << max(int(b) - 62, 0)
           for b in bits]
    x = [m if s else -m for m, s in zip(mag, rng.integers(0, 2, n))]
    x[:8] = [0, 1, -1, 1 << 59, -(1 << 60), (1 << 60) - 1, 3 << 56, -(3 << 56) - 1]
    hi = np.array([v >> 56 for v in x], np.int64)
    lo = np.array([v & ((1 << 56) - 1) for v in x], np.int64)
    carry = rng.integers(0, 64, n)  # unnormalised: lo up to 2^62, hi less
    hi -= carry
    lo += carry << 56
    return hi, lo


@pytest.mark.parametrize("seed", [5, 6])
def test_the_c_passes_equal_the_numpy_reference(seed, isa):
    from onemodel._kernels import _exact
    rng = np.random.default_rng(seed)
    rows = adversarial(8, 4096, seed)
    rows[3, 100:104] = [np.inf, -np.inf, np.nan, 2.0 ** 80]
    rows[5, 101:103] = [np.inf, 3e38]
    rows[6, 200:300] = (rng.integers(-(1 << 24), 1 << 24, 100) * 0.5).astype(np.float32)  # ties
    for grid, weight in ((-60, 1), (-30, 12), (0, 8), (-20, 3), (12, 5)):
        rh, rl = np.zeros(rows.shape[1], np.int64), np.zeros(rows.shape[1], np.int64)
        # The first pass writes the limbs as zero ones (`fresh`: old integers, not read).
        hi, lo = rng.integers(-(1 << 62), 1 << 62, (2, rows.shape[1]))
        codes, rcodes = np.zeros(rows.shape[1], np.uint8), np.zeros(rows.shape[1], np.uint8)
        scale = weight * 2.0 ** -grid
        for i in (3, 0, 1, 2, 4, 5, 6, 7):  # a row with non-finite elements first
            r = rows[i]
            done, clamped, bad, wide, _ = _exact.add(r, scale, 2.0 ** 98 - 2.0 ** 45, hi, lo,
                                                  codes, fresh=i == 3)
            assert (done, clamped, bad, wide) == ((r.size,) + ref_quantise(r, scale, rh, rl,
                                                                           rcodes) + (0,))
            rh += rl >> 56
            rl &= (1 << 56) - 1
            assert hi.tobytes() == rh.tobytes() and lo.tobytes() == rl.tobytes()
        assert codes.tobytes() == rcodes.tobytes() and codes.any()
    for count in (1, 2, 3, 7, 12, 256, 1000003, (1 << 35) - 1):
        hi, lo = adversarial_limbs(3000, seed + count)
        for grid in (-200, -150, -80, 0, 40):
            want = ref_to_float32(hi, lo, grid, count)
            got = distributed.to_float32(hi, lo, grid, count)
            assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (count, grid)


def _integers(hi, lo):
    return [(int(h) << 56) + int(v) for h, v in zip(hi, lo)]


@pytest.mark.parametrize("bits", [56, 62, 63])
def test_packing_writes_each_integer_whole_modulo_2_64(bits, isa):
    from onemodel._kernels import _exact
    hi, lo = adversarial_limbs(2000, bits)
    want = _integers(hi, lo)
    ph, pl = hi.copy(), lo.copy()
    wide = _exact.pack(ph, pl, bits)
    assert wide == sum(not -(1 << bits) <= x < 1 << bits for x in want) and 0 < wide < 2000
    assert _integers(ph, pl % (1 << 56)) == want  # hi normalised, lo's low bits kept
    assert [int(v) % (1 << 64) for v in pl] == [x % (1 << 64) for x in want]
    with pytest.raises(ValueError, match="bits"):
        _exact.pack(ph, pl, 64)


@pytest.mark.parametrize("count", [1, 2, 3, 12, 256, 1000003])
def test_packed_integers_round_as_their_limbs(count, isa):
    hi, lo = adversarial_limbs(3000, count)
    fits = np.abs(hi + (lo >> 56)) < 120  # whole integers inside int64
    hi, lo = hi[fits], lo[fits]
    packed = np.array([x - (1 << 64) if x >= 1 << 63 else x
                       for x in (v % (1 << 64) for v in _integers(hi, lo))], np.int64)
    for grid in (-200, -150, -60, 0):
        want = distributed.to_float32(hi, lo, grid, count)
        got, top = distributed._round(None, packed, grid, count)
        assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (count, grid)
        assert top == distributed.max_exponent(want)  # the prior, from the same pass


@pytest.mark.parametrize("count", [1, 3, 7, 12, 256, 1000003])
def test_the_one_int64_paths_round_near_midpoints_as_the_reference(count, isa):
    # Every block inside one int64 (|X| < 2^60), so the fast paths run: quotients on and a
    # fraction of a unit beside float32 midpoints ((2K + 1)·2^s, 2K + 1 of 25 bits), where
    # the quotient in double lands on the midpoint itself, random ones, both signs; grids
    # that scale them to normal, subnormal, zero and huge results.
    rng = np.random.default_rng(count)
    k = rng.integers(1 << 23, 1 << 24, 700)
    s = 34 - count.bit_length()
    x = [((2 * int(a) + 1) << s) * count + int(d)
         for a, d in zip(k, rng.integers(-3, 4, 700))]
    x += [int(v) >> int(s) for v, s in zip(rng.integers(0, 1 << 60, 700),
                                          rng.integers(0, 60, 700))]
    x = np.array([v if s else -v for v, s in zip(x, rng.integers(0, 2, len(x)))], np.int64)
    assert np.abs(x).max() < 1 << 60
    hi, lo = x >> 56, x & ((1 << 56) - 1)
    for grid in (0, -60, -150 - s - 24, -200, 90):
        want = ref_to_float32(hi, lo, grid, count)
        for got in (distributed.to_float32(hi, lo, grid, count),
                    distributed.to_float32(None, x, grid, count)):
            assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist(), (count, grid)
    exact = [f32(Fraction(int(v), count) / 2 ** 60) for v in x[:60]]  # rounded once
    assert distributed.to_float32(hi, lo, -60, count)[:60].tolist() == exact


def test_reused_results_are_the_same_bits_in_one_buffer():
    rows = adversarial(4, 300, 9)
    acc = ExactSum([200, 100])
    for r in rows:
        acc.add([r[:200], r[200:]], 3)
    fresh = acc.results(12, update_priors=False)
    first = acc.results(12, update_priors=False, reuse=True)
    again = acc.results(12, update_priors=False, reuse=True)
    for f, a, b in zip(fresh, first, again):
        assert f.tobytes() == a.tobytes() == b.tobytes()
        assert np.shares_memory(a, b) and not np.shares_memory(f, a)


def test_a_reset_sum_is_a_new_sum():
    # reset() leaves the old integers in the limbs: the first add of a step overwrites them
    # (also when a non-finite element stops the first pass), as a new sum would hold.
    step1 = [np.full(5, 3.5, np.float32), np.arange(3, dtype=np.float32)]
    step2 = [np.array([1.0, -2.0, np.inf, 4.0, 0.5], np.float32), None]
    acc = ExactSum([5, 3])
    acc.add(step1, 2)
    acc.add(step1, 2)
    acc.results(4)
    acc.reset()
    new = ExactSum([5, 3])
    new.exponents = list(acc.exponents)
    for s in (acc, new):
        s.add(step2, 3)
        s.add([step2[0] * 2, None], 1)
    got, want = acc.results(4), new.results(4)
    assert got[1] is None and want[1] is None
    assert got[0].tobytes() == want[0].tobytes()
    assert np.isinf(got[0][2]) and got[0][0] == 1.25


@pytest.mark.parametrize("bits", [56, 62])
def test_adding_and_packing_in_one_pass_is_adding_then_packing(bits, isa):
    # Also when a non-finite element stops the first pass (no codes yet) and a second one
    # goes on from there, as ExactSum does.
    from onemodel._kernels import _exact
    rows = adversarial(3, 2000, bits)
    rows[2, 1500] = np.inf
    hi, lo = adversarial_limbs(2000, bits)
    hi2, lo2 = hi.copy(), lo.copy()
    for r in rows[:2]:
        _exact.add(r, 2.0 ** 70, 2.0 ** 98, hi, lo)
        _exact.add(r, 2.0 ** 70, 2.0 ** 98, hi2, lo2)
    done, _, _, wide, _ = _exact.add(rows[2], 2.0 ** 70, 2.0 ** 98, hi, lo, pack_bits=bits)
    codes = np.zeros(2000 - done, np.uint8)
    more = _exact.add(rows[2][done:], 2.0 ** 70, 2.0 ** 98, hi[done:], lo[done:], codes,
                      pack_bits=bits)
    assert done == 1500 and more[2] == 1 and codes[0] == 1
    codes2 = np.zeros(2000, np.uint8)
    _exact.add(rows[2], 2.0 ** 70, 2.0 ** 98, hi2, lo2, codes2)
    assert wide + more[3] == _exact.pack(hi2, lo2, bits) > 0
    assert hi.tobytes() == hi2.tobytes() and lo.tobytes() == lo2.tobytes()


@pytest.mark.parametrize("bits", [56, 62])
def test_fresh_limbs_packed_directly_are_those_added_then_packed(bits, isa):
    # A worker's only micro-batch is written as packed integers without the hi limbs when every
    # integer lies inside 2^(bits - 1); a block beyond that (here the third of four, 512 each)
    # makes the pass write every hi limb, the skipped ones too; a non-finite element stopping
    # the pass leaves every hi limb before it written. Either way the packed integers are
    # those of adding, then packing.
    from onemodel._kernels import _exact
    rng = np.random.default_rng(bits)
    g = (rng.standard_normal(2000) * 2.0 ** rng.integers(-30, 0, 2000)).astype(np.float32)
    g[:8] = [0.0, -0.0, 1e-45, -1e-45, 0.75, -0.75, 2.5, -2.5]  # ties, signs, subnormals
    scale = 2.0 ** (bits - 3)
    for case in ("inside", "beyond", "stopped"):
        r = g.copy()
        if case == "beyond":
            r[1100] = 2.0 ** 3  # the integer 2^bits: outside the packing range too
        if case == "stopped":
            r[1300] = np.nan
        hi, lo = rng.integers(-(1 << 62), 1 << 62, (2, r.size))  # stale limbs
        done, _, _, wide, skipped = _exact.add(r, scale, 2.0 ** 98, hi, lo, fresh=True,
                                               pack_bits=bits)
        want_hi, want_lo = np.zeros(r.size, np.int64), np.zeros(r.size, np.int64)
        _, _, _, want_wide, _ = _exact.add(r[:done], scale, 2.0 ** 98, want_hi[:done],
                                           want_lo[:done])
        assert want_wide == 0 and wide == _exact.pack(want_hi[:done], want_lo[:done], bits)
        assert (done, skipped) == {"inside": (2000, True), "beyond": (2000, False),
                                   "stopped": (1300, False)}[case]
        assert lo[:done].tobytes() == want_lo[:done].tobytes()
        if skipped:
            assert ((lo >> 56) != hi).any()  # stale: not written, and lo >> 56 gives them
        else:
            assert hi[:done].tobytes() == want_hi[:done].tobytes()


@pytest.mark.parametrize("scale", [1.0, 2.0 ** 20, 2.0 ** 52])
@pytest.mark.parametrize("fresh", [True, False])
def test_the_fused_packed_add_is_the_general_pass(fresh, scale, isa):
    # add_packed quantises and adds a block (512 elements) at a time while every |g * scale|
    # of the block is finite and below 2^55, with the integers of the general pass; it stops
    # at the start of the first block that is not (here the third of four, by one element
    # each way: at 2^55, and a NaN), having written nothing of it. The scales give values with
    # fractions and ties (a negative one rounds as fl(v + 2^56) does: to a multiple of 8 near
    # 2^52), and values beyond 2^52, integers already.
    from onemodel._kernels import _exact
    rng = np.random.default_rng(3 + fresh)
    g = rng.standard_normal(2000) * 2.0 ** rng.integers(-30, 3, 2000)
    g = (g * min(1.0, 2.0 ** 54 / scale / np.abs(g).max())).astype(np.float32)  # below 2^54
    g[:8] = [0.0, -0.0, 1e-45, -1e-45, 0.75, -0.75, 2.5, -2.5]  # ties, signs, subnormals
    g[8:16] = np.array([0.5, -0.5, 1.5, -1.5, 4.0, -4.0, 12.0, -12.0]) / scale  # ties of v
    start = rng.integers(-(1 << 58), 1 << 58, g.size)  # packed integers of earlier adds
    edge = np.float32(2.0 ** 55 / scale)
    for edge, done in ((None, 2000), (edge, 1024), (-edge, 1024), (np.nan, 1024)):
        r = g.copy()
        if edge is not None:
            r[1100] = edge
        lo = start.copy()
        assert _exact.add_packed(r, scale, lo, fresh=fresh) == done
        hi, want = np.zeros(done, np.int64), np.zeros(done, np.int64)
        _exact.add(r[:done], scale, 2.0 ** 98, hi, want, pack_bits=56)
        if not fresh:
            want += start[:done]
        assert lo[:done].tobytes() == want.tobytes()
        assert lo[done:].tobytes() == start[done:].tobytes()  # the rest untouched
    with pytest.raises(ValueError, match="length"):
        _exact.add_packed(g, scale, np.zeros(g.size - 1, np.int64))


@pytest.mark.parametrize("seed", range(4))
def test_the_shard_sum_is_the_sum_in_limbs(seed, isa):
    """_exact.sum_rows (a single step's shard sum: in double where the integers fit in 64
    bits) gives the bits of adding the rows into the limbs
    and rounding, on random rows with grid ties, values about 2^52 and 2^56 grid units, small
    negative values (the split's own rounding there), non-finite elements and clamping; and the
    numpy reference's bits (the limbs' passes run on the same path as the shard sum, so a
    rounding step wrong in both would agree with itself)."""
    rng = np.random.default_rng(seed)
    for trial in range(15):
        rows_n, n = int(rng.integers(1, 5)), int(rng.integers(1, 1400))
        e = int(rng.integers(-20, 40))
        rows = (rng.standard_normal((rows_n, n)) * 2.0 ** rng.integers(-70, 8, (rows_n, n))
                ).astype(np.float32)
        edge = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -3.25, -1e-3, 2.0 ** 52 + 1,
                         -(2.0 ** 52) - 1, 2.0 ** 56, -(2.0 ** 56), 2.0 ** 55 + 8,
                         -(2.0 ** 55) - 8]) * 2.0 ** (e - 54)
        rows[0, :min(n, edge.size)] = edge[:n].astype(np.float32)
        if trial % 5 == 4:
            rows[-1, n // 2] = [np.inf, -np.inf, np.nan, np.float32(2.0 ** (e + 50))][trial % 4]
        weights = [int(w) for w in rng.integers(1, 300, rows_n)]
        count = int(rng.integers(1, 1000))
        assert_shard_sum_is_the_reference(rows, weights, e, count)


def assert_shard_sum_is_the_reference(rows, weights, e, count):
    """_exact.sum_rows of the rows (grid 2^(e - 54)) against adding them into the limbs and
    rounding, and against the numpy reference."""
    from onemodel._kernels import _exact
    n = rows.shape[1]
    limbs = ExactSum([n])
    limbs.exponents = [e]
    for row, w in zip(rows, weights):
        limbs.add([row], w)
    with np.errstate(invalid="ignore"):
        want = limbs.result(0, count)
    scale = np.array([w * 2.0 ** -(e - 54) for w in weights])
    rh, rl, codes = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.uint8)
    for row, s in zip(rows, scale):
        ref_quantise(row, s, rh, rl, codes)
    reference = ref_to_float32(rh, rl, e - 54, count)
    reference[codes == 1], reference[codes == 2] = np.inf, -np.inf
    reference[(codes & 4 != 0) | (codes == 3)] = np.nan
    assert want.tobytes() == reference.tobytes()
    out = np.empty(n, np.float32)
    apart = [row.copy() for row in rows]  # rows anywhere in memory, as received or held
    _exact.sum_rows(apart, scale, 2.0 ** 98 - 2.0 ** 45, e - 54, count, out)
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize("count", [1, 2, 256, 3, 255, 1000])
def test_the_shard_sum_in_double_is_exact_at_its_edges(count, isa):
    """Blocks inside an int64 are summed in double (a two-sum's rounded sum and its error):
    a sum that double rounds onto a float32 midpoint while its error moves it off, sums
    between 2^60 and 2^62 grid units, negative values rounded as the split rounds them
    (fl(v + 2^56)), ties, results in float32's subnormal range, and cancelling rows, each in
    a block of its own of up to 4 rows, as the limbs give them."""
    units = [
        [2.0 ** 55, 2.0 ** 31, 1.0],  # fl(X) a float32 midpoint, X one above it
        [2.0 ** 55, 2.0 ** 31, -1.0],  # and one below
        [2.0 ** 55 + 2.0 ** 32, -(2.0 ** 31), 3.0, -2.0],
        [2.0 ** 60, 2.0 ** 59 + 2.0 ** 40],  # above 2^60
        [-(2.0 ** 60), -(2.0 ** 58), 2.0 ** 33],
        [-5.0, -0.375, 2.5, -3.5],  # the split's rounding of negative values, ties
        [2.0 ** 56, -(2.0 ** 56), -(2.0 ** 56) + 2.0 ** 33, 0.5],
        [1.5, 0.5],
    ]
    rng = np.random.default_rng(count)
    for e in (40, 0, -60, -92):  # -92: the noise's results in float32's subnormal range
        for values in units:
            rows = np.zeros((len(values), 512), np.float32)
            for w, v in enumerate(values):  # each row's value then small noise, all exact
                rows[w, 0] = np.float32(v * 2.0 ** (e - 54))
                noise = rng.integers(-2 ** 20, 2 ** 20, 511) * 2.0 ** (e - 54 - 3)
                rows[w, 1:] = noise.astype(np.float32)
            assert all(float(rows[w, 0]) == v * 2.0 ** (e - 54) for w, v in enumerate(values))
            assert_shard_sum_is_the_reference(rows, [1] * len(values), e, count)


def test_the_shard_sum_refuses_rows_that_do_not_match():
    """A row shorter or longer than the output, or a scale per row missing, is refused
    before the kernel reads anything."""
    from onemodel._kernels import _exact
    out = np.zeros(5, np.float32)
    rows = [np.ones(5, np.float32), np.ones(4, np.float32)]
    with pytest.raises(ValueError, match="row 1 has 4 elements, out 5"):
        _exact.sum_rows(rows, np.ones(2), 2.0 ** 98, 0, 1, out)
    with pytest.raises(ValueError, match="1 scales for 2 rows"):
        _exact.sum_rows(rows[:1] * 2, np.ones(1), 2.0 ** 98, 0, 1, out)
    with pytest.raises(ValueError, match="1 to 127 rows, got 0"):
        _exact.sum_rows([], np.ones(0), 2.0 ** 98, 0, 1, out)
    assert not out.any()


def test_a_single_step_refuses_an_add_that_is_not_final():
    """In a single step (one micro-batch a worker) each parameter is added once, final: a
    second micro-batch's add is refused before anything is written."""
    acc = ExactSum([4])
    acc._single = True  # what reset(single=True) sets under mpiexec with W > 1
    acc._allocate_exchange()
    with pytest.raises(RuntimeError, match="adds each parameter once, final"):
        acc.add_one(0, np.ones(4, np.float32), 1, final=False)
    assert acc.counts[0] == 0 and acc._held[0] is None


def _integer_sum(rows, weights, grid):
    """The sum's integer by Python integers: each term v clamped below 2^98 units and split as
    the kernel splits it, v = f·2^56 + t (f = floor(v / 2^56), t computed in double), t
    rounded half to even; then added."""
    limit = 2.0 ** 98 - 2.0 ** 45
    total = []
    for e in range(rows.shape[1]):
        q = 0
        for r, w in zip(rows, weights):
            v = max(-limit, min(limit, float(r[e]) * w * 2.0 ** -grid))  # exact in double
            f = math.floor(v * 2.0 ** -56)
            q += (f << 56) + round(v - f * 2.0 ** 56)
        total.append(q)
    return total


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the clamped elements' warning
@pytest.mark.parametrize("m, shift", [(12, 0), (12, -12), (12, -50), (130, 0)])
def test_packed_chunks_and_two_limbs_hold_the_integer_sum(monkeypatch, m, shift):
    # Small chunks: a parameter goes over to two limbs in the middle of an add (its integers
    # beyond 2^56 from a prior too low, or clamped), or after 127 micro-batches; every way
    # holds the integer sum of the terms rounded onto the grid.
    monkeypatch.setattr(distributed.exact, "_CHUNK", 64)
    rows = adversarial(m, 300, 5)
    weights = [3 + i % 5 for i in range(m)]
    acc = ExactSum([300])
    acc.exponents = [_prior(rows, weights) + shift]
    for r, w in zip(rows, weights):
        acc.add([r], w)
    assert acc._limbs[0] == (shift != 0 or m > 127)
    integers = _integer_sum(rows, weights, acc.grid(0))
    hi = np.array([q >> 56 for q in integers], np.int64)
    lo = np.array([q & ((1 << 56) - 1) for q in integers], np.int64)
    want = distributed.to_float32(hi, lo, acc.grid(0), 7)
    assert acc.results(7, update_priors=False)[0].tobytes() == want.tobytes()


def test_the_sum_holds_8_bytes_an_element_and_rounds_in_place():
    import tracemalloc
    n = 200_000
    rows = np.random.default_rng(2).standard_normal((8, n)).astype(np.float32)
    tracemalloc.start()
    acc = ExactSum([n // 4, 3 * n // 4])
    acc.exponents = [5, 5]
    for r in rows:
        acc.add([r[:n // 4], r[n // 4:]], 2)
    means = acc.results(16, reuse=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    scratch = 2 * 8 * min(distributed.exact._CHUNK, 3 * n // 4)
    assert peak <= 8 * n + scratch + 65536, (peak, 8 * n)  # two limbs were 16 bytes, + 4
    assert all(np.shares_memory(g, acc.lo) for g in means)
    assert means[1].tobytes() == acc.results(16, reuse=True)[1].tobytes()
    with pytest.raises(RuntimeError, match="rounded in place"):
        acc.results(8)


def test_buckets_divide_a_small_model_in_four_and_a_large_one_in_25_mb():
    # Reductions overlap backward only from the second bucket on: a model under 100 MB gets
    # buckets of a quarter of its gradients (whole parameters, last layers first: four where
    # the sizes allow), a larger one buckets of at most DDP's 25 MB, a parameter larger than
    # that one of its own.
    even = [64 * 64, 64] * 12
    assert len(ExactSum(even).buckets) == 4
    mlp = [784 * 1024, 1024, 1024 * 1024, 1024, 10 * 1024, 10]
    split = ExactSum(mlp)  # two: the last layers (final first in backward), then the first
    assert split.members == [[2, 3, 4, 5], [0, 1]]
    assert len(ExactSum(mlp, bucket_bytes=25 << 20).buckets) == 1  # the former default
    large = [8 << 20] * 20  # 20 parameters of 32 MB: one a bucket
    assert len(ExactSum(large).buckets) == 20
    medium = [1 << 20] * 40  # 160 MB in 4 MB parameters: buckets of 28 MB (7 parameters)
    sizes = [(b - a) * 4 for a, b in ExactSum(medium).buckets]
    assert max(sizes) == 28 << 20 and sum(sizes) == 160 << 20
