/* Exact-mode transcendentals, float32: the scalar reference.
 *
 * Every function here is built from + - * /, comparisons and bit manipulation only: no libm
 * transcendental. FMA policy: a*b + c is a rounded product, then a rounded sum, except where a
 * function calls fmaf (log's polynomial and tail, shared by softplus, tanh's polynomial and
 * sigmoid's division): fmaf is correctly rounded, and every SIMD path translates it to its fused
 * multiply-add (OMV_FMA; SSE2, which has none, calls fmaf per lane), so the bits stay the same.
 * The SIMD translations (vmath_simd.h through vmath_sse2.h, vmath_avx2.h, vmath_avx512.h and
 * vmath_neon.h) evaluate the same operations in the same order, with the same range reduction and
 * the same special cases, so they give the same bits on every input. Branches are written as
 * selects (compute every candidate, then pick) so the vector code reads the same way; the vector
 * code may skip a group of selects when a test shows they keep every lane.
 *
 * Denormal inputs and results are handled without flush-to-zero: results underflow gradually
 * (a scale by 2^n is split into two exact-or-once-rounded multiplies) and overflow to inf.
 * NaN in gives NaN out (the input quieted, x + x); constants produce the default NaN
 * 0x7fc00000 where an input is outside the domain (log of a negative number).
 *
 * Accuracy: max error in ulp against a float64 libm reference, measured by an exhaustive sweep
 * of all 2^32 float32 bit patterns (tools/ulp_sweep.py), stated next to each function.
 */
#ifndef OM_VMATH_H
#define OM_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t om_f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float om_u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

#define OM_NAN_BITS 0x7fc00000u
#define OM_INF_BITS 0x7f800000u

/* ---- exp ------------------------------------------------------------------------------- */

/* Inputs are clamped into [OM_EXP_MIN, OM_EXP_MAX]: exp(89) overflows to inf and exp(-110)
 * rounds to 0 even after om_expm1_parts' callers scale it by up to 2^5, so the clamp only keeps
 * the reduction in range (n in [-159, 128]). */
#define OM_EXP_MAX 89.0f
#define OM_EXP_MIN -110.0f
#define OM_LOG2E 1.44269502f
/* 1.5 * 2^23: adding it rounds to an integer, whose value is in the low mantissa bits. */
#define OM_ROUND_MAGIC 12582912.0f
/* ln 2 = OM_LN2_HI + OM_LN2_LO; OM_LN2_HI has 13 significant bits, so n * OM_LN2_HI is exact for
 * |n| <= 256 and x - n * OM_LN2_HI is exact (Cody and Waite). */
#define OM_LN2_HI 0.693359375f
#define OM_LN2_LO -2.12194440e-4f
/* exp(r) = 1 + r + r^2 P(r) on |r| <= ln2/2 + 2^-9, P of degree 4 fitted for relative error
 * (2^-28.2 before rounding). */
#define OM_EXP_P0 0.4999999403953552f
#define OM_EXP_P1 0.16666516661643982f
#define OM_EXP_P2 0.041668426245450974f
#define OM_EXP_P3 0.008369123563170433f
#define OM_EXP_P4 0.0013813755940645933f

/* a < b ? a : b and a > b ? a : b: x86's minps/maxps, so a NaN in a gives b and in b gives b. */
static inline float om_minf(float a, float b) { return a < b ? a : b; }
static inline float om_maxf(float a, float b) { return a > b ? a : b; }

/* n = round(x / ln2) and r = x - n ln2 (Cody-Waite), for x in [OM_EXP_MIN, OM_EXP_MAX]. */
static inline float om_exp_reduce(float x, float *n_out) {
    float n = (x * OM_LOG2E + OM_ROUND_MAGIC) - OM_ROUND_MAGIC;
    *n_out = n;
    float r = x - n * OM_LN2_HI;
    return r - n * OM_LN2_LO;
}

/* exp(r) - 1 on the reduced range, as r + r^2 P(r) (Horner, no fma). */
static inline float om_expm1_poly(float r) {
    float y = OM_EXP_P4 * r + OM_EXP_P3;
    y = y * r + OM_EXP_P2;
    y = y * r + OM_EXP_P1;
    y = y * r + OM_EXP_P0;
    return y * (r * r) + r;
}

/* A NaN becomes OM_EXP_MAX (om_minf), a finite argument whose result the caller replaces. */
static inline float om_exp_clamp(float x) { return om_maxf(om_minf(x, OM_EXP_MAX), OM_EXP_MIN); }

