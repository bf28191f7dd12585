/* SR4 kernels, AVX2 path: 8 elements per iteration, a translation of sr4_scalar.c that gives
 * the same bits (design note in sr4.h).
 *
 * Step: two VMULPS, a VMINPS/VMAXPS clamp and VCVTPS2DQ (round half to even), as on AVX-512;
 * AVX2 has no 64-bit lane multiply, so the hash multiplies u64 lanes from three 32x32->64
 * products (lo*lo + ((hi*lo + lo*hi) << 32), wrapping). 4 bytes of q (8 nibbles) are spread
 * over 8 int32 lanes by a variable shift and packed back by an OR reduction. The tail runs
 * the scalar reference.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "sr4.h"

static inline __m256i mul64(__m256i a, __m256i b) {
    const __m256i lo = _mm256_mul_epu32(a, b);
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                           _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

static inline __m256i mix4(__m256i z) {
    z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)),
              _mm256_set1_epi64x((long long)OM_SPLITMIX64_M1));
    z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)),
              _mm256_set1_epi64x((long long)OM_SPLITMIX64_M2));
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

static inline __m256i unpack8(uint32_t word, __m256i shifts) {
    const __m256i nib = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)word), shifts),
                                         _mm256_set1_epi32(15));
    return _mm256_sub_epi32(_mm256_xor_si256(nib, _mm256_set1_epi32(8)), _mm256_set1_epi32(8));
}

static inline uint32_t pack8(__m256i q, __m256i shifts) {
    const __m256i t = _mm256_sllv_epi32(_mm256_and_si256(q, _mm256_set1_epi32(15)), shifts);
    __m128i x = _mm_or_si128(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    x = _mm_or_si128(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_or_si128(x, _mm_shuffle_epi32(x, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(x);
}

static inline __m256 ternary8(__m256i q, int32_t theta) {
    const __m256i pos = _mm256_cmpgt_epi32(q, _mm256_set1_epi32(theta - 1));
    const __m256i neg = _mm256_cmpgt_epi32(_mm256_set1_epi32(-theta + 1), q);
    return _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(pos), _mm256_set1_ps(1.0f)),
                        _mm256_and_ps(_mm256_castsi256_ps(neg), _mm256_set1_ps(-1.0f)));
}

static inline __m256i nibble_shifts(void) {
    return _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
}

void om_sr4_step_avx2(uint8_t *q, const float *g, float *w, int64_t start, int64_t n,
                      const om_sr4_step_args *a) {
    const __m256i shifts = nibble_shifts();
    const __m256 s = _mm256_set1_ps(a->s), c256 = _mm256_set1_ps(256.0f);
    const __m256 hi = _mm256_set1_ps(4096.0f), lo = _mm256_set1_ps(-4096.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i key = _mm256_set1_epi64x((long long)a->key);
    const __m256i step8 = _mm256_set1_epi64x(8);
    const __m256i qc = _mm256_set1_epi32(a->q_clamp), nqc = _mm256_set1_epi32(-a->q_clamp);
    const __m256i phase = _mm256_set1_epi32((int)a->phase), m255 = _mm256_set1_epi32(255);
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    const uint64_t idx0 = a->idx_base + (uint64_t)start;
    __m256i idx_lo = _mm256_add_epi64(_mm256_set1_epi64x((long long)idx0),
                                      _mm256_setr_epi64x(0, 1, 2, 3));
    __m256i idx_hi = _mm256_add_epi64(idx_lo, _mm256_set1_epi64x(4));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_loadu_ps(g + i);
        __m256 prop = _mm256_mul_ps(_mm256_mul_ps(_mm256_xor_ps(gv, sign), s), c256);
        prop = _mm256_max_ps(_mm256_min_ps(prop, hi), lo);
        const __m256i fx = _mm256_cvtps_epi32(prop);
        const __m256i k = _mm256_srai_epi32(fx, 8), f = _mm256_and_si256(fx, m255);
        /* The low 32 bits of the 8 hashes, in element order. */
        const __m256i h_lo = _mm256_permutevar8x32_epi32(mix4(_mm256_xor_si256(key, idx_lo)),
                                                         even);
        const __m256i h_hi = _mm256_permutevar8x32_epi32(mix4(_mm256_xor_si256(key, idx_hi)),
                                                         even);
        const __m256i h = _mm256_permute2x128_si256(h_lo, h_hi, 0x20);
        const __m256i u = _mm256_and_si256(_mm256_add_epi32(_mm256_and_si256(h, m255), phase),
                                           m255);
        /* u < f as signed compares: both are in [0, 255]; the bit is 1 (0 - (-1)). */
        const __m256i bit = _mm256_cmpgt_epi32(f, u);
        uint32_t word;
        memcpy(&word, q + i / 2, 4);
        __m256i qv = _mm256_sub_epi32(_mm256_add_epi32(unpack8(word, shifts), k), bit);
        qv = _mm256_max_epi32(_mm256_min_epi32(qv, qc), nqc);
        word = pack8(qv, shifts);
        memcpy(q + i / 2, &word, 4);
        if (w) _mm256_storeu_ps(w + i, ternary8(qv, a->theta));
        idx_lo = _mm256_add_epi64(idx_lo, step8);
        idx_hi = _mm256_add_epi64(idx_hi, step8);
    }
    if (i < n) om_sr4_step_scalar(q + i / 2, g + i, w ? w + i : NULL, start + i, n - i, a);
}

