/* vmath.h on AVX-512 vectors (__m512): om_<name>_ps_avx512, bit-identical to the scalar
 * reference. The function bodies are in vmath_simd.h; this header maps its macros to AVX-512F
 * intrinsics, with comparison results in mask registers (__mmask16). Scaling by 2^n is scalef,
 * which rounds once as the scalar pair of products does (om_ldexp2f); OMV_FMA is vfmadd, one
 * rounding as the scalar reference's fmaf. */
#ifndef OM_VMATH_AVX512_H
#define OM_VMATH_AVX512_H

#include <immintrin.h>

#include "vmath.h"

/* The tanh table by coefficient: row k holds column k of om_tanh_rows for the 32 intervals, two
 * vectors, from which one two-source permute per coefficient picks each lane's entry. */
#define OM_TANH_COL0(m, c0, c1, c2, c3, c4, c5) m,
#define OM_TANH_COL1(m, c0, c1, c2, c3, c4, c5) c0,
#define OM_TANH_COL2(m, c0, c1, c2, c3, c4, c5) c1,
#define OM_TANH_COL3(m, c0, c1, c2, c3, c4, c5) c2,
#define OM_TANH_COL4(m, c0, c1, c2, c3, c4, c5) c3,
#define OM_TANH_COL5(m, c0, c1, c2, c3, c4, c5) c4,
#define OM_TANH_COL6(m, c0, c1, c2, c3, c4, c5) c5,
static const float om_tanh_cols[OM_TANH_DEG + 2][OM_TANH_LUT] = {
    {OM_TANH_INTERVALS(OM_TANH_COL0)}, {OM_TANH_INTERVALS(OM_TANH_COL1)},
    {OM_TANH_INTERVALS(OM_TANH_COL2)}, {OM_TANH_INTERVALS(OM_TANH_COL3)},
    {OM_TANH_INTERVALS(OM_TANH_COL4)}, {OM_TANH_INTERVALS(OM_TANH_COL5)},
    {OM_TANH_INTERVALS(OM_TANH_COL6)}};

static inline void om_tanh_lookup_ps_avx512(__m512i i, __m512 *c) {
    for (int k = 0; k < OM_TANH_DEG + 2; k++)
        c[k] = _mm512_permutex2var_ps(_mm512_loadu_ps(om_tanh_cols[k]), i,
                                      _mm512_loadu_ps(om_tanh_cols[k] + 16));
}

#define OMV __m512
#define OMM __mmask16
#define OMI __m512i
#define OMV_FN(name) name##_ps_avx512
#define OMV_SET1(c) _mm512_set1_ps(c)
#define OMV_ADD(a, b) _mm512_add_ps(a, b)
#define OMV_SUB(a, b) _mm512_sub_ps(a, b)
#define OMV_MUL(a, b) _mm512_mul_ps(a, b)
#define OMV_DIV(a, b) _mm512_div_ps(a, b)
#define OMV_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define OMV_LT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define OMV_LE(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ)
#define OMV_EQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define OMV_ISNAN(a) _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)
#define OMV_NLT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ)
#define OMV_MIN(a, b) _mm512_min_ps(a, b)
#define OMV_MAX(a, b) _mm512_max_ps(a, b)
#define OMV_F2I(a) _mm512_cvtps_epi32(a)
#define OMM_OR(a, b) ((__mmask16)((a) | (b)))
#define OMV_NONE(m) ((m) == 0)
#define OMV_SCALEF(p, n) _mm512_scalef_ps(p, n)
/* fpclass 0xff: NaN, ±0, ±inf, denormal or negative (AVX-512 DQ) */
#define OMV_NOT_POSITIVE_NORMAL(x) _mm512_fpclass_ps_mask(x, 0xff)
#define OMV_SEL(m, a, b) _mm512_mask_blend_ps(m, b, a)
#define OMV_AND(a, b) _mm512_and_ps(a, b)
#define OMV_XOR(a, b) _mm512_xor_ps(a, b)
#define OMV_AS_I(a) _mm512_castps_si512(a)
#define OMV_AS_F(a) _mm512_castsi512_ps(a)
#define OMV_I2F(a) _mm512_cvtepi32_ps(a)
#define OMI_SET1(c) _mm512_set1_epi32((int32_t)(c))
#define OMI_ADD(a, b) _mm512_add_epi32(a, b)
#define OMI_SUB(a, b) _mm512_sub_epi32(a, b)
#define OMI_AND(a, b) _mm512_and_si512(a, b)
#define OMI_SRL(a, k) _mm512_srli_epi32(a, k)
#define OMI_SRA(a, k) _mm512_srai_epi32(a, k)
#define OMI_SLL(a, k) _mm512_slli_epi32(a, k)
#define OMI_LT(a, b) _mm512_cmpgt_epi32_mask(b, a)
#define OMI_SEL(m, a, b) _mm512_mask_blend_epi32(m, b, a)

#define OMD __m512d
#define OMD_SET1(c) _mm512_set1_pd(c)
#define OMD_ADD(a, b) _mm512_add_pd(a, b)
#define OMD_MUL(a, b) _mm512_mul_pd(a, b)
#define OMD_SUB(a, b) _mm512_sub_pd(a, b)
#define OMD_LO(v) _mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define OMD_HI(v) _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1))
#define OMD_NARROW(lo, hi) \
    _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1)
#define OMD_BITS_SLL52(d) _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(d), 52))

#include "vmath_simd.h"
#include "vmath_undef.h"

#endif
