/* The row kernels of rnn.h, written once and compiled once per ISA path (path.h) over its vmath
 * header and its simd/<path>.h. A vector path first instantiates rnn_body.h on simd/scalar.h
 * (the scalar cells). Each row runs the cells of rnn_body.h on whole vectors and the scalar
 * cells on the last h % OMV_LANES units: the two are bit-identical, so the split changes
 * nothing; the scalar path (plain floats) is the reference.
 */
#include "path.h"

#include <stdint.h>

#include "rnn.h"
#include "vmath.h"
#include OM_VMATH_HEADER
#if !OM_PATH_IS(scalar)
#include "simd/scalar.h"
#include "rnn_body.h"
#include "simd/undef.h"
#endif
#include OM_SIMD_HEADER
#include "rnn_body.h"

#define RNN_ROW(name, args)                                                              \
    int64_t j = 0;                                                                       \
    for (; j + OMV_LANES <= h; j += OMV_LANES) OMV_FN(name) args;                        \
    for (; j < h; j++) name##_scalar args;

void OMV_FN(om_lstm_row_f32)(int64_t h, const float *xw, const float *hw, const float *b,
                             const float *c_prev, float *gates, float *c, float *hout) {
    RNN_ROW(lstm_el, (h, j, xw, hw, b, c_prev, gates, c, hout))
}

void OMV_FN(om_lstm_row_bwd_f32)(int64_t h, const float *gates, const float *c_prev,
                                 const float *c, const float *dh, float *dc,
                                 float *dgates) {
    RNN_ROW(lstm_bwd_el, (h, j, gates, c_prev, c, dh, dc, dgates))
}

void OMV_FN(om_gru_row_f32)(int64_t h, const float *xw, const float *hw, const float *b,
                            const float *h_prev, float *gates, float *hn, float *hout) {
    RNN_ROW(gru_el, (h, j, xw, hw, b, h_prev, gates, hn, hout))
}

void OMV_FN(om_gru_row_bwd_f32)(int64_t h, const float *gates, const float *hn,
                                const float *h_prev, float *dh, float *dgx, float *dgh) {
    RNN_ROW(gru_bwd_el, (h, j, gates, hn, h_prev, dh, dgx, dgh))
}

OM_PATH_PROBE(rnn, OM_PATH)
