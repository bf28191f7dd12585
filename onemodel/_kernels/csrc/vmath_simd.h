/* The transcendentals, written once over the vector vocabulary (simd/scalar.h), for every path.
 *
 * Not a standalone header: vmath.h (the scalar path: single floats) and vmath_sse2.h,
 * vmath_avx2.h, vmath_avx512.h and vmath_neon.h include it after their simd/<path>.h (so it has
 * no include guard); the constants, the tables and the notes on each method are in vmath.h.
 * Besides the vocabulary, the including header defines OMV_FN(om_tanh_lookup)(i, c): c[k] =
 * om_tanh_rows[i][k] per lane, for k in [0, 8), and optionally OMV_SCALEF(p, n) (p 2^n for
 * integral n, one rounding) and OMV_NOT_POSITIVE_NORMAL(x) (the mask of lanes that are not
 * positive, normal and finite). OMV_NONE is only ever used to skip selects that would keep
 * every lane.
 */

#define OMV_C(c) OMV_SET1(c)

/* n = round(x / ln2) and r = x - n ln2 (Cody-Waite), for x in [OM_EXP_MIN, OM_EXP_MAX]. */
static inline OMV OMV_FN(om_exp_reduce)(OMV x, OMV *n_out) {
    OMV n = OMV_SUB(OMV_ADD(OMV_MUL(x, OMV_C(OM_LOG2E)), OMV_C(OM_ROUND_MAGIC)),
                    OMV_C(OM_ROUND_MAGIC));
    *n_out = n;
    OMV r = OMV_SUB(x, OMV_MUL(n, OMV_C(OM_LN2_HI)));
    return OMV_SUB(r, OMV_MUL(n, OMV_C(OM_LN2_LO)));
}

/* exp(r) - 1 on the reduced range, as r + r^2 P(r) (Horner, no fma). */
static inline OMV OMV_FN(om_expm1_poly)(OMV r) {
    OMV y = OMV_ADD(OMV_MUL(OMV_C(OM_EXP_P4), r), OMV_C(OM_EXP_P3));
    y = OMV_ADD(OMV_MUL(y, r), OMV_C(OM_EXP_P2));
    y = OMV_ADD(OMV_MUL(y, r), OMV_C(OM_EXP_P1));
    y = OMV_ADD(OMV_MUL(y, r), OMV_C(OM_EXP_P0));
    return OMV_ADD(OMV_MUL(y, OMV_MUL(r, r)), r);
}

/* A NaN becomes OM_EXP_MAX (om_minf), a finite argument whose result the caller replaces. */
static inline OMV OMV_FN(om_exp_clamp)(OMV x) {
    return OMV_MAX(OMV_MIN(x, OMV_C(OM_EXP_MAX)), OMV_C(OM_EXP_MIN));
}

/* exp(hi + lo) = (1 + q) 2^n, returning q = expm1 of the reduced argument, in about
 * [-0.3, 0.42]: the caller scales (om_ldexp2_scalar), possibly after multiplying by a factor m as
 * m + m q, which rounds once where m (1 + q) would round twice, and so that a denormal result
 * is rounded only once. lo is a small correction (|lo| < 2^-10) carrying the low part of an
 * argument known more precisely than one float; n is derived from hi alone. */
static inline OMV OMV_FN(om_expm1_parts)(OMV hi, OMV lo, OMV *n_out) {
    OMV r = OMV_FN(om_exp_reduce)(OMV_FN(om_exp_clamp)(hi), n_out);
    return OMV_FN(om_expm1_poly)(OMV_ADD(r, lo));
}

#ifdef OMV_SCALEF
/* p 2^n rounded once, which is what the two products of om_ldexp2_scalar give (vmath.h). */
static inline OMV OMV_FN(om_ldexp2)(OMV p, OMV n) { return OMV_SCALEF(p, n); }
#else
/* p * 2^n, n an integer in [-159, 128], rounded once: two factors 2^(n>>1) and 2^(n - (n>>1)),
 * both normal; the first product is exact for every p the callers pass (|p| >= 2^-40), so only
 * the second rounds (gradual underflow, or inf). That is the one rounding of AVX-512's scalef. */
static inline OMV OMV_FN(om_ldexp2)(OMV p, OMV n) {
    OMI ni = OMV_F2I(n);
    OMI n1 = OMI_SRA(ni, 1);
    OMI n2 = OMI_SUB(ni, n1);
    OMV s1 = OMV_AS_F(OMI_SLL(OMI_ADD(n1, OMI_SET1(127)), 23));
    OMV s2 = OMV_AS_F(OMI_SLL(OMI_ADD(n2, OMI_SET1(127)), 23));
    return OMV_MUL(OMV_MUL(p, s1), s2);
}
#endif

/* exp: max error 0.989 ulp (exhaustive sweep, at -27.379). A vector with lanes whose result
 * rounds to +0 (x <= OM_EXP_ZERO: a causal mask's -inf, say) computes them at 0 and replaces
 * them by +0, the same bits: their products would underflow, which costs a microcode assist on
 * x86 (2.4x the time). The test costs less than the selects where no lane is that small. */