/* exp(hi + lo) = (1 + q) 2^n, returning q = expm1 of the reduced argument, in about
 * [-0.3, 0.42]: the caller scales (om_ldexp2f), possibly after multiplying by a factor m as
 * m + m q, which rounds once where m (1 + q) would round twice, and so that a denormal result
 * is rounded only once. lo is a small correction (|lo| < 2^-10) carrying the low part of an
 * argument known more precisely than one float; n is derived from hi alone. */
static inline float om_expm1_parts(float hi, float lo, float *n_out) {
    return om_expm1_poly(om_exp_reduce(om_exp_clamp(hi), n_out) + lo);
}

/* p * 2^n, n an integer in [-159, 128], rounded once: two factors 2^(n>>1) and 2^(n - (n>>1)),
 * both normal; the first product is exact for every p the callers pass (|p| >= 2^-40), so only
 * the second rounds (gradual underflow, or inf). That is the one rounding of AVX-512's scalef. */
static inline float om_ldexp2f(float p, float n) {
    int32_t n1 = (int32_t)n >> 1;
    int32_t n2 = (int32_t)n - n1;
    float s1 = om_u2f((uint32_t)(n1 + 127) << 23);
    float s2 = om_u2f((uint32_t)(n2 + 127) << 23);
    return p * s1 * s2;
}

/* exp: max error 0.989 ulp (exhaustive sweep, at -27.379). */
static inline float om_expf(float x) {
    float n;
    float p = om_expm1_poly(om_exp_reduce(om_exp_clamp(x), &n)) + 1.0f;
    float y = om_ldexp2f(p, n);
    return x != x ? x + x : y;
}

/* ---- log ------------------------------------------------------------------------------- */

/* log(1+f) = f - f^2/2 + f^3 P(f) on f in [sqrt(2)/2-1, sqrt(2)-1], P a degree-7 fit of
 * (log(1+f) - f + f^2/2)/f^3 weighted for the relative error of log(1+f), its coefficients
 * rounded to float32 (2^-27.4 of the result; tools/fit_log.py). No division: Horner in f with
 * fused multiply-adds, as few vector operations as the accuracy allows (degree 6 would reach
 * 1.22 ulp). ln2 is split so that k * LN2_HI is exact (FreeBSD/musl logf). */
#define OM_LOG_P0 0.3333333f
#define OM_LOG_P1 -0.2500082f
#define OM_LOG_P2 0.20001242f
#define OM_LOG_P3 -0.16623409f
#define OM_LOG_P4 0.1420158f
#define OM_LOG_P5 -0.1315961f
#define OM_LOG_P6 0.12762217f
#define OM_LOG_P7 -0.07636439f
#define OM_LOG_LN2_HI 6.9313812256e-01f /* 0x3f317180: k * LN2_HI exact for |k| < 2^9 */
#define OM_LOG_LN2_LO 9.0580006145e-06f
/* 0x3f3504f3 = sqrt(2)/2: mantissas at or above it belong to the exponent below. */
#define OM_SQRT_HALF_BITS 0x3f3504f3u

/* log(1+f) - f + lo = f^2 (f P(f) - 1/2) + lo for the reduced f, every step fused: lo (the
 * caller's small terms: k LN2_LO, softplus's correction) is added to the exact f^2 product. */
static inline float om_log_kernel(float f, float lo) {
    float p = OM_LOG_P7;
    p = fmaf(p, f, OM_LOG_P6);
    p = fmaf(p, f, OM_LOG_P5);
    p = fmaf(p, f, OM_LOG_P4);
    p = fmaf(p, f, OM_LOG_P3);
    p = fmaf(p, f, OM_LOG_P2);
    p = fmaf(p, f, OM_LOG_P1);
    p = fmaf(p, f, OM_LOG_P0);
    return fmaf(f * f, fmaf(f, p, -0.5f), lo);
}

/* log(xs) + kbias ln2 for xs positive, finite and normal: xs = 2^k m with m in [sqrt(2)/2,
 * sqrt(2)), k = (bits(xs) - bits(sqrt(2)/2)) >> 23 (an arithmetic shift; written here with an
 * unsigned one and a bias). The small terms are summed before f, and k LN2_HI (exact) last, in
 * a fused step that rounds only the sum. */
static inline float om_log_core(float xs, int32_t kbias) {
    uint32_t ix = om_f2u(xs) - OM_SQRT_HALF_BITS;
    int32_t k = (int32_t)((ix + 0x3f800000u) >> 23) - 127 + kbias;
    float m = om_u2f((ix & 0x007fffffu) + OM_SQRT_HALF_BITS);
    float f = m - 1.0f;
    float dk = (float)k;
    return fmaf(dk, OM_LOG_LN2_HI, om_log_kernel(f, dk * OM_LOG_LN2_LO) + f);
}

