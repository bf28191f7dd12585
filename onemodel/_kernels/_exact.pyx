# cython: freethreading_compatible = True
"""The exact gradient sum's two passes (csrc/exact.c): quantising float32 arrays into int64
limbs and rounding the limbs back to float32. Exact operations only: every instruction-set
path gives the same bits."""
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t


cdef extern from "exact.h" nogil:
    size_t om_exact_add(const float *g, size_t n, double scale, double limit, int64_t *hi,
                        int64_t *lo, uint8_t *codes, int64_t *clamped, int64_t *bad,
                        int fresh, int pack_bits, int64_t *wide, int *hi_skipped)
    size_t om_exact_add_packed(const float *g, size_t n, double scale, int64_t *lo,
                               int fresh)
    void om_exact_normalise(int64_t *hi, int64_t *lo, size_t n)
    int64_t om_exact_pack(int64_t *hi, int64_t *lo, size_t n, int bits)
    void om_exact_sum_rows(const float *const *rows, int nrows, const double *scale,
                           double limit, size_t n, int grid, int64_t count, uint64_t magic,
                           int l, float *out, uint32_t *top, int64_t *clamped)
    void om_exact_round(const int64_t *hi, const int64_t *lo, size_t n, int grid,
                        int64_t count, uint64_t magic, int l, float *out, uint32_t *top)


def add(const float[::1] g, double scale, double limit, int64_t[::1] hi, int64_t[::1] lo,
        uint8_t[::1] codes=None, bint fresh=False, int pack_bits=0) -> tuple:
    """Adds round_half_even(g * scale), |g * scale| clamped to limit, into the limbs (see
    exact.h; `fresh`: as into zero limbs, which are not read; `pack_bits`: then packed as by
    pack()). Returns (elements done, clamped, non-finite, wide, hi skipped): fewer than len(g)
    done only when codes is None and a non-finite element stopped the pass there; hi skipped
    when the hi limbs were left unwritten (fresh and packed: then lo >> 56 gives them)."""
    cdef size_t n = g.shape[0]
    if hi.shape[0] != <Py_ssize_t>n or lo.shape[0] != <Py_ssize_t>n or (
            codes is not None and codes.shape[0] != <Py_ssize_t>n):
        raise ValueError("exact.add: the limbs and codes must have the gradient's length")
    if pack_bits and not 56 <= pack_bits <= 63:
        raise ValueError(f"exact.add: pack_bits must be 0 or in [56, 63], got {pack_bits}")
    cdef int64_t clamped = 0, bad = 0, wide = 0
    cdef int skipped = 0
    cdef size_t done = 0
    cdef uint8_t *c = NULL
    if n == 0:
        return 0, 0, 0, 0, False
    if codes is not None:
        c = &codes[0]
    with nogil:
        done = om_exact_add(&g[0], n, scale, limit, &hi[0], &lo[0], c, &clamped, &bad, fresh,
                            pack_bits, &wide, &skipped)
    return done, clamped, bad, wide, bool(skipped)


def add_packed(const float[::1] g, double scale, int64_t[::1] lo, bint fresh=False) -> int:
    """lo += round_half_even(g * scale) as packed integers (`fresh`: lo = it), a block at a
    time while a block's |g * scale| are finite and below 2^55 (exact.h): returns the elements
    done, len(g) or the start of the first block that is not."""
    cdef size_t n = g.shape[0]
    if lo.shape[0] != <Py_ssize_t>n:
        raise ValueError("exact.add_packed: the integers must have the gradient's length")
    if n == 0:
        return 0
    with nogil:
        n = om_exact_add_packed(&g[0], n, scale, &lo[0], fresh)
    return n


def normalise(int64_t[::1] hi, int64_t[::1] lo) -> None:
    """Carries lo into hi: lo back in [0, 2^56)."""
    if hi.shape[0] != lo.shape[0]:
        raise ValueError("exact.normalise: limbs of different lengths")
    if hi.shape[0]:
        with nogil:
            om_exact_normalise(&hi[0], &lo[0], hi.shape[0])


