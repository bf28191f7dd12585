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

/* One step's rows, for the threads' shares: the direction's arrays (fwd or bwd), the step s and
 * the step's product hw (h·W_hhᵀ forward; the gate gradients' product with W_hh backward, whose
 * gate gradients go to dstep). */
typedef struct {
    int cell;
    int64_t s, b, h;
    const int64_t *lengths;
    const om_rnn_forward_args *fwd;
    const om_rnn_backward_args *bwd;
    const float *hw;
    float *dstep;
} step_rows;

static void forward_rows(const void *ctx, int64_t begin, int64_t end) {
    const step_rows *st = ctx;
    const om_rnn_forward_args *a = st->fwd;
    const int64_t s = st->s, b = st->b, h = st->h, gh = gates_of(st->cell) * h;
    const size_t hb = (size_t)h * sizeof(float);
    for (int64_t r = begin; r < end; r++) {
        const int64_t row = time_at(a->reverse, s, st->lengths[r]) * b + r;
        float *yr = a->y + row * h, *gr = a->gates + row * gh;
        if (s >= st->lengths[r]) {  /* past the row's end: state carried, output zero */
            memset(yr, 0, hb);
            memset(gr, 0, (size_t)gh * sizeof(float));
            if (st->cell == OM_RNN_LSTM) memcpy(a->cs + row * h, a->c_n + r * h, hb);
            else memset(a->hn_lin + row * h, 0, hb);
            continue;
        }
        if (st->cell == OM_RNN_LSTM) {
            lstm_row[om_isa](h, a->xw + row * gh, st->hw + r * gh, a->bias, a->c_n + r * h, gr,
                             a->cs + row * h, yr);
            memcpy(a->c_n + r * h, a->cs + row * h, hb);
        } else {
            gru_row[om_isa](h, a->xw + row * gh, st->hw + r * gh, a->bias, a->h_n + r * h, gr,
                            a->hn_lin + row * h, yr);
        }
        memcpy(a->h_n + r * h, yr, hb);
    }
}

static int forward_one(int cell, int64_t t, int64_t b, int64_t h, const int64_t *lengths,
                       const om_rnn_forward_args *a, int fmt, int nthreads) {
    const int64_t gh = gates_of(cell) * h;
    float *hw = malloc((size_t)(b * gh > 0 ? b * gh : 1) * sizeof(float));
    const om_gemm_operand w_op = {a->w_hh, 0, 1, fmt, NULL}, h_op = {a->h_n, 0, 0, fmt, NULL};
    om_gemm_packed w_packed = {0};  /* op(B) = W_hhᵀ, H x G·H */
    if (hw == NULL || om_gemm_pack_b(h, gh, w_op, &w_packed) != 0) {
        free(hw);
        om_gemm_packed_free(&w_packed);
        return -1;
    }
    memcpy(a->h_n, a->h0, (size_t)(b * h) * sizeof(float));
    if (cell == OM_RNN_LSTM) memcpy(a->c_n, a->c0, (size_t)(b * h) * sizeof(float));
    const int nt = om_threads_for(b * gh, OM_RNN_GRAIN, nthreads);
    int status = 0;
    for (int64_t s = 0; s < t && status == 0; s++) {
        if (om_gemm_packed_product(b, h_op, &w_packed, hw, nthreads) != 0) {
            status = -1;
            break;
        }
        const step_rows rows = {cell, s, b, h, lengths, a, NULL, hw, NULL};
        om_run_range(nt, b, forward_rows, &rows);
    }
    free(hw);
    om_gemm_packed_free(&w_packed);
    return status;
}

