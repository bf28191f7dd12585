/* The vector vocabulary (simd/scalar.h) on AVX-512 F/DQ: __m512, 16 lanes, comparison results
 * in mask registers (__mmask16), so partial vectors are masked loads and stores. OMV_FMA is
 * vfmadd, one rounding as fmaf. */
#include <immintrin.h>

#define OMV __m512
#define OMM __mmask16
#define OMI __m512i
#define OMV_LANES 16
#define OMV_FN(name) name##_avx512
#define OMV_SET1(c) _mm512_set1_ps(c)
#define OMV_ZERO() _mm512_setzero_ps()
#define OMV_LOAD(p) _mm512_loadu_ps(p)
#define OMV_STORE(p, v) _mm512_storeu_ps(p, v)
#define OMV_FIRST(n) ((__mmask16)((1u << (n)) - 1u))
#define OMV_LOAD_PART(p, n, fill) _mm512_mask_loadu_ps(_mm512_set1_ps(fill), OMV_FIRST(n), p)
#define OMV_STORE_PART(p, n, v) _mm512_mask_storeu_ps(p, OMV_FIRST(n), v)
#define OMV_KEEP(v, n) _mm512_maskz_mov_ps(OMV_FIRST(n), v)
#define OMV_ADD(a, b) _mm512_add_ps(a, b)
#define OMV_SUB(a, b) _mm512_sub_ps(a, b)
#define OMV_MUL(a, b) _mm512_mul_ps(a, b)
#define OMV_DIV(a, b) _mm512_div_ps(a, b)
#define OMV_SQRT(a) _mm512_sqrt_ps(a)
#define OMV_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define OMV_LT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define OMV_LE(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ)
#define OMV_EQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define OMV_ISNAN(a) _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)
#define OMV_MIN(a, b) _mm512_min_ps(a, b)
#define OMV_MAX(a, b) _mm512_max_ps(a, b)
#define OMV_F2I(a) _mm512_cvtps_epi32(a)
#define OMV_NONE(m) ((m) == 0)
#define OMV_MASK_BITS(m) ((int)(m))
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
