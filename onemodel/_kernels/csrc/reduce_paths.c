/* Reductions, softmax and layer norm: the body of every reduce kernel, written once over a
 * 16-lane float vector `vf` and compiled once per path (path.h), over the path's vmath header
 * and its simd/<path>.h (the vocabulary, whose OMV_FN gives the names their path's suffix).
 * Design note in reduce.c. A vf is OM_LANES / OMV_LANES registers (AVX-512:
 * one; AVX2: two; SSE2 and NEON: four; scalar: 16 floats) and lane j of a vector loaded from p
 * holds p[j], so "lane j" is the same element on every path. Elementwise steps are single IEEE
 * operations, no fused multiply-add, so they agree on every path whatever the vector width;
 * vf_max is a > b ? a : b (a NaN in a is dropped, as x86 MAXPS), vf_exp the vmath exp.
 *
 * Order (defined in reduce.c): along a vector, 16 lanes and a fixed tree per chunk of OM_CHUNK
 * elements, chunk sums added in order; across columns, a plain sequential sum over the rows.
 * A partial last vector adds +0.0f to the lanes past the end: a lane starts at +0.0f and a
 * round-to-nearest sum is -0.0f only when both terms are, so no lane is ever -0.0f and adding
 * +0.0f leaves it unchanged (inf and NaN included). Max uses the same lanes and tree; a NaN
 * in a row then reaches every output through the sum of exponentials.
 */
#include "path.h"

#include <math.h>
#include <string.h>

#include "isa.h"
#include "reduce.h"
#include "vmath.h"
#include OM_VMATH_HEADER
#include OM_SIMD_HEADER

enum { OM_REGS = OM_LANES / OMV_LANES };
typedef struct { OMV r[OM_REGS]; } vf;

static inline vf vf_set1(float a) {
    vf v;
    for (int k = 0; k < OM_REGS; k++) v.r[k] = OMV_SET1(a);
    return v;
}
static inline vf vf_zero(void) {
    vf v;
    for (int k = 0; k < OM_REGS; k++) v.r[k] = OMV_ZERO();
    return v;
}
static inline vf vf_load(const float *p) {
    vf v;
    for (int k = 0; k < OM_REGS; k++) v.r[k] = OMV_LOAD(p + k * OMV_LANES);
    return v;
}
static inline void vf_store(float *p, vf a) {
    for (int k = 0; k < OM_REGS; k++) OMV_STORE(p + k * OMV_LANES, a.r[k]);
}
/* How many of register k's lanes lie below lane n of the vf. */
static inline int om_part(int n, int k) {
    int m = n - k * OMV_LANES;
    return m < 0 ? 0 : m < OMV_LANES ? m : OMV_LANES;
}
/* Lanes 0..n-1 from p (only those read), the others `fill`; lanes 0..n-1 to p (only those
 * written); lanes 0..n-1 of a, the others +0.0f. */
static inline vf vf_load_part(const float *p, int n, float fill) {
    vf v;
    for (int k = 0; k < OM_REGS; k++)
        v.r[k] = OMV_LOAD_PART(p + k * OMV_LANES, om_part(n, k), fill);
    return v;
}
static inline void vf_store_part(float *p, int n, vf a) {
    for (int k = 0; k < OM_REGS; k++) OMV_STORE_PART(p + k * OMV_LANES, om_part(n, k), a.r[k]);
}
static inline vf vf_keep(vf a, int n) {
    for (int k = 0; k < OM_REGS; k++) a.r[k] = OMV_KEEP(a.r[k], om_part(n, k));
    return a;
}

#define OM_LANEWISE(name, op)                                                          \
    static inline vf name(vf a, vf b) {                                                \
        for (int k = 0; k < OM_REGS; k++) a.r[k] = op(a.r[k], b.r[k]);                 \
        return a;                                                                      \
    }
OM_LANEWISE(vf_add, OMV_ADD)
OM_LANEWISE(vf_sub, OMV_SUB)
OM_LANEWISE(vf_mul, OMV_MUL)
OM_LANEWISE(vf_div, OMV_DIV)
OM_LANEWISE(vf_max, OMV_MAX)

static inline vf vf_exp(vf a) {
    for (int k = 0; k < OM_REGS; k++) a.r[k] = OMV_FN(om_exp)(a.r[k]);
    return a;
}

