/* AVX512_BF16 matrix-product micro-kernel for bfloat16 products: VDPBF16PS on the avx512
 * path's 8 x 32 tile, whose packing it shares.
 *
 * The panels arrive as pairs (gemm.c, pairs_from_runs and pairs_from_rows): per pair of
 * depths, MR words of A and NR words of B, each word bf16(k) in its high half and bf16(k + 1)
 * in its low half. Per pair: two loads
 * of B, eight broadcasts of A, 16 VDPBF16PS, each adding two products to every lane: the high
 * one first, rounded, then the low one, rounded, with the instruction's own denormal rules.
 * That is the rule every other path emulates (gemm.c's design note), so the bits are the same.
 */
#include <immintrin.h>
#include <string.h>

#include "gemm.h"

enum { MR = 8, NV = 2, NR = 16 * NV, PREFETCH_PAIRS = 4 };

static inline __m512bh words(__m512i v) {
    __m512bh r;
    memcpy(&r, &v, sizeof r);
    return r;
}

static void kernel(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                   int accumulate) {
    const uint32_t *ap = (const uint32_t *)a, *bp = (const uint32_t *)b;
    __m512 acc[MR][NV];
OM_UNROLL(16)
    for (int i = 0; i < MR; i++)
OM_UNROLL(4)
        for (int v = 0; v < NV; v++)
            acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int64_t p = 0; p < kc / 2; p++, ap += MR, bp += NR) {
        __m512bh bv[NV];
OM_UNROLL(4)
        for (int v = 0; v < NV; v++) {
            _mm_prefetch((const char *)(bp + PREFETCH_PAIRS * NR + 16 * v), _MM_HINT_T0);
            bv[v] = words(_mm512_load_si512((const void *)(bp + 16 * v)));
        }
OM_UNROLL(16)
        for (int i = 0; i < MR; i++) {
            __m512bh ai = words(_mm512_set1_epi32((int)ap[i]));
OM_UNROLL(4)
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
        }
    }
OM_UNROLL(16)
    for (int i = 0; i < MR; i++)
OM_UNROLL(4)
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
}

const om_gemm_ukernel *om_gemm_ukernel_bf16_avx512bf16(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, NULL, NULL};
    return &u;
}