static inline OMV OMV_FN(om_exp)(OMV x) {
    OMV n;
    OMM zero = OMV_LE(x, OMV_C(OM_EXP_ZERO));
    const int some_zero = !OMV_NONE(zero);
    if (some_zero) x = OMV_SEL(zero, OMV_C(0.0f), x);
    OMV r = OMV_FN(om_exp_reduce)(OMV_FN(om_exp_clamp)(x), &n);
    OMV y = OMV_FN(om_ldexp2)(OMV_ADD(OMV_FN(om_expm1_poly)(r), OMV_C(1.0f)), n);
    if (some_zero) y = OMV_SEL(zero, OMV_C(0.0f), y);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* expm1 = 2^n (1 + q) - 1 for the reduced argument, q = expm1 of it: below n = 25 as
 * (2^n - 1) + 2^n q (both exact: one rounding, and no cancellation of e^x - 1 near 0); from
 * n = 25 on, where the - 1 hardly matters, as exp's scaling so that n = 128 stays finite. Max
 * error 1.518 ulp (exhaustive sweep, at 0.38272, where 1 + 2q cancels for n = 1). The sign of
 * a zero is kept. */
static inline OMV OMV_FN(om_expm1)(OMV x) {
    OMV n;
    OMV q = OMV_FN(om_expm1_poly)(OMV_FN(om_exp_reduce)(OMV_FN(om_exp_clamp)(x), &n));
    OMV s = OMV_FN(om_ldexp2)(OMV_C(1.0f), n);
    OMV small = OMV_ADD(OMV_SUB(s, OMV_C(1.0f)), OMV_MUL(s, q));
    OMV big = OMV_SUB(OMV_FN(om_ldexp2)(OMV_ADD(q, OMV_C(1.0f)), n), OMV_C(1.0f));
    OMV y = OMV_SEL(OMV_LT(n, OMV_C(25.0f)), small, big);
    y = OMV_SEL(OMV_EQ(x, OMV_C(0.0f)), x, y);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* log(1+f) - f + lo = f^2 (f P(f) - 1/2) + lo for the reduced f, every step fused: lo (the
 * caller's small terms: k LN2_LO, softplus's correction) is added to the exact f^2 product. */
static inline OMV OMV_FN(om_log_kernel)(OMV f, OMV lo) {
    OMV p = OMV_C(OM_LOG_P7);
    p = OMV_FMA(p, f, OMV_C(OM_LOG_P6));
    p = OMV_FMA(p, f, OMV_C(OM_LOG_P5));
    p = OMV_FMA(p, f, OMV_C(OM_LOG_P4));
    p = OMV_FMA(p, f, OMV_C(OM_LOG_P3));
    p = OMV_FMA(p, f, OMV_C(OM_LOG_P2));
    p = OMV_FMA(p, f, OMV_C(OM_LOG_P1));
    p = OMV_FMA(p, f, OMV_C(OM_LOG_P0));
    return OMV_FMA(OMV_MUL(f, f), OMV_FMA(f, p, OMV_C(-0.5f)), lo);
}

/* dk ln2 + log(1 + f) + (lo - dk LN2_LO): the small terms lo are summed before f, and
 * dk LN2_HI (exact) last, in a fused step that rounds only the sum. */
static inline OMV OMV_FN(om_log_join)(OMV f, OMV dk, OMV lo) {
    OMV y = OMV_FN(om_log_kernel)(f, lo);
    return OMV_FMA(dk, OMV_C(OM_LOG_LN2_HI), OMV_ADD(y, f));
}

/* xs = 2^k m with m in [sqrt(2)/2, sqrt(2)), for xs positive, finite and normal: returns
 * f = m - 1 and sets *dk = k + kbias, k = (bits(xs) - bits(sqrt(2)/2)) >> 23 (an arithmetic
 * shift; written here with an unsigned one and a bias). */
static inline OMV OMV_FN(om_log_split)(OMV xs, OMI kbias, OMV *dk) {
    OMI ix = OMI_SUB(OMV_AS_I(xs), OMI_SET1(OM_SQRT_HALF_BITS));
    *dk = OMV_I2F(OMI_ADD(OMI_SRA(ix, 23), kbias));
    OMV m = OMV_AS_F(OMI_ADD(OMI_AND(ix, OMI_SET1(0x007fffff)), OMI_SET1(OM_SQRT_HALF_BITS)));
    return OMV_SUB(m, OMV_C(1.0f));
}

/* log(xs) + kbias ln2 for xs positive, finite and normal. */
static inline OMV OMV_FN(om_log_core)(OMV xs, OMI kbias) {
    OMV dk;
    OMV f = OMV_FN(om_log_split)(xs, kbias, &dk);
    return OMV_FN(om_log_join)(f, dk, OMV_MUL(dk, OMV_C(OM_LOG_LN2_LO)));
}

/* The lanes that are not positive, normal and finite. Without an ISA instruction for it
 * (OMV_NOT_POSITIVE_NORMAL): x is positive, normal and finite iff bits(x) - bits(FLT_MIN) <
 * bits(inf) - bits(FLT_MIN) as unsigned numbers, and adding 2^31 as well turns that into one
 * signed comparison. */
#ifdef OMV_NOT_POSITIVE_NORMAL
#define OM_LOG_SPECIAL(x) OMV_NOT_POSITIVE_NORMAL(x)
#else
#define OM_LOG_RANGE_SHIFT ((int32_t)(0x80000000u - 0x00800000u))
#define OM_LOG_RANGE_END ((int32_t)(0x80000000u + 0x7f800000u - 0x00800000u))
#define OM_LOG_SPECIAL(x) \
    OMI_LT(OMI_SET1(OM_LOG_RANGE_END - 1), OMI_ADD(OMV_AS_I(x), OMI_SET1(OM_LOG_RANGE_SHIFT)))
#endif

/* log: max error 0.876 ulp (exhaustive sweep, at 1.27433). When every lane is positive, normal
 * and finite (the common case), the selects for denormals and special values would all keep y:
 * they are skipped, with the same bits. */
static inline OMV OMV_FN(om_log)(OMV x) {
    if (OMV_NONE(OM_LOG_SPECIAL(x))) return OMV_FN(om_log_core)(x, OMI_SET1(0));
    OMV inf = OMV_AS_F(OMI_SET1(OM_INF_BITS));
    OMM sub = OMV_LT(x, OMV_C(OM_FLT_MIN));
    OMV xs = OMV_SEL(sub, OMV_MUL(x, OMV_C(OM_LOG_DENORMAL_SCALE)), x);
    OMV y = OMV_FN(om_log_core)(xs, OMI_SEL(sub, OMI_SET1(OM_LOG_DENORMAL_KBIAS), OMI_SET1(0)));
    y = OMV_SEL(OMV_EQ(x, inf), x, y);
    y = OMV_SEL(OMV_EQ(x, OMV_C(0.0f)), OMV_XOR(inf, OMV_C(-0.0f)), y);
    y = OMV_SEL(OMV_LT(x, OMV_C(0.0f)), OMV_AS_F(OMI_SET1(OM_NAN_BITS)), y);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* ---- helpers ---- */

static inline OMV OMV_FN(om_abs)(OMV x) { return OMV_AND(x, OMV_AS_F(OMI_SET1(~OM_SIGN_BITS))); }
static inline OMV OMV_FN(om_sign)(OMV x) { return OMV_AND(x, OMV_AS_F(OMI_SET1(OM_SIGN_BITS))); }

/* a * b = *hi + *lo exactly (Dekker's product with Veltkamp's split by 2^12 + 1; no fma).
 * Valid while |a|, |b| < 2^100 and the product stays normal. */
static inline void OMV_FN(om_split)(OMV a, OMV *hi, OMV *lo) {
    OMV c = OMV_MUL(OMV_C(4097.0f), a);
    *hi = OMV_SUB(c, OMV_SUB(c, a));
    *lo = OMV_SUB(a, *hi);
}

static inline void OMV_FN(om_two_prod)(OMV a, OMV b, OMV *hi, OMV *lo) {
    OMV ah, al, bh, bl;
    OMV_FN(om_split)(a, &ah, &al);
    OMV_FN(om_split)(b, &bh, &bl);
    OMV p = OMV_MUL(a, b);
    *hi = p;
    *lo = OMV_ADD(OMV_ADD(OMV_ADD(OMV_SUB(OMV_MUL(ah, bh), p), OMV_MUL(ah, bl)), OMV_MUL(al, bh)),
                  OMV_MUL(al, bl));
}

/* ---- tanh ---- */

/* tanh: max error 1.167 ulp (exhaustive sweep, at 0.549124). */
static inline OMV OMV_FN(om_tanh)(OMV x) {
    OMV a = OMV_MIN(OMV_C(OM_TANH_AMAX), OMV_FN(om_abs)(x));
    OMI i = OMI_SRL(OMI_SUB(OMV_AS_I(OMV_MAX(a, OMV_C(OM_TANH_LO))),
                            OMV_AS_I(OMV_C(OM_TANH_LO))), 21);
    OMV c[8];
    OMV_FN(om_tanh_lookup)(i, c);
    OMV d = OMV_SUB(a, c[0]);
    OMV y = c[OM_TANH_DEG + 1];
    for (int k = OM_TANH_DEG; k >= 1; k--) y = OMV_FMA(y, d, c[k]);
    return OMV_XOR(y, OMV_FN(om_sign)(x));
}

/* ---- sigmoid ---- */

/* num / (1 + e) for e <= 1 with one division (it costs as much as the rest): d = 1 + e and its
 * rounding error derr (d + derr = 1 + e exactly), r = 1 / d, q = num r; then one correction by
 * the remainder num - q (d + derr), which the fused multiply-adds form almost exactly. */
static inline OMV OMV_FN(om_div_one_plus)(OMV num, OMV e) {
    OMV d = OMV_ADD(OMV_C(1.0f), e);
    OMV derr = OMV_ADD(OMV_SUB(OMV_C(1.0f), d), e);
    OMV r = OMV_DIV(OMV_C(1.0f), d);
    OMV q = OMV_MUL(num, r);
    OMV neg_q = OMV_XOR(q, OMV_C(-0.0f));
    OMV rem = OMV_FMA(neg_q, derr, OMV_FMA(neg_q, d, num));
    return OMV_FMA(rem, r, q);
}

/* sigmoid: max error 1.480 ulp (exhaustive sweep, at -4.84646). */
static inline OMV OMV_FN(om_sigmoid)(OMV x) {
    OMV e = OMV_FN(om_exp)(OMV_XOR(OMV_FN(om_abs)(x), OMV_C(-0.0f)));
    OMV num = OMV_SEL(OMV_LT(x, OMV_C(0.0f)), e, OMV_C(1.0f));
    OMV y = OMV_FN(om_div_one_plus)(num, e);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* ---- softplus ---- */

static inline OMV OMV_FN(om_log1p_unit)(OMV e) {
    OMM big = OMV_LE(OMV_C(OM_LOG1P_SPLIT), e);
    OMV u = OMV_ADD(OMV_C(1.0f), e);
    OMV c = OMV_DIV(OMV_SUB(e, OMV_SUB(u, OMV_C(1.0f))), u);
    c = OMV_SEL(big, c, OMV_C(0.0f));
    OMV f = OMV_SEL(big, OMV_SUB(OMV_MUL(u, OMV_C(0.5f)), OMV_C(1.0f)), e);
    OMV dk = OMV_SEL(big, OMV_C(1.0f), OMV_C(0.0f));
    return OMV_FN(om_log_join)(f, dk, OMV_ADD(OMV_MUL(dk, OMV_C(OM_LOG_LN2_LO)), c));
}

/* log1p: log(u) for u = 1 + x rounded, plus c = ((1 + x) - u) / u, the first-order correction
 * for that rounding, taken into log's small terms ((1 + x) - u is exact: x - (u - 1) below 2,
 * 1 - (u - x) above, as in musl's log1pf). Max error 0.886 ulp (exhaustive sweep, at
 * 0.414044). Outside (-1, inf), and at zero (whose sign it keeps), the special values are
 * selected only when a lane needs them. */
static inline OMV OMV_FN(om_log1p)(OMV x) {
    OMV u = OMV_ADD(OMV_C(1.0f), x);
    OMV d = OMV_SEL(OMV_LT(u, OMV_C(2.0f)), OMV_SUB(x, OMV_SUB(u, OMV_C(1.0f))),
                    OMV_SUB(OMV_C(1.0f), OMV_SUB(u, x)));
    OMV dk;
    OMV f = OMV_FN(om_log_split)(u, OMI_SET1(0), &dk);
    OMV lo = OMV_ADD(OMV_MUL(dk, OMV_C(OM_LOG_LN2_LO)), OMV_DIV(d, u));
    OMV y = OMV_FN(om_log_join)(f, dk, lo);
    OMV inf = OMV_AS_F(OMI_SET1(OM_INF_BITS));
    if (OMV_NONE(OMV_EQ(x, OMV_C(0.0f))) && OMV_NONE(OMV_EQ(x, inf)) &&
        OMV_NONE(OMV_LE(x, OMV_C(-1.0f))) && OMV_NONE(OMV_ISNAN(x)))
        return y;
    y = OMV_SEL(OMV_EQ(x, OMV_C(0.0f)), x, y);
    y = OMV_SEL(OMV_EQ(x, inf), x, y);
    y = OMV_SEL(OMV_EQ(x, OMV_C(-1.0f)), OMV_XOR(inf, OMV_C(-0.0f)), y);
    y = OMV_SEL(OMV_LT(x, OMV_C(-1.0f)), OMV_AS_F(OMI_SET1(OM_NAN_BITS)), y);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* softplus(x) = max(x, 0) + log(1 + exp(-|x|)): max error 1.711 ulp (exhaustive sweep, at
 * -1.26046). */
static inline OMV OMV_FN(om_softplus)(OMV x) {
    OMV m = OMV_SEL(OMV_LT(OMV_C(0.0f), x), x, OMV_C(0.0f));
    OMV e = OMV_FN(om_exp)(OMV_XOR(OMV_FN(om_abs)(x), OMV_C(-0.0f)));
    OMV y = OMV_ADD(m, OMV_FN(om_log1p_unit)(e));
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* ---- erf, erfc ---- */

/* x R(x^2) (erf(x) = x + this, for |x| < OM_ERF_SMALL) */
static inline OMV OMV_FN(om_erf_small_tail)(OMV x) {
    OMV z = OMV_MUL(x, x);
    OMV r = OMV_ADD(OMV_MUL(OMV_C(OM_ERF_R6), z), OMV_C(OM_ERF_R5));
    r = OMV_ADD(OMV_MUL(r, z), OMV_C(OM_ERF_R4));
    r = OMV_ADD(OMV_MUL(r, z), OMV_C(OM_ERF_R3));
    r = OMV_ADD(OMV_MUL(r, z), OMV_C(OM_ERF_R2));
    r = OMV_ADD(OMV_MUL(r, z), OMV_C(OM_ERF_R1));
    r = OMV_ADD(OMV_MUL(r, z), OMV_C(OM_ERF_R0));
    return OMV_MUL(x, r);
}

/* m * erfc(z) for z in [0.5, OM_ERFC_ZMAX], given z^2 = sqh + sql exactly; m scales the
 * result before its final rounding, so a denormal m erfc(z) is rounded once. */
static inline OMV OMV_FN(om_erfc_scaled)(OMV z, OMV sqh, OMV sql, OMV m) {
    OMV t = OMV_DIV(OMV_C(1.0f), OMV_ADD(OMV_C(1.0f), OMV_MUL(OMV_C(0.5f), z)));
    OMV q = OMV_ADD(OMV_MUL(OMV_C(OM_ERFC_Q10), t), OMV_C(OM_ERFC_Q9));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q8));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q7));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q6));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q5));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q4));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q3));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q2));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q1));
    q = OMV_ADD(OMV_MUL(q, t), OMV_C(OM_ERFC_Q0));
    q = OMV_MUL(q, t);
    OMV n;
    OMV neg = OMV_C(-0.0f);
    OMV qe = OMV_FN(om_expm1_parts)(OMV_XOR(sqh, neg), OMV_XOR(sql, neg), &n);
    OMV mq = OMV_MUL(m, q);
    return OMV_FN(om_ldexp2)(OMV_ADD(mq, OMV_MUL(mq, qe)), n);
}

