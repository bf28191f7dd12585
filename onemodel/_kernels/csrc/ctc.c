/* CTC loss (Graves et al. 2006) by the forward-backward recursions in log space, float32.
 *
 * Row b has S = target_lengths[b] labels and the extended sequence l' of L = 2S + 1 states:
 * blank, l_1, blank, l_2, ..., l_S, blank. Over its first Tb = input_lengths[b] steps
 *   alpha[t][s] = lp[t, l'_s] + lse(alpha[t-1][s], alpha[t-1][s-1], alpha[t-1][s-2])
 * where the s-2 term exists only for a label different from the label two states before (a
 * repeated label must be separated by a blank), and nll = -lse(alpha[Tb-1][L-1],
 * alpha[Tb-1][L-2]). beta is the mirror image, run from Tb-1 down to 0, and the posterior of
 * class c at step t is exp(lse_{s: l'_s = c}(alpha[t][s] + beta[t][s]) + nll - lp[t, c]).
 *
 * Only the states that lie on some complete path are computed: at step t, s < 2t + 2 (reachable
 * from the start) and s >= L - 2(Tb - t) (the end still reachable); the others stay -inf. This
 * changes no value that reaches nll or the gradient, it only skips dead work.
 *
 * Gradient, PyTorch's convention (aten/src/ATen/native/LossCTC.cpp): d nll / d lp[t, c] is
 * returned as exp(lp[t, c]) - posterior[t, c], which is the gradient with respect to the
 * logits when lp is a log_softmax output (then the log_softmax backward passes it unchanged,
 * its row sum being 0). An impossible alignment gives nll = +inf and, as in PyTorch, NaN
 * gradients on its rows' first Tb steps unless zero_infinity zeroes them.
 *
 * Exact mode: everything is scalar code on om_expf / om_logf-family functions of vmath.h
 * (no libm, no fused multiply-add, contraction off), each lse is a left fold of the two-term
 * lse(a, b) = max + log1p(exp(-|a - b|)) in the order written above (s, s-1, s-2; s ascending
 * for the posterior sums). lse(a, b) is within 1 ulp of max(a, b) plus 2 ulp of log(2) of the
 * true value (om_expf and om_log1p_unit are each within 1 ulp). One path serves every ISA.
 *
 * Threads: one batch row per iteration (rows are independent, dynamic schedule since rows
 * differ in length); a row's arithmetic does not depend on who runs it, so the bits do not
 * depend on the thread count.
 */
#include "ctc.h"

#include "isa.h"
#include "vmath.h"

#define NEG_INF (-om_u2f(OM_INF_BITS))

/* log(exp(a) + exp(b)); -inf is the identity, NaN propagates. */
static inline float lse2(float a, float b) {
    if (a == NEG_INF) return b;
    if (b == NEG_INF) return a;
    float m = a > b ? a : b;
    float d = a > b ? b - a : a - b;
    return m + om_log1p_unit(om_expf(d));
}

/* Label of extended state s: blank at even s, the (s/2)-th target at odd s. */
static inline int64_t label(const int64_t *tg, int64_t blank, int64_t s) {
    return (s & 1) ? tg[s >> 1] : blank;
}

/* Whether state s may be entered from s-2 (forward), equivalently s-2 may go to s. */
static inline int skip_ok(const int64_t *tg, int64_t s) {
    return (s & 1) && s >= 3 && tg[s >> 1] != tg[(s >> 1) - 1];
}

static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

