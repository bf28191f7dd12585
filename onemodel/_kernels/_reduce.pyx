# cython: freethreading_compatible = True
"""Sums along an axis, softmax and log_softmax, layer norm, and the embedding gradient.

The kernels (csrc/reduce.c) add along a vector in one fixed order (16 lanes and a fixed tree,
per chunk of 65536 elements) and over a non-innermost axis sequentially, so the bits are the
same on every instruction-set path and thread count. This wrapper checks every dtype, layout,
size and overlap before a kernel runs. Tensors are viewed as (outer, n, inner), reduced over n;
layer norm works on rows of length n. An output may be the very array of an input of the same
size (computed in place) where noted; no other overlap is allowed.

Each wrapper first tests in C (_arrays.pxd) that every argument is valid and no output overlaps
anything; only when that test fails do the Python-level checks run, which either raise with
the message or, for an allowed in-place call, accept it.
"""
import numpy as np

cimport numpy as cnp
from onemodel._kernels._arrays cimport data_of, f32_array, overlap, size_of
from libc.stdint cimport int64_t

cnp.import_array()

cdef extern from "reduce.h" nogil:
    void om_sum_axis_f32(const float *x, float *out, int64_t outer, int64_t n, int64_t inner,
                         int nthreads)
    void om_softmax_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
                        int is_log, int nthreads)
    void om_softmax_backward_f32(const float *y, const float *g, float *dx, int64_t outer,
                                 int64_t n, int64_t inner, int is_log, int nthreads)
    void om_layer_norm_f32(const float *x, const float *w, const float *b, float eps, float *y,
                           float *mean, float *rstd, int64_t rows, int64_t n, int nthreads)
    void om_layer_norm_backward_f32(const float *g, const float *x, const float *mean,
                                    const float *rstd, const float *w, float *dx, float *dw,
                                    float *db, int64_t rows, int64_t n, int nthreads)
    int om_index_add_rows_f32(const int64_t *index, int64_t n, const float *rows, int64_t width,
                              float *out, int64_t out_rows, int nthreads)


# Where an empty array points: kernels never read it, but they get a valid address.
cdef float _empty[1]


cdef float *_ptr(x):
    """Data of an array the checks accepted (NULL for None, a valid address when empty)."""
    if x is None:
        return NULL
    return data_of(x) if size_of(x) else _empty


cdef bint _fits(x, int64_t size, bint output=False, bint optional=False):
    """The fast form of _check: true when _check would accept x."""
    if x is None:
        return optional
    return f32_array(x, output) and size_of(x) == size


cdef bint _disjoint(tuple outputs, tuple inputs):
    """No output overlaps another output or an input (else _check_overlap decides)."""
    cdef Py_ssize_t i, j
    for i in range(len(outputs)):
        for j in range(i + 1, len(outputs)):
            if overlap(outputs[i], outputs[j]):
                return False
        for a in inputs:
            if overlap(outputs[i], a):
                return False
    return True


def _check(str op, str where, str name, x, Py_ssize_t size, bint output=False,
           bint optional=False):
    """x is a float32 C-contiguous numpy array of `size` elements (or None when optional)."""
    if x is None and optional:
        return
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{op}: {where}: {name} must be a numpy array, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"{op}: {where}: {name} must be float32, got {x.dtype}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{op}: {where}: {name} of shape {tuple(x.shape)} must be C-contiguous")
    if output and not x.flags.writeable:
        raise ValueError(f"{op}: {where}: {name} must be writeable")
    if x.size != size:
        raise ValueError(f"{op}: {where}: {name} has shape {tuple(x.shape)} ({x.size} elements),"
                         f" expected {size} elements")


cdef _check_dims(str op, str where, dims, int nthreads):
    for name, value in dims:
        if value < 0:
            raise ValueError(f"{op}: {where}: {name} must be >= 0, got {value}")
    if nthreads < 1:
        raise ValueError(f"{op}: {where}: nthreads must be >= 1, got {nthreads}")


cdef _check_overlap(str op, str where, outputs, inputs, in_place):
    """No output overlaps another array, except an output that is exactly one of `in_place`
    (its name and array), which the kernel may overwrite element by element."""
    arrays = [(n, a) for n, a in list(outputs) + list(inputs) if a is not None and a.size]
    for name, out in outputs:
        if out is None or not out.size:
            continue
        for other_name, other in arrays:
            if other is out and other_name == name:
                continue
            if not np.may_share_memory(out, other):
                continue
            same = (other.__array_interface__["data"][0] == out.__array_interface__["data"][0]
                    and other.size == out.size)
            if not (same and (name, other_name) in in_place):
                raise ValueError(f"{op}: {where}: {name} overlaps {other_name}")