/* erf: max error 1.496 ulp (exhaustive sweep, at 0.932987). */
static inline OMV OMV_FN(om_erf)(OMV x) {
    OMV ax = OMV_FN(om_abs)(x);
    OMV az = OMV_SEL(OMV_LT(ax, OMV_C(OM_ERFC_ZMAX)), ax, OMV_C(OM_ERFC_ZMAX));
    OMV sqh, sql;
    OMV_FN(om_two_prod)(az, az, &sqh, &sql);
    OMV e = OMV_FN(om_erfc_scaled)(az, sqh, sql, OMV_C(1.0f));
    OMV large = OMV_XOR(OMV_SUB(OMV_C(1.0f), e), OMV_FN(om_sign)(x));
    OMV small = OMV_ADD(x, OMV_FN(om_erf_small_tail)(x));
    OMV y = OMV_SEL(OMV_LT(ax, OMV_C(OM_ERF_SMALL)), small, large);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* ---- gelu (erf form) ---- */

/* om_erfc_scaled_wide (vmath.h) on one half of the lanes, widened to double. */
static inline OMD OMV_FN(om_erfc_wide_half)(OMD axc, OMD t0, OMD m, OMD qe, OMD n) {
    OMD z = OMD_MUL(axc, OMD_SET1(OM_SQRT1_2_D));
    OMD d = OMD_ADD(OMD_SET1(1.0), OMD_MUL(OMD_SET1(0.5), z));
    OMD t = OMD_ADD(t0, OMD_MUL(t0, OMD_SUB(OMD_SET1(1.0), OMD_MUL(d, t0))));
    OMD q = OMD_ADD(OMD_MUL(OMD_SET1((double)OM_ERFC_Q10), t), OMD_SET1((double)OM_ERFC_Q9));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q8));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q7));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q6));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q5));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q4));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q3));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q2));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q1));
    q = OMD_ADD(OMD_MUL(q, t), OMD_SET1((double)OM_ERFC_Q0));
    q = OMD_MUL(q, t);
    OMD pow2 = OMD_BITS_SLL52(OMD_ADD(n, OMD_SET1(OM_POW2_MAGIC + 1023.0)));
    return OMD_MUL(OMD_MUL(OMD_MUL(m, q), OMD_ADD(OMD_SET1(1.0), qe)), pow2);
}

