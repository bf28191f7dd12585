"""The exact, order-free sum (see the package notes): ExactSum's integer limbs, their
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
_BUCKET_BYTES = 25 << 20


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
    """The exact, order-free sum of weighted float32 arrays of one layout (see the module
    notes): `add` quantises one micro-batch into the int64 limbs (or `add_one` one parameter's
    array, as its gradient becomes final during backward), `reduce` all-reduces them, `result`
    rounds the integers to float32. `sizes` are the element counts of the parameters in their
    order; the limbs lay them out in reverse order, in buckets of about `bucket_bytes` float32
    bytes (default 25 MB; DDP's order and size: the last layers, whose gradients are final
    first, start their reduction early)."""

    def __init__(self, sizes: Sequence[int], bucket_bytes: Optional[int] = None) -> None:
        bucket_bytes = _BUCKET_BYTES if bucket_bytes is None else bucket_bytes
        self.sizes = [int(s) for s in sizes]
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
        self.lo = np.zeros(at, np.int64)
        self.hi = np.zeros(at, np.int64)
        # Per parameter: micro-batches with a gradient, clamped elements, non-finite elements;
        # per bucket: integers too wide to pack.
        self.counts = np.zeros(3 * n + len(self.buckets), np.int64)
        self.codes: Optional[np.ndarray] = None
        self._waiting = [len(m) for m in self.members]  # per bucket: parameters not final
        self._started = 0  # buckets 0 .. _started - 1 have started their all-reduce
        self._final = [False] * n
        self._fresh = [True] * n  # no integers yet this step: the limbs hold old ones
        self._wide = [-1] * n  # packed parameters: their integers too wide to pack
        self._hi_skipped = [False] * n  # packed directly: hi limbs not written (lo >> 56)
        self._requests: list[Any] = []
        self._packed = [False] * len(self.buckets)  # lo holds the whole (summed) integers
        self._out: Optional[np.ndarray] = None  # results(reuse=True) write here
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
        self._wide = [-1] * len(self.sizes)
        self._hi_skipped = [False] * len(self.sizes)
        self._requests = []
        self._packed = [False] * len(self.buckets)

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
            # The last add of a parameter packs its integers for the all-reduce in one pass.
            bits = self._pack_bits() if final and _world._comm is not None else 0
            clamped, bad, wide = self._quantise(k, a, weight, bits)
            self.counts[n + k] += clamped
            self.counts[2 * n + k] += bad
            if bits:
                self._wide[k] = wide
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

    def _quantise(self, k: int, a: np.ndarray, weight: float, pack_bits: int = 0
                  ) -> tuple[int, int, int]:
        """One pass in C (csrc/exact.c): v = weight·a / 2^G in double (exact), non-finite
        elements recorded (+inf 1, -inf 2, NaN 4) and left out, |v| clamped below 2^98,
        round(v) (half to even) added into the limbs, the carry moved into hi; with pack_bits
        the integers then packed (see _start). Returns (clamped, non-finite, too wide)."""
        scale = weight * 2.0 ** -self.grid(k)  # exact: a power of two times a small integer
        limit = 2.0 ** (_BELOW + _ABOVE) - 2.0 ** 45
        base = self.offsets[k]
        hi = self.hi[base:base + a.size]
        lo = self.lo[base:base + a.size]
        codes = None if self.codes is None else self.codes[base:base + a.size]
        fresh = self._fresh[k]
        self._fresh[k] = False
        done, clamped, bad, wide, self._hi_skipped[k] = _exact.add(a, scale, limit, hi, lo,
                                                                   codes, fresh, pack_bits)
        if done < a.size:  # a first non-finite element: the codes exist from here on
            self.codes = np.zeros(self.total, np.uint8)
            rest = slice(base + done, base + a.size)
            _, more, bad, wider, _ = _exact.add(a[done:], scale, limit, self.hi[rest],
                                                self.lo[rest], self.codes[rest], fresh, pack_bits)
            clamped += more
            wide += wider
        return clamped, bad, wide

    def normalise(self) -> None:
        """Carries the lo limbs into the hi limbs: lo back in [0, 2^56)."""
        _exact.normalise(self.hi, self.lo)

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
        wide = 0
        for k in self.members[j]:
            at, end = self.offsets[k], self.offsets[k] + self.sizes[k]
            if self._fresh[k]:  # no gradient here this step: zero (packed), for the others
                self.hi[at:end] = 0
                self.lo[at:end] = 0
            elif self._wide[k] < 0:  # not packed by its last add
                self._wide[k] = _exact.pack(self.hi[at:end], self.lo[at:end],
                                            self._pack_bits())
            wide += max(self._wide[k], 0)
        a, b = self.buckets[j]
        self.counts[3 * len(self.sizes) + j] = wide
        self._packed[j] = True
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
        # limbs is then the packed sum less the hi sum times 2^56, modulo 2^64 (below 2^63).
        wide = [j for j in range(len(self.buckets)) if meta[3 * n + j]]
        # A parameter packed directly (its hi limbs not written, every integer inside
        # 2^(bits - 1)) adds zero high limbs: each worker's part of the sum of the lo limbs is
        # then its integer (inside 2^(bits - 1) <= 2^62 / W) or a low limb (in [0, 2^56), and
        # W <= 127), both below 2^63 / W, so that sum stays inside int64, which is all the
        # rounding needs.
        for k in (k for j in wide for k in self.members[j] if self._hi_skipped[k]):
            self.hi[self.offsets[k]:self.offsets[k] + self.sizes[k]] = 0
        wait([_world._comm.Iallreduce(_world._MPI.IN_PLACE, self.hi[a:b], op=_world._MPI.SUM)
              for a, b in (self.buckets[j] for j in wide)], what + " (wide sums)")
        for j in wide:
            a, b = self.buckets[j]
            self.lo[a:b] -= self.hi[a:b] << 56  # wraps modulo 2^64, as intended
            self._packed[j] = False
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
        hi = None if self._packed[self.bucket_of[k]] else self.hi[a:b]
        into = None
        if reuse:
            if self._out is None:
                self._out = np.empty(self.total, np.float32)
            into = self._out[a:b]
        out, top = _round(hi, self.lo[a:b], self.grid(k), count, into)
        if self.codes is not None:
            code = self.codes[a:b]
            if code.any():
                out[code == 1] = np.inf
                out[code == 2] = -np.inf
                out[(code & 4 != 0) | (code == 3)] = np.nan
                top = max_exponent(out)
        return out, top

    def result(self, k: int, count: int = 1) -> Optional[np.ndarray]:
        """Parameter k's sum divided by count, as float32 (None if no micro-batch had one)."""
        return self._result(k, count)[0]

    def results(self, count: int = 1, update_priors: bool = True, reuse: bool = False
                ) -> list[Optional[np.ndarray]]:
        """Every parameter's result; then the priors move to these results' exponents (a
        parameter with no finite nonzero element keeps its prior). With `reuse` the results
        are views of one buffer that the next results(reuse=True) overwrites (no fresh
        memory, whose first touch costs as much as the rounding)."""
        n = len(self.sizes)
        done = [self._result(k, count, reuse) for k in range(n)]
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
