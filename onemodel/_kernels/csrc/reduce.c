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
 *   last vector is a masked load (see reduce_impl.h).
 *   Used by: sum along the innermost axis, the softmax denominator Σexp, the softmax backward
 *   Σ g*y and Σ g, layer norm's Σx and Σ(x - mean)^2, and its backward Σ gh and Σ gh*xh.
 *   The row max of softmax uses the same 16 lanes and tree over the whole row (no chunks),
 *   with max(a, b) = a > b ? a : b; a NaN never enters it and reaches the outputs through Σexp.
 * Over a non-innermost axis (inner > 1), each of the inner outputs is a plain sequential sum
 * over n in increasing order, vectorised across the inner columns; the layer-norm weight and
 * bias gradients are likewise sequential sums over rows in increasing order, vectorised across
 * columns. Softmax over a non-innermost axis follows that rule for its max and sums.
 * Transcendentals: om_expf and om_logf from vmath (the same bits on every path).
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
static float sum_long_vector(vsum_fn vsum, const float *x, int64_t n, int nthreads) {
    enum { BATCH = 64 };
    float part[BATCH], total = 0.0f;
    int64_t chunks = (n + OM_CHUNK - 1) / OM_CHUNK;
    for (int64_t c0 = 0; c0 < chunks; c0 += BATCH) {
        int64_t nc = chunks - c0 < BATCH ? chunks - c0 : BATCH;
        int t = om_threads_for(nc, 1, nthreads);
        int64_t c;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
        for (c = 0; c < nc; c++) {
            int64_t start = (c0 + c) * OM_CHUNK;
            part[c] = vsum(x + start, n - start < OM_CHUNK ? n - start : OM_CHUNK);
        }
        for (c = 0; c < nc; c++) total += part[c];
    }
    return total;
}

void om_sum_axis_f32(const float *x, float *out, int64_t outer, int64_t n, int64_t inner,
                     int nthreads) {
    if (inner == 1) {
        vsum_fn vsum = vsum_table[om_isa];
        if (outer == 1) {
            out[0] = sum_long_vector(vsum, x, n, nthreads);
            return;
        }
        int t = om_threads_for(outer * n, OM_REDUCE_GRAIN, nthreads);
        int64_t o;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
        for (o = 0; o < outer; o++) out[o] = vsum(x + o * n, n);
        return;
    }
    sum_cols_fn sum_cols = sum_cols_table[om_isa];
    int64_t nb = col_blocks(inner);
    int t = om_threads_for(outer * n * inner, OM_REDUCE_GRAIN, nthreads);
    int64_t item;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (item = 0; item < outer * nb; item++) {
        int64_t o = item / nb, b = item % nb;
        sum_cols(x + o * n * inner + b * OM_COL_BLOCK, n, inner, block_width(inner, b),
                 out + o * inner + b * OM_COL_BLOCK);
    }
}

void om_softmax_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, int is_log,
                    int nthreads) {
    int t = om_threads_for(outer * n * inner, OM_REDUCE_GRAIN, nthreads);
    if (inner == 1) {
        softmax_row_fn row = softmax_row_table[om_isa];
        int64_t o;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
        for (o = 0; o < outer; o++) row(x + o * n, y + o * n, n, is_log);
        return;
    }
    softmax_cols_fn cols = softmax_cols_table[om_isa];
    int64_t nb = col_blocks(inner);
    int64_t item;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (item = 0; item < outer * nb; item++) {
        int64_t off = item / nb * n * inner + item % nb * OM_COL_BLOCK;
        cols(x + off, y + off, n, inner, block_width(inner, item % nb), is_log);
    }
}

void om_softmax_backward_f32(const float *y, const float *g, float *dx, int64_t outer, int64_t n,
                             int64_t inner, int is_log, int nthreads) {
    int t = om_threads_for(outer * n * inner, OM_REDUCE_GRAIN, nthreads);
    if (inner == 1) {
        softmax_bwd_row_fn row = softmax_bwd_row_table[om_isa];
        int64_t o;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
        for (o = 0; o < outer; o++) row(y + o * n, g + o * n, dx + o * n, n, is_log);
        return;
    }
    softmax_bwd_cols_fn cols = softmax_bwd_cols_table[om_isa];
    int64_t nb = col_blocks(inner);
    int64_t item;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (item = 0; item < outer * nb; item++) {
        int64_t off = item / nb * n * inner + item % nb * OM_COL_BLOCK;
        cols(y + off, g + off, dx + off, n, inner, block_width(inner, item % nb), is_log);
    }
}

void om_layer_norm_f32(const float *x, const float *w, const float *b, float eps, float *y,
                       float *mean, float *rstd, int64_t rows, int64_t n, int nthreads) {
    layer_norm_row_fn row = layer_norm_row_table[om_isa];
    int t = om_threads_for(rows * n, OM_REDUCE_GRAIN, nthreads);
    int64_t r;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (r = 0; r < rows; r++)
        row(x + r * n, w, b, eps, y + r * n, n, mean + r, rstd + r);
}

void om_layer_norm_backward_f32(const float *g, const float *x, const float *mean,
                                const float *rstd, const float *w, float *dx, float *dw,
                                float *db, int64_t rows, int64_t n, int nthreads) {
    int t = om_threads_for(rows * n, OM_REDUCE_GRAIN, nthreads);
    /* Weight and bias gradients first, so that dx may overwrite g. */
    if (dw || db) {
        layer_norm_dwdb_fn dwdb = layer_norm_dwdb_table[om_isa];
        int64_t nb = col_blocks(n);
        int64_t b;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
        for (b = 0; b < nb; b++) {
            int64_t off = b * OM_COL_BLOCK;
            dwdb(g + off, x + off, mean, rstd, rows, n, block_width(n, b), dw ? dw + off : NULL,
                 db ? db + off : NULL);
        }
    }
    layer_norm_bwd_row_fn row = layer_norm_bwd_row_table[om_isa];
    int64_t r;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (r = 0; r < rows; r++)
        row(g + r * n, x + r * n, mean[r], rstd[r], w, dx + r * n, n);
}

int om_index_add_rows_f32(const int64_t *index, int64_t n, const float *rows, int64_t width,
                          float *out, int64_t out_rows, int nthreads) {
    for (int64_t p = 0; p < n; p++)
        if (index[p] < 0 || index[p] >= out_rows) return -1;
    const int64_t nb = (width + OM_COL_BLOCK - 1) / OM_COL_BLOCK;
    const int t = om_threads_for(n * width, OM_REDUCE_GRAIN, nthreads < nb ? nthreads : (int)nb);
    int64_t b;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
    for (b = 0; b < nb; b++) {
        const int64_t j0 = b * OM_COL_BLOCK;
        const int64_t j1 = width - j0 < OM_COL_BLOCK ? width : j0 + OM_COL_BLOCK;
        for (int64_t p = 0; p < n; p++) {
            float *dst = out + index[p] * width;
            const float *src = rows + p * width;
            for (int64_t j = j0; j < j1; j++) dst[j] += src[j];
        }
    }
    return 0;
}

OM_PATH_DISPATCH(reduce, OM_ISA_TABLE)
