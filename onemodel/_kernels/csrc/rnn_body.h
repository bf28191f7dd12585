/* The element formulas of the recurrent cells (rnn.h), written once over a few macros.
 *
 * Not a standalone header (no include guard): rnn_impl.h includes it once for plain floats
 * (the scalar reference, also used for the tail of every row) and once for the ISA's vectors.
 * RB_V (value type), RB_FN(name) (name with a suffix), RB_LD(p) / RB_ST(p, v) (unaligned),
 * RB_SET1, RB_ADD, RB_SUB, RB_MUL, RB_SIG and RB_TANH (the exact functions of vmath.h or their
 * vector translations, bit-identical, with their own FMA policy). Each formula here is a fixed
 * sequence of rounded operations, no fused multiply-add, so every path gives the same bits.
 */

static inline void RB_FN(lstm_el)(int64_t h, int64_t j, const float *xw, const float *hw,
                                  const float *b, const float *c_prev, float *gates, float *c,
                                  float *hout) {
    RB_V i = RB_SIG(RB_ADD(RB_LD(xw + j), RB_ADD(RB_LD(hw + j), RB_LD(b + j))));
    RB_V f = RB_SIG(RB_ADD(RB_LD(xw + h + j), RB_ADD(RB_LD(hw + h + j), RB_LD(b + h + j))));
    RB_V g = RB_TANH(RB_ADD(RB_LD(xw + 2 * h + j),
                            RB_ADD(RB_LD(hw + 2 * h + j), RB_LD(b + 2 * h + j))));
    RB_V o = RB_SIG(RB_ADD(RB_LD(xw + 3 * h + j),
                           RB_ADD(RB_LD(hw + 3 * h + j), RB_LD(b + 3 * h + j))));
    RB_V cn = RB_ADD(RB_MUL(f, RB_LD(c_prev + j)), RB_MUL(i, g));
    RB_ST(gates + j, i);
    RB_ST(gates + h + j, f);
    RB_ST(gates + 2 * h + j, g);
    RB_ST(gates + 3 * h + j, o);
    RB_ST(c + j, cn);
    RB_ST(hout + j, RB_MUL(o, RB_TANH(cn)));
}

/* σ'(y)·d = (d·(1 - y))·y and tanh'(y)·d = d·(1 - y·y), as vmath.h's gradients. */
static inline void RB_FN(lstm_bwd_el)(int64_t h, int64_t j, const float *gates,
                                      const float *c_prev, const float *c, const float *dh,
                                      float *dc, float *dgates) {
    RB_V one = RB_SET1(1.0f);
    RB_V i = RB_LD(gates + j), f = RB_LD(gates + h + j);
    RB_V g = RB_LD(gates + 2 * h + j), o = RB_LD(gates + 3 * h + j);
    RB_V tc = RB_TANH(RB_LD(c + j));
    RB_V d = RB_LD(dh + j);
    RB_V dct = RB_ADD(RB_LD(dc + j), RB_MUL(RB_MUL(d, o), RB_SUB(one, RB_MUL(tc, tc))));
    RB_V di = RB_MUL(dct, g), dg = RB_MUL(dct, i);
    RB_V df = RB_MUL(dct, RB_LD(c_prev + j)), dout = RB_MUL(d, tc);
    RB_ST(dgates + j, RB_MUL(RB_MUL(di, RB_SUB(one, i)), i));
    RB_ST(dgates + h + j, RB_MUL(RB_MUL(df, RB_SUB(one, f)), f));
    RB_ST(dgates + 2 * h + j, RB_MUL(dg, RB_SUB(one, RB_MUL(g, g))));
    RB_ST(dgates + 3 * h + j, RB_MUL(RB_MUL(dout, RB_SUB(one, o)), o));
    RB_ST(dc + j, RB_MUL(dct, f));
}

static inline void RB_FN(gru_el)(int64_t h, int64_t j, const float *xw, const float *hw,
                                 const float *b, const float *h_prev, float *gates, float *hn,
                                 float *hout) {
    RB_V r = RB_SIG(RB_ADD(RB_LD(xw + j), RB_ADD(RB_LD(hw + j), RB_LD(b + j))));
    RB_V z = RB_SIG(RB_ADD(RB_LD(xw + h + j), RB_ADD(RB_LD(hw + h + j), RB_LD(b + h + j))));
    RB_V hl = RB_ADD(RB_LD(hw + 2 * h + j), RB_LD(b + 2 * h + j));
    RB_V n = RB_TANH(RB_ADD(RB_LD(xw + 2 * h + j), RB_MUL(r, hl)));
    RB_ST(gates + j, r);
    RB_ST(gates + h + j, z);
    RB_ST(gates + 2 * h + j, n);
    RB_ST(hn + j, hl);
    RB_ST(hout + j, RB_ADD(n, RB_MUL(z, RB_SUB(RB_LD(h_prev + j), n))));
}

static inline void RB_FN(gru_bwd_el)(int64_t h, int64_t j, const float *gates, const float *hn,
                                     const float *h_prev, float *dh, float *dgx, float *dgh) {
    RB_V one = RB_SET1(1.0f);
    RB_V r = RB_LD(gates + j), z = RB_LD(gates + h + j), n = RB_LD(gates + 2 * h + j);
    RB_V d = RB_LD(dh + j);
    RB_V dnp = RB_MUL(RB_MUL(d, RB_SUB(one, z)), RB_SUB(one, RB_MUL(n, n)));
    RB_V dz = RB_MUL(d, RB_SUB(RB_LD(h_prev + j), n));
    RB_V drp = RB_MUL(RB_MUL(RB_MUL(dnp, RB_LD(hn + j)), RB_SUB(one, r)), r);
    RB_V dzp = RB_MUL(RB_MUL(dz, RB_SUB(one, z)), z);
    RB_ST(dgx + j, drp);
    RB_ST(dgh + j, drp);
    RB_ST(dgx + h + j, dzp);
    RB_ST(dgh + h + j, dzp);
    RB_ST(dgx + 2 * h + j, dnp);
    RB_ST(dgh + 2 * h + j, RB_MUL(dnp, r));
    RB_ST(dh + j, RB_MUL(d, z));
}
