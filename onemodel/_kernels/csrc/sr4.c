/* SR4 entry points: initialisation, the sum of |g|, dispatch and threads of the step and the
 * materialisation, and the driver of the ternary product (design note of the state and the
 * step in sr4.h).
 *
 * Threads, step and materialisation: the elements are cut into runs of OM_SR4_CHUNK (even, a
 * constant), each element is computed alone, so any split gives the same bits.
 *
 * Ternary product (order in sr4.h): the plan holds, for each output j, one byte per pair of
 * columns: the pair's index in its block of PB pairs times 9 plus its weight pair e. The
 * product takes blocks of rb rows of x; for each block of PB pairs it builds the table of the
 * 9 pair sums of every pair (sr4.h, one per path: the vector paths gather the columns of x),
 * 36 KiB that stay in L1, and then every output adds one table row per pair: ceil(k / 2)
 * vector adds per output for rb rows, where a float product makes k fused multiply-adds. The
 * plan pads each row to whole blocks with pairs of zero weights (+0 entries, which change no
 * sum), so the inner loop has a fixed length. The accumulators of a row block (rb per output)
 * stay in a scratch buffer between blocks of pairs, and go to out transposed at the end of the
 * row block.
 * Threads split the outputs into contiguous ranges (independent sums); each thread builds its
 * own tables (a small cost next to its adds), so threads never wait for one another.
 * The SSE2 entry of every table is the scalar function (isa.h).
 */
#include "sr4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { OM_SR4_CHUNK = 1 << 14 };
#define OM_SR4_GRAIN (1 << 15)

static const om_sr4_step_fn step_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_sr4_step);
static const om_sr4_materialize_fn mat_table[OM_ISA_COUNT] =
    OM_ISA_TABLE_SCALAR_SSE2(om_sr4_materialize);
static const om_sr4_pairs_fn pairs_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_sr4_pairs);
static const om_sr4_abs_sum_fn abs_sum_table[OM_ISA_COUNT] =
    OM_ISA_TABLE_SCALAR_SSE2(om_sr4_abs_sum);
static const om_sr4_table_fn table_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_sr4_table);
static const om_sr4_plan_fn plan_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_sr4_plan_bytes);

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

/* A call's arguments, for the threads' shares of its parts, chunks or outputs. */
typedef struct {
    const float *g, *x;
    const uint8_t *q_in, *codes;
    uint8_t *q, *plan;
    float *w, *out;
    double *part;
    const om_sr4_step_args *step;
    int64_t m, n, k, parts, rb;
    int32_t theta;
} sr4_job;

static void abs_sum_parts(const void *ctx, int64_t begin, int64_t end) {
    const sr4_job *a = ctx;
    for (int64_t c = begin; c < end; c++) {
        const om_range r = om_share(a->n, (int)c, (int)a->parts);
        a->part[c] = abs_sum_table[om_isa](a->g + r.begin, r.end - r.begin);
    }
}

/* The sequential sum is a chain of dependent additions (one per element, latency-bound). Its
 * result differs from the exact sum by at most (n - 1) u S (u = 2^-53, S the exact sum, every
 * term >= 0), and so does a sum in any other order: the vector paths' lanes and streams, and
 * one part per thread, the parts added in order. Both means therefore lie within a relative
 * 2 n u + a few u of the fast sum's; when float32 rounds the whole interval to one value
 * (rounding is monotone), that value is the mean of the sequential sum, and only otherwise (a
 * mean within about 2^-29 n of a float32 tie) the chain runs. So the result never depends on
 * the path or the thread count. */
float om_sr4_abs_mean(const float *g, int64_t n, int nthreads) {
    enum { MAX_PARTS = 64 };
    int nt = om_threads_for(n, OM_SR4_GRAIN, nthreads);
    if (nt > MAX_PARTS) nt = MAX_PARTS;
    double part[MAX_PARTS], fast = 0.0;
    const sr4_job a = {.g = g, .part = part, .n = n, .parts = nt};
    om_run_range(nt, nt, abs_sum_parts, &a);
    for (int c = 0; c < nt; c++) fast += part[c];
    const double mean = fast / (double)n;
    if (!isfinite(mean)) return (float)mean;
    const double margin = 4.0 * ((double)n + 4.0) * 0x1p-53;
    const float lo = (float)(mean * (1.0 - margin)), hi = (float)(mean * (1.0 + margin));
    if (lo == hi) return lo;
    return (float)(abs_sum_sequential(g, n) / (double)n);
}

/* The step (step set) or the materialisation of the chunks [begin, end). */
static void sr4_chunks(const void *ctx, int64_t begin, int64_t end) {
    const sr4_job *a = ctx;
    for (int64_t c = begin; c < end; c++) {
        const int64_t o = c * OM_SR4_CHUNK;
        const int64_t len = a->n - o < OM_SR4_CHUNK ? a->n - o : OM_SR4_CHUNK;
        if (a->step)
            step_table[om_isa](a->q + o / 2, a->g + o, a->w ? a->w + o : NULL, o, len, a->step);
        else
            mat_table[om_isa](a->q_in + o / 2, len, a->theta, a->w + o);
    }
}

void om_sr4_step(uint8_t *q, const float *g, float *w, int64_t n, const om_sr4_step_args *a,
                 int nthreads) {
    const sr4_job job = {.q = q, .g = g, .w = w, .n = n, .step = a};
    om_run_range(om_threads_for(n, OM_SR4_GRAIN, nthreads), (n + OM_SR4_CHUNK - 1) / OM_SR4_CHUNK,
                 sr4_chunks, &job);
}

