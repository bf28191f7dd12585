"""The exact, order-free sum (see the package notes): ExactSum's integers, their
all-reduce or a single step's float32 exchange, and the rounding to float32 (to_float32,
max_exponent); tree_sum, the float32 reduction it replaced, kept as the accuracy baseline."""
from __future__ import annotations

import warnings
from typing import Any, Iterator, Optional, Sequence

import numpy as np

from .._kernels import _exact
from . import world as _world
from .world import _allreduce, rank, wait, world_size

_BELOW = 54          # the grid is 2^(P - 54)
_ABOVE = 44          # |n·g| is clamped below 2^(P + 44): 2^98 grid units
_BUCKET_BYTES = 25 << 20  # DDP's bucket_cap_mb, the most a bucket holds
_MIN_BUCKETS = 4  # a smaller model's gradients in at least this many buckets
_CHUNK = 1 << 15     # elements a packed add quantises at a time (its scratch stays in cache)
_MASK = (1 << 56) - 1


def tree_sum(values: Sequence[np.ndarray]) -> np.ndarray:
    """Float32 sum in a fixed pairwise tree (neighbours added level by level, an odd last one
    moving up): the reduction of earlier versions, kept as the accuracy baseline."""
    level = list(values)
    if not level:
        raise ValueError("tree_sum: nothing to add")
    if len(level) == 1:
        return np.array(level[0], dtype=np.float32)
    while len(level) > 1:
        pairs = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        level = pairs + level[len(pairs) * 2:]
    return level[0]


# -- the exact sum ------------------------------------------------------------------------------
def max_exponent(values: np.ndarray) -> Optional[int]:
    """floor(log2(max |finite element|)), None when there is no finite nonzero element."""
    a = np.asarray(values).reshape(-1)
    if not a.size:
        return None
    top = max(float(a.max()), -float(a.min()))
    if not np.isfinite(top):
        a = np.abs(a[np.isfinite(a)])
        top = float(a.max()) if a.size else 0.0
    return None if top == 0.0 else int(np.frexp(top)[1]) - 1


def to_float32(hi: Optional[np.ndarray], lo: np.ndarray, grid: int, count: int = 1
               ) -> np.ndarray:
    """float32 of (hi·2^56 + lo)·2^grid / count (lo·2^grid / count when hi is None: packed
    integers), rounded once: the quotient keeps at least 26 bits with its remainder jammed into
    the last one (rounding to odd), so its conversion to float32 rounds as the exact value
    would; results in float32's subnormal range round a second time. count is a positive
    integer below 2^35. One pass in C (csrc/exact.c)."""
    return _round(hi, lo, grid, count)[0]


def _round(hi: Optional[np.ndarray], lo: np.ndarray, grid: int, count: int,
           out: Optional[np.ndarray] = None) -> tuple[np.ndarray, Optional[int]]:
    """to_float32 (into `out` if given) and the exponent of its largest finite magnitude
    (max_exponent's)."""
    n = int(count)
    if n != count or not 1 <= n < 1 << 35:
        raise ValueError(f"to_float32: count must be an integer in [1, 2^35), got {count}")
    lo = np.ascontiguousarray(lo, np.int64).reshape(-1)
    if hi is not None:
        hi = np.ascontiguousarray(hi, np.int64).reshape(-1)
    if out is None:
        out = np.empty(lo.shape, np.float32)
    return out, _exponent_of(_exact.round_limbs(hi, lo, int(grid), n, out))


def _exponent_of(top: int) -> Optional[int]:
    """max_exponent of a float32 magnitude given by its bits (None for 0)."""
    if not top:
        return None
    biased = top >> 23  # float32's bits: the biased exponent, or 0 for a subnormal
    return biased - 127 if biased else top.bit_length() - 150


