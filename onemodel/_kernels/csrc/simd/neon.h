/* The vector vocabulary (simd/scalar.h) on NEON (AArch64): float32x4_t, 4 lanes, comparisons
 * give all-ones lanes (uint32x4_t), selects are bit selects. min and max are compare-and-select,
 * because vminq/vmaxq return NaN for a NaN operand where x86's minps/maxps, which the vocabulary
 * follows, return the second operand. The float-to-int conversion truncates, which is exact on
 * the integral values it is given. OMV_FMA is vfmaq (fused, as fmaf); everywhere else vmulq and
 * vaddq, which the -ffp-contract=off build keeps apart. No masked loads: partial vectors go
 * through a buffer (simd/part.h). */
#include <arm_neon.h>

#define OMV float32x4_t
#define OMM uint32x4_t
#define OMI int32x4_t
#define OMV_LANES 4
#define OMV_FN(name) name##_neon
#define OMV_SET1(c) vdupq_n_f32(c)
#define OMV_ZERO() vdupq_n_f32(0.0f)
#define OMV_LOAD(p) vld1q_f32(p)
#define OMV_STORE(p, v) vst1q_f32(p, v)
#define OMV_FIRST(n) vcltq_s32(om_lane_index_neon(), vdupq_n_s32(n))
#define OMV_LOAD_PART(p, n, fill) om_load_part_neon(p, n, fill)
#define OMV_STORE_PART(p, n, v) om_store_part_neon(p, n, v)
#define OMV_KEEP(v, n) OMV_AND(v, vreinterpretq_f32_u32(OMV_FIRST(n)))
#define OMV_ADD(a, b) vaddq_f32(a, b)
#define OMV_SUB(a, b) vsubq_f32(a, b)
#define OMV_MUL(a, b) vmulq_f32(a, b)
#define OMV_DIV(a, b) vdivq_f32(a, b)
#define OMV_SQRT(a) vsqrtq_f32(a)
#define OMV_FMA(a, b, c) vfmaq_f32(c, a, b)
#define OMV_LT(a, b) vcltq_f32(a, b)
#define OMV_LE(a, b) vcleq_f32(a, b)
#define OMV_EQ(a, b) vceqq_f32(a, b)
#define OMV_ISNAN(a) vmvnq_u32(vceqq_f32(a, a))
#define OMV_MIN(a, b) vbslq_f32(vcltq_f32(a, b), a, b)
#define OMV_MAX(a, b) vbslq_f32(vcgtq_f32(a, b), a, b)
#define OMV_F2I(a) vcvtq_s32_f32(a)
#define OMV_NONE(m) (vmaxvq_u32(m) == 0)
#define OMV_MASK_BITS(m) \
    ((int)vaddvq_u32(vandq_u32(m, (uint32x4_t){1, 2, 4, 8})))
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

#ifndef OM_SIMD_NEON_H /* the helpers once, however often the vocabulary is included */
#define OM_SIMD_NEON_H
static inline int32x4_t om_lane_index_neon(void) {
    static const int32_t lanes[4] = {0, 1, 2, 3};
    return vld1q_s32(lanes);
}
#include "simd/part.h"
#endif
