/* Batch norm over (n, c, s) (batch_norm.h).
 *
 * Exact mode: every per-channel sum is lane_sums.h's, images in ascending order; the
 * per-element arithmetic is separate float multiplies and adds (no fused multiply-add).
 * Threads split the channels. Under autocast x is read rounded to bfloat16 / float16 (half.h's
 * rounding, subnormals kept: the values torch's batch norm reads from a 2-byte tensor),
 * converted a block at a time: whole runs of s values when they are short, else a CHUNK of one
 * run (a whole number of lanes, so the lane sums add in the same order as over the whole run).
 */
#include "batch_norm.h"

#include <math.h>
#include <stdint.h>

#include "gemm.h"
#include "half.h"
#include "isa.h"
#include "lane_sums.h"

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768
/* Values converted at a time (a multiple of LANES; 8 KiB, in L1). */
#define CHUNK 2048

/* x as the kernel reads it (batch_norm.h). */
typedef struct {
    const void *p;
    int fmt;
    uint16_t *save;
} bn_source;

/* A call's arguments, for the threads' shares of its channels (statistics, backward pass) or
 * rows (apply). y is apply's output and the backward pass's gx. */
typedef struct {
    bn_source x;
    const float *gy, *mean, *invstd, *w, *b;
    float *y, *gw, *gb, *mean_out, *var, *var_unbiased, *invstd_out;
    int64_t n, c, s;
    double eps;
    int batch_stats;
} bn_job;

/* `rows` runs of len values as float32, run r at p + r * ld. */
typedef struct {
    const float *p;
    int64_t ld;
} bn_block;

/* The runs from element e on, stride elements apart: x's own memory, or converted into buf
 * (rows * len <= CHUNK). bfloat16 is half.h's rounding and widening, which the compiler
 * vectorises (a widening is a shift); float16 is gemm.h's (F16C's instructions where the path
 * has them). */
static bn_block load(const bn_source *x, int64_t e, int64_t rows, int64_t len, int64_t stride,
                     float *buf) {
    if (x->fmt == OM_F32) return (bn_block){(const float *)x->p + e, stride};
    if (x->fmt == OM_F16 || x->fmt == OM_F32_TO_F16) {
        om_gemm_load(x->p, x->fmt, e, rows, len, stride, buf, x->save);
        return (bn_block){buf, len};
    }
    for (int64_t r = 0; r < rows; r++) {
        const int64_t at = e + r * stride;
        float *d = buf + r * len;
        if (x->fmt == OM_BF16) {
            const uint16_t *h = (const uint16_t *)x->p + at;
            for (int64_t u = 0; u < len; u++) d[u] = om_bf16_widen(h[u]);
            continue;
        }
        const float *v = (const float *)x->p + at;
        for (int64_t u = 0; u < len; u++) {
            const uint16_t h = om_bf16_round(v[u]);
            if (x->save) x->save[at + u] = h;
            d[u] = om_bf16_widen(h);
        }
    }
    return (bn_block){buf, len};
}

/* What a pass over a channel does with each value v of x (g the output gradient's). */
enum { SUM, SQDEV, GRAD_DOT, GRAD_INPUT };
typedef struct {
    int kind;
    double m;                  /* the mean (SQDEV, GRAD_DOT) */
    float fm, mg, k, scale;    /* GRAD_INPUT: d = ((g - mg) - (v - fm) * k) * scale */
} bn_pass;

/* One pass over channel ch of x (n runs of s, images ascending): lane sums into acc, or the
 * input gradient into a->y (acc unused). */
static void channel_pass(const bn_job *a, const bn_source *x, int64_t ch, const bn_pass *p,
                         double acc[LANES]) {
    const int64_t n = a->n, c = a->c, s = a->s;
    const int64_t len = s < CHUNK ? s : CHUNK, group = s < CHUNK ? CHUNK / s : 1;
    float buf[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += group)
        for (int64_t t = 0; t < s; t += len) {
            const int64_t rows = n - i0 < group ? n - i0 : group, w = s - t < len ? s - t : len;
            const bn_block v = load(x, (i0 * c + ch) * s + t, rows, w, c * s, buf);
            for (int64_t r = 0; r < rows; r++) {
                const float *xs = v.p + r * v.ld;
                const int64_t e = ((i0 + r) * c + ch) * s + t;
                if (p->kind == SUM) {
                    lanes_add(acc, xs, w);
                } else if (p->kind == SQDEV) {
                    lanes_add_sqdev(acc, xs, w, p->m);
                } else if (p->kind == GRAD_DOT) {
                    lanes_add_prod(acc, a->gy + e, xs, w, p->m);
                } else {
                    const float *g = a->gy + e;
                    float *d = a->y + e;
                    for (int64_t u = 0; u < w; u++)
                        d[u] = ((g[u] - p->mg) - (xs[u] - p->fm) * p->k) * p->scale;
                }
            }
        }
}

