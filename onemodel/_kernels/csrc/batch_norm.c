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

#if !OM_HAVE_OPENMP && defined(__GNUC__)
/* Thread counts feed only OpenMP pragmas, which a serial build ignores. */
#pragma GCC diagnostic ignored "-Wunused-variable"
#endif

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768

void om_batch_norm_stats_f32(const float *x, int64_t n, int64_t c, int64_t s, double eps,
                             float *mean, float *var, float *var_unbiased, float *invstd,
                             int nthreads) {
    const double count = (double)(n * s);
    const int nt = om_threads_for(n * c * s * 2, GRAIN, nthreads);
    int64_t ch;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (ch = 0; ch < c; ch++) {
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
    int64_t row;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (row = 0; row < n * c; row++) {
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
    int64_t ch;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (ch = 0; ch < c; ch++) {
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