#define OM_FLT_MIN 1.17549435e-38f
#define OM_LOG_DENORMAL_SCALE 33554432.0f /* 2^25 */
#define OM_LOG_DENORMAL_KBIAS (-25)

/* log: max error 0.876 ulp (exhaustive sweep, at 1.27433). */
static inline float om_logf(float x) {
    int sub = x < OM_FLT_MIN; /* denormals: scaled into the normal range first */
    float y = om_log_core(sub ? x * OM_LOG_DENORMAL_SCALE : x, sub ? OM_LOG_DENORMAL_KBIAS : 0);
    y = x == om_u2f(OM_INF_BITS) ? x : y;
    y = x == 0.0f ? -om_u2f(OM_INF_BITS) : y;
    y = x < 0.0f ? om_u2f(OM_NAN_BITS) : y;
    return x != x ? x + x : y;
}

/* ---- helpers: sign, exact products ------------------------------------------------------ */

#define OM_SIGN_BITS 0x80000000u

static inline float om_absf(float x) { return om_u2f(om_f2u(x) & ~OM_SIGN_BITS); }
/* x with the sign of s xored in (s carries only a sign bit) */
static inline float om_xorsignf(float x, float sign) { return om_u2f(om_f2u(x) ^ om_f2u(sign)); }
static inline float om_signf(float x) { return om_u2f(om_f2u(x) & OM_SIGN_BITS); }

/* a * b = *hi + *lo exactly (Dekker's product with Veltkamp's split by 2^12 + 1; no fma).
 * Valid while |a|, |b| < 2^100 and the product stays normal. */
static inline void om_split(float a, float *hi, float *lo) {
    float c = 4097.0f * a;
    *hi = c - (c - a);
    *lo = a - *hi;
}
static inline void om_two_prod(float a, float b, float *hi, float *lo) {
    float ah, al, bh, bl;
    om_split(a, &ah, &al);
    om_split(b, &bh, &bl);
    float p = a * b;
    *hi = p;
    *lo = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
}

/* ---- tanh ------------------------------------------------------------------------------ */

/* tanh(a) for a = |x| from a table of polynomials, one per interval: below 0.078125 one
 * interval [0, 0.078125) centred at 0 (c0 = 0 and c1 = 1, so tiny and denormal x give x
 * exactly), then four intervals per binade from 0.078125 up to [8, 10), each centred at its
 * midpoint m. On an interval, tanh(m + d) = c0 + d (c1 + d (c2 + ... + d c5)), d = a - m exact
 * (a and m are within a factor 2), evaluated by Horner with fused multiply-adds. The
 * coefficients are a float64 least-squares fit for relative error on Chebyshev nodes, rounded
 * to float32 one degree at a time with the higher degrees refitted after each rounding. a is
 * clamped at OM_TANH_AMAX first: the last polynomial is fitted up to it and rounds to 1 from
 * 9.01 on, where tanh does (1 - tanh(a) < 2^-25), and inf becomes finite. The interval index
 * comes from the bits of the clamped a raised to OM_TANH_LO: exponent and 2 mantissa bits,
 * (bits - bits(OM_TANH_LO)) >> 21, in [0, 28]; each ISA header looks up a vector's rows its
 * own way (permutes, transposes, lane by lane). No division, no branch. The sign is put back
 * at the end, so tanh(-0) = -0. A NaN passes both clamps (x86 min and max return their second
 * operand then) into d = a - m and the polynomial, which propagate it: x + x comes out. */
