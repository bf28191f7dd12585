/* vmath.h on NEON vectors (float32x4_t, AArch64): om_<name>_neon, bit-identical to the
 * scalar reference. The function bodies are in vmath_simd.h over the vocabulary of
 * simd/neon.h; this header adds the tanh table's lookup. */
#ifndef OM_VMATH_NEON_H
#define OM_VMATH_NEON_H

#include <arm_neon.h>

#include "vmath.h"

/* The rows of om_tanh_rows for 4 lanes: vld4q de-interleaves 16 floats with stride 4, so
 * the first (then second) halves of the 4 rows side by side give c[0..3] (then c[4..7]). */
static inline void om_tanh_lookup_neon(int32x4_t i, float32x4_t *c) {
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

#include "simd/neon.h"
#include "vmath_simd.h"
#include "simd/undef.h"

#endif
