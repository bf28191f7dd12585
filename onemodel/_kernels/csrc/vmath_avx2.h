/* vmath.h on AVX2 vectors (__m256): om_<name>_ps_avx2, bit-identical to the scalar reference.
 * The function bodies are in vmath_simd.h; this header maps its macros to AVX2 intrinsics.
 * FMA is available on this path but deliberately unused (vmath.h: no fused multiply-add). */
#ifndef OM_VMATH_AVX2_H
#define OM_VMATH_AVX2_H

#include <immintrin.h>

#include "vmath.h"

#define OMV __m256
#define OMM __m256
#define OMI __m256i
#define OMV_FN(name) name##_ps_avx2
#define OMV_SET1(c) _mm256_set1_ps(c)
#define OMV_ADD(a, b) _mm256_add_ps(a, b)
#define OMV_SUB(a, b) _mm256_sub_ps(a, b)
#define OMV_MUL(a, b) _mm256_mul_ps(a, b)
#define OMV_DIV(a, b) _mm256_div_ps(a, b)
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
#define OMV_LUT32(t, i) _mm256_i32gather_ps(t, i, 4)
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
#define OMI_SEL(m, a, b) OMV_AS_I(OMV_SEL(m, OMV_AS_F(a), OMV_AS_F(b)))

#include "vmath_simd.h"
#include "vmath_undef.h"

#endif
