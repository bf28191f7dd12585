# cython: freethreading_compatible = True
"""Direct paths of the commonest small ops: float32 tensors in, a Tensor out, no numpy call.

On tensors of a few elements an op's cost is the Python around its arithmetic. For the common
case (C-contiguous float32 tensors of one shape, or a float32 tensor and a Python number) these
functions check the operands in a few C reads, compute in C and build the output Tensor
themselves. Each returns None when its case does not apply, and the op then runs its general
path, which raises the errors and applies PyTorch's promotion and broadcasting.

The bits are the general path's: + − × ÷ are single IEEE operations (numpy rounds them the
same way), the transcendentals, sums and softmax run the same kernels with the same shapes,
and a product is om_gemm_f32's. C arithmetic sets no numpy error state, so nothing warns:
inf - inf and overflow give NaN and inf silently, as in PyTorch.

The graph node stays the op's to make: `binary`, `unary` (when asked) and `matmul` hand back
the bare output array when an input requires gradients; `reduce` answers None then. `record`,
which wraps every op's output and links it into the graph (functional/_core.py), is here too.
"""

import numpy as np

cimport numpy as cnp
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport int64_t
from onemodel._kernels._arrays cimport data_of, f32_array

cnp.import_array()

cdef extern from "vmath_kernels.h" nogil:
    void om_vmath_unary(int op, const float *x, float *y, int64_t n, int nthreads)

cdef extern from "reduce.h" nogil:
    void om_sum_axis_f32(const float *x, float *out, int64_t outer, int64_t n, int64_t inner,
                         int nthreads)
    void om_softmax_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                        int is_log, int nthreads)

cdef extern from "gemm.h" nogil:
    int om_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k,
                    const float *a, int64_t a_batch_stride, int trans_a,
                    const float *b, int64_t b_batch_stride, int trans_b,
                    float *c, int nthreads)

cdef enum:
    C_ADD, C_SUB, C_MUL, C_DIV
    C_SUM = 0
    C_SOFTMAX, C_LOG_SOFTMAX

ADD, SUB, MUL, DIV = C_ADD, C_SUB, C_MUL, C_DIV
SUM, SOFTMAX, LOG_SOFTMAX = C_SUM, C_SOFTMAX, C_LOG_SOFTMAX

# Given by bind() (tensor.py and autograd.py import the kernels first): the Tensor class, the
# graph's Node class and its grad mode (autograd._state, whose .enabled is is_grad_enabled()).
cdef object _Tensor = None
cdef object _Node = None
cdef object _grad_mode = None


def bind(tensor_class, node_class, grad_mode) -> None:
    """Sets the classes of the tensors and nodes made, and where the grad mode is read."""
    global _Tensor, _Node, _grad_mode
    _Tensor, _Node, _grad_mode = tensor_class, node_class, grad_mode


cdef inline object _wrap(object arr, bint requires_grad=False):
    """A Tensor owning arr (Tensor._wrap)."""
    t = _Tensor.__new__(_Tensor)
    t._data = arr
    t._node = None
    t._vc = [0]
    t.grad = None
    t._requires_grad = requires_grad
    return t


def record(str op, out, inputs, backward, saved=()):
    """Wraps `out` in a Tensor and, when gradients are needed, links it into the graph.

    `backward(g)` returns one gradient per input (None where not needed); `saved` lists the
    tensors whose values the closure reads, protected against in-place writes.
    """
    if not (cnp.PyArray_Check(out) and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>out)):
        out = np.require(out, requirements="C")  # unlike ascontiguousarray, keeps 0-d
    for t in inputs:
        if t._requires_grad:
            if not _grad_mode.enabled:
                break
            result = _wrap(out, True)
            result._node = _Node(op, out.shape, inputs, backward, saved)
            return result
    return _wrap(out)


cdef inline object _f32_data(object x):
    """x's array if x is a Tensor holding a C-contiguous float32 one, else None."""
    if not isinstance(x, _Tensor):
        return None
    data = x._data
    return data if f32_array(data, False) else None


