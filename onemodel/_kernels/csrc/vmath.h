/* Exact-mode transcendentals, float32: their constants and tables, and the scalar path.
 *
 * The functions are written once, in vmath_simd.h, over the vector vocabulary of simd/; this
 * header instantiates them on single floats (om_exp_scalar, om_tanh_scalar, ...: the scalar
 * path, which the other kernel families call too), and vmath_sse2.h, vmath_avx2.h,
 * vmath_avx512.h and vmath_neon.h on their vectors (om_exp_avx2, ...). Every path thus
 * evaluates the same operations in the same order, with the same range reduction and the same
 * special cases, and gives the same bits on every input. Branches are selects (compute every
 * candidate, then pick); the vector code may skip a group of selects when a test shows they
 * keep every lane.
 *
 * Every function is built from + - * /, comparisons and bit manipulation only: no libm
 * transcendental. FMA policy: a*b + c is a rounded product, then a rounded sum, except where a
 * function calls OMV_FMA (log's polynomial and tail, shared by softplus, tanh's polynomial and
 * sigmoid's division): fmaf here, correctly rounded, and every SIMD path's fused multiply-add
 * (SSE2, which has none, calls fmaf per lane), so the bits stay the same.
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

#define OM_NAN_BITS 0x7fc00000u
#define OM_INF_BITS 0x7f800000u

/* ---- exp ------------------------------------------------------------------------------- */

/* Inputs are clamped into [OM_EXP_MIN, OM_EXP_MAX]: exp(89) overflows to inf and exp(-110)
 * rounds to 0 even after om_expm1_parts' callers scale it by up to 2^5, so the clamp only keeps
 * the reduction in range (n in [-159, 128]). */
#define OM_EXP_MAX 89.0f
#define OM_EXP_MIN -110.0f
/* The largest float32 whose exp rounds to +0 (every path, exhaustively): -103.972084. */
#define OM_EXP_ZERO -0x1.9fe36ap+6f
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

#define OM_FLT_MIN 1.17549435e-38f
#define OM_LOG_DENORMAL_SCALE 33554432.0f /* 2^25 */
#define OM_LOG_DENORMAL_KBIAS (-25)

/* ---- helpers: sign, exact products ------------------------------------------------------ */

#define OM_SIGN_BITS 0x80000000u

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

/* ---- sigmoid --------------------------------------------------------------------------- */

/* 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, e = exp(-|x|) <= 1: no overflow, and the
 * negative side keeps full relative accuracy down to the denormals. */

/* ---- softplus -------------------------------------------------------------------------- */

/* log(1 + e) for e in [0, 1] (musl log1pf restricted to that range): below sqrt(2) - 1, 1 + e
 * is not formed (f = e exactly); above it u = 1 + e lies in [sqrt(2), 2], log(u) = ln2 +
 * log(u/2) with u/2 - 1 exact, and c/u corrects for the rounding of 1 + e. */
#define OM_LOG1P_SPLIT 0.414213538f /* 0x3ed413d0 */

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
/* 2^n as a double for an integral n in [-1022, 1023]: the low mantissa bits of n + 2^52 + 1023
 * hold n + 1023, which a shift by 52 moves into the exponent field. */
#define OM_POW2_MAGIC 4503599627370496.0 /* 2^52 */

#define OM_SQRT1_2 0.707106781f
#define OM_SQRT1_2_D 0.70710678118654752440

/* ---- gelu (erf form) ------------------------------------------------------------------- */

/* Inputs beyond +-16 are clamped where they enter the erf (gelu(-16) already underflows to -0
 * and gelu(16) = 16), so gelu(-inf) = -0 and gelu(inf) = inf. */
#define OM_GELU_XMAX 16.0f
/* Below x = -1/sqrt(2) (z = x/sqrt(2) < -0.5), 1 + erf(z) = erfc(-z) is computed directly:
 * the sum would cancel. */
#define OM_GELU_NEG -0.707106781f

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

/* ---- sin, cos --------------------------------------------------------------------------- */

/* x = n pi/2 + r with |r| <= pi/4, then sin(x) or cos(x) is +-sin(r) or +-cos(r) by n mod 4.
 * The reduction and both Taylor polynomials run in double (as glibc's sinf does), so the one
 * rounding that matters is the last, to float: error 0.5 ulp plus ~2^-13 (the polynomials'
 * truncation, below 2^-36 relative). Below OM_TRIG_BIG, n = round(x 2/pi) and r = (x - n P1)
 * - n P2 (Cody-Waite: P1 has 32 significant bits, so n P1 is exact for n < 2^21 and the first
 * difference is exact, Sterbenz); from OM_TRIG_BIG on, and for inf, lane by lane,
 * om_trig_reduce_large (Payne-Hanek). r travels as two floats hi + lo (48 bits, exact when
 * widened and added), so both reductions meet in float vectors: a lane's bits never depend on
 * its neighbours. */
