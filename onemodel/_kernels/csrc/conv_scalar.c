/* The convolution's data movement, scalar reference (conv_impl.h). */
#include "conv_impl.h"

void om_conv_keep_f32_scalar(float *d, const float *src, const int32_t *keep, int64_t len) {
    for (int64_t e = 0; e < len; e++) d[e] = keep[e] ? src[e] : 0.0f;
}

void om_conv_tap_sums_f32_scalar(const float *g, const int64_t *off, const int32_t *keep,
                                 const int64_t *koff, int64_t taps, int64_t n, float *d) {
    for (int64_t f = 0; f < n; f++) {
        float acc = 0.0f;
        for (int64_t t = 0; t < taps; t++) acc += keep[koff[t] + f] ? g[off[t] + f] : 0.0f;
        d[f] = acc;
    }
}

OM_PATH_PROBE(conv, scalar)
