/* The vector vocabulary (simd/scalar.h) on SSE2: __m128, 4 lanes, masks as all-ones lanes.
 * SSE2 has no blend, so a select is (m & a) | (~m & b); no fused multiply-add, so OMV_FMA calls
 * fmaf (correctly rounded) on each lane; no masked loads, so partial vectors go through a
 * buffer (simd/part.h). */
#include <emmintrin.h>

#define OMV __m128
#define OMM __m128
#define OMI __m128i
#define OMV_LANES 4
#define OMV_FN(name) name##_sse2
#define OMV_SET1(c) _mm_set1_ps(c)
#define OMV_ZERO() _mm_setzero_ps()
#define OMV_LOAD(p) _mm_loadu_ps(p)
#define OMV_STORE(p, v) _mm_storeu_ps(p, v)
#define OMV_FIRST(n) \
    _mm_castsi128_ps(_mm_cmplt_epi32(_mm_setr_epi32(0, 1, 2, 3), _mm_set1_epi32(n)))
#define OMV_LOAD_PART(p, n, fill) om_load_part_sse2(p, n, fill)
#define OMV_STORE_PART(p, n, v) om_store_part_sse2(p, n, v)
#define OMV_KEEP(v, n) _mm_and_ps(v, OMV_FIRST(n))
#define OMV_ADD(a, b) _mm_add_ps(a, b)
#define OMV_SUB(a, b) _mm_sub_ps(a, b)
#define OMV_MUL(a, b) _mm_mul_ps(a, b)
#define OMV_DIV(a, b) _mm_div_ps(a, b)
#define OMV_SQRT(a) _mm_sqrt_ps(a)
#define OMV_FMA(a, b, c) om_fma_sse2(a, b, c)
#define OMV_LT(a, b) _mm_cmplt_ps(a, b)
#define OMV_LE(a, b) _mm_cmple_ps(a, b)
#define OMV_EQ(a, b) _mm_cmpeq_ps(a, b)
#define OMV_ISNAN(a) _mm_cmpunord_ps(a, a)
#define OMV_MIN(a, b) _mm_min_ps(a, b)
#define OMV_MAX(a, b) _mm_max_ps(a, b)
#define OMV_F2I(a) _mm_cvtps_epi32(a)
#define OMV_NONE(m) (_mm_movemask_ps(m) == 0)
#define OMV_MASK_BITS(m) _mm_movemask_ps(m)
#define OMV_SEL(m, a, b) _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b))
#define OMV_AND(a, b) _mm_and_ps(a, b)
#define OMV_XOR(a, b) _mm_xor_ps(a, b)
#define OMV_AS_I(a) _mm_castps_si128(a)
#define OMV_AS_F(a) _mm_castsi128_ps(a)
#define OMV_I2F(a) _mm_cvtepi32_ps(a)
#define OMI_SET1(c) _mm_set1_epi32((int32_t)(c))
#define OMI_ADD(a, b) _mm_add_epi32(a, b)
#define OMI_SUB(a, b) _mm_sub_epi32(a, b)
#define OMI_AND(a, b) _mm_and_si128(a, b)
#define OMI_SRL(a, k) _mm_srli_epi32(a, k)
#define OMI_SRA(a, k) _mm_srai_epi32(a, k)
#define OMI_SLL(a, k) _mm_slli_epi32(a, k)
#define OMI_LT(a, b) _mm_castsi128_ps(_mm_cmpgt_epi32(b, a))
#define OMI_SEL(m, a, b) OMV_AS_I(OMV_SEL(m, OMV_AS_F(a), OMV_AS_F(b)))

#define OMD __m128d
#define OMD_SET1(c) _mm_set1_pd(c)
#define OMD_ADD(a, b) _mm_add_pd(a, b)
#define OMD_MUL(a, b) _mm_mul_pd(a, b)
#define OMD_SUB(a, b) _mm_sub_pd(a, b)
#define OMD_LO(v) _mm_cvtps_pd(v)
#define OMD_HI(v) _mm_cvtps_pd(_mm_movehl_ps(v, v))
#define OMD_NARROW(lo, hi) _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi))
#define OMD_BITS_SLL52(d) _mm_castsi128_pd(_mm_slli_epi64(_mm_castpd_si128(d), 52))

#ifndef OM_SIMD_SSE2_H /* the helpers once, however often the vocabulary is included */
#define OM_SIMD_SSE2_H
#include <math.h>

static inline __m128 om_fma_sse2(__m128 a, __m128 b, __m128 c) {
    float x[4], y[4], z[4];
    _mm_storeu_ps(x, a);
    _mm_storeu_ps(y, b);
    _mm_storeu_ps(z, c);
    for (int l = 0; l < 4; l++) z[l] = fmaf(x[l], y[l], z[l]);
    return _mm_loadu_ps(z);
}
#include "simd/part.h"
#endif
