/* Reductions along an axis, softmax and log_softmax (forward and backward), layer norm
 * (forward and backward), and the embedding gradient's row adds: dispatch and threads.
 *
 * Layout: float32, C-contiguous. Reductions over an axis view the tensor as (outer, n, inner)
 * and reduce n; layer norm normalises rows of length n. The caller allocates every output.
 *
 * The order of a reduction along a vector in these kernels (docs/spec/engine.md 4.3; other kernels
 * fix their own: a product adds its K terms in sequence, clipping squares in double in index
 * order, the ternary product by pairs):
 *   To sum x[0..n), cut it into chunks of OM_CHUNK = 65536 elements (the last may be
 *   shorter). Within a chunk, lane j (0..15, OM_LANES = 16) accumulates the elements at
 *   offsets i = j (mod 16) in increasing i, starting at +0.0f; the 16 lanes then combine by a
 *   fixed tree: l[j] += l[j+8] for j < 8, l[j] += l[j+4] for j < 4, l[j] += l[j+2] for j < 2,
 *   then l[0] + l[1]. The chunk results are added in chunk order to a total starting at +0.0f
 *   (so a vector of at most 65536 elements is exactly its 16-lane sum). The order depends
 *   only on n. Plain adds and multiplies, never a fused multiply-add. AVX-512 holds the 16
 *   lanes in one register, AVX2 in two, SSE2 in four, the scalar path in an array; a partial
 *   last vector is a masked load (see reduce_paths.c).
 *   Used by: sum along the innermost axis, the softmax denominator Σexp, the softmax backward
 *   Σ g*y and Σ g, layer norm's Σx and Σ(x - mean)^2, and its backward Σ gh and Σ gh*xh.
 *   The row max of softmax uses the same 16 lanes and tree over the whole row (no chunks),
 *   with max(a, b) = a > b ? a : b; a NaN never enters it and reaches the outputs through Σexp.
 * Over a non-innermost axis (inner > 1), each of the inner outputs is a plain sequential sum
 * over n in increasing order, vectorised across the inner columns; the layer-norm weight and
 * bias gradients are likewise sequential sums over rows in increasing order, vectorised across
 * columns. Softmax over a non-innermost axis follows that rule for its max and sums.
 * Transcendentals: om_exp_scalar and om_log_scalar from vmath (the same bits on every path).
 *
 * Threads (OpenMP, an optimisation only): they split independent outputs — rows, or
 * (outer, block of OM_COL_BLOCK columns) pairs — and a single long vector into its chunks,
 * whose results are then added in chunk order by one thread. No split changes an order.
 *
 * om_index_add_rows_f32 (the embedding gradient) adds rows into the rows they index, in
 * position order, each element a sequential float sum; threads take slices of OM_COL_BLOCK
 * columns, which changes no order.
 */
#include <stddef.h>

#include "isa.h"
#include "reduce.h"

/* Elements per thread below which a kernel runs on one thread. */
#define OM_REDUCE_GRAIN 16384

typedef float (*vsum_fn)(const float *, int64_t);
typedef void (*sum_cols_fn)(const float *, int64_t, int64_t, int64_t, float *);
typedef void (*softmax_row_fn)(const float *, float *, int64_t, int);
typedef void (*softmax_cols_fn)(const float *, float *, int64_t, int64_t, int64_t, int);
typedef void (*softmax_bwd_row_fn)(const float *, const float *, float *, int64_t, int);
typedef void (*softmax_bwd_cols_fn)(const float *, const float *, float *, int64_t, int64_t,
                                    int64_t, int);
typedef void (*layer_norm_row_fn)(const float *, const float *, const float *, float, float *,
                                  int64_t, float *, float *);
typedef void (*layer_norm_bwd_row_fn)(const float *, const float *, float, float, const float *,
                                      float *, int64_t);
typedef void (*layer_norm_dwdb_fn)(const float *, const float *, const float *, const float *,
                                   int64_t, int64_t, int64_t, float *, float *);

static const vsum_fn vsum_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_vsum_f32);
static const sum_cols_fn sum_cols_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_sum_cols_f32);
static const softmax_row_fn softmax_row_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_softmax_row_f32);
static const softmax_cols_fn softmax_cols_table[OM_ISA_COUNT] =
    OM_ISA_TABLE(om_softmax_cols_f32);
static const softmax_bwd_row_fn softmax_bwd_row_table[OM_ISA_COUNT] =
    OM_ISA_TABLE(om_softmax_bwd_row_f32);
static const softmax_bwd_cols_fn softmax_bwd_cols_table[OM_ISA_COUNT] =
    OM_ISA_TABLE(om_softmax_bwd_cols_f32);