#define OM_TANH_DEG 5
#define OM_TANH_LUT 32
#define OM_TANH_LO 0.0625f
#define OM_TANH_AMAX 9.5f
/* One X(m, c0, c1, c2, c3, c4, c5) per interval, in index order. */
#define OM_TANH_INTERVALS(X)                                  \
    X(0.0f, 0.0f, 1.0f, 3.60116026e-08f,                      \
      -0.333337158f, 0.000124088212f, 0.131969422f)           \
    X(0.0859375f, 0.0857265666f, 0.992650986f, -0.085114114f, \
      -0.325235039f, 0.286289811f, 19.9480858f)               \
    X(0.1015625f, 0.101214729f, 0.989755571f, -0.100058436f,  \
      -0.318927526f, -1.49979174f, -13.1255913f)              \
    X(0.1171875f, 0.116653986f, 0.986391783f, -0.114909485f,  \
      -0.311481029f, -1.98387063f, -49.1594505f)              \
    X(0.140625f, 0.1397053f, 0.980482399f, -0.136937633f,     \
      -0.307197541f, -0.0456648692f, -1.53233314f)            \
    X(0.171875f, 0.170202315f, 0.971031249f, -0.165377453f,   \
      -0.296762347f, 0.451880276f, 4.07851553f)               \
    X(0.203125f, 0.200376719f, 0.959849179f, -0.192343161f,   \
      -0.281539768f, 0.158938676f, 0.507100523f)              \
    X(0.234375f, 0.230175704f, 0.9470191f, -0.217861682f,     \
      -0.264754653f, -0.256649852f, -2.44320679f)             \
    X(0.28125f, 0.27406159f, 0.92489028f, -0.253482908f,      \
      -0.238948956f, 0.154808387f, 0.150720924f)              \
    X(0.34375f, 0.330821127f, 0.890557408f, -0.294652879f,    \
      -0.199494064f, 0.194973081f, 0.127692342f)              \
    X(0.40625f, 0.385283977f, 0.851556301f, -0.32813406f,     \
      -0.157599211f, 0.205254272f, 0.136219546f)              \
    X(0.46875f, 0.437188774f, 0.808865905f, -0.353582889f,    \
      -0.114786603f, 0.131860375f, -0.202317148f)             \
    X(0.5625f, 0.509829998f, 0.740073442f, -0.377336234f,     \
      -0.0543777384f, 0.15836136f, -0.0325571969f)            \
    X(0.6875f, 0.596373558f, 0.644338608f, -0.384269029f,     \
      0.0143646523f, 0.119980067f, -0.0574513711f)            \
    X(0.8125f, 0.670967102f, 0.549803257f, -0.368928403f,     \
      0.0641837567f, 0.0857368037f, -0.0492223799f)           \
    X(0.9375f, 0.734071493f, 0.461138964f, -0.338482052f,     \
      0.0948166847f, 0.0378140472f, -0.0611119904f)           \
    X(1.125f, 0.809301078f, 0.345031768f, -0.279238641f,      \
      0.110976554f, 0.00377810956f, -0.0321179181f)           \
    X(1.375f, 0.879826725f, 0.225904986f, -0.198764771f,      \
      0.0995687619f, -0.0207862835f, -0.00938439183f)         \
    X(1.625f, 0.925346255f, 0.143734366f, -0.133012161f,      \
      0.0751627684f, -0.0247350466f, 0.00146206655f)          \
    X(1.875f, 0.954045236f, 0.0897976384f, -0.0856649205f,    \
      0.051802516f, -0.0211654603f, 0.00455867965f)           \
    X(2.25f, 0.978026092f, 0.043464914f, -0.0425071381f,      \
      0.0270878859f, -0.0124044269f, 0.00397556089f)          \
    X(2.75f, 0.991859734f, 0.0162142906f, -0.0160819739f,     \
      0.0105461972f, -0.00513993576f, 0.0019156218f)          \
    X(3.25f, 0.996997654f, 0.0059957169f, -0.00597851072f,    \
      0.00396095729f, -0.00196245778f, 0.000770804065f)       \
    X(3.75f, 0.998894453f, 0.00220989296f, -0.00220794673f,   \
      0.00146828895f, -0.000730819069f, 0.000292643497f)      \
    X(4.5f, 0.999753177f, 0.000493528205f, -0.000492245774f,  \
      0.000328423019f, -0.000173715438f, 6.83041144e-05f)     \
    X(5.5f, 0.999966621f, 6.68060602e-05f, -6.71069283e-05f,  \
      4.44844663e-05f, -2.20808888e-05f, 9.27997189e-06f)     \
    X(6.5f, 0.99999547f, 9.04147782e-06f, -8.88108116e-06f,   \
      6.02101363e-06f, -3.63352865e-06f, 1.25652571e-06f)     \
    X(7.5f, 0.999999404f, 1.22363588e-06f, -1.47420849e-06f,  \
      8.14866326e-07f, 3.79521566e-07f, 1.70069711e-07f)      \
    X(8.75f, 0.99999994f, 1.00466323e-07f, -3.3048277e-08f,   \
      6.65874609e-08f, -1.32071037e-07f, 1.46990882e-08f)