/* m * erfc(z), z = axc / sqrt(2) in [0.5, OM_ERFC_ZMAX], given z^2 = sqh + sql exactly: as
 * om_erfc_scaled, with z, t, Q and the products in double and one rounding to float at the
 * end (exp's argument reduction and polynomial stay in float; t is refined from a float
 * quotient, as a double division costs several times more). Where a result is m erfc(z)
 * itself (gelu below -1/sqrt(2)), the float32 Q costs up to 6.6 ulp; this way the error is
 * exp's and that rounding. */
static inline OMV OMV_FN(om_erfc_scaled_wide)(OMV axc, OMV sqh, OMV sql, OMV m) {
    OMV n;
    OMV neg = OMV_C(-0.0f);
    OMV qe = OMV_FN(om_expm1_parts)(OMV_XOR(sqh, neg), OMV_XOR(sql, neg), &n);
    OMV tf = OMV_DIV(OMV_C(1.0f),
                     OMV_ADD(OMV_C(1.0f), OMV_MUL(OMV_C(0.5f), OMV_MUL(axc, OMV_C(OM_SQRT1_2)))));
    OMD lo = OMV_FN(om_erfc_wide_half)(OMD_LO(axc), OMD_LO(tf), OMD_LO(m), OMD_LO(qe), OMD_LO(n));
    OMD hi = OMV_FN(om_erfc_wide_half)(OMD_HI(axc), OMD_HI(tf), OMD_HI(m), OMD_HI(qe), OMD_HI(n));
    return OMD_NARROW(lo, hi);
}

