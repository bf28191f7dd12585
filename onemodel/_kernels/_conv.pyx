# cython: freethreading_compatible = True
"""Convolution, pooling and batch-norm kernels (csrc/conv.c, pool.c, batch_norm.c) behind
shape-checking wrappers.

onemodel.functional.conv validates user arguments and allocates; these wrappers check again
that every array agrees with the others, so no shape can make a kernel read or write out of
bounds. Arrays are float32 (int64 for indices and windows), C-contiguous; under autocast
(half = 1 or 2) a convolution's or batch norm's input may be the uint16 bits its forward saved.
"""
import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint16_t

cnp.import_array()

cdef extern from "conv.h" nogil:
    ctypedef struct om_conv2d_shape:
        int64_t n, c, h, w, k, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow
        int half, x_bits
        uint16_t *x_save
    int om_conv2d_forward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                              const float *b, float *y, int nthreads)
    int om_conv2d_backward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                               const float *gy, float *gx, float *gw, float *gb, int nthreads)

cdef extern from "pool.h" nogil:
    ctypedef struct om_pool_windows:
        int64_t planes, h, w, oh, ow, sh, sw
        const int64_t *hs
        const int64_t *he
        const int64_t *ws
        const int64_t *we
    void om_max_pool2d_f32(const om_pool_windows *p, const float *x, float *y, int64_t *idx,
                           int nthreads)
    void om_max_pool2d_backward_f32(const om_pool_windows *p, const float *gy,
                                    const int64_t *idx, float *gx, int nthreads)
    void om_avg_pool2d_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                           const float *x, float *y, int nthreads)
    void om_avg_pool2d_backward_f32(const om_pool_windows *p, const int64_t *dh,
                                    const int64_t *dw, const float *gy, float *gx, int nthreads)

cdef extern from "gemm.h" nogil:
    enum:
        OM_F32, OM_F32_TO_BF16, OM_F32_TO_F16, OM_BF16, OM_F16

cdef extern from "batch_norm.h" nogil:
    void om_batch_norm_stats_f32(const void *x, int fmt, uint16_t *save, int64_t n, int64_t c,
                                 int64_t s, double eps, float *mean, float *var,
                                 float *var_unbiased, float *invstd, int nthreads)
    void om_batch_norm_apply_f32(const void *x, int fmt, uint16_t *save, const float *mean,
                                 const float *invstd, const float *w, const float *b, float *y,
                                 int64_t n, int64_t c, int64_t s, int nthreads)
    void om_batch_norm_backward_f32(const void *x, int fmt, const float *gy, const float *mean,
                                    const float *invstd, const float *w, float *gx, float *gw,
                                    float *gb, int64_t n, int64_t c, int64_t s,
                                    int batch_stats, int nthreads)


cdef _require(str op, str name, a, tuple shape, dtype=np.float32):
    if not isinstance(a, np.ndarray) or a.dtype != dtype or not a.flags.c_contiguous:
        raise TypeError(f"{op}: {name} must be a C-contiguous {np.dtype(dtype)} array")
    if tuple(a.shape) != shape:
        raise ValueError(f"{op}: {name} has shape {tuple(a.shape)}, expected {shape}")


cdef inline float *_fptr(float[::1] v) noexcept nogil:
    return &v[0] if v.shape[0] else NULL


cdef inline const float *_cptr(const float[::1] v) noexcept nogil:
    return &v[0] if v.shape[0] else NULL


cdef inline int64_t *_iptr(int64_t[::1] v) noexcept nogil:
    return &v[0] if v.shape[0] else NULL


