/* The convolution's data movement, one function per path (dispatched in conv.c).
 *
 * Two steps of conv.c's column matrices; the scalar reference is here, inline (conv.c's scalar
 * entries, and the tails of the vector paths, conv_<path>.c, each a plain translation of it):
 *   keep:     d[e] = keep[e] ? src[e] : +0 for e < len; the masked-off values come from the
 *             padding columns (the whole run of src is readable, keep[] only as far as len);
 *   tap sums: d[f] = the float sum from +0 over t < taps, in order, of g[off[t] + f] where
 *             keep[koff[t] + f] and +0 elsewhere, for f < n (g readable wherever keep is 0 as
 *             well); each lane of a vector path adds the same values in the same order.
 * Only copies, bit masks and float adds: every path gives the same bits.
 */
#ifndef OM_CONV_IMPL_H
#define OM_CONV_IMPL_H

#include <stdint.h>

#include "isa.h"

typedef void (*om_conv_keep_fn)(float *d, const float *src, const int32_t *keep, int64_t len);
typedef void (*om_conv_tap_sums_fn)(const float *g, const int64_t *off, const int32_t *keep,
                                    const int64_t *koff, int64_t taps, int64_t n, float *d);

#define OM_CONV_DECLARE(isa)                                                                  \
    void om_conv_keep_f32_##isa(float *d, const float *src, const int32_t *keep, int64_t len); \
    void om_conv_tap_sums_f32_##isa(const float *g, const int64_t *off, const int32_t *keep,  \
                                    const int64_t *koff, int64_t taps, int64_t n, float *d);
OM_CONV_DECLARE(sse2)
OM_CONV_DECLARE(avx2)
OM_CONV_DECLARE(avx512)
OM_CONV_DECLARE(neon)
#undef OM_CONV_DECLARE

static inline void om_conv_keep_f32_scalar(float *d, const float *src, const int32_t *keep,
                                           int64_t len) {
    for (int64_t e = 0; e < len; e++) d[e] = keep[e] ? src[e] : 0.0f;
}

static inline void om_conv_tap_sums_f32_scalar(const float *g, const int64_t *off,
                                               const int32_t *keep, const int64_t *koff,
                                               int64_t taps, int64_t n, float *d) {
    for (int64_t f = 0; f < n; f++) {
        float acc = 0.0f;
        for (int64_t t = 0; t < taps; t++) acc += keep[koff[t] + f] ? g[off[t] + f] : 0.0f;
        d[f] = acc;
    }
}

#endif
