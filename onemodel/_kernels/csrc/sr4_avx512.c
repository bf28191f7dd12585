/* SR4 kernels, AVX-512 path (F, BW, VL, DQ): 16 elements per iteration, a translation of
 * sr4_scalar.c that gives the same bits (design note in sr4.h).
 *
 * Step: the float part is two VMULPS, a clamp by VMINPS/VMAXPS (no NaN can reach it: the
 * caller refuses non-finite gradients and s is finite) and VCVTPS2DQ (round half to even);
 * the hash runs on two vectors of 8 u64 lanes with VPMULLQ; 8 bytes of q (16 nibbles) go to
 * 16 int32 lanes and back by shifts and narrowing; the ternary weights come from a 16-entry
 * table by one permute. The tail (fewer than 16 elements) runs the scalar reference. The sum
 * of |g| of mean|g| adds 8 double lanes (its order cannot show, see sr4.c).
 */
#include <immintrin.h>

#include "sr4.h"

static inline __m512i mix8(__m512i z) {
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                           _mm512_set1_epi64((long long)OM_SPLITMIX64_M1));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                           _mm512_set1_epi64((long long)OM_SPLITMIX64_M2));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* Nibbles 0..15 of 8 bytes as sign-extended int32 lanes: each byte twice, widened, its nibble
 * moved to the top of the lane and shifted back arithmetically. */
static inline __m512i unpack16(__m128i bytes) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, bytes));
    const __m512i up = _mm512_setr_epi32(28, 24, 28, 24, 28, 24, 28, 24, 28, 24, 28, 24, 28, 24,
                                         28, 24);
    return _mm512_srai_epi32(_mm512_sllv_epi32(v, up), 28);
}

/* The low nibbles of 16 int32 lanes as 8 bytes: odd lanes shifted up a nibble, each pair of
 * lanes joined in its 64-bit lane, which narrows to its low byte. */
static inline __m128i pack16(__m512i q) {
    const __m512i shifts = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    const __m512i keep = _mm512_setr_epi32(15, 240, 15, 240, 15, 240, 15, 240, 15, 240, 15, 240,
                                           15, 240, 15, 240);
    const __m512i t = _mm512_and_si512(_mm512_sllv_epi32(q, shifts), keep);
    return _mm512_cvtepi64_epi8(_mm512_or_si512(t, _mm512_srli_epi64(t, 32)));
}

/* The ternary weight of q in [-7, 7] from a table of the 15 values, indexed by q + 7. */
static inline __m512 ternary_table(int32_t theta) {
    float t[16];
    for (int v = -7; v <= 8; v++) t[v + 7] = om_sr4_weight(v, theta);
    return _mm512_loadu_ps(t);
}

static inline __m512 ternary16(__m512i q, __m512 table) {
    return _mm512_permutexvar_ps(_mm512_add_epi32(q, _mm512_set1_epi32(7)), table);
}

typedef struct {
    __m512 ns, c256, hi, lo, table;
    __m512i key, qc, nqc, phase, m255, one, evens;
} step_consts;

/* Elements i..i+15 (i even), idx their global indices in two vectors of 8. -g * s is computed
 * as g * -s: the same product, as rounding is symmetric. */
static inline void step16(uint8_t *q, const float *g, float *w, int64_t i, __m512i idx_lo,
                          __m512i idx_hi, const step_consts *c) {
    __m512 prop = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(g + i), c->ns), c->c256);
    prop = _mm512_max_ps(_mm512_min_ps(prop, c->hi), c->lo);
    const __m512i fx = _mm512_cvtps_epi32(prop);
    const __m512i k = _mm512_srai_epi32(fx, 8), f = _mm512_and_si512(fx, c->m255);
    const __m512i h = _mm512_permutex2var_epi32(mix8(_mm512_xor_si512(c->key, idx_lo)), c->evens,
                                                mix8(_mm512_xor_si512(c->key, idx_hi)));
    /* (h & 255) + phase and h + phase agree mod 256 */
    const __m512i u = _mm512_and_si512(_mm512_add_epi32(h, c->phase), c->m255);
    const __mmask16 bit = _mm512_cmplt_epu32_mask(u, f);
    __m128i *qp = (__m128i *)(q + i / 2);
    __m512i qv = _mm512_add_epi32(unpack16(_mm_loadl_epi64(qp)), k);
    qv = _mm512_mask_add_epi32(qv, bit, qv, c->one);
    qv = _mm512_max_epi32(_mm512_min_epi32(qv, c->qc), c->nqc);
    _mm_storel_epi64(qp, pack16(qv));
    if (w) _mm512_storeu_ps(w + i, ternary16(qv, c->table));
}

