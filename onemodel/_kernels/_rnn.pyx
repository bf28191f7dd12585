# cython: freethreading_compatible = True
"""Recurrent layers (LSTM, GRU) over whole sequences (csrc/rnn.c) behind shape-checking wrappers.

onemodel.functional.recurrent validates user arguments and allocates; these wrappers check
again that every array agrees with the others (shapes, float32/int64, C-contiguous, lengths in
[0, T]) so no argument can make the kernel read or write out of bounds.
"""
import numpy as np

from libc.stdint cimport int64_t

cdef extern from "rnn.h" nogil:
    int OM_RNN_LSTM
    int OM_RNN_GRU
    ctypedef struct om_rnn_forward_args:
        int reverse
        const float *xw
        const float *w_hh
        const float *bias
        const float *h0
        const float *c0
        float *y
        float *gates
        float *cs
        float *hn_lin
        float *h_n
        float *c_n
    ctypedef struct om_rnn_backward_args:
        int reverse
        const float *w_hh
        const float *h0
        const float *c0
        const float *y
        const float *gates
        const float *cs
        const float *hn_lin
        const float *gy
        const float *g_hn
        const float *g_cn
        float *dgx
        float *dgh
        float *dh0
        float *dc0
    int om_rnn_forward_f32(int cell, int64_t ndir, int64_t t, int64_t b, int64_t h,
                           const int64_t *lengths, const om_rnn_forward_args *dirs,
                           int half, int nthreads)
    int om_rnn_backward_f32(int cell, int64_t ndir, int64_t t, int64_t b, int64_t h,
                            const int64_t *lengths, const om_rnn_backward_args *dirs,
                            int half, int nthreads)

DIRECTIONS_MAX = 2
CELLS = ("lstm", "gru")


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


cdef tuple _checked(str op, str cell, list dirs, lengths, int half, int nthreads,
                    tuple needed):
    """(T, B, H, G) after checking that every direction ({"reverse": bool, name: array, ...})
    has the `needed` arrays, and every array against the first direction's shapes."""
    if half < 0 or half > 2:
        raise ValueError(f"{op}: half must be 0, 1 (bf16) or 2 (fp16), got {half}")
    if not 1 <= len(dirs) <= DIRECTIONS_MAX:
        raise ValueError(f"{op}: between 1 and {DIRECTIONS_MAX} directions, got {len(dirs)}")
    for d in dirs:
        for name in needed:
            if name not in d:
                raise ValueError(f"{op}: missing array {name!r}")
    if nthreads < 1:
        raise ValueError(f"{op}: nthreads must be >= 1, got {nthreads}")
    first = dirs[0]
    t, b, h, g = _dims(op, cell, first["xw"] if "xw" in first else first["gates"],
                       first["w_hh"], lengths)
    lstm = cell == "lstm"
    shapes = {"xw": (t, b, g * h), "w_hh": (g * h, h), "bias": (g * h,), "h0": (b, h),
              "y": (t, b, h), "gates": (t, b, g * h), "h_n": (b, h), "gy": (t, b, h),
              "g_hn": (b, h), "dgx": (t, b, g * h), "dh0": (b, h)}
    shapes.update({"c0": (b, h), "cs": (t, b, h), "c_n": (b, h), "g_cn": (b, h),
                   "dc0": (b, h)} if lstm else {"hn_lin": (t, b, h), "dgh": (t, b, g * h)})
    for d in dirs:
        for name, a in d.items():
            if name == "reverse":
                continue
            if name not in shapes:
                raise ValueError(f"{op}: array {name!r} is not used by the {cell} kernel")
            _require(op, name, a, shapes[name])
    return t, b, h, g


cdef inline const float *_get(dict d, str name):
    return _fp(d[name]) if name in d else NULL


