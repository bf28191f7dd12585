/* SR4: the ternary optimizer with a 4-bit state (docs/spec/sr4.txt; "SR4" in
 * docs/spec/clarifications.md).
 *
 * State: one accumulator q in [-q_clamp, q_clamp] per weight, packed two per byte, low nibble
 * first: byte b holds element 2b in bits 0-3 and element 2b+1 in bits 4-7, each nibble the
 * two's-complement 4-bit value. An odd element count leaves the last high nibble 0, and every
 * kernel keeps it 0.
 *
 * The step (section 3), per element i of one parameter, given the per-parameter scalars
 * s = float32(target_step) / (float32(mean|g|) + float32(1e-12)), key and phase:
 *     prop = ((-g[i]) * s) * 256            two float32 multiplies, no fused multiply-add
 *     prop = clamp(prop, -4096, 4096)
 *     fx   = lrintf(prop)                   round half to even (every path converts with the
 *                                           default MXCSR / FPCR rounding: nearest even)
 *     k    = fx >> 8, f = fx & 255          arithmetic shift: floor for negative steps
 *     u    = ((mix(key ^ (idx_base + i)) & 255) + phase) & 255
 *     q    = clamp(q + k + (u < f), -q_clamp, q_clamp)
 * and the materialised weight (section 2) w = q >= theta ? 1 : q <= -theta ? -1 : 0.
 *
 * key and phase fold the dither modes (section 4) into one formula, so the per-element work is
 * one mix whatever the mode. With C0 = SplitMix64's golden-ratio increment and counter = the
 * step count:
 *     Weyl dither:  key = mix(mix(seed ^ C0) ^ (counter >> 8)), phase = (159 * (counter & 255))
 *                   & 255, which is sr_hash(seed, counter >> 8, idx) & 255 + 159 j (mod 256)
 *     i.i.d.:       key = mix(mix(seed ^ C0) ^ counter), phase = 0, i.e. sr_hash(seed,
 *                   counter, idx) & 255
 * mix is the SplitMix64 output function without the golden-ratio add; all of it is unsigned
 * 64-bit wrapping integer arithmetic, so every path, thread count and compiler gives the same q.
 * The vector paths multiply 64-bit lanes with VPMULLQ (AVX-512DQ) or from three 32x32->64
 * products (AVX2, NEON); the SSE2 entry of the dispatch table is the scalar function.
 */
#ifndef OM_SR4_H
#define OM_SR4_H

#include <stdint.h>

#include "isa.h"
#include "splitmix64.h"

#define OM_SR4_C0 OM_SPLITMIX64_GAMMA
#define OM_SR4_WEYL 159u

/* mix above (the name _sr4.pyx and the kernel harness call). */
static inline uint64_t om_sr4_mix(uint64_t z) { return om_splitmix64_mix(z); }

typedef struct {
    float s;             /* target_step / (mean|g| + 1e-12), float32 */
    uint64_t key;        /* see above */
    uint32_t phase;      /* Weyl offset of this step, 0 without dither */
    uint64_t idx_base;   /* global index of the parameter's element 0 */
    int32_t q_clamp;     /* 1..7 */
    int32_t theta;       /* 1..q_clamp */
} om_sr4_step_args;

/* The ternary weight of an accumulator q (section 2). */
static inline float om_sr4_weight(int32_t q, int32_t theta) {
    return q >= theta ? 1.0f : q <= -theta ? -1.0f : 0.0f;
}

