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

#if !OM_HAVE_OPENMP && defined(__GNUC__)
/* Thread counts feed only OpenMP pragmas, which a serial build ignores. */
#pragma GCC diagnostic ignored "-Wunused-variable"
#endif

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768

void om_max_pool2d_f32(const om_pool_windows *p, const float *x, float *y, int64_t *idx,
                       int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * out * 4, GRAIN, nthreads);
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
        const float *plane = x + pl * in;
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
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
                y[pl * out + i * p->ow + j] = best;
                idx[pl * out + i * p->ow + j] = best_at;
            }
    }
}

void om_max_pool2d_backward_f32(const om_pool_windows *p, const float *gy, const int64_t *idx,
                                float *gx, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * (in + out), GRAIN, nthreads);
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
        float *plane = gx + pl * in;
        memset(plane, 0, (size_t)in * sizeof(float));
        for (int64_t o = 0; o < out; o++) plane[idx[pl * out + o]] += gy[pl * out + o];
    }
}

void om_avg_pool2d_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                       const float *x, float *y, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * out * 4, GRAIN, nthreads);
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
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
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
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
