# cython: freethreading_compatible = True
"""The exact gradient sum's two passes (csrc/exact.c): quantising float32 arrays into int64
limbs and rounding the limbs back to float32. Exact operations only: every instruction-set
path gives the same bits."""
from libc.stdint cimport int64_t, uint8_t, uint64_t

from onemodel._kernels._isa cimport om_set_isa

cdef extern from "exact.h" nogil:
    size_t om_exact_add(const float *g, size_t n, double scale, double limit, int64_t *hi,
                        int64_t *lo, uint8_t *codes, int64_t *clamped, int64_t *bad)
    void om_exact_normalise(int64_t *hi, int64_t *lo, size_t n)
    void om_exact_round(const int64_t *hi, const int64_t *lo, size_t n, int grid,
                        int64_t count, uint64_t magic, int l, float *out)


def set_isa(int isa) -> None:
    om_set_isa(isa)


def add(const float[::1] g, double scale, double limit, int64_t[::1] hi, int64_t[::1] lo,
        uint8_t[::1] codes=None) -> tuple:
    """Adds round_half_even(g * scale), |g * scale| clamped to limit, into the limbs (see
    exact.h). Returns (elements done, clamped, non-finite): fewer than len(g) done only when
    codes is None and a non-finite element stopped the pass there."""
    cdef size_t n = g.shape[0]
    if hi.shape[0] != <Py_ssize_t>n or lo.shape[0] != <Py_ssize_t>n or (
            codes is not None and codes.shape[0] != <Py_ssize_t>n):
        raise ValueError("exact.add: the limbs and codes must have the gradient's length")
    cdef int64_t clamped = 0, bad = 0
    cdef size_t done = 0
    cdef uint8_t *c = NULL
    if n == 0:
        return 0, 0, 0
    if codes is not None:
        c = &codes[0]
    with nogil:
        done = om_exact_add(&g[0], n, scale, limit, &hi[0], &lo[0], c, &clamped, &bad)
    return done, clamped, bad


def normalise(int64_t[::1] hi, int64_t[::1] lo) -> None:
    """Carries lo into hi: lo back in [0, 2^56)."""
    if hi.shape[0] != lo.shape[0]:
        raise ValueError("exact.normalise: limbs of different lengths")
    if hi.shape[0]:
        with nogil:
            om_exact_normalise(&hi[0], &lo[0], hi.shape[0])


def round_limbs(const int64_t[::1] hi, const int64_t[::1] lo, int grid, count: int,
                float[::1] out) -> None:
    """out = float32 of (hi * 2^56 + lo) * 2^grid / count, rounded once (exact.h); count is
    an integer in [1, 2^35)."""
    cdef size_t n = hi.shape[0]
    if lo.shape[0] != <Py_ssize_t>n or out.shape[0] != <Py_ssize_t>n:
        raise ValueError("exact.round_limbs: arrays of different lengths")
    if not 1 <= count < 1 << 35:
        raise ValueError(f"exact.round_limbs: count must be in [1, 2^35), got {count}")
    bits = (count - 1).bit_length()  # Python integers: 2^(61 + bits) has up to 97 bits
    cdef uint64_t magic = -(-(1 << (61 + bits)) // count)
    cdef int shift = bits
    cdef int64_t c = count
    if n:
        with nogil:
            om_exact_round(&hi[0], &lo[0], n, grid, c, magic, shift, &out[0])
