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

/* One path's draw (dropout_paths.c): keep[i] for mask elements [begin, end). */
typedef void (*om_dropout_draw_fn)(uint64_t stream, uint32_t threshold, int64_t begin,
                                   int64_t end, uint8_t *keep);
void om_dropout_draw_scalar(uint64_t, uint32_t, int64_t, int64_t, uint8_t *);
void om_dropout_draw_avx2(uint64_t, uint32_t, int64_t, int64_t, uint8_t *);
void om_dropout_draw_avx512(uint64_t, uint32_t, int64_t, int64_t, uint8_t *);

#endif
