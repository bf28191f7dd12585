/* SR4 kernels, AVX-512 path (F, BW, VL, DQ): 16 elements per iteration, a translation of
 * sr4_scalar.c that gives the same bits (design note in sr4.h).
 *
 * Step: the float part is two VMULPS, a clamp by VMINPS/VMAXPS (no NaN can reach it: the
 * caller refuses non-finite gradients and s is finite) and VCVTPS2DQ (round half to even);
 * the hash runs on two vectors of 8 u64 lanes with VPMULLQ; 8 bytes of q (16 nibbles) are
 * spread over 16 int32 lanes by a variable shift and packed back by narrowing to bytes. The
 * tail is masked; lanes past n hold q = 0, so an odd end keeps its high nibble 0. The sum of
 * |g| of mean|g| adds 8 double lanes (its order cannot show, see sr4.c).
 */
#include <immintrin.h>
#include <string.h>

#include "sr4.h"

static inline __m512i mix8(__m512i z) {
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                           _mm512_set1_epi64((long long)OM_SR4_M1));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                           _mm512_set1_epi64((long long)OM_SR4_M2));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* Nibbles 0..15 of the 64-bit word as sign-extended int32 lanes. */
static inline __m512i unpack16(uint64_t word, __m512i shifts) {
    const __m512i lo = _mm512_set1_epi32((int)(uint32_t)word);
    const __m512i v = _mm512_mask_set1_epi32(lo, 0xFF00, (int)(uint32_t)(word >> 32));
    const __m512i nib = _mm512_and_si512(_mm512_srlv_epi32(v, shifts), _mm512_set1_epi32(15));
    return _mm512_sub_epi32(_mm512_xor_si512(nib, _mm512_set1_epi32(8)), _mm512_set1_epi32(8));
}

/* The low nibbles of 16 int32 lanes as 8 bytes: narrow to bytes, then join byte pairs. */
static inline uint64_t pack16(__m512i q) {
    const __m128i b = _mm512_cvtepi32_epi8(q);
    const __m128i lo = _mm_and_si128(b, _mm_set1_epi16(0x000F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi16(0x00F0));
    const __m128i pairs = _mm_or_si128(lo, hi);
    return (uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(pairs, pairs));
}

static inline __m512 ternary16(__m512i q, int32_t theta) {
    const __mmask16 pos = _mm512_cmpge_epi32_mask(q, _mm512_set1_epi32(theta));
    const __mmask16 neg = _mm512_cmple_epi32_mask(q, _mm512_set1_epi32(-theta));
    __m512 w = _mm512_mask_mov_ps(_mm512_setzero_ps(), pos, _mm512_set1_ps(1.0f));
    return _mm512_mask_mov_ps(w, neg, _mm512_set1_ps(-1.0f));
}

static inline __m512i nibble_shifts(void) {
    return _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
}

/* Little-endian words of up to 8 bytes; a full word is one unaligned move. */
static inline uint64_t load_bytes(const uint8_t *q, int64_t nbytes) {
    uint64_t word = 0;
    if (nbytes == 8) {
        memcpy(&word, q, 8);
        return word;
    }
    for (int64_t b = 0; b < nbytes; b++) word |= (uint64_t)q[b] << (8 * b);
    return word;
}

static inline void store_bytes(uint8_t *q, int64_t nbytes, uint64_t word) {
    if (nbytes == 8) {
        memcpy(q, &word, 8);
        return;
    }
    for (int64_t b = 0; b < nbytes; b++) q[b] = (uint8_t)(word >> (8 * b));
}

void om_sr4_step_avx512(uint8_t *q, const float *g, float *w, int64_t start, int64_t n,
                        const om_sr4_step_args *a) {
    const __m512i shifts = nibble_shifts();
    const __m512 s = _mm512_set1_ps(a->s), c256 = _mm512_set1_ps(256.0f);
    const __m512 hi = _mm512_set1_ps(4096.0f), lo = _mm512_set1_ps(-4096.0f);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512i key = _mm512_set1_epi64((long long)a->key);
    const __m512i step8 = _mm512_set1_epi64(16);
    const __m512i qc = _mm512_set1_epi32(a->q_clamp), nqc = _mm512_set1_epi32(-a->q_clamp);
    const __m512i phase = _mm512_set1_epi32((int)a->phase), m255 = _mm512_set1_epi32(255);
    const __m512i one = _mm512_set1_epi32(1);
    const uint64_t idx0 = a->idx_base + (uint64_t)start;
    __m512i idx_lo = _mm512_add_epi64(_mm512_set1_epi64((long long)idx0),
                                      _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    __m512i idx_hi = _mm512_add_epi64(idx_lo, _mm512_set1_epi64(8));
    for (int64_t i = 0; i < n; i += 16) {
        const int64_t len = n - i < 16 ? n - i : 16;
        const __mmask16 m = (__mmask16)((1u << len) - 1u);
        const int64_t nbytes = (len + 1) / 2;
        const __m512 gv = _mm512_maskz_loadu_ps(m, g + i);
        __m512 prop = _mm512_mul_ps(_mm512_mul_ps(_mm512_xor_ps(gv, sign), s), c256);
        prop = _mm512_max_ps(_mm512_min_ps(prop, hi), lo);
        const __m512i fx = _mm512_cvtps_epi32(prop);
        const __m512i k = _mm512_srai_epi32(fx, 8), f = _mm512_and_si512(fx, m255);
        const __m512i h_lo = mix8(_mm512_xor_si512(key, idx_lo));
        const __m512i h_hi = mix8(_mm512_xor_si512(key, idx_hi));
        const __m512i h = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm512_cvtepi64_epi32(h_lo)), _mm512_cvtepi64_epi32(h_hi), 1);
        const __m512i u = _mm512_and_si512(_mm512_add_epi32(_mm512_and_si512(h, m255), phase),
                                           m255);
        const __mmask16 bit = _mm512_cmplt_epu32_mask(u, f);
        const uint64_t word = load_bytes(q + i / 2, nbytes);
        __m512i qv = _mm512_add_epi32(unpack16(word, shifts), k);
        qv = _mm512_mask_add_epi32(qv, bit, qv, one);
        qv = _mm512_maskz_mov_epi32(m, _mm512_max_epi32(_mm512_min_epi32(qv, qc), nqc));
        store_bytes(q + i / 2, nbytes, pack16(qv));
        if (w) _mm512_mask_storeu_ps(w + i, m, ternary16(qv, a->theta));
        idx_lo = _mm512_add_epi64(idx_lo, step8);
        idx_hi = _mm512_add_epi64(idx_hi, step8);
    }
}

