/* CTC loss (Graves et al. 2006) by the forward-backward recursions in log space, float32.
 *
 * Row b has S = target_lengths[b] labels and the extended sequence l' of L = 2S + 1 states:
 * blank, l_1, blank, l_2, ..., l_S, blank. Over its first Tb = input_lengths[b] steps
 *   alpha[t][s] = lse(alpha[t-1][s], alpha[t-1][s-1], alpha[t-1][s-2] + skip[s]) + lp[t, l'_s]
 * where skip[s] is 0 for a label different from the label two states before and -inf otherwise
 * (a repeated label must be separated by a blank), and nll = -lse(alpha[Tb-1][L-1],
 * alpha[Tb-1][L-2], -inf). beta is the mirror image, run from Tb-1 down to 0.
 *
 * Only the states on some complete path are computed: at step t, s < 2t + 2 (reachable from the
 * start) and s >= L - 2(Tb - t) (the end still reachable); the others stay -inf. This changes
 * no value that reaches nll or the gradient, it only skips dead work. alpha rows carry two -inf
 * entries in front and beta rows two at the end, so the recursions need no bounds tests.
 *
 * Gradient, PyTorch's convention (aten/src/ATen/native/LossCTC.cpp): d nll / d lp[t, c] is
 * returned as exp(lp[t, c]) - posterior[t, c], the gradient with respect to the logits when lp
 * is a log_softmax output (whose backward then passes it unchanged, its row sum being 0). The
 * posterior is the sum, in ascending s, of exp(alpha[t][s] + beta[t][s] + nll - lp[t, l'_s])
 * over the states labelled c (PyTorch takes the exp of the log of that sum: the same value to
 * rounding). An impossible alignment gives nll = +inf and NaN gradients on the row's first Tb
 * steps (PyTorch's exp(-inf + inf)), or 0 with zero_infinity; steps from Tb on get 0.
 *
 * Exact mode: om_exp_scalar / om_log_scalar of vmath.h (no libm; their own fused steps are
 * fused on every path), and here separate multiplies and adds (contraction off), in the order
 * written. lse of three terms is m + log(exp(a - m) + exp(b - m) + exp(c - m)), m the largest
 * (one term is exactly 1, so the sum is in [1, 3]), om_log_scalar's operations on that range:
 * its error is ulp(m)/2 + about 2^-23 absolute (1 ulp each for om_exp_scalar and
 * om_log_scalar, and the rounding of the sum), the accuracy of PyTorch's own float32
 * recursion. The row kernels are written once (ctc_paths.c) and compiled per ISA path only so
 * that the loops over states and classes vectorize as wide as the path allows; the per-element
 * operations are identical, so every path gives the same bits.
 *
 * Threads: whole batch rows (rows are independent), dealt out in turn since rows differ in
 * length. A row's arithmetic does not depend on who runs it, so the bits do not depend on the
 * thread count.
 */
#include "ctc.h"

#include "isa.h"

/* Below this many lattice cells (rows x steps x states) per thread, fewer threads: a small
 * batch costs less than waking a team. */
#define CTC_GRAIN 32768

typedef void (*forward_row_fn)(const om_ctc_shape *, const float *, int64_t, float *, int64_t *,
                               float *, float *);
typedef void (*backward_row_fn)(const om_ctc_shape *, const float *, int64_t, const float *,
                                float, float, int, float *, int64_t *, float *, float *);

#define OM_CTC_DECLARE(isa)                                                                     \
    void om_ctc_forward_row_f32_##isa(const om_ctc_shape *, const float *, int64_t, float *,   \
                                      int64_t *, float *, float *);                            \
    void om_ctc_backward_row_f32_##isa(const om_ctc_shape *, const float *, int64_t,           \
                                       const float *, float, float, int, float *, int64_t *,   \
                                       float *, float *);
OM_CTC_DECLARE(scalar)
OM_CTC_DECLARE(sse2)
OM_CTC_DECLARE(avx2)
OM_CTC_DECLARE(avx512)
OM_CTC_DECLARE(neon)

static const forward_row_fn forward_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_ctc_forward_row_f32);
static const backward_row_fn backward_table[OM_ISA_COUNT] =
    OM_ISA_TABLE(om_ctc_backward_row_f32);

/* A call's arguments (alpha_out, nll_out: the forward pass's; grad: the backward pass's). */
typedef struct {
    const om_ctc_shape *s;
    const float *log_probs, *alpha, *nll, *scale;
    float *alpha_out, *nll_out, *beta, *skip, *grad;
    int64_t *lab;
    int zero_infinity;
} ctc_job;

/* Rows rank, rank + size, ...: rows differ in length, and a long row next to a long one
 * (targets sorted by length) would otherwise fall in one thread's share. */
static int ctc_rows(const void *ctx, int rank, int size) {
    const ctc_job *a = ctx;
    const int64_t w = a->s->width;
    for (int64_t b = rank; b < a->s->b; b += size) {
        if (a->grad)
            backward_table[om_isa](a->s, a->log_probs, b, a->alpha, a->nll[b], a->scale[b],
                                   a->zero_infinity, a->beta + b * 3 * w, a->lab + b * w,
                                   a->skip + b * w, a->grad);
        else
            forward_table[om_isa](a->s, a->log_probs, b, a->alpha_out, a->lab + b * w,
                                  a->skip + b * w, a->nll_out + b);
    }
    return 0;
}

void om_ctc_forward_f32(const om_ctc_shape *s, const float *log_probs, float *alpha,
                        int64_t *lab, float *skip, float *nll, int nthreads) {
    const ctc_job a = {.s = s, .log_probs = log_probs, .alpha_out = alpha, .lab = lab,
                       .skip = skip, .nll_out = nll};
    om_run_team(om_threads_for(s->b * s->t * s->width, CTC_GRAIN, nthreads), ctc_rows, &a);
}

void om_ctc_backward_f32(const om_ctc_shape *s, const float *log_probs, const float *alpha,
                         const float *nll, const float *scale, int zero_infinity, float *beta,
                         int64_t *lab, float *skip, float *grad, int nthreads) {
    const ctc_job a = {s, log_probs, alpha, nll, scale, NULL, NULL, beta, skip, grad, lab,
                       zero_infinity};
    om_run_team(om_threads_for(s->b * s->t * s->width, CTC_GRAIN, nthreads), ctc_rows, &a);
}

OM_PATH_DISPATCH(ctc, OM_ISA_TABLE)