static void stats_channels(const void *ctx, int64_t begin, int64_t end) {
    const bn_job *a = ctx;
    const double count = (double)(a->n * a->s);
    /* The second pass reads the 2-byte bits the first one saved, if it saved them. */
    const bn_source again = a->x.save
        ? (bn_source){a->x.save, a->x.fmt + (OM_BF16 - OM_F32_TO_BF16), NULL}
        : (bn_source){a->x.p, a->x.fmt, NULL};
    for (int64_t ch = begin; ch < end; ch++) {
        double acc[LANES] = {0};
        channel_pass(a, &a->x, ch, &(bn_pass){.kind = SUM}, acc);
        const double m = lanes_total(acc) / count;
        double dev[LANES] = {0};
        channel_pass(a, &again, ch, &(bn_pass){.kind = SQDEV, .m = m}, dev);
        const double ss = lanes_total(dev), v = ss / count;
        a->mean_out[ch] = (float)m;
        a->var[ch] = (float)v;
        a->var_unbiased[ch] = count > 1.0 ? (float)(ss / (count - 1.0)) : INFINITY;
        a->invstd_out[ch] = (float)(1.0 / sqrt(v + a->eps));
    }
}

void om_batch_norm_stats_f32(const void *x, int fmt, uint16_t *save, int64_t n, int64_t c,
                             int64_t s, double eps, float *mean, float *var, float *var_unbiased,
                             float *invstd, int nthreads) {
    const bn_job a = {.x = {x, fmt, save}, .mean_out = mean, .var = var,
                      .var_unbiased = var_unbiased, .invstd_out = invstd, .n = n, .c = c,
                      .s = s, .eps = eps};
    om_run_range(om_threads_for(n * c * s * 2, GRAIN, nthreads), c, stats_channels, &a);
}

static void apply_rows(const void *ctx, int64_t begin, int64_t end) {
    const bn_job *a = ctx;
    const int64_t s = a->s;
    const int64_t len = s < CHUNK ? s : CHUNK, group = s < CHUNK ? CHUNK / s : 1;
    float buf[CHUNK];
    for (int64_t row0 = begin; row0 < end; row0 += group)
        for (int64_t t = 0; t < s; t += len) {
            const int64_t rows = end - row0 < group ? end - row0 : group;
            const int64_t w = s - t < len ? s - t : len;
            const bn_block v = load(&a->x, row0 * s + t, rows, w, s, buf);
            for (int64_t r = 0; r < rows; r++) {
                const int64_t ch = (row0 + r) % a->c;
                const float m = a->mean[ch], scale = a->invstd[ch] * a->w[ch], shift = a->b[ch];
                const float *src = v.p + r * v.ld;
                float *dst = a->y + (row0 + r) * s + t;
                for (int64_t u = 0; u < w; u++) dst[u] = (src[u] - m) * scale + shift;
            }
        }
}

void om_batch_norm_apply_f32(const void *x, int fmt, uint16_t *save, const float *mean,
                             const float *invstd, const float *w, const float *b, float *y,
                             int64_t n, int64_t c, int64_t s, int nthreads) {
    const bn_job a = {.x = {x, fmt, save}, .mean = mean, .invstd = invstd, .w = w, .b = b,
                      .y = y, .n = n, .c = c, .s = s};
    om_run_range(om_threads_for(n * c * s, GRAIN, nthreads), n * c, apply_rows, &a);
}

static void backward_channels(const void *ctx, int64_t begin, int64_t end) {
    const bn_job *a = ctx;
    const int64_t n = a->n, c = a->c, s = a->s;
    const double count = (double)(n * s);
    for (int64_t ch = begin; ch < end; ch++) {
        const double m = (double)a->mean[ch], is = (double)a->invstd[ch];
        double sg[LANES] = {0}, sgx[LANES] = {0};
        for (int64_t i = 0; i < n; i++) lanes_add(sg, a->gy + (i * c + ch) * s, s);
        channel_pass(a, &a->x, ch, &(bn_pass){.kind = GRAD_DOT, .m = m}, sgx);
        const double sum_g = lanes_total(sg), sum_gx = lanes_total(sgx);
        if (a->gb) a->gb[ch] = (float)sum_g;
        if (a->gw) a->gw[ch] = (float)(sum_gx * is);
        if (!a->y) continue;
        /* PyTorch's formula: dx = (g - mean(g) - (x - mean) * invstd^2 * mean(g (x - mean)))
         * * invstd * w; without batch statistics only the last factor remains. */
        const float scale = a->invstd[ch] * a->w[ch];
        if (a->batch_stats) {
            const bn_pass dx = {.kind = GRAD_INPUT, .fm = a->mean[ch], .scale = scale,
                                .mg = (float)(sum_g / count),
                                .k = (float)(sum_gx / count * is * is)};
            channel_pass(a, &a->x, ch, &dx, sgx);
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            const float *g = a->gy + (i * c + ch) * s;
            float *d = a->y + (i * c + ch) * s;
            for (int64_t t = 0; t < s; t++) d[t] = g[t] * scale;
        }
    }
}

void om_batch_norm_backward_f32(const void *x, int fmt, const float *gy, const float *mean,
                                const float *invstd, const float *w, float *gx, float *gw,
                                float *gb, int64_t n, int64_t c, int64_t s, int batch_stats,
                                int nthreads) {
    const bn_job a = {.x = {x, fmt, NULL}, .gy = gy, .mean = mean, .invstd = invstd, .w = w,
                      .y = gx, .gw = gw, .gb = gb, .n = n, .c = c, .s = s,
                      .batch_stats = batch_stats};
    om_run_range(om_threads_for(n * c * s * 2, GRAIN, nthreads), c, backward_channels, &a);
}
