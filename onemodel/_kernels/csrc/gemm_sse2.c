/* SSE2 matrix-product micro-kernel: a 4 x 8 tile of C in eight 4-lane registers.
 *
 * SSE2 has no fused multiply-add and a separate multiply and add would round twice, so each
 * lane goes through fmaf() (correctly rounded): the same chain as the scalar reference, in
 * the same k order. This path is a correctness reference, not a fast one.
 */
#include <emmintrin.h>
#include <math.h>

#include "gemm.h"
#include "gemm_convert.h"

enum { MR = 4, NV = 2, NR = 4 * NV };

static inline __m128 fma_lanes(float a, __m128 b, __m128 acc) {
    float bl[4], cl[4];
    _mm_storeu_ps(bl, b);
    _mm_storeu_ps(cl, acc);
    for (int l = 0; l < 4; l++) cl[l] = fmaf(a, bl[l], cl[l]);
    return _mm_loadu_ps(cl);
}

static void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                   int accumulate) {
    __m128 acc[MR][NV];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = accumulate ? _mm_loadu_ps(c + i * ldc + 4 * v) : _mm_setzero_ps();
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
        __m128 bv[NV];
        for (int v = 0; v < NV; v++) bv[v] = _mm_load_ps(b + 4 * v);
        for (int i = 0; i < MR; i++)
            for (int v = 0; v < NV; v++) acc[i][v] = fma_lanes(a[i], bv[v], acc[i][v]);
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++) _mm_storeu_ps(c + i * ldc + 4 * v, acc[i][v]);
}

const om_gemm_ukernel *om_gemm_ukernel_f32_sse2(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, om_gemm_transpose_f32, convert,
                                       NULL, NULL, has_tiny};
    return &u;
}

OM_PATH_PROBE(gemm, sse2)