#define OM_TRIG_BIG 1048576.0f                   /* 2^20 */
#define OM_2_OVER_PI_D 0.63661977236758134308    /* 0x1.45f306dc9c883p-1 */
#define OM_PIO2_1_D 1.5707963267341256           /* 0x1.921fb544p+0 */
#define OM_PIO2_2_D 6.077100506506192e-11        /* 0x1.0b4611a626331p-34 */
#define OM_PIO2_2M64_D 8.515303950216386e-20     /* pi/2 2^-64: 0x1.921fb54442d18p-64 */
#define OM_ROUND_MAGIC_D 6755399441055744.0      /* 1.5 2^52 */
/* sin(r) = r + r^3 S(r^2) and cos(r) = 1 + r^2 C(r^2), Taylor to r^11 and r^12, highest first */
static const double om_sin_coeffs[5] = {-1.0 / 39916800, 1.0 / 362880, -1.0 / 5040, 1.0 / 120,
                                        -1.0 / 6};
static const double om_cos_coeffs[6] = {1.0 / 479001600, -1.0 / 3628800, 1.0 / 40320,
                                        -1.0 / 720, 1.0 / 24, -0.5};

/* The bits of 2/pi after the point, 32 to a word, behind one zero word: bit j of the array
 * (0 = the top bit of word 0) weighs 2^(31 - j). floor(2^(32 k) 2/pi) mod 2^32 for k = 1..7. */
static const uint32_t om_two_over_pi_words[8] = {
    0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
    0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu};

/* Bits [j, j + 32) of om_two_over_pi_words. */
static inline uint64_t om_two_over_pi_at(int j) {
    const uint32_t *w = om_two_over_pi_words + (j >> 5);
    return ((((uint64_t)w[0] << 32) | w[1]) << (j & 31)) >> 32;
}

/* Payne-Hanek for OM_TRIG_BIG <= |x| (finite; inf gives a NaN r): |x| = m 2^e with m a 24-bit
 * integer. Bits of 2/pi weighing 2^(2-e) or more make multiples of 4 in x 2/pi, which leave
 * n mod 4 alone, so only the 96 bits W from weight 2^(1-e) on are needed: x 2/pi mod 4 =
 * 4 frac(m W / 2^96) (those after them add below 2^-70). Of m W mod 2^96, the top 2 bits are
 * n mod 4 and the next 62 the fraction, rounded to the nearest n by reading it signed. */
static inline void om_trig_reduce_large(float x, float *hi, float *lo, float *q) {
    uint32_t u;
    memcpy(&u, &x, 4);
    int biased = (int)(u >> 23 & 0xff);
    if (biased == 0xff) {
        const uint32_t nan = OM_NAN_BITS;
        memcpy(hi, &nan, 4);
        *lo = 0.0f;
        *q = 0.0f;
        return;
    }
    uint64_t m = (u & 0x7fffffu) | 0x800000u;
    int j = biased - 150 + 30; /* e - 1, as a bit position of om_two_over_pi_words */
    uint64_t top = ((m * om_two_over_pi_at(j)) << 32) + m * om_two_over_pi_at(j + 32) +
                   ((m * om_two_over_pi_at(j + 64)) >> 32);
    uint32_t n = (uint32_t)((top >> 62) + (top >> 61 & 1));
    double r = (double)(int64_t)(top << 2) * OM_PIO2_2M64_D;
    if (u >> 31) {
        r = -r;
        n = 0u - n;
    }
    *hi = (float)r;
    *lo = (float)(r - (double)*hi);
    *q = (float)(n & 3u);
}

/* ---- backward: grad_in from the saved tensor and the incoming gradient ------------------ */
/* The formulas and their evaluation order are PyTorch's. */

#define OM_2_SQRTPI 1.12837917f
#define OM_GELU_BETA 0.398942280f /* 1/sqrt(2 pi) */

#define OM_GELU_T_BETA 0.797884561f /* sqrt(2/pi) */
#define OM_GELU_T_KAPPA 0.044715f

/* ---- the scalar path: vmath_simd.h on single floats ------------------------------------ */

static inline void om_tanh_lookup_scalar(int32_t i, float *c) {
    memcpy(c, om_tanh_rows[i], sizeof om_tanh_rows[i]);
}

#include "simd/scalar.h"
#include "vmath_simd.h"
#include "simd/undef.h"

#endif
