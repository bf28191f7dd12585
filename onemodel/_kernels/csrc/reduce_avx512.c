/* Reductions, softmax and layer norm: the AVX-512 path, a 16-lane vector is one __m512 and
 * partial vectors use masked loads and stores. No FMA. Kernels in reduce_impl.h, design note
 * in reduce.c. */
#include <immintrin.h>

#include "reduce.h"
#include "vmath_avx512.h"

typedef __m512 vf;
#define OM_SFX _avx512

static inline __mmask16 om_mask(int n) { return (__mmask16)((1u << n) - 1u); }

static inline vf vf_set1(float a) { return _mm512_set1_ps(a); }
static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf a) { _mm512_storeu_ps(p, a); }
static inline vf vf_load_part(const float *p, int n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), om_mask(n), p);
}
static inline void vf_store_part(float *p, int n, vf a) {
    _mm512_mask_storeu_ps(p, om_mask(n), a);
}
static inline vf vf_keep(vf a, int n) { return _mm512_maskz_mov_ps(om_mask(n), a); }
static inline void vf_lanes(vf a, float *l) { _mm512_storeu_ps(l, a); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vf_exp(vf a) { return om_exp_avx512(a); }

#include "reduce_impl.h"

OM_PATH_PROBE(reduce, avx512)
