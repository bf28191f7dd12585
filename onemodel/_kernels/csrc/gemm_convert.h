/* Packing's converting step (gemm.h), one definition compiled into every path's file: the
 * integer code of half.h, which the compiler vectorises with the path's flags, F16C's float16
 * conversions where the path has them (the same bits: both round to nearest even and keep
 * NaNs quiet, whatever the floating-point environment), and AVX2's translation of half.h's
 * bfloat16 code 8 values at a time (packing's runs are 8 to 32 values, too short for the
 * compiler's vectorised loops, which then run scalar). The packed bfloat16 values are
 * what the dot-product instruction reads: a subnormal is a zero of its sign (gemm.c); the
 * saved bits are the rounding itself, as torch's. */
#ifndef OM_GEMM_CONVERT_H
#define OM_GEMM_CONVERT_H

#include "gemm.h"
#include "half.h"

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#define OM_F16C 1
#else
#define OM_F16C 0
#endif

/* bf16 bits with a subnormal made a zero of its sign. */
static inline uint16_t bf16_flushed(uint16_t h) {
    return (h & 0x7F80u) ? h : (uint16_t)(h & 0x8000u);
}

#if defined(__AVX2__)
/* bf16_flushed on 8 lanes of bf16 bits held in 32-bit lanes. */
static inline __m256i bf16_flushed8(__m256i h) {
    const __m256i subnormal = _mm256_cmpeq_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7F80)),
                                                 _mm256_setzero_si256());
    return _mm256_blendv_epi8(h, _mm256_and_si256(h, _mm256_set1_epi32(0x8000)), subnormal);
}

/* om_bf16_round on 8 lanes: the bits in the low halves of 32-bit lanes. */
static inline __m256i bf16_round8(const float *f) {
    const __m256i u = _mm256_loadu_si256((const __m256i *)f);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                           _mm256_set1_epi32(0x7F800000));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i nearest = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), 16);
    const __m256i quiet = _mm256_srli_epi32(_mm256_or_si256(u, _mm256_set1_epi32(0x400000)), 16);
    return _mm256_blendv_epi8(nearest, quiet, nan);
}

/* The low halves of 8 32-bit lanes (each below 2^16) stored as 8 uint16. */
static inline void store_halves8(uint16_t *p, __m256i v) {
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}
#endif

static void convert(int64_t n, const void *src, int fmt, float *dst, uint16_t *save) {
    const float *f = src;
    const uint16_t *h = src;
    int64_t i = 0;
    switch (fmt) {
    case OM_F32_TO_BF16:
#if defined(__AVX2__)
        for (; i + 8 <= n; i += 8) {
            const __m256i r = bf16_round8(f + i);
            _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(bf16_flushed8(r), 16));
            if (save) store_halves8(save + i, r);
        }
#endif
        for (; i < n; i++) {
            uint16_t r = om_bf16_round(f[i]);
            dst[i] = om_bf16_widen(bf16_flushed(r));
            if (save) save[i] = r;
        }
        break;
    case OM_F32_TO_F16:
#if OM_F16C
        for (; i + 8 <= n; i += 8) {
            __m128i r = _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT);
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(r));
            if (save) _mm_storeu_si128((__m128i *)(save + i), r);
        }
#endif
        for (; i < n; i++) {
            uint16_t r = om_f16_round(f[i]);
            dst[i] = om_f16_widen(r);
            if (save) save[i] = r;
        }
        break;
    case OM_BF16:
#if defined(__AVX2__)
        for (; i + 8 <= n; i += 8) {
            const __m256i r = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
            _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(bf16_flushed8(r), 16));
        }
#endif
        for (; i < n; i++) dst[i] = om_bf16_widen(bf16_flushed(h[i]));
        break;
    case OM_F16:
#if OM_F16C
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
#endif
        for (; i < n; i++) dst[i] = om_f16_widen(h[i]);
        break;
    default:
        for (; i < n; i++) dst[i] = f[i];
    }
}

#endif
