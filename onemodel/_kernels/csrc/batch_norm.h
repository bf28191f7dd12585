/* Batch norm (see batch_norm.c). Nothing here checks shapes: the Cython layer (_conv.pyx)
 * validates every dimension first. x is read in gemm.h's format fmt: float32 (OM_F32), float32
 * rounded to bfloat16 / float16 (OM_F32_TO_BF16 / _F16: the values the kernel uses are the
 * rounded ones, their bits written to save, x's layout, unless save is NULL) or the 2-byte bits
 * of such values (OM_BF16 / OM_F16). */
#ifndef OM_BATCH_NORM_H
#define OM_BATCH_NORM_H

#include <stdint.h>

/* Batch norm over x viewed as (n, c, s): statistics per channel c over n * s >= 1 values.
 * Biased and unbiased variance (the latter +inf when n * s == 1), invstd = 1 / sqrt(var + eps). */
void om_batch_norm_stats_f32(const void *x, int fmt, uint16_t *save, int64_t n, int64_t c,
                             int64_t s, double eps, float *mean, float *var, float *var_unbiased,
                             float *invstd, int nthreads);
/* y = (x - mean[c]) * (invstd[c] * w[c]) + b[c]. */
void om_batch_norm_apply_f32(const void *x, int fmt, uint16_t *save, const float *mean,
                             const float *invstd, const float *w, const float *b, float *y,
                             int64_t n, int64_t c, int64_t s, int nthreads);
/* Gradients of apply(); with batch_stats the mean and invstd are functions of x (training).
 * gx, gw, gb may be NULL. */
void om_batch_norm_backward_f32(const void *x, int fmt, const float *gy, const float *mean,
                                const float *invstd, const float *w, float *gx, float *gw,
                                float *gb, int64_t n, int64_t c, int64_t s, int batch_stats,
                                int nthreads);

#endif
