/* Convolution (im2col + gemm), max / average pooling and batch norm, float32, NCHW.
 *
 * Convolution. The batch is cut into chunks of nb images (nb from the shapes alone: a chunk's
 * column matrix stays in L2, and there are enough chunks for the threads to share). The column
 * matrix of a chunk holds, for group g, a (C/G·kh·kw) x (nb·oh·ow) matrix: row (c, i, j) in
 * that order, column (n, oy, ox) in that order, zero where the tap falls in the padding. Each
 * chunk is one product per group (gemm.c, batched over groups):
 *   forward   Y'[g] (K/G x nb·P)         = W[g] (K/G x C/G·kh·kw) · col[g]
 *   weight    dW_chunk[g]^T              = col[g] · dY'[g]^T      (K of the product = nb·P)
 *   input     dcol[g] (C/G·kh·kw x nb·P) = W[g]^T · dY'[g], then col2im
 * where Y' and dY' are the chunk's output in (K, n, P) order; the transposes to and from
 * (n, K, P) are plain copies. The column matrix is rebuilt from x in backward rather than kept.
 * Scratch (one chunk's column matrix, output and weight gradient) is allocated and freed here.
 *
 * Exact mode (engine.md section 4), association orders, fixed by the shapes alone:
 *   y[n,k,p]    = fma chain over (c, i, j) ascending from +0 (gemm), then + b[k] (one add);
 *   dW[k,c,i,j] = ((D_0 + D_1) + D_2) + ...: D_t the fma chain from +0 over (n, p) ascending
 *                 within chunk t, the chunks added in order;
 *   dx[n,c,y,x] = float adds from +0 over the taps (i, j, oy, ox) ascending that read it, each
 *                 tap the fma chain over the output channels of the group (gemm);
 *   db[k] and every per-channel sum of batch norm: double accumulators in 8 lanes; images in
 *                 ascending order, element e of an image's row of the channel going to lane
 *                 e mod 8; then the fixed tree (0+4, 1+5, 2+6, 3+7), (0+2, 1+3), 0+1, rounded
 *                 once to float.
 * Pooling: max over the window in row-major order, the first maximum kept (a NaN wins, as in
 * PyTorch); averages add the window row-major in float, then divide once. Backward passes of
 * pooling add into each input plane in output order. Batch norm's per-element arithmetic is
 * separate float multiplies and adds (no fused multiply-add outside gemm). This file has one
 * path for every ISA: gemm is the only vectorised piece, and it is exact on every path.
 *
 * Threads take whole chunks when there are at least as many chunks as threads (each chunk
 * then runs on one thread); otherwise the chunks run in order and threads split the work
 * inside each: rows of im2col, (image, channel) planes of col2im and of the transposes, output
 * blocks inside gemm. Either way a chunk's arithmetic is the same. Elsewhere threads split
 * pooling planes and the channels of the bias gradient and of batch norm.
 */
#include "conv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "isa.h"

#if !OM_HAVE_OPENMP && defined(__GNUC__)
/* Thread counts feed only OpenMP pragmas, which a serial build ignores. */
#pragma GCC diagnostic ignored "-Wunused-variable"
#endif

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768
#define LANES 8

/* ---- fixed-order sums ------------------------------------------------------------------ */

static void lanes_add(double acc[LANES], const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j];
    for (int j = 0; i + j < n; j++) acc[j] += (double)x[i + j];
}

static void lanes_add_sqdev(double acc[LANES], const float *x, int64_t n, double mean) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            double d = (double)x[i + j] - mean;
            acc[j] += d * d;
        }
    for (int j = 0; i + j < n; j++) {
        double d = (double)x[i + j] - mean;
        acc[j] += d * d;
    }
}

/* acc += g * (x - mean) */
static void lanes_add_prod(double acc[LANES], const float *g, const float *x, int64_t n,
                           double mean) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (double)g[i + j] * ((double)x[i + j] - mean);
    for (int j = 0; i + j < n; j++) acc[j] += (double)g[i + j] * ((double)x[i + j] - mean);
}

