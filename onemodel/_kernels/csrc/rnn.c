/* Recurrent layers: the step loop of rnn.h and the dispatch of its row kernels.
 *
 * Forward, step t: hw = h·W_hhᵀ (om_gemm_f32, B x G·H, K = H), then one row kernel per batch
 * row that adds xw, the bias and hw and updates the state. Backward, step t from T-1 down:
 * the row kernels turn the gradient of h (and c) into the gate gradients dg, then
 * dh_prev = dg·W_hh (om_gemm_f32, B x H, K = G·H) plus the cell's direct term. The products
 * over all steps (dW_hh = dgᵀ·h_prev, the input gradients) are left to the caller: they are
 * single large products.
 *
 * Threading: the directions of a bidirectional layer run concurrently, one thread each; a
 * single direction threads its products inside gemm and splits batch rows of the row kernels.
 * Rows are independent and every value has one fixed sequence of operations (gemm's order is
 * fixed by the shapes, the row formulas are elementwise), so the bits depend on neither the
 * thread count nor the ISA path (rnn_body.h: no fused multiply-add in the cell; gemm's own
 * policy for its products).
 *
 * A reversed direction runs each row from its last valid step down, reading and writing every
 * array at the row's time index (time_at), so no input or output is ever permuted.
 *
 * Scratch: one (B, G·H) buffer for hw in the forward; in the backward one (B, G·H) for the
 * step's gate gradients and one (B, H) for their product with W_hh. W_hh is packed for the
 * products once per call (om_gemm_pack_b), not once per step.
 *
 * Under autocast (half 1 or 2) both recurrent products take bfloat16 or float16 operands,
 * rounded by their packing as om_gemm's (W_hh once, when packed; h or the gate gradients per
 * step), with float32 results: the state, the gates and every gradient stay float32.
 */
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "rnn.h"

static const om_lstm_row_fn lstm_row[OM_ISA_COUNT] = OM_ISA_TABLE(om_lstm_row_f32);
static const om_lstm_row_bwd_fn lstm_row_bwd[OM_ISA_COUNT] = OM_ISA_TABLE(om_lstm_row_bwd_f32);
static const om_gru_row_fn gru_row[OM_ISA_COUNT] = OM_ISA_TABLE(om_gru_row_f32);
static const om_gru_row_bwd_fn gru_row_bwd[OM_ISA_COUNT] = OM_ISA_TABLE(om_gru_row_bwd_f32);

/* Elements of row work per thread below which a step's row kernels stay on one thread. */
#define OM_RNN_GRAIN 8192

static int gates_of(int cell) { return cell == OM_RNN_LSTM ? 4 : 3; }

/* The time index of step s of a row of length len: s itself, or len-1-s for a reversed
 * direction (padded steps keep their place). Every saved array is in time order. */
static inline int64_t time_at(int reverse, int64_t s, int64_t len) {
    return reverse && s < len ? len - 1 - s : s;
}

/* The packing format of a recurrent product's operands under `half` (om_rnn_forward_f32). */
static int operand_format(int half) {
    return half == 1 ? OM_F32_TO_BF16 : half == 2 ? OM_F32_TO_F16 : OM_F32;
}

