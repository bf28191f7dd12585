/* Max and average pooling over float32 planes (pool.h).
 *
 * Exact mode: max over the window in row-major order, the first maximum kept (a NaN wins, as
 * in PyTorch); averages add the window row-major in float, then divide once. Backward passes
 * add into each input plane in output order. Threads split the planes.
 */
#include "pool.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "isa.h"

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768

/* A call's arguments, for the threads' shares of the planes: src and dst are x and y forward,
 * gy and gx backward. Max pooling writes the argmax idx, which its backward pass reads (at);
 * average pooling divides by dh[i] * dw[j]. */
typedef struct {
    const om_pool_windows *p;
    const float *src;
    float *dst;
    int64_t *idx;
    const int64_t *at, *dh, *dw;
} pool_job;

static void pool_planes(const void *ctx, int64_t begin, int64_t end) {
    const pool_job *a = ctx;
    const om_pool_windows *p = a->p;
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    for (int64_t pl = begin; pl < end; pl++) {
        const float *plane = a->src + pl * in;
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                const int64_t o = pl * out + i * p->ow + j;
                if (!a->idx) {  /* average pooling */
                    float sum = 0.0f;
                    for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                        for (int64_t c = p->ws[j]; c < p->we[j]; c++) sum += plane[r * p->w + c];
                    a->dst[o] = sum / (float)(a->dh[i] * a->dw[j]);
                    continue;
                }
                int64_t best_at = p->hs[i] * p->w + p->ws[j];
                float best = -INFINITY;
                for (int64_t r = p->hs[i]; r < p->he[i]; r += p->sh)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c += p->sw) {
                        const float v = plane[r * p->w + c];
                        if (v > best || isnan(v)) {
                            best = v;
                            best_at = r * p->w + c;
                        }
                    }
                a->dst[o] = best;
                a->idx[o] = best_at;
            }
    }
}

static void pool_backward_planes(const void *ctx, int64_t begin, int64_t end) {
    const pool_job *a = ctx;
    const om_pool_windows *p = a->p;
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    for (int64_t pl = begin; pl < end; pl++) {
        float *plane = a->dst + pl * in;
        memset(plane, 0, (size_t)in * sizeof(float));
        if (a->at) {  /* max pooling */
            for (int64_t o = 0; o < out; o++) plane[a->at[pl * out + o]] += a->src[pl * out + o];
            continue;
        }
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                const float g = a->src[pl * out + i * p->ow + j] / (float)(a->dh[i] * a->dw[j]);
                for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c++) plane[r * p->w + c] += g;
            }
    }
}

void om_max_pool2d_f32(const om_pool_windows *p, const float *x, float *y, int64_t *idx,
                       int nthreads) {
    const pool_job a = {p, x, y, idx, NULL, NULL, NULL};
    om_run_range(om_threads_for(p->planes * p->oh * p->ow * 4, GRAIN, nthreads), p->planes,
                 pool_planes, &a);
}

void om_max_pool2d_backward_f32(const om_pool_windows *p, const float *gy, const int64_t *idx,
                                float *gx, int nthreads) {
    const pool_job a = {p, gy, gx, NULL, idx, NULL, NULL};
    om_run_range(om_threads_for(p->planes * (p->h * p->w + p->oh * p->ow), GRAIN, nthreads),
                 p->planes, pool_backward_planes, &a);
}

void om_avg_pool2d_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                       const float *x, float *y, int nthreads) {
    const pool_job a = {p, x, y, NULL, NULL, dh, dw};
    om_run_range(om_threads_for(p->planes * p->oh * p->ow * 4, GRAIN, nthreads), p->planes,
                 pool_planes, &a);
}

void om_avg_pool2d_backward_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                                const float *gy, float *gx, int nthreads) {
    const pool_job a = {p, gy, gx, NULL, NULL, dh, dw};
    om_run_range(om_threads_for(p->planes * (p->h * p->w + p->oh * p->ow * 4), GRAIN, nthreads),
                 p->planes, pool_backward_planes, &a);
}
