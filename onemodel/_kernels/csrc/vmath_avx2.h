/* vmath.h on AVX2 vectors (__m256): om_<name>_ps_avx2, bit-identical to the scalar reference.
 * The function bodies are in vmath_simd.h; this header maps its macros to AVX2 intrinsics.
 * OMV_FMA is vfmadd, one rounding as the scalar reference's fmaf. */
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

static inline void om_tanh_lookup_ps_avx2(__m256i i, __m256 *c) {
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

#define OMV __m256
#define OMM __m256
#define OMI __m256i
#define OMV_FN(name) name##_ps_avx2
#define OMV_SET1(c) _mm256_set1_ps(c)
#define OMV_ADD(a, b) _mm256_add_ps(a, b)
#define OMV_SUB(a, b) _mm256_sub_ps(a, b)
#define OMV_MUL(a, b) _mm256_mul_ps(a, b)
#define OMV_DIV(a, b) _mm256_div_ps(a, b)
#define OMV_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define OMV_LT(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define OMV_LE(a, b) _mm256_cmp_ps(a, b, _CMP_LE_OQ)
#define OMV_EQ(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define OMV_ISNAN(a) _mm256_cmp_ps(a, a, _CMP_UNORD_Q)
#define OMV_NLT(a, b) _mm256_cmp_ps(a, b, _CMP_NLT_UQ)
#define OMV_MIN(a, b) _mm256_min_ps(a, b)
#define OMV_MAX(a, b) _mm256_max_ps(a, b)
#define OMV_F2I(a) _mm256_cvtps_epi32(a)
#define OMM_OR(a, b) _mm256_or_ps(a, b)
#define OMV_NONE(m) (_mm256_movemask_ps(m) == 0)
#define OMV_SEL(m, a, b) _mm256_blendv_ps(b, a, m)
#define OMV_AND(a, b) _mm256_and_ps(a, b)
#define OMV_XOR(a, b) _mm256_xor_ps(a, b)
#define OMV_AS_I(a) _mm256_castps_si256(a)
#define OMV_AS_F(a) _mm256_castsi256_ps(a)
#define OMV_I2F(a) _mm256_cvtepi32_ps(a)
#define OMI_SET1(c) _mm256_set1_epi32((int32_t)(c))
#define OMI_ADD(a, b) _mm256_add_epi32(a, b)
#define OMI_SUB(a, b) _mm256_sub_epi32(a, b)
#define OMI_AND(a, b) _mm256_and_si256(a, b)
#define OMI_SRL(a, k) _mm256_srli_epi32(a, k)
#define OMI_SRA(a, k) _mm256_srai_epi32(a, k)
#define OMI_SLL(a, k) _mm256_slli_epi32(a, k)
#define OMI_LT(a, b) _mm256_castsi256_ps(_mm256_cmpgt_epi32(b, a))
#define OMI_SEL(m, a, b) OMV_AS_I(OMV_SEL(m, OMV_AS_F(a), OMV_AS_F(b)))

#define OMD __m256d
#define OMD_SET1(c) _mm256_set1_pd(c)
#define OMD_ADD(a, b) _mm256_add_pd(a, b)
#define OMD_MUL(a, b) _mm256_mul_pd(a, b)
#define OMD_SUB(a, b) _mm256_sub_pd(a, b)
#define OMD_LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define OMD_HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))
#define OMD_NARROW(lo, hi) \
    _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1)
#define OMD_BITS_SLL52(d) _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(d), 52))

#include "vmath_simd.h"
#include "vmath_undef.h"

#endif