/* the table by interval: row i = m, c0, ..., c5 and a zero pad (one 32-byte row) */
#define OM_TANH_ROW(m, c0, c1, c2, c3, c4, c5) {m, c0, c1, c2, c3, c4, c5, 0.0f},
static const float om_tanh_rows[OM_TANH_LUT][8] = {OM_TANH_INTERVALS(OM_TANH_ROW)};
#undef OM_TANH_ROW

/* tanh: max error 1.167 ulp (exhaustive sweep, at 0.549124). */
static inline float om_tanhf(float x) {
    float a = om_minf(OM_TANH_AMAX, om_absf(x));
    uint32_t i = (om_f2u(om_maxf(a, OM_TANH_LO)) - om_f2u(OM_TANH_LO)) >> 21;
    const float *c = om_tanh_rows[i];
    float d = a - c[0];
    float y = c[OM_TANH_DEG + 1];
    for (int k = OM_TANH_DEG; k >= 1; k--) y = fmaf(y, d, c[k]);
    return om_xorsignf(y, om_signf(x));
}

/* ---- sigmoid --------------------------------------------------------------------------- */

/* num / (1 + e) for e <= 1 with one division (it costs as much as the rest): d = 1 + e and its
 * rounding error derr (d + derr = 1 + e exactly), r = 1 / d, q = num r; then one correction by
 * the remainder num - q (d + derr), which the fused multiply-adds form almost exactly. */
static inline float om_div_one_plus(float num, float e) {
    float d = 1.0f + e;
    float derr = (1.0f - d) + e;
    float r = 1.0f / d;
    float q = num * r;
    float rem = fmaf(-q, derr, fmaf(-q, d, num));
    return fmaf(rem, r, q);
}

/* 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, e = exp(-|x|) <= 1: no overflow, and the
 * negative side keeps full relative accuracy down to the denormals. */
/* sigmoid: max error 1.480 ulp (exhaustive sweep, at -4.84646). */
static inline float om_sigmoidf(float x) {
    float e = om_expf(-om_absf(x));
    float num = x < 0.0f ? e : 1.0f;
    float y = om_div_one_plus(num, e);
    return x != x ? x + x : y;
}

/* ---- softplus -------------------------------------------------------------------------- */

/* log(1 + e) for e in [0, 1] (musl log1pf restricted to that range): below sqrt(2) - 1, 1 + e
 * is not formed (f = e exactly); above it u = 1 + e lies in [sqrt(2), 2], log(u) = ln2 +
 * log(u/2) with u/2 - 1 exact, and c/u corrects for the rounding of 1 + e. */
#define OM_LOG1P_SPLIT 0.414213538f /* 0x3ed413d0 */

static inline float om_log1p_unit(float e) {
    int big = e >= OM_LOG1P_SPLIT;
    float u = 1.0f + e;
    float c = (e - (u - 1.0f)) / u;
    c = big ? c : 0.0f;
    float f = big ? u * 0.5f - 1.0f : e;
    float dk = big ? 1.0f : 0.0f;
    return fmaf(dk, OM_LOG_LN2_HI, om_log_kernel(f, dk * OM_LOG_LN2_LO + c) + f);
}

/* softplus(x) = max(x, 0) + log(1 + exp(-|x|)): max error 1.711 ulp (exhaustive sweep, at
 * -1.26046). */
static inline float om_softplusf(float x) {
    float m = x > 0.0f ? x : 0.0f;
    float y = m + om_log1p_unit(om_expf(-om_absf(x)));
    return x != x ? x + x : y;
}

/* ---- erf, erfc ------------------------------------------------------------------------- */

/* erf(x) = x + x R(x^2) for |x| < 0.9, R a degree-6 least-squares fit of erf(x)/x - 1 weighted
 * for relative error (float32 evaluation error below 1.2 ulp). */
#define OM_ERF_SMALL 0.9f
#define OM_ERF_R0 0.12837916612625122f
#define OM_ERF_R1 -0.37612634897232056f
#define OM_ERF_R2 0.11283725500106812f
#define OM_ERF_R3 -0.026860978454351425f
#define OM_ERF_R4 0.0052048685029149055f
#define OM_ERF_R5 -0.0008185906335711479f
#define OM_ERF_R6 8.552939107175916e-05f
/* erfc(z) = exp(-z^2) Q(z) for z in [0.5, 11.5], Q(z) = t P(t), t = 1 / (1 + z/2), P of degree
 * 10 fitted for relative error (float32 evaluation of Q within 2.6 ulp). z^2 enters exp as an
 * exact two-float sum: exp(-z^2) is ill-conditioned (relative error 2 z^2 times that of z^2). */
