# cython: freethreading_compatible = True
"""Single-precision matrix product, batched, with transposed operands read in place.

The kernel (csrc/gemm.c) computes every output element as one fused multiply-add chain over k
in increasing order from +0.0, identical on every instruction-set path and thread count. This
wrapper checks every shape, dtype, layout and aliasing rule before the kernel runs: the
arrays in C first (_arrays.pxd), and through the Python-level checks, which raise with the
message, only when that test fails.
"""
import numpy as np

cimport numpy as cnp
from onemodel._kernels._arrays cimport data_of, f32_array, overlap
from onemodel._kernels._isa cimport om_set_isa
from libc.stdint cimport int64_t

cnp.import_array()

cdef extern from "gemm.h" nogil:
    int om_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t a_batch_stride, int trans_a,
                    const float *b, int64_t b_batch_stride, int trans_b,
                    float *c, int nthreads)


def set_isa(int isa) -> None:
    om_set_isa(isa)


cdef str _operands(a, b, bint trans_a, bint trans_b):
    """The operands as the error messages name them, e.g. "(3, 4) @ (6, 5).T"."""
    def shape(x, bint t):
        return f"{tuple(x.shape) if hasattr(x, 'shape') else type(x).__name__}{'.T' if t else ''}"
    return f"{shape(a, trans_a)} @ {shape(b, trans_b)}"


cdef _check_array(str name, x, a, b, bint trans_a, bint trans_b, bint output=False):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} must be a numpy "
                        f"array, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} must be float32, "
                        f"got {x.dtype}")
    if x.ndim != 2 and x.ndim != 3:
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} must be 2-D or "
                         f"3-D, got {x.ndim}-D")
    if not x.flags.c_contiguous:
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} must be "
                         f"C-contiguous")
    if output and not x.flags.writeable:
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: out must be "
                         f"writeable")


cdef bint _fits(x, bint output) noexcept:
    """The fast form of _check_array: true when it would accept x."""
    return f32_array(x, output) and 2 <= cnp.PyArray_NDIM(<cnp.ndarray>x) <= 3


cdef void _shape3(x, int64_t *dims) noexcept:
    """(batch, rows, cols) of a 2-D or 3-D array _fits accepted; 2-D is a batch of one."""
    cdef int nd = cnp.PyArray_NDIM(<cnp.ndarray>x)
    dims[0] = cnp.PyArray_DIM(<cnp.ndarray>x, 0) if nd == 3 else 1
    dims[1] = cnp.PyArray_DIM(<cnp.ndarray>x, nd - 2)
    dims[2] = cnp.PyArray_DIM(<cnp.ndarray>x, nd - 1)


def gemm(a, b, out, bint trans_a, bint trans_b, int nthreads, bias=None) -> None:
    """out[p] = op(a[p]) @ op(b[p]) (+ bias); op transposes the last two axes when trans_* is set.

    a, b, out: float32 C-contiguous, 2-D (one product) or 3-D (batch, rows, cols). The batch of
    a or b is either out's batch or 1 (that operand is used for every product). bias, if given,
    is a float32 vector of out's column count added to every row after the product (one
    rounded add per element, as `out += bias` would do, without a second call into numpy).
    Everything is checked before the kernel writes anything.
    """
    if not (_fits(a, False) and _fits(b, False) and _fits(out, True)):
        _check_array("a", a, a, b, trans_a, trans_b)
        _check_array("b", b, a, b, trans_a, trans_b)
        _check_array("out", out, a, b, trans_a, trans_b, output=True)
    cdef int64_t da[3]
    cdef int64_t db[3]
    cdef int64_t dout[3]
    _shape3(a, da)
    _shape3(b, db)
    _shape3(out, dout)
    cdef int64_t batch_a = da[0], ra = da[1], ca = da[2]
    cdef int64_t batch_b = db[0], rb = db[1], cb = db[2]
    cdef int64_t batch = dout[0], ro = dout[1], co = dout[2]
    cdef int64_t m = ca if trans_a else ra
    cdef int64_t k = ra if trans_a else ca
    cdef int64_t kb = cb if trans_b else rb
    cdef int64_t n = rb if trans_b else cb
    if k != kb:
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: inner dimensions "
                         f"{k} != {kb}")
    if batch_a != batch and batch_a != 1 or batch_b != batch and batch_b != 1:
        name, nb = ("a", batch_a) if batch_a != batch and batch_a != 1 else ("b", batch_b)
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: batch of {name} is "
                         f"{nb}, expected 1 or {batch} (the batch of out)")
    if ro != m or co != n:
        expected = out.shape[:out.ndim - 2] + (m, n)
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: out has shape "
                         f"{tuple(out.shape)}, expected {expected}")
    if nthreads < 1:
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: nthreads must be "
                         f">= 1, got {nthreads}")
    if bias is not None and not (f32_array(bias, False) and cnp.PyArray_NDIM(<cnp.ndarray>bias) == 1
                                 and cnp.PyArray_DIM(<cnp.ndarray>bias, 0) == n):
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: bias must be a "
                         f"C-contiguous float32 vector of length {n}, got "
                         f"{getattr(bias, 'dtype', type(bias).__name__)} "
                         f"{getattr(bias, 'shape', '')}")
    if batch * m * n == 0:
        return
    if overlap(out, a) or overlap(out, b) or bias is not None and overlap(out, bias):
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: out overlaps an operand")

    # The kernel reads nothing when k == 0 (it writes zeros), and a and b are then empty.
    cdef const float *ap = data_of(a) if k else NULL
    cdef const float *bp = data_of(b) if k else NULL
    cdef float *cp = data_of(out)
    cdef int64_t sa = 0 if batch_a == 1 else m * k
    cdef int64_t sb = 0 if batch_b == 1 else k * n
    cdef const float *biasp = data_of(bias) if bias is not None else NULL
    cdef int64_t row, j
    cdef int status
    with nogil:
        status = om_gemm_f32(batch, m, n, k, ap, sa, trans_a, bp, sb, trans_b, cp, nthreads)
        if status == 0 and biasp != NULL:
            for row in range(batch * m):
                for j in range(n):
                    cp[row * n + j] = cp[row * n + j] + biasp[j]
    if status != 0:
        raise MemoryError(f"matmul: {_operands(a, b, trans_a, trans_b)}: out of memory for "
                          f"packing buffers")
