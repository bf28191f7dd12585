/* Optimizer kernels, scalar path: the reference, one element at a time (design in optim.h). */
#include "optim.h"

void om_sgd_f32_scalar(float *p, const float *g, float *buf, int64_t n, const om_sgd_hyper *h) {
    for (int64_t i = 0; i < n; i++) om_sgd_elem(p + i, g + i, buf ? buf + i : NULL, h);
}

void om_adam_f32_scalar(float *p, const float *g, float *m, float *v, float *vmax, int64_t n,
                        const om_adam_hyper *h) {
    for (int64_t i = 0; i < n; i++)
        om_adam_elem(p + i, g + i, m + i, v + i, vmax ? vmax + i : NULL, h);
}

void om_scale_f32_scalar(float *g, int64_t n, float coef) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] * coef;
}

void om_clamp_f32_scalar(float *g, int64_t n, float c) {
    for (int64_t i = 0; i < n; i++) g[i] = om_clamp_elem(g[i], c);
}

OM_PATH_PROBE(optim, scalar)