#define OM_ERFC_ZMAX 11.5f
#define OM_ERFC_Q0 0.2820960283279419f
#define OM_ERFC_Q1 0.28205132484436035f
#define OM_ERFC_Q2 0.24750113487243652f
#define OM_ERFC_Q3 0.17034542560577393f
#define OM_ERFC_Q4 0.11803542077541351f
#define OM_ERFC_Q5 -0.13726681470870972f
#define OM_ERFC_Q6 0.29433608055114746f
#define OM_ERFC_Q7 -0.6738098859786987f
#define OM_ERFC_Q8 0.6783584356307983f
#define OM_ERFC_Q9 -0.32319480180740356f
#define OM_ERFC_Q10 0.061551906168460846f

/* x R(x^2) (erf(x) = x + this, for |x| < OM_ERF_SMALL) */
static inline float om_erf_small_tail(float x) {
    float z = x * x;
    float r = OM_ERF_R6 * z + OM_ERF_R5;
    r = r * z + OM_ERF_R4;
    r = r * z + OM_ERF_R3;
    r = r * z + OM_ERF_R2;
    r = r * z + OM_ERF_R1;
    r = r * z + OM_ERF_R0;
    return x * r;
}

/* m * erfc(z) for z in [0.5, OM_ERFC_ZMAX], given z^2 = sqh + sql exactly; m scales the
 * result before its final rounding, so a denormal m erfc(z) is rounded once. */
static inline float om_erfc_scaled(float z, float sqh, float sql, float m) {
    float t = 1.0f / (1.0f + 0.5f * z);
    float q = OM_ERFC_Q10 * t + OM_ERFC_Q9;
    q = q * t + OM_ERFC_Q8;
    q = q * t + OM_ERFC_Q7;
    q = q * t + OM_ERFC_Q6;
    q = q * t + OM_ERFC_Q5;
    q = q * t + OM_ERFC_Q4;
    q = q * t + OM_ERFC_Q3;
    q = q * t + OM_ERFC_Q2;
    q = q * t + OM_ERFC_Q1;
    q = q * t + OM_ERFC_Q0;
    q = q * t;
    float n;
    float qe = om_expm1_parts(-sqh, -sql, &n);
    float mq = m * q;
    return om_ldexp2f(mq + mq * qe, n);
}

/* 2^n as a double for an integral n in [-1022, 1023]: the low mantissa bits of n + 2^52 + 1023
 * hold n + 1023, which a shift by 52 moves into the exponent field. */
#define OM_POW2_MAGIC 4503599627370496.0 /* 2^52 */
static inline double om_pow2d(float n) {
    double d = (double)n + (OM_POW2_MAGIC + 1023.0);
    uint64_t u;
    memcpy(&u, &d, 8);
    u <<= 52;
    memcpy(&d, &u, 8);
    return d;
}

#define OM_SQRT1_2 0.707106781f
#define OM_SQRT1_2_D 0.70710678118654752440
/* m * erfc(z), z = axc / sqrt(2) in [0.5, OM_ERFC_ZMAX], given z^2 = sqh + sql exactly: as
 * om_erfc_scaled, with z, t, Q and the products in double and one rounding to float at the
 * end (exp's argument reduction and polynomial stay in float; t is refined from a float
 * quotient, as a double division costs several times more). Where a result is m erfc(z)
 * itself (gelu below -1/sqrt(2)), the float32 Q costs up to 6.6 ulp; this way the error is
 * exp's and that rounding. */
static inline float om_erfc_scaled_wide(float axc, float sqh, float sql, float m) {
    float tf = 1.0f / (1.0f + 0.5f * (axc * OM_SQRT1_2));
    double z = (double)axc * OM_SQRT1_2_D;
    double t0 = (double)tf; /* t = 1 / (1 + z/2): one Newton step from the float quotient */
    double t = t0 + t0 * (1.0 - (1.0 + 0.5 * z) * t0);
    double q = (double)OM_ERFC_Q10 * t + (double)OM_ERFC_Q9;
    q = q * t + (double)OM_ERFC_Q8;
    q = q * t + (double)OM_ERFC_Q7;
    q = q * t + (double)OM_ERFC_Q6;
    q = q * t + (double)OM_ERFC_Q5;
    q = q * t + (double)OM_ERFC_Q4;
    q = q * t + (double)OM_ERFC_Q3;
    q = q * t + (double)OM_ERFC_Q2;
    q = q * t + (double)OM_ERFC_Q1;
    q = q * t + (double)OM_ERFC_Q0;
    q = q * t;
    float n;
    float qe = om_expm1_parts(-sqh, -sql, &n);
    return (float)((double)m * q * (1.0 + (double)qe) * om_pow2d(n));
}

