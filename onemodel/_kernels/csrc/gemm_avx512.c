/* AVX-512 matrix-product micro-kernel: an 8 x 32 tile of C in 16 16-lane accumulators.
 *
 * Per k: two loads of packed B (32 columns), eight broadcasts of packed A, 16 _mm512_fmadd_ps;
 * 16 independent chains cover the FMA latency on both ports. 8 rows rather than the usual 12
 * or 14: measured as fast in L1 and it wastes nothing on the common multiples of 8 (batch 256,
 * widths 512, 1024), where taller tiles compute padding rows. B is prefetched 8 steps ahead
 * because with this loop order its panel streams from L2. Each accumulator lane is the scalar
 * reference's fmaf chain over k in the same order, so the bits are the same. The transposing
 * pack step uses 16 x 16 in-register transposes.
 */
#include <immintrin.h>

#include "gemm.h"
#include "gemm_convert.h"
#include "gemm_transpose16.h"

enum { MR = 8, NV = 2, NR = 16 * NV, PREFETCH_K = 8 };

static void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                   int accumulate) {
    __m512 acc[MR][NV];
OM_UNROLL(16)
    for (int i = 0; i < MR; i++)
OM_UNROLL(4)
        for (int v = 0; v < NV; v++)
            acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
        __m512 bv[NV];
OM_UNROLL(4)
        for (int v = 0; v < NV; v++) {
            _mm_prefetch((const char *)(b + PREFETCH_K * NR + 16 * v), _MM_HINT_T0);
            bv[v] = _mm512_load_ps(b + 16 * v);
        }
OM_UNROLL(16)
        for (int i = 0; i < MR; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
OM_UNROLL(4)
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
        }
    }
OM_UNROLL(16)
    for (int i = 0; i < MR; i++)
OM_UNROLL(4)
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

/* Packing's transposing step (gemm.h), 16 depths at a time through transpose16. */
static void transpose(int64_t depth, int rows, const float *src, int64_t rs, float *dst,
                      int width) {
    const __mmask16 row_mask = (__mmask16)((1u << rows) - 1);
    for (int64_t k = 0; k < depth; k += 16) {
        int n = depth - k < 16 ? (int)(depth - k) : 16;
        __mmask16 k_mask = (__mmask16)((1u << n) - 1);
        __m512 r[16];
OM_UNROLL(16)
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(k_mask, src + i * rs + k) : _mm512_setzero_ps();
        transpose16(r);
        for (int i = 0; i < n; i++) _mm512_mask_storeu_ps(dst + (k + i) * width, row_mask, r[i]);
    }
}

const om_gemm_ukernel *om_gemm_ukernel_f32_avx512(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, transpose, convert, NULL, NULL,
                                       has_tiny};
    return &u;
}

OM_PATH_PROBE(gemm, avx512)
