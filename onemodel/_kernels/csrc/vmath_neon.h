/* vmath.h on NEON vectors (float32x4_t, AArch64): om_<name>_ps_neon, bit-identical to the
 * scalar reference. The function bodies are in vmath_simd.h; this header maps its macros to
 * NEON intrinsics. Comparisons give all-ones lanes (uint32x4_t), selects are bit selects. min
 * and max are written as compare-and-select, because vminq/vmaxq return NaN for a NaN operand
 * where the x86 instructions the body is written against return the second operand. The
 * float-to-int conversion truncates, which is exact on the integral values it is given. No FMA
 * (vmath.h): only vmulq/vaddq, which the -ffp-contract=off build keeps apart. */
#ifndef OM_VMATH_NEON_H
#define OM_VMATH_NEON_H

#include <arm_neon.h>

#include "vmath.h"

/* table lookups lane by lane (the byte table instructions would need four of them per lookup) */
static inline float32x4_t om_lut32_neon(const float *t, int32x4_t i) {
    int32_t k[4];
    vst1q_s32(k, i);
    float v[4] = {t[k[0]], t[k[1]], t[k[2]], t[k[3]]};
    return vld1q_f32(v);
}

#define OMV float32x4_t
#define OMM uint32x4_t
#define OMI int32x4_t
#define OMV_FN(name) name##_ps_neon
#define OMV_SET1(c) vdupq_n_f32(c)
#define OMV_ADD(a, b) vaddq_f32(a, b)
#define OMV_SUB(a, b) vsubq_f32(a, b)
#define OMV_MUL(a, b) vmulq_f32(a, b)
#define OMV_DIV(a, b) vdivq_f32(a, b)
#define OMV_LT(a, b) vcltq_f32(a, b)
#define OMV_LE(a, b) vcleq_f32(a, b)
#define OMV_EQ(a, b) vceqq_f32(a, b)
#define OMV_ISNAN(a) vmvnq_u32(vceqq_f32(a, a))
#define OMV_NLT(a, b) vmvnq_u32(vcltq_f32(a, b))
#define OMV_MIN(a, b) vbslq_f32(vcltq_f32(a, b), a, b)
#define OMV_MAX(a, b) vbslq_f32(vcgtq_f32(a, b), a, b)
#define OMV_F2I(a) vcvtq_s32_f32(a)
#define OMM_OR(a, b) vorrq_u32(a, b)
#define OMV_NONE(m) (vmaxvq_u32(m) == 0)
#define OMV_SEL(m, a, b) vbslq_f32(m, a, b)
#define OMV_LUT32(t, i) om_lut32_neon(t, i)
#define OMV_AND(a, b) \
    vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)))
#define OMV_XOR(a, b) \
    vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)))
#define OMV_AS_I(a) vreinterpretq_s32_f32(a)
#define OMV_AS_F(a) vreinterpretq_f32_s32(a)
#define OMV_I2F(a) vcvtq_f32_s32(a)
#define OMI_SET1(c) vdupq_n_s32((int32_t)(c))
#define OMI_ADD(a, b) vaddq_s32(a, b)
#define OMI_SUB(a, b) vsubq_s32(a, b)
#define OMI_AND(a, b) vandq_s32(a, b)
#define OMI_SRL(a, k) vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(a), k))
#define OMI_SRA(a, k) vshrq_n_s32(a, k)
#define OMI_SLL(a, k) vshlq_n_s32(a, k)
#define OMI_SEL(m, a, b) vbslq_s32(m, a, b)

#include "vmath_simd.h"
#include "vmath_undef.h"

#endif
