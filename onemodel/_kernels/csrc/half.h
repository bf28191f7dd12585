/* bfloat16 and float16: rounding from float32 and widening back, bit-exact integer code.
 *
 * Rounding is to nearest, ties to even, as torch's and numpy's conversions: a NaN stays a NaN
 * (made quiet, its payload truncated), a float16 overflows to inf, and float16 subnormals are
 * rounded, not flushed. Widening is exact. Every path calls these (or, for float16 on paths with
 * F16C, the instructions, which give the same bits), so packing gives one answer everywhere.
 */
#ifndef OM_HALF_H
#define OM_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t om_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float om_f32_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline uint16_t om_bf16_round(float x) {
    const uint32_t u = om_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u | 0x00400000u) >> 16);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static inline float om_bf16_widen(uint16_t h) { return om_f32_of((uint32_t)h << 16); }

static inline uint16_t om_f16_round(float x) {
    const uint32_t u = om_f32_bits(x), a = u & 0x7FFFFFFFu;
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7F800000u) return sign | 0x7E00u | (uint16_t)((a >> 13) & 0x3FFu);
    if (a >= 0x477FF000u) return sign | 0x7C00u;       /* 65520 and above: inf */
    if (a >= 0x38800000u) {                             /* normal: rebias the exponent */
        const uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
        return sign | (uint16_t)((r - 0x38000000u) >> 13);
    }
    const int e = (int)(a >> 23);
    if (e < 102) return sign;                           /* at most 2^-25: rounds to zero */
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;     /* |x| = m * 2^(e - 150) */
    const int shift = 126 - e;                          /* in units of 2^-24 */
    const uint32_t q = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return sign | (uint16_t)(q + (rest > half || (rest == half && (q & 1u))));
}

static inline float om_f16_widen(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1F) return om_f32_of(sign | 0x7F800000u | (m ? 0x00400000u | m << 13 : 0u));
    if (e) return om_f32_of(sign | (e + 112u) << 23 | m << 13);
    return om_f32_of(sign | om_f32_bits((float)m * 0x1p-24f));  /* subnormal: exact */
}

#endif
