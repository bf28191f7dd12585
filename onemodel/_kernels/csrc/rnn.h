/* Recurrent layers (LSTM, GRU): one direction of one layer over a whole sequence.
 *
 * The caller (onemodel/functional/recurrent.py) computes the input projection of every step
 * in one matrix product, xw = x·W_ihᵀ + b_ih, laid out (T, B, G·H) with G = 4 (LSTM gates
 * i, f, g, o) or 3 (GRU gates r, z, n), PyTorch's order. Per step the driver (rnn.c) runs one
 * product hw = h·W_hhᵀ on the gemm kernel, then a row kernel (rnn_paths.c) that fuses the bias,
 * the gate nonlinearities and the state update; backward mirrors it step by step.
 *
 * Per-row lengths (packed-sequence meaning): row b runs steps 0..len[b]-1. At a later step its
 * state is carried unchanged, its output is exactly zero and its gate gradients are zero, so
 * the final state is the state at the row's last valid step. A reversed direction (reverse = 1)
 * runs each row from step len[b]-1 down to 0, starting from h0: every array stays in time
 * order, only the order of the steps changes.
 */
#ifndef OM_RNN_H
#define OM_RNN_H

#include <stdint.h>

#include "isa.h"

enum { OM_RNN_LSTM = 0, OM_RNN_GRU = 1 };

/* Row kernels, one row of H hidden units (pointers to that row's slices).
 * LSTM forward: pre = xw + (hw + b); gates = [σ(i), σ(f), tanh(g), σ(o)];
 *   c = f·c_prev + i·g; h = o·tanh(c).
 * LSTM backward: dh is the total gradient of h (output + recurrence), dc the gradient of c
 *   (updated in place to that of c_prev); writes dgates (pre-activation gradients).
 * GRU forward: r = σ(xr + (hr + br)), z = σ(xz + (hz + bz)), hn = hn_raw + bn,
 *   n = tanh(xn + r·hn), h = n + z·(h_prev - n); saves [r, z, n] and hn.
 * GRU backward: from dh writes dgx (gradient of xw's row) and dgh (of hw's row, which differs
 *   in the n block: it is multiplied by r), and replaces dh by its direct part dh·z. */
typedef void (*om_lstm_row_fn)(int64_t h, const float *xw, const float *hw, const float *b,
                               const float *c_prev, float *gates, float *c, float *hout);
typedef void (*om_lstm_row_bwd_fn)(int64_t h, const float *gates, const float *c_prev,
                                   const float *c, const float *dh, float *dc, float *dgates);
typedef void (*om_gru_row_fn)(int64_t h, const float *xw, const float *hw, const float *b,
                              const float *h_prev, float *gates, float *hn, float *hout);
typedef void (*om_gru_row_bwd_fn)(int64_t h, const float *gates, const float *hn,
                                  const float *h_prev, float *dh, float *dgx, float *dgh);

#define OM_RNN_DECLARE(isa)                                                                 \
    void om_lstm_row_f32_##isa(int64_t h, const float *xw, const float *hw, const float *b, \
                               const float *c_prev, float *gates, float *c, float *hout);   \
    void om_lstm_row_bwd_f32_##isa(int64_t h, const float *gates, const float *c_prev,      \
                                   const float *c, const float *dh, float *dc,              \
                                   float *dgates);                                          \
    void om_gru_row_f32_##isa(int64_t h, const float *xw, const float *hw, const float *b,  \
                              const float *h_prev, float *gates, float *hn, float *hout);   \
    void om_gru_row_bwd_f32_##isa(int64_t h, const float *gates, const float *hn,           \
                                  const float *h_prev, float *dh, float *dgx, float *dgh);
OM_RNN_DECLARE(scalar)
OM_RNN_DECLARE(sse2)
OM_RNN_DECLARE(avx2)
OM_RNN_DECLARE(avx512)
OM_RNN_DECLARE(neon)
#undef OM_RNN_DECLARE

/* One direction of a layer; all (T, ...) arrays in time order. Forward: xw (T, B, G·H); w_hh
 * (G·H, H); bias (G·H); h0, c0 (B, H) (c0, cs, c_n only for the LSTM and hn_lin only for the
 * GRU: NULL otherwise). Writes
 * y (T, B, H), gates (T, B, G·H), cs (T, B, H) (cell states), hn_lin (T, B, H) (W_hn·h + b_hn),
 * h_n and c_n (B, H). Backward: from those saved values and gy (T, B, H) (the gradient of y,
 * ignored at padded steps), g_hn and g_cn (B, H), writes dgx (T, B, G·H): the gradient of xw;
 * dgh (T, B, G·H): that of hw (GRU only; for the LSTM it equals dgx); dh0 and dc0 (B, H). */
typedef struct {
    int reverse;
    const float *xw, *w_hh, *bias, *h0, *c0;
    float *y, *gates, *cs, *hn_lin, *h_n, *c_n;
} om_rnn_forward_args;

typedef struct {
    int reverse;
    const float *w_hh, *h0, *c0, *y, *gates, *cs, *hn_lin, *gy, *g_hn, *g_cn;
    float *dgx, *dgh, *dh0, *dc0;
} om_rnn_backward_args;

/* Runs `ndir` independent directions (the two of a bidirectional layer) over T steps, with the
 * same lengths (B) in [0, T]. With two or more threads the directions run concurrently, each on
 * one thread (no barrier per step); a single direction uses every thread inside its steps.
 * half: 0, or 1 (2) for autocast's bfloat16 (float16) operands of the recurrent products.
 * Returns 0, or -1 when scratch memory could not be allocated. */
int om_rnn_forward_f32(int cell, int64_t ndir, int64_t t, int64_t b, int64_t h,
                       const int64_t *lengths, const om_rnn_forward_args *dirs, int half,
                       int nthreads);
int om_rnn_backward_f32(int cell, int64_t ndir, int64_t t, int64_t b, int64_t h,
                        const int64_t *lengths, const om_rnn_backward_args *dirs, int half,
                        int nthreads);

#endif