static double lanes_total(const double acc[LANES]) {
    double a = acc[0] + acc[4], b = acc[1] + acc[5], c = acc[2] + acc[6], d = acc[3] + acc[7];
    return (a + c) + (b + d);
}

/* ---- convolution ----------------------------------------------------------------------- */

/* Outputs o in [*lo, *hi) of a dimension of `out` whose tap o * stride + off lies in [0, in). */
static void valid_range(int64_t in, int64_t out, int64_t stride, int64_t off, int64_t *lo,
                        int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = in - off <= 0 ? 0 : (in - off - 1) / stride + 1;
    if (h > out) h = out;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* With unit strides and as many output as input columns (a "same" convolution), the taps of
 * consecutive output rows are consecutive in the input: a tap's whole valid block is one run
 * of memory, broken only by the few columns that fall in the padding (the gaps). */
static int flat_rows(const om_conv2d_shape *s) {
    return s->sh == 1 && s->sw == 1 && s->w == s->ow;
}

/* Length of the run from output (y0, x0) to output (y1 - 1, x1 - 1); 0 for an empty block. */
static int64_t run_length(const om_conv2d_shape *s, int64_t y0, int64_t y1, int64_t x0,
                          int64_t x1) {
    return y0 < y1 && x0 < x1 ? (y1 - y0 - 1) * s->ow + (x1 - x0) : 0;
}

/* One tap's column row: output q = oy * ow + ox reads plane[q + shift] inside the valid block,
 * zero elsewhere. */
static void copy_flat(const om_conv2d_shape *s, const float *plane, int64_t shift,
                      float *restrict dst, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
    const int64_t P = s->oh * s->ow, len = run_length(s, y0, y1, x0, x1);
    const int64_t start = len ? y0 * s->ow + x0 : 0;
    memset(dst, 0, (size_t)start * sizeof(float));
    if (len) memcpy(dst + start, plane + (start + shift), (size_t)len * sizeof(float));
    memset(dst + start + len, 0, (size_t)(P - start - len) * sizeof(float));
    for (int64_t oy = y0; len && oy + 1 < y1; oy++)
        memset(dst + oy * s->ow + x1, 0, (size_t)(s->ow - x1 + x0) * sizeof(float));
}

/* Column matrix (rows, nb, P) of the nb images starting at x. */
static void im2col(const om_conv2d_shape *s, const float *x, int64_t nb, float *col,
                   int nthreads) {
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow, plane = s->h * s->w;
    const int nt = om_threads_for(rows * nb * P, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t ci = r / (s->kh * s->kw), i = r / s->kw % s->kh, j = r % s->kw;
        const int64_t offy = i * s->dh - s->ph, offx = j * s->dw - s->pw;
        int64_t y0, y1, x0, x1;
        valid_range(s->h, s->oh, s->sh, offy, &y0, &y1);
        valid_range(s->w, s->ow, s->sw, offx, &x0, &x1);
        for (int64_t img = 0; img < nb; img++) {
            const float *src0 = x + (img * s->c + ci) * plane;
            float *restrict dst = col + (r * nb + img) * P;
            if (flat_rows(s)) {
                copy_flat(s, src0, offy * s->w + offx, dst, y0, y1, x0, x1);
                continue;
            }
            memset(dst, 0, (size_t)(y0 * s->ow) * sizeof(float));
            for (int64_t oy = y0; oy < y1; oy++) {
                /* src: the tap of output (oy, x0), the first inside the input. */
                const float *restrict src = src0 + ((oy * s->sh + offy) * s->w + x0 * s->sw
                                                    + offx);
                float *restrict d = dst + oy * s->ow;
                for (int64_t ox = 0; ox < x0; ox++) d[ox] = 0.0f;
                for (int64_t t = 0; t < x1 - x0; t++) d[x0 + t] = src[t * s->sw];
                for (int64_t ox = x1; ox < s->ow; ox++) d[ox] = 0.0f;
            }
            memset(dst + y1 * s->ow, 0, (size_t)((s->oh - y1) * s->ow) * sizeof(float));
        }
    }
}

/* x (nb images) = sum of the column matrix (rows, nb, P) over the taps that read each pixel. */
static void col2im(const om_conv2d_shape *s, float *col, int64_t nb, float *x,
                   int nthreads) {
    const int64_t P = s->oh * s->ow, planes = nb * s->c;
    const int nt = om_threads_for(planes * s->kh * s->kw * P, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t pl = 0; pl < planes; pl++) {
        const int64_t img = pl / s->c, ci = pl % s->c;
        float *plane = x + pl * s->h * s->w;
        memset(plane, 0, (size_t)(s->h * s->w) * sizeof(float));
        for (int64_t i = 0; i < s->kh; i++)
            for (int64_t j = 0; j < s->kw; j++) {
                const int64_t r = (ci * s->kh + i) * s->kw + j;
                float *src = col + (r * nb + img) * P;
                const int64_t offy = i * s->dh - s->ph, offx = j * s->dw - s->pw;
                int64_t y0, y1, x0, x1;
                valid_range(s->h, s->oh, s->sh, offy, &y0, &y1);
                valid_range(s->w, s->ow, s->sw, offx, &x0, &x1);
                if (flat_rows(s)) {
                    /* Add the whole run; its gaps (taps in the padding, whose gradient is
                     * dropped) are zeroed first. The accumulator starts at +0 and so never
                     * holds -0, so adding +0 changes no bit. */
                    const int64_t len = run_length(s, y0, y1, x0, x1), start = y0 * s->ow + x0;
                    if (!len) continue;
                    for (int64_t oy = y0; oy + 1 < y1; oy++)
                        memset(src + oy * s->ow + x1, 0,
                               (size_t)(s->ow - x1 + x0) * sizeof(float));
                    float *restrict d = plane + (offy * s->w + offx + start);
                    const float *restrict g = src + start;
                    for (int64_t t = 0; t < len; t++) d[t] += g[t];
                    continue;
                }
                for (int64_t oy = y0; oy < y1; oy++) {
                    float *restrict d = plane + ((oy * s->sh + offy) * s->w + x0 * s->sw
                                                 + offx);
                    const float *restrict g = src + oy * s->ow + x0;
                    for (int64_t t = 0; t < x1 - x0; t++) d[t * s->sw] += g[t];
                }
            }
    }
}

/* dst[b, a, :] = src[a, b, :] (+ bias[a] when given), blocks of length len. */
static void swap_outer(const float *src, float *dst, int64_t A, int64_t B, int64_t len,
                       const float *bias, int nthreads) {
    const int nt = om_threads_for(A * B * len, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t job = 0; job < A * B; job++) {
        const int64_t b = job / A, a = job % A;
        const float *s = src + (a * B + b) * len;
        float *d = dst + job * len;
        if (bias) {
            const float v = bias[a];
            for (int64_t t = 0; t < len; t++) d[t] = s[t] + v;
        } else {
            memcpy(d, s, (size_t)len * sizeof(float));
        }
    }
}

static float *scratch(int64_t count) {
    return (float *)malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
}

/* Images per chunk: at most CHUNK_FLOATS of column matrix (it stays in L2 between im2col and
 * the product) and, when the batch allows, at least MIN_CHUNKS chunks so that threads can take
 * whole chunks. A function of the shapes alone: the chunked weight-gradient sum is the same
 * at every thread count. */
#define CHUNK_FLOATS (1 << 19)
#define MIN_CHUNKS 8
/* Threads take whole chunks only while the chunks' partial weight gradients, kept until they
 * are added in order, stay below this many floats. */
#define PARTS_FLOATS (1 << 22)

static int64_t chunk_images(const om_conv2d_shape *s) {
    const int64_t per_image = s->c * s->kh * s->kw * s->oh * s->ow;
    const int64_t most = (s->n + MIN_CHUNKS - 1) / MIN_CHUNKS;
    int64_t nb = per_image > 0 ? CHUNK_FLOATS / per_image : most;
    if (nb > most) nb = most;
    return nb < 1 ? 1 : nb;
}

/* Threads over whole chunks (each chunk then runs on one thread) when there are enough chunks;
 * otherwise the chunks run in order, each on every thread. Either way every chunk does the
 * same arithmetic, so the choice changes no bit. */
static int outer_threads(int64_t nchunks, int nthreads) {
    return nchunks >= nthreads ? nthreads : 1;
}

/* Forward pass of images [n0, n0 + m). */
static int forward_chunk(const om_conv2d_shape *s, const float *x, const float *w,
                         const float *b, float *y, int64_t n0, int64_t m, float *col,
                         float *yt, int nthreads) {
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, cols = m * P;
    im2col(s, x + n0 * s->c * s->h * s->w, m, col, nthreads);
    int status = om_gemm_f32(G, kg, cols, rg, w, kg * rg, 0, col, rg * cols, 0, yt, nthreads);
    if (status == 0) swap_outer(yt, y + n0 * s->k * P, s->k, m, P, b, nthreads);
    return status;
}

/* Backward pass of images [n0, n0 + m): the chunk's dW^T (G, C/G·kh·kw, K/G) into part and
 * its images' dx into gx, each when not NULL. */
static int backward_chunk(const om_conv2d_shape *s, const float *x, const float *w,
                          const float *gy, float *gx, float *part, int64_t n0, int64_t m,
                          float *col, float *gyt, int nthreads) {
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, cols = m * P;
    int status = 0;
    swap_outer(gy + n0 * s->k * P, gyt, m, s->k, P, NULL, nthreads);
    if (part) {
        /* dW^T = col · dY'^T: the same fma chains as dY' · col^T (fma is symmetric in its
         * factors), with the output channels along gemm's vectorised columns, which measured
         * faster on conv-net shapes (kh·kw = 9 makes poor vector rows). */
        im2col(s, x + n0 * s->c * s->h * s->w, m, col, nthreads);
        status = om_gemm_f32(G, rg, kg, cols, col, rg * cols, 0, gyt, kg * cols, 1, part,
                             nthreads);
    }
    if (gx && status == 0) {
        /* The column buffer is free again: it receives the input-side gradient. */
        status = om_gemm_f32(G, rg, cols, kg, w, kg * rg, 1, gyt, kg * cols, 0, col, nthreads);
        if (status == 0) col2im(s, col, m, gx + n0 * s->c * s->h * s->w, nthreads);
    }
    return status;
}

/* gw = part^T (first chunk) or gw + part^T, group by group. */
static void add_weight_part(const om_conv2d_shape *s, float *gw, const float *part, int first) {
    const int64_t G = s->groups, kg = s->k / G, rg = s->c * s->kh * s->kw / G;
    for (int64_t g = 0; g < G; g++)
        for (int64_t k = 0; k < kg; k++)
            for (int64_t r = 0; r < rg; r++) {
                const float v = part[(g * rg + r) * kg + k];
                float *dst = gw + (g * kg + k) * rg + r;
                *dst = first ? v : *dst + v;
            }
}

int om_conv2d_forward_f32(const om_conv2d_shape *s, const float *x, const float *w,
                          const float *b, float *y, int nthreads) {
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow, nb = chunk_images(s);
    if (s->n * s->k * P == 0) return 0;
    const int64_t nchunks = (s->n + nb - 1) / nb;
    const int outer = outer_threads(nchunks, nthreads), inner = outer > 1 ? 1 : nthreads;
    int failed = 0;
    #pragma omp parallel num_threads(outer) if (outer > 1)
    {
        float *col = scratch(rows * nb * P), *yt = scratch(s->k * nb * P);
        #pragma omp for schedule(static)
        for (int64_t t = 0; t < nchunks; t++) {
            const int64_t n0 = t * nb, m = s->n - n0 < nb ? s->n - n0 : nb;
            if (!col || !yt || forward_chunk(s, x, w, b, y, n0, m, col, yt, inner) != 0) {
                #pragma omp atomic write
                failed = 1;
            }
        }
        free(col);
        free(yt);
    }
    return failed ? -1 : 0;
}

int om_conv2d_backward_f32(const om_conv2d_shape *s, const float *x, const float *w,
                           const float *gy, float *gx, float *gw, float *gb, int nthreads) {
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow, nb = chunk_images(s);
    const int64_t wsize = s->k * (rows / s->groups), nchunks = (s->n + nb - 1) / nb;
    if (gb) {
        const int nt = om_threads_for(s->k * s->n * P, GRAIN, nthreads);
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t k = 0; k < s->k; k++) {
            double acc[LANES] = {0};
            for (int64_t i = 0; i < s->n; i++) lanes_add(acc, gy + (i * s->k + k) * P, P);
            gb[k] = (float)lanes_total(acc);
        }
    }
    if ((!gw && !gx) || s->n * P == 0) {
        if (gw) memset(gw, 0, (size_t)wsize * sizeof(float));
        if (gx) memset(gx, 0, (size_t)(s->n * s->c * s->h * s->w) * sizeof(float));
        return 0;
    }
    int outer = outer_threads(nchunks, nthreads);
    if (gw && nchunks * wsize > PARTS_FLOATS) outer = 1;
    const int inner = outer > 1 ? 1 : nthreads;
    /* One partial per chunk when threads take chunks (added in chunk order afterwards), else
     * one, added as each chunk finishes. */
    float *parts = gw ? scratch((outer > 1 ? nchunks : 1) * wsize) : NULL;
    int failed = gw && !parts;
    #pragma omp parallel num_threads(outer) if (outer > 1)
    {
        float *col = scratch(rows * nb * P), *gyt = scratch(s->k * nb * P);
        #pragma omp for schedule(static)
        for (int64_t t = 0; t < nchunks; t++) {
            const int64_t n0 = t * nb, m = s->n - n0 < nb ? s->n - n0 : nb;
            float *part = parts ? parts + (outer > 1 ? t : 0) * wsize : NULL;
            int status = -1;
            if (col && gyt && !(gw && !parts))
                status = backward_chunk(s, x, w, gy, gx, part, n0, m, col, gyt, inner);
            if (status != 0) {
                #pragma omp atomic write
                failed = 1;
            } else if (part && outer == 1) {
                add_weight_part(s, gw, part, t == 0);
            }
        }
        free(col);
        free(gyt);
    }
    for (int64_t t = 0; parts && outer > 1 && !failed && t < nchunks; t++)
        add_weight_part(s, gw, parts + t * wsize, t == 0);
    free(parts);
    return failed ? -1 : 0;
}