void om_sr4_materialize(const uint8_t *q, int64_t n, int32_t theta, float *w, int nthreads) {
    const sr4_job a = {.q_in = q, .n = n, .theta = theta, .w = w};
    om_run_range(om_threads_for(n, OM_SR4_GRAIN, nthreads), (n + OM_SR4_CHUNK - 1) / OM_SR4_CHUNK,
                 sr4_chunks, &a);
}

static int64_t pair_blocks(int64_t k) {
    return ((k + 1) / 2 + OM_SR4_PB - 1) / OM_SR4_PB;
}

int64_t om_sr4_ternary_plan_size(int64_t n, int64_t k) {
    return n * pair_blocks(k) * OM_SR4_PB;
}

static inline int32_t weight_code(const uint8_t *q, int64_t i, int32_t theta) {
    return om_sr4_nibble_code((q[i >> 1] >> ((i & 1) * 4)) & 15, theta);
}

static void plan_outputs(const void *ctx, int64_t begin, int64_t end) {
    const sr4_job *a = ctx;
    const uint8_t *q = a->q_in;
    const int32_t theta = a->theta;
    const int64_t k = a->k, stride = pair_blocks(k) * OM_SR4_PB, pairs = (k + 1) / 2;
    for (int64_t j = begin; j < end; j++) {
        uint8_t *c = a->plan + j * stride;
        int64_t p = 0;
        if (k % 2 == 0) {  /* every pair is one byte of q */
            plan_table[om_isa](q + j * k / 2, pairs, theta, c);
            p = pairs;
        } else {
            for (const int64_t row = j * k; p < pairs; p++) {
                int32_t e = 3 * weight_code(q, row + 2 * p, theta);
                if (2 * p + 1 < k) e += weight_code(q, row + 2 * p + 1, theta);
                c[p] = (uint8_t)((p % OM_SR4_PB) * 9 + e);
            }
        }
        for (; p < stride; p++) c[p] = (uint8_t)((p % OM_SR4_PB) * 9);
    }
}

void om_sr4_ternary_plan(const uint8_t *q, int64_t n, int64_t k, int32_t theta, uint8_t *codes,
                         int nthreads) {
    const sr4_job a = {.q_in = q, .n = n, .k = k, .theta = theta, .plan = codes};
    om_run_range(om_threads_for(n * k, OM_SR4_GRAIN, nthreads), n, plan_outputs, &a);
}

/* Thread `rank` of `size`'s share of the outputs, with its own tables and accumulators. */
static int matmul_share(const void *ctx, int rank, int size) {
    const sr4_job *a = ctx;
    const int64_t m = a->m, n = a->n, k = a->k, rb = a->rb;
    const int64_t nblocks = pair_blocks(k), stride = nblocks * OM_SR4_PB;
    /* The gathers index rows with 32-bit offsets; any path gives the same table. */
    const om_sr4_table_fn table_of = k < (1 << 26) ? table_table[om_isa] : om_sr4_table_scalar;
    const om_range share = om_share(n, rank, size);
    const int64_t j0 = share.begin, nj = share.end - share.begin;
    float *out = a->out;
    const size_t table = sizeof(float) * OM_SR4_PB * 9 * OM_SR4_RB;
    float *T = om_aligned_alloc(table);
    float *acc = om_aligned_alloc(sizeof(float) * (size_t)(nj > 0 ? nj : 1) * rb);
    const int failed = !T || !acc;
    for (int64_t r0 = 0; r0 < m && !failed && nj > 0; r0 += rb) {
        const int64_t rows = m - r0 < rb ? m - r0 : rb;
        memset(acc, 0, sizeof(float) * (size_t)nj * rb);  /* +0 starts each sum */
        for (int64_t b = 0; b < nblocks; b++) {
            table_of(a->x + r0 * k, rows, k, b * 2 * OM_SR4_PB, T, rb);
            pairs_table[om_isa](a->codes + j0 * stride + b * OM_SR4_PB, stride, nj, T, acc, rb);
        }
        /* Transposed by tiles of 16 outputs, whose accumulators stay in L1. */
        for (int64_t jt = 0; jt < nj; jt += 16)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = jt; j < nj && j < jt + 16; j++)
                    out[(r0 + r) * n + j0 + j] = acc[j * rb + r];
    }
    om_aligned_free(T);
    om_aligned_free(acc);
    return failed;
}

int om_sr4_ternary_matmul(int64_t m, int64_t n, int64_t k, const float *x, const uint8_t *codes,
                          float *out, int nthreads) {
    if (m == 0 || n == 0) return 0;
    /* Rows per block: a small batch pays for 16 or 32 rows, not 64 (the bits do not depend on
     * it: each output is its own sum). */
    const sr4_job a = {.x = x, .codes = codes, .out = out, .m = m, .n = n, .k = k,
                       .rb = m <= 16 ? 16 : m <= 32 ? 32 : OM_SR4_RB};
    return om_run_team(om_threads_for(m * n * (k > 0 ? k : 1), 1 << 20, nthreads), matmul_share,
                       &a) ? -1 : 0;
}

OM_PATH_DISPATCH(sr4, OM_ISA_TABLE_SCALAR_SSE2)