class ExactSum:
    """The exact, order-free sum of weighted float32 arrays of one layout (see the package
    notes): `add` quantises one micro-batch into the integers, one int64 an element (or
    `add_one` one parameter's array, as its gradient becomes final during backward), `reduce`
    all-reduces them, `result` rounds the integers to float32. `sizes` are the element counts
    of the parameters in their order; the integers lay them out in reverse order, in buckets
    of about `bucket_bytes` float32 bytes (DDP's order: the last layers, whose gradients are
    final first, start their reduction while backward goes on). By default a bucket closes
    once it holds a quarter of the gradients or DDP's 25 MB, the smaller: a model under 100 MB
    gets up to four buckets (whole parameters: an MLP whose two large matrices are most of it,
    two), so its reductions overlap backward too, where one 25 MB bucket would wait for the
    whole backward."""

    def __init__(self, sizes: Sequence[int], bucket_bytes: Optional[int] = None) -> None:
        self.sizes = [int(s) for s in sizes]
        if bucket_bytes is None:
            bucket_bytes = min(_BUCKET_BYTES, max(1, 4 * sum(self.sizes) // _MIN_BUCKETS))
        n = len(self.sizes)
        self.offsets = [0] * n
        self.bucket_of = [0] * n
        at = 0
        self.buckets: list[tuple[int, int]] = []
        start = 0
        for k in reversed(range(n)):
            self.offsets[k] = at
            self.bucket_of[k] = len(self.buckets)
            at += self.sizes[k]
            if (at - start) * 4 >= bucket_bytes:
                self.buckets.append((start, at))
                start = at
        if at > start or not self.buckets:
            self.buckets.append((start, at))
        self.members: list[list[int]] = [[] for _ in self.buckets]  # parameters per bucket
        for k, j in enumerate(self.bucket_of):
            self.members[j].append(k)
        self.total = at
        self.exponents: list[int] = [0] * n  # the priors P
        # One int64 an element: each integer whole ("packed"), except for a parameter whose
        # sum outgrows it in this step, which keeps two limbs, hi[k]·2^56 + lo (`_limbs`; its
        # hi limbs allocated for the step). Allocated at the first add (a single step's
        # float32 exchange has no integers).
        self.lo = np.zeros(0, np.int64)
        self.hi: list[Optional[np.ndarray]] = [None] * n
        self._limbs = [False] * n
        chunk = min(_CHUNK, max(self.sizes, default=1)) or 1
        self._scratch = np.empty(chunk, np.int64)  # a chunk's packed integers, or results
        self._high = np.empty(chunk, np.int64)  # their high limbs, when not skipped
        self._in_place = 0  # results rounded into lo's memory (divided by this), 0: none
        self._placed: list[Optional[int]] = [None] * n  # their exponents (max_exponent's)
        # Per parameter: micro-batches with a gradient, clamped elements, non-finite elements;
        # per bucket: integers too wide to pack.
        self.counts = np.zeros(3 * n + len(self.buckets), np.int64)
        self.codes: Optional[np.ndarray] = None
        self._waiting = [len(m) for m in self.members]  # per bucket: parameters not final
        self._started = 0  # buckets 0 .. _started - 1 have started their all-reduce
        self._final = [False] * n
        self._fresh = [True] * n  # no integers yet this step: the limbs hold old ones
        self._requests: list[Any] = []
        # The float32 exchange of a single step: per parameter, the gradient sent from where
        # it lies; per bucket, every other worker's rows of this worker's shard (W rows of
        # `_shard[j]`, its own row unused) and the rounded results (W shards).
        self._single = False
        self._held: list[Optional[np.ndarray]] = [None] * n
        self._shard: list[int] = []
        self._recv: list[np.ndarray] = []
        self._gathered: list[np.ndarray] = []
        self._weights = np.zeros(n)  # this worker's weight per parameter, 0 if not added
        self._all_weights = np.zeros((1, n))  # every worker's
        self._rounded = 0  # the count the gathered results are divided by (0: none yet)
        self._tops = np.zeros(n, np.int64)  # their largest finite bits, per parameter

    def grid(self, k: int) -> int:
        return self.exponents[k] - _BELOW

    def reset(self, single: bool = False) -> None:
        """Empties the sum for a new step (the first add of each parameter overwrites its
        limbs, and a parameter never added is zeroed before an all-reduce). `single`: every
        worker adds each parameter at most once in this step, final (one micro-batch a worker),
        so the float32 gradients are exchanged instead of integers (the notes above
        `_allocate_exchange`), sent from the arrays add_one was given: they must not change
        until results() returns. Every worker must pass the same."""
        self._single = single and _world._comm is not None and world_size() > 1
        if self._single and not self._recv:
            self._allocate_exchange()
        self._held = [None] * len(self.sizes)
        self._weights[:] = 0
        self._rounded = 0
        self.counts[:] = 0
        self.codes = None
        self._waiting = [len(m) for m in self.members]
        self._started = 0
        self._final = [False] * len(self.sizes)
        self._fresh = [True] * len(self.sizes)
        self._limbs = [False] * len(self.sizes)
        self.hi = [None] * len(self.sizes)
        self._in_place = 0
        self._requests = []

    def add(self, arrays: Sequence[Optional[np.ndarray]], weight: float = 1.0) -> None:
        """Adds weight·array for every array of one micro-batch (None: no gradient there)."""
        if len(arrays) != len(self.sizes):
            raise ValueError(f"ExactSum.add: {len(arrays)} arrays for {len(self.sizes)} "
                             "parameters")
        for k, a in enumerate(arrays):
            if a is not None:
                self.add_one(k, a, weight)

    def add_one(self, k: int, a: np.ndarray, weight: float = 1.0, final: bool = False
                ) -> None:
        """Adds weight·a into parameter k's integers. `final`: this worker adds nothing more
        to parameter k in this step, so once every parameter of its bucket is final, the
        bucket's all-reduce starts (while the caller goes on, e.g. with backward)."""
        if self._final[k]:
            raise RuntimeError(f"ExactSum.add: parameter {k} was final already in this step")
        weight = float(weight)
        if not (weight >= 0 and weight < 2 ** 29 and weight == int(weight)):
            raise ValueError(f"ExactSum.add: the weight must be an integer in [0, 2^29), got "
                             f"{weight}")
        a = np.ascontiguousarray(a, np.float32).reshape(-1)
        if a.size != self.sizes[k]:
            raise ValueError(f"ExactSum.add: array {k} has {a.size} elements, expected "
                             f"{self.sizes[k]}")
        if self._single and not final:
            raise RuntimeError("ExactSum.add: a single step adds each parameter once, final")
        n = len(self.sizes)
        self.counts[k] += 1
        if self._single:  # the gradient itself, to be sent from where it lies
            self._held[k] = a
            self._weights[k] = weight
            self._fresh[k] = False
        else:
            self._allocate()
            clamped, bad = self._quantise(k, a, weight)
            self.counts[n + k] += clamped
            self.counts[2 * n + k] += bad
        if final:
            self._final[k] = True
            self._waiting[self.bucket_of[k]] -= 1
            # Every worker starts the buckets in their order (MPI pairs collectives by their
            # order): a complete bucket waits for those before it.
            started = self._started
            while self._started < len(self.buckets) and self._waiting[self._started] == 0:
                self._start(self._started)
            if self._started == started and self._requests:
                _world._MPI.Request.Testall(self._requests)  # MPI moves a message only when called

    def _quantise(self, k: int, a: np.ndarray, weight: float) -> tuple[int, int]:
        """v = weight·a / 2^G in double (exact), non-finite elements recorded (+inf 1, -inf 2,
        NaN 4) and left out, |v| clamped below 2^98, round(v) (half to even) added into the
        integers. A packed parameter: a chunk at a time, the integers written packed into a
        scratch that stays in cache (csrc/exact.c's fastest pass; the step's first add writes
        lo itself), then added into lo as int64; each inside 2^56, so up to 127 of them sum
        inside int64 (else, or beyond 2^56, the parameter goes over to two limbs, which the
        kernel adds into directly). Blocks whose integers all lie inside 2^55 are quantised
        and added in one pass (the same integers). Returns (clamped, non-finite)."""
        scale = weight * 2.0 ** -self.grid(k)  # exact: a power of two times a small integer
        limit = 2.0 ** (_BELOW + _ABOVE) - 2.0 ** 45
        base, size, fresh = self.offsets[k], self.sizes[k], self._fresh[k]
        self._fresh[k] = False
        if fresh:
            self._limbs[k] = False
            self.hi[k] = None
        elif not self._limbs[k] and self.counts[k] > 127:
            self._split(k, 0, False)
        clamped = bad = 0
        at = 0
        while at < size and not self._limbs[k]:
            # The common case in one pass: blocks whose integers lie inside 2^55, added into
            # lo (or written, fresh) as they are quantised; a chunk from the first other block
            # on takes the general pass below.
            at += _exact.add_packed(a[at:], scale, self.lo[base + at:base + size], fresh)
            if at == size:
                break
            end = min(at + len(self._scratch), size)
            lo = self.lo[base + at:base + end]
            part = lo if fresh else self._scratch[:end - at]  # the first add: in place
            more, worse, outside = self._add(base + at, a[at:end], scale, limit,
                                             self._high[:end - at], part, True, 56)
            if outside:  # counted again as the rest is added (written, if fresh) in two limbs
                self._split(k, at, fresh)
                break
            clamped, bad = clamped + more, bad + worse
            if not fresh:
                np.add(lo, part, out=lo)
            at = end
        if at < size:
            hi = self.hi[k]
            assert hi is not None
            more, worse, _ = self._add(base + at, a[at:], scale, limit, hi[at:],
                                       self.lo[base + at:base + size], fresh, 0)
            clamped, bad = clamped + more, bad + worse
        return clamped, bad

    def _split(self, k: int, done: int, fresh: bool) -> None:
        """Parameter k from packed integers to two limbs: its first `done` elements, and the
        rest too unless `fresh` (not written yet this step)."""
        base = self.offsets[k]
        end = base + (done if fresh else self.sizes[k])
        hi = self.hi[k] = np.empty(self.sizes[k], np.int64)
        np.right_shift(self.lo[base:end], 56, out=hi[:end - base])
        np.bitwise_and(self.lo[base:end], _MASK, out=self.lo[base:end])
        self._limbs[k] = True

    def _add(self, at: int, a: np.ndarray, scale: float, limit: float, hi: np.ndarray,
             lo: np.ndarray, fresh: bool, pack_bits: int) -> tuple[int, int, int]:
        """The kernel's pass over elements at .. at + a.size; on a first non-finite element the
        codes are allocated and the pass goes on with them."""
        codes = None if self.codes is None else self.codes[at:at + a.size]
        done, clamped, bad, wide, _ = _exact.add(a, scale, limit, hi, lo, codes, fresh,
                                                 pack_bits)
        if done < a.size:  # a first non-finite element: the codes exist from here on
            self.codes = np.zeros(self.total, np.uint8)
            _, more, bad, wider, _ = _exact.add(a[done:], scale, limit, hi[done:], lo[done:],
                                                self.codes[at + done:at + a.size], fresh,
                                                pack_bits)
            clamped += more
            wide += wider
        return clamped, bad, wide

    def _allocate(self) -> None:
        if self.lo.size != self.total:
            self.lo = np.zeros(self.total, np.int64)

    def normalise(self) -> None:
        """Every parameter in two limbs, lo in [0, 2^56)."""
        self._allocate()
        for k, limbs in enumerate(self._limbs):
            if not limbs:
                self.hi[k] = np.zeros(self.sizes[k], np.int64)  # lo: the whole integer
                self._limbs[k] = True
            hi = self.hi[k]
            assert hi is not None
            _exact.normalise(hi, self.lo[self.offsets[k]:self.offsets[k] + self.sizes[k]])

    def _start(self, j: int) -> None:
        """Starts bucket j's all-reduce: each integer packed whole into one int64 (8 bytes an
        element; its sum over W workers is exact when no worker's lies outside 2^(63 -
        ceil(log2 W)), counted per bucket and checked in reduce)."""
        self._waiting[j] = -1  # started
        self._started = j + 1
        if _world._comm is None:
            return
        if self._single:
            self._exchange(j)
            return
        self._allocate()
        wide = 0
        bits = self._pack_bits()
        edge = 1 << bits
        for k in self.members[j]:
            at, end = self.offsets[k], self.offsets[k] + self.sizes[k]
            if self._fresh[k]:  # no gradient here this step: zero (packed), for the others
                self.lo[at:end] = 0
                self._limbs[k] = False
            elif self._limbs[k]:  # packed now, its high limbs kept for a wide sum
                hi = self.hi[k]
                assert hi is not None
                wide += _exact.pack(hi, self.lo[at:end], bits)
            elif self.counts[k] << 56 > edge:  # not inside the range by their count alone
                wide += sum(int(np.count_nonzero((c < -edge) | (c >= edge)))
                            for c in np.split(self.lo[at:end], range(_CHUNK, end - at, _CHUNK)))
        a, b = self.buckets[j]
        self.counts[3 * len(self.sizes) + j] = wide
        self._requests.append(_world._comm.Iallreduce(_world._MPI.IN_PLACE, self.lo[a:b],
                                                      op=_world._MPI.SUM))

    def _pack_bits(self) -> int:
        """Packed integers inside 2^bits, bits = 63 - ceil(log2 W): their sum fits."""
        world = world_size()
        if world > 127:  # the sum of the lo limbs must stay below 2^63
            raise RuntimeError(f"distributed: the exact sum supports up to 127 workers, the "
                               f"run has {world}")
        return 63 - (world - 1).bit_length()

    def reduce(self, slots: Optional[np.ndarray] = None, what: str = "reducing gradients"
               ) -> Optional[np.ndarray]:
        """All-reduces the integers and counts over the workers (in place, bucket by bucket,
        the buckets not started yet now); `slots` (int64, summed in the same message as the
        counts) carries the caller's per-micro-batch integers. Returns the reduced slots."""
        if _world._comm is None:
            return slots
        for j in range(self._started, len(self.buckets)):
            self._start(j)
        if self._single:
            self._receive(what)
        meta = self.counts if slots is None else np.concatenate([self.counts,
                                                                 slots.reshape(-1)])
        self._requests.append(_world._comm.Iallreduce(_world._MPI.IN_PLACE, meta,
                                                      op=_world._MPI.SUM))
        wait(self._requests, what)
        self._requests = []
        n = len(self.sizes)
        if self._single:
            return self._finish(meta, slots)
        # A bucket with integers too wide for one int64: its hi limbs too; the sum of the lo
        # limbs is then the packed sum less the hi sum times 2^56, modulo 2^64: W low limbs,
        # each in [0, 2^56), so below 2^63. A packed parameter's high limbs are lo >> 56.
        wide = [j for j in range(len(self.buckets)) if meta[3 * n + j]]
        highs = [np.empty(b - a, np.int64) for a, b in (self.buckets[j] for j in wide)]
        for j, high in zip(wide, highs):
            for k in self.members[j]:
                span = slice(self.offsets[k], self.offsets[k] + self.sizes[k])
                at = span.start - self.buckets[j][0]
                hi = self.hi[k]
                if hi is None:
                    np.right_shift(self.lo[span], 56, out=high[at:at + self.sizes[k]])
                else:
                    high[at:at + self.sizes[k]] = hi
                self.hi[k] = high[at:at + self.sizes[k]]
                self._limbs[k] = True
        wait([_world._comm.Iallreduce(_world._MPI.IN_PLACE, high, op=_world._MPI.SUM)
              for high in highs], what + " (wide sums)")
        for j, high in zip(wide, highs):
            a, b = self.buckets[j]
            self.lo[a:b] -= high << 56  # wraps modulo 2^64, as intended
        for k in (k for j in range(len(self.buckets)) if j not in wide
                  for k in self.members[j]):
            self._limbs[k] = False  # the whole sums
            self.hi[k] = None
        if meta[2 * n:3 * n].any():
            if self.codes is None:
                self.codes = np.zeros(self.total, np.uint8)
            _allreduce(self.codes, what + " (non-finite elements)", _world._MPI.BOR)
        return self._finish(meta, slots)

    def _finish(self, meta: np.ndarray, slots: Optional[np.ndarray]) -> Optional[np.ndarray]:
        self.counts[:] = meta[:len(self.counts)]
        return None if slots is None else meta[len(self.counts):].reshape(slots.shape)

    # -- the float32 exchange of a single step ---------------------------------------------------
    # With one micro-batch a worker, each worker sends shard r of every bucket's float32
    # gradients to worker r, which sums the W rows of its shard on the grid (quantising each as
    # add does, into integers that stay in cache) and rounds them; the rounded shards are then
    # all-gathered. The integers are the ones the all-reduce would sum, so the bits are the
    # same; the bytes are a float32 ring all-reduce's (half the integers'), and no
    # gradient-sized integer array is written. The gradients go out from their own arrays, one
    # point-to-point message per piece of a parameter in another worker's shard (MPI matches
    # the messages of one sender and tag in their order, which every worker takes from the
    # layout), so nothing is copied into a send buffer and a worker's own rows are not moved.

    def _allocate_exchange(self) -> None:
        world = world_size()
        for a, b in self.buckets:
            shard = -(-(b - a) // world)
            self._shard.append(shard)
            self._recv.append(np.empty((world, shard), np.float32))  # untouched: row `rank`
            self._gathered.append(np.empty(shard * world, np.float32))

    def _pieces(self, j: int, w: int) -> Iterator[tuple[int, int, int]]:
        """(parameter, start, end) of every member of bucket j inside shard w of the bucket,
        start and end relative to the bucket, in the members' order."""
        a, b = self.buckets[j]
        begin, end = w * self._shard[j], min((w + 1) * self._shard[j], b - a)
        for k in self.members[j]:
            at = self.offsets[k] - a
            lo, hi = max(at, begin), min(at + self.sizes[k], end)
            if lo < hi:
                yield k, lo, hi

    def _exchange(self, j: int) -> None:
        """Starts bucket j's exchange: this worker's shard from every other worker, received
        in its row, and every other worker's shard sent from the gradients (zeros of weight 0
        for a parameter without one here)."""
        a, me, world = self.buckets[j][0], rank(), world_size()
        for k in self.members[j]:
            if self._held[k] is None:
                self._held[k] = np.zeros(self.sizes[k], np.float32)
        begin = me * self._shard[j]
        for w in range(world):
            if w != me:
                row = self._recv[j][w]
                self._requests.extend(_world._comm.Irecv(row[lo - begin:hi - begin], source=w,
                                                         tag=j)
                                      for _, lo, hi in self._pieces(j, me))
        for w in range(world):
            if w != me:
                for k, lo, hi in self._pieces(j, w):
                    at = self.offsets[k] - a
                    held = self._held[k]
                    assert held is not None
                    self._requests.append(_world._comm.Isend(held[lo - at:hi - at], dest=w, tag=j))

    def _receive(self, what: str) -> None:
        """Waits for the gradients' exchange and every worker's weights."""
        self._all_weights = np.empty((world_size(), len(self.sizes)))
        self._requests.append(_world._comm.Iallgather(self._weights, self._all_weights))
        wait(self._requests, what)
        self._requests = []
        self._rounded = 0

    def _round_shards(self, count: int, what: str = "gathering the gradients") -> None:
        """Sums and rounds (divided by count) this worker's shards, all-gathers them, the
        largest magnitudes (MAX) and the clamped counts (SUM). Every worker calls it."""
        if self._rounded == count:
            return
        n, me = len(self.sizes), rank()
        limit = 2.0 ** (_BELOW + _ABOVE) - 2.0 ** 45
        tops = np.zeros(n, np.int64)
        clamped = np.zeros(n, np.int64)
        requests = []
        for j, (a, _) in enumerate(self.buckets):
            begin = me * self._shard[j]
            for k, lo, hi in self._pieces(j, me):
                at = self.offsets[k] - a
                held = self._held[k]
                assert held is not None
                rows = [held[lo - at:hi - at] if w == me else self._recv[j][w, lo - begin:
                                                                             hi - begin]
                        for w in range(world_size())]
                scale = self._all_weights[:, k] * 2.0 ** -self.grid(k)  # as _quantise's
                tops[k], clamped[k] = _exact.sum_rows(rows, scale, limit, self.grid(k), count,
                                                      self._gathered[j][lo:hi])
            requests.append(_world._comm.Iallgather(_world._MPI.IN_PLACE, self._gathered[j]))
        requests.append(_world._comm.Iallreduce(_world._MPI.IN_PLACE, tops, op=_world._MPI.MAX))
        requests.append(_world._comm.Iallreduce(_world._MPI.IN_PLACE, clamped, op=_world._MPI.SUM))
        wait(requests, what)
        self._tops = tops
        self.counts[n:2 * n] = clamped
        self._rounded = count

    def _result(self, k: int, count: int, reuse: bool = False
                ) -> tuple[Optional[np.ndarray], Optional[int]]:
        if not self.counts[k]:
            return None, None
        if self._single:
            self._round_shards(count)
            j = self.bucket_of[k]
            at = self.offsets[k] - self.buckets[j][0]
            out = self._gathered[j][at:at + self.sizes[k]]
            return (out if reuse else out.copy()), _exponent_of(int(self._tops[k]))
        a = self.offsets[k]
        b = a + self.sizes[k]
        if self._in_place:
            if count != self._in_place:
                raise RuntimeError(f"ExactSum.result: the sums were rounded in place (divided "
                                   f"by {self._in_place}); a count of {count} needs them again")
            out = self.lo.view(np.float32)[a:b]
            return (out if reuse else out.copy()), self._placed[k]
        hi = self.hi[k] if self._limbs[k] else None
        if reuse:  # rounded into the float32 view of lo's own memory, a chunk at a time
            out = self.lo.view(np.float32)[a:b]
            scratch = self._scratch.view(np.float32)
            top = 0
            for at in range(a, b, len(scratch)):
                end = min(at + len(scratch), b)
                part = scratch[:end - at]
                top = max(top, _exact.round_limbs(None if hi is None else hi[at - a:end - a],
                                                  self.lo[at:end], self.grid(k), count, part))
                out[at - a:end - a] = part  # over integers below `end`, all read already
            e = _exponent_of(top)
        else:
            out, e = _round(hi, self.lo[a:b], self.grid(k), count)
        if self.codes is not None:
            code = self.codes[a:b]
            if code.any():
                out[code == 1] = np.inf
                out[code == 2] = -np.inf
                out[(code & 4 != 0) | (code == 3)] = np.nan
                e = max_exponent(out)
        if reuse:
            self._placed[k] = e
        return out, e

    def result(self, k: int, count: int = 1) -> Optional[np.ndarray]:
        """Parameter k's sum divided by count, as float32 (None if no micro-batch had one)."""
        return self._result(k, count)[0]

    def results(self, count: int = 1, update_priors: bool = True, reuse: bool = False
                ) -> list[Optional[np.ndarray]]:
        """Every parameter's result; then the priors move to these results' exponents (a
        parameter with no finite nonzero element keeps its prior). With `reuse` the results
        are rounded into the integers' own memory (the float32 view of `lo`): no fresh memory,
        whose first touch costs as much as the rounding; they stay until the next step's adds
        (reset) overwrite them, and the integers are gone (results again need the same
        count)."""
        n = len(self.sizes)
        # In place, in the order of the integers in memory: each float32 result lies over
        # integers already rounded (the layout is in reverse parameter order).
        done = [self._result(k, count, reuse) for k in reversed(range(n))][::-1]
        if reuse and not self._single:
            self._in_place = count
        clamped = int(self.counts[n:2 * n].sum())  # known after a single step's rounding
        if clamped and rank() == 0:
            warnings.warn(f"distributed: {clamped} gradient elements were 2^44 times larger "
                          "than the previous step's largest and were clamped", RuntimeWarning,
                          stacklevel=3)
        if update_priors:
            for k, (_, e) in enumerate(done):
                if e is not None:  # the sum's exponent, within one
                    self.exponents[k] = e + int(count).bit_length() - 1
        return [r for r, _ in done]
