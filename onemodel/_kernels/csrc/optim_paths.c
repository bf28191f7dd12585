/* The optimizer kernels, the translation of the scalar reference in optim.h written once for
 * every path and compiled once per path (path.h) over its simd/<path>.h: the vocabulary, every
 * operation one IEEE single-precision operation, never a fused multiply-add; OMV_MAX and OMV_MIN
 * are MAXPS and MINPS, b when either is NaN. Whole vectors first, then the scalar reference for
 * the tail, so every element gets the same operations in the same order as in optim.h. On the
 * scalar path a vector is one float and every element takes the first loop: om_sgd_elem's and
 * om_adam_elem's operations in their order (the clamp's MAXPS and MINPS are om_clamp_elem's
 * compares), so that path is the reference itself.
 */
#include "path.h"

#include "optim.h"
#include OM_SIMD_HEADER

void OMV_FN(om_sgd_f32)(float *p, const float *g, float *buf, int64_t n,
                        const om_sgd_hyper *h) {
    const OMV lr = OMV_SET1(h->lr), mu = OMV_SET1(h->momentum), dc = OMV_SET1(h->dampening_c);
    const OMV wd = OMV_SET1(h->weight_decay);
    const int decay = h->weight_decay != 0.0f, momentum = h->momentum != 0.0f;
    int64_t i = 0;
    for (; i + OMV_LANES <= n; i += OMV_LANES) {
        OMV gi = OMV_LOAD(g + i);
        const OMV pi = OMV_LOAD(p + i);
        if (decay) gi = OMV_ADD(gi, OMV_MUL(wd, pi));
        if (momentum) {
            const OMV b =
                h->first ? gi : OMV_ADD(OMV_MUL(mu, OMV_LOAD(buf + i)), OMV_MUL(dc, gi));
            OMV_STORE(buf + i, b);
            gi = h->nesterov ? OMV_ADD(gi, OMV_MUL(mu, b)) : b;
        }
        OMV_STORE(p + i, OMV_SUB(pi, OMV_MUL(lr, gi)));
    }
    for (; i < n; i++) om_sgd_elem(p + i, g + i, buf ? buf + i : NULL, h);
}

void OMV_FN(om_adam_f32)(float *p, const float *g, float *m, float *v, float *vmax, int64_t n,
                         const om_adam_hyper *h) {
    const OMV b1 = OMV_SET1(h->beta1), b2 = OMV_SET1(h->beta2), b1c = OMV_SET1(h->beta1_c);
    const OMV b2c = OMV_SET1(h->beta2_c), eps = OMV_SET1(h->eps), step = OMV_SET1(h->step_size);
    const OMV sbc2 = OMV_SET1(h->sqrt_bc2), wd = OMV_SET1(h->weight_decay);
    const OMV decay = OMV_SET1(h->decay);
    const int l2 = h->weight_decay != 0.0f;
    int64_t i = 0;
    for (; i + OMV_LANES <= n; i += OMV_LANES) {
        OMV gi = OMV_LOAD(g + i), pi = OMV_LOAD(p + i);
        if (l2) gi = OMV_ADD(gi, OMV_MUL(wd, pi));
        if (h->decoupled) pi = OMV_MUL(pi, decay);
        const OMV mi = OMV_ADD(OMV_MUL(b1, OMV_LOAD(m + i)), OMV_MUL(b1c, gi));
        OMV vi = OMV_ADD(OMV_MUL(b2, OMV_LOAD(v + i)), OMV_MUL(OMV_MUL(b2c, gi), gi));
        OMV_STORE(m + i, mi);
        OMV_STORE(v + i, vi);
        if (h->amsgrad) {
            vi = OMV_MAX(OMV_LOAD(vmax + i), vi);
            OMV_STORE(vmax + i, vi);
        }
        const OMV denom = OMV_ADD(OMV_DIV(OMV_SQRT(vi), sbc2), eps);
        OMV_STORE(p + i, OMV_SUB(pi, OMV_DIV(OMV_MUL(step, mi), denom)));
    }
    for (; i < n; i++) om_adam_elem(p + i, g + i, m + i, v + i, vmax ? vmax + i : NULL, h);
}

void OMV_FN(om_scale_f32)(float *g, int64_t n, float coef) {
    const OMV c = OMV_SET1(coef);
    int64_t i = 0;
    for (; i + OMV_LANES <= n; i += OMV_LANES) OMV_STORE(g + i, OMV_MUL(OMV_LOAD(g + i), c));
    for (; i < n; i++) g[i] = g[i] * coef;
}

void OMV_FN(om_clamp_f32)(float *g, int64_t n, float c) {
    const OMV hi = OMV_SET1(c), lo = OMV_SET1(-c);
    int64_t i = 0;
    for (; i + OMV_LANES <= n; i += OMV_LANES)
        OMV_STORE(g + i, OMV_MIN(hi, OMV_MAX(lo, OMV_LOAD(g + i))));
    for (; i < n; i++) g[i] = om_clamp_elem(g[i], c);
}

OM_PATH_PROBE(optim, OM_PATH)
