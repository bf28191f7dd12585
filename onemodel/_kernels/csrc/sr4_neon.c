/* SR4 kernels, NEON path (aarch64): 4 elements per iteration, a translation of sr4_scalar.c
 * that gives the same bits (design note in sr4.h).
 *
 * Step: two FMUL (no fused multiply-add), an FMIN/FMAX clamp (no NaN can reach it: the caller
 * refuses non-finite gradients) and FCVTNS (round half to even); NEON has no 64-bit lane
 * multiply, so the hash multiplies u64 lanes from three 32x32->64 products (lo*lo +
 * ((hi*lo + lo*hi) << 32), wrapping), as the AVX2 path. Two bytes of q (4 nibbles) go to and
 * from int32 lanes through a small array. The tail runs the scalar reference. Pair sums of the
 * ternary product: rb / 4 vectors of 4 rows per output. The sum of |g| adds 2 double lanes (its
 * order cannot show, see sr4.c).
 */
#include <arm_neon.h>
#include <math.h>

#include "sr4.h"

static inline uint64x2_t mul64(uint64x2_t a, uint64_t b) {
    const uint32x2_t a_lo = vmovn_u64(a), a_hi = vshrn_n_u64(a, 32);
    const uint32x2_t b_lo = vdup_n_u32((uint32_t)b), b_hi = vdup_n_u32((uint32_t)(b >> 32));
    const uint64x2_t cross = vaddq_u64(vmull_u32(a_hi, b_lo), vmull_u32(a_lo, b_hi));
    return vaddq_u64(vmull_u32(a_lo, b_lo), vshlq_n_u64(cross, 32));
}

static inline uint64x2_t mix2(uint64x2_t z) {
    z = mul64(veorq_u64(z, vshrq_n_u64(z, 30)), OM_SPLITMIX64_M1);
    z = mul64(veorq_u64(z, vshrq_n_u64(z, 27)), OM_SPLITMIX64_M2);
    return veorq_u64(z, vshrq_n_u64(z, 31));
}

static inline float32x4_t ternary4(int32x4_t q, int32_t theta) {
    const uint32x4_t pos = vcgeq_s32(q, vdupq_n_s32(theta));
    const uint32x4_t neg = vcleq_s32(q, vdupq_n_s32(-theta));
    const float32x4_t w = vbslq_f32(pos, vdupq_n_f32(1.0f), vdupq_n_f32(0.0f));
    return vbslq_f32(neg, vdupq_n_f32(-1.0f), w);
}

static inline int32x4_t unpack4(const uint8_t *q) {
    const int32_t v[4] = {om_sr4_nibble(q, 0), om_sr4_nibble(q, 1), om_sr4_nibble(q, 2),
                          om_sr4_nibble(q, 3)};
    return vld1q_s32(v);
}

void om_sr4_step_neon(uint8_t *q, const float *g, float *w, int64_t start, int64_t n,
                      const om_sr4_step_args *a) {
    const float32x4_t s = vdupq_n_f32(a->s), c256 = vdupq_n_f32(256.0f);
    const float32x4_t hi = vdupq_n_f32(4096.0f), lo = vdupq_n_f32(-4096.0f);
    const uint64x2_t key = vdupq_n_u64(a->key);
    const int32x4_t qc = vdupq_n_s32(a->q_clamp), nqc = vdupq_n_s32(-a->q_clamp);
    const uint32x4_t m255 = vdupq_n_u32(255), phase = vdupq_n_u32(a->phase);
    const uint64_t idx0 = a->idx_base + (uint64_t)start;
    const uint64_t first[2] = {0, 1}, third[2] = {2, 3};
    uint64x2_t idx_lo = vaddq_u64(vdupq_n_u64(idx0), vld1q_u64(first));
    uint64x2_t idx_hi = vaddq_u64(vdupq_n_u64(idx0), vld1q_u64(third));
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t prop = vmulq_f32(vmulq_f32(vnegq_f32(vld1q_f32(g + i)), s), c256);
        prop = vmaxq_f32(vminq_f32(prop, hi), lo);
        const int32x4_t fx = vcvtnq_s32_f32(prop);
        const int32x4_t k = vshrq_n_s32(fx, 8);
        const uint32x4_t f = vandq_u32(vreinterpretq_u32_s32(fx), m255);
        const uint32x2_t h_lo = vmovn_u64(mix2(veorq_u64(key, idx_lo)));
        const uint32x2_t h_hi = vmovn_u64(mix2(veorq_u64(key, idx_hi)));
        const uint32x4_t u = vandq_u32(vaddq_u32(vandq_u32(vcombine_u32(h_lo, h_hi), m255),
                                                 phase), m255);
        /* u < f is all ones, that is -1: subtracting the mask adds the rounding bit. */
        int32x4_t qv = vaddq_s32(unpack4(q + i / 2), k);
        qv = vsubq_s32(qv, vreinterpretq_s32_u32(vcltq_u32(u, f)));
        qv = vmaxq_s32(vminq_s32(qv, qc), nqc);
        int32_t out[4];
        vst1q_s32(out, qv);
        q[i / 2] = (uint8_t)((out[0] & 15) | ((out[1] & 15) << 4));
        q[i / 2 + 1] = (uint8_t)((out[2] & 15) | ((out[3] & 15) << 4));
        if (w) vst1q_f32(w + i, ternary4(qv, a->theta));
        idx_lo = vaddq_u64(idx_lo, vdupq_n_u64(4));
        idx_hi = vaddq_u64(idx_hi, vdupq_n_u64(4));
    }
    if (i < n) om_sr4_step_scalar(q + i / 2, g + i, w ? w + i : NULL, start + i, n - i, a);
}

