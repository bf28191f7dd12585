/* Packing's converting step (gemm.h), one definition compiled into every path's file: the
 * integer code of half.h, which the compiler vectorises with the path's flags, and F16C's
 * float16 conversions where the path has them (the same bits: both round to nearest even and
 * keep NaNs quiet, whatever the floating-point environment). The packed bfloat16 values are
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

static void convert(int64_t n, const void *src, int fmt, float *dst, uint16_t *save) {
    const float *f = src;
    const uint16_t *h = src;
    int64_t i = 0;
    switch (fmt) {
    case OM_F32_TO_BF16:
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
