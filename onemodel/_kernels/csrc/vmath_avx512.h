/* vmath.h on AVX-512 vectors (__m512): om_<name>_avx512, bit-identical to the scalar
 * reference. The function bodies are in vmath_simd.h over the vocabulary of simd/avx512.h;
 * this header adds the tanh table's lookup, and two instructions the bodies use where a path
 * has them: scaling by 2^n is scalef, which rounds once as the scalar pair of products does
 * (om_ldexp2_scalar), and the log's special cases are one fpclass. */
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

static inline void om_tanh_lookup_avx512(__m512i i, __m512 *c) {
    for (int k = 0; k < OM_TANH_DEG + 2; k++)
        c[k] = _mm512_permutex2var_ps(_mm512_loadu_ps(om_tanh_cols[k]), i,
                                      _mm512_loadu_ps(om_tanh_cols[k] + 16));
}

#include "simd/avx512.h"
#define OMV_SCALEF(p, n) _mm512_scalef_ps(p, n)
/* fpclass 0xff: NaN, ±0, ±inf, denormal or negative (AVX-512 DQ) */
#define OMV_NOT_POSITIVE_NORMAL(x) _mm512_fpclass_ps_mask(x, 0xff)
#include "vmath_simd.h"
#include "simd/undef.h"

#endif
