/* Exact-mode transcendentals, float32: the scalar reference.
 *
 * Every function here is built from + - * /, comparisons and bit manipulation only: no libm,
 * and NO fused multiply-add anywhere (each a*b + c is a rounded product, then a rounded sum).
 * The SIMD translations (vmath_simd.h through vmath_sse2.h, vmath_avx2.h, vmath_avx512.h)
 * evaluate the same operations in the same order, with the same range reduction and the same
 * special cases, so they give the same bits on every input. Branches are written as selects
 * (compute every candidate, then pick) so the vector code reads the same way.
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

#include <stdint.h>
#include <string.h>

static inline uint32_t om_f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float om_u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

#define OM_NAN_BITS 0x7fc00000u
#define OM_INF_BITS 0x7f800000u

/* ---- exp ------------------------------------------------------------------------------- */

/* Inputs are clamped into [OM_EXP_MIN, OM_EXP_MAX]: exp(89) overflows to inf and exp(-104)
 * rounds to 0, so the clamp only keeps the reduction in range. */
#define OM_EXP_MAX 89.0f
#define OM_EXP_MIN -104.0f
#define OM_LOG2E 1.44269502f
/* 1.5 * 2^23: adding it rounds to an integer, whose value is in the low mantissa bits. */
#define OM_ROUND_MAGIC 12582912.0f
/* ln 2 = OM_LN2_HI + OM_LN2_LO; OM_LN2_HI has 13 significant bits, so n * OM_LN2_HI is exact for
 * |n| <= 150 and x - n * OM_LN2_HI is exact (Cody and Waite). */
#define OM_LN2_HI 0.693359375f
#define OM_LN2_LO -2.12194440e-4f
/* exp(r) = 1 + r + r^2 P(r) on |r| <= ln2/2 (Cephes expf). */
#define OM_EXP_P0 1.9875691500e-4f
#define OM_EXP_P1 1.3981999507e-3f
#define OM_EXP_P2 8.3334519073e-3f
#define OM_EXP_P3 4.1665795894e-2f
#define OM_EXP_P4 1.6666665459e-1f
#define OM_EXP_P5 5.0000001201e-1f

/* exp(hi + lo) as p * 2^n with p in about [0.7, 1.42]: the caller scales (om_ldexp2f), possibly
 * after multiplying p by a factor so that a denormal result is rounded only once. lo is a
 * small correction (|lo| < 2^-10) carrying the low part of an argument known more precisely
 * than one float; n is derived from hi alone. hi must not be NaN (callers select it away). */
static inline float om_exp_parts(float hi, float lo, int32_t *n_out) {
    float xc = hi > OM_EXP_MAX ? OM_EXP_MAX : hi;
    xc = xc < OM_EXP_MIN ? OM_EXP_MIN : xc;
    float t = xc * OM_LOG2E + OM_ROUND_MAGIC;
    float n = t - OM_ROUND_MAGIC;
    *n_out = (int32_t)(om_f2u(t) - om_f2u(OM_ROUND_MAGIC));
    float r = xc - n * OM_LN2_HI;
    r = r - n * OM_LN2_LO;
    r = r + lo;
    float y = OM_EXP_P0 * r + OM_EXP_P1;
    y = y * r + OM_EXP_P2;
    y = y * r + OM_EXP_P3;
    y = y * r + OM_EXP_P4;
    y = y * r + OM_EXP_P5;
    return y * (r * r) + r + 1.0f;
}

/* p * 2^n for n in [-150, 128]: two factors 2^(n>>1) and 2^(n - (n>>1)), both normal. The
 * first product is exact for p near 1; only the second rounds (gradual underflow, or inf). */
static inline float om_ldexp2f(float p, int32_t n) {
    int32_t n1 = n >> 1;
    int32_t n2 = n - n1;
    float s1 = om_u2f((uint32_t)(n1 + 127) << 23);
    float s2 = om_u2f((uint32_t)(n2 + 127) << 23);
    return p * s1 * s2;
}

/* exp: max error 1 ulp (sweep). */
static inline float om_expf(float x) {
    int32_t n;
    float p = om_exp_parts(x, 0.0f, &n);
    float y = om_ldexp2f(p, n);
    return x != x ? x + x : y;
}

/* ---- log ------------------------------------------------------------------------------- */

/* log(1+f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f), on f in [sqrt(2)/2-1, sqrt(2)-1]
 * (FreeBSD/musl logf; |R - exact| < 2^-34.24). */
#define OM_LOG_LG1 0.66666662693f
#define OM_LOG_LG2 0.40000972152f
#define OM_LOG_LG3 0.28498786688f
#define OM_LOG_LG4 0.24279078841f
#define OM_LOG_LN2_HI 6.9313812256e-01f /* 0x3f317180: k * LN2_HI exact for |k| < 2^9 */
#define OM_LOG_LN2_LO 9.0580006145e-06f
/* 0x3f3504f3 = sqrt(2)/2: mantissas at or above it belong to the exponent below. */
#define OM_SQRT_HALF_BITS 0x3f3504f3u

/* log(1+f) - f for the reduced f, without the k ln2 terms. */
static inline float om_log_kernel(float f, float *hfsq_out) {
    float s = f / (2.0f + f);
    float z = s * s;
    float w = z * z;
    float t1 = w * (OM_LOG_LG2 + w * OM_LOG_LG4);
    float t2 = z * (OM_LOG_LG1 + w * OM_LOG_LG3);
    float r = t2 + t1;
    float hfsq = 0.5f * f * f;
    *hfsq_out = hfsq;
    return s * (hfsq + r);
}

/* log: max error 1 ulp (sweep). */
static inline float om_logf(float x) {
    /* denormals: scale into the normal range first */
    int sub = x < 1.17549435e-38f;
    float xs = sub ? x * 33554432.0f : x; /* 2^25 */
    int32_t k0 = sub ? -25 : 0;
    uint32_t ix = om_f2u(xs) + (0x3f800000u - OM_SQRT_HALF_BITS);
    int32_t k = (int32_t)(ix >> 23) - 127 + k0;
    float m = om_u2f((ix & 0x007fffffu) + OM_SQRT_HALF_BITS);
    float f = m - 1.0f;
    float hfsq;
    float sr = om_log_kernel(f, &hfsq);
    float dk = (float)k;
    float y = sr + dk * OM_LOG_LN2_LO - hfsq + f + dk * OM_LOG_LN2_HI;
    y = x == om_u2f(OM_INF_BITS) ? x : y;
    y = x == 0.0f ? -om_u2f(OM_INF_BITS) : y;
    y = x < 0.0f ? om_u2f(OM_NAN_BITS) : y;
    return x != x ? x + x : y;
}

#endif
