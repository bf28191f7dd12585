/* AVX512_BF16 matrix product for bfloat16 products: VDPBF16PS on the avx512 path's 8 x 32
 * tile, and the packing that writes its panels, VCVTNEPS2BF16 rounding the operands.
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
#include "gemm_transpose16.h"
#include "half.h"

enum { MR = 8, NV = 2, NR = 16 * NV, PREFETCH_PAIRS = 4, PREFETCH_DEPTHS = 64 };

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

/* Lanes [0, n) of 16. */
static inline __mmask16 first16(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* r[i] = om_bf16_round(src[i]) for i < n: the scalar reference, for vectors holding a float32
 * subnormal. */
static void round_each(int64_t n, const void *src, uint16_t *r) {
    for (int64_t i = 0; i < n; i++) r[i] = om_bf16_round(((const float *)src)[i]);
}

/* The bf16 bits packing gives the first min(n, 16) values of src as fmt reads them, in 16-bit
 * lanes, zeros after: OM_F32_TO_BF16 rounds (om_bf16_round), OM_BF16 holds the bits; save (if
 * not NULL) receives the rounding. bf16 subnormals stay in the panel: VDPBF16PS reads them as
 * zeros of their sign (its own denormal rule, whatever MXCSR says).
 * VCVTNEPS2BF16 rounds as om_bf16_round does (nearest even; a NaN made quiet, its payload
 * truncated) except that it reads float32 subnormals as zero, which would lose the saved bits
 * and a subnormal's rounding up to FLT_MIN: a vector holding one takes om_bf16_round. */
static inline __m256i bf16_bits16(int64_t n, const void *src, int fmt, uint16_t *save) {
    const __mmask16 lanes = first16(n);
    __m256i h;
    if (fmt == OM_BF16) {
        h = n >= 16 ? _mm256_loadu_si256((const __m256i *)src)
                    : _mm256_maskz_loadu_epi16(lanes, src);
    } else {   /* whole vectors by plain loads: masked ones cost more on AMD's cores */
        const __m512i u = n >= 16 ? _mm512_loadu_si512(src)
                                  : _mm512_maskz_loadu_epi32(lanes, src);
        const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
        const __mmask16 subnormal = _mm512_cmplt_epu32_mask(   /* 0 < magnitude < 2^23 */
            _mm512_sub_epi32(magnitude, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFFFF));
        if (subnormal) {
            OM_ALIGNED(32) uint16_t r[16] = {0};
            round_each(n < 16 ? n : 16, src, r);
            h = _mm256_load_si256((const __m256i *)r);
        } else {
            const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_castsi512_ps(u));
            memcpy(&h, &rounded, sizeof h);
        }
        if (save) _mm256_mask_storeu_epi16(save, lanes, h);
    }
    return h;
}

/* bf16_bits16 on exactly 8 values, in 256-bit registers: op(A)'s rows of the tile's height (8),
 * which the masked 16-lane code packed 4-5% slower (a weight gradient dY^T X). */
static inline __m128i bf16_bits8(const void *src, int fmt, uint16_t *save) {
    __m128i h;
    if (fmt == OM_BF16) {
        h = _mm_loadu_si128((const __m128i *)src);
    } else {
        const __m256i u = _mm256_loadu_si256((const __m256i *)src);
        const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
        const __mmask8 subnormal = _mm256_cmplt_epu32_mask(
            _mm256_sub_epi32(magnitude, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7FFFFF));
        if (subnormal) {
            OM_ALIGNED(16) uint16_t r[8];
            round_each(8, src, r);
            h = _mm_load_si128((const __m128i *)r);
        } else {
            const __m128bh rounded = _mm256_cvtneps_pbh(_mm256_castsi256_ps(u));
            memcpy(&h, &rounded, sizeof h);
        }
        if (save) _mm_storeu_si128((__m128i *)save, h);
    }
    return h;
}

static int64_t element_size(int fmt) { return fmt == OM_BF16 ? 2 : 4; }

/* The words of one pair of rows: bf16(even[j]) << 16 | bf16(odd[j]) for the first
 * min(n, 16) values (odd NULL: a padding depth of zeros), zeros after. */
static inline __m512i pair_words16(int64_t n, const char *even, const char *odd, int fmt,
                                   uint16_t *save_even, uint16_t *save_odd) {
    const __m256i hi = bf16_bits16(n, even, fmt, save_even);
    const __m256i lo = odd ? bf16_bits16(n, odd, fmt, save_odd) : _mm256_setzero_si256();
    return _mm512_or_si512(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16),
                           _mm512_cvtepu16_epi32(lo));
}

