/* Scalar matrix-product micro-kernel: the reference for every other path.
 *
 * One 4 x 16 tile of C, accumulators in a local array, each element a chain of fmaf() over k
 * in increasing order from +0.0f (fmaf is correctly rounded: one rounding per step). The same
 * chain computes the products too small for blocking and packing (om_gemm_small_f32, gemm.h),
 * on every path.
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

void om_gemm_small_f32(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
                       om_gemm_operand b, float *c) {
    const int64_t ai = a.trans ? 1 : k, ak = a.trans ? m : 1, bk = b.trans ? 1 : n,
                  bj = b.trans ? k : 1;
    for (int64_t p = 0; p < batch; p++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++, c++) {
                const float *x = (const float *)a.p + p * a.batch_stride + i * ai,
                            *y = (const float *)b.p + p * b.batch_stride + j * bj;
                float acc = 0.0f;
                for (int64_t q = 0; q < k; q++) acc = fmaf(x[q * ak], y[q * bk], acc);
                *c = acc;
            }
}

const om_gemm_ukernel *om_gemm_ukernel_f32_scalar(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, om_gemm_transpose_f32, convert,
                                       NULL, NULL, has_tiny};
    return &u;
}

OM_PATH_PROBE(gemm, scalar)