cdef om_conv2d_shape _conv_shape(str op, x, w, tuple stride, tuple padding, tuple dilation,
                                 int64_t groups, int half) except *:
    cdef om_conv2d_shape s
    if half < 0 or half > 2:
        raise ValueError(f"{op}: half must be 0, 1 (bf16) or 2 (fp16), got {half}")
    if not isinstance(x, np.ndarray) or x.ndim != 4 or not isinstance(w, np.ndarray) \
            or w.ndim != 4:
        raise ValueError(f"{op}: input and weight must be 4-D arrays")
    s.n, s.c, s.h, s.w = x.shape
    s.k, cg, s.kh, s.kw = w.shape
    s.sh, s.sw = stride
    s.ph, s.pw = padding
    s.dh, s.dw = dilation
    s.groups = groups
    if (groups < 1 or s.c % groups or s.k % groups or cg * groups != s.c or min(stride) < 1
            or min(dilation) < 1 or min(padding) < 0 or s.kh < 1 or s.kw < 1):
        raise ValueError(f"{op}: input {tuple(x.shape)}, weight {tuple(w.shape)}, "
                         f"stride {stride}, padding {padding}, dilation {dilation}, "
                         f"groups {groups} do not fit together")
    s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) // s.sh + 1
    s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) // s.sw + 1
    if s.oh < 1 or s.ow < 1:
        raise ValueError(f"{op}: kernel {(s.kh, s.kw)} (dilation {dilation}) is larger than "
                         f"the padded input {(s.h + 2 * s.ph, s.w + 2 * s.pw)}")
    s.half = half
    s.x_bits = half != 0 and x.dtype == np.uint16
    s.x_save = NULL
    _require(op, "input", x, tuple(x.shape), np.uint16 if s.x_bits else np.float32)
    _require(op, "weight", w, tuple(w.shape))
    return s


cdef const void *_data(a) noexcept:
    """First element of a C-contiguous array _require accepted (NULL when empty)."""
    return cnp.PyArray_DATA(<cnp.ndarray>a) if a.size else NULL


def conv2d_forward(x, w, b, y, tuple stride, tuple padding, tuple dilation, int64_t groups,
                   int nthreads, int half=0, save_x=None) -> None:
    """y = conv2d(x, w) + b (b may be None); with half, save_x (uint16, x's shape) receives
    the rounded bits of a float32 x."""
    cdef om_conv2d_shape s = _conv_shape("conv2d", x, w, stride, padding, dilation, groups,
                                         half)
    _require("conv2d", "output", y, (s.n, s.k, s.oh, s.ow))
    if b is not None:
        _require("conv2d", "bias", b, (s.k,))
    if save_x is not None:
        if not half or s.x_bits:
            raise ValueError("conv2d: save_x needs a float32 input and half = 1 or 2")
        _require("conv2d", "save_x", save_x, tuple(x.shape), np.uint16)
        if not save_x.flags.writeable or np.may_share_memory(save_x, y):
            raise ValueError("conv2d: save_x must be writeable and apart from the output")
        s.x_save = <uint16_t *>_data(save_x)
    cdef const void *xp = _data(x)
    cdef const float[::1] wv = w.reshape(-1)
    cdef const float[::1] bv = (b if b is not None else np.empty(0, np.float32))
    cdef float[::1] yv = y.reshape(-1)
    cdef const float *bp = _cptr(bv) if b is not None else NULL
    cdef int status
    with nogil:
        status = om_conv2d_forward_f32(&s, xp, _cptr(wv), bp, _fptr(yv), nthreads)
    if status:
        raise MemoryError(f"conv2d: out of memory for the column matrix of input "
                          f"{tuple(x.shape)} and weight {tuple(w.shape)}")


