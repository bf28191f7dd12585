/* SR4 entry points: initialisation, the sum of |g|, dispatch and threads of the step and the
 * materialisation, and the driver of the ternary product (design note of the state and the
 * step in sr4.h).
 *
 * Threads, step and materialisation: the elements are cut into runs of OM_SR4_CHUNK (even, a
 * constant), each element is computed alone, so any split gives the same bits.
 *
 * Ternary product: out = x . W^T, W (n, k) from packed q. Each output (r, j) is a sequential
 * sum over the nonzero weights of row j in ascending k of +x[r, k] or -x[r, k], so the bits
 * depend on nothing but the data. Layout:
 *   codes  for each output j, the nonzero weights of row j in ascending k, as k (weight +1) or
 *          k + K (weight -1); `starts` cuts each list at multiples of OM_SR4_KB;
 *   P      for a block of OM_SR4_RB rows of x: P[c * RB + r] = x[r0 + r, c] for c < K and
 *          -x[r0 + r, c - K] for c >= K (rows past m are zero), so a weight of either sign is
 *          one vector add of a P row into the RB accumulators of its output;
 *   tiles  of OM_SR4_JB outputs x RB rows, accumulated over the K blocks in order (a block of
 *          P stays in L1 while the JB outputs use it) and stored transposed into out.
 * Threads take tiles of outputs (a static split of independent outputs). No multiply anywhere.
 * The SSE2 entry of every table is the scalar function (the vector paths need 64-bit lane
 * multiplies for the hash; the scalar code compiled for the x86-64 baseline is SSE2 code).
 */
#include "sr4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if OM_HAVE_OPENMP
#include <omp.h>
#endif

enum { OM_SR4_CHUNK = 1 << 14, OM_SR4_JB = 16 };
#define OM_SR4_GRAIN (1 << 15)

#if OM_BUILD_AVX2
#define SR4_AVX2(f) f##_avx2
#else
#define SR4_AVX2(f) NULL
#endif
#if OM_BUILD_AVX512
#define SR4_AVX512(f) f##_avx512
#else
#define SR4_AVX512(f) NULL
#endif
#if OM_BUILD_SSE2
#define SR4_SSE2(f) f##_scalar
#else
#define SR4_SSE2(f) NULL
#endif
#define SR4_TABLE(f) { f##_scalar, SR4_SSE2(f), SR4_AVX2(f), SR4_AVX512(f), NULL }

static const om_sr4_step_fn step_table[OM_ISA_COUNT] = SR4_TABLE(om_sr4_step);
static const om_sr4_materialize_fn mat_table[OM_ISA_COUNT] = SR4_TABLE(om_sr4_materialize);
static const om_sr4_accum_fn accum_table[OM_ISA_COUNT] = SR4_TABLE(om_sr4_accum);

/* A path without its own SR4 functions (NEON) runs the scalar reference. */
#define SR4_PICK(table) ((table)[om_isa] ? (table)[om_isa] : (table)[OM_ISA_SCALAR])

void om_sr4_init(uint8_t *q, int64_t n, uint64_t seed, uint64_t idx_base, int32_t mag) {
    uint64_t x = om_sr4_mix(seed ^ idx_base ^ OM_SR4_C0);
    if (x == 0) x = OM_SR4_C0;  /* xorshift never leaves 0 */
    memset(q, 0, (size_t)((n + 1) / 2));
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const uint64_t r = ((x >> 32) * 1000u) >> 32;
        const int32_t v = r < 335 ? -mag : r < 665 ? 0 : mag;
        q[i >> 1] |= (uint8_t)((v & 15) << ((i & 1) * 4));
    }
}

static double abs_sum_sequential(const float *g, int64_t n) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; i++) acc += (double)fabsf(g[i]);
    return acc;
}

/* The sequential sum is a chain of dependent additions (one per element, latency-bound). Its
 * result differs from the exact sum by at most (n - 1) u S (u = 2^-53, S the exact sum, every
 * term >= 0), and so does a sum over 8 interleaved lanes, which runs at full speed. Both means
 * therefore lie within a relative 2 n u + a few u of the lane sum's; when float32 rounds the
 * whole interval to one value (rounding is monotone), that value is the mean of the sequential
 * sum, and only otherwise (a mean within about 2^-29 n of a float32 tie) the chain runs. */
float om_sr4_abs_mean(const float *g, int64_t n) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) lane[l] += (double)fabsf(g[i + l]);
    double fast = 0.0;
    for (int l = 0; l < 8; l++) fast += lane[l];
    for (; i < n; i++) fast += (double)fabsf(g[i]);
    const double mean = fast / (double)n;
    if (!isfinite(mean)) return (float)mean;
    const double margin = 4.0 * ((double)n + 4.0) * 0x1p-53;
    const float lo = (float)(mean * (1.0 - margin)), hi = (float)(mean * (1.0 + margin));
    if (lo == hi) return lo;
    return (float)(abs_sum_sequential(g, n) / (double)n);
}

#if OM_HAVE_OPENMP
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
#else
#define PARALLEL_FOR (void)nt;
#endif

