/* Optimizer updates and gradient clipping (docs/spec/training.txt sections 3 and 4).
 *
 * What: one SGD or Adam/AdamW step over one parameter, in place, element by element; the scale
 * and clamp of clipping; the squared norm and the largest magnitude of a gradient.
 * Layout: every array is a contiguous float32 run of n elements; the caller (the Cython layer)
 * checks shapes, dtypes and aliasing and owns every buffer.
 *
 * Exact mode: each element runs the scalar reference below (om_sgd_elem, om_adam_elem), whose
 * every operation is one float32 IEEE operation in the spec's order; there is NO fused
 * multiply-add anywhere (the vector paths use separate multiplies and adds, and every file is
 * compiled with contraction off). Elements are independent, so the vector width and the split
 * over threads never change a bit. The reductions (sumsq, absmax) are sequential scalar loops.
 */
#ifndef OM_OPTIM_H
#define OM_OPTIM_H

#include <math.h>
#include <stdint.h>

#include "isa.h"

typedef struct {
    float lr, momentum, dampening_c; /* dampening_c = 1 - dampening, rounded to float32 */
    float weight_decay;              /* 0: no decay term at all */
    int nesterov;
    int first;                       /* the momentum buffer is set to g, not blended */
} om_sgd_hyper;

typedef struct {
    float beta1, beta2, beta1_c, beta2_c; /* beta*_c = 1 - beta*, rounded to float32 */
    float eps, step_size, sqrt_bc2;
    float weight_decay;                   /* Adam's L2 term g += wd*p; 0: none */
    float decay;                          /* AdamW's factor p *= 1 - lr*wd */
    int decoupled;                        /* apply decay (AdamW with wd != 0) */
    int amsgrad;
} om_adam_hyper;

/* The scalar reference of one element; every path calls these for its tail. */
static inline void om_sgd_elem(float *p, const float *g, float *buf, const om_sgd_hyper *h) {
    float gi = *g;
    if (h->weight_decay != 0.0f) gi = gi + h->weight_decay * *p;
    if (h->momentum != 0.0f) {
        float b = h->first ? gi : h->momentum * *buf + h->dampening_c * gi;
        *buf = b;
        gi = h->nesterov ? gi + h->momentum * b : b;
    }
    *p = *p - h->lr * gi;
}

static inline void om_adam_elem(float *p, const float *g, float *m, float *v, float *vmax,
                                const om_adam_hyper *h) {
    float gi = *g, pi = *p;
    if (h->weight_decay != 0.0f) gi = gi + h->weight_decay * pi;
    if (h->decoupled) pi = pi * h->decay;
    float mi = h->beta1 * *m + h->beta1_c * gi;
    float vi = h->beta2 * *v + (h->beta2_c * gi) * gi;
    *m = mi;
    *v = vi;
    if (h->amsgrad) {
        /* max(vmax, v) as MAXPS computes it: a NaN v is kept. */
        vi = *vmax > vi ? *vmax : vi;
        *vmax = vi;
    }
    float denom = sqrtf(vi) / h->sqrt_bc2 + h->eps;
    *p = pi - (h->step_size * mi) / denom;
}

/* Clamp as MINPS(hi, MAXPS(lo, g)): NaN stays NaN, -0 stays -0. */
static inline float om_clamp_elem(float g, float c) {
    float x = -c > g ? -c : g;
    return c < x ? c : x;
}

/* Per-path kernels over [0, n): the same function per path, suffix _scalar/_sse2/... */
#define OM_OPTIM_DECLARE(isa)                                                                  \
    void om_sgd_f32_##isa(float *p, const float *g, float *buf, int64_t n,                     \
                          const om_sgd_hyper *h);                                              \
    void om_adam_f32_##isa(float *p, const float *g, float *m, float *v, float *vmax,          \
                           int64_t n, const om_adam_hyper *h);                                 \
    void om_scale_f32_##isa(float *g, int64_t n, float coef);                                  \
    void om_clamp_f32_##isa(float *g, int64_t n, float c);
OM_OPTIM_DECLARE(scalar)
OM_OPTIM_DECLARE(sse2)
OM_OPTIM_DECLARE(avx2)
OM_OPTIM_DECLARE(avx512)
OM_OPTIM_DECLARE(neon)

/* Entry points (optim.c): dispatch to the selected path, threads over fixed chunks.
 * buf is NULL when momentum is 0; vmax is NULL without amsgrad. */
void om_sgd_step_f32(float *p, const float *g, float *buf, int64_t n, const om_sgd_hyper *h,
                     int nthreads);
void om_adam_step_f32(float *p, const float *g, float *m, float *v, float *vmax, int64_t n,
                      const om_adam_hyper *h, int nthreads);
void om_scale_inplace_f32(float *g, int64_t n, float coef, int nthreads);
void om_clamp_inplace_f32(float *g, int64_t n, float c, int nthreads);
/* Σ g² in double, strictly in index order (a running sum: no vectors, no threads). */
double om_sumsq_seq_f64(const float *g, int64_t n, double acc);
/* max |g|; NaN if any element is NaN; 0 for n = 0. */
float om_absmax_f32(const float *g, int64_t n);

#endif