/* The scalar reference of one element: returns the new q and writes w (when w != NULL). */
static inline int32_t om_sr4_elem(int32_t q, float g, uint64_t idx, const om_sr4_step_args *a,
                                  float *w) {
    float prop = (-g * a->s) * 256.0f;
    if (prop > 4096.0f) prop = 4096.0f;
    if (prop < -4096.0f) prop = -4096.0f;
    /* |prop| <= 4096: adding and subtracting 1.5 * 2^23 rounds to an integer, half to even,
     * exactly as lrintf in the default rounding mode, without a library call. */
    const int32_t fx = (int32_t)((prop + 12582912.0f) - 12582912.0f);
    const int32_t k = fx >> 8, f = fx & 255;
    const uint32_t u = (uint32_t)((om_sr4_mix(a->key ^ idx) & 255u) + a->phase) & 255u;
    q += k + (u < (uint32_t)f);
    if (q > a->q_clamp) q = a->q_clamp;
    if (q < -a->q_clamp) q = -a->q_clamp;
    if (w) *w = om_sr4_weight(q, a->theta);
    return q;
}

static inline int32_t om_sr4_nibble(const uint8_t *q, int64_t i) {
    const int32_t v = (q[i >> 1] >> ((i & 1) * 4)) & 15;
    return (v ^ 8) - 8;
}

/* The plan's code of a nibble v (0..15, two's complement): 0 for weight 0, 1 for +1, 2 for -1. */
static inline uint8_t om_sr4_nibble_code(int32_t v, int32_t theta) {
    v = (v ^ 8) - 8;
    return (uint8_t)((v >= theta) + 2 * (v <= -theta));
}

/* The plan's lookup tables, the same on every path: by a nibble v of q, the code of the low
 * (lo[v] = 3 a) and of the high (hi[v] = b) weight of a pair, and by p mod PB the block offset
 * block[p mod PB] = (p mod PB) * 9 (PB = 16, one entry per nibble value). */
static inline void om_sr4_code_tables(int32_t theta, uint8_t lo[16], uint8_t hi[16],
                                      uint8_t block[16]) {
    for (int v = 0; v < 16; v++) {
        hi[v] = om_sr4_nibble_code(v, theta);
        lo[v] = (uint8_t)(3 * hi[v]);
        block[v] = (uint8_t)(9 * v);
    }
}

/* Per-path functions. start is the element index of the run (even), n its length; q, g and w
 * point at element `start` (q at byte start / 2). */
typedef void (*om_sr4_step_fn)(uint8_t *q, const float *g, float *w, int64_t start, int64_t n,
                               const om_sr4_step_args *a);
typedef void (*om_sr4_materialize_fn)(const uint8_t *q, int64_t n, int32_t theta, float *w);

/* The ternary product works on pairs of weights (see om_sr4_ternary_matmul): a block of the
 * input is rb rows (16, 32 or 64 = OM_SR4_RB, by the batch size) by OM_SR4_PB pairs of
 * columns, and its table holds, for each pair and each of the 9 weight pairs e = 3 a + b
 * (a, b: 0 for a weight 0, 1 for +1, 2 for -1), the rb sums t_a + t_b, where t is +x, -x or +0:
 *     T[(p * 9 + e) * rb + r]. */
#define OM_SR4_RB 64
#define OM_SR4_PB 16
/* acc[j * rb + r] += T[codes[j * stride + p] * rb + r] for p = 0..PB-1 in order, j < nout. */
typedef void (*om_sr4_pairs_fn)(const uint8_t *codes, int64_t stride, int64_t nout,
                                const float *T, float *acc, int64_t rb);

/* The table of one block: x points at the first of `rows` <= rb rows (row stride k), c0 at
 * the block's first column; columns past k and rows past `rows` read as +0. Each entry is one
 * float add of two of +x, -x (sign flipped) and +0: e = 5 is x[c0 + 2p] + -x[c0 + 2p + 1]. */
typedef void (*om_sr4_table_fn)(const float *x, int64_t rows, int64_t k, int64_t c0, float *T,
                                int64_t rb);

/* The plan of `pairs` whole bytes of q (a row of even length k, codes aligned to a block):
 * codes[p] = (p mod PB) * 9 + 3 a + b, a and b the weight codes of the low and high nibble of
 * q[p] (0 for 0, 1 for +1, 2 for -1). */
typedef void (*om_sr4_plan_fn)(const uint8_t *q, int64_t pairs, int32_t theta, uint8_t *codes);