static int forward_one(int cell, int64_t t, int64_t b, int64_t h, const int64_t *lengths,
                       const om_rnn_forward_args *a, int fmt, int nthreads) {
    const float *xw = a->xw, *w_hh = a->w_hh, *bias = a->bias, *h0 = a->h0, *c0 = a->c0;
    float *y = a->y, *gates = a->gates, *cs = a->cs, *hn_lin = a->hn_lin;
    float *h_n = a->h_n, *c_n = a->c_n;
    const int64_t gh = gates_of(cell) * h;
    float *hw = malloc((size_t)(b * gh > 0 ? b * gh : 1) * sizeof(float));
    const om_gemm_operand w_op = {w_hh, 0, 1, fmt, NULL}, h_op = {h_n, 0, 0, fmt, NULL};
    om_gemm_packed w_packed = {0};  /* op(B) = W_hhᵀ, H x G·H */
    if (hw == NULL || om_gemm_pack_b(h, gh, w_op, &w_packed) != 0) {
        free(hw);
        om_gemm_packed_free(&w_packed);
        return -1;
    }
    memcpy(h_n, h0, (size_t)(b * h) * sizeof(float));
    if (cell == OM_RNN_LSTM) memcpy(c_n, c0, (size_t)(b * h) * sizeof(float));
    const int nt = om_threads_for(b * gh, OM_RNN_GRAIN, nthreads);
    const om_lstm_row_fn lstm = lstm_row[om_isa];
    const om_gru_row_fn gru = gru_row[om_isa];
    int status = 0;
    for (int64_t s = 0; s < t && status == 0; s++) {
        if (om_gemm_packed_product(b, h_op, &w_packed, hw, nthreads) != 0) {
            status = -1;
            break;
        }
        int64_t r;
        #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (r = 0; r < b; r++) {
            const int64_t row = time_at(a->reverse, s, lengths[r]) * b + r;
            float *yr = y + row * h, *gr = gates + row * gh;
            const size_t hb = (size_t)h * sizeof(float);
            if (s >= lengths[r]) {  /* past the row's end: state carried, output zero */
                memset(yr, 0, hb);
                memset(gr, 0, (size_t)gh * sizeof(float));
                if (cell == OM_RNN_LSTM) memcpy(cs + row * h, c_n + r * h, hb);
                else memset(hn_lin + row * h, 0, hb);
                continue;
            }
            if (cell == OM_RNN_LSTM) {
                lstm(h, xw + row * gh, hw + r * gh, bias, c_n + r * h, gr, cs + row * h, yr);
                memcpy(c_n + r * h, cs + row * h, (size_t)h * sizeof(float));
            } else {
                gru(h, xw + row * gh, hw + r * gh, bias, h_n + r * h, gr, hn_lin + row * h, yr);
            }
            memcpy(h_n + r * h, yr, (size_t)h * sizeof(float));
        }
    }
    free(hw);
    om_gemm_packed_free(&w_packed);
    return status;
}

static int backward_one(int cell, int64_t t, int64_t b, int64_t h, const int64_t *lengths,
                        const om_rnn_backward_args *a, int fmt, int nthreads) {
    const float *w_hh = a->w_hh, *h0 = a->h0, *c0 = a->c0, *y = a->y, *gates = a->gates;
    const float *cs = a->cs, *hn_lin = a->hn_lin, *gy = a->gy, *g_hn = a->g_hn;
    const float *g_cn = a->g_cn;
    float *dgx = a->dgx, *dgh = a->dgh, *dh0 = a->dh0, *dc0 = a->dc0;
    const int64_t gh = gates_of(cell) * h;
    /* dstep: the step's gate gradients as one (B, G·H) matrix for the product with W_hh (the
     * rows' time indices differ when reversed); tmp: that product, (B, H). */
    float *dstep = malloc((size_t)(b * gh > 0 ? b * gh : 1) * sizeof(float));
    float *tmp = malloc((size_t)(b * h > 0 ? b * h : 1) * sizeof(float));
    const om_gemm_operand w_op = {w_hh, 0, 0, fmt, NULL}, d_op = {dstep, 0, 0, fmt, NULL};
    om_gemm_packed w_packed = {0};  /* op(B) = W_hh, G·H x H */
    if (dstep == NULL || tmp == NULL || om_gemm_pack_b(gh, h, w_op, &w_packed) != 0) {
        free(dstep);
        free(tmp);
        om_gemm_packed_free(&w_packed);
        return -1;
    }
    /* dh0 and dc0 hold the running gradients of h and c, from the final state down. */
    memcpy(dh0, g_hn, (size_t)(b * h) * sizeof(float));
    if (cell == OM_RNN_LSTM) memcpy(dc0, g_cn, (size_t)(b * h) * sizeof(float));
    float *dg_all = cell == OM_RNN_LSTM ? dgx : dgh;
    const int nt = om_threads_for(b * gh, OM_RNN_GRAIN, nthreads);
    const om_lstm_row_bwd_fn lstm = lstm_row_bwd[om_isa];
    const om_gru_row_bwd_fn gru = gru_row_bwd[om_isa];
    int status = 0;
    for (int64_t s = t - 1; s >= 0; s--) {
        int64_t r;
        #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (r = 0; r < b; r++) {
            const int64_t row = time_at(a->reverse, s, lengths[r]) * b + r;
            float *ds = dstep + r * gh;
            if (s >= lengths[r]) {  /* padded step: no gate gradient, state gradient carried */
                memset(ds, 0, (size_t)gh * sizeof(float));
                memset(dgx + row * gh, 0, (size_t)gh * sizeof(float));
                if (cell == OM_RNN_GRU) memset(dgh + row * gh, 0, (size_t)gh * sizeof(float));
                continue;
            }
            const int64_t prev = s > 0 ? time_at(a->reverse, s - 1, lengths[r]) * b + r : -1;
            float *d = dh0 + r * h;
            const float *g = gy + row * h;
            for (int64_t j = 0; j < h; j++) d[j] += g[j];
            if (cell == OM_RNN_LSTM) {
                const float *c_prev = prev >= 0 ? cs + prev * h : c0 + r * h;
                lstm(h, gates + row * gh, c_prev, cs + row * h, d, dc0 + r * h, ds);
            } else {
                const float *h_prev = prev >= 0 ? y + prev * h : h0 + r * h;
                gru(h, gates + row * gh, hn_lin + row * h, h_prev, d, dgx + row * gh, ds);
            }
            memcpy(dg_all + row * gh, ds, (size_t)gh * sizeof(float));
        }
        if (om_gemm_packed_product(b, d_op, &w_packed, tmp, nthreads) != 0) {
            status = -1;
            break;
        }
        #pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (r = 0; r < b; r++) {
            if (s >= lengths[r]) continue;
            float *d = dh0 + r * h;
            const float *m = tmp + r * h;
            /* The LSTM's h reaches h_prev only through the gates; the GRU adds its direct
             * part d·z, which the row kernel left in d. */
            if (cell == OM_RNN_LSTM) memcpy(d, m, (size_t)h * sizeof(float));
            else for (int64_t j = 0; j < h; j++) d[j] += m[j];
        }
    }
    free(dstep);
    free(tmp);
    om_gemm_packed_free(&w_packed);
    return status;
}

