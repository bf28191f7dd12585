/* Reductions along an axis, softmax / log_softmax, layer norm, and the embedding gradient.
 *
 * The association order of "a reduction along a vector" is defined once, in reduce.c; every
 * ISA path follows it (reduce_paths.c is the one body, compiled per path over 16-lane vectors).
 * Entry points below validate nothing: the Cython layer (_reduce.pyx) checks shapes first.
 */
#ifndef OM_REDUCE_H
#define OM_REDUCE_H

#include <stdint.h>

/* Lanes of the fixed summation order, and the chunk a long vector is cut into (a multiple of
 * OM_LANES, so every chunk starts at lane 0). */
#define OM_LANES 16
#define OM_CHUNK 65536
/* Columns handled together when reducing over a non-innermost axis: a unit of threading and a
 * block of accumulators that stays in L1. A multiple of OM_LANES. */
#define OM_COL_BLOCK 256

/* Threaded entry points. Tensors are float32, C-contiguous, viewed as (outer, n, inner). */
void om_sum_axis_f32(const float *x, float *out, int64_t outer, int64_t n, int64_t inner,
                     int nthreads);
void om_softmax_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, int is_log,
                    int nthreads);
void om_softmax_backward_f32(const float *y, const float *g, float *dx, int64_t outer, int64_t n,
                             int64_t inner, int is_log, int nthreads);
/* Rows of length n; w and b may be NULL; mean and rstd receive one value per row. */
void om_layer_norm_f32(const float *x, const float *w, const float *b, float eps, float *y,
                       float *mean, float *rstd, int64_t rows, int64_t n, int nthreads);
/* dx always; dw and db (length n) when not NULL; w may be NULL. */
void om_layer_norm_backward_f32(const float *g, const float *x, const float *mean,
                                const float *rstd, const float *w, float *dx, float *dw,
                                float *db, int64_t rows, int64_t n, int nthreads);
/* out[index[p], :] += rows[p, :] for p = 0..n-1 in order (rows (n, width), out (out_rows,
 * width)). Returns -1, having written nothing, when an index is outside [0, out_rows). */
int om_index_add_rows_f32(const int64_t *index, int64_t n, const float *rows, int64_t width,
                          float *out, int64_t out_rows, int nthreads);

/* One path's single-threaded pieces, declared for every suffix. `stride` is the distance
 * between consecutive elements of the reduced axis when it is not innermost; a column block
 * has at most OM_COL_BLOCK columns. */
#define OM_REDUCE_DECLARE(sfx)                                                                  \
    float om_vsum_f32##sfx(const float *x, int64_t n);                                          \
    void om_sum_cols_f32##sfx(const float *x, int64_t n, int64_t stride, int64_t width,         \
                              float *out);                                                      \
    void om_softmax_row_f32##sfx(const float *x, float *y, int64_t n, int is_log);                 \
    void om_softmax_cols_f32##sfx(const float *x, float *y, int64_t n, int64_t stride,          \
                                  int64_t width, int is_log);                                      \
    void om_softmax_bwd_row_f32##sfx(const float *y, const float *g, float *dx, int64_t n,      \
                                     int is_log);                                                  \
    void om_softmax_bwd_cols_f32##sfx(const float *y, const float *g, float *dx, int64_t n,     \
                                      int64_t stride, int64_t width, int is_log);                  \
    void om_layer_norm_row_f32##sfx(const float *x, const float *w, const float *b, float eps,  \
                                    float *y, int64_t n, float *mean, float *rstd);             \
    void om_layer_norm_bwd_row_f32##sfx(const float *g, const float *x, float mean, float rstd, \
                                        const float *w, float *dx, int64_t n);                  \
    void om_layer_norm_dwdb_f32##sfx(const float *g, const float *x, const float *mean,         \
                                     const float *rstd, int64_t rows, int64_t n, int64_t width, \
                                     float *dw, float *db);

OM_REDUCE_DECLARE(_scalar)
OM_REDUCE_DECLARE(_sse2)
OM_REDUCE_DECLARE(_avx2)
OM_REDUCE_DECLARE(_avx512)
OM_REDUCE_DECLARE(_neon)

#endif