def conv2d_backward(x, w, gy, gx, gw, gb, tuple stride, tuple padding, tuple dilation,
                    int64_t groups, int nthreads, int half=0) -> None:
    """Gradients of conv2d for upstream gy into gx, gw, gb (each may be None: not wanted)."""
    cdef om_conv2d_shape s = _conv_shape("conv2d backward", x, w, stride, padding, dilation,
                                         groups, half)
    _require("conv2d backward", "grad_output", gy, (s.n, s.k, s.oh, s.ow))
    empty = np.empty(0, np.float32)
    for name, a, shape in (("grad_input", gx, x.shape), ("grad_weight", gw, w.shape),
                           ("grad_bias", gb, (s.k,))):
        if a is not None:
            _require("conv2d backward", name, a, tuple(shape))
    cdef const void *xp = _data(x)
    cdef const float[::1] wv = w.reshape(-1), gyv = gy.reshape(-1)
    cdef float[::1] gxv = gx.reshape(-1) if gx is not None else empty
    cdef float[::1] gwv = gw.reshape(-1) if gw is not None else empty
    cdef float[::1] gbv = gb if gb is not None else empty
    cdef float *gxp = _fptr(gxv) if gx is not None else NULL
    cdef float *gwp = _fptr(gwv) if gw is not None else NULL
    cdef float *gbp = _fptr(gbv) if gb is not None else NULL
    cdef int status
    with nogil:
        status = om_conv2d_backward_f32(&s, xp, _cptr(wv), _cptr(gyv), gxp, gwp, gbp,
                                        nthreads)
    if status:
        raise MemoryError(f"conv2d backward: out of memory for the column matrix of input "
                          f"{tuple(x.shape)} and weight {tuple(w.shape)}")


cdef om_pool_windows _windows(str op, x, y, hs, he, ws, we) except *:
    cdef om_pool_windows p
    if not isinstance(x, np.ndarray) or x.ndim != 3 or not isinstance(y, np.ndarray) \
            or y.ndim != 3:
        raise ValueError(f"{op}: input and output must be 3-D arrays (planes, rows, cols)")
    p.planes, p.h, p.w = x.shape
    _, p.oh, p.ow = y.shape
    _require(op, "input", x, tuple(x.shape))
    _require(op, "output", y, (p.planes, p.oh, p.ow))
    for name, a, n in (("hs", hs, p.oh), ("he", he, p.oh), ("ws", ws, p.ow), ("we", we, p.ow)):
        _require(op, name, a, (n,), np.int64)
    if p.oh and (hs.min() < 0 or he.max() > p.h or (he <= hs).any()):
        raise ValueError(f"{op}: row windows outside [0, {p.h}) or empty")
    if p.ow and (ws.min() < 0 or we.max() > p.w or (we <= ws).any()):
        raise ValueError(f"{op}: column windows outside [0, {p.w}) or empty")
    cdef const int64_t[::1] hsv = hs, hev = he, wsv = ws, wev = we
    p.hs = &hsv[0] if p.oh else NULL
    p.he = &hev[0] if p.oh else NULL
    p.ws = &wsv[0] if p.ow else NULL
    p.we = &wev[0] if p.ow else NULL
    p.sh = p.sw = 1
    return p


def max_pool2d(x, y, idx, hs, he, ws, we, int64_t sh, int64_t sw, int nthreads) -> None:
    """y[p, i, j] = max of x[p, hs[i]:he[i]:sh, ws[j]:we[j]:sw]; idx = its row * w + col in the
    plane."""
    cdef om_pool_windows p = _windows("max_pool2d", x, y, hs, he, ws, we)
    if sh < 1 or sw < 1:
        raise ValueError(f"max_pool2d: tap steps must be >= 1, got ({sh}, {sw})")
    p.sh, p.sw = sh, sw
    _require("max_pool2d", "indices", idx, tuple(y.shape), np.int64)
    cdef const float[::1] xv = x.reshape(-1)
    cdef float[::1] yv = y.reshape(-1)
    cdef int64_t[::1] iv = idx.reshape(-1)
    with nogil:
        om_max_pool2d_f32(&p, _cptr(xv), _fptr(yv), _iptr(iv), nthreads)


def max_pool2d_backward(gy, idx, gx, hs, he, ws, we, int nthreads) -> None:
    """gx = scatter-add of gy at idx, plane by plane, in output order."""
    cdef om_pool_windows p = _windows("max_pool2d backward", gx, gy, hs, he, ws, we)
    _require("max_pool2d backward", "indices", idx, tuple(gy.shape), np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= p.h * p.w):
        raise ValueError("max_pool2d backward: index outside the input plane")
    cdef const float[::1] gyv = gy.reshape(-1)
    cdef const int64_t[::1] iv = idx.reshape(-1)
    cdef float[::1] gxv = gx.reshape(-1)
    cdef const int64_t *ip = &iv[0] if iv.shape[0] else NULL
    with nogil:
        om_max_pool2d_backward_f32(&p, _cptr(gyv), ip, _fptr(gxv), nthreads)


