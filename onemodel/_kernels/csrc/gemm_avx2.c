/* AVX2 matrix-product micro-kernel: a 6 x 16 tile of C in twelve 8-lane accumulators.
 *
 * Per k: two loads of packed B (16 columns), six broadcasts of packed A, twelve
 * _mm256_fmadd_ps. Each accumulator lane is the scalar reference's fmaf chain over k in the
 * same order, so the bits are the same.
 */
#include <immintrin.h>

#include "gemm.h"
#include "gemm_convert.h"

enum { MR = 6, NV = 2, NR = 8 * NV };

static void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                   int accumulate) {
    __m256 acc[MR][NV];
OM_UNROLL(8)
    for (int i = 0; i < MR; i++)
OM_UNROLL(8)
        for (int v = 0; v < NV; v++)
            acc[i][v] = accumulate ? _mm256_loadu_ps(c + i * ldc + 8 * v) : _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
        __m256 bv[NV];
OM_UNROLL(8)
        for (int v = 0; v < NV; v++) bv[v] = _mm256_load_ps(b + 8 * v);
OM_UNROLL(8)
        for (int i = 0; i < MR; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
OM_UNROLL(8)
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
OM_UNROLL(8)
    for (int i = 0; i < MR; i++)
OM_UNROLL(8)
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
}

const om_gemm_ukernel *om_gemm_ukernel_f32_avx2(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, om_gemm_transpose_f32, convert,
                                       NULL, NULL, has_tiny};
    return &u;
}

OM_PATH_PROBE(gemm, avx2)
