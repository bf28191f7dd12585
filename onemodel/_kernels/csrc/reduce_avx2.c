/* Reductions, softmax and layer norm: the AVX2 path, a 16-lane vector as two __m256
 * (lanes 0-7, 8-15). No FMA: every multiply and add rounds separately, as in the scalar
 * reference. Kernels in reduce_impl.h, design note in reduce.c. */
#include <immintrin.h>

#include "reduce.h"
#include "vmath_avx2.h"

typedef struct { __m256 h[2]; } vf;
#define OM_SFX _avx2

static inline vf vf_set1(float a) { return (vf){{_mm256_set1_ps(a), _mm256_set1_ps(a)}}; }
static inline vf vf_zero(void) { return vf_set1(0.0f); }
static inline vf vf_load(const float *p) {
    return (vf){{_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}};
}
static inline void vf_store(float *p, vf a) {
    _mm256_storeu_ps(p, a.h[0]);
    _mm256_storeu_ps(p + 8, a.h[1]);
}
/* Lanes below n of half k: all ones where 8k + j < n. */
static inline __m256i om_half_mask(int n, int k) {
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * k), lane);
}
static inline vf vf_load_part(const float *p, int n, float fill) {
    vf r;
    for (int k = 0; k < 2; k++) {
        __m256i m = om_half_mask(n, k);
        r.h[k] = _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p + 8 * k, m),
                                  _mm256_castsi256_ps(m));
    }
    return r;
}
static inline void vf_store_part(float *p, int n, vf a) {
    for (int k = 0; k < 2; k++) _mm256_maskstore_ps(p + 8 * k, om_half_mask(n, k), a.h[k]);
}
static inline vf vf_keep(vf a, int n) {
    for (int k = 0; k < 2; k++)
        a.h[k] = _mm256_and_ps(a.h[k], _mm256_castsi256_ps(om_half_mask(n, k)));
    return a;
}
static inline void vf_lanes(vf a, float *l) { vf_store(l, a); }

#define OM_LANEWISE(name, op)                                                   \
    static inline vf name(vf a, vf b) {                                         \
        return (vf){{op(a.h[0], b.h[0]), op(a.h[1], b.h[1])}};                  \
    }
OM_LANEWISE(vf_add, _mm256_add_ps)
OM_LANEWISE(vf_sub, _mm256_sub_ps)
OM_LANEWISE(vf_mul, _mm256_mul_ps)
OM_LANEWISE(vf_div, _mm256_div_ps)
OM_LANEWISE(vf_max, _mm256_max_ps)

static inline vf vf_exp(vf a) { return (vf){{om_exp_avx2(a.h[0]), om_exp_avx2(a.h[1])}}; }

#include "reduce_impl.h"

OM_PATH_PROBE(reduce, avx2)
