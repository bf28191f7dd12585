# cython: freethreading_compatible = True
"""Exact-mode transcendentals and relu, with their backward kernels, over float32 arrays
(csrc/vmath*.c).

Every op gives the same bits on every ISA path and at every thread count; accuracy against a
float64 reference is measured by `ulp_sweep` over all float32 inputs (tools/ulp_sweep.py).

The wrappers test their arrays in C first (_arrays.pxd); the Python-level checks run only when
that test fails, to raise with the message.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t, uint32_t
from onemodel._kernels._arrays cimport check_f32, data_of, f32_array, size_of

cnp.import_array()

cdef extern from "vmath_kernels.h" nogil:
    int om_vmath_saves_output(int op)
    void om_vmath_unary(int op, const float *x, float *y, int64_t n, int nthreads)
    void om_vmath_backward(int op, const float *s, const float *g, float *out, int64_t n,
                           int nthreads)
    void om_vmath_ulp_sweep(int op, int64_t start, int64_t stop, int nthreads, double *max_ulp,
                            uint32_t *worst_bits, int64_t *mismatches)

OPS = ("exp", "log", "tanh", "sigmoid", "erf", "softplus", "gelu", "gelu_tanh", "relu", "sin",
       "cos", "expm1", "log1p")


def saves_output(str op) -> bool:
    """True if the backward of `op` takes the forward output y, False if it takes the input x."""
    return om_vmath_saves_output(_op_index(op)) != 0


cdef int _op_index(str op) except -1:
    try:
        return OPS.index(op)
    except ValueError:
        raise ValueError(f"vmath: unknown op {op!r}; known: {', '.join(OPS)}") from None


cdef int _threads(str op, int nthreads) except -1:
    if nthreads < 1:
        raise ValueError(f"{op}: nthreads must be >= 1, got {nthreads}")
    return nthreads


def unary(str op, x, out, int nthreads) -> None:
    """out = op(x) elementwise; out may be x itself."""
    cdef int k = _op_index(op)
    if not (nthreads >= 1 and f32_array(x, False) and f32_array(out, True)
            and size_of(x) == size_of(out)):
        _threads(op, nthreads)
        check_f32(op, "x", x, False)
        check_f32(op, "out", out, True)
        if x.size != out.size:
            raise ValueError(f"{op}: x of shape {x.shape} and out of shape {out.shape} "
                             f"differ in size ({x.size} != {out.size})")
    cdef int64_t n = size_of(x)
    cdef const float *px = data_of(x)
    cdef float *po = data_of(out)
    if n == 0:
        return
    with nogil:
        om_vmath_unary(k, px, po, n, nthreads)


def unary_backward(str op, saved, grad, out, int nthreads) -> None:
    """out = grad_in of op from saved (y for exp, tanh, sigmoid; x otherwise) and grad."""
    cdef int k = _op_index(op)
    if not (nthreads >= 1 and f32_array(saved, False) and f32_array(grad, False)
            and f32_array(out, True) and size_of(saved) == size_of(grad) == size_of(out)):
        name = op + "_backward"
        _threads(name, nthreads)
        check_f32(name, "saved", saved, False)
        check_f32(name, "grad", grad, False)
        check_f32(name, "out", out, True)
        if saved.size != grad.size or saved.size != out.size:
            raise ValueError(f"{name}: saved {saved.shape}, grad {grad.shape} and out "
                             f"{out.shape} must have the same size")
    cdef int64_t n = size_of(saved)
    cdef const float *ps = data_of(saved)
    cdef const float *pg = data_of(grad)
    cdef float *po = data_of(out)
    if n == 0:
        return
    with nogil:
        om_vmath_backward(k, ps, pg, po, n, nthreads)


def ulp_sweep(str op, int64_t start, int64_t stop, int nthreads) -> tuple:
    """(max_ulp, worst_input_bits, mismatches) of op over the float32 bit patterns
    [start, stop): error of the selected path against float64 libm, and how many outputs
    differ in any bit from the scalar reference."""
    cdef int k = _op_index(op)
    _threads("ulp_sweep", nthreads)
    if not (0 <= start <= stop <= 2 ** 32):
        raise ValueError(f"ulp_sweep: need 0 <= start <= stop <= 2**32, got [{start}, {stop})")
    cdef double max_ulp = 0.0
    cdef uint32_t worst = 0
    cdef int64_t mismatches = 0
    with nogil:
        om_vmath_ulp_sweep(k, start, stop, nthreads, &max_ulp, &worst, &mismatches)
    return max_ulp, int(worst), int(mismatches)