cdef _divisors(str op, dh, dw, om_pool_windows *p):
    _require(op, "dh", dh, (p.oh,), np.int64)
    _require(op, "dw", dw, (p.ow,), np.int64)
    if (p.oh and dh.min() < 1) or (p.ow and dw.min() < 1):
        raise ValueError(f"{op}: divisors must be positive")


def avg_pool2d(x, y, hs, he, ws, we, dh, dw, int nthreads) -> None:
    """y[p, i, j] = sum of x[p, hs[i]:he[i], ws[j]:we[j]] / (dh[i] * dw[j])."""
    cdef om_pool_windows p = _windows("avg_pool2d", x, y, hs, he, ws, we)
    _divisors("avg_pool2d", dh, dw, &p)
    cdef const int64_t[::1] dhv = dh, dwv = dw
    cdef const float[::1] xv = x.reshape(-1)
    cdef float[::1] yv = y.reshape(-1)
    cdef const int64_t *dhp = &dhv[0] if p.oh else NULL
    cdef const int64_t *dwp = &dwv[0] if p.ow else NULL
    with nogil:
        om_avg_pool2d_f32(&p, dhp, dwp, _cptr(xv), _fptr(yv), nthreads)


def avg_pool2d_backward(gy, gx, hs, he, ws, we, dh, dw, int nthreads) -> None:
    cdef om_pool_windows p = _windows("avg_pool2d backward", gx, gy, hs, he, ws, we)
    _divisors("avg_pool2d backward", dh, dw, &p)
    cdef const int64_t[::1] dhv = dh, dwv = dw
    cdef const float[::1] gyv = gy.reshape(-1)
    cdef float[::1] gxv = gx.reshape(-1)
    cdef const int64_t *dhp = &dhv[0] if p.oh else NULL
    cdef const int64_t *dwp = &dwv[0] if p.ow else NULL
    with nogil:
        om_avg_pool2d_backward_f32(&p, dhp, dwp, _cptr(gyv), _fptr(gxv), nthreads)


cdef tuple _bn_dims(str op, x, int half):
    """(n, c, s, how the kernel reads x: gemm.h's format) of batch norm's input, checked."""
    if not isinstance(x, np.ndarray) or x.ndim != 3:
        raise ValueError(f"{op}: input must be a 3-D array (n, c, s)")
    if half < 0 or half > 2:
        raise ValueError(f"{op}: half must be 0, 1 (bf16) or 2 (fp16), got {half}")
    bits = half != 0 and x.dtype == np.uint16
    _require(op, "input", x, tuple(x.shape), np.uint16 if bits else np.float32)
    fmt = (OM_F32 if not half else (OM_BF16 if bits else OM_F32_TO_BF16) if half == 1
           else (OM_F16 if bits else OM_F32_TO_F16))
    return tuple(x.shape) + (fmt,)


cdef uint16_t *_bn_save(x, int fmt, save, y) except? NULL:
    """Where a rounded input's bits go: save's data, or NULL for None."""
    if save is None:
        return NULL
    if fmt not in (OM_F32_TO_BF16, OM_F32_TO_F16):
        raise ValueError("batch_norm: save needs a float32 input and half = 1 or 2")
    _require("batch_norm", "save", save, tuple(x.shape), np.uint16)
    if not save.flags.writeable or np.may_share_memory(save, x) or (
            y is not None and np.may_share_memory(save, y)):
        raise ValueError("batch_norm: save must be writeable and apart from input and output")
    return <uint16_t *>_data(save)