cdef inline bint _scalar(object x, float *value):
    """Whether x is a Python float, or an int of at most 2**53 in magnitude (exact as a double);
    then *value is x rounded once to float32, as numpy converts it. bool stays general."""
    cdef int overflow = 0
    cdef long long v
    if type(x) is float:
        value[0] = <float>(<double>x)
        return True
    if type(x) is int:
        v = PyLong_AsLongLongAndOverflow(x, &overflow)
        if overflow or v > (1LL << 53) or v < -(1LL << 53):
            return False
        value[0] = <float>(<double>v)
        return True
    return False


cdef inline object _empty_like(object data):
    return cnp.PyArray_EMPTY(cnp.PyArray_NDIM(<cnp.ndarray>data),
                             cnp.PyArray_DIMS(<cnp.ndarray>data), cnp.NPY_FLOAT32, 0)


def binary(int op, a, b):
    """a op b (op: ADD, SUB, MUL or DIV) for two float32 tensors of one shape, or a float32
    tensor and a Python number on either side: a Tensor, or the bare array when a tensor
    requires gradients. None when the case does not apply."""
    cdef float s = 0
    cdef int side  # 0: two tensors; 1: a is the number; 2: b is
    da = _f32_data(a)
    db = _f32_data(b)
    if da is not None and db is not None:
        if not cnp.PyArray_SAMESHAPE(<cnp.ndarray>da, <cnp.ndarray>db):
            return None
        side = 0
    elif da is not None and _scalar(b, &s):
        side = 2
    elif db is not None and _scalar(a, &s):
        side = 1
    else:
        return None
    graph = (side != 2 and b._requires_grad) or (side != 1 and a._requires_grad)
    like = db if side == 1 else da
    out = _empty_like(like)
    cdef int64_t n = cnp.PyArray_SIZE(<cnp.ndarray>like), i
    cdef const float *x = data_of(da) if side != 1 else NULL
    cdef const float *y = data_of(db) if side != 2 else NULL
    cdef float *o = data_of(out)
    if side == 0:
        if op == C_ADD:
            for i in range(n):
                o[i] = x[i] + y[i]
        elif op == C_SUB:
            for i in range(n):
                o[i] = x[i] - y[i]
        elif op == C_MUL:
            for i in range(n):
                o[i] = x[i] * y[i]
        else:
            for i in range(n):
                o[i] = x[i] / y[i]
    elif side == 2:
        if op == C_ADD:
            for i in range(n):
                o[i] = x[i] + s
        elif op == C_SUB:
            for i in range(n):
                o[i] = x[i] - s
        elif op == C_MUL:
            for i in range(n):
                o[i] = x[i] * s
        else:
            for i in range(n):
                o[i] = x[i] / s
    else:
        if op == C_ADD:
            for i in range(n):
                o[i] = s + y[i]
        elif op == C_SUB:
            for i in range(n):
                o[i] = s - y[i]
        elif op == C_MUL:
            for i in range(n):
                o[i] = s * y[i]
        else:
            for i in range(n):
                o[i] = s / y[i]
    return out if graph else _wrap(out)


def unary(int kernel, x, int nthreads, bint graph):
    """The _vmath kernel number `kernel` over a float32 tensor: a Tensor, or when x requires
    gradients the bare array (graph) or None (not graph). None when the case does not apply."""
    data = _f32_data(x)
    if data is None or nthreads < 1:
        return None
    needs = x._requires_grad
    if needs and not graph:
        return None
    out = _empty_like(data)
    cdef int64_t n = cnp.PyArray_SIZE(<cnp.ndarray>data)
    cdef const float *px = data_of(data)
    cdef float *po = data_of(out)
    if n:
        with nogil:
            om_vmath_unary(kernel, px, po, n, nthreads)
    return out if needs else _wrap(out)