/* ---- pooling --------------------------------------------------------------------------- */

void om_max_pool2d_f32(const om_pool_windows *p, const float *x, float *y, int64_t *idx,
                       int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * out * 4, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t pl = 0; pl < p->planes; pl++) {
        const float *plane = x + pl * in;
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                int64_t best_at = p->hs[i] * p->w + p->ws[j];
                float best = -INFINITY;
                for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c++) {
                        const float v = plane[r * p->w + c];
                        if (v > best || isnan(v)) {
                            best = v;
                            best_at = r * p->w + c;
                        }
                    }
                y[pl * out + i * p->ow + j] = best;
                idx[pl * out + i * p->ow + j] = best_at;
            }
    }
}

void om_max_pool2d_backward_f32(const om_pool_windows *p, const float *gy, const int64_t *idx,
                                float *gx, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * (in + out), GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t pl = 0; pl < p->planes; pl++) {
        float *plane = gx + pl * in;
        memset(plane, 0, (size_t)in * sizeof(float));
        for (int64_t o = 0; o < out; o++) plane[idx[pl * out + o]] += gy[pl * out + o];
    }
}

void om_avg_pool2d_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                       const float *x, float *y, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * out * 4, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t pl = 0; pl < p->planes; pl++) {
        const float *plane = x + pl * in;
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                float sum = 0.0f;
                for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c++) sum += plane[r * p->w + c];
                y[pl * out + i * p->ow + j] = sum / (float)(dh[i] * dw[j]);
            }
    }
}