/* Full runs of 16, then the scalar reference for the last n mod 16 elements. */
void om_sr4_step_avx512(uint8_t *q, const float *g, float *w, int64_t start, int64_t n,
                        const om_sr4_step_args *a) {
    const step_consts c = {
        _mm512_set1_ps(-a->s), _mm512_set1_ps(256.0f), _mm512_set1_ps(4096.0f),
        _mm512_set1_ps(-4096.0f), ternary_table(a->theta), _mm512_set1_epi64((long long)a->key),
        _mm512_set1_epi32(a->q_clamp), _mm512_set1_epi32(-a->q_clamp),
        _mm512_set1_epi32((int)a->phase), _mm512_set1_epi32(255), _mm512_set1_epi32(1),
        /* the low 32 bits of lanes 0..7 of the first hash vector, then of the second */
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)};
    const __m512i step16v = _mm512_set1_epi64(16);
    __m512i idx_lo = _mm512_add_epi64(_mm512_set1_epi64((long long)(a->idx_base + start)),
                                      _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    __m512i idx_hi = _mm512_add_epi64(idx_lo, _mm512_set1_epi64(8));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        step16(q, g, w, i, idx_lo, idx_hi, &c);
        idx_lo = _mm512_add_epi64(idx_lo, step16v);
        idx_hi = _mm512_add_epi64(idx_hi, step16v);
    }
    if (i < n) om_sr4_step_scalar(q + i / 2, g + i, w ? w + i : NULL, start + i, n - i, a);
}

void om_sr4_materialize_avx512(const uint8_t *q, int64_t n, int32_t theta, float *w) {
    const __m512 table = ternary_table(theta);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(w + i, ternary16(unpack16(_mm_loadl_epi64((const __m128i *)(q + i / 2))),
                                          table));
    if (i < n) om_sr4_materialize_scalar(q + i / 2, n - i, theta, w + i);
}

/* V vectors of 16 rows per output (rb = 16 V), two outputs at a time: 2 V independent chains
 * of adds. V is a constant in each call of om_sr4_pairs_avx512, so the loops over it unroll. */
static inline void pairs_rows(const uint8_t *codes, int64_t stride, int64_t nout,
                              const float *T, float *acc, const int V) {
    const int64_t rb = 16 * V;
    __m512 x[4], y[4];
    int64_t j = 0;
    for (; j + 2 <= nout; j += 2) {
        const uint8_t *c0 = codes + j * stride, *c1 = c0 + stride;
        float *a = acc + j * rb;
        for (int v = 0; v < V; v++) {
            x[v] = _mm512_load_ps(a + 16 * v);
            y[v] = _mm512_load_ps(a + rb + 16 * v);
        }
        for (int p = 0; p < OM_SR4_PB; p++) {
            const float *t0 = T + c0[p] * rb, *t1 = T + c1[p] * rb;
            for (int v = 0; v < V; v++) {
                x[v] = _mm512_add_ps(x[v], _mm512_load_ps(t0 + 16 * v));
                y[v] = _mm512_add_ps(y[v], _mm512_load_ps(t1 + 16 * v));
            }
        }
        for (int v = 0; v < V; v++) {
            _mm512_store_ps(a + 16 * v, x[v]);
            _mm512_store_ps(a + rb + 16 * v, y[v]);
        }
    }
    for (; j < nout; j++) {
        const uint8_t *c0 = codes + j * stride;
        float *a = acc + j * rb;
        for (int v = 0; v < V; v++) x[v] = _mm512_load_ps(a + 16 * v);
        for (int p = 0; p < OM_SR4_PB; p++)
            for (int v = 0; v < V; v++)
                x[v] = _mm512_add_ps(x[v], _mm512_load_ps(T + c0[p] * rb + 16 * v));
        for (int v = 0; v < V; v++) _mm512_store_ps(a + 16 * v, x[v]);
    }
}

void om_sr4_pairs_avx512(const uint8_t *codes, int64_t stride, int64_t nout, const float *T,
                         float *acc, int64_t rb) {
    if (rb == 16)
        pairs_rows(codes, stride, nout, T, acc, 1);
    else if (rb == 32)
        pairs_rows(codes, stride, nout, T, acc, 2);
    else
        pairs_rows(codes, stride, nout, T, acc, 4);
}

/* Four streams (the quarters of g, read side by side: more reads in flight than one stream
 * gets from the prefetchers), 16 floats each per iteration into two vectors of 8 double lanes;
 * the rest of g masked after them. */