/* erf: max error 1.496 ulp (exhaustive sweep, at 0.932987). */
static inline float om_erff(float x) {
    float ax = om_absf(x);
    float az = ax < OM_ERFC_ZMAX ? ax : OM_ERFC_ZMAX; /* also maps inf to a finite argument */
    float sqh, sql;
    om_two_prod(az, az, &sqh, &sql);
    float large = om_xorsignf(1.0f - om_erfc_scaled(az, sqh, sql, 1.0f), om_signf(x));
    float small = x + om_erf_small_tail(x);
    float y = ax < OM_ERF_SMALL ? small : large;
    return x != x ? x + x : y;
}

/* ---- gelu (erf form) ------------------------------------------------------------------- */

/* Inputs beyond +-16 are clamped where they enter the erf (gelu(-16) already underflows to -0
 * and gelu(16) = 16), so gelu(-inf) = -0 and gelu(inf) = inf. */
#define OM_GELU_XMAX 16.0f
/* Below x = -1/sqrt(2) (z = x/sqrt(2) < -0.5), 1 + erf(z) = erfc(-z) is computed directly:
 * the sum would cancel. */
#define OM_GELU_NEG -0.707106781f

/* 1 + erf(x / sqrt(2)) = 2 Phi(x) for x >= OM_GELU_NEG; for x below it, m erfc(-x/sqrt(2))
 * (the caller's factor m applied before the final rounding). */
static inline float om_gelu_cdf2(float x, float m) {
    float xc = x < OM_GELU_XMAX ? x : OM_GELU_XMAX;
    xc = xc > -OM_GELU_XMAX ? xc : -OM_GELU_XMAX;
    float z = xc * OM_SQRT1_2;
    float sqh, sql;
    om_two_prod(xc, xc, &sqh, &sql);
    int neg = x < OM_GELU_NEG;
    float e = om_erfc_scaled_wide(om_absf(xc), 0.5f * sqh, 0.5f * sql, neg ? m : 1.0f);
    float mid = 1.0f + (z + om_erf_small_tail(z));
    float y = z < OM_ERF_SMALL ? mid : 2.0f - e;
    return neg ? e : y;
}

/* gelu(x) = x Phi(x) = x (1 + erf(x/sqrt(2))) / 2: max error 1.939 ulp (exhaustive sweep, at
 * -0.656271, where 1 + erf(z) cancels; below -1/sqrt(2) the double erfc keeps it lower). */
static inline float om_geluf(float x) {
    float xc = x > -OM_GELU_XMAX ? x : -OM_GELU_XMAX;
    float c = om_gelu_cdf2(x, 0.5f * xc);
    float y = x < OM_GELU_NEG ? c : x * (0.5f * c);
    return x != x ? x + x : y;
}

/* ---- gelu (tanh form) ------------------------------------------------------------------ */

/* gelu_tanh(x) = x (1 + tanh(u)) / 2 = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3),
 * evaluated as x / (1 + exp(-v)) for v = 2u >= 0 and x exp(v) / (1 + exp(v)) below: no
 * cancellation. v = x (C1 + C2 x^2) is formed as an exact-ish two-float value (C1, C2 split
 * into high and low floats) because exp(v) amplifies the error of v by |v|, up to ~100. */
#define OM_GELU_T_C1_HI 1.59576917f      /* 2 sqrt(2/pi) */
#define OM_GELU_T_C1_LO -4.53406805e-08f
#define OM_GELU_T_C2_HI 0.0713548139f    /* 2 sqrt(2/pi) 0.044715 */
#define OM_GELU_T_C2_LO 2.39883247e-09f
/* Beyond +-20, v has saturated the sigmoid; clamping keeps x^3 finite. */
#define OM_GELU_T_XMAX 20.0f

