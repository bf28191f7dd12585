/* The vector vocabulary (simd/scalar.h) on AVX2: __m256, 8 lanes, masks as all-ones lanes.
 * OMV_FMA is vfmadd, one rounding as fmaf. */
#include <immintrin.h>

#define OMV __m256
#define OMM __m256
#define OMI __m256i
#define OMV_LANES 8
#define OMV_FN(name) name##_avx2
#define OMV_SET1(c) _mm256_set1_ps(c)
#define OMV_ZERO() _mm256_setzero_ps()
#define OMV_LOAD(p) _mm256_loadu_ps(p)
#define OMV_STORE(p, v) _mm256_storeu_ps(p, v)
#define OMV_FIRST(n) _mm256_castsi256_ps( \
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))
#define OMV_LOAD_PART(p, n, fill) \
    _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, OMV_AS_I(OMV_FIRST(n))), \
                     OMV_FIRST(n))
#define OMV_STORE_PART(p, n, v) _mm256_maskstore_ps(p, OMV_AS_I(OMV_FIRST(n)), v)
#define OMV_KEEP(v, n) _mm256_and_ps(v, OMV_FIRST(n))
#define OMV_ADD(a, b) _mm256_add_ps(a, b)
#define OMV_SUB(a, b) _mm256_sub_ps(a, b)
#define OMV_MUL(a, b) _mm256_mul_ps(a, b)
#define OMV_DIV(a, b) _mm256_div_ps(a, b)
#define OMV_SQRT(a) _mm256_sqrt_ps(a)
#define OMV_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define OMV_LT(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define OMV_LE(a, b) _mm256_cmp_ps(a, b, _CMP_LE_OQ)
#define OMV_EQ(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define OMV_ISNAN(a) _mm256_cmp_ps(a, a, _CMP_UNORD_Q)
#define OMV_MIN(a, b) _mm256_min_ps(a, b)
#define OMV_MAX(a, b) _mm256_max_ps(a, b)
#define OMV_F2I(a) _mm256_cvtps_epi32(a)
#define OMV_NONE(m) (_mm256_movemask_ps(m) == 0)
#define OMV_MASK_BITS(m) _mm256_movemask_ps(m)
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