/* Loads, stores and masks of the r <= 16 elements left at p. */
static inline vf om_ld(const float *p, int r) {
    return r == OM_LANES ? vf_load(p) : vf_load_part(p, r, 0.0f);
}
static inline void om_st(float *p, int r, vf v) {
    if (r == OM_LANES) vf_store(p, v); else vf_store_part(p, r, v);
}
static inline vf om_keep(vf v, int r) { return r == OM_LANES ? v : vf_keep(v, r); }
static inline int om_rem(int64_t n, int64_t i) {
    return n - i < OM_LANES ? (int)(n - i) : OM_LANES;
}
static inline int64_t om_min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The tree's sum; a NaN sum is the default quiet NaN (+, no payload): which of two NaNs an
 * add keeps depends on its operand order, and compilers order commutative adds as they like. */
static inline float om_tree_sum(vf acc) {
    float l[OM_LANES];
    vf_store(l, acc);
    for (int j = 0; j < 8; j++) l[j] += l[j + 8];
    for (int j = 0; j < 4; j++) l[j] += l[j + 4];
    for (int j = 0; j < 2; j++) l[j] += l[j + 2];
    float s = l[0] + l[1];
    if (s != s) {
        const uint32_t nan = OM_NAN_BITS;
        memcpy(&s, &nan, 4);
    }
    return s;
}

static inline float om_tree_max(vf acc) {
    float l[OM_LANES];
    vf_store(l, acc);
    for (int j = 0; j < 8; j++) l[j] = om_maxf(l[j + 8], l[j]);
    for (int j = 0; j < 4; j++) l[j] = om_maxf(l[j + 4], l[j]);
    for (int j = 0; j < 2; j++) l[j] = om_maxf(l[j + 2], l[j]);
    return om_maxf(l[1], l[0]);
}

/* Σ x[0..n). */
float OMV_FN(om_vsum_f32)(const float *x, int64_t n) {
    float total = 0.0f;
    for (int64_t c = 0; c < n; c += OM_CHUNK) {
        int64_t end = om_min64(n, c + OM_CHUNK), i = c;
        vf acc = vf_zero();
        for (; i + OM_LANES <= end; i += OM_LANES) acc = vf_add(acc, vf_load(x + i));
        if (i < end) acc = vf_add(acc, vf_load_part(x + i, (int)(end - i), 0.0f));
        total += om_tree_sum(acc);
    }
    return total;
}

/* Σ (x[i] - mu)^2. */
static float om_sum_sqdev(const float *x, float mu, int64_t n) {
    vf vmu = vf_set1(mu);
    float total = 0.0f;
    for (int64_t c = 0; c < n; c += OM_CHUNK) {
        int64_t end = om_min64(n, c + OM_CHUNK);
        vf acc = vf_zero();
        for (int64_t i = c; i < end; i += OM_LANES) {
            int r = om_rem(end, i);
            vf d = vf_sub(om_ld(x + i, r), vmu);
            acc = vf_add(acc, om_keep(vf_mul(d, d), r));
        }
        total += om_tree_sum(acc);
    }
    return total;
}

/* Σ a[i] * b[i], each product rounded before it is added. */
static float om_sum_prod(const float *a, const float *b, int64_t n) {
    float total = 0.0f;
    for (int64_t c = 0; c < n; c += OM_CHUNK) {
        int64_t end = om_min64(n, c + OM_CHUNK);
        vf acc = vf_zero();
        for (int64_t i = c; i < end; i += OM_LANES) {
            int r = om_rem(end, i);
            acc = vf_add(acc, om_keep(vf_mul(om_ld(a + i, r), om_ld(b + i, r)), r));
        }
        total += om_tree_sum(acc);
    }
    return total;
}

static float om_vmax(const float *x, int64_t n) {
    vf acc = vf_set1(-INFINITY);
    int64_t i = 0;
    for (; i + OM_LANES <= n; i += OM_LANES) acc = vf_max(vf_load(x + i), acc);
    if (i < n) acc = vf_max(vf_load_part(x + i, (int)(n - i), -INFINITY), acc);
    return om_tree_max(acc);
}

/* Σ exp(x[i] - m); each exponential also goes to e[i] unless e is NULL. */
static float om_sum_exp(const float *x, float m, float *e, int64_t n) {
    vf vm = vf_set1(m);
    float total = 0.0f;
    for (int64_t c = 0; c < n; c += OM_CHUNK) {
        int64_t end = om_min64(n, c + OM_CHUNK);
        vf acc = vf_zero();
        for (int64_t i = c; i < end; i += OM_LANES) {
            int r = om_rem(end, i);
            vf v = vf_exp(vf_sub(om_ld(x + i, r), vm));
            if (e) om_st(e + i, r, v);
            acc = vf_add(acc, om_keep(v, r));
        }
        total += om_tree_sum(acc);
    }
    return total;
}

/* ---- reductions over a non-innermost axis: columns [0, width) of rows i*stride ---- */