void om_sr4_step(uint8_t *q, const float *g, float *w, int64_t n, const om_sr4_step_args *a,
                 int nthreads) {
    const om_sr4_step_fn f = SR4_PICK(step_table);
    const int nt = om_threads_for(n, OM_SR4_GRAIN, nthreads);
    const int64_t chunks = (n + OM_SR4_CHUNK - 1) / OM_SR4_CHUNK;
    PARALLEL_FOR
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t o = c * OM_SR4_CHUNK;
        const int64_t len = n - o < OM_SR4_CHUNK ? n - o : OM_SR4_CHUNK;
        f(q + o / 2, g + o, w ? w + o : NULL, o, len, a);
    }
}

void om_sr4_materialize(const uint8_t *q, int64_t n, int32_t theta, float *w, int nthreads) {
    const om_sr4_materialize_fn f = SR4_PICK(mat_table);
    const int nt = om_threads_for(n, OM_SR4_GRAIN, nthreads);
    const int64_t chunks = (n + OM_SR4_CHUNK - 1) / OM_SR4_CHUNK;
    PARALLEL_FOR
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t o = c * OM_SR4_CHUNK;
        f(q + o / 2, n - o < OM_SR4_CHUNK ? n - o : OM_SR4_CHUNK, theta, w + o);
    }
}

/* The nonzero weights of row j as codes, and where each K block starts in them. */
static void build_codes(const uint8_t *q, int64_t j, int64_t k, int32_t theta, int64_t nkb,
                        int32_t *codes, int64_t *starts) {
    int64_t t = j * k;
    for (int64_t b = 0; b < nkb; b++) {
        starts[b] = t;
        const int64_t end = (b + 1) * OM_SR4_KB < k ? (b + 1) * OM_SR4_KB : k;
        /* Branch-free: ternary weights are random, so branches would mispredict; every code
         * is written and only the nonzero ones are kept. */
        for (int64_t c = b * OM_SR4_KB; c < end; c++) {
            const int32_t v = om_sr4_nibble(q, j * k + c);
            const int32_t neg = v <= -theta;
            codes[t] = (int32_t)(c + (neg ? k : 0));
            t += (v >= theta) | neg;
        }
    }
    starts[nkb] = t;
}

int om_sr4_ternary_matmul(int64_t m, int64_t n, int64_t k, const float *x, const uint8_t *q,
                          int32_t theta, float *out, int nthreads) {
    if (m == 0 || n == 0) return 0;
    const int64_t nkb = (k + OM_SR4_KB - 1) / OM_SR4_KB;
    int32_t *codes = malloc((size_t)(n * k + 1) * sizeof(int32_t));
    int64_t *starts = malloc((size_t)(n * (nkb + 1)) * sizeof(int64_t));
    float *P = aligned_alloc(64, (size_t)(2 * k > 0 ? 2 * k : 1) * OM_SR4_RB * sizeof(float));
    if (!codes || !starts || !P) {
        free(codes);
        free(starts);
        free(P);
        return -1;
    }
    const om_sr4_accum_fn accum = SR4_PICK(accum_table);
    const int64_t tiles = (n + OM_SR4_JB - 1) / OM_SR4_JB;
    const int nt = om_threads_for(m * n * (k > 0 ? k : 1), 1 << 20, nthreads);
    (void)nt;
#if OM_HAVE_OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
#if OM_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t j = 0; j < n; j++)
            build_codes(q, j, k, theta, nkb, codes, starts + j * (nkb + 1));
        for (int64_t r0 = 0; r0 < m; r0 += OM_SR4_RB) {
            const int64_t rows = m - r0 < OM_SR4_RB ? m - r0 : OM_SR4_RB;
#if OM_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t c = 0; c < k; c++) {
                float *pos = P + c * OM_SR4_RB, *neg = P + (c + k) * OM_SR4_RB;
                int64_t r = 0;
                for (; r < rows; r++) {
                    pos[r] = x[(r0 + r) * k + c];
                    neg[r] = -pos[r];
                }
                for (; r < OM_SR4_RB; r++) pos[r] = neg[r] = 0.0f;
            }
#if OM_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t tile = 0; tile < tiles; tile++) {
                float acc[OM_SR4_JB][OM_SR4_RB] __attribute__((aligned(64)));
                const int64_t j0 = tile * OM_SR4_JB;
                const int64_t jn = n - j0 < OM_SR4_JB ? n - j0 : OM_SR4_JB;
                memset(acc, 0, sizeof acc);  /* +0: the start of every sum */
                for (int64_t b = 0; b < nkb; b++)
                    for (int64_t jj = 0; jj < jn; jj++) {
                        const int64_t *s = starts + (j0 + jj) * (nkb + 1) + b;
                        accum(codes + s[0], s[1] - s[0], P, acc[jj]);
                    }
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t jj = 0; jj < jn; jj++)
                        out[(r0 + r) * n + j0 + jj] = acc[jj][r];
            }
        }
    }
    free(codes);
    free(starts);
    free(P);
    return 0;
}