def forward(str cell, list dirs, lengths, int nthreads, int half=0) -> None:
    """Runs 1 or 2 directions (csrc/rnn.h); each a dict of arrays named as the fields of
    om_rnn_forward_args (c0, cs, c_n only for the LSTM; hn_lin only for the GRU) and an
    optional bool "reverse". half 1 or 2: the recurrent products take bfloat16 or float16
    operands (autocast), rounded as their packing reads them."""
    op = cell + "_forward"
    needed = ("xw", "w_hh", "bias", "h0", "y", "gates", "h_n") + (
        ("c0", "cs", "c_n") if cell == "lstm" else ("hn_lin",))
    t, b, h, g = _checked(op, cell, dirs, lengths, half, nthreads, needed)
    cdef om_rnn_forward_args args[2]
    cdef int i
    for i in range(len(dirs)):
        d = dirs[i]
        args[i].reverse = 1 if d.get("reverse", False) else 0
        args[i].xw = _get(d, "xw")
        args[i].w_hh = _get(d, "w_hh")
        args[i].bias = _get(d, "bias")
        args[i].h0 = _get(d, "h0")
        args[i].c0 = _get(d, "c0")
        args[i].y = <float *>_get(d, "y")
        args[i].gates = <float *>_get(d, "gates")
        args[i].cs = <float *>_get(d, "cs")
        args[i].hn_lin = <float *>_get(d, "hn_lin")
        args[i].h_n = <float *>_get(d, "h_n")
        args[i].c_n = <float *>_get(d, "c_n")
    cdef int kind = OM_RNN_LSTM if cell == "lstm" else OM_RNN_GRU
    cdef int64_t nd = len(dirs), ct = t, cb = b, ch = h
    cdef const int64_t *p_len = _ip(lengths)
    cdef int status
    with nogil:
        status = om_rnn_forward_f32(kind, nd, ct, cb, ch, p_len, args, half, nthreads)
    if status != 0:
        raise MemoryError(f"{op}: out of memory for scratch of shape ({b}, {g * h})")


def backward(str cell, list dirs, lengths, int nthreads, int half=0) -> None:
    """Gradients of 1 or 2 directions from their saved forward values (csrc/rnn.h); each a
    dict of arrays named as the fields of om_rnn_backward_args; half as the forward's."""
    op = cell + "_backward"
    needed = ("w_hh", "h0", "y", "gates", "gy", "g_hn", "dgx", "dh0") + (
        ("c0", "cs", "g_cn", "dc0") if cell == "lstm" else ("hn_lin", "dgh"))
    t, b, h, _ = _checked(op, cell, dirs, lengths, half, nthreads, needed)
    cdef om_rnn_backward_args args[2]
    cdef int i
    for i in range(len(dirs)):
        d = dirs[i]
        args[i].reverse = 1 if d.get("reverse", False) else 0
        args[i].w_hh = _get(d, "w_hh")
        args[i].h0 = _get(d, "h0")
        args[i].c0 = _get(d, "c0")
        args[i].y = _get(d, "y")
        args[i].gates = _get(d, "gates")
        args[i].cs = _get(d, "cs")
        args[i].hn_lin = _get(d, "hn_lin")
        args[i].gy = _get(d, "gy")
        args[i].g_hn = _get(d, "g_hn")
        args[i].g_cn = _get(d, "g_cn")
        args[i].dgx = <float *>_get(d, "dgx")
        args[i].dgh = <float *>_get(d, "dgh")
        args[i].dh0 = <float *>_get(d, "dh0")
        args[i].dc0 = <float *>_get(d, "dc0")
    cdef int kind = OM_RNN_LSTM if cell == "lstm" else OM_RNN_GRU
    cdef int64_t nd = len(dirs), ct = t, cb = b, ch = h
    cdef const int64_t *p_len = _ip(lengths)
    cdef int status
    with nogil:
        status = om_rnn_backward_f32(kind, nd, ct, cb, ch, p_len, args, half, nthreads)
    if status != 0:
        raise MemoryError(f"{op}: out of memory for scratch of shape ({b}, {h})")