void OMV_FN(om_sum_cols_f32)(const float *x, int64_t n, int64_t stride, int64_t width,
                            float *out) {
    for (int64_t j = 0; j < width; j += OM_LANES) om_st(out + j, om_rem(width, j), vf_zero());
    for (int64_t i = 0; i < n; i++) {
        const float *row = x + i * stride;
        for (int64_t j = 0; j < width; j += OM_LANES) {
            int r = om_rem(width, j);
            om_st(out + j, r, vf_add(om_ld(out + j, r), om_ld(row + j, r)));
        }
    }
}

/* ---- softmax, log_softmax ---- */

/* y = e / s, or log_softmax y = (x - m) - log(s), with m the row max, e = exp(x - m), s = Σe. */
void OMV_FN(om_softmax_row_f32)(const float *x, float *y, int64_t n, int is_log) {
    if (n == 0) return;
    float m = om_vmax(x, n);
    float s = om_sum_exp(x, m, is_log ? NULL : y, n);
    vf vm = vf_set1(m), vs = vf_set1(s), vls = vf_set1(is_log ? om_log_scalar(s) : 0.0f);
    for (int64_t i = 0; i < n; i += OM_LANES) {
        int r = om_rem(n, i);
        vf v = is_log ? vf_sub(vf_sub(om_ld(x + i, r), vm), vls) : vf_div(om_ld(y + i, r), vs);
        om_st(y + i, r, v);
    }
}

/* The same per column, with the sums over rows in increasing order (width <= OM_COL_BLOCK:
 * the per-column max, sum and log live in stack arrays of whole vectors). */
void OMV_FN(om_softmax_cols_f32)(const float *x, float *y, int64_t n, int64_t stride,
                                int64_t width, int is_log) {
    float m[OM_COL_BLOCK], s[OM_COL_BLOCK];
    if (n == 0) return;
    for (int64_t j = 0; j < width; j += OM_LANES) vf_store(m + j, vf_set1(-INFINITY));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j += OM_LANES) {
            int r = om_rem(width, j);
            vf v = r == OM_LANES ? vf_load(x + i * stride + j)
                                 : vf_load_part(x + i * stride + j, r, -INFINITY);
            vf_store(m + j, vf_max(v, vf_load(m + j)));
        }
    for (int64_t j = 0; j < width; j += OM_LANES) vf_store(s + j, vf_zero());
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j += OM_LANES) {
            int r = om_rem(width, j);
            vf e = vf_exp(vf_sub(om_ld(x + i * stride + j, r), vf_load(m + j)));
            if (!is_log) om_st(y + i * stride + j, r, e);
            vf_store(s + j, vf_add(vf_load(s + j), e));
        }
    if (is_log)
        for (int64_t j = 0; j < width; j++) s[j] = om_log_scalar(s[j]);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j += OM_LANES) {
            int r = om_rem(width, j);
            float *yi = y + i * stride + j;
            vf v = is_log ? vf_sub(vf_sub(om_ld(x + i * stride + j, r), vf_load(m + j)),
                                vf_load(s + j))
                       : vf_div(om_ld(yi, r), vf_load(s + j));
            om_st(yi, r, v);
        }
}

/* softmax: dx = y * (g - Σ g*y); log_softmax: dx = g - exp(y) * Σ g. */
void OMV_FN(om_softmax_bwd_row_f32)(const float *y, const float *g, float *dx, int64_t n,
                                   int is_log) {
    vf vt = vf_set1(is_log ? OMV_FN(om_vsum_f32)(g, n) : om_sum_prod(g, y, n));
    for (int64_t i = 0; i < n; i += OM_LANES) {
        int r = om_rem(n, i);
        vf vy = om_ld(y + i, r), vg = om_ld(g + i, r);
        om_st(dx + i, r, is_log ? vf_sub(vg, vf_mul(vf_exp(vy), vt)) : vf_mul(vy, vf_sub(vg, vt)));
    }
}

void OMV_FN(om_softmax_bwd_cols_f32)(const float *y, const float *g, float *dx, int64_t n,
                                    int64_t stride, int64_t width, int is_log) {
    float t[OM_COL_BLOCK];
    for (int64_t j = 0; j < width; j += OM_LANES) vf_store(t + j, vf_zero());
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j += OM_LANES) {
            int r = om_rem(width, j);
            vf vg = om_ld(g + i * stride + j, r);
            vf term = is_log ? vg : vf_mul(vg, om_ld(y + i * stride + j, r));
            vf_store(t + j, vf_add(vf_load(t + j), term));
        }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < width; j += OM_LANES) {
            int r = om_rem(width, j);
            vf vy = om_ld(y + i * stride + j, r), vg = om_ld(g + i * stride + j, r);
            vf vt = vf_load(t + j);
            om_st(dx + i * stride + j, r,
                  is_log ? vf_sub(vg, vf_mul(vf_exp(vy), vt)) : vf_mul(vy, vf_sub(vg, vt)));
        }
}

