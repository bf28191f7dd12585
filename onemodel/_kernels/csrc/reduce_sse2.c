/* Reductions, softmax and layer norm: the SSE2 path, a 16-lane vector as four __m128
 * (lanes 0-3, 4-7, 8-11, 12-15). Kernels in reduce_impl.h, design note in reduce.c. */
#include <emmintrin.h>

#include "reduce.h"
#include "vmath_sse2.h"

typedef struct { __m128 q[4]; } vf;
#define OM_SFX _sse2
#define OM_PART_THROUGH_BUFFER 1 /* no masked loads: reduce_impl.h provides the partial ones */

static inline vf vf_set1(float a) {
    vf r;
    for (int k = 0; k < 4; k++) r.q[k] = _mm_set1_ps(a);
    return r;
}
static inline vf vf_zero(void) { return vf_set1(0.0f); }
static inline vf vf_load(const float *p) {
    vf r;
    for (int k = 0; k < 4; k++) r.q[k] = _mm_loadu_ps(p + 4 * k);
    return r;
}
static inline void vf_store(float *p, vf a) {
    for (int k = 0; k < 4; k++) _mm_storeu_ps(p + 4 * k, a.q[k]);
}
static inline vf vf_keep(vf a, int n) {
    for (int k = 0; k < 4; k++) {
        __m128i lane = _mm_setr_epi32(4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3);
        __m128 in = _mm_castsi128_ps(_mm_cmplt_epi32(lane, _mm_set1_epi32(n)));
        a.q[k] = _mm_and_ps(a.q[k], in);
    }
    return a;
}
static inline void vf_lanes(vf a, float *l) { vf_store(l, a); }

#define OM_LANEWISE(name, op)                                        \
    static inline vf name(vf a, vf b) {                              \
        vf r;                                                        \
        for (int k = 0; k < 4; k++) r.q[k] = op(a.q[k], b.q[k]);     \
        return r;                                                    \
    }
OM_LANEWISE(vf_add, _mm_add_ps)
OM_LANEWISE(vf_sub, _mm_sub_ps)
OM_LANEWISE(vf_mul, _mm_mul_ps)
OM_LANEWISE(vf_div, _mm_div_ps)
OM_LANEWISE(vf_max, _mm_max_ps)

static inline vf vf_exp(vf a) {
    for (int k = 0; k < 4; k++) a.q[k] = om_exp_sse2(a.q[k]);
    return a;
}

#include "reduce_impl.h"

OM_PATH_PROBE(reduce, sse2)
