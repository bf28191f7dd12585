/* The array kernels of vmath, written once for every ISA path and compiled once per path
 * (path.h) over its element functions (vmath.h on the scalar path, the reference the others
 * match bit for bit; vmath_<path>.h on the others) and its simd/<path>.h; the element
 * functions are OMV_FN(om_<op>) and OMV_FN(om_<op>_grad). Each forward
 * kernel is a straight loop over n elements, two vectors at a time so that their dependency
 * chains overlap; the last n % OMV_LANES go through a zero-padded partial vector so they get
 * the same function as the rest. Inputs and output may be the same array (in place): each
 * vector is loaded before it is stored.
 */
#include "path.h"

#include <stdint.h>

#include "isa.h"
#include OM_VMATH_HEADER
#include "vmath_kernels.h"
#include OM_SIMD_HEADER

#define OML_UNARY(op)                                                                   \
    void OMV_FN(om_##op##_f32)(const float *x, float *y, int64_t n) {                   \
        int64_t i = 0;                                                                  \
        for (; i + 2 * OMV_LANES <= n; i += 2 * OMV_LANES) {                            \
            OMV a = OMV_LOAD(x + i), b = OMV_LOAD(x + i + OMV_LANES);                   \
            OMV_STORE(y + i, OMV_FN(om_##op)(a));                                       \
            OMV_STORE(y + i + OMV_LANES, OMV_FN(om_##op)(b));                           \
        }                                                                               \
        for (; i + OMV_LANES <= n; i += OMV_LANES)                                      \
            OMV_STORE(y + i, OMV_FN(om_##op)(OMV_LOAD(x + i)));                         \
        if (i < n) {                                                                    \
            int r = (int)(n - i);                                                       \
            OMV_STORE_PART(y + i, r, OMV_FN(om_##op)(OMV_LOAD_PART(x + i, r, 0.0f)));   \
        }                                                                               \
    }

#define OML_BACKWARD(op)                                                                \
    void OMV_FN(om_##op##_backward_f32)(const float *s, const float *g, float *out,      \
                                        int64_t n) {                                    \
        int64_t i = 0;                                                                  \
        for (; i + OMV_LANES <= n; i += OMV_LANES)                                      \
            OMV_STORE(out + i, OMV_FN(om_##op##_grad)(OMV_LOAD(s + i), OMV_LOAD(g + i))); \
        if (i < n) {                                                                    \
            int r = (int)(n - i);                                                       \
            OMV_STORE_PART(out + i, r, OMV_FN(om_##op##_grad)(OMV_LOAD_PART(s + i, r, 0.0f), \
                                                              OMV_LOAD_PART(g + i, r, 0.0f))); \
        }                                                                               \
    }

/* gelu's erfc (in double: most of its cost) is computed only for the elements that need it.
 * A block's others, where x lies in [OM_GELU_NEG, OM_ERF_SMALL sqrt(2)), take om_gelu_small /
 * om_gelu_grad_small, the full functions without the erfc; the rest (gelu_needs_erfc) are
 * gathered first (before anything is stored: in place works), zero-padded to whole pairs of
 * vectors, computed by the full function two vectors at a time (their dependency chains
 * overlap) and scattered back. Lanes never mix, so every element has the bits of the full
 * function wherever it sits. */
#define OML_GELU_BLOCK 256

/* Where gelu needs the erfc: x below OM_GELU_NEG or NaN, or x / sqrt(2) at least OM_ERF_SMALL
 * (the complement of the small-argument lanes of om_gelu_cdf2, by the same float operations). */
static inline OMM gelu_needs_erfc(OMV x) {
    OMV z = OMV_SEL(OMV_LE(OMV_SET1(OM_GELU_NEG), x), OMV_MUL(x, OMV_SET1(OM_SQRT1_2)),
                    OMV_SET1(1.0f));
    return OMV_LE(OMV_SET1(OM_ERF_SMALL), z);
}

/* The block's elements that need the erfc: their indices, and x's (and g's, if given) values
 * packed and zero-padded to whole pairs of vectors. Returns the padded count. */
static inline int gelu_gather(const float *x, const float *g, int m, int32_t *where,
                              float *xs, float *gs) {
    int k = 0;
    for (int i = 0; i < m; i += OMV_LANES) {
        const int r = m - i < OMV_LANES ? m - i : OMV_LANES;
        const int bits = OMV_MASK_BITS(gelu_needs_erfc(OMV_LOAD_PART(x + i, r, 0.0f)));
        if (bits == 0) continue;
        for (int j = 0; j < r; j++) {  /* branch-free: a lane's index kept when its bit is set */
            where[k] = i + j;
            k += (bits >> j) & 1;
        }
    }
    const int padded = (k + 2 * OMV_LANES - 1) / (2 * OMV_LANES) * (2 * OMV_LANES);
    for (int j = 0; j < k; j++) {
        xs[j] = x[where[j]];
        if (g) gs[j] = g[where[j]];
    }
    for (int j = k; j < padded; j++) {
        xs[j] = 0.0f;
        if (g) gs[j] = 0.0f;
        where[j] = -1;
    }
    return padded;
}

/* Scatters the packed results back (a padding lane has index -1). */
static inline void gelu_scatter(const float *ys, const int32_t *where, int padded, float *y) {
    for (int j = 0; j < padded && where[j] >= 0; j++) y[where[j]] = ys[j];
}

void OMV_FN(om_gelu_f32)(const float *x, float *y, int64_t n) {
    int32_t where[OML_GELU_BLOCK + 2 * OMV_LANES];
    float xs[OML_GELU_BLOCK + 2 * OMV_LANES];
    for (int64_t b = 0; b < n; b += OML_GELU_BLOCK) {
        const int m = n - b < OML_GELU_BLOCK ? (int)(n - b) : OML_GELU_BLOCK;
        const int k = gelu_gather(x + b, NULL, m, where, xs, NULL);
        int i = 0;
        for (; i + OMV_LANES <= m; i += OMV_LANES)
            OMV_STORE(y + b + i, OMV_FN(om_gelu_small)(OMV_LOAD(x + b + i)));
        if (i < m)
            OMV_STORE_PART(y + b + i, m - i,
                           OMV_FN(om_gelu_small)(OMV_LOAD_PART(x + b + i, m - i, 0.0f)));
        for (int j = 0; j < k; j += 2 * OMV_LANES) {
            OMV u = OMV_LOAD(xs + j), v = OMV_LOAD(xs + j + OMV_LANES);
            OMV_STORE(xs + j, OMV_FN(om_gelu)(u));
            OMV_STORE(xs + j + OMV_LANES, OMV_FN(om_gelu)(v));
        }
        gelu_scatter(xs, where, k, y + b);
    }
}

void OMV_FN(om_gelu_backward_f32)(const float *s, const float *g, float *out, int64_t n) {
    int32_t where[OML_GELU_BLOCK + 2 * OMV_LANES];
    float xs[OML_GELU_BLOCK + 2 * OMV_LANES], gs[OML_GELU_BLOCK + 2 * OMV_LANES];
    for (int64_t b = 0; b < n; b += OML_GELU_BLOCK) {
        const int m = n - b < OML_GELU_BLOCK ? (int)(n - b) : OML_GELU_BLOCK;
        const int k = gelu_gather(s + b, g + b, m, where, xs, gs);
        int i = 0;
        for (; i + OMV_LANES <= m; i += OMV_LANES)
            OMV_STORE(out + b + i, OMV_FN(om_gelu_grad_small)(OMV_LOAD(s + b + i),
                                                              OMV_LOAD(g + b + i)));
        if (i < m)
            OMV_STORE_PART(out + b + i, m - i, OMV_FN(om_gelu_grad_small)(
                OMV_LOAD_PART(s + b + i, m - i, 0.0f), OMV_LOAD_PART(g + b + i, m - i, 0.0f)));
        for (int j = 0; j < k; j += 2 * OMV_LANES) {
            OMV u = OMV_LOAD(xs + j), v = OMV_LOAD(xs + j + OMV_LANES);
            OMV gu = OMV_LOAD(gs + j), gv = OMV_LOAD(gs + j + OMV_LANES);
            OMV_STORE(xs + j, OMV_FN(om_gelu_grad)(u, gu));
            OMV_STORE(xs + j + OMV_LANES, OMV_FN(om_gelu_grad)(v, gv));
        }
        gelu_scatter(xs, where, k, out + b);
    }
}

#define OML_BOTH(op) OML_UNARY(op) OML_BACKWARD(op)
OML_BOTH(exp)
OML_BOTH(log)
OML_BOTH(tanh)
OML_BOTH(sigmoid)
OML_BOTH(erf)
OML_BOTH(softplus)
OML_BOTH(gelu_tanh)
OML_BOTH(relu)
OML_BOTH(sin)
OML_BOTH(cos)
OML_BOTH(expm1)
OML_BOTH(log1p)
#undef OML_BOTH
#undef OML_UNARY
#undef OML_BACKWARD

OM_PATH_PROBE(vmath, OM_PATH)