static const layer_norm_row_fn layer_norm_row_table[OM_ISA_COUNT] =
    OM_ISA_TABLE(om_layer_norm_row_f32);
static const layer_norm_bwd_row_fn layer_norm_bwd_row_table[OM_ISA_COUNT] =
    OM_ISA_TABLE(om_layer_norm_bwd_row_f32);
static const layer_norm_dwdb_fn layer_norm_dwdb_table[OM_ISA_COUNT] =
    OM_ISA_TABLE(om_layer_norm_dwdb_f32);

static int64_t col_blocks(int64_t inner) { return (inner + OM_COL_BLOCK - 1) / OM_COL_BLOCK; }

static int64_t block_width(int64_t inner, int64_t b) {
    int64_t w = inner - b * OM_COL_BLOCK;
    return w < OM_COL_BLOCK ? w : OM_COL_BLOCK;
}

/* One long vector: chunk sums in parallel, a batch of chunks at a time, then added in order. */
typedef struct {
    vsum_fn vsum;
    const float *x;
    int64_t n, c0;
    float *part;
} chunk_job;

static void chunk_sums(const void *ctx, int64_t begin, int64_t end) {
    const chunk_job *a = ctx;
    for (int64_t c = begin; c < end; c++) {
        const int64_t start = (a->c0 + c) * OM_CHUNK;
        a->part[c] = a->vsum(a->x + start, a->n - start < OM_CHUNK ? a->n - start : OM_CHUNK);
    }
}

static float sum_long_vector(vsum_fn vsum, const float *x, int64_t n, int nthreads) {
    enum { BATCH = 64 };
    float part[BATCH], total = 0.0f;
    int64_t chunks = (n + OM_CHUNK - 1) / OM_CHUNK;
    for (int64_t c0 = 0; c0 < chunks; c0 += BATCH) {
        const int64_t nc = chunks - c0 < BATCH ? chunks - c0 : BATCH;
        const chunk_job a = {vsum, x, n, c0, part};
        om_run_range(om_threads_for(nc, 1, nthreads), nc, chunk_sums, &a);
        for (int64_t c = 0; c < nc; c++) total += part[c];
    }
    return total;
}

/* A call's arguments, for the threads' shares of its items. Over (outer, n, inner) an item is
 * row i (inner 1) or column block i mod nb of outer index i / nb; layer norm's are rows of n,
 * or blocks of OM_COL_BLOCK columns for its weight and bias gradients. g is NULL forward. */
typedef struct {
    const float *x, *g, *w, *b, *mean, *rstd;
    float *y, *dw, *db, *mean_out, *rstd_out;
    int64_t rows, n, inner, nb;
    float eps;
    int is_log;
} reduce_job;

static void sum_items(const void *ctx, int64_t begin, int64_t end) {
    const reduce_job *a = ctx;
    const int64_t n = a->n, inner = a->inner, nb = a->nb;
    for (int64_t i = begin; i < end; i++) {
        const int64_t o = i / nb, b = i % nb;
        if (inner == 1)
            a->y[i] = vsum_table[om_isa](a->x + i * n, n);
        else
            sum_cols_table[om_isa](a->x + o * n * inner + b * OM_COL_BLOCK, n, inner,
                                   block_width(inner, b), a->y + o * inner + b * OM_COL_BLOCK);
    }
}

void om_sum_axis_f32(const float *x, float *out, int64_t outer, int64_t n, int64_t inner,
                     int nthreads) {
    if (inner == 1 && outer == 1) {
        out[0] = sum_long_vector(vsum_table[om_isa], x, n, nthreads);
        return;
    }
    const reduce_job a = {.x = x, .y = out, .n = n, .inner = inner, .nb = col_blocks(inner)};
    om_run_range(om_threads_for(outer * n * inner, OM_REDUCE_GRAIN, nthreads), outer * a.nb,
                 sum_items, &a);
}

/* Softmax forward (y from x) or backward (y = dx from x = y and g). */
static void softmax_items(const void *ctx, int64_t begin, int64_t end) {
    const reduce_job *a = ctx;
    const int64_t n = a->n, inner = a->inner, nb = a->nb;
    for (int64_t i = begin; i < end; i++) {
        const int64_t off = i / nb * n * inner + i % nb * OM_COL_BLOCK;
        const int64_t w = block_width(inner, i % nb);
        const float *x = a->x + off;
        float *y = a->y + off;
        if (!a->g && inner == 1)
            softmax_row_table[om_isa](x, y, n, a->is_log);
        else if (!a->g)
            softmax_cols_table[om_isa](x, y, n, inner, w, a->is_log);
        else if (inner == 1)
            softmax_bwd_row_table[om_isa](x, a->g + off, y, n, a->is_log);
        else
            softmax_bwd_cols_table[om_isa](x, a->g + off, y, n, inner, w, a->is_log);
    }
}

