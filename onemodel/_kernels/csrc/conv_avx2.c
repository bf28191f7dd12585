/* The convolution's data movement, AVX2 path (conv_impl.h): 8 lanes, keep masks as the masks
 * of masked loads (masked-off lanes read +0), the tap sums 32 pixels at a time in 4
 * accumulators; tails run the scalar reference. */
#include <immintrin.h>

#include "conv_impl.h"

static inline __m256 kept(const float *src, const int32_t *keep) {
    return _mm256_maskload_ps(src, _mm256_loadu_si256((const __m256i *)keep));
}

void om_conv_keep_f32_avx2(float *d, const float *src, const int32_t *keep, int64_t len) {
    int64_t e = 0;
    for (; e + 8 <= len; e += 8) _mm256_storeu_ps(d + e, kept(src + e, keep + e));
    om_conv_keep_f32_scalar(d + e, src + e, keep + e, len - e);
}

void om_conv_tap_sums_f32_avx2(const float *g, const int64_t *off, const int32_t *keep,
                               const int64_t *koff, int64_t taps, int64_t n, float *d) {
    int64_t f = 0;
    for (; f + 32 <= n; f += 32) {
        __m256 acc[4];
        for (int v = 0; v < 4; v++) acc[v] = _mm256_setzero_ps();
        for (int64_t t = 0; t < taps; t++)
            for (int v = 0; v < 4; v++)
                acc[v] = _mm256_add_ps(acc[v],
                                       kept(g + off[t] + f + 8 * v, keep + koff[t] + f + 8 * v));
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(d + f + 8 * v, acc[v]);
    }
    for (; f + 8 <= n; f += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t t = 0; t < taps; t++)
            acc = _mm256_add_ps(acc, kept(g + off[t] + f, keep + koff[t] + f));
        _mm256_storeu_ps(d + f, acc);
    }
    om_conv_tap_sums_f32_scalar(g + f, off, keep + f, koff, taps, n - f, d + f);
}

OM_PATH_PROBE(conv, avx2)
