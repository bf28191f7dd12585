/* The transcendentals of vmath.h on SIMD vectors, written once over a small set of macros.
 *
 * Not a standalone header: vmath_sse2.h, vmath_avx2.h and vmath_avx512.h define the OMV_
 * macros for their vector type and include this file (so it has no include guard). Each
 * function is a line-by-line translation of its scalar reference in vmath.h: the same
 * operations in the same order, the same constants, selects where the scalar code has a
 * conditional expression. No fused multiply-add. Results are bit-identical to vmath.h.
 *
 * Macros: OMV (float vector), OMM (comparison mask), OMI (int32 vector), OMV_FN(name) (the
 * function name with its ISA suffix), OMV_SET1, OMV_ADD/SUB/MUL/DIV, OMV_LT/LE/EQ (ordered
 * compares, false on NaN), OMV_ISNAN, OMV_SEL(mask, if_true, if_false), OMV_XOR, OMV_AS_I,
 * OMV_AS_F (bit casts), OMV_I2F (exact int to float), OMI_SET1, OMI_ADD, OMI_SUB, OMI_AND,
 * OMI_SRL, OMI_SRA, OMI_SLL (shifts by a constant), OMI_SEL.
 */

#define OMV_C(c) OMV_SET1(c)

static inline OMV OMV_FN(om_exp_parts)(OMV hi, OMV lo, OMI *n_out) {
    OMV xc = OMV_SEL(OMV_LT(OMV_C(OM_EXP_MAX), hi), OMV_C(OM_EXP_MAX), hi);
    xc = OMV_SEL(OMV_LT(xc, OMV_C(OM_EXP_MIN)), OMV_C(OM_EXP_MIN), xc);
    OMV t = OMV_ADD(OMV_MUL(xc, OMV_C(OM_LOG2E)), OMV_C(OM_ROUND_MAGIC));
    OMV n = OMV_SUB(t, OMV_C(OM_ROUND_MAGIC));
    *n_out = OMI_SUB(OMV_AS_I(t), OMV_AS_I(OMV_C(OM_ROUND_MAGIC)));
    OMV r = OMV_SUB(xc, OMV_MUL(n, OMV_C(OM_LN2_HI)));
    r = OMV_SUB(r, OMV_MUL(n, OMV_C(OM_LN2_LO)));
    r = OMV_ADD(r, lo);
    OMV y = OMV_ADD(OMV_MUL(OMV_C(OM_EXP_P0), r), OMV_C(OM_EXP_P1));
    y = OMV_ADD(OMV_MUL(y, r), OMV_C(OM_EXP_P2));
    y = OMV_ADD(OMV_MUL(y, r), OMV_C(OM_EXP_P3));
    y = OMV_ADD(OMV_MUL(y, r), OMV_C(OM_EXP_P4));
    y = OMV_ADD(OMV_MUL(y, r), OMV_C(OM_EXP_P5));
    return OMV_ADD(OMV_ADD(OMV_MUL(y, OMV_MUL(r, r)), r), OMV_C(1.0f));
}

static inline OMV OMV_FN(om_ldexp2)(OMV p, OMI n) {
    OMI n1 = OMI_SRA(n, 1);
    OMI n2 = OMI_SUB(n, n1);
    OMV s1 = OMV_AS_F(OMI_SLL(OMI_ADD(n1, OMI_SET1(127)), 23));
    OMV s2 = OMV_AS_F(OMI_SLL(OMI_ADD(n2, OMI_SET1(127)), 23));
    return OMV_MUL(OMV_MUL(p, s1), s2);
}

static inline OMV OMV_FN(om_exp)(OMV x) {
    OMI n;
    OMV p = OMV_FN(om_exp_parts)(x, OMV_C(0.0f), &n);
    OMV y = OMV_FN(om_ldexp2)(p, n);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

static inline OMV OMV_FN(om_log_kernel)(OMV f, OMV *hfsq_out) {
    OMV s = OMV_DIV(f, OMV_ADD(OMV_C(2.0f), f));
    OMV z = OMV_MUL(s, s);
    OMV w = OMV_MUL(z, z);
    OMV t1 = OMV_MUL(w, OMV_ADD(OMV_C(OM_LOG_LG2), OMV_MUL(w, OMV_C(OM_LOG_LG4))));
    OMV t2 = OMV_MUL(z, OMV_ADD(OMV_C(OM_LOG_LG1), OMV_MUL(w, OMV_C(OM_LOG_LG3))));
    OMV r = OMV_ADD(t2, t1);
    OMV hfsq = OMV_MUL(OMV_MUL(OMV_C(0.5f), f), f);
    *hfsq_out = hfsq;
    return OMV_MUL(s, OMV_ADD(hfsq, r));
}

static inline OMV OMV_FN(om_log)(OMV x) {
    OMM sub = OMV_LT(x, OMV_C(1.17549435e-38f));
    OMV xs = OMV_SEL(sub, OMV_MUL(x, OMV_C(33554432.0f)), x);
    OMI k0 = OMI_SEL(sub, OMI_SET1(-25), OMI_SET1(0));
    OMI ix = OMI_ADD(OMV_AS_I(xs), OMI_SET1((int32_t)(0x3f800000u - OM_SQRT_HALF_BITS)));
    OMI k = OMI_ADD(OMI_SUB(OMI_SRL(ix, 23), OMI_SET1(127)), k0);
    OMV m = OMV_AS_F(OMI_ADD(OMI_AND(ix, OMI_SET1(0x007fffff)), OMI_SET1(OM_SQRT_HALF_BITS)));
    OMV f = OMV_SUB(m, OMV_C(1.0f));
    OMV hfsq;
    OMV sr = OMV_FN(om_log_kernel)(f, &hfsq);
    OMV dk = OMV_I2F(k);
    OMV y = OMV_ADD(OMV_ADD(OMV_SUB(OMV_ADD(sr, OMV_MUL(dk, OMV_C(OM_LOG_LN2_LO))), hfsq), f),
                    OMV_MUL(dk, OMV_C(OM_LOG_LN2_HI)));
    OMV inf = OMV_AS_F(OMI_SET1(OM_INF_BITS));
    y = OMV_SEL(OMV_EQ(x, inf), x, y);
    y = OMV_SEL(OMV_EQ(x, OMV_C(0.0f)), OMV_XOR(inf, OMV_C(-0.0f)), y);
    y = OMV_SEL(OMV_LT(x, OMV_C(0.0f)), OMV_AS_F(OMI_SET1(OM_NAN_BITS)), y);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

#undef OMV_C