/* 1 + erf(z) for |z| < OM_ERF_SMALL. */
static inline OMV OMV_FN(om_gelu_cdf2_mid)(OMV z) {
    return OMV_ADD(OMV_C(1.0f), OMV_ADD(z, OMV_FN(om_erf_small_tail)(z)));
}

/* 1 + erf(x / sqrt(2)) = 2 Phi(x) for x >= OM_GELU_NEG; for x below it, m erfc(-x/sqrt(2))
 * (the caller's factor m applied before the final rounding). */
static inline OMV OMV_FN(om_gelu_cdf2)(OMV x, OMV m) {
    OMV xc = OMV_SEL(OMV_LT(x, OMV_C(OM_GELU_XMAX)), x, OMV_C(OM_GELU_XMAX));
    xc = OMV_SEL(OMV_LT(OMV_C(-OM_GELU_XMAX), xc), xc, OMV_C(-OM_GELU_XMAX));
    OMV z = OMV_MUL(xc, OMV_C(OM_SQRT1_2));
    OMV sqh, sql;
    OMV_FN(om_two_prod)(xc, xc, &sqh, &sql);
    OMM neg = OMV_LT(x, OMV_C(OM_GELU_NEG));
    OMV e = OMV_FN(om_erfc_scaled_wide)(OMV_FN(om_abs)(xc), OMV_MUL(OMV_C(0.5f), sqh),
                                        OMV_MUL(OMV_C(0.5f), sql), OMV_SEL(neg, m, OMV_C(1.0f)));
    OMV y = OMV_SEL(OMV_LT(z, OMV_C(OM_ERF_SMALL)), OMV_FN(om_gelu_cdf2_mid)(z),
                    OMV_SUB(OMV_C(2.0f), e));
    return OMV_SEL(neg, e, y);
}