def pack(int64_t[::1] hi, int64_t[::1] lo, int bits) -> int:
    """Normalises the limbs and writes each integer whole into lo, modulo 2^64 (exact.h);
    returns how many lie outside [-2^bits, 2^bits)."""
    if hi.shape[0] != lo.shape[0]:
        raise ValueError("exact.pack: limbs of different lengths")
    if not 56 <= bits <= 63:
        raise ValueError(f"exact.pack: bits must be in [56, 63], got {bits}")
    cdef int64_t wide = 0
    if hi.shape[0]:
        with nogil:
            wide = om_exact_pack(&hi[0], &lo[0], hi.shape[0], bits)
    return wide


def round_limbs(const int64_t[::1] hi, const int64_t[::1] lo, int grid, count: int,
                float[::1] out) -> int:
    """out = float32 of (hi * 2^56 + lo) * 2^grid / count (lo * 2^grid / count when hi is
    None: packed integers), rounded once (exact.h); count is an integer in [1, 2^35). Returns
    the largest bits of a finite |out| element (0 if none)."""
    cdef size_t n = lo.shape[0]
    if (hi is not None and hi.shape[0] != <Py_ssize_t>n) or out.shape[0] != <Py_ssize_t>n:
        raise ValueError("exact.round_limbs: arrays of different lengths")
    if not 1 <= count < 1 << 35:
        raise ValueError(f"exact.round_limbs: count must be in [1, 2^35), got {count}")
    cdef int shift = (count - 1).bit_length()
    cdef uint64_t magic = _magic(count)
    cdef int64_t c = count
    cdef uint32_t top = 0
    cdef const int64_t *h = NULL
    if n:
        if hi is not None:
            h = &hi[0]
        with nogil:
            om_exact_round(h, &lo[0], n, grid, c, magic, shift, &out[0], &top)
    return top


cdef uint64_t _magic(count) except? 0:
    """ceil(2^(61 + l) / count), l = ceil(log2 count) (exact.h); Python integers: 2^(61 + l)
    has up to 97 bits."""
    return -(-(1 << (61 + (count - 1).bit_length())) // count)


def sum_rows(rows, const double[::1] scale, double limit, int grid, count: int,
             float[::1] out) -> tuple:
    """out = the exact sum of the float32 arrays `rows` (one per worker, each of out's length),
    each element of row w times scale[w], rounded as round_limbs rounds (divided by count),
    non-finite elements as the distributed module's codes make them (exact.h). Returns (the
    largest bits of a finite |out| element, the elements clamped)."""
    cdef int nrows = len(rows)
    if not 1 <= nrows <= 127:
        raise ValueError(f"exact.sum_rows: 1 to 127 rows, got {nrows}")
    if scale.shape[0] != nrows:
        raise ValueError(f"exact.sum_rows: {scale.shape[0]} scales for {nrows} rows")
    if not 1 <= count < 1 << 35:
        raise ValueError(f"exact.sum_rows: count must be in [1, 2^35), got {count}")
    cdef size_t n = out.shape[0]
    cdef const float *ptrs[127]
    cdef const float[::1] row
    held = []  # the rows' buffers, alive until the kernel has read them
    for w in range(nrows):
        row = rows[w]
        if <size_t>row.shape[0] != n:
            raise ValueError(f"exact.sum_rows: row {w} has {row.shape[0]} elements, out {n}")
        held.append(row)
        ptrs[w] = &row[0] if n else NULL
    cdef int shift = (count - 1).bit_length()
    cdef uint64_t magic = _magic(count)
    cdef int64_t c = count, clamped = 0
    cdef uint32_t top = 0
    if n:
        with nogil:
            om_exact_sum_rows(ptrs, nrows, &scale[0], limit, n, grid, c, magic, shift,
                              &out[0], &top, &clamped)
    return top, clamped
