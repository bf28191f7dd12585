# cython: freethreading_compatible = True
"""CTC loss kernels (csrc/ctc.c) behind checking wrappers.

onemodel.functional.ctc validates user arguments and allocates; these wrappers check again that
every array agrees with the others and that every length, offset and label indexes inside its
array, so no input can make a kernel read or write out of bounds. float32 and int64 arrays,
C-contiguous.
"""
import numpy as np

from libc.stdint cimport int64_t

cdef extern from "ctc.h" nogil:
    ctypedef struct om_ctc_shape:
        int64_t t, b, c, width, blank
        const int64_t *targets
        const int64_t *offsets
        const int64_t *input_lengths
        const int64_t *target_lengths
    void om_ctc_forward_f32(const om_ctc_shape *s, const float *log_probs, float *alpha,
                            int64_t *lab, float *skip, float *nll, int nthreads)
    void om_ctc_backward_f32(const om_ctc_shape *s, const float *log_probs, const float *alpha,
                             const float *nll, const float *scale, int zero_infinity,
                             float *beta, int64_t *lab, float *skip, float *grad, int nthreads)


cdef om_ctc_shape _shape(const float[:, :, ::1] log_probs, const int64_t[::1] targets,
                         const int64_t[::1] offsets, const int64_t[::1] input_lengths,
                         const int64_t[::1] target_lengths, int64_t blank,
                         const float[:, :, ::1] alpha) except *:
    cdef om_ctc_shape s
    cdef Py_ssize_t i, j
    s.t, s.b, s.c = log_probs.shape[0], log_probs.shape[1], log_probs.shape[2]
    s.width, s.blank = alpha.shape[2], blank
    if alpha.shape[0] != s.b or alpha.shape[1] != s.t or s.width % 2 != 1 or s.width < 3:
        raise ValueError(f"ctc: alpha of shape {tuple(alpha.shape)[:3]} does not fit "
                         f"log_probs of shape {tuple(log_probs.shape)[:3]}")
    if offsets.shape[0] != s.b or input_lengths.shape[0] != s.b or \
            target_lengths.shape[0] != s.b:
        raise ValueError(f"ctc: offsets and lengths must have {s.b} entries")
    if not 0 <= blank < s.c:
        raise ValueError(f"ctc: blank {blank} out of range for {s.c} classes")
    for i in range(s.b):
        if not 0 <= input_lengths[i] <= s.t:
            raise ValueError(f"ctc: input length {input_lengths[i]} not in [0, {s.t}]")
        if not 0 <= target_lengths[i] <= (s.width - 3) // 2:
            raise ValueError(f"ctc: target length {target_lengths[i]} exceeds the width")
        if not 0 <= offsets[i] <= targets.shape[0] - target_lengths[i]:
            raise ValueError(f"ctc: offset {offsets[i]} out of the {targets.shape[0]} targets")
        for j in range(offsets[i], offsets[i] + target_lengths[i]):
            if not 0 <= targets[j] < s.c:
                raise ValueError(f"ctc: target {targets[j]} out of range for {s.c} classes")
    s.targets = &targets[0] if targets.shape[0] > 0 else NULL
    s.offsets = &offsets[0] if s.b > 0 else NULL
    s.input_lengths = &input_lengths[0] if s.b > 0 else NULL
    s.target_lengths = &target_lengths[0] if s.b > 0 else NULL
    return s


def forward(const float[:, :, ::1] log_probs not None, const int64_t[::1] targets not None,
            const int64_t[::1] offsets not None, const int64_t[::1] input_lengths not None,
            const int64_t[::1] target_lengths not None, int64_t blank,
            float[:, :, ::1] alpha not None, float[::1] nll not None, int nthreads) -> None:
    """nll[b] = -log p(targets of row b); alpha (B, T, 2 * max target length + 3) is kept for
    backward."""
    cdef om_ctc_shape s = _shape(log_probs, targets, offsets, input_lengths, target_lengths,
                                 blank, alpha)
    if nll.shape[0] != s.b:
        raise ValueError(f"ctc: nll has {nll.shape[0]} entries, expected {s.b}")
    if s.b == 0 or s.t == 0:
        for i in range(s.b):
            nll[i] = float("inf") if target_lengths[i] > 0 else -0.0
        return
    cdef int64_t[:, ::1] lab = np.empty((s.b, s.width), np.int64)
    cdef float[:, ::1] skip = np.empty((s.b, s.width), np.float32)
    with nogil:
        om_ctc_forward_f32(&s, &log_probs[0, 0, 0], &alpha[0, 0, 0], &lab[0, 0], &skip[0, 0],
                           &nll[0], nthreads)


def backward(const float[:, :, ::1] log_probs not None, const int64_t[::1] targets not None,
             const int64_t[::1] offsets not None, const int64_t[::1] input_lengths not None,
             const int64_t[::1] target_lengths not None, int64_t blank,
             const float[:, :, ::1] alpha not None, const float[::1] nll not None,
             const float[::1] scale not None, bint zero_infinity,
             float[:, :, ::1] grad not None, int nthreads) -> None:
    """grad (T, B, C) of sum_b scale[b] * nll[b] (PyTorch's convention, csrc/ctc.h)."""
    cdef om_ctc_shape s = _shape(log_probs, targets, offsets, input_lengths, target_lengths,
                                 blank, alpha)
    if nll.shape[0] != s.b or scale.shape[0] != s.b:
        raise ValueError(f"ctc: nll and scale must have {s.b} entries")
    if tuple(grad.shape)[:3] != tuple(log_probs.shape)[:3]:
        raise ValueError(f"ctc: grad of shape {tuple(grad.shape)[:3]} does not match "
                         f"log_probs of shape {tuple(log_probs.shape)[:3]}")
    if s.b == 0 or s.t == 0 or s.c == 0:
        return
    cdef float[:, ::1] beta = np.empty((s.b, 3 * s.width), np.float32)
    cdef int64_t[:, ::1] lab = np.empty((s.b, s.width), np.int64)
    cdef float[:, ::1] skip = np.empty((s.b, s.width), np.float32)
    with nogil:
        om_ctc_backward_f32(&s, &log_probs[0, 0, 0], &alpha[0, 0, 0], &nll[0], &scale[0],
                            zero_infinity, &beta[0, 0], &lab[0, 0], &skip[0, 0],
                            &grad[0, 0, 0], nthreads)