void om_avg_pool2d_backward_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                                const float *gy, float *gx, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * (in + out * 4), GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t pl = 0; pl < p->planes; pl++) {
        float *plane = gx + pl * in;
        memset(plane, 0, (size_t)in * sizeof(float));
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                const float g = gy[pl * out + i * p->ow + j] / (float)(dh[i] * dw[j]);
                for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c++) plane[r * p->w + c] += g;
            }
    }
}

/* ---- batch norm ------------------------------------------------------------------------ */

void om_batch_norm_stats_f32(const float *x, int64_t n, int64_t c, int64_t s, double eps,
                             float *mean, float *var, float *var_unbiased, float *invstd,
                             int nthreads) {
    const double count = (double)(n * s);
    const int nt = om_threads_for(n * c * s * 2, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t ch = 0; ch < c; ch++) {
        double acc[LANES] = {0};
        for (int64_t i = 0; i < n; i++) lanes_add(acc, x + (i * c + ch) * s, s);
        const double m = lanes_total(acc) / count;
        double dev[LANES] = {0};
        for (int64_t i = 0; i < n; i++) lanes_add_sqdev(dev, x + (i * c + ch) * s, s, m);
        const double ss = lanes_total(dev), v = ss / count;
        mean[ch] = (float)m;
        var[ch] = (float)v;
        var_unbiased[ch] = count > 1.0 ? (float)(ss / (count - 1.0)) : INFINITY;
        invstd[ch] = (float)(1.0 / sqrt(v + eps));
    }
}

