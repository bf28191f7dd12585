/* vmath.h on AVX2 vectors (__m256): om_<name>_avx2, bit-identical to the scalar reference.
 * The function bodies are in vmath_simd.h over the vocabulary of simd/avx2.h; this header
 * adds the tanh table's lookup. */
#ifndef OM_VMATH_AVX2_H
#define OM_VMATH_AVX2_H

#include <immintrin.h>

#include "vmath.h"

/* The rows of om_tanh_rows for 8 lanes, transposed: lane j's row and lane j + 4's share a
 * register (low and high 128 bits), so an in-lane 4x4 transpose of the first halves gives
 * c[0..3] and of the second halves c[4..7] (gathers and permutes are slower). */
static inline void om_transpose4_avx2(__m256 r0, __m256 r1, __m256 r2, __m256 r3, __m256 *c) {
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpacklo_ps(r2, r3);
    __m256 t2 = _mm256_unpackhi_ps(r0, r1), t3 = _mm256_unpackhi_ps(r2, r3);
    c[0] = _mm256_shuffle_ps(t0, t1, 0x44);
    c[1] = _mm256_shuffle_ps(t0, t1, 0xee);
    c[2] = _mm256_shuffle_ps(t2, t3, 0x44);
    c[3] = _mm256_shuffle_ps(t2, t3, 0xee);
}

static inline void om_tanh_lookup_avx2(__m256i i, __m256 *c) {
    /* indices out through 64-bit moves, two at a time: fewer uops on the shuffle port, which
     * the transposes keep busy, than one extract per index */
    __m128i il = _mm256_castsi256_si128(i), ih = _mm256_extracti128_si256(i, 1);
    uint64_t q[4] = {(uint64_t)_mm_cvtsi128_si64(il), (uint64_t)_mm_extract_epi64(il, 1),
                     (uint64_t)_mm_cvtsi128_si64(ih), (uint64_t)_mm_extract_epi64(ih, 1)};
    uint32_t k[8];
    for (int j = 0; j < 4; j++) {
        k[2 * j] = (uint32_t)q[j];
        k[2 * j + 1] = (uint32_t)(q[j] >> 32);
    }
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++) {
        const float *r = om_tanh_rows[k[j]], *s = om_tanh_rows[k[j + 4]];
        lo[j] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(r)), _mm_loadu_ps(s), 1);
        hi[j] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(r + 4)),
                                     _mm_loadu_ps(s + 4), 1);
    }
    om_transpose4_avx2(lo[0], lo[1], lo[2], lo[3], c);
    om_transpose4_avx2(hi[0], hi[1], hi[2], hi[3], c + 4);
}

#include "simd/avx2.h"
#include "vmath_simd.h"
#include "simd/undef.h"

#endif
