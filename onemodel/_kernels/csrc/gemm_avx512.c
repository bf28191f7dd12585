/* AVX-512 matrix-product micro-kernel: a 14 x 32 tile of C in 28 16-lane accumulators.
 *
 * Per k: two loads of packed B (32 columns), fourteen broadcasts of packed A (folded into the
 * FMA as embedded broadcasts), 28 _mm512_fmadd_ps: 28 of the 32 registers hold C, which keeps
 * both FMA ports busy. Each accumulator lane is the scalar reference's fmaf chain over k in the
 * same order, so the bits are the same.
 */
#include <immintrin.h>

#include "gemm.h"

enum { MR = 14, NV = 2, NR = 16 * NV };

static void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                   int accumulate) {
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
        __m512 bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

const om_gemm_ukernel *om_gemm_ukernel_f32_avx512(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel};
    return &u;
}