void om_batch_norm_apply_f32(const float *x, const float *mean, const float *invstd,
                             const float *w, const float *b, float *y, int64_t n, int64_t c,
                             int64_t s, int nthreads) {
    const int nt = om_threads_for(n * c * s, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t row = 0; row < n * c; row++) {
        const int64_t ch = row % c;
        const float m = mean[ch], scale = invstd[ch] * w[ch], shift = b[ch];
        const float *src = x + row * s;
        float *dst = y + row * s;
        for (int64_t t = 0; t < s; t++) dst[t] = (src[t] - m) * scale + shift;
    }
}

void om_batch_norm_backward_f32(const float *x, const float *gy, const float *mean,
                                const float *invstd, const float *w, float *gx, float *gw,
                                float *gb, int64_t n, int64_t c, int64_t s, int batch_stats,
                                int nthreads) {
    const double count = (double)(n * s);
    const int nt = om_threads_for(n * c * s * 2, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t ch = 0; ch < c; ch++) {
        const double m = (double)mean[ch], is = (double)invstd[ch];
        double sg[LANES] = {0}, sgx[LANES] = {0};
        for (int64_t i = 0; i < n; i++) {
            lanes_add(sg, gy + (i * c + ch) * s, s);
            lanes_add_prod(sgx, gy + (i * c + ch) * s, x + (i * c + ch) * s, s, m);
        }
        const double sum_g = lanes_total(sg), sum_gx = lanes_total(sgx);
        if (gb) gb[ch] = (float)sum_g;
        if (gw) gw[ch] = (float)(sum_gx * is);
        if (!gx) continue;
        /* PyTorch's formula: dx = (g - mean(g) - (x - mean) * invstd^2 * mean(g (x - mean)))
         * * invstd * w; without batch statistics only the last factor remains. */
        const float fm = mean[ch], scale = invstd[ch] * w[ch];
        const float mg = batch_stats ? (float)(sum_g / count) : 0.0f;
        const float k = batch_stats ? (float)(sum_gx / count * is * is) : 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const float *g = gy + (i * c + ch) * s, *xs = x + (i * c + ch) * s;
            float *d = gx + (i * c + ch) * s;
            if (batch_stats) {
                for (int64_t t = 0; t < s; t++) d[t] = ((g[t] - mg) - (xs[t] - fm) * k) * scale;
            } else {
                for (int64_t t = 0; t < s; t++) d[t] = g[t] * scale;
            }
        }
    }
}