/* The directions of one call, and the threads each direction may use when it runs alone. */
typedef struct {
    int cell, backward;
    int64_t ndir, t, b, h;
    const int64_t *lengths;
    const void *dirs;  /* ndir om_rnn_forward_args, or om_rnn_backward_args if backward */
    int fmt, nthreads;
} directions;

/* Thread `rank` of `size` runs directions rank, rank + size, ...: alone (size 1) each with all
 * the threads, else each on its own thread (regions nested inside then run on that thread, so
 * each direction computes exactly what it computes alone). */
static int run_dirs(const void *ctx, int rank, int size) {
    const directions *d = ctx;
    const int nt = size > 1 ? 1 : d->nthreads;
    int failed = 0;
    for (int64_t i = rank; i < d->ndir; i += size)
        failed |= (d->backward
                       ? backward_one(d->cell, d->t, d->b, d->h, d->lengths,
                                      (const om_rnn_backward_args *)d->dirs + i, d->fmt, nt)
                       : forward_one(d->cell, d->t, d->b, d->h, d->lengths,
                                     (const om_rnn_forward_args *)d->dirs + i, d->fmt, nt)) != 0;
    return failed;
}

/* Threads for the directions: one per direction when there are two and threads to spare. */
static int direction_threads(int64_t ndir, int nthreads) {
    return ndir > 1 && nthreads > 1 ? (int)(ndir < nthreads ? ndir : nthreads) : 1;
}

int om_rnn_forward_f32(int cell, int64_t ndir, int64_t t, int64_t b, int64_t h,
                       const int64_t *lengths, const om_rnn_forward_args *dirs, int half,
                       int nthreads) {
    const directions d = {cell, 0, ndir, t, b, h, lengths, dirs, operand_format(half), nthreads};
    return om_run_team(direction_threads(ndir, nthreads), run_dirs, &d) ? -1 : 0;
}

int om_rnn_backward_f32(int cell, int64_t ndir, int64_t t, int64_t b, int64_t h,
                        const int64_t *lengths, const om_rnn_backward_args *dirs, int half,
                        int nthreads) {
    const directions d = {cell, 1, ndir, t, b, h, lengths, dirs, operand_format(half), nthreads};
    return om_run_team(direction_threads(ndir, nthreads), run_dirs, &d) ? -1 : 0;
}

OM_PATH_DISPATCH(rnn, OM_ISA_TABLE)