def batch_norm_stats(x, double eps, mean, var, var_unbiased, invstd, int nthreads, int half=0,
                     save=None) -> None:
    """Per-channel mean, biased and unbiased variance, 1 / sqrt(var + eps) of x (n, c, s); with
    half, of x rounded (its bits into save unless None) or of the bits x holds."""
    cdef int fmt
    n, c, s, fmt = _bn_dims("batch_norm", x, half)
    if n * s < 1:
        raise ValueError(f"batch_norm: no values per channel in input {tuple(x.shape)}")
    for name, a in (("mean", mean), ("var", var), ("var_unbiased", var_unbiased),
                    ("invstd", invstd)):
        _require("batch_norm", name, a, (c,))
    cdef uint16_t *sp = _bn_save(x, fmt, save, None)
    cdef const void *xp = _data(x)
    cdef float[::1] mv = mean, vv = var, uv = var_unbiased, iv = invstd
    cdef int64_t cn = n, cc = c, cs = s
    with nogil:
        om_batch_norm_stats_f32(xp, fmt, sp, cn, cc, cs, eps, _fptr(mv), _fptr(vv), _fptr(uv),
                                _fptr(iv), nthreads)


def batch_norm_apply(x, mean, invstd, w, b, y, int nthreads, int half=0, save=None) -> None:
    """y = (x - mean) * (invstd * w) + b per channel of x (n, c, s), x read as in
    batch_norm_stats."""
    cdef int fmt
    n, c, s, fmt = _bn_dims("batch_norm", x, half)
    for name, a in (("mean", mean), ("invstd", invstd), ("weight", w), ("bias", b)):
        _require("batch_norm", name, a, (c,))
    _require("batch_norm", "output", y, (n, c, s))
    cdef uint16_t *sp = _bn_save(x, fmt, save, y)
    cdef const void *xp = _data(x)
    cdef const float[::1] mv = mean, iv = invstd, wv = w, bv = b
    cdef float[::1] yv = y.reshape(-1)
    cdef int64_t cn = n, cc = c, cs = s
    with nogil:
        om_batch_norm_apply_f32(xp, fmt, sp, _cptr(mv), _cptr(iv), _cptr(wv), _cptr(bv),
                                _fptr(yv), cn, cc, cs, nthreads)


def batch_norm_backward(x, gy, mean, invstd, w, gx, gw, gb, bint batch_stats,
                        int nthreads, int half=0) -> None:
    """Gradients of batch_norm_apply into gx, gw, gb (each may be None), x read as there; with
    batch_stats the mean and invstd are x's own batch statistics."""
    cdef int fmt
    n, c, s, fmt = _bn_dims("batch_norm backward", x, half)
    _require("batch_norm backward", "grad_output", gy, (n, c, s))
    for name, a in (("mean", mean), ("invstd", invstd), ("weight", w)):
        _require("batch_norm backward", name, a, (c,))
    empty = np.empty(0, np.float32)
    for name, a, shape in (("grad_input", gx, (n, c, s)), ("grad_weight", gw, (c,)),
                           ("grad_bias", gb, (c,))):
        if a is not None:
            _require("batch_norm backward", name, a, shape)
    cdef const void *xp = _data(x)
    cdef const float[::1] gyv = gy.reshape(-1), mv = mean, iv = invstd, wv = w
    cdef float[::1] gxv = gx.reshape(-1) if gx is not None else empty
    cdef float[::1] gwv = gw if gw is not None else empty
    cdef float[::1] gbv = gb if gb is not None else empty
    cdef float *gxp = _fptr(gxv) if gx is not None else NULL
    cdef float *gwp = _fptr(gwv) if gw is not None else NULL
    cdef float *gbp = _fptr(gbv) if gb is not None else NULL
    cdef int64_t cn = n, cc = c, cs = s
    with nogil:
        om_batch_norm_backward_f32(xp, fmt, _cptr(gyv), _cptr(mv), _cptr(iv), _cptr(wv),
                                   gxp, gwp, gbp, cn, cc, cs, batch_stats, nthreads)