/* The gate gradients of a step's rows (into dstep, and dgx, dgh), dh0 and dc0 updated. */
static void backward_rows(const void *ctx, int64_t begin, int64_t end) {
    const step_rows *st = ctx;
    const om_rnn_backward_args *a = st->bwd;
    const int64_t s = st->s, b = st->b, h = st->h, gh = gates_of(st->cell) * h;
    float *dg_all = st->cell == OM_RNN_LSTM ? a->dgx : a->dgh;
    for (int64_t r = begin; r < end; r++) {
        const int64_t row = time_at(a->reverse, s, st->lengths[r]) * b + r;
        float *ds = st->dstep + r * gh;
        if (s >= st->lengths[r]) {  /* padded step: no gate gradient, state gradient carried */
            memset(ds, 0, (size_t)gh * sizeof(float));
            memset(a->dgx + row * gh, 0, (size_t)gh * sizeof(float));
            if (st->cell == OM_RNN_GRU) memset(a->dgh + row * gh, 0, (size_t)gh * sizeof(float));
            continue;
        }
        const int64_t prev = s > 0 ? time_at(a->reverse, s - 1, st->lengths[r]) * b + r : -1;
        float *d = a->dh0 + r * h;
        const float *g = a->gy + row * h;
        for (int64_t j = 0; j < h; j++) d[j] += g[j];
        if (st->cell == OM_RNN_LSTM) {
            const float *c_prev = prev >= 0 ? a->cs + prev * h : a->c0 + r * h;
            lstm_row_bwd[om_isa](h, a->gates + row * gh, c_prev, a->cs + row * h, d,
                                 a->dc0 + r * h, ds);
        } else {
            const float *h_prev = prev >= 0 ? a->y + prev * h : a->h0 + r * h;
            gru_row_bwd[om_isa](h, a->gates + row * gh, a->hn_lin + row * h, h_prev, d,
                                a->dgx + row * gh, ds);
        }
        memcpy(dg_all + row * gh, ds, (size_t)gh * sizeof(float));
    }
}

/* dh0 of a step's rows from the gate gradients' product with W_hh. */
static void backward_rows_dh(const void *ctx, int64_t begin, int64_t end) {
    const step_rows *st = ctx;
    const int64_t h = st->h;
    for (int64_t r = begin; r < end; r++) {
        if (st->s >= st->lengths[r]) continue;
        float *d = st->bwd->dh0 + r * h;
        const float *m = st->hw + r * h;
        /* The LSTM's h reaches h_prev only through the gates; the GRU adds its direct
         * part d·z, which the row kernel left in d. */
        if (st->cell == OM_RNN_LSTM) memcpy(d, m, (size_t)h * sizeof(float));
        else for (int64_t j = 0; j < h; j++) d[j] += m[j];
    }
}

static int backward_one(int cell, int64_t t, int64_t b, int64_t h, const int64_t *lengths,
                        const om_rnn_backward_args *a, int fmt, int nthreads) {
    const int64_t gh = gates_of(cell) * h;
    /* dstep: the step's gate gradients as one (B, G·H) matrix for the product with W_hh (the
     * rows' time indices differ when reversed); tmp: that product, (B, H). */
    float *dstep = malloc((size_t)(b * gh > 0 ? b * gh : 1) * sizeof(float));
    float *tmp = malloc((size_t)(b * h > 0 ? b * h : 1) * sizeof(float));
    const om_gemm_operand w_op = {a->w_hh, 0, 0, fmt, NULL}, d_op = {dstep, 0, 0, fmt, NULL};
    om_gemm_packed w_packed = {0};  /* op(B) = W_hh, G·H x H */
    if (dstep == NULL || tmp == NULL || om_gemm_pack_b(gh, h, w_op, &w_packed) != 0) {
        free(dstep);
        free(tmp);
        om_gemm_packed_free(&w_packed);
        return -1;
    }
    /* dh0 and dc0 hold the running gradients of h and c, from the final state down. */
    memcpy(a->dh0, a->g_hn, (size_t)(b * h) * sizeof(float));
    if (cell == OM_RNN_LSTM) memcpy(a->dc0, a->g_cn, (size_t)(b * h) * sizeof(float));
    const int nt = om_threads_for(b * gh, OM_RNN_GRAIN, nthreads);
    int status = 0;
    for (int64_t s = t - 1; s >= 0; s--) {
        const step_rows rows = {cell, s, b, h, lengths, NULL, a, tmp, dstep};
        om_run_range(nt, b, backward_rows, &rows);
        if (om_gemm_packed_product(b, d_op, &w_packed, tmp, nthreads) != 0) {
            status = -1;
            break;
        }
        om_run_range(nt, b, backward_rows_dh, &rows);
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
 * the threads, else each on its own thread (its products and rows then run on that thread, so
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
