/* Dropout's counter-based mask and its products (see dropout.c). Nothing here checks shapes:
 * the Cython layer (_dropout.pyx) validates every array first. */
#ifndef OM_DROPOUT_H
#define OM_DROPOUT_H

#include <stdint.h>

/* keep[i] = whether mask element i (0 <= i < n) of draw stream `stream` is kept, and
 * y[i·inner + j] = x[i·inner + j] * (keep[i] ? scale : 0) for j < inner. */
void om_dropout_forward(uint64_t stream, uint32_t threshold, float scale, int64_t n,
                        int64_t inner, const float *x, float *y, uint8_t *keep, int nthreads);
/* out[i·inner + j] = g[i·inner + j] * (keep[i] ? scale : 0). */
void om_dropout_backward(const uint8_t *keep, float scale, int64_t n, int64_t inner,
                         const float *g, float *out, int nthreads);

#endif
