/* One vector vocabulary for the kernels written once for every instruction-set path: this file
 * on single floats (the scalar path), simd/sse2.h, simd/avx2.h, simd/avx512.h and simd/neon.h on
 * their vectors. A family's body (vmath_simd.h, vmath_paths.c, reduce_paths.c, optim_paths.c,
 * rnn_body.h) is written over these macros and compiled once per path; each macro is one IEEE
 * operation lane by lane, the same on every path, so every path gives the same bits.
 *
 * Not include-guarded: a file may instantiate a body on two vocabularies (vmath.h's scalar
 * functions, then a vector path's), simd/undef.h ending the first. Helper functions sit behind
 * a guard of their own.
 *
 *   OMV (float vector), OMM (comparison mask), OMI (int32 vector), OMV_LANES,
 *   OMV_FN(name)        name with the path's suffix (_scalar, _sse2, _avx2, _avx512, _neon),
 *   OMV_SET1(c), OMV_ZERO(), OMV_LOAD(p), OMV_STORE(p, v)     unaligned, OMV_LANES floats,
 *   OMV_FIRST(n)        the mask of lanes below n, 0 <= n <= OMV_LANES,
 *   OMV_LOAD_PART(p, n, fill), OMV_STORE_PART(p, n, v)   lanes below n from or to p (only those
 *                       elements read or written; masked where the ISA has masks), the other
 *                       lanes `fill`; OMV_KEEP(v, n): lanes below n of v, the others +0.0f,
 *   OMV_ADD/SUB/MUL/DIV, OMV_SQRT, OMV_FMA(a, b, c) (a*b + c rounded once, as fmaf),
 *   OMV_LT/LE/EQ (ordered compares, false on NaN), OMV_ISNAN, OMV_MIN(a, b) and OMV_MAX(a, b)
 *   (a < b ? a : b and a > b ? a : b, as x86's minps/maxps: a NaN in a gives b),
 *   OMV_SEL(mask, if_true, if_false), OMV_AND, OMV_XOR, OMV_AS_I, OMV_AS_F (bit casts), OMV_I2F
 *   (exact int to float), OMV_F2I (float holding an integer to int), OMI_SET1, OMI_ADD, OMI_SUB,
 *   OMI_AND, OMI_SRL, OMI_SRA, OMI_SLL (shifts by a constant), OMI_SEL, OMI_LT (signed, to a
 *   mask), OMV_NONE(mask) (no lane set), OMV_MASK_BITS(mask) (an int, bit i set for lane i),
 *   OMD (double vector of half the lanes) with OMD_SET1, OMD_ADD, OMD_SUB, OMD_MUL, OMD_LO(v) and OMD_HI(v) (the low and high half of a float vector,
 *   widened), OMD_NARROW(lo, hi) (back to one float vector, rounded to nearest) and
 *   OMD_BITS_SLL52(d) (the bits of each double shifted left by 52).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define OMV float
#define OMM int
#define OMI int32_t
#define OMV_LANES 1
#define OMV_FN(name) name##_scalar
#define OMV_SET1(c) ((float)(c))
#define OMV_ZERO() 0.0f
#define OMV_LOAD(p) (*(p))
#define OMV_STORE(p, v) (*(p) = (v))
#define OMV_FIRST(n) ((n) > 0)
#define OMV_LOAD_PART(p, n, fill) om_load_part_scalar(p, n, fill)
#define OMV_STORE_PART(p, n, v) om_store_part_scalar(p, n, v)
#define OMV_KEEP(v, n) ((n) > 0 ? (v) : 0.0f)
#define OMV_ADD(a, b) ((a) + (b))
#define OMV_SUB(a, b) ((a) - (b))
#define OMV_MUL(a, b) ((a) * (b))
#define OMV_DIV(a, b) ((a) / (b))
#define OMV_SQRT(a) sqrtf(a)
#define OMV_FMA(a, b, c) fmaf(a, b, c)
#define OMV_LT(a, b) ((a) < (b))
#define OMV_LE(a, b) ((a) <= (b))
#define OMV_EQ(a, b) ((a) == (b))
#define OMV_ISNAN(a) ((a) != (a))
#define OMV_MIN(a, b) om_minf(a, b)
#define OMV_MAX(a, b) om_maxf(a, b)
#define OMV_F2I(a) ((int32_t)(a))
#define OMV_NONE(m) (!(m))
#define OMV_MASK_BITS(m) ((m) != 0)
#define OMV_SEL(m, a, b) ((m) ? (a) : (b))
#define OMV_AND(a, b) om_u2f(om_f2u(a) & om_f2u(b))
#define OMV_XOR(a, b) om_u2f(om_f2u(a) ^ om_f2u(b))
#define OMV_AS_I(a) ((int32_t)om_f2u(a))
#define OMV_AS_F(a) om_u2f((uint32_t)(a))
#define OMV_I2F(a) ((float)(a))
#define OMI_SET1(c) ((int32_t)(c))
#define OMI_ADD(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define OMI_SUB(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)))
#define OMI_AND(a, b) ((a) & (b))
#define OMI_SRL(a, k) ((int32_t)((uint32_t)(a) >> (k)))
#define OMI_SRA(a, k) ((a) >> (k))
#define OMI_SLL(a, k) ((int32_t)((uint32_t)(a) << (k)))
#define OMI_LT(a, b) ((a) < (b))
#define OMI_SEL(m, a, b) ((m) ? (a) : (b))

/* A double "vector" of one lane: both halves are the lane, and narrowing keeps the low one. */
#define OMD double
#define OMD_SET1(c) ((double)(c))
#define OMD_ADD(a, b) ((a) + (b))
#define OMD_MUL(a, b) ((a) * (b))
#define OMD_SUB(a, b) ((a) - (b))
#define OMD_LO(v) ((double)(v))
#define OMD_HI(v) ((double)(v))
#define OMD_NARROW(lo, hi) ((void)(hi), (float)(lo))
#define OMD_BITS_SLL52(d) om_bits_sll52(d)

#ifndef OM_SIMD_SCALAR_H /* the helpers once, however often the vocabulary is included */
#define OM_SIMD_SCALAR_H
static inline uint32_t om_f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float om_u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static inline float om_minf(float a, float b) { return a < b ? a : b; }
static inline float om_maxf(float a, float b) { return a > b ? a : b; }
static inline double om_bits_sll52(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    u <<= 52;
    memcpy(&d, &u, 8);
    return d;
}
#include "simd/part.h"
#endif
