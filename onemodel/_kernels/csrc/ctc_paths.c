/* The CTC row kernels, written once and compiled once per instruction-set path (path.h: the
 * build defines OM_PATH and the path's flags) so that the compiler vectorizes the loops over
 * states and classes as wide as the path allows; the names get the path's suffix from the
 * path's simd/<path>.h (OMV_FN). Every element goes through the same IEEE operations in the same
 * order whatever the vector width (contraction is off, no reassociation), so every path gives
 * the same bits. Design note in ctc.c.
 */
#include "path.h"

#include "ctc.h"
#include "isa.h"
#include "vmath.h"
#include OM_SIMD_HEADER

#define NEG_INF (-om_u2f(OM_INF_BITS))
#define POS_INF om_u2f(OM_INF_BITS)

/* Bit-mask select, all ones or all zeros: the compiler vectorizes these where it would turn a
 * float ?: into a branch (it may not speculate a float operation that could trap). */
static inline uint32_t ctc_mask(int cond) { return 0u - (uint32_t)cond; }
static inline float ctc_select(uint32_t mask, float a, float b) {
    return om_u2f((om_f2u(a) & mask) | (om_f2u(b) & ~mask));
}

/* om_log_scalar restricted to what lse3 passes it: 0, [1, 3] or NaN (its denormal and infinity
 * cases cannot occur). */
static inline float ctc_log(float x) {
    float y = om_log_core_scalar(x, 0);
    y = ctc_select(ctc_mask(x == 0.0f), NEG_INF, y);
    return ctc_select(ctc_mask(x != x), x, y);
}

/* log(exp(a) + exp(b) + exp(c)) = m + log(exp(a-m) + exp(b-m) + exp(c-m)), m the largest, so
 * one term is exactly 1 and the sum lies in [1, 3]. All -inf gives -inf (the shift is 0 and the
 * log of 0 is -inf); a NaN anywhere gives NaN. */
static inline float lse3(float a, float b, float c) {
    float m = a > b ? a : b;
    m = m > c ? m : c;
    m = ctc_select(ctc_mask(m == NEG_INF), 0.0f, m);
    return m + ctc_log((om_exp_scalar(a - m) + om_exp_scalar(b - m)) + om_exp_scalar(c - m));
}

static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* Row b's extended labels lab[s] and skip[s] (0 where state s may be entered from s-2, -inf
 * elsewhere, including s >= L). Returns L. */
static int64_t extend(const om_ctc_shape *sh, int64_t b, int64_t *lab, float *skip) {
    const int64_t n = sh->target_lengths[b], len = 2 * n + 1;
    const int64_t *tg = sh->targets + sh->offsets[b];
    for (int64_t s = 0; s < sh->width; s++) {
        lab[s] = (s & 1) && s < len ? tg[s >> 1] : sh->blank;
        skip[s] = (s & 1) && s >= 3 && s < len && tg[s >> 1] != tg[(s >> 1) - 1]
                  ? 0.0f : NEG_INF;
    }
    return len;
}

/* The states on some complete path at step t of a row of tb steps: [*lo, *hi). */
static inline void live(int64_t len, int64_t tb, int64_t t, int64_t *lo, int64_t *hi) {
    *lo = imax(0, len - 2 * (tb - t));
    *hi = imin(len, 2 * t + 2);
}

void OMV_FN(om_ctc_forward_row_f32)(const om_ctc_shape *sh, const float *lp, int64_t b,
                                    float *alpha, int64_t *lab, float *skip, float *nll) {
    const int64_t tb = sh->input_lengths[b], w = sh->width;
    const int64_t len = extend(sh, b, lab, skip);
    if (tb == 0) {
        *nll = len == 1 ? -0.0f : POS_INF;
        return;
    }
    /* Each row keeps two -inf entries in front, so s-1 and s-2 need no bounds test. */
    float *a = alpha + b * sh->t * w + 2;
    for (int64_t t = 0; t < tb; t++) {
        float *cur = a + t * w;
        const float *prev = cur - w;
        const float *p = lp + (t * sh->b + b) * sh->c;
        int64_t lo, hi;
        live(len, tb, t, &lo, &hi);
        cur[-2] = cur[-1] = NEG_INF;
        for (int64_t s = 0; s < w - 2; s++) cur[s] = NEG_INF;
        for (int64_t s = lo; s < hi; s++) cur[s] = p[lab[s]];
        if (t > 0)
            for (int64_t s = lo; s < hi; s++)
                cur[s] = lse3(prev[s], prev[s - 1], prev[s - 2] + skip[s]) + cur[s];
    }
    const float *last = a + (tb - 1) * w;
    *nll = -(len > 1 ? lse3(last[len - 1], last[len - 2], NEG_INF) : last[0]);
}

void OMV_FN(om_ctc_backward_row_f32)(const om_ctc_shape *sh, const float *lp, int64_t b,
                                     const float *alpha, float nll, float scale,
                                     int zero_infinity, float *beta, int64_t *lab,
                                     float *skip, float *grad) {
    const int64_t tb = sh->input_lengths[b], w = sh->width, c = sh->c;
    const int64_t stride = sh->b * c;
    const int64_t len = extend(sh, b, lab, skip);
    const float *a = alpha + b * sh->t * w + 2;
    const int impossible = nll == POS_INF;
    for (int64_t t = 0; t < sh->t; t++) {
        float *g = grad + t * stride + b * c;
        /* zero after the row's end; an impossible row is 0 with zero_infinity, NaN without
         * (PyTorch's exp(-inf + inf)) */
        float fill = t >= tb || zero_infinity ? 0.0f : om_u2f(OM_NAN_BITS);
        if (t >= tb || impossible)
            for (int64_t k = 0; k < c; k++) g[k] = fill;
    }
    if (impossible || tb == 0) return;
    /* Each row keeps two -inf entries at the end, so s+1 and s+2 need no bounds test. */
    float *cur = beta, *next = beta + w, *em = beta + 2 * w;
    for (int64_t t = tb - 1; t >= 0; t--) {
        const float *p = lp + t * stride + b * c;
        const float *at = a + t * w;
        float *g = grad + t * stride + b * c;
        int64_t lo, hi;
        live(len, tb, t, &lo, &hi);
        for (int64_t s = 0; s < w; s++) cur[s] = NEG_INF;
        for (int64_t s = lo; s < hi; s++) em[s] = p[lab[s]];
        if (t == tb - 1) {
            for (int64_t s = lo; s < hi; s++) cur[s] = em[s];
        } else {
            for (int64_t s = lo; s < hi; s++)
                cur[s] = lse3(next[s], next[s + 1], next[s + 2] + skip[s + 2]) + em[s];
        }
        /* next (beta at t+1) is no longer needed: it holds the state posteriors. */
        for (int64_t s = lo; s < hi; s++)
            next[s] = om_exp_scalar(((at[s] + cur[s]) + nll) - em[s]);
        for (int64_t k = 0; k < c; k++) g[k] = 0.0f;
        for (int64_t s = lo; s < hi; s++) g[lab[s]] += next[s];
        for (int64_t k = 0; k < c; k++) g[k] = (om_exp_scalar(p[k]) - g[k]) * scale;
        float *tmp = cur;
        cur = next;
        next = tmp;
    }
}

OM_PATH_PROBE(ctc, OM_PATH)
