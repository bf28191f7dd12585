/* vmath.h on SSE2 vectors (__m128): om_<name>_sse2, bit-identical to the scalar reference.
 * The function bodies are in vmath_simd.h over the vocabulary of simd/sse2.h; this header
 * adds the tanh table's lookup. */
#ifndef OM_VMATH_SSE2_H
#define OM_VMATH_SSE2_H

#include <emmintrin.h>

#include "vmath.h"

/* The rows of om_tanh_rows for 4 lanes, transposed: first halves to c[0..3], second halves
 * to c[4..7]. */
static inline void om_tanh_lookup_sse2(__m128i i, __m128 *c) {
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

#include "simd/sse2.h"
#include "vmath_simd.h"
#include "simd/undef.h"

#endif