def _where(outer, n, inner) -> str:
    return f"(outer, n, inner) = ({outer}, {n}, {inner})"


def sum_axis(x, out, int64_t outer, int64_t n, int64_t inner, int nthreads) -> None:
    """out[o, k] = Σ_i x[o, i, k]: along a vector in the 16-lane order (inner == 1), else
    sequentially over i."""
    if not (outer >= 0 and n >= 0 and inner >= 0 and nthreads >= 1
            and _fits(x, outer * n * inner) and _fits(out, outer * inner, output=True)
            and _disjoint((out,), (x,))):
        where = _where(outer, n, inner)
        _check_dims("sum_axis", where, (("outer", outer), ("n", n), ("inner", inner)), nthreads)
        _check("sum_axis", where, "x", x, outer * n * inner)
        _check("sum_axis", where, "out", out, outer * inner, output=True)
        _check_overlap("sum_axis", where, (("out", out),), (("x", x),), ())
    cdef const float *px = _ptr(x)
    cdef float *po = _ptr(out)
    with nogil:
        om_sum_axis_f32(px, po, outer, n, inner, nthreads)


def softmax(x, out, int64_t outer, int64_t n, int64_t inner, bint log, int nthreads) -> None:
    """softmax (or log_softmax when `log`) of x over n; out may be x."""
    cdef int64_t size = outer * n * inner
    if not (outer >= 0 and n >= 0 and inner >= 0 and nthreads >= 1
            and _fits(x, size) and _fits(out, size, output=True) and _disjoint((out,), (x,))):
        where = _where(outer, n, inner)
        op = "log_softmax" if log else "softmax"
        _check_dims(op, where, (("outer", outer), ("n", n), ("inner", inner)), nthreads)
        _check(op, where, "x", x, size)
        _check(op, where, "out", out, size, output=True)
        _check_overlap(op, where, (("out", out),), (("x", x),), (("out", "x"),))
    cdef const float *px = _ptr(x)
    cdef float *po = _ptr(out)
    with nogil:
        om_softmax_f32(px, po, outer, n, inner, log, nthreads)


def softmax_backward(y, g, out, int64_t outer, int64_t n, int64_t inner, bint log,
                     int nthreads) -> None:
    """Gradient of softmax (or log_softmax) from its output y and the upstream gradient g;
    out may be y or g."""
    cdef int64_t size = outer * n * inner
    if not (outer >= 0 and n >= 0 and inner >= 0 and nthreads >= 1
            and _fits(y, size) and _fits(g, size) and _fits(out, size, output=True)
            and _disjoint((out,), (y, g))):
        where = _where(outer, n, inner)
        op = "log_softmax_backward" if log else "softmax_backward"
        _check_dims(op, where, (("outer", outer), ("n", n), ("inner", inner)), nthreads)
        _check(op, where, "y", y, size)
        _check(op, where, "g", g, size)
        _check(op, where, "out", out, size, output=True)
        _check_overlap(op, where, (("out", out),), (("y", y), ("g", g)),
                       (("out", "y"), ("out", "g")))
    cdef const float *py = _ptr(y)
    cdef const float *pg = _ptr(g)
    cdef float *po = _ptr(out)
    with nogil:
        om_softmax_backward_f32(py, pg, po, outer, n, inner, log, nthreads)


def layer_norm(x, w, b, float eps, y, mean, rstd, int64_t rows, int64_t n,
               int nthreads) -> None:
    """y = (x - mean) * rstd * w + b over rows of length n (w, b optional); mean and rstd
    receive one value per row. y may be x."""
    if not (rows >= 0 and n >= 0 and nthreads >= 1
            and _fits(x, rows * n) and _fits(w, n, False, True)
            and _fits(b, n, False, True) and _fits(y, rows * n, output=True)
            and _fits(mean, rows, output=True) and _fits(rstd, rows, output=True)
            and _disjoint((y, mean, rstd), (x, w, b))):
        where = f"(rows, n) = ({rows}, {n})"
        _check_dims("layer_norm", where, (("rows", rows), ("n", n)), nthreads)
        _check("layer_norm", where, "x", x, rows * n)
        _check("layer_norm", where, "w", w, n, optional=True)
        _check("layer_norm", where, "b", b, n, optional=True)
        _check("layer_norm", where, "y", y, rows * n, output=True)
        _check("layer_norm", where, "mean", mean, rows, output=True)
        _check("layer_norm", where, "rstd", rstd, rows, output=True)
        _check_overlap("layer_norm", where, (("y", y), ("mean", mean), ("rstd", rstd)),
                       (("x", x), ("w", w), ("b", b)), (("y", "x"),))
    cdef const float *px = _ptr(x)
    cdef const float *pw = _ptr(w)
    cdef const float *pb = _ptr(b)
    cdef float *py = _ptr(y)
    cdef float *pm = _ptr(mean)
    cdef float *pr = _ptr(rstd)
    with nogil:
        om_layer_norm_f32(px, pw, pb, eps, py, pm, pr, rows, n, nthreads)