/* gelu(x) = x Phi(x) = x (1 + erf(x/sqrt(2))) / 2: max error 1.939 ulp (exhaustive sweep, at
 * -0.656271, where 1 + erf(z) cancels; below -1/sqrt(2) the double erfc keeps it lower). */
static inline OMV OMV_FN(om_gelu)(OMV x) {
    OMV xc = OMV_SEL(OMV_LT(OMV_C(-OM_GELU_XMAX), x), x, OMV_C(-OM_GELU_XMAX));
    OMV c = OMV_FN(om_gelu_cdf2)(x, OMV_MUL(OMV_C(0.5f), xc));
    OMV y = OMV_SEL(OMV_LT(x, OMV_C(OM_GELU_NEG)), c, OMV_MUL(x, OMV_MUL(OMV_C(0.5f), c)));
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}
static inline OMV OMV_FN(om_gelu_small)(OMV x) {
    OMV c = OMV_FN(om_gelu_cdf2_mid)(OMV_MUL(x, OMV_C(OM_SQRT1_2)));
    return OMV_MUL(x, OMV_MUL(OMV_C(0.5f), c));
}

/* ---- gelu (tanh form) ---- */

/* gelu_tanh: max error 1.513 ulp (exhaustive sweep, at -2.74753). */
static inline OMV OMV_FN(om_gelu_tanh)(OMV x) {
    OMV xc = OMV_SEL(OMV_LT(x, OMV_C(OM_GELU_T_XMAX)), x, OMV_C(OM_GELU_T_XMAX));
    xc = OMV_SEL(OMV_LT(OMV_C(-OM_GELU_T_XMAX), xc), xc, OMV_C(-OM_GELU_T_XMAX));
    OMV sh, sl, ph, pl, vh, vl;
    OMV_FN(om_two_prod)(xc, xc, &sh, &sl);
    OMV_FN(om_two_prod)(OMV_C(OM_GELU_T_C2_HI), sh, &ph, &pl);
    pl = OMV_ADD(pl, OMV_ADD(OMV_MUL(OMV_C(OM_GELU_T_C2_HI), sl),
                             OMV_MUL(OMV_C(OM_GELU_T_C2_LO), sh)));
    OMV w = OMV_ADD(OMV_C(OM_GELU_T_C1_HI), ph);
    OMV bv = OMV_SUB(w, OMV_C(OM_GELU_T_C1_HI));
    OMV wl = OMV_ADD(OMV_SUB(OMV_C(OM_GELU_T_C1_HI), OMV_SUB(w, bv)), OMV_SUB(ph, bv));
    wl = OMV_ADD(wl, OMV_ADD(pl, OMV_C(OM_GELU_T_C1_LO)));
    OMV_FN(om_two_prod)(xc, w, &vh, &vl);
    vl = OMV_ADD(vl, OMV_MUL(xc, wl));
    OMV a = OMV_ADD(vh, vl);
    OMV al = OMV_SUB(vl, OMV_SUB(a, vh));
    OMV sign = OMV_FN(om_sign)(a);
    OMV n;
    OMV q = OMV_FN(om_expm1_parts)(OMV_XOR(OMV_FN(om_abs)(a), OMV_C(-0.0f)),
                                   OMV_XOR(OMV_XOR(al, OMV_C(-0.0f)), sign), &n);
    OMV e = OMV_FN(om_ldexp2)(OMV_ADD(q, OMV_C(1.0f)), n);
    OMM neg = OMV_LT(a, OMV_C(0.0f));
    OMV t = OMV_MUL(xc, q);
    OMV th = OMV_ADD(xc, t);
    OMV nh = OMV_SEL(neg, th, xc);
    OMV nl = OMV_SEL(neg, OMV_SUB(t, OMV_SUB(th, xc)), OMV_C(0.0f));
    OMV d = OMV_ADD(OMV_C(1.0f), e);
    OMV derr = OMV_ADD(OMV_SUB(OMV_C(1.0f), d), e);
    OMV y0 = OMV_DIV(nh, d);
    OMV yh, yl;
    OMV_FN(om_two_prod)(y0, d, &yh, &yl);
    OMV res = OMV_SUB(OMV_ADD(OMV_SUB(OMV_SUB(nh, yh), yl), nl), OMV_MUL(nh, derr));
    OMV k = OMV_SUB(OMV_C(1.5f), OMV_MUL(OMV_C(0.5f), d));
    OMV y = OMV_FN(om_ldexp2)(OMV_ADD(y0, OMV_MUL(res, k)), OMV_SEL(neg, n, OMV_C(0.0f)));
    y = OMV_SEL(OMV_LT(OMV_C(OM_GELU_T_XMAX), x), x, y);
    y = OMV_SEL(OMV_EQ(x, OMV_C(0.0f)), x, y);
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* ---- sin, cos ---- */

/* n = round(x 2/pi) and r = x - n pi/2 in double, for |x| < OM_TRIG_BIG; q = n mod 4 (n - 4
 * floor(n/4), the floor a rounding of n/4 - 3/8). */
static inline OMD OMV_FN(om_trig_reduce_half)(OMD x, OMD *q) {
    OMD magic = OMD_SET1(OM_ROUND_MAGIC_D);
    OMD n = OMD_SUB(OMD_ADD(OMD_MUL(x, OMD_SET1(OM_2_OVER_PI_D)), magic), magic);
    OMD n4 = OMD_SUB(OMD_ADD(OMD_SUB(OMD_MUL(n, OMD_SET1(0.25)), OMD_SET1(0.375)), magic), magic);
    *q = OMD_SUB(n, OMD_MUL(n4, OMD_SET1(4.0)));
    return OMD_SUB(OMD_SUB(x, OMD_MUL(n, OMD_SET1(OM_PIO2_1_D))), OMD_MUL(n, OMD_SET1(OM_PIO2_2_D)));
}

/* x = n pi/2 + hi + lo, q = n mod 4 (vmath.h): lanes from OM_TRIG_BIG on, and inf, one by one
 * through om_trig_reduce_large. */
static inline void OMV_FN(om_trig_reduce)(OMV x, OMV *hi, OMV *lo, OMV *q) {
    OMD q0, q1;
    OMD r0 = OMV_FN(om_trig_reduce_half)(OMD_LO(x), &q0);
    OMD r1 = OMV_FN(om_trig_reduce_half)(OMD_HI(x), &q1);
    *hi = OMD_NARROW(r0, r1);
    *lo = OMD_NARROW(OMD_SUB(r0, OMD_LO(*hi)), OMD_SUB(r1, OMD_HI(*hi)));
    *q = OMD_NARROW(q0, q1);
    if (OMV_NONE(OMV_LE(OMV_C(OM_TRIG_BIG), OMV_FN(om_abs)(x)))) return;
    float xs[OMV_LANES], hs[OMV_LANES], ls[OMV_LANES], qs[OMV_LANES];
    OMV_STORE(xs, x);
    OMV_STORE(hs, *hi);
    OMV_STORE(ls, *lo);
    OMV_STORE(qs, *q);
    for (int i = 0; i < OMV_LANES; i++)
        if (OM_TRIG_BIG <= fabsf(xs[i])) om_trig_reduce_large(xs[i], hs + i, ls + i, qs + i);
    *hi = OMV_LOAD(hs);
    *lo = OMV_LOAD(ls);
    *q = OMV_LOAD(qs);
}

/* c[0] z^(n-1) + ... + c[n-1] by Horner's rule, in double. */
static inline OMD OMV_FN(om_horner_d)(OMD z, const double *c, int n) {
    OMD p = OMD_SET1(c[0]);
    for (int k = 1; k < n; k++) p = OMD_ADD(OMD_MUL(p, z), OMD_SET1(c[k]));
    return p;
}

static inline OMD OMV_FN(om_sin_poly)(OMD r) {
    OMD r2 = OMD_MUL(r, r);
    return OMD_ADD(r, OMD_MUL(OMD_MUL(r, r2), OMV_FN(om_horner_d)(r2, om_sin_coeffs, 5)));
}

static inline OMD OMV_FN(om_cos_poly)(OMD r) {
    OMD r2 = OMD_MUL(r, r);
    return OMD_ADD(OMD_SET1(1.0), OMD_MUL(r2, OMV_FN(om_horner_d)(r2, om_cos_coeffs, 6)));
}

/* sin(x) for shift 0, cos(x) = sin(x + pi/2) for shift 1: quadrant q + shift picks +-sin(r) or
 * +-cos(r), each rounded once from double. NaN in gives x + x. */
static inline OMV OMV_FN(om_sin_shifted)(OMV x, float shift) {
    OMV hi, lo, q;
    OMV_FN(om_trig_reduce)(x, &hi, &lo, &q);
    OMD r0 = OMD_ADD(OMD_LO(hi), OMD_LO(lo)), r1 = OMD_ADD(OMD_HI(hi), OMD_HI(lo));
    OMV s = OMD_NARROW(OMV_FN(om_sin_poly)(r0), OMV_FN(om_sin_poly)(r1));
    OMV c = OMD_NARROW(OMV_FN(om_cos_poly)(r0), OMV_FN(om_cos_poly)(r1));
    q = OMV_ADD(q, OMV_C(shift));
    q = OMV_SEL(OMV_EQ(q, OMV_C(4.0f)), OMV_C(0.0f), q);
    OMV y = OMV_SEL(OMV_EQ(q, OMV_C(1.0f)), c, s);
    y = OMV_SEL(OMV_EQ(q, OMV_C(3.0f)), c, y);
    y = OMV_XOR(y, OMV_SEL(OMV_LE(OMV_C(2.0f), q), OMV_C(-0.0f), OMV_C(0.0f)));
    return OMV_SEL(OMV_ISNAN(x), OMV_ADD(x, x), y);
}

/* sin: max error 0.50012 ulp (exhaustive sweep, at 4.14999e18). The sign of a zero is kept
 * (hi + lo of -0 is +0). */
static inline OMV OMV_FN(om_sin)(OMV x) {
    OMV y = OMV_FN(om_sin_shifted)(x, 0.0f);
    return OMV_SEL(OMV_EQ(x, OMV_C(0.0f)), x, y);
}

/* cos: max error 0.50012 ulp (exhaustive sweep, at 2.94936e22). */
static inline OMV OMV_FN(om_cos)(OMV x) { return OMV_FN(om_sin_shifted)(x, 1.0f); }

/* ---- backward ---- */

/* relu(x) = x < 0 ? +0 : x (so -0 and NaN pass through, as PyTorch's); its gradient is g
 * where the output is > 0 or NaN and +0 elsewhere (also where g is inf). */
static inline OMV OMV_FN(om_relu)(OMV x) {
    return OMV_SEL(OMV_LT(x, OMV_C(0.0f)), OMV_C(0.0f), x);
}
static inline OMV OMV_FN(om_relu_grad)(OMV y, OMV g) {
    return OMV_SEL(OMV_LE(y, OMV_C(0.0f)), OMV_C(0.0f), g);
}

static inline OMV OMV_FN(om_exp_grad)(OMV y, OMV g) { return OMV_MUL(g, y); }
static inline OMV OMV_FN(om_log_grad)(OMV x, OMV g) { return OMV_DIV(g, x); }
static inline OMV OMV_FN(om_tanh_grad)(OMV y, OMV g) {
    return OMV_MUL(g, OMV_SUB(OMV_C(1.0f), OMV_MUL(y, y)));
}
static inline OMV OMV_FN(om_expm1_grad)(OMV y, OMV g) {
    return OMV_MUL(g, OMV_ADD(y, OMV_C(1.0f)));
}
static inline OMV OMV_FN(om_log1p_grad)(OMV x, OMV g) {
    return OMV_DIV(g, OMV_ADD(x, OMV_C(1.0f)));
}
static inline OMV OMV_FN(om_sin_grad)(OMV x, OMV g) { return OMV_MUL(g, OMV_FN(om_cos)(x)); }
static inline OMV OMV_FN(om_cos_grad)(OMV x, OMV g) {
    return OMV_MUL(g, OMV_XOR(OMV_FN(om_sin)(x), OMV_C(-0.0f)));
}
static inline OMV OMV_FN(om_sigmoid_grad)(OMV y, OMV g) {
    return OMV_MUL(OMV_MUL(g, OMV_SUB(OMV_C(1.0f), y)), y);
}
static inline OMV OMV_FN(om_softplus_grad)(OMV x, OMV g) {
    return OMV_MUL(g, OMV_FN(om_sigmoid)(x));
}
static inline OMV OMV_FN(om_erf_grad)(OMV x, OMV g) {
    OMV e = OMV_FN(om_exp)(OMV_XOR(OMV_MUL(x, x), OMV_C(-0.0f)));
    return OMV_MUL(OMV_MUL(OMV_C(OM_2_SQRTPI), e), g);
}
static inline OMV OMV_FN(om_gelu_grad_of)(OMV x, OMV g, OMV cdf2) {
    OMV cdf = OMV_MUL(OMV_C(0.5f), cdf2);
    OMV pdf = OMV_MUL(OMV_FN(om_exp)(OMV_MUL(OMV_MUL(x, x), OMV_C(-0.5f))), OMV_C(OM_GELU_BETA));
    return OMV_MUL(g, OMV_ADD(cdf, OMV_MUL(x, pdf)));
}
static inline OMV OMV_FN(om_gelu_grad)(OMV x, OMV g) {
    return OMV_FN(om_gelu_grad_of)(x, g, OMV_FN(om_gelu_cdf2)(x, OMV_C(1.0f)));
}
static inline OMV OMV_FN(om_gelu_grad_small)(OMV x, OMV g) {
    return OMV_FN(om_gelu_grad_of)(x, g,
                                   OMV_FN(om_gelu_cdf2_mid)(OMV_MUL(x, OMV_C(OM_SQRT1_2))));
}
static inline OMV OMV_FN(om_gelu_tanh_grad)(OMV x, OMV g) {
    OMV x_sq = OMV_MUL(x, x);
    OMV x_cube = OMV_MUL(x_sq, x);
    OMV inner = OMV_MUL(OMV_C(OM_GELU_T_BETA),
                        OMV_ADD(x, OMV_MUL(OMV_C(OM_GELU_T_KAPPA), x_cube)));
    OMV th = OMV_FN(om_tanh)(inner);
    OMV left = OMV_MUL(OMV_C(0.5f), x);
    OMV right = OMV_ADD(OMV_C(1.0f), th);
    OMV left_derivative = OMV_MUL(OMV_C(0.5f), right);
    OMV tanh_derivative = OMV_SUB(OMV_C(1.0f), OMV_MUL(th, th));
    OMV inner_derivative = OMV_MUL(OMV_C(OM_GELU_T_BETA),
        OMV_ADD(OMV_C(1.0f), OMV_MUL(OMV_MUL(OMV_C(3.0f), OMV_C(OM_GELU_T_KAPPA)), x_sq)));
    OMV right_derivative = OMV_MUL(OMV_MUL(left, tanh_derivative), inner_derivative);
    return OMV_MUL(g, OMV_ADD(left_derivative, right_derivative));
}

#undef OMV_C
#undef OM_LOG_SPECIAL
#undef OM_LOG_RANGE_SHIFT
#undef OM_LOG_RANGE_END
#undef OMV_SCALEF
#undef OMV_NOT_POSITIVE_NORMAL
