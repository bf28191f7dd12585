/* Batch norm over float32 (see batch_norm.c). Nothing here checks shapes: the Cython layer
 * (_conv.pyx) validates every dimension first. */
#ifndef OM_BATCH_NORM_H
#define OM_BATCH_NORM_H

#include <stdint.h>

/* Batch norm over x viewed as (n, c, s): statistics per channel c over n * s >= 1 values.
 * Biased and unbiased variance (the latter +inf when n * s == 1), invstd = 1 / sqrt(var + eps). */
void om_batch_norm_stats_f32(const float *x, int64_t n, int64_t c, int64_t s, double eps,
                             float *mean, float *var, float *var_unbiased, float *invstd,
                             int nthreads);
/* y = (x - mean[c]) * (invstd[c] * w[c]) + b[c]. */
void om_batch_norm_apply_f32(const float *x, const float *mean, const float *invstd,
                             const float *w, const float *b, float *y, int64_t n, int64_t c,
                             int64_t s, int nthreads);
/* Gradients of apply(); with batch_stats the mean and invstd are functions of x (training).
 * gx, gw, gb may be NULL. */
void om_batch_norm_backward_f32(const float *x, const float *gy, const float *mean,
                                const float *invstd, const float *w, float *gx, float *gw,
                                float *gb, int64_t n, int64_t c, int64_t s, int batch_stats,
                                int nthreads);

#endif