void om_sr4_materialize_avx512(const uint8_t *q, int64_t n, int32_t theta, float *w) {
    const __m512i shifts = nibble_shifts();
    for (int64_t i = 0; i < n; i += 16) {
        const int64_t len = n - i < 16 ? n - i : 16;
        const __mmask16 m = (__mmask16)((1u << len) - 1u);
        const uint64_t word = load_bytes(q + i / 2, (len + 1) / 2);
        _mm512_mask_storeu_ps(w + i, m, ternary16(unpack16(word, shifts), theta));
    }
}

/* Two outputs at a time: 8 independent chains of adds, each table row read as 4 vectors. */
void om_sr4_pairs_avx512(const uint8_t *codes, int64_t stride, int64_t nout, const float *T,
                         float *acc) {
    int64_t j = 0;
    for (; j + 2 <= nout; j += 2) {
        const uint8_t *c0 = codes + j * stride, *c1 = c0 + stride;
        float *a = acc + j * OM_SR4_RB;
        __m512 x0 = _mm512_load_ps(a), x1 = _mm512_load_ps(a + 16);
        __m512 x2 = _mm512_load_ps(a + 32), x3 = _mm512_load_ps(a + 48);
        __m512 y0 = _mm512_load_ps(a + 64), y1 = _mm512_load_ps(a + 80);
        __m512 y2 = _mm512_load_ps(a + 96), y3 = _mm512_load_ps(a + 112);
        for (int p = 0; p < OM_SR4_PB; p++) {
            const float *u = T + c0[p] * OM_SR4_RB, *v = T + c1[p] * OM_SR4_RB;
            x0 = _mm512_add_ps(x0, _mm512_load_ps(u));
            x1 = _mm512_add_ps(x1, _mm512_load_ps(u + 16));
            x2 = _mm512_add_ps(x2, _mm512_load_ps(u + 32));
            x3 = _mm512_add_ps(x3, _mm512_load_ps(u + 48));
            y0 = _mm512_add_ps(y0, _mm512_load_ps(v));
            y1 = _mm512_add_ps(y1, _mm512_load_ps(v + 16));
            y2 = _mm512_add_ps(y2, _mm512_load_ps(v + 32));
            y3 = _mm512_add_ps(y3, _mm512_load_ps(v + 48));
        }
        _mm512_store_ps(a, x0);
        _mm512_store_ps(a + 16, x1);
        _mm512_store_ps(a + 32, x2);
        _mm512_store_ps(a + 48, x3);
        _mm512_store_ps(a + 64, y0);
        _mm512_store_ps(a + 80, y1);
        _mm512_store_ps(a + 96, y2);
        _mm512_store_ps(a + 112, y3);
    }
    for (; j < nout; j++) {
        const uint8_t *c0 = codes + j * stride;
        float *a = acc + j * OM_SR4_RB;
        __m512 x0 = _mm512_load_ps(a), x1 = _mm512_load_ps(a + 16);
        __m512 x2 = _mm512_load_ps(a + 32), x3 = _mm512_load_ps(a + 48);
        for (int p = 0; p < OM_SR4_PB; p++) {
            const float *u = T + c0[p] * OM_SR4_RB;
            x0 = _mm512_add_ps(x0, _mm512_load_ps(u));
            x1 = _mm512_add_ps(x1, _mm512_load_ps(u + 16));
            x2 = _mm512_add_ps(x2, _mm512_load_ps(u + 32));
            x3 = _mm512_add_ps(x3, _mm512_load_ps(u + 48));
        }
        _mm512_store_ps(a, x0);
        _mm512_store_ps(a + 16, x1);
        _mm512_store_ps(a + 32, x2);
        _mm512_store_ps(a + 48, x3);
    }
}

