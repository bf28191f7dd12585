/* Scalar matrix-product micro-kernel: the reference for every other path.
 *
 * One 4 x 16 tile of C, accumulators in a local array, each element a chain of fmaf() over k
 * in increasing order from +0.0f (fmaf is correctly rounded: one rounding per step).
 */
#include <math.h>

#include "gemm.h"
#include "gemm_convert.h"

enum { MR = 4, NR = 16 };

static void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                   int accumulate) {
    float acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = accumulate ? c[i * ldc + j] : 0.0f;
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];
}

const om_gemm_ukernel *om_gemm_ukernel_f32_scalar(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, om_gemm_transpose_f32, convert,
                                       NULL, NULL, has_tiny};
    return &u;
}

OM_PATH_PROBE(gemm, scalar)
