/* AVX2 matrix-product micro-kernel: a 6 x 16 tile of C in twelve 8-lane accumulators.
 *
 * Per k: two loads of packed B (16 columns), six broadcasts of packed A, twelve
 * _mm256_fmadd_ps. Each accumulator lane is the scalar reference's fmaf chain over k in the
 * same order, so the bits are the same. Packing's transposes go 8 x 8 through registers, with
 * the rounding to bfloat16 / float16 done on the way (data movement and convert's bits).
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

/* In-register transpose of an 8 x 8 block: r[i] lane j <- r[j] lane i. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
    for (int i = 0; i < 8; i++) r[i] = t[i];
}

/* Packing's converting transpose (gemm.h) for a constant fmt: blocks of 8 rows x 8 depths
 * loaded as fmt reads them (the conversion in registers, no pass through a row buffer),
 * transposed, and stored a depth at a time; the last depths (fewer than 8), and all of a block
 * of rows that held a rare bfloat16 value (bf16_seen), converted into a small block first. */
static OM_ALWAYS_INLINE int transpose_as(int64_t depth, int rows, const void *src,
                                         int64_t stride, int fmt, float *dst, int width,
                                         uint16_t *save) {
    const int64_t size = fmt == OM_BF16 || fmt == OM_F16 ? 2 : 4;
    int tiny = 0;
    for (int i0 = 0; i0 < rows; i0 += 8) {
        const int h = rows - i0 < 8 ? rows - i0 : 8;
        const char *block = (const char *)src + i0 * stride * size;
        uint16_t *block_save = save ? save + i0 * stride : NULL;
        bf16_seen s = bf16_seen_none();
        int64_t k = 0;
        for (; k + 8 <= depth; k += 8) {
            __m256 r[8];
OM_UNROLL(8)
            for (int i = 0; i < 8; i++)
                r[i] = i < h ? load8_as(block + i * stride * size, k, fmt,
                                        block_save ? block_save + i * stride : NULL, &s)
                             : _mm256_setzero_ps();
            transpose8(r);
            for (int j = 0; j < 8; j++) {
                if (h == 8)
                    _mm256_storeu_ps(dst + (k + j) * width + i0, r[j]);
                else
                    store_first(dst + (k + j) * width + i0, h, r[j]);
            }
        }
        for (k = bf16_rare(&s) ? 0 : k; k < depth; k += 8) {
            const int64_t n = depth - k < 8 ? depth - k : 8;
            float last[8 * 8];
            tiny |= convert(h, n, block + k * size, stride, fmt, last, 8,
                            block_save ? block_save + k : NULL);
            for (int64_t j = 0; j < n; j++)
                for (int i = 0; i < h; i++) dst[(k + j) * width + i0 + i] = last[i * 8 + j];
        }
    }
    return tiny;
}

static int convert_transpose(int64_t depth, int rows, const void *src, int64_t stride, int fmt,
                             float *dst, int width, uint16_t *save) {
    const int64_t d = depth, rs = stride;
    switch (fmt) {   /* a loop per format */
    case OM_F32_TO_BF16: return transpose_as(d, rows, src, rs, OM_F32_TO_BF16, dst, width, save);
    case OM_BF16: return transpose_as(d, rows, src, rs, OM_BF16, dst, width, save);
    case OM_F32_TO_F16: return transpose_as(d, rows, src, rs, OM_F32_TO_F16, dst, width, save);
    case OM_F16: return transpose_as(d, rows, src, rs, OM_F16, dst, width, save);
    default: return transpose_as(d, rows, src, rs, OM_F32, dst, width, save);
    }
}

/* The float32 transposing step (gemm.h): the same code without a conversion. */
static void transpose(int64_t depth, int rows, const float *src, int64_t rs, float *dst,
                      int width) {
    transpose_as(depth, rows, src, rs, OM_F32, dst, width, NULL);
}

const om_gemm_ukernel *om_gemm_ukernel_f32_avx2(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, transpose, convert, NULL, NULL,
                                       has_tiny, convert_transpose};
    return &u;
}

OM_PATH_PROBE(gemm, avx2)