void om_softmax_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, int is_log,
                    int nthreads) {
    const reduce_job a = {.x = x, .y = y, .n = n, .inner = inner, .nb = col_blocks(inner),
                   .is_log = is_log};
    om_run_range(om_threads_for(outer * n * inner, OM_REDUCE_GRAIN, nthreads), outer * a.nb,
                 softmax_items, &a);
}

void om_softmax_backward_f32(const float *y, const float *g, float *dx, int64_t outer, int64_t n,
                             int64_t inner, int is_log, int nthreads) {
    const reduce_job a = {.x = y, .g = g, .y = dx, .n = n, .inner = inner, .nb = col_blocks(inner),
                   .is_log = is_log};
    om_run_range(om_threads_for(outer * n * inner, OM_REDUCE_GRAIN, nthreads), outer * a.nb,
                 softmax_items, &a);
}

/* Layer norm forward or backward, rows [begin, end). */
static void norm_rows(const void *ctx, int64_t begin, int64_t end) {
    const reduce_job *a = ctx;
    const int64_t n = a->n;
    for (int64_t r = begin; r < end; r++) {
        if (a->g)
            layer_norm_bwd_row_table[om_isa](a->g + r * n, a->x + r * n, a->mean[r], a->rstd[r],
                                             a->w, a->y + r * n, n);
        else
            layer_norm_row_table[om_isa](a->x + r * n, a->w, a->b, a->eps, a->y + r * n, n,
                                         a->mean_out + r, a->rstd_out + r);
    }
}

void om_layer_norm_f32(const float *x, const float *w, const float *b, float eps, float *y,
                       float *mean, float *rstd, int64_t rows, int64_t n, int nthreads) {
    const reduce_job a = {.x = x, .w = w, .b = b, .eps = eps, .y = y, .mean_out = mean,
                   .rstd_out = rstd, .n = n};
    om_run_range(om_threads_for(rows * n, OM_REDUCE_GRAIN, nthreads), rows, norm_rows, &a);
}

static void dwdb_blocks(const void *ctx, int64_t begin, int64_t end) {
    const reduce_job *a = ctx;
    for (int64_t b = begin; b < end; b++) {
        const int64_t off = b * OM_COL_BLOCK;
        layer_norm_dwdb_table[om_isa](a->g + off, a->x + off, a->mean, a->rstd, a->rows, a->n,
                                      block_width(a->n, b), a->dw ? a->dw + off : NULL,
                                      a->db ? a->db + off : NULL);
    }
}

void om_layer_norm_backward_f32(const float *g, const float *x, const float *mean,
                                const float *rstd, const float *w, float *dx, float *dw,
                                float *db, int64_t rows, int64_t n, int nthreads) {
    const int t = om_threads_for(rows * n, OM_REDUCE_GRAIN, nthreads);
    const reduce_job a = {.x = x, .g = g, .w = w, .mean = mean, .rstd = rstd, .y = dx, .dw = dw,
                   .db = db, .rows = rows, .n = n};
    /* Weight and bias gradients first, so that dx may overwrite g. */
    if (dw || db) om_run_range(t, col_blocks(n), dwdb_blocks, &a);
    om_run_range(t, rows, norm_rows, &a);
}

/* The embedding gradient's column blocks [begin, end) (index: g's rows, x: the added rows). */
typedef struct {
    const int64_t *index;
    const float *rows;
    float *out;
    int64_t n, width;
} index_job;

static void index_add_blocks(const void *ctx, int64_t begin, int64_t end) {
    const index_job *a = ctx;
    for (int64_t b = begin; b < end; b++) {
        const int64_t j0 = b * OM_COL_BLOCK;
        const int64_t j1 = a->width - j0 < OM_COL_BLOCK ? a->width : j0 + OM_COL_BLOCK;
        for (int64_t p = 0; p < a->n; p++) {
            float *dst = a->out + a->index[p] * a->width;
            const float *src = a->rows + p * a->width;
            for (int64_t j = j0; j < j1; j++) dst[j] += src[j];
        }
    }
}

int om_index_add_rows_f32(const int64_t *index, int64_t n, const float *rows, int64_t width,
                          float *out, int64_t out_rows, int nthreads) {
    for (int64_t p = 0; p < n; p++)
        if (index[p] < 0 || index[p] >= out_rows) return -1;
    const index_job a = {index, rows, out, n, width};
    om_run_range(om_threads_for(n * width, OM_REDUCE_GRAIN, nthreads), col_blocks(width),
                 index_add_blocks, &a);
    return 0;
}

OM_PATH_DISPATCH(reduce, OM_ISA_TABLE)