def reduce(int op, x, dim, int nthreads):
    """sum over one axis or all of them (dim an int, or None), softmax or log_softmax over one
    axis, of a non-empty float32 tensor of rank >= 1 that requires no gradient (keepdim
    False): a Tensor, or None when the case does not apply (an out-of-range dim included)."""
    data = _f32_data(x)
    if data is None or nthreads < 1 or x._requires_grad:
        return None
    cdef int nd = cnp.PyArray_NDIM(<cnp.ndarray>data)
    cdef cnp.npy_intp *dims = cnp.PyArray_DIMS(<cnp.ndarray>data)
    cdef int64_t size = cnp.PyArray_SIZE(<cnp.ndarray>data), outer = 1, inner = 1
    cdef cnp.npy_intp kept[64]  # numpy's NPY_MAXDIMS is 32 (64 from numpy 2)
    cdef int axis, i
    if nd == 0 or size == 0:
        return None
    if dim is None and op == C_SUM:
        out = cnp.PyArray_EMPTY(0, dims, cnp.NPY_FLOAT32, 0)
        outer, axis, inner = 1, -1, 1
    elif type(dim) is int and -nd <= dim < nd:
        axis = dim % nd
        for i in range(axis):
            outer *= dims[i]
        for i in range(axis + 1, nd):
            inner *= dims[i]
        if op == C_SUM:
            for i in range(nd - 1):
                kept[i] = dims[i + (i >= axis)]
            out = cnp.PyArray_EMPTY(nd - 1, kept, cnp.NPY_FLOAT32, 0)
        else:
            out = _empty_like(data)
    else:
        return None
    cdef const float *px = data_of(data)
    cdef float *po = data_of(out)
    cdef int64_t n = size // (outer * inner)
    with nogil:
        if op == C_SUM:
            om_sum_axis_f32(px, po, outer, n, inner, nthreads)
        else:
            om_softmax_f32(px, po, outer, n, inner, op == C_LOG_SOFTMAX, nthreads)
    return _wrap(out)


def matmul(a, b, bias, bint trans_b, int nthreads):
    """a @ op(b) (+ bias, a vector over the columns) for 2-D float32 tensors by om_gemm_f32
    (the general path's product of float32 operands): a Tensor, or the bare array when a
    tensor requires gradients; None when the case does not apply (an empty product
    included)."""
    da = _f32_data(a)
    db = _f32_data(b)
    if (da is None or db is None or nthreads < 1
            or cnp.PyArray_NDIM(<cnp.ndarray>da) != 2 or cnp.PyArray_NDIM(<cnp.ndarray>db) != 2):
        return None
    cdef int64_t m = cnp.PyArray_DIM(<cnp.ndarray>da, 0), k = cnp.PyArray_DIM(<cnp.ndarray>da, 1)
    cdef int64_t kb = cnp.PyArray_DIM(<cnp.ndarray>db, 1 if trans_b else 0)
    cdef int64_t n = cnp.PyArray_DIM(<cnp.ndarray>db, 0 if trans_b else 1)
    if k != kb or m * n * k == 0:
        return None
    cdef const float *pbias = NULL
    if bias is not None:
        dbias = _f32_data(bias)
        if (dbias is None or cnp.PyArray_NDIM(<cnp.ndarray>dbias) != 1
                or cnp.PyArray_DIM(<cnp.ndarray>dbias, 0) != n):
            return None
        pbias = data_of(dbias)
    cdef cnp.npy_intp shape[2]
    shape[0], shape[1] = m, n
    out = cnp.PyArray_EMPTY(2, shape, cnp.NPY_FLOAT32, 0)
    cdef const float *pa = data_of(da)
    cdef const float *pb = data_of(db)
    cdef float *c = data_of(out)
    cdef int status
    cdef int64_t i, j
    with nogil:
        status = om_gemm_f32(1, m, n, k, pa, 0, 0, pb, 0, trans_b, c, nthreads)
        if status == 0 and pbias != NULL:
            for i in range(m):
                for j in range(n):
                    c[i * n + j] = c[i * n + j] + pbias[j]
    if status != 0:
        raise MemoryError("matmul: out of memory for the packed operands")
    if a._requires_grad or b._requires_grad or bias is not None and bias._requires_grad:
        return out
    return _wrap(out)