def layer_norm_backward(g, x, mean, rstd, w, dx, dw, db, int64_t rows, int64_t n,
                        int nthreads) -> None:
    """dx of layer norm (PyTorch's formula), and when given dw = Σ_rows g * xhat,
    db = Σ_rows g. dx may be g or x."""
    if not (rows >= 0 and n >= 0 and nthreads >= 1
            and _fits(g, rows * n) and _fits(x, rows * n) and _fits(mean, rows)
            and _fits(rstd, rows) and _fits(w, n, False, True)
            and _fits(dx, rows * n, output=True) and _fits(dw, n, True, True)
            and _fits(db, n, True, True)
            and _disjoint((dx, dw, db), (g, x, mean, rstd, w))):
        where = f"(rows, n) = ({rows}, {n})"
        op = "layer_norm_backward"
        _check_dims(op, where, (("rows", rows), ("n", n)), nthreads)
        _check(op, where, "g", g, rows * n)
        _check(op, where, "x", x, rows * n)
        _check(op, where, "mean", mean, rows)
        _check(op, where, "rstd", rstd, rows)
        _check(op, where, "w", w, n, optional=True)
        _check(op, where, "dx", dx, rows * n, output=True)
        _check(op, where, "dw", dw, n, output=True, optional=True)
        _check(op, where, "db", db, n, output=True, optional=True)
        _check_overlap(op, where, (("dx", dx), ("dw", dw), ("db", db)),
                       (("g", g), ("x", x), ("mean", mean), ("rstd", rstd), ("w", w)),
                       (("dx", "g"), ("dx", "x")))
    cdef const float *pg = _ptr(g)
    cdef const float *px = _ptr(x)
    cdef const float *pm = _ptr(mean)
    cdef const float *pr = _ptr(rstd)
    cdef const float *pw = _ptr(w)
    cdef float *pdx = _ptr(dx)
    cdef float *pdw = _ptr(dw)
    cdef float *pdb = _ptr(db)
    with nogil:
        om_layer_norm_backward_f32(pg, px, pm, pr, pw, pdx, pdw, pdb, rows, n, nthreads)


def index_add_rows(index, rows, out, int nthreads) -> None:
    """out[index[p]] += rows[p] for every p in order (the embedding gradient): index int64
    (n,), rows float32 (n, width), out float32 (m, width); every index in [0, m)."""
    op = "index_add_rows"
    if not isinstance(index, np.ndarray) or index.dtype != np.int64 or index.ndim != 1 or \
            not index.flags.c_contiguous:
        raise TypeError(f"{op}: index must be a C-contiguous int64 vector, got "
                        f"{getattr(index, 'dtype', type(index).__name__)} of shape "
                        f"{getattr(index, 'shape', None)}")
    for name, a in (("rows", rows), ("out", out)):
        if not isinstance(a, np.ndarray) or a.ndim != 2:
            raise ValueError(f"{op}: {name} must be a 2-D numpy array, got shape "
                             f"{getattr(a, 'shape', None)}")
    where = f"index {tuple(index.shape)}, rows {tuple(rows.shape)}, out {tuple(out.shape)}"
    if rows.shape[0] != index.shape[0] or rows.shape[1] != out.shape[1]:
        raise ValueError(f"{op}: {where}: rows must be (len(index), out.shape[1])")
    _check(op, where, "rows", rows, rows.size)
    _check(op, where, "out", out, out.size, output=True)
    _check_dims(op, where, (), nthreads)
    _check_overlap(op, where, (("out", out),), (("rows", rows), ("index", index)), ())
    cdef cnp.int64_t[::1] idx = index
    cdef const int64_t *pi = <const int64_t *>&idx[0] if index.size else NULL
    cdef const float *pr = _ptr(rows)
    cdef float *po = _ptr(out)
    cdef int64_t n = index.shape[0], width = rows.shape[1], m = out.shape[0]
    cdef int status
    with nogil:
        status = om_index_add_rows_f32(pi, n, pr, width, po, m, nthreads)
    if status:
        bad = index[(index < 0) | (index >= m)][0]
        raise IndexError(f"{op}: {where}: index {int(bad)} is outside [0, {m})")
