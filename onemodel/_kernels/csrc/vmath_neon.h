/* vmath.h on NEON vectors (float32x4_t, AArch64): om_<name>_ps_neon, bit-identical to the
 * scalar reference. The function bodies are in vmath_simd.h; this header maps its macros to
 * NEON intrinsics. Comparisons give all-ones lanes (uint32x4_t), selects are bit selects. min
 * and max are written as compare-and-select, because vminq/vmaxq return NaN for a NaN operand
 * where the x86 instructions the body is written against return the second operand. The
 * float-to-int conversion truncates, which is exact on the integral values it is given.
 * OMV_FMA is vfmaq (fused, as the scalar reference's fmaf); everywhere else vmulq and vaddq,
 * which the -ffp-contract=off build keeps apart. */
#ifndef OM_VMATH_NEON_H
#define OM_VMATH_NEON_H

#include <arm_neon.h>

#include "vmath.h"

/* The rows of om_tanh_rows for 4 lanes: vld4q de-interleaves 16 floats with stride 4, so
 * the first (then second) halves of the 4 rows side by side give c[0..3] (then c[4..7]). */
static inline void om_tanh_lookup_ps_neon(int32x4_t i, float32x4_t *c) {
    int32_t k[4];
    vst1q_s32(k, i);
    for (int h = 0; h < 8; h += 4) {
        float q[16];
        for (int j = 0; j < 4; j++) memcpy(q + 4 * j, om_tanh_rows[k[j]] + h, 4 * sizeof(float));
        float32x4x4_t t = vld4q_f32(q);
        c[h] = t.val[0];
        c[h + 1] = t.val[1];
        c[h + 2] = t.val[2];
        c[h + 3] = t.val[3];
    }
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
#define OMV_FMA(a, b, c) vfmaq_f32(c, a, b)
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
#define OMI_LT(a, b) vcltq_s32(a, b)
#define OMI_SEL(m, a, b) vbslq_s32(m, a, b)

#define OMD float64x2_t
#define OMD_SET1(c) vdupq_n_f64(c)
#define OMD_ADD(a, b) vaddq_f64(a, b)
#define OMD_MUL(a, b) vmulq_f64(a, b)
#define OMD_SUB(a, b) vsubq_f64(a, b)
#define OMD_LO(v) vcvt_f64_f32(vget_low_f32(v))
#define OMD_HI(v) vcvt_high_f64_f32(v)
#define OMD_NARROW(lo, hi) vcvt_high_f32_f64(vcvt_f32_f64(lo), hi)
#define OMD_BITS_SLL52(d) vreinterpretq_f64_s64(vshlq_n_s64(vreinterpretq_s64_f64(d), 52))

#include "vmath_simd.h"
#include "vmath_undef.h"

#endif
