# cython: freethreading_compatible = True
"""Recurrent layers (LSTM, GRU) over whole sequences (csrc/rnn.c) behind shape-checking wrappers.

onemodel.functional.recurrent validates user arguments and allocates; these wrappers check
again that every array agrees with the others (shapes, float32/int64, C-contiguous, lengths in
[0, T]) so no argument can make the kernel read or write out of bounds.
"""
import numpy as np

from libc.stdint cimport int64_t
from onemodel._kernels._isa cimport om_set_isa

cdef extern from "rnn.h" nogil:
    int OM_RNN_LSTM
    int OM_RNN_GRU
    int om_rnn_forward_f32(int cell, int64_t t, int64_t b, int64_t h, const float *xw,
                           const float *w_hh, const float *bias, const float *h0,
                           const float *c0, const int64_t *lengths, float *y, float *gates,
                           float *cs, float *hn_lin, float *h_n, float *c_n, int nthreads)
    int om_rnn_backward_f32(int cell, int64_t t, int64_t b, int64_t h, const float *w_hh,
                            const float *h0, const float *c0, const int64_t *lengths,
                            const float *y, const float *gates, const float *cs,
                            const float *hn_lin, const float *gy, const float *g_hn,
                            const float *g_cn, float *dgx, float *dgh, float *dh0, float *dc0,
                            int nthreads)

CELLS = ("lstm", "gru")


def set_isa(int isa) -> None:
    om_set_isa(isa)


cdef _require(str op, str name, a, tuple shape, dtype=np.float32):
    if not isinstance(a, np.ndarray) or a.dtype != dtype or not a.flags.c_contiguous:
        raise TypeError(f"{op}: {name} must be a C-contiguous {np.dtype(dtype)} array")
    if tuple(a.shape) != shape:
        raise ValueError(f"{op}: {name} has shape {tuple(a.shape)}, expected {shape}")


cdef inline float *_fp(a):
    # Outputs are arrays this module's callers allocate; inputs may be read-only views.
    cdef const float[::1] v = a.reshape(-1)
    return <float *>&v[0] if v.shape[0] else NULL


cdef inline const int64_t *_ip(a):
    cdef const int64_t[::1] v = a.reshape(-1)
    return &v[0] if v.shape[0] else NULL


cdef tuple _dims(str op, str cell, xw, w_hh, lengths):
    if cell not in CELLS:
        raise ValueError(f"{op}: cell must be one of {CELLS}, got {cell!r}")
    cdef int g = 4 if cell == "lstm" else 3
    if not isinstance(xw, np.ndarray) or xw.ndim != 3:
        raise ValueError(f"{op}: xw must be a (T, B, {g}*H) array")
    if not isinstance(w_hh, np.ndarray) or w_hh.ndim != 2:
        raise ValueError(f"{op}: w_hh must be a ({g}*H, H) array")
    t, b, h = xw.shape[0], xw.shape[1], w_hh.shape[1]
    _require(op, "xw", xw, (t, b, g * h))
    _require(op, "w_hh", w_hh, (g * h, h))
    _require(op, "lengths", lengths, (b,), np.int64)
    if b and (lengths.min() < 0 or lengths.max() > t):
        raise ValueError(f"{op}: lengths must lie in [0, {t}], got {lengths.min()} .. "
                         f"{lengths.max()}")
    return t, b, h, g