void om_sr4_materialize_neon(const uint8_t *q, int64_t n, int32_t theta, float *w) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(w + i, ternary4(unpack4(q + i / 2), theta));
    if (i < n) om_sr4_materialize_scalar(q + i / 2, n - i, theta, w + i);
}

void om_sr4_pairs_neon(const uint8_t *codes, int64_t stride, int64_t nout, const float *T,
                       float *acc, int64_t rb) {
    const int64_t V = rb / 4;
    for (int64_t j = 0; j < nout; j++) {
        const uint8_t *c = codes + j * stride;
        float *a = acc + j * rb;
        float32x4_t s[OM_SR4_RB / 4];
        for (int64_t v = 0; v < V; v++) s[v] = vld1q_f32(a + 4 * v);
        for (int p = 0; p < OM_SR4_PB; p++) {
            const float *row = T + c[p] * rb;
            for (int64_t v = 0; v < V; v++) s[v] = vaddq_f32(s[v], vld1q_f32(row + 4 * v));
        }
        for (int64_t v = 0; v < V; v++) vst1q_f32(a + 4 * v, s[v]);
    }
}

double om_sr4_abs_sum_neon(const float *g, int64_t n) {
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vabsq_f32(vld1q_f32(g + i));
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(v));
    }
    const float64x2_t s = vaddq_f64(s0, s1);
    double sum = vgetq_lane_f64(s, 0) + vgetq_lane_f64(s, 1);
    for (; i < n; i++) sum += (double)fabsf(g[i]);
    return sum;
}

/* The scalar reference: its loops over the rows are plain enough for the compiler's NEON. */
void om_sr4_table_neon(const float *x, int64_t rows, int64_t k, int64_t c0, float *T,
                       int64_t rb) {
    om_sr4_table_scalar(x, rows, k, c0, T, rb);
}

/* 16 bytes of q per iteration: each nibble's code by a 16-entry table lookup (TBL); the tail
 * runs the scalar reference (its block offsets restart at a multiple of 16, as here). */
void om_sr4_plan_bytes_neon(const uint8_t *q, int64_t pairs, int32_t theta, uint8_t *codes) {
    uint8_t lo[16], hi[16], block[16];
    om_sr4_code_tables(theta, lo, hi, block);
    const uint8x16_t tlo = vld1q_u8(lo), thi = vld1q_u8(hi), base = vld1q_u8(block);
    int64_t p = 0;
    for (; p + 16 <= pairs; p += 16) {
        const uint8x16_t b = vld1q_u8(q + p);
        const uint8x16_t a = vqtbl1q_u8(tlo, vandq_u8(b, vdupq_n_u8(15)));
        const uint8x16_t c = vqtbl1q_u8(thi, vshrq_n_u8(b, 4));
        vst1q_u8(codes + p, vaddq_u8(vaddq_u8(a, c), base));
    }
    if (p < pairs) om_sr4_plan_bytes_scalar(q + p, pairs - p, theta, codes + p);
}

OM_PATH_PROBE(sr4, neon)
