/* NEON matrix-product micro-kernel: an 8 x 12 tile of C in 24 4-lane accumulators.
 *
 * Per k: three loads of packed B (12 columns) and, per row of A, a broadcast and three
 * vfmaq_f32 (acc + a * b with one rounding). 24 accumulators, 3 B vectors and the A broadcast
 * fit the 32 registers of AArch64. Each accumulator lane is the scalar reference's fmaf chain
 * over k in the same order, so the bits are the same. Packing uses the plain C transpose.
 */
#include <arm_neon.h>

#include "gemm.h"
#include "gemm_convert.h"

enum { MR = 8, NV = 3, NR = 4 * NV };

static void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                   int accumulate) {
    float32x4_t acc[MR][NV];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = accumulate ? vld1q_f32(c + i * ldc + 4 * v) : vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
        float32x4_t bv[NV];
        for (int v = 0; v < NV; v++) bv[v] = vld1q_f32(b + 4 * v);
        for (int i = 0; i < MR; i++) {
            float32x4_t ai = vdupq_n_f32(a[i]);
            for (int v = 0; v < NV; v++) acc[i][v] = vfmaq_f32(acc[i][v], ai, bv[v]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < NV; v++) vst1q_f32(c + i * ldc + 4 * v, acc[i][v]);
}

const om_gemm_ukernel *om_gemm_ukernel_f32_neon(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, om_gemm_transpose_f32, convert,
                                       NULL, NULL, has_tiny};
    return &u;
}

OM_PATH_PROBE(gemm, neon)
