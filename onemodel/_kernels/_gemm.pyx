# cython: freethreading_compatible = True
"""Single-precision matrix product, batched, with transposed operands read in place.

The kernel (csrc/gemm.c) computes every output element as one fused multiply-add chain over k
in increasing order from +0.0, identical on every instruction-set path and thread count. This
wrapper checks every shape, dtype, layout and aliasing rule before the kernel runs: the
arrays in C first (_arrays.pxd), and through the Python-level checks, which raise with the
message, only when that test fails.

Under autocast the operands are rounded to bfloat16 or float16 (half = 1 or 2) by the packing
itself, or arrive as uint16 arrays of those bits (what an autocast product saved), widened by
the packing; save_a / save_b receive the 2-byte bits of a rounded float32 operand. A bfloat16
product follows the AVX512_BF16 dot-product instruction's rule on every path (csrc/gemm.c).
"""
import numpy as np

cimport numpy as cnp
from onemodel._kernels._arrays cimport data_of, f32_array, overlap
from libc.stdint cimport int64_t, uint16_t

cnp.import_array()

cdef extern from "gemm.h" nogil:
    enum:
        OM_F32, OM_F32_TO_BF16, OM_F32_TO_F16, OM_BF16, OM_F16, OM_GEMM_KC
    ctypedef struct om_gemm_operand:
        const void *p
        int64_t batch_stride
        int trans, fmt
        uint16_t *save
    int om_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
                om_gemm_operand b, float *c, int add, int nthreads)
    int om_gemm_set_bf16_dot(int on)
    int om_gemm_bf16_dot()

cdef extern from "isa.h" nogil:
    int om_bf16_dot_available()

HALF_NAMES = (None, "bf16", "fp16")
KC = OM_GEMM_KC  # the largest depth gemm can add into out (one K block)


def bf16_dot_available() -> bool:
    """Whether this build and CPU have the AVX512_BF16 dot-product kernel."""
    return bool(om_bf16_dot_available())


cdef bint _chosen = False  # whether bf16_dot(on) has set the kernel since the import


def bf16_dot(on=None) -> bool:
    """Whether bfloat16 products run the AVX512_BF16 dot-product kernel when the avx512 path
    is selected: until set, where the CPU has it and is not known to be slower with it (CPUs
    with AMX, whose VDPBF16PS loses to widening; onemodel._kernel_choice times the two at the
    first bfloat16 autocast and sets the faster). on=False makes them widen as the other paths
    do, which gives the same bits; on=True without the instruction is an error."""
    global _chosen
    if on is not None:
        if om_gemm_set_bf16_dot(1 if on else 0) != 0:
            raise RuntimeError("bf16_dot: this CPU or build has no AVX512_BF16 dot-product "
                               "kernel")
        _chosen = True
    return bool(om_gemm_bf16_dot())


def bf16_dot_chosen() -> bool:
    """Whether bf16_dot(on) has set the kernel (a measurement, or the caller's choice)."""
    return _chosen


cdef str _operands(a, b, bint trans_a, bint trans_b):
    """The operands as the error messages name them, e.g. "(3, 4) @ (6, 5).T"."""
    def shape(x, bint t):
        return f"{tuple(x.shape) if hasattr(x, 'shape') else type(x).__name__}{'.T' if t else ''}"
    return f"{shape(a, trans_a)} @ {shape(b, trans_b)}"


cdef _check_array(str name, x, a, b, bint trans_a, bint trans_b, bint output=False,
                  int half=0):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} must be a numpy "
                        f"array, got {type(x).__name__}")
    if x.dtype != np.float32 and not (half and x.dtype == np.uint16):
        kinds = "float32" + (f" or uint16 ({HALF_NAMES[half]} bits)" if half else "")
        raise TypeError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} must be {kinds}, "
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


cdef bint _u16_array(x, bint writeable) noexcept:
    """f32_array's test for native uint16."""
    return (cnp.PyArray_Check(x)
            and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_UINT16
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x)
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x)
            and (not writeable or cnp.PyArray_ISWRITEABLE(<cnp.ndarray>x)))


cdef int _format(x, int half) noexcept:
    """How packing reads an operand that passed the checks (gemm.h)."""
    if not half:
        return OM_F32
    if _u16_array(x, False):
        return OM_BF16 if half == 1 else OM_F16
    return OM_F32_TO_BF16 if half == 1 else OM_F32_TO_F16