/* gelu_tanh: max error 1.513 ulp (exhaustive sweep, at -2.74753). */
static inline float om_gelu_tanhf(float x) {
    float xc = x < OM_GELU_T_XMAX ? x : OM_GELU_T_XMAX;
    xc = xc > -OM_GELU_T_XMAX ? xc : -OM_GELU_T_XMAX;
    float sh, sl, ph, pl, vh, vl;
    om_two_prod(xc, xc, &sh, &sl);                       /* x^2 */
    om_two_prod(OM_GELU_T_C2_HI, sh, &ph, &pl);          /* C2 x^2 */
    pl = pl + (OM_GELU_T_C2_HI * sl + OM_GELU_T_C2_LO * sh);
    float w = OM_GELU_T_C1_HI + ph;                      /* C1 + C2 x^2, two-sum */
    float bv = w - OM_GELU_T_C1_HI;
    float wl = (OM_GELU_T_C1_HI - (w - bv)) + (ph - bv);
    wl = wl + (pl + OM_GELU_T_C1_LO);
    om_two_prod(xc, w, &vh, &vl);                        /* v = x (C1 + C2 x^2) */
    vl = vl + xc * wl;
    float a = vh + vl;                                   /* renormalise */
    float al = vl - (a - vh);
    float sign = om_signf(a);
    float n;
    float q = om_expm1_parts(-om_absf(a), om_xorsignf(-al, sign), &n); /* exp(-|v|) */
    float e = om_ldexp2f(q + 1.0f, n);
    /* x / (1 + e) for v >= 0, and (x + x q) 2^n / (1 + e) below, as N / (d + derr): N = nh + nl
     * and d + derr = 1 + e exactly. One division y0 = nh / d, then the residual
     * N - y0 (d + derr) = (nh - y0 d) + nl - nh derr to first order, with y0 d an exact product,
     * divided by d approximately: 1.5 - d/2 is within 12% of 1/d on [1, 2], on a term below
     * 2^-22 of y0. The quotient is rounded once more, in the final sum, not twice. */
    int neg = a < 0.0f;
    float t = xc * q;
    float th = xc + t;
    float nh = neg ? th : xc;
    float nl = neg ? t - (th - xc) : 0.0f; /* exact: |t| < |xc| */
    float d = 1.0f + e;
    float derr = (1.0f - d) + e;
    float y0 = nh / d;
    float yh, yl;
    om_two_prod(y0, d, &yh, &yl);
    float res = (((nh - yh) - yl) + nl) - nh * derr;
    float y = om_ldexp2f(y0 + res * (1.5f - 0.5f * d), neg ? n : 0.0f);
    y = x > OM_GELU_T_XMAX ? x : y; /* gelu_tanh(x) = x there, and inf stays inf */
    y = x == 0.0f ? x : y;          /* keeps -0 */
    return x != x ? x + x : y;
}

/* ---- backward: grad_in from the saved tensor and the incoming gradient ------------------ */
/* The formulas and their evaluation order are PyTorch's. */

/* relu(x) = x < 0 ? +0 : x (so -0 and NaN pass through, as PyTorch's); its gradient is g
 * where the output is > 0 or NaN and +0 elsewhere (also where g is inf). */
static inline float om_reluf(float x) { return x < 0.0f ? 0.0f : x; }
static inline float om_relu_gradf(float y, float g) { return y <= 0.0f ? 0.0f : g; }

static inline float om_exp_gradf(float y, float g) { return g * y; }
static inline float om_log_gradf(float x, float g) { return g / x; }
static inline float om_tanh_gradf(float y, float g) { return g * (1.0f - y * y); }
static inline float om_sigmoid_gradf(float y, float g) { return g * (1.0f - y) * y; }
static inline float om_softplus_gradf(float x, float g) { return g * om_sigmoidf(x); }

#define OM_2_SQRTPI 1.12837917f
static inline float om_erf_gradf(float x, float g) {
    return OM_2_SQRTPI * om_expf(-(x * x)) * g;
}

#define OM_GELU_BETA 0.398942280f /* 1/sqrt(2 pi) */
static inline float om_gelu_gradf(float x, float g) {
    float cdf = 0.5f * om_gelu_cdf2(x, 1.0f);
    float pdf = om_expf(x * x * -0.5f) * OM_GELU_BETA;
    return g * (cdf + x * pdf);
}

#define OM_GELU_T_BETA 0.797884561f /* sqrt(2/pi) */
#define OM_GELU_T_KAPPA 0.044715f
static inline float om_gelu_tanh_gradf(float x, float g) {
    float x_sq = x * x;
    float x_cube = x_sq * x;
    float inner = OM_GELU_T_BETA * (x + OM_GELU_T_KAPPA * x_cube);
    float th = om_tanhf(inner);
    float left = 0.5f * x;
    float right = 1.0f + th;
    float left_derivative = 0.5f * right;
    float tanh_derivative = 1.0f - th * th;
    float inner_derivative = OM_GELU_T_BETA * (1.0f + 3.0f * OM_GELU_T_KAPPA * x_sq);
    float right_derivative = left * tanh_derivative * inner_derivative;
    return g * (left_derivative + right_derivative);
}

#endif