def forward(str cell, xw, w_hh, bias, h0, c0, lengths, y, gates, cs, hn_lin, h_n, c_n,
            int nthreads) -> None:
    """Runs the layer; see csrc/rnn.h. c0, cs and c_n are None for the GRU, hn_lin for the
    LSTM."""
    op = cell + "_forward"
    t, b, h, g = _dims(op, cell, xw, w_hh, lengths)
    lstm = cell == "lstm"
    _require(op, "bias", bias, (g * h,))
    for name, a, shape in (("h0", h0, (b, h)), ("y", y, (t, b, h)), ("gates", gates, (t, b, g * h)),
                           ("h_n", h_n, (b, h))):
        _require(op, name, a, shape)
    for name, a, shape in (("c0", c0, (b, h)), ("cs", cs, (t, b, h)), ("c_n", c_n, (b, h))) \
            if lstm else (("hn_lin", hn_lin, (t, b, h)),):
        _require(op, name, a, shape)
    if nthreads < 1:
        raise ValueError(f"{op}: nthreads must be >= 1, got {nthreads}")
    cdef int kind = OM_RNN_LSTM if lstm else OM_RNN_GRU
    cdef int64_t ct = t, cb = b, ch = h
    cdef int status
    cdef float *p_xw = _fp(xw)
    cdef float *p_w = _fp(w_hh)
    cdef float *p_b = _fp(bias)
    cdef float *p_h0 = _fp(h0)
    cdef float *p_c0 = _fp(c0) if lstm else NULL
    cdef const int64_t *p_len = _ip(lengths)
    cdef float *p_y = _fp(y)
    cdef float *p_g = _fp(gates)
    cdef float *p_cs = _fp(cs) if lstm else NULL
    cdef float *p_hl = NULL if lstm else _fp(hn_lin)
    cdef float *p_hn = _fp(h_n)
    cdef float *p_cn = _fp(c_n) if lstm else NULL
    with nogil:
        status = om_rnn_forward_f32(kind, ct, cb, ch, p_xw, p_w, p_b, p_h0, p_c0, p_len, p_y,
                                    p_g, p_cs, p_hl, p_hn, p_cn, nthreads)
    if status != 0:
        raise MemoryError(f"{op}: out of memory for scratch of shape ({b}, {g * h})")


def backward(str cell, w_hh, h0, c0, lengths, y, gates, cs, hn_lin, gy, g_hn, g_cn, dgx, dgh,
             dh0, dc0, int nthreads) -> None:
    """Gradients of the layer from its saved forward values; see csrc/rnn.h."""
    op = cell + "_backward"
    t, b, h, g = _dims(op, cell, gates, w_hh, lengths)
    lstm = cell == "lstm"
    for name, a, shape in (("h0", h0, (b, h)), ("y", y, (t, b, h)), ("gy", gy, (t, b, h)),
                           ("g_hn", g_hn, (b, h)), ("dgx", dgx, (t, b, g * h)),
                           ("dh0", dh0, (b, h))):
        _require(op, name, a, shape)
    for name, a, shape in ((("c0", c0, (b, h)), ("cs", cs, (t, b, h)), ("g_cn", g_cn, (b, h)),
                            ("dc0", dc0, (b, h))) if lstm else
                           (("hn_lin", hn_lin, (t, b, h)), ("dgh", dgh, (t, b, g * h)))):
        _require(op, name, a, shape)
    if nthreads < 1:
        raise ValueError(f"{op}: nthreads must be >= 1, got {nthreads}")
    cdef int kind = OM_RNN_LSTM if lstm else OM_RNN_GRU
    cdef int64_t ct = t, cb = b, ch = h
    cdef int status
    cdef float *p_w = _fp(w_hh)
    cdef float *p_h0 = _fp(h0)
    cdef float *p_c0 = _fp(c0) if lstm else NULL
    cdef const int64_t *p_len = _ip(lengths)
    cdef float *p_y = _fp(y)
    cdef float *p_g = _fp(gates)
    cdef float *p_cs = _fp(cs) if lstm else NULL
    cdef float *p_hl = NULL if lstm else _fp(hn_lin)
    cdef float *p_gy = _fp(gy)
    cdef float *p_ghn = _fp(g_hn)
    cdef float *p_gcn = _fp(g_cn) if lstm else NULL
    cdef float *p_dgx = _fp(dgx)
    cdef float *p_dgh = NULL if lstm else _fp(dgh)
    cdef float *p_dh0 = _fp(dh0)
    cdef float *p_dc0 = _fp(dc0) if lstm else NULL
    with nogil:
        status = om_rnn_backward_f32(kind, ct, cb, ch, p_w, p_h0, p_c0, p_len, p_y, p_g, p_cs,
                                     p_hl, p_gy, p_ghn, p_gcn, p_dgx, p_dgh, p_dh0, p_dc0,
                                     nthreads)
    if status != 0:
        raise MemoryError(f"{op}: out of memory for scratch of shape ({b}, {h})")
