# cython: freethreading_compatible = True
"""Optimizer updates and gradient clipping kernels (csrc/optim.h has the design note).

Every array is a 1-D C-contiguous float32 view of a parameter, its gradient or its state; the
Python layer (onemodel.optim) checks shapes, dtypes and aliasing before calling. Each update is
one pass over memory, the same bits on every instruction-set path and thread count.
"""
from libc.stdint cimport int64_t

cdef extern from "optim.h" nogil:
    ctypedef struct om_sgd_hyper:
        float lr, momentum, dampening_c, weight_decay
        int nesterov, first
    ctypedef struct om_adam_hyper:
        float beta1, beta2, beta1_c, beta2_c, eps, step_size, sqrt_bc2, weight_decay, decay
        int decoupled, amsgrad
    void om_sgd_step_f32(float *p, const float *g, float *buf, int64_t n,
                         const om_sgd_hyper *h, int nthreads)
    void om_adam_step_f32(float *p, const float *g, float *m, float *v, float *vmax, int64_t n,
                          const om_adam_hyper *h, int nthreads)
    void om_scale_inplace_f32(float *g, int64_t n, float coef, int nthreads)
    void om_clamp_inplace_f32(float *g, int64_t n, float c, int nthreads)
    double om_sumsq_seq_f64(const float *g, int64_t n, double acc)
    float om_absmax_f32(const float *g, int64_t n)


cdef inline void _same_size(str op, Py_ssize_t n, Py_ssize_t m, str what) except *:
    if m != n:
        raise ValueError(f"{op}: {what} has {m} elements, the parameter {n}")


def sgd_step(float[::1] p not None, const float[::1] g not None, float[::1] buf,
             float lr, float momentum, float dampening_c, float weight_decay, bint nesterov,
             bint first, int nthreads) -> None:
    """One SGD step over p in place; buf is the momentum buffer (None when momentum is 0)."""
    cdef om_sgd_hyper h
    cdef Py_ssize_t n = p.shape[0]
    _same_size("sgd_step", n, g.shape[0], "the gradient")
    if momentum != 0.0:
        if buf is None:
            raise ValueError("sgd_step: momentum needs a buffer")
        _same_size("sgd_step", n, buf.shape[0], "the momentum buffer")
    if n == 0:
        return
    h.lr, h.momentum, h.dampening_c, h.weight_decay = lr, momentum, dampening_c, weight_decay
    h.nesterov, h.first = nesterov, first
    cdef float *b = &buf[0] if momentum != 0.0 else NULL
    with nogil:
        om_sgd_step_f32(&p[0], &g[0], b, n, &h, nthreads)


def adam_step(float[::1] p not None, const float[::1] g not None, float[::1] m not None,
              float[::1] v not None, float[::1] vmax, float beta1, float beta2, float beta1_c,
              float beta2_c, float eps, float step_size, float sqrt_bc2, float weight_decay,
              float decay, bint decoupled, int nthreads) -> None:
    """One Adam/AdamW step over p in place; vmax is the AMSGrad maximum (None without it)."""
    cdef om_adam_hyper h
    cdef Py_ssize_t n = p.shape[0]
    _same_size("adam_step", n, g.shape[0], "the gradient")
    _same_size("adam_step", n, m.shape[0], "exp_avg")
    _same_size("adam_step", n, v.shape[0], "exp_avg_sq")
    if vmax is not None:
        _same_size("adam_step", n, vmax.shape[0], "max_exp_avg_sq")
    if n == 0:
        return
    h.beta1, h.beta2, h.beta1_c, h.beta2_c = beta1, beta2, beta1_c, beta2_c
    h.eps, h.step_size, h.sqrt_bc2 = eps, step_size, sqrt_bc2
    h.weight_decay, h.decay, h.decoupled = weight_decay, decay, decoupled
    h.amsgrad = vmax is not None
    cdef float *vm = &vmax[0] if vmax is not None else NULL
    with nogil:
        om_adam_step_f32(&p[0], &g[0], &m[0], &v[0], vm, n, &h, nthreads)


def scale_(float[::1] g not None, float coef, int nthreads) -> None:
    """g *= coef, one float32 multiply per element."""
    if g.shape[0] == 0:
        return
    with nogil:
        om_scale_inplace_f32(&g[0], g.shape[0], coef, nthreads)


def clamp_(float[::1] g not None, float c, int nthreads) -> None:
    """g = min(c, max(-c, g)); NaN stays NaN."""
    if g.shape[0] == 0:
        return
    with nogil:
        om_clamp_inplace_f32(&g[0], g.shape[0], c, nthreads)


def sumsq_f64(const float[::1] g not None, double acc=0.0) -> float:
    """acc + Σ g² in double, the elements added one by one in index order."""
    if g.shape[0] == 0:
        return acc
    with nogil:
        acc = om_sumsq_seq_f64(&g[0], g.shape[0], acc)
    return acc


def absmax(const float[::1] g not None) -> float:
    """max |g| as float32 (NaN if any element is NaN, 0 when empty)."""
    cdef float r = 0.0
    if g.shape[0] != 0:
        with nogil:
            r = om_absmax_f32(&g[0], g.shape[0])
    return r