void om_sr4_materialize_avx2(const uint8_t *q, int64_t n, int32_t theta, float *w) {
    const __m256i shifts = nibble_shifts();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t word;
        memcpy(&word, q + i / 2, 4);
        _mm256_storeu_ps(w + i, ternary8(unpack8(word, shifts), theta));
    }
    if (i < n) om_sr4_materialize_scalar(q + i / 2, n - i, theta, w + i);
}

/* One output at a time: its rb = 8 V rows are V independent chains of adds. V is a constant
 * in each call of om_sr4_pairs_avx2, so the loops over it unroll. */
static inline void pairs_rows(const uint8_t *codes, int64_t stride, int64_t nout,
                              const float *T, float *acc, const int V) {
    const int64_t rb = 8 * V;
    __m256 s[8];
    for (int64_t j = 0; j < nout; j++) {
        const uint8_t *c = codes + j * stride;
        float *a = acc + j * rb;
        for (int v = 0; v < V; v++) s[v] = _mm256_load_ps(a + 8 * v);
        for (int p = 0; p < OM_SR4_PB; p++)
            for (int v = 0; v < V; v++)
                s[v] = _mm256_add_ps(s[v], _mm256_load_ps(T + c[p] * rb + 8 * v));
        for (int v = 0; v < V; v++) _mm256_store_ps(a + 8 * v, s[v]);
    }
}

void om_sr4_pairs_avx2(const uint8_t *codes, int64_t stride, int64_t nout, const float *T,
                       float *acc, int64_t rb) {
    if (rb == 16)
        pairs_rows(codes, stride, nout, T, acc, 2);
    else if (rb == 32)
        pairs_rows(codes, stride, nout, T, acc, 4);
    else
        pairs_rows(codes, stride, nout, T, acc, 8);
}

/* 8 floats per iteration into two vectors of 4 double lanes; the tail in order after them. */
double om_sr4_abs_sum_avx2(const float *g, int64_t n) {
    const __m256 mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_and_ps(_mm256_loadu_ps(g + i), mask);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double lane[4];
    _mm256_storeu_pd(lane, _mm256_add_pd(s0, s1));
    double sum = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    for (; i < n; i++) sum += (double)fabsf(g[i]);
    return sum;
}

/* Columns of x gathered 8 rows at a time (rows past `rows` masked to +0), then the 9 sums. */
void om_sr4_table_avx2(const float *x, int64_t rows, int64_t k, int64_t c0, float *T,
                       int64_t rb) {
    const int64_t cols = k - c0 < 2 * OM_SR4_PB ? k - c0 : 2 * OM_SR4_PB;
    const __m256i index = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32((int)k));
    const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (int64_t v = 0; v < rb / 8; v++) {
        const int64_t left = rows - 8 * v;
        const __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(
            _mm256_set1_epi32((int)(left < 8 ? (left > 0 ? left : 0) : 8)),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
        const float *base = x + (left > 0 ? 8 * v * k + c0 : 0);
        for (int p = 0; p < OM_SR4_PB; p++) {
            const __m256 a = 2 * p < cols ?
                _mm256_mask_i32gather_ps(zero, base + 2 * p, index, m, 4) : zero;
            const __m256 b = 2 * p + 1 < cols ?
                _mm256_mask_i32gather_ps(zero, base + 2 * p + 1, index, m, 4) : zero;
            const __m256 na = _mm256_xor_ps(a, sign), nb = _mm256_xor_ps(b, sign);
            float *t = T + p * 9 * rb + 8 * v;
            _mm256_store_ps(t, _mm256_add_ps(zero, zero));
            _mm256_store_ps(t + rb, _mm256_add_ps(zero, b));
            _mm256_store_ps(t + 2 * rb, _mm256_add_ps(zero, nb));
            _mm256_store_ps(t + 3 * rb, _mm256_add_ps(a, zero));
            _mm256_store_ps(t + 4 * rb, _mm256_add_ps(a, b));
            _mm256_store_ps(t + 5 * rb, _mm256_add_ps(a, nb));
            _mm256_store_ps(t + 6 * rb, _mm256_add_ps(na, zero));
            _mm256_store_ps(t + 7 * rb, _mm256_add_ps(na, b));
            _mm256_store_ps(t + 8 * rb, _mm256_add_ps(na, nb));
        }
    }
}

/* 32 bytes of q per iteration: each nibble's code by a 16-entry byte shuffle; the tail runs
 * the scalar reference (its block offsets restart at a multiple of 16, as here). */
void om_sr4_plan_bytes_avx2(const uint8_t *q, int64_t pairs, int32_t theta, uint8_t *codes) {
    uint8_t lo[16], hi[16], block[16];
    om_sr4_code_tables(theta, lo, hi, block);
    const __m256i tlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lo));
    const __m256i thi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hi));
    const __m256i base = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)block));
    const __m256i m15 = _mm256_set1_epi8(15);
    int64_t p = 0;
    for (; p + 32 <= pairs; p += 32) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(q + p));
        const __m256i a = _mm256_shuffle_epi8(tlo, _mm256_and_si256(b, m15));
        const __m256i c = _mm256_shuffle_epi8(thi, _mm256_and_si256(_mm256_srli_epi16(b, 4), m15));
        _mm256_storeu_si256((__m256i *)(codes + p),
                            _mm256_add_epi8(_mm256_add_epi8(a, c), base));
    }
    if (p < pairs) om_sr4_plan_bytes_scalar(q + p, pairs - p, theta, codes + p);
}

OM_PATH_PROBE(sr4, avx2)