/* 16 floats per iteration into two vectors of 8 double lanes; the tail is masked. */
double om_sr4_abs_sum_avx512(const float *g, int64_t n) {
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = (__mmask16)(n - i < 16 ? (1u << (n - i)) - 1u : 0xFFFFu);
        const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, g + i));
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(
                                   _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

/* Columns of x gathered 16 rows at a time (rows past `rows` masked to +0), then the 9 sums. */
void om_sr4_table_avx512(const float *x, int64_t rows, int64_t k, int64_t c0, float *T) {
    const int64_t cols = k - c0 < 2 * OM_SR4_PB ? k - c0 : 2 * OM_SR4_PB;
    const __m512i index = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                               10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32((int)k));
    const __m512 zero = _mm512_setzero_ps(), sign = _mm512_set1_ps(-0.0f);
    for (int v = 0; v < OM_SR4_RB / 16; v++) {
        const int64_t left = rows - 16 * v;
        const __mmask16 m = left >= 16 ? 0xFFFF : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
        const float *base = x + (m ? 16 * v * k + c0 : 0);
        for (int p = 0; p < OM_SR4_PB; p++) {
            const __m512 a = 2 * p < cols ?
                _mm512_mask_i32gather_ps(zero, m, index, base + 2 * p, 4) : zero;
            const __m512 b = 2 * p + 1 < cols ?
                _mm512_mask_i32gather_ps(zero, m, index, base + 2 * p + 1, 4) : zero;
            const __m512 na = _mm512_xor_ps(a, sign), nb = _mm512_xor_ps(b, sign);
            float *t = T + p * 9 * OM_SR4_RB + 16 * v;
            _mm512_store_ps(t, _mm512_add_ps(zero, zero));
            _mm512_store_ps(t + OM_SR4_RB, _mm512_add_ps(zero, b));
            _mm512_store_ps(t + 2 * OM_SR4_RB, _mm512_add_ps(zero, nb));
            _mm512_store_ps(t + 3 * OM_SR4_RB, _mm512_add_ps(a, zero));
            _mm512_store_ps(t + 4 * OM_SR4_RB, _mm512_add_ps(a, b));
            _mm512_store_ps(t + 5 * OM_SR4_RB, _mm512_add_ps(a, nb));
            _mm512_store_ps(t + 6 * OM_SR4_RB, _mm512_add_ps(na, zero));
            _mm512_store_ps(t + 7 * OM_SR4_RB, _mm512_add_ps(na, b));
            _mm512_store_ps(t + 8 * OM_SR4_RB, _mm512_add_ps(na, nb));
        }
    }
}
