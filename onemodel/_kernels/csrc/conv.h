/* Convolution, pooling and batch norm over float32 NCHW tensors (see conv.c for the design note).
 *
 * Nothing here checks shapes: the Cython layer (_conv.pyx) validates every dimension first.
 * Functions that need scratch memory return 0, or -1 when it could not be allocated.
 */
#ifndef OM_CONV_H
#define OM_CONV_H

#include <stdint.h>

typedef struct {
    int64_t n, c, h, w;         /* input (N, C, H, W) */
    int64_t k, kh, kw;          /* weight (K, C / groups, kh, kw) */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t oh, ow;             /* output (N, K, oh, ow), computed by the caller */
    /* Autocast: half = 1 or 2 runs the products on operands rounded to bfloat16 or float16
     * (gemm.h, half.h): x as the images are loaded (x_bits: x holds those 2-byte bits, which
     * are widened instead; else x_save, if not NULL, receives x's rounded bits), w and gy
     * once each into scratch. half = 0: float32 operands, x float32. */
    int half, x_bits;
    uint16_t *x_save;
} om_conv2d_shape;

/* y = conv(x, w) + b; b may be NULL. x: float32, or 2-byte bits (s->x_bits). */
int om_conv2d_forward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                          const float *b, float *y, int nthreads);
/* Gradients for upstream gy; any of gx, gw, gb may be NULL (not wanted). */
int om_conv2d_backward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                           const float *gy, float *gx, float *gw, float *gb, int nthreads);

/* Pooling over `planes` planes of h x w into oh x ow. Output (i, j) reads the window of rows
 * hs[i], hs[i] + sh, ... below he[i] and columns ws[j], ws[j] + sw, ... below we[j] (taps
 * sh and sw apart: the dilation of max pooling, 1 for averages), already clipped to the input
 * and never empty. */
typedef struct {
    int64_t planes, h, w, oh, ow, sh, sw;
    const int64_t *hs, *he, *ws, *we;
} om_pool_windows;

/* Maximum and the index (row * w + column within the plane) of the element that gives it. */
void om_max_pool2d_f32(const om_pool_windows *p, const float *x, float *y, int64_t *idx,
                       int nthreads);
void om_max_pool2d_backward_f32(const om_pool_windows *p, const float *gy, const int64_t *idx,
                                float *gx, int nthreads);
/* Sum of the window divided by dh[i] * dw[j] (the divisor counts padding where it should). */
void om_avg_pool2d_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                       const float *x, float *y, int nthreads);
void om_avg_pool2d_backward_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                                const float *gy, float *gx, int nthreads);

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