/* Packing's pairs from rows across the depth (gemm.h): depth k's n values at src + k * stride
 * (elements); for p < (depth + 1) / 2, lane j < round_up(n, width) of the pair's row of panels
 * (lane j in panel j / width, lane j % width, panels panel_stride words apart) = bf16(row 2p
 * [j]) << 16 | bf16(row 2p + 1 [j]), zeros past n or an odd depth; save (if not NULL) at the
 * rows' indices. width is 8 (op(A)'s tile, 8 lanes at a time, each depth a row of the stored
 * matrix apart: prefetched 8 depths ahead) or a multiple of 16 (op(B)'s rows, read in order). */
static void convert_pairs(int64_t depth, int64_t n, const void *src, int64_t stride, int fmt,
                          uint32_t *dst, int width, int64_t panel_stride, uint16_t *save) {
    const int64_t size = element_size(fmt), lanes = (n + width - 1) / width * width;
    for (int64_t k = 0; k < depth; k += 2, dst += width) {
        const char *even = (const char *)src + k * stride * size;
        const char *odd = k + 1 < depth ? even + stride * size : NULL;
        uint16_t *save_even = save ? save + k * stride : NULL;
        uint16_t *save_odd = save && odd ? save_even + stride : NULL;
        if (width == 8 && n == 8) {
            OM_PREFETCH(even + 8 * stride * size);
            OM_PREFETCH(even + 9 * stride * size);
            const __m128i hi = bf16_bits8(even, fmt, save_even);
            const __m128i lo = odd ? bf16_bits8(odd, fmt, save_odd) : _mm_setzero_si128();
            _mm256_storeu_si256((__m256i *)dst, _mm256_or_si256(
                _mm256_slli_epi32(_mm256_cvtepu16_epi32(hi), 16), _mm256_cvtepu16_epi32(lo)));
            continue;
        }
        for (int64_t j = 0; j < lanes; j += 16) {
            const __m512i words = j < n ? pair_words16(
                n - j, even + j * size, odd ? odd + j * size : NULL, fmt,
                save_even ? save_even + j : NULL, save_odd ? save_odd + j : NULL)
                                        : _mm512_setzero_si512();
            uint32_t *out = dst + j / width * panel_stride + j % width;
            if (width == 8)
                _mm256_storeu_si256((__m256i *)out, _mm512_castsi512_si256(words));
            else
                _mm512_storeu_si512(out, words);
        }
    }
}

/* Packing's pairs from runs along the depth (gemm.h): lanes i < rows <= 16 of the panel are
 * the runs at src + i * stride (elements), dst[p * width + i] = bf16(run i [2p]) << 16 |
 * bf16(run i [2p + 1]) for p < (depth + 1) / 2 (a zero past the end) and lanes i < fill, 8 or
 * 16 (the tile's height, or half its width; zeros from rows on); save (if not NULL) at the
 * runs' indices. Per 32 depths: each run's 16
 * words in a register (the 32-bit lanes of its bits with their halves swapped), then
 * transposed, so the runs are read side by side and written once. */
static void convert_run_pairs(int64_t depth, int rows, const void *src, int64_t stride, int fmt,
                              uint32_t *dst, int width, int fill, uint16_t *save) {
    const int64_t size = element_size(fmt);
    for (int64_t k = 0; k < depth; k += 32) {
        const int64_t n = depth - k < 32 ? depth - k : 32, words = (n + 1) / 2;
        __m512 r[16];
        for (int i = 0; i < 16; i++) {
            if (i >= rows) {
                r[i] = _mm512_setzero_ps();
                continue;
            }
            const char *run = (const char *)src + (i * stride + k) * size;
            OM_PREFETCH(run + PREFETCH_DEPTHS * size);
            OM_PREFETCH(run + PREFETCH_DEPTHS * size + 64);
            uint16_t *saved = save ? save + i * stride + k : NULL;
            const __m256i low = bf16_bits16(n, run, fmt, saved);
            const __m256i high = n > 16 ? bf16_bits16(n - 16, run + 16 * size, fmt,
                                                      saved ? saved + 16 : NULL)
                                        : _mm256_setzero_si256();
            r[i] = _mm512_castsi512_ps(_mm512_ror_epi32(
                _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1), 16));
        }
        transpose16(r);
        uint32_t *out = dst + k / 2 * width;
        for (int64_t p = 0; p < words; p++, out += width) {
            if (fill == 16)
                _mm512_storeu_ps(out, r[p]);
            else
                _mm256_storeu_ps((float *)out, _mm512_castps512_ps256(r[p]));
        }
    }
}

const om_gemm_ukernel *om_gemm_ukernel_bf16_avx512bf16(void) {
    static const om_gemm_ukernel u = {MR, NR, kernel, NULL, NULL, convert_pairs,
                                      convert_run_pairs};
    return &u;
}
