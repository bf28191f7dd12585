/* The row kernels of rnn.h for one ISA path, written once.
 *
 * Not a standalone header: rnn_<isa>.c includes its vmath header, defines RNN_LANES, RNN_V,
 * RNN_LD, RNN_ST, RNN_SET1, RNN_ADD, RNN_SUB, RNN_MUL, RNN_SIG, RNN_TANH for its vectors and
 * RNN_KERNEL(name) (name with the path's suffix), then includes this file. Each row runs the
 * vector formulas of rnn_body.h on whole vectors and the scalar ones (vmath.h) on the last
 * h % RNN_LANES units: the two are bit-identical, so the split changes nothing.
 */
#include <stdint.h>

#include "rnn.h"
#include "vmath.h"

#define RB_V float
#define RB_FN(name) name##_one
#define RB_LD(p) (*(p))
#define RB_ST(p, v) (*(p) = (v))
#define RB_SET1(c) (c)
#define RB_ADD(a, b) ((a) + (b))
#define RB_SUB(a, b) ((a) - (b))
#define RB_MUL(a, b) ((a) * (b))
#define RB_SIG(x) om_sigmoid_scalar(x)
#define RB_TANH(x) om_tanh_scalar(x)
#include "rnn_body.h"
#undef RB_V
#undef RB_FN
#undef RB_LD
#undef RB_ST
#undef RB_SET1
#undef RB_ADD
#undef RB_SUB
#undef RB_MUL
#undef RB_SIG
#undef RB_TANH

#if RNN_LANES > 1
#define RB_V RNN_V
#define RB_FN(name) name##_vec
#define RB_LD(p) RNN_LD(p)
#define RB_ST(p, v) RNN_ST(p, v)
#define RB_SET1(c) RNN_SET1(c)
#define RB_ADD(a, b) RNN_ADD(a, b)
#define RB_SUB(a, b) RNN_SUB(a, b)
#define RB_MUL(a, b) RNN_MUL(a, b)
#define RB_SIG(x) RNN_SIG(x)
#define RB_TANH(x) RNN_TANH(x)
#include "rnn_body.h"
#define RNN_ROW(name, args)                                                              \
    int64_t j = 0;                                                                       \
    for (; j + RNN_LANES <= h; j += RNN_LANES) name##_vec args;                          \
    for (; j < h; j++) name##_one args;
#else
#define RNN_ROW(name, args) for (int64_t j = 0; j < h; j++) name##_one args;
#endif

void RNN_KERNEL(om_lstm_row_f32)(int64_t h, const float *xw, const float *hw, const float *b,
                                 const float *c_prev, float *gates, float *c, float *hout) {
    RNN_ROW(lstm_el, (h, j, xw, hw, b, c_prev, gates, c, hout))
}

void RNN_KERNEL(om_lstm_row_bwd_f32)(int64_t h, const float *gates, const float *c_prev,
                                     const float *c, const float *dh, float *dc,
                                     float *dgates) {
    RNN_ROW(lstm_bwd_el, (h, j, gates, c_prev, c, dh, dc, dgates))
}

void RNN_KERNEL(om_gru_row_f32)(int64_t h, const float *xw, const float *hw, const float *b,
                                const float *h_prev, float *gates, float *hn, float *hout) {
    RNN_ROW(gru_el, (h, j, xw, hw, b, h_prev, gates, hn, hout))
}

void RNN_KERNEL(om_gru_row_bwd_f32)(int64_t h, const float *gates, const float *hn,
                                    const float *h_prev, float *dh, float *dgx, float *dgh) {
    RNN_ROW(gru_bwd_el, (h, j, gates, hn, h_prev, dh, dgx, dgh))
}