/* The sum of |g[i]| in double, in any order (om_sr4_abs_mean accepts it only when the order
 * cannot show in its float32 result). */
typedef double (*om_sr4_abs_sum_fn)(const float *g, int64_t n);

#define OM_SR4_DECLARE(isa)                                                                   \
    void om_sr4_step_##isa(uint8_t *q, const float *g, float *w, int64_t start, int64_t n,    \
                           const om_sr4_step_args *a);                                        \
    void om_sr4_materialize_##isa(const uint8_t *q, int64_t n, int32_t theta, float *w);      \
    void om_sr4_pairs_##isa(const uint8_t *codes, int64_t stride, int64_t nout, const float *T,\
                            float *acc, int64_t rb);                                          \
    double om_sr4_abs_sum_##isa(const float *g, int64_t n);                                   \
    void om_sr4_table_##isa(const float *x, int64_t rows, int64_t k, int64_t c0, float *T,     \
                            int64_t rb);                                                      \
    void om_sr4_plan_bytes_##isa(const uint8_t *q, int64_t pairs, int32_t theta, uint8_t *codes);
OM_SR4_DECLARE(scalar)
OM_SR4_DECLARE(avx2)
OM_SR4_DECLARE(avx512)
OM_SR4_DECLARE(neon)

/* -- entry points (sr4.c) -------------------------------------------------------------------- */

/* Section 1: q = {-mag, 0, +mag} with probabilities 335/330/335 per mille, element i from the
 * i-th output of xorshift64 (13, 7, 17) started at mix(seed ^ idx_base ^ C0) (C0 when that is
 * 0): r = ((x >> 32) * 1000) >> 32, q = r < 335 ? -mag : r < 665 ? 0 : mag. Sequential. */
void om_sr4_init(uint8_t *q, int64_t n, uint64_t seed, uint64_t idx_base, int32_t mag);

/* mean|g| of docs/spec/clarifications.md, n > 0: float32(the double sum of |g[i]| for i = 0..n-1 in
 * order, divided by n in double), whatever the path and thread count. Non-finite when g holds
 * an infinity or a NaN. */
float om_sr4_abs_mean(const float *g, int64_t n, int nthreads);

void om_sr4_step(uint8_t *q, const float *g, float *w, int64_t n, const om_sr4_step_args *a,
                 int nthreads);
void om_sr4_materialize(const uint8_t *q, int64_t n, int32_t theta, float *w, int nthreads);

/* The ternary product out (m, n) = x (m, k) . W^T, W (n, k) the ternary weights of packed q,
 * in two parts: a plan of W, built once for each value of q, and the product, which adds,
 * subtracts or skips by the plan and multiplies nothing. Output (r, j) is
 *     acc = +0;  for p = 0, 1, .., ceil(k / 2) - 1:  acc = acc + (t[2p] + t[2p + 1])
 * with t[c] = x[r, c] where W[j, c] = +1, -x[r, c] where -1, and +0 where 0 or c = k: pairs
 * of columns, each pair summed first, the pair sums added in ascending order. The order
 * depends on nothing but k. (acc starts at +0 and so is never -0: adding a pair of zero
 * weights changes nothing, and an infinite input meets no 0 * inf.) */

/* Bytes of the plan: n * ceil(ceil(k / 2) / PB) * PB. */
int64_t om_sr4_ternary_plan_size(int64_t n, int64_t k);
/* codes[j * stride + p] = (p mod PB) * 9 + e of pair p of row j; pairs past the end get e = 0. */
void om_sr4_ternary_plan(const uint8_t *q, int64_t n, int64_t k, int32_t theta, uint8_t *codes,
                         int nthreads);
/* Returns 0, or -1 when scratch memory was not available. */
int om_sr4_ternary_matmul(int64_t m, int64_t n, int64_t k, const float *x, const uint8_t *codes,
                          float *out, int nthreads);

#endif
