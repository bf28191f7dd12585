/* The vector translation of the scalar reference in optim.h, written once for every vector path.
 *
 * An ISA file defines the vector type V, its width W, the operations below (each one IEEE
 * single-precision instruction, never a fused multiply-add) and OM_NAME(f) (f with the path's
 * suffix), then includes this file. Whole vectors first, then the scalar reference for the
 * tail, so every element gets the same operations in the same order as in optim.h.
 *   LOAD(ptr) STORE(ptr, v) SET1(x) ADD SUB MUL DIV SQRT(v)
 *   MAX(a, b) = a > b ? a : b   MIN(a, b) = a < b ? a : b   (MAXPS/MINPS: b when either is NaN)
 */
void OM_NAME(om_sgd_f32)(float *p, const float *g, float *buf, int64_t n,
                         const om_sgd_hyper *h) {
    const V lr = SET1(h->lr), mu = SET1(h->momentum), dc = SET1(h->dampening_c);
    const V wd = SET1(h->weight_decay);
    const int decay = h->weight_decay != 0.0f, momentum = h->momentum != 0.0f;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        V gi = LOAD(g + i);
        const V pi = LOAD(p + i);
        if (decay) gi = ADD(gi, MUL(wd, pi));
        if (momentum) {
            const V b = h->first ? gi : ADD(MUL(mu, LOAD(buf + i)), MUL(dc, gi));
            STORE(buf + i, b);
            gi = h->nesterov ? ADD(gi, MUL(mu, b)) : b;
        }
        STORE(p + i, SUB(pi, MUL(lr, gi)));
    }
    for (; i < n; i++) om_sgd_elem(p + i, g + i, buf ? buf + i : NULL, h);
}

void OM_NAME(om_adam_f32)(float *p, const float *g, float *m, float *v, float *vmax, int64_t n,
                          const om_adam_hyper *h) {
    const V b1 = SET1(h->beta1), b2 = SET1(h->beta2), b1c = SET1(h->beta1_c);
    const V b2c = SET1(h->beta2_c), eps = SET1(h->eps), step = SET1(h->step_size);
    const V sbc2 = SET1(h->sqrt_bc2), wd = SET1(h->weight_decay), decay = SET1(h->decay);
    const int l2 = h->weight_decay != 0.0f;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        V gi = LOAD(g + i), pi = LOAD(p + i);
        if (l2) gi = ADD(gi, MUL(wd, pi));
        if (h->decoupled) pi = MUL(pi, decay);
        const V mi = ADD(MUL(b1, LOAD(m + i)), MUL(b1c, gi));
        V vi = ADD(MUL(b2, LOAD(v + i)), MUL(MUL(b2c, gi), gi));
        STORE(m + i, mi);
        STORE(v + i, vi);
        if (h->amsgrad) {
            vi = MAX(LOAD(vmax + i), vi);
            STORE(vmax + i, vi);
        }
        const V denom = ADD(DIV(SQRT(vi), sbc2), eps);
        STORE(p + i, SUB(pi, DIV(MUL(step, mi), denom)));
    }
    for (; i < n; i++) om_adam_elem(p + i, g + i, m + i, v + i, vmax ? vmax + i : NULL, h);
}

void OM_NAME(om_scale_f32)(float *g, int64_t n, float coef) {
    const V c = SET1(coef);
    int64_t i = 0;
    for (; i + W <= n; i += W) STORE(g + i, MUL(LOAD(g + i), c));
    for (; i < n; i++) g[i] = g[i] * coef;
}

void OM_NAME(om_clamp_f32)(float *g, int64_t n, float c) {
    const V hi = SET1(c), lo = SET1(-c);
    int64_t i = 0;
    for (; i + W <= n; i += W) STORE(g + i, MIN(hi, MAX(lo, LOAD(g + i))));
    for (; i < n; i++) g[i] = om_clamp_elem(g[i], c);
}