static void forward_row(const om_ctc_shape *sh, const float *lp, int64_t b, float *alpha,
                        float *nll) {
    const int64_t tb = sh->input_lengths[b], n = sh->target_lengths[b], len = 2 * n + 1;
    const int64_t *tg = sh->targets + sh->offsets[b];
    const int64_t stride = sh->b * sh->c, w = sh->width;
    const float *row = lp + b * sh->c;
    float *a = alpha + b * sh->t * w;
    if (tb == 0) {
        *nll = n == 0 ? -0.0f : om_u2f(OM_INF_BITS);
        return;
    }
    for (int64_t t = 0; t < tb; t++) {
        float *cur = a + t * w;
        const float *prev = cur - w;
        const float *p = row + t * stride;
        const int64_t lo = imax(0, len - 2 * (tb - t)), hi = imin(len, 2 * t + 2);
        for (int64_t s = 0; s < len; s++) cur[s] = NEG_INF;
        for (int64_t s = lo; s < hi; s++) {
            float v;
            if (t == 0) {
                v = 0.0f;
            } else {
                v = prev[s];
                if (s > 0) v = lse2(v, prev[s - 1]);
                if (skip_ok(tg, s)) v = lse2(v, prev[s - 2]);
            }
            cur[s] = v + p[label(tg, sh->blank, s)];
        }
    }
    const float *last = a + (tb - 1) * w;
    *nll = -(n > 0 ? lse2(last[len - 1], last[len - 2]) : last[0]);
}

static void backward_row(const om_ctc_shape *sh, const float *lp, int64_t b, const float *alpha,
                         float nll, float scale, int zero_infinity, float *beta, float *grad) {
    const int64_t tb = sh->input_lengths[b], n = sh->target_lengths[b], len = 2 * n + 1;
    const int64_t *tg = sh->targets + sh->offsets[b];
    const int64_t stride = sh->b * sh->c, w = sh->width, c = sh->c;
    const float *a = alpha + b * sh->t * w;
    const int zero = zero_infinity && nll == om_u2f(OM_INF_BITS);
    for (int64_t t = 0; t < sh->t; t++) {
        float *g = grad + t * stride + b * c;
        if (t >= tb || zero)
            for (int64_t k = 0; k < c; k++) g[k] = 0.0f;
    }
    if (zero || tb == 0) return;
    float *cur = beta, *next = beta + w;
    for (int64_t t = tb - 1; t >= 0; t--) {
        const float *p = lp + t * stride + b * c;
        const float *at = a + t * w;
        float *g = grad + t * stride + b * c;
        const int64_t lo = imax(0, len - 2 * (tb - t)), hi = imin(len, 2 * t + 2);
        for (int64_t k = 0; k < c; k++) g[k] = NEG_INF;
        for (int64_t s = 0; s < len; s++) cur[s] = NEG_INF;
        for (int64_t s = lo; s < hi; s++) {
            float v;
            if (t == tb - 1) {
                v = 0.0f;
            } else {
                v = next[s];
                if (s + 1 < len) v = lse2(v, next[s + 1]);
                if (s + 2 < len && skip_ok(tg, s + 2)) v = lse2(v, next[s + 2]);
            }
            const int64_t l = label(tg, sh->blank, s);
            cur[s] = v + p[l];
            g[l] = lse2(g[l], at[s] + cur[s]);
        }
        for (int64_t k = 0; k < c; k++)
            g[k] = (om_expf(p[k]) - om_expf(g[k] + nll - p[k])) * scale;
        float *tmp = cur;
        cur = next;
        next = tmp;
    }
}

void om_ctc_forward_f32(const om_ctc_shape *s, const float *log_probs, float *alpha, float *nll,
                        int nthreads) {
    const int nt = om_threads_for(s->b, 1, nthreads);
    #pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t b = 0; b < s->b; b++)
        forward_row(s, log_probs, b, alpha, nll + b);
}

void om_ctc_backward_f32(const om_ctc_shape *s, const float *log_probs, const float *alpha,
                         const float *nll, const float *scale, int zero_infinity, float *beta,
                         float *grad, int nthreads) {
    const int nt = om_threads_for(s->b, 1, nthreads);
    #pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t b = 0; b < s->b; b++)
        backward_row(s, log_probs, b, alpha, nll[b], scale[b], zero_infinity,
                     beta + b * 2 * s->width, grad);
}