/* ---- layer norm over rows of length n ---- */

/* mu = Σx / n, var = Σ(x - mu)^2 / n, rstd = 1 / sqrt(var + eps) (IEEE sqrt and divide),
 * y = ((x - mu) * rstd) * w + b, the product and sum skipped when w or b is NULL. */
void OMV_FN(om_layer_norm_row_f32)(const float *x, const float *w, const float *b, float eps,
                                  float *y, int64_t n, float *mean, float *rstd) {
    float fn = (float)n;
    float mu = OMV_FN(om_vsum_f32)(x, n) / fn;
    float rs = 1.0f / sqrtf(om_sum_sqdev(x, mu, n) / fn + eps);
    vf vmu = vf_set1(mu), vrs = vf_set1(rs);
    for (int64_t i = 0; i < n; i += OM_LANES) {
        int r = om_rem(n, i);
        vf v = vf_mul(vf_sub(om_ld(x + i, r), vmu), vrs);
        if (w) v = vf_mul(v, om_ld(w + i, r));
        if (b) v = vf_add(v, om_ld(b + i, r));
        om_st(y + i, r, v);
    }
    *mean = mu;
    *rstd = rs;
}

/* xh = (x - mu) * rstd, gh = g * w (g when w is NULL),
 * dx = rstd * ((gh - Σgh / n) - xh * (Σ gh*xh / n)), both sums in the vector order. */
void OMV_FN(om_layer_norm_bwd_row_f32)(const float *g, const float *x, float mean, float rstd,
                                      const float *w, float *dx, int64_t n) {
    vf vmu = vf_set1(mean), vrs = vf_set1(rstd);
    float fn = (float)n, sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = 0; c < n; c += OM_CHUNK) {
        int64_t end = om_min64(n, c + OM_CHUNK);
        vf acc_g = vf_zero(), acc_gx = vf_zero();
        for (int64_t i = c; i < end; i += OM_LANES) {
            int r = om_rem(end, i);
            vf xh = vf_mul(vf_sub(om_ld(x + i, r), vmu), vrs);
            vf gh = w ? vf_mul(om_ld(g + i, r), om_ld(w + i, r)) : om_ld(g + i, r);
            acc_g = vf_add(acc_g, om_keep(gh, r));
            acc_gx = vf_add(acc_gx, om_keep(vf_mul(gh, xh), r));
        }
        sum_g += om_tree_sum(acc_g);
        sum_gx += om_tree_sum(acc_gx);
    }
    vf va = vf_set1(sum_g / fn), vb = vf_set1(sum_gx / fn);
    for (int64_t i = 0; i < n; i += OM_LANES) {
        int r = om_rem(n, i);
        vf xh = vf_mul(vf_sub(om_ld(x + i, r), vmu), vrs);
        vf gh = w ? vf_mul(om_ld(g + i, r), om_ld(w + i, r)) : om_ld(g + i, r);
        om_st(dx + i, r, vf_mul(vrs, vf_sub(vf_sub(gh, va), vf_mul(xh, vb))));
    }
}

/* Columns [0, width) of the (rows, n) matrices g and x: dw = Σ_rows g * xh, db = Σ_rows g,
 * each a sequential sum over rows in increasing order; either output may be NULL. */
void OMV_FN(om_layer_norm_dwdb_f32)(const float *g, const float *x, const float *mean,
                                   const float *rstd, int64_t rows, int64_t n, int64_t width,
                                   float *dw, float *db) {
    for (int64_t j = 0; j < width; j += OM_LANES) {
        int r = om_rem(width, j);
        if (dw) om_st(dw + j, r, vf_zero());
        if (db) om_st(db + j, r, vf_zero());
    }
    for (int64_t i = 0; i < rows; i++) {
        vf vmu = vf_set1(mean[i]), vrs = vf_set1(rstd[i]);
        const float *gi = g + i * n, *xi = x + i * n;
        for (int64_t j = 0; j < width; j += OM_LANES) {
            int r = om_rem(width, j);
            vf vg = om_ld(gi + j, r);
            if (dw) {
                vf xh = vf_mul(vf_sub(om_ld(xi + j, r), vmu), vrs);
                om_st(dw + j, r, vf_add(om_ld(dw + j, r), vf_mul(vg, xh)));
            }
            if (db) om_st(db + j, r, vf_add(om_ld(db + j, r), vg));
        }
    }
}

OM_PATH_PROBE(reduce, OM_PATH)
