/* The convolution's data movement, SSE2 path (conv_impl.h): 4 lanes, keep masks applied as a
 * bitwise and (0 gives +0), the tap sums 16 pixels at a time in 4 accumulators; tails run the
 * scalar reference. */
#include <emmintrin.h>

#include "conv_impl.h"

static inline __m128 kept(const float *src, const int32_t *keep) {
    const __m128 m = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)keep));
    return _mm_and_ps(_mm_loadu_ps(src), m);
}

void om_conv_keep_f32_sse2(float *d, const float *src, const int32_t *keep, int64_t len) {
    int64_t e = 0;
    for (; e + 4 <= len; e += 4) _mm_storeu_ps(d + e, kept(src + e, keep + e));
    om_conv_keep_f32_scalar(d + e, src + e, keep + e, len - e);
}

void om_conv_tap_sums_f32_sse2(const float *g, const int64_t *off, const int32_t *keep,
                               const int64_t *koff, int64_t taps, int64_t n, float *d) {
    int64_t f = 0;
    for (; f + 16 <= n; f += 16) {
        __m128 acc[4];
        for (int v = 0; v < 4; v++) acc[v] = _mm_setzero_ps();
        for (int64_t t = 0; t < taps; t++)
            for (int v = 0; v < 4; v++)
                acc[v] = _mm_add_ps(acc[v],
                              kept(g + off[t] + f + 4 * v, keep + koff[t] + f + 4 * v));
        for (int v = 0; v < 4; v++) _mm_storeu_ps(d + f + 4 * v, acc[v]);
    }
    for (; f + 4 <= n; f += 4) {
        __m128 acc = _mm_setzero_ps();
        for (int64_t t = 0; t < taps; t++)
            acc = _mm_add_ps(acc, kept(g + off[t] + f, keep + koff[t] + f));
        _mm_storeu_ps(d + f, acc);
    }
    om_conv_tap_sums_f32_scalar(g + f, off, keep + f, koff, taps, n - f, d + f);
}

OM_PATH_PROBE(conv, sse2)