cdef uint16_t *_save_of(str name, save, x, a, b, bint trans_a, bint trans_b, out,
                        int half) except? NULL:
    """The data of the array that receives operand x's rounded bits, or NULL for None."""
    if save is None:
        return NULL
    if not half or not f32_array(x, False):
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} needs a float32 "
                         f"operand and half = 1 (bf16) or 2 (fp16)")
    if not (_u16_array(save, True) and save.shape == x.shape):
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} must be a "
                         f"writeable C-contiguous uint16 array of shape {tuple(x.shape)}, got "
                         f"{getattr(save, 'dtype', type(save).__name__)} "
                         f"{getattr(save, 'shape', '')}")
    if overlap(save, out) or overlap(save, a) or overlap(save, b):
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: {name} overlaps an "
                         f"operand or out")
    return <uint16_t *>cnp.PyArray_DATA(<cnp.ndarray>save)


cdef void _shape3(x, int64_t *dims) noexcept:
    """(batch, rows, cols) of a 2-D or 3-D array _fits accepted; 2-D is a batch of one."""
    cdef int nd = cnp.PyArray_NDIM(<cnp.ndarray>x)
    dims[0] = cnp.PyArray_DIM(<cnp.ndarray>x, 0) if nd == 3 else 1
    dims[1] = cnp.PyArray_DIM(<cnp.ndarray>x, nd - 2)
    dims[2] = cnp.PyArray_DIM(<cnp.ndarray>x, nd - 1)


def gemm(a, b, out, bint trans_a, bint trans_b, int nthreads, bias=None, int half=0,
         save_a=None, save_b=None, bint add=False) -> None:
    """out[p] = op(a[p]) @ op(b[p]) (+ bias); op transposes the last two axes when trans_* is set.

    a, b, out: float32 C-contiguous, 2-D (one product) or 3-D (batch, rows, cols). The batch of
    a or b is either out's batch or 1 (that operand is used for every product). bias, if given,
    is a float32 vector of out's column count added to every row after the product (one
    rounded add per element, as `out += bias` would do, without a second call into numpy).
    half: 0 (float32 operands as they are), 1 or 2: every operand rounded to bfloat16 or
    float16 as packing reads it (a float32 array), or holding those bits (a uint16 array);
    save_a / save_b (uint16, the shape of a float32 a / b) then receive the rounded bits.
    add: out += the product instead (the bits of adding it made whole), for a depth of 1 to KC
    and no bias. Everything is checked before the kernel writes anything.
    """
    if half < 0 or half > 2:
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: half must be 0, 1 "
                         f"(bf16) or 2 (fp16), got {half}")
    if not ((_fits(a, False) or half and _u16_array(a, False))
            and (_fits(b, False) or half and _u16_array(b, False)) and _fits(out, True)):
        _check_array("a", a, a, b, trans_a, trans_b, False, half)
        _check_array("b", b, a, b, trans_a, trans_b, False, half)
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
    if add and (bias is not None or not 1 <= k <= OM_GEMM_KC):
        raise ValueError(f"matmul: {_operands(a, b, trans_a, trans_b)}: adding into out needs "
                         f"no bias and a depth of 1 to {OM_GEMM_KC}, got {k}")
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
    cdef om_gemm_operand oa, ob
    oa.save = _save_of("save_a", save_a, a, a, b, trans_a, trans_b, out, half)
    ob.save = _save_of("save_b", save_b, b, a, b, trans_a, trans_b, out, half)

    # The kernel reads nothing when k == 0 (it writes zeros), and a and b are then empty.
    oa.p = cnp.PyArray_DATA(<cnp.ndarray>a) if k else NULL
    ob.p = cnp.PyArray_DATA(<cnp.ndarray>b) if k else NULL
    oa.batch_stride = 0 if batch_a == 1 else m * k
    ob.batch_stride = 0 if batch_b == 1 else k * n
    oa.trans, ob.trans = trans_a, trans_b
    oa.fmt, ob.fmt = _format(a, half), _format(b, half)
    cdef float *cp = data_of(out)
    cdef const float *biasp = data_of(bias) if bias is not None else NULL
    cdef int64_t row, j
    cdef int status
    with nogil:
        status = om_gemm(batch, m, n, k, oa, ob, cp, add, nthreads)
        if status == 0 and biasp != NULL:
            for row in range(batch * m):
                for j in range(n):
                    cp[row * n + j] = cp[row * n + j] + biasp[j]
    if status != 0:
        raise MemoryError(f"matmul: {_operands(a, b, trans_a, trans_b)}: out of memory for "
                          f"packing buffers")
