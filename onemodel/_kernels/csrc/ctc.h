/* Connectionist temporal classification loss, float32 (see ctc.c for the design note).
 *
 * Nothing here checks shapes or values: onemodel.functional.ctc validates every length, target
 * and offset first, so that every index the kernels form stays inside its array.
 */
#ifndef OM_CTC_H
#define OM_CTC_H

#include <stdint.h>

typedef struct {
    int64_t t, b, c;              /* log_probs (T, B, C) */
    int64_t width;                /* row width of alpha, beta and the label scratch:
                                     2 * max target length + 3 (two -inf pads per row) */
    int64_t blank;
    const int64_t *targets;       /* every row's labels, concatenated */
    const int64_t *offsets;       /* (B,) start of row b's labels in targets */
    const int64_t *input_lengths; /* (B,) in [0, T] */
    const int64_t *target_lengths;/* (B,) <= (width - 3) / 2 */
} om_ctc_shape;

/* Forward variables alpha (B, T, width) and nll (B,): nll[b] = -log p(targets_b | row b).
 * lab (B, width) and skip (B, width) are scratch. */
void om_ctc_forward_f32(const om_ctc_shape *s, const float *log_probs, float *alpha,
                        int64_t *lab, float *skip, float *nll, int nthreads);

/* Gradient (T, B, C) of sum_b scale[b] * nll[b] with respect to the log-probabilities, in
 * PyTorch's convention: (exp(lp) - posterior) * scale[b] for t < input_length, 0 after.
 * beta (B, 3, width), lab and skip are scratch. Rows whose nll is +inf get 0 with
 * zero_infinity, NaN without (as PyTorch). */
void om_ctc_backward_f32(const om_ctc_shape *s, const float *log_probs, const float *alpha,
                         const float *nll, const float *scale, int zero_infinity, float *beta,
                         int64_t *lab, float *skip, float *grad, int nthreads);

#endif
