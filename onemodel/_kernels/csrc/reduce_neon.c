/* Reductions, softmax and layer norm: the NEON path, a 16-lane vector as four float32x4_t
 * (lanes 0-3, 4-7, 8-11, 12-15). No fused multiply-add. Kernels in reduce_impl.h, design note
 * in reduce.c. NEON's own max (FMAX) returns NaN when either input is NaN, so vf_max is a
 * compare and select, as x86 MAXPS and the scalar reference. */
#include <arm_neon.h>

#include "reduce.h"
#include "vmath_neon.h"

typedef struct { float32x4_t q[4]; } vf;
#define OM_SFX _neon
#define OM_PART_THROUGH_BUFFER 1 /* no masked loads: reduce_impl.h provides the partial ones */

static inline vf vf_set1(float a) {
    vf r;
    for (int k = 0; k < 4; k++) r.q[k] = vdupq_n_f32(a);
    return r;
}
static inline vf vf_zero(void) { return vf_set1(0.0f); }
static inline vf vf_load(const float *p) {
    vf r;
    for (int k = 0; k < 4; k++) r.q[k] = vld1q_f32(p + 4 * k);
    return r;
}
static inline void vf_store(float *p, vf a) {
    for (int k = 0; k < 4; k++) vst1q_f32(p + 4 * k, a.q[k]);
}
static inline vf vf_keep(vf a, int n) {
    static const int32_t lanes[OM_LANES] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    for (int k = 0; k < 4; k++) {
        uint32x4_t in = vcltq_s32(vld1q_s32(lanes + 4 * k), vdupq_n_s32(n));
        a.q[k] = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a.q[k]), in));
    }
    return a;
}
static inline void vf_lanes(vf a, float *l) { vf_store(l, a); }

static inline float32x4_t max_select(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcgtq_f32(a, b), a, b);
}

#define OM_LANEWISE(name, op)                                        \
    static inline vf name(vf a, vf b) {                              \
        vf r;                                                        \
        for (int k = 0; k < 4; k++) r.q[k] = op(a.q[k], b.q[k]);     \
        return r;                                                    \
    }
OM_LANEWISE(vf_add, vaddq_f32)
OM_LANEWISE(vf_sub, vsubq_f32)
OM_LANEWISE(vf_mul, vmulq_f32)
OM_LANEWISE(vf_div, vdivq_f32)
OM_LANEWISE(vf_max, max_select)

static inline vf vf_exp(vf a) {
    for (int k = 0; k < 4; k++) a.q[k] = om_exp_neon(a.q[k]);
    return a;
}

#include "reduce_impl.h"

OM_PATH_PROBE(reduce, neon)
