/* Batch norm over float32 (n, c, s) (batch_norm.h).
 *
 * Exact mode: every per-channel sum is lane_sums.h's, images in ascending order; the
 * per-element arithmetic is separate float multiplies and adds (no fused multiply-add).
 * Threads split the channels.
 */
#include "batch_norm.h"

#include <math.h>
#include <stdint.h>

#include "isa.h"
#include "lane_sums.h"

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768

/* A call's arguments, for the threads' shares of its channels (statistics, backward pass) or
 * rows (apply). y is apply's output and the backward pass's gx. */
typedef struct {
    const float *x, *gy, *mean, *invstd, *w, *b;
    float *y, *gw, *gb, *mean_out, *var, *var_unbiased, *invstd_out;
    int64_t n, c, s;
    double eps;
    int batch_stats;
} bn_job;

static void stats_channels(const void *ctx, int64_t begin, int64_t end) {
    const bn_job *a = ctx;
    const int64_t n = a->n, c = a->c, s = a->s;
    const double count = (double)(n * s);
    for (int64_t ch = begin; ch < end; ch++) {
        double acc[LANES] = {0};
        for (int64_t i = 0; i < n; i++) lanes_add(acc, a->x + (i * c + ch) * s, s);
        const double m = lanes_total(acc) / count;
        double dev[LANES] = {0};
        for (int64_t i = 0; i < n; i++) lanes_add_sqdev(dev, a->x + (i * c + ch) * s, s, m);
        const double ss = lanes_total(dev), v = ss / count;
        a->mean_out[ch] = (float)m;
        a->var[ch] = (float)v;
        a->var_unbiased[ch] = count > 1.0 ? (float)(ss / (count - 1.0)) : INFINITY;
        a->invstd_out[ch] = (float)(1.0 / sqrt(v + a->eps));
    }
}

void om_batch_norm_stats_f32(const float *x, int64_t n, int64_t c, int64_t s, double eps,
                             float *mean, float *var, float *var_unbiased, float *invstd,
                             int nthreads) {
    const bn_job a = {.x = x, .mean_out = mean, .var = var, .var_unbiased = var_unbiased,
                      .invstd_out = invstd, .n = n, .c = c, .s = s, .eps = eps};
    om_run_range(om_threads_for(n * c * s * 2, GRAIN, nthreads), c, stats_channels, &a);
}

static void apply_rows(const void *ctx, int64_t begin, int64_t end) {
    const bn_job *a = ctx;
    const int64_t s = a->s;
    for (int64_t row = begin; row < end; row++) {
        const int64_t ch = row % a->c;
        const float m = a->mean[ch], scale = a->invstd[ch] * a->w[ch], shift = a->b[ch];
        const float *src = a->x + row * s;
        float *dst = a->y + row * s;
        for (int64_t t = 0; t < s; t++) dst[t] = (src[t] - m) * scale + shift;
    }
}

void om_batch_norm_apply_f32(const float *x, const float *mean, const float *invstd,
                             const float *w, const float *b, float *y, int64_t n, int64_t c,
                             int64_t s, int nthreads) {
    const bn_job a = {.x = x, .mean = mean, .invstd = invstd, .w = w, .b = b, .y = y, .n = n,
                      .c = c, .s = s};
    om_run_range(om_threads_for(n * c * s, GRAIN, nthreads), n * c, apply_rows, &a);
}

static void backward_channels(const void *ctx, int64_t begin, int64_t end) {
    const bn_job *a = ctx;
    const int64_t n = a->n, c = a->c, s = a->s;
    const double count = (double)(n * s);
    const float *x = a->x, *gy = a->gy;
    for (int64_t ch = begin; ch < end; ch++) {
        const double m = (double)a->mean[ch], is = (double)a->invstd[ch];
        double sg[LANES] = {0}, sgx[LANES] = {0};
        for (int64_t i = 0; i < n; i++) {
            lanes_add(sg, gy + (i * c + ch) * s, s);
            lanes_add_prod(sgx, gy + (i * c + ch) * s, x + (i * c + ch) * s, s, m);
        }
        const double sum_g = lanes_total(sg), sum_gx = lanes_total(sgx);
        if (a->gb) a->gb[ch] = (float)sum_g;
        if (a->gw) a->gw[ch] = (float)(sum_gx * is);
        if (!a->y) continue;
        /* PyTorch's formula: dx = (g - mean(g) - (x - mean) * invstd^2 * mean(g (x - mean)))
         * * invstd * w; without batch statistics only the last factor remains. */
        const float fm = a->mean[ch], scale = a->invstd[ch] * a->w[ch];
        const float mg = a->batch_stats ? (float)(sum_g / count) : 0.0f;
        const float k = a->batch_stats ? (float)(sum_gx / count * is * is) : 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const float *g = gy + (i * c + ch) * s, *xs = x + (i * c + ch) * s;
            float *d = a->y + (i * c + ch) * s;
            if (a->batch_stats) {
                for (int64_t t = 0; t < s; t++) d[t] = ((g[t] - mg) - (xs[t] - fm) * k) * scale;
            } else {
                for (int64_t t = 0; t < s; t++) d[t] = g[t] * scale;
            }
        }
    }
}

void om_batch_norm_backward_f32(const float *x, const float *gy, const float *mean,
                                const float *invstd, const float *w, float *gx, float *gw,
                                float *gb, int64_t n, int64_t c, int64_t s, int batch_stats,
                                int nthreads) {
    const bn_job a = {.x = x, .gy = gy, .mean = mean, .invstd = invstd, .w = w, .y = gx,
                      .gw = gw, .gb = gb, .n = n, .c = c, .s = s, .batch_stats = batch_stats};
    om_run_range(om_threads_for(n * c * s * 2, GRAIN, nthreads), c, backward_channels, &a);
}
