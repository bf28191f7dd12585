/* The element formulas of the recurrent cells (rnn.h), written once over the vector vocabulary
 * (simd/scalar.h), the cell functions named OMV_FN(lstm_el), ...
 *
 * Not a standalone header (no include guard): rnn_paths.c includes it, on a vector path, once on
 * single floats (the scalar cells, for the tail of every row) and once on its vectors; on the
 * scalar path once. OMV_FN(om_sigmoid) and OMV_FN(om_tanh) are the exact
 * functions of vmath, bit-identical on every path, with their own FMA policy. Each formula here
 * is a fixed sequence of rounded operations, no fused multiply-add, so every path gives the same
 * bits.
 */

/* A gate's pre-activation at offset o: xw + (hw + b), in that order. */
static inline OMV OMV_FN(rnn_pre)(const float *xw, const float *hw, const float *b, int64_t o) {
    return OMV_ADD(OMV_LOAD(xw + o), OMV_ADD(OMV_LOAD(hw + o), OMV_LOAD(b + o)));
}

static inline void OMV_FN(lstm_el)(int64_t h, int64_t j, const float *xw, const float *hw,
                                   const float *b, const float *c_prev, float *gates, float *c,
                                   float *hout) {
    OMV i = OMV_FN(om_sigmoid)(OMV_FN(rnn_pre)(xw, hw, b, j));
    OMV f = OMV_FN(om_sigmoid)(OMV_FN(rnn_pre)(xw, hw, b, h + j));
    OMV g = OMV_FN(om_tanh)(OMV_FN(rnn_pre)(xw, hw, b, 2 * h + j));
    OMV o = OMV_FN(om_sigmoid)(OMV_FN(rnn_pre)(xw, hw, b, 3 * h + j));
    OMV cn = OMV_ADD(OMV_MUL(f, OMV_LOAD(c_prev + j)), OMV_MUL(i, g));
    OMV_STORE(gates + j, i);
    OMV_STORE(gates + h + j, f);
    OMV_STORE(gates + 2 * h + j, g);
    OMV_STORE(gates + 3 * h + j, o);
    OMV_STORE(c + j, cn);
    OMV_STORE(hout + j, OMV_MUL(o, OMV_FN(om_tanh)(cn)));
}

/* σ'(y)·d = (d·(1 - y))·y and tanh'(y)·d = d·(1 - y·y), as vmath.h's gradients. */
static inline void OMV_FN(lstm_bwd_el)(int64_t h, int64_t j, const float *gates,
                                       const float *c_prev, const float *c, const float *dh,
                                       float *dc, float *dgates) {
    OMV one = OMV_SET1(1.0f);
    OMV i = OMV_LOAD(gates + j), f = OMV_LOAD(gates + h + j);
    OMV g = OMV_LOAD(gates + 2 * h + j), o = OMV_LOAD(gates + 3 * h + j);
    OMV tc = OMV_FN(om_tanh)(OMV_LOAD(c + j));
    OMV d = OMV_LOAD(dh + j);
    OMV dct = OMV_ADD(OMV_LOAD(dc + j), OMV_MUL(OMV_MUL(d, o), OMV_SUB(one, OMV_MUL(tc, tc))));
    OMV di = OMV_MUL(dct, g), dg = OMV_MUL(dct, i);
    OMV df = OMV_MUL(dct, OMV_LOAD(c_prev + j)), dout = OMV_MUL(d, tc);
    OMV_STORE(dgates + j, OMV_MUL(OMV_MUL(di, OMV_SUB(one, i)), i));
    OMV_STORE(dgates + h + j, OMV_MUL(OMV_MUL(df, OMV_SUB(one, f)), f));
    OMV_STORE(dgates + 2 * h + j, OMV_MUL(dg, OMV_SUB(one, OMV_MUL(g, g))));
    OMV_STORE(dgates + 3 * h + j, OMV_MUL(OMV_MUL(dout, OMV_SUB(one, o)), o));
    OMV_STORE(dc + j, OMV_MUL(dct, f));
}

static inline void OMV_FN(gru_el)(int64_t h, int64_t j, const float *xw, const float *hw,
                                  const float *b, const float *h_prev, float *gates, float *hn,
                                  float *hout) {
    OMV r = OMV_FN(om_sigmoid)(OMV_FN(rnn_pre)(xw, hw, b, j));
    OMV z = OMV_FN(om_sigmoid)(OMV_FN(rnn_pre)(xw, hw, b, h + j));
    OMV hl = OMV_ADD(OMV_LOAD(hw + 2 * h + j), OMV_LOAD(b + 2 * h + j));
    OMV n = OMV_FN(om_tanh)(OMV_ADD(OMV_LOAD(xw + 2 * h + j), OMV_MUL(r, hl)));
    OMV_STORE(gates + j, r);
    OMV_STORE(gates + h + j, z);
    OMV_STORE(gates + 2 * h + j, n);
    OMV_STORE(hn + j, hl);
    OMV_STORE(hout + j, OMV_ADD(n, OMV_MUL(z, OMV_SUB(OMV_LOAD(h_prev + j), n))));
}

static inline void OMV_FN(gru_bwd_el)(int64_t h, int64_t j, const float *gates, const float *hn,
                                      const float *h_prev, float *dh, float *dgx, float *dgh) {
    OMV one = OMV_SET1(1.0f);
    OMV r = OMV_LOAD(gates + j), z = OMV_LOAD(gates + h + j), n = OMV_LOAD(gates + 2 * h + j);
    OMV d = OMV_LOAD(dh + j);
    OMV dnp = OMV_MUL(OMV_MUL(d, OMV_SUB(one, z)), OMV_SUB(one, OMV_MUL(n, n)));
    OMV dz = OMV_MUL(d, OMV_SUB(OMV_LOAD(h_prev + j), n));
    OMV drp = OMV_MUL(OMV_MUL(OMV_MUL(dnp, OMV_LOAD(hn + j)), OMV_SUB(one, r)), r);
    OMV dzp = OMV_MUL(OMV_MUL(dz, OMV_SUB(one, z)), z);
    OMV_STORE(dgx + j, drp);
    OMV_STORE(dgh + j, drp);
    OMV_STORE(dgx + h + j, dzp);
    OMV_STORE(dgh + h + j, dzp);
    OMV_STORE(dgx + 2 * h + j, dnp);
    OMV_STORE(dgh + 2 * h + j, OMV_MUL(dnp, r));
    OMV_STORE(dh + j, OMV_MUL(d, z));
}
