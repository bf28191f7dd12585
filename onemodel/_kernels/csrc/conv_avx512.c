/* The convolution's data movement, AVX-512 path (conv_impl.h): 16 lanes, tails through lane
 * masks; keep masks as the masks of zeroing loads (masked-off lanes read +0), the tap sums 32
 * pixels at a time in 2 accumulators. */
#include <immintrin.h>

#include "conv_impl.h"

static inline __mmask16 first(int64_t count) {
    return count >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << count) - 1);
}

/* The lanes of `in` whose keep is not 0 read src, the others +0. */
static inline __m512 kept(__mmask16 in, const float *src, const int32_t *keep) {
    const __m512i m = _mm512_maskz_loadu_epi32(in, keep);
    return _mm512_maskz_loadu_ps(_mm512_mask_test_epi32_mask(in, m, m), src);
}

void om_conv_keep_f32_avx512(float *d, const float *src, const int32_t *keep, int64_t len) {
    for (int64_t e = 0; e < len; e += 16) {
        const __mmask16 in = first(len - e);
        _mm512_mask_storeu_ps(d + e, in, kept(in, src + e, keep + e));
    }
}

void om_conv_tap_sums_f32_avx512(const float *g, const int64_t *off, const int32_t *keep,
                                 const int64_t *koff, int64_t taps, int64_t n, float *d) {
    int64_t f = 0;
    for (; f + 32 <= n; f += 32) {
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        for (int64_t t = 0; t < taps; t++) {
            const float *gt = g + off[t] + f;
            const int32_t *kt = keep + koff[t] + f;
            acc0 = _mm512_add_ps(acc0, kept(0xFFFF, gt, kt));
            acc1 = _mm512_add_ps(acc1, kept(0xFFFF, gt + 16, kt + 16));
        }
        _mm512_storeu_ps(d + f, acc0);
        _mm512_storeu_ps(d + f + 16, acc1);
    }
    for (; f < n; f += 16) {
        const __mmask16 in = first(n - f);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t t = 0; t < taps; t++)
            acc = _mm512_add_ps(acc, kept(in, g + off[t] + f, keep + koff[t] + f));
        _mm512_mask_storeu_ps(d + f, in, acc);
    }
}

OM_PATH_PROBE(conv, avx512)
