/* vmath.h on SSE2 vectors (__m128): om_<name>_ps_sse2, bit-identical to the scalar reference.
 * The function bodies are in vmath_simd.h; this header maps its macros to SSE2 intrinsics.
 * SSE2 has no blend, so a select is (m & a) | (~m & b), and no fused multiply-add, so OMV_FMA
 * calls fmaf (correctly rounded) on each lane: the scalar reference's operation, lane by lane. */
#ifndef OM_VMATH_SSE2_H
#define OM_VMATH_SSE2_H

#include <emmintrin.h>

#include "vmath.h"

/* The rows of om_tanh_rows for 4 lanes, transposed: first halves to c[0..3], second halves
 * to c[4..7]. */
static inline void om_tanh_lookup_ps_sse2(__m128i i, __m128 *c) {
    int32_t k[4];
    _mm_storeu_si128((__m128i *)k, i);
    for (int h = 0; h < 8; h += 4) {
        __m128 r0 = _mm_loadu_ps(om_tanh_rows[k[0]] + h);
        __m128 r1 = _mm_loadu_ps(om_tanh_rows[k[1]] + h);
        __m128 r2 = _mm_loadu_ps(om_tanh_rows[k[2]] + h);
        __m128 r3 = _mm_loadu_ps(om_tanh_rows[k[3]] + h);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        c[h] = r0;
        c[h + 1] = r1;
        c[h + 2] = r2;
        c[h + 3] = r3;
    }
}

static inline __m128 om_fma_ps_sse2(__m128 a, __m128 b, __m128 c) {
    float x[4], y[4], z[4];
    _mm_storeu_ps(x, a);
    _mm_storeu_ps(y, b);
    _mm_storeu_ps(z, c);
    for (int l = 0; l < 4; l++) z[l] = fmaf(x[l], y[l], z[l]);
    return _mm_loadu_ps(z);
}

#define OMV __m128
#define OMM __m128
#define OMI __m128i
#define OMV_FN(name) name##_ps_sse2
#define OMV_SET1(c) _mm_set1_ps(c)
#define OMV_ADD(a, b) _mm_add_ps(a, b)
#define OMV_SUB(a, b) _mm_sub_ps(a, b)
#define OMV_MUL(a, b) _mm_mul_ps(a, b)
#define OMV_DIV(a, b) _mm_div_ps(a, b)
#define OMV_FMA(a, b, c) om_fma_ps_sse2(a, b, c)
#define OMV_LT(a, b) _mm_cmplt_ps(a, b)
#define OMV_LE(a, b) _mm_cmple_ps(a, b)
#define OMV_EQ(a, b) _mm_cmpeq_ps(a, b)
#define OMV_ISNAN(a) _mm_cmpunord_ps(a, a)
#define OMV_NLT(a, b) _mm_cmpnlt_ps(a, b)
#define OMV_MIN(a, b) _mm_min_ps(a, b)
#define OMV_MAX(a, b) _mm_max_ps(a, b)
#define OMV_F2I(a) _mm_cvtps_epi32(a)
#define OMM_OR(a, b) _mm_or_ps(a, b)
#define OMV_NONE(m) (_mm_movemask_ps(m) == 0)
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

#include "vmath_simd.h"
#include "vmath_undef.h"

#endif
