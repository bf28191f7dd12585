/* Max and average pooling over float32 planes (see pool.c). Nothing here checks shapes: the
 * Cython layer (_conv.pyx) validates every dimension first. */
#ifndef OM_POOL_H
#define OM_POOL_H

#include <stdint.h>

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

#endif
