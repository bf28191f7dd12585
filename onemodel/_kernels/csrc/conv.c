/* Convolution (im2col + gemm), max / average pooling and batch norm, float32, NCHW.
 *
 * Convolution. The column matrix holds, for group g, a (C/G·kh·kw) x (N·oh·ow) matrix: row
 * (c, i, j) in that order, column (n, oy, ox) in that order, zero where the tap falls in the
 * padding. The whole batch is one product per group (gemm.c, batched over groups):
 *   forward   Y'[g] (K/G x N·P)     = W[g] (K/G x C/G·kh·kw) · col[g]
 *   weight    dW[g]                 = dY'[g] · col[g]^T          (K of the product = N·P)
 *   input     dcol[g] (C/G·kh·kw x N·P) = W[g]^T · dY'[g], then col2im
 * where Y' and dY' are the output in (K, N, P) order; the transposes to and from (N, K, P) are
 * plain copies. The column matrix is rebuilt from x in backward rather than kept.
 * Scratch (the column matrix and one output-sized buffer) is allocated and freed here.
 *
 * Exact mode (engine.md section 4), association orders, fixed by the shapes alone:
 *   y[n,k,p]  = fma chain over (c, i, j) ascending from +0 (gemm), then + b[k] (one add);
 *   dW[k,c,i,j] = fma chain over (n, p) ascending from +0: one chain across the whole batch;
 *   dx[n,c,y,x] = float adds from +0 over the taps (i, j, oy, ox) ascending that read it, each
 *                 tap the fma chain over the output channels of the group (gemm);
 *   db[k] and every per-channel sum of batch norm: double accumulators in 8 lanes, element e
 *                 of a row going to lane e mod 8, rows in ascending order, then the fixed tree
 *                 (0+4, 1+5, 2+6, 3+7), (0+2, 1+3), 0+1, rounded once to float.
 * Pooling: max over the window in row-major order, the first maximum kept (a NaN wins, as in
 * PyTorch); averages add the window row-major in float, then divide once. Backward passes of
 * pooling add into each input plane in output order. Batch norm's per-element arithmetic is
 * separate float multiplies and adds (no fused multiply-add outside gemm). This file has one
 * path for every ISA: gemm is the only vectorised piece, and it is exact on every path.
 *
 * Threads split only independent outputs: (row, image) pairs of im2col, (image, channel)
 * planes of col2im and of the transposes, pooling planes, batch-norm channels.
 */
#include "conv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "isa.h"

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

static void im2col(const om_conv2d_shape *s, const float *x, float *col, int nthreads) {
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t jobs = rows * s->n;
    const int nt = om_threads_for(jobs * P, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t job = 0; job < jobs; job++) {
        const int64_t r = job / s->n, img = job % s->n;
        const int64_t ci = r / (s->kh * s->kw), i = r / s->kw % s->kh, j = r % s->kw;
        const float *plane = x + (img * s->c + ci) * s->h * s->w;
        float *dst = col + job * P;
        const int64_t offy = i * s->dh - s->ph, offx = j * s->dw - s->pw;
        int64_t y0, y1, x0, x1;
        valid_range(s->h, s->oh, s->sh, offy, &y0, &y1);
        valid_range(s->w, s->ow, s->sw, offx, &x0, &x1);
        memset(dst, 0, (size_t)(y0 * s->ow) * sizeof(float));
        for (int64_t oy = y0; oy < y1; oy++) {
            const float *src = plane + (oy * s->sh + offy) * s->w + offx;
            float *d = dst + oy * s->ow;
            for (int64_t ox = 0; ox < x0; ox++) d[ox] = 0.0f;
            if (s->sw == 1) {
                memcpy(d + x0, src + x0, (size_t)(x1 - x0) * sizeof(float));
            } else {
                for (int64_t ox = x0; ox < x1; ox++) d[ox] = src[ox * s->sw];
            }
            for (int64_t ox = x1; ox < s->ow; ox++) d[ox] = 0.0f;
        }
        memset(dst + y1 * s->ow, 0, (size_t)((s->oh - y1) * s->ow) * sizeof(float));
    }
}

static void col2im(const om_conv2d_shape *s, const float *col, float *x, int nthreads) {
    const int64_t P = s->oh * s->ow, planes = s->n * s->c;
    const int nt = om_threads_for(planes * s->kh * s->kw * P, GRAIN, nthreads);
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t pl = 0; pl < planes; pl++) {
        const int64_t img = pl / s->c, ci = pl % s->c;
        float *plane = x + pl * s->h * s->w;
        memset(plane, 0, (size_t)(s->h * s->w) * sizeof(float));
        for (int64_t i = 0; i < s->kh; i++)
            for (int64_t j = 0; j < s->kw; j++) {
                const int64_t r = (ci * s->kh + i) * s->kw + j;
                const float *src = col + (r * s->n + img) * P;
                const int64_t offy = i * s->dh - s->ph, offx = j * s->dw - s->pw;
                int64_t y0, y1, x0, x1;
                valid_range(s->h, s->oh, s->sh, offy, &y0, &y1);
                valid_range(s->w, s->ow, s->sw, offx, &x0, &x1);
                for (int64_t oy = y0; oy < y1; oy++) {
                    float *d = plane + (oy * s->sh + offy) * s->w + offx;
                    const float *g = src + oy * s->ow;
                    for (int64_t ox = x0; ox < x1; ox++) d[ox * s->sw] += g[ox];
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

int om_conv2d_forward_f32(const om_conv2d_shape *s, const float *x, const float *w,
                          const float *b, float *y, int nthreads) {
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, np = s->n * s->oh * s->ow;
    if (s->n * s->k * s->oh * s->ow == 0) return 0;
    float *col = scratch(rows * np), *yt = scratch(s->k * np);
    int status = -1;
    if (col && yt) {
        im2col(s, x, col, nthreads);
        status = om_gemm_f32(G, s->k / G, np, rows / G, w, s->k / G * (rows / G), 0,
                             col, rows / G * np, 0, yt, nthreads);
        if (status == 0) swap_outer(yt, y, s->k, s->n, s->oh * s->ow, b, nthreads);
    }
    free(col);
    free(yt);
    return status;
}

int om_conv2d_backward_f32(const om_conv2d_shape *s, const float *x, const float *w,
                           const float *gy, float *gx, float *gw, float *gb, int nthreads) {
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, np = s->n * s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G;
    float *gyt = scratch(s->k * np), *col = scratch(rows * np);
    int status = -1;
    if (!gyt || !col) goto done;
    swap_outer(gy, gyt, s->n, s->k, s->oh * s->ow, NULL, nthreads);
    if (gb) {
        const int nt = om_threads_for(s->k * np, GRAIN, nthreads);
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t k = 0; k < s->k; k++) {
            double acc[LANES] = {0};
            lanes_add(acc, gyt + k * np, np);
            gb[k] = (float)lanes_total(acc);
        }
    }
    status = 0;
    if (gw) {
        im2col(s, x, col, nthreads);
        status = om_gemm_f32(G, kg, rg, np, gyt, kg * np, 0, col, rg * np, 1, gw, nthreads);
    }
    if (gx && status == 0) {
        /* The column buffer is free again: it receives the input-side gradient. */
        status = om_gemm_f32(G, rg, np, kg, w, kg * rg, 1, gyt, kg * np, 0, col, nthreads);
        if (status == 0) col2im(s, col, gx, nthreads);
    }
done:
    free(gyt);
    free(col);
    return status;
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
