# cython: freethreading_compatible = True
"""Dropout's mask and its products in one pass (csrc/dropout.c); functional/dropout.py states
the draw. Integer arithmetic and one float32 multiply per element: no ISA path of its own, the
same bits on every path and thread count.

The wrappers check every array before the kernel runs: float32 data C-contiguous, the mask
uint8 (or bool) C-contiguous, sizes that agree (the data holds `inner` elements per mask
element), the outputs writeable and apart from the inputs.
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from onemodel._kernels._arrays cimport check_f32, data_of, overlap, size_of

cnp.import_array()

cdef extern from "dropout.h" nogil:
    void om_dropout_forward(uint64_t stream, uint32_t threshold, float scale, int64_t n,
                            int64_t inner, const float *x, float *y, uint8_t *keep,
                            int nthreads)
    void om_dropout_backward(const uint8_t *keep, float scale, int64_t n, int64_t inner,
                             const float *g, float *out, int nthreads)


cdef uint8_t _no_elements = 0   # what an empty mask's pointer points to (never read)


cdef uint8_t *_mask_of(str op, keep, bint writeable) except NULL:
    if not (isinstance(keep, np.ndarray) and keep.dtype in (np.uint8, np.bool_)
            and keep.flags.c_contiguous and (keep.flags.writeable or not writeable)):
        raise ValueError(f"{op}: keep must be a C-contiguous{' writeable' if writeable else ''} "
                         f"uint8 or bool array, got {getattr(keep, 'dtype', type(keep).__name__)} "
                         f"{getattr(keep, 'shape', '')}")
    return <uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>keep) if keep.size else &_no_elements


cdef int64_t _inner(str op, keep, data, str name) except -1:
    """Elements of data per mask element."""
    cdef int64_t n = keep.size, size = size_of(data)
    if (n == 0 and size != 0) or (n != 0 and size % n != 0):
        raise ValueError(f"{op}: {name} of {size} elements does not hold a whole number of "
                         f"elements per mask element ({n})")
    return size // n if n else 1


def forward(uint64_t stream, uint32_t threshold, float scale, x, y, keep,
            int nthreads) -> None:
    """keep[i] = mask element i of `stream` kept (bits >> 40 >= threshold); y = x times the
    multiplier (scale or 0) of its mask element, keep.size elements of x each taking `inner` =
    x.size / keep.size consecutive ones."""
    if nthreads < 1:
        raise ValueError(f"dropout: nthreads must be >= 1, got {nthreads}")
    cdef uint8_t *pk = _mask_of("dropout", keep, True)
    check_f32("dropout", "x", x, False)
    check_f32("dropout", "y", y, True)
    if size_of(x) != size_of(y):
        raise ValueError(f"dropout: x of shape {x.shape} and y of shape {y.shape} differ in size")
    if overlap(keep, y) or overlap(keep, x) or overlap(x, y):
        raise ValueError("dropout: keep, x and y must not overlap")
    cdef int64_t n = keep.size, inner = _inner("dropout", keep, x, "x")
    cdef const float *px = data_of(x)
    cdef float *py = data_of(y)
    if n:
        with nogil:
            om_dropout_forward(stream, threshold, scale, n, inner, px, py, pk, nthreads)


def backward(keep, float scale, g, out, int nthreads) -> None:
    """out = g times the multiplier (scale or 0) of its mask element, as forward's y."""
    if nthreads < 1:
        raise ValueError(f"dropout_backward: nthreads must be >= 1, got {nthreads}")
    cdef const uint8_t *pk = _mask_of("dropout_backward", keep, False)
    check_f32("dropout_backward", "g", g, False)
    check_f32("dropout_backward", "out", out, True)
    if size_of(g) != size_of(out):
        raise ValueError(f"dropout_backward: g of shape {g.shape} and out of shape {out.shape} "
                         f"differ in size")
    if overlap(keep, out) or overlap(g, out):
        raise ValueError("dropout_backward: keep, g and out must not overlap")
    cdef int64_t n = keep.size, inner = _inner("dropout_backward", keep, g, "g")
    if n == 0:
        return
    cdef const float *pg = data_of(g)
    cdef float *po = data_of(out)
    with nogil:
        om_dropout_backward(pk, scale, n, inner, pg, po, nthreads)