double om_sr4_abs_sum_avx512(const float *g, int64_t n) {
    __m512d s[8];
    for (int l = 0; l < 8; l++) s[l] = _mm512_setzero_pd();
    const int64_t quarter = n / 64 * 16;
    int64_t i = 0;
    for (; i < quarter; i += 16)
        for (int q = 0; q < 4; q++) {
            const __m512 v = _mm512_abs_ps(_mm512_loadu_ps(g + q * quarter + i));
            s[2 * q] = _mm512_add_pd(s[2 * q], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
            s[2 * q + 1] = _mm512_add_pd(s[2 * q + 1], _mm512_cvtps_pd(_mm256_castpd_ps(
                                             _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
        }
    for (i = 4 * quarter; i < n; i += 16) {
        const __mmask16 m = (__mmask16)(n - i >= 16 ? 0xFFFFu : (1u << (n - i)) - 1u);
        const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, g + i));
        s[0] = _mm512_add_pd(s[0], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s[1] = _mm512_add_pd(s[1], _mm512_cvtps_pd(_mm256_castpd_ps(
                                 _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
    }
    for (int l = 1; l < 8; l++) s[0] = _mm512_add_pd(s[0], s[l]);
    return _mm512_reduce_add_pd(s[0]);
}

/* Columns of x gathered 16 rows at a time (rows past `rows` masked to +0), then the 9 sums. */
void om_sr4_table_avx512(const float *x, int64_t rows, int64_t k, int64_t c0, float *T,
                         int64_t rb) {
    const int64_t cols = k - c0 < 2 * OM_SR4_PB ? k - c0 : 2 * OM_SR4_PB;
    const __m512i index = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                                               10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32((int)k));
    const __m512 zero = _mm512_setzero_ps(), sign = _mm512_set1_ps(-0.0f);
    for (int64_t v = 0; v < rb / 16; v++) {
        const int64_t left = rows - 16 * v;
        const __mmask16 m = left >= 16 ? 0xFFFF : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
        const float *base = x + (m ? 16 * v * k + c0 : 0);
        for (int p = 0; p < OM_SR4_PB; p++) {
            const __m512 a = 2 * p < cols ?
                _mm512_mask_i32gather_ps(zero, m, index, base + 2 * p, 4) : zero;
            const __m512 b = 2 * p + 1 < cols ?
                _mm512_mask_i32gather_ps(zero, m, index, base + 2 * p + 1, 4) : zero;
            const __m512 na = _mm512_xor_ps(a, sign), nb = _mm512_xor_ps(b, sign);
            float *t = T + p * 9 * rb + 16 * v;
            _mm512_store_ps(t, _mm512_add_ps(zero, zero));
            _mm512_store_ps(t + rb, _mm512_add_ps(zero, b));
            _mm512_store_ps(t + 2 * rb, _mm512_add_ps(zero, nb));
            _mm512_store_ps(t + 3 * rb, _mm512_add_ps(a, zero));
            _mm512_store_ps(t + 4 * rb, _mm512_add_ps(a, b));
            _mm512_store_ps(t + 5 * rb, _mm512_add_ps(a, nb));
            _mm512_store_ps(t + 6 * rb, _mm512_add_ps(na, zero));
            _mm512_store_ps(t + 7 * rb, _mm512_add_ps(na, b));
            _mm512_store_ps(t + 8 * rb, _mm512_add_ps(na, nb));
        }
    }
}

/* 64 bytes of q per iteration: each nibble's code by a 16-entry byte shuffle; the tail masked. */
void om_sr4_plan_bytes_avx512(const uint8_t *q, int64_t pairs, int32_t theta, uint8_t *codes) {
    uint8_t lo[16], hi[16], block[16];
    om_sr4_code_tables(theta, lo, hi, block);
    const __m512i tlo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)lo));
    const __m512i thi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)hi));
    const __m512i base = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)block));
    const __m512i m15 = _mm512_set1_epi8(15);
    for (int64_t p = 0; p < pairs; p += 64) {
        const __mmask64 m = pairs - p >= 64 ? ~0ULL : (1ULL << (pairs - p)) - 1;
        const __m512i b = _mm512_maskz_loadu_epi8(m, q + p);
        const __m512i a = _mm512_shuffle_epi8(tlo, _mm512_and_si512(b, m15));
        const __m512i c = _mm512_shuffle_epi8(thi, _mm512_and_si512(_mm512_srli_epi16(b, 4), m15));
        _mm512_mask_storeu_epi8(codes + p, m, _mm512_add_epi8(_mm512_add_epi8(a, c), base));
    }
}

OM_PATH_PROBE(sr4, avx512)
