# cython: freethreading_compatible = True
"""Single-precision matrix product, batched, with transposed operands read in place.

The kernel (csrc/gemm.c) computes every output element as one fused multiply-add chain over k
in increasing order from +0.0, identical on every instruction-set path and thread count. This
wrapper checks every shape, dtype, layout and aliasing rule before the kernel runs.
"""
import numpy as np

from onemodel._kernels._isa cimport om_set_isa
from libc.stdint cimport int64_t

cdef extern from "gemm.h" nogil:
    int om_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t a_batch_stride, int trans_a,
                    const float *b, int64_t b_batch_stride, int trans_b,
                    float *c, int nthreads)


def set_isa(int isa) -> None:
    om_set_isa(isa)


cdef str _operands(a, b, bint trans_a, bint trans_b):
    return (f"{tuple(a.shape)}{'.T' if trans_a else ''} @ "
            f"{tuple(b.shape)}{'.T' if trans_b else ''}")


cdef _check_array(str name, x, str where):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"matmul: {where}: {name} must be a numpy array, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"matmul: {where}: {name} must be float32, got {x.dtype}")
    if x.ndim not in (2, 3):
        raise ValueError(f"matmul: {where}: {name} must be 2-D or 3-D, got {x.ndim}-D")
    if not x.flags.c_contiguous:
        raise ValueError(f"matmul: {where}: {name} must be C-contiguous")


def _shape3(x) -> tuple:
    """(batch, rows, cols) of a 2-D or 3-D array; a 2-D array is a batch of one."""
    return tuple(x.shape) if x.ndim == 3 else (1,) + tuple(x.shape)


def _dims(a, b, out, bint trans_a, bint trans_b) -> tuple:
    """Validates the operands; returns (batch, batch_a, batch_b, m, n, k, where) or raises."""
    where = _operands(a, b, trans_a, trans_b) if hasattr(a, "shape") and hasattr(b, "shape") \
        else "operands"
    _check_array("a", a, where)
    _check_array("b", b, where)
    _check_array("out", out, where)
    batch_a, ra, ca = _shape3(a)
    batch_b, rb, cb = _shape3(b)
    batch, ro, co = _shape3(out)
    m, ka = (ca, ra) if trans_a else (ra, ca)
    kb, n = (cb, rb) if trans_b else (rb, cb)
    if ka != kb:
        raise ValueError(f"matmul: {where}: inner dimensions {ka} != {kb}")
    for name, nb in (("a", batch_a), ("b", batch_b)):
        if nb != batch and nb != 1:
            raise ValueError(f"matmul: {where}: batch of {name} is {nb}, expected 1 or "
                             f"{batch} (the batch of out)")
    if (ro, co) != (m, n):
        expected = (batch, m, n) if out.ndim == 3 else (m, n)
        raise ValueError(f"matmul: {where}: out has shape {tuple(out.shape)}, expected "
                         f"{expected}")
    if out.size and (np.may_share_memory(out, a) or np.may_share_memory(out, b)):
        raise ValueError(f"matmul: {where}: out overlaps an operand")
    return batch, batch_a, batch_b, m, n, ka, where


def gemm(a, b, out, bint trans_a, bint trans_b, int nthreads) -> None:
    """out[p] = op(a[p]) @ op(b[p]); op transposes the last two axes when trans_* is set.

    a, b, out: float32 C-contiguous, 2-D (one product) or 3-D (batch, rows, cols). The batch of
    a or b is either out's batch or 1 (that operand is used for every product). Everything is
    checked before the kernel writes anything.
    """
    batch, batch_a, batch_b, m, n, k, where = _dims(a, b, out, trans_a, trans_b)
    if nthreads < 1:
        raise ValueError(f"matmul: {where}: nthreads must be >= 1, got {nthreads}")
    if out.size == 0:
        return
    cdef const float[:, :, ::1] av = a.reshape(_shape3(a))
    cdef const float[:, :, ::1] bv = b.reshape(_shape3(b))
    cdef float[:, :, ::1] cv = out.reshape(batch, m, n)
    cdef int64_t sa = 0 if batch_a == 1 else m * k
    cdef int64_t sb = 0 if batch_b == 1 else k * n
    cdef const float *ap = &av[0, 0, 0] if k else NULL
    cdef const float *bp = &bv[0, 0, 0] if k else NULL
    cdef int64_t cb = batch, cm = m, cn = n, ck = k
    cdef int status
    with nogil:
        status = om_gemm_f32(cb, cm, cn, ck, ap, sa, trans_a, bp, sb, trans_b,
                             &cv[0, 0, 0], nthreads)
    if status != 0:
        raise MemoryError(f"matmul: {where}: out of memory for packing buffers")
