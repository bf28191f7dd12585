# cython: freethreading_compatible = True
"""SR4 kernels: initialisation, the step, materialisation and the ternary product (csrc/sr4.h
has the design note).

q arrays are the packed state: uint8, (n + 1) // 2 bytes for n weights, two per byte, low
nibble first. The Python layer (onemodel.optim.sr4, onemodel.nn.ternary) checks arguments;
these wrappers check only the sizes they index with, and run without the GIL.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

cdef extern from "sr4.h" nogil:
    ctypedef struct om_sr4_step_args:
        float s
        uint64_t key
        uint32_t phase
        uint64_t idx_base
        int32_t q_clamp
        int32_t theta
    uint64_t OM_SR4_C0
    uint64_t om_sr4_mix(uint64_t z)
    void om_sr4_init(uint8_t *q, int64_t n, uint64_t seed, uint64_t idx_base, int32_t mag)
    float om_sr4_abs_mean(const float *g, int64_t n, int nthreads)
    void om_sr4_step(uint8_t *q, const float *g, float *w, int64_t n, const om_sr4_step_args *a,
                     int nthreads)
    void om_sr4_materialize(const uint8_t *q, int64_t n, int32_t theta, float *w, int nthreads)
    int64_t om_sr4_ternary_plan_size(int64_t n, int64_t k)
    void om_sr4_ternary_plan(const uint8_t *q, int64_t n, int64_t k, int32_t theta,
                             uint8_t *codes, int nthreads)
    int om_sr4_ternary_matmul(int64_t m, int64_t n, int64_t k, const float *x,
                              const uint8_t *codes, float *out, int nthreads)


cdef inline void _packed(str op, Py_ssize_t nbytes, Py_ssize_t n) except *:
    if nbytes != (n + 1) // 2:
        raise ValueError(f"{op}: q has {nbytes} bytes, {n} weights need {(n + 1) // 2}")


def mix(uint64_t z) -> int:
    """SplitMix64's output function (no golden-ratio add)."""
    return om_sr4_mix(z)


def init(uint8_t[::1] q not None, int64_t n, uint64_t seed, uint64_t idx_base,
         int32_t mag) -> None:
    """Section 1: q = {-mag, 0, +mag} with 33.5/33/33.5 % from xorshift64 keyed by
    seed ^ idx_base."""
    _packed("sr4.init", q.shape[0], n)
    if n == 0:
        return
    with nogil:
        om_sr4_init(&q[0], n, seed, idx_base, mag)


def abs_mean(const float[::1] g not None, int nthreads=1) -> float:
    """float32(Σ|g| in double, element by element in index order, / n); NaN when empty."""
    cdef float r = float("nan")
    if g.shape[0] != 0:
        with nogil:
            r = om_sr4_abs_mean(&g[0], g.shape[0], nthreads)
    return r


def step(uint8_t[::1] q not None, const float[::1] g not None, float[::1] w, float s,
         uint64_t seed, uint64_t counter, uint64_t idx_base, int32_t q_clamp, int32_t theta,
         bint use_dither, int nthreads) -> None:
    """Sections 3-4 over one parameter in place; w (or None) receives the ternary weights."""
    cdef Py_ssize_t n = g.shape[0]
    cdef om_sr4_step_args a
    _packed("sr4.step", q.shape[0], n)
    if w is not None and w.shape[0] != n:
        raise ValueError(f"sr4.step: w has {w.shape[0]} elements, the gradient {n}")
    if n == 0:
        return
    cdef uint64_t base = om_sr4_mix(seed ^ OM_SR4_C0)
    a.s = s
    a.idx_base = idx_base
    a.q_clamp = q_clamp
    a.theta = theta
    if use_dither:
        a.key = om_sr4_mix(base ^ (counter >> 8))
        a.phase = <uint32_t>((159 * (counter & 255)) & 255)
    else:
        a.key = om_sr4_mix(base ^ counter)
        a.phase = 0
    cdef float *wp = &w[0] if w is not None else NULL
    with nogil:
        om_sr4_step(&q[0], &g[0], wp, n, &a, nthreads)


def materialize(const uint8_t[::1] q not None, float[::1] w not None, int32_t theta,
                int nthreads) -> None:
    """Section 2: w = +1 where q >= theta, -1 where q <= -theta, else 0."""
    cdef Py_ssize_t n = w.shape[0]
    _packed("sr4.materialize", q.shape[0], n)
    if n == 0:
        return
    with nogil:
        om_sr4_materialize(&q[0], n, theta, &w[0], nthreads)


def plan_size(int64_t n, int64_t k) -> int:
    """Bytes of the plan of a ternary (n, k) weight."""
    return om_sr4_ternary_plan_size(n, k)


def ternary_plan(const uint8_t[::1] q not None, int64_t n, int64_t k, int32_t theta,
                 uint8_t[::1] codes not None, int nthreads) -> None:
    """The plan of the ternary product for W (n, k) of packed q: one byte per pair of columns."""
    _packed("sr4.ternary_plan", q.shape[0], n * k)
    if codes.shape[0] != om_sr4_ternary_plan_size(n, k):
        raise ValueError(f"sr4.ternary_plan: codes has {codes.shape[0]} bytes, a ({n}, {k}) "
                         f"weight needs {om_sr4_ternary_plan_size(n, k)}")
    if codes.shape[0] == 0:
        return
    with nogil:
        om_sr4_ternary_plan(&q[0] if q.shape[0] else NULL, n, k, theta, &codes[0], nthreads)


def ternary_matmul(const float[:, ::1] x not None, const uint8_t[::1] codes not None,
                   int64_t n, float[:, ::1] out not None, int nthreads) -> None:
    """out (m, n) = x (m, k) . W^T from the plan of W (n, k); adds only (order in csrc/sr4.h)."""
    cdef int64_t m = x.shape[0], k = x.shape[1]
    cdef int rc
    if codes.shape[0] != om_sr4_ternary_plan_size(n, k):
        raise ValueError(f"sr4.ternary_matmul: the plan has {codes.shape[0]} bytes, a ({n}, "
                         f"{k}) weight needs {om_sr4_ternary_plan_size(n, k)}")
    if out.shape[0] != m or out.shape[1] != n:
        raise ValueError(f"sr4.ternary_matmul: out is {(out.shape[0], out.shape[1])}, "
                         f"expected {(m, n)}")
    if m == 0 or n == 0:
        return
    cdef const float *xp = &x[0, 0] if k > 0 else NULL
    cdef const uint8_t *cp = &codes[0] if codes.shape[0] else NULL
    with nogil:
        rc = om_sr4_ternary_matmul(m, n, k, xp, cp, &out[0, 0], nthreads)
    if rc != 0:
        raise MemoryError(f"sr4.ternary_matmul: no scratch memory for ({m}, {k}) x ({n}, {k})")
