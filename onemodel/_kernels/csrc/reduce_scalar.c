/* Reductions, softmax and layer norm: the scalar reference path.
 *
 * A "vector" is an array of 16 floats, so the lanes of the project order are spelled out
 * plainly; reduce_impl.h holds the kernels themselves (design note in reduce.c).
 */
#include <string.h>

#include "reduce.h"
#include "vmath.h"

typedef struct { float v[OM_LANES]; } vf;
#define OM_SFX _scalar

static inline vf vf_set1(float a) {
    vf r;
    for (int j = 0; j < OM_LANES; j++) r.v[j] = a;
    return r;
}
static inline vf vf_zero(void) { return vf_set1(0.0f); }
static inline vf vf_load(const float *p) {
    vf r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
static inline void vf_store(float *p, vf a) { memcpy(p, a.v, sizeof a.v); }
static inline vf vf_load_part(const float *p, int n, float fill) {
    vf r = vf_set1(fill);
    memcpy(r.v, p, (size_t)n * sizeof(float));
    return r;
}
static inline void vf_store_part(float *p, int n, vf a) {
    memcpy(p, a.v, (size_t)n * sizeof(float));
}
static inline vf vf_keep(vf a, int n) {
    for (int j = n; j < OM_LANES; j++) a.v[j] = 0.0f;
    return a;
}
static inline void vf_lanes(vf a, float *l) { memcpy(l, a.v, sizeof a.v); }

#define OM_LANEWISE(name, expr)                                      \
    static inline vf name(vf a, vf b) {                              \
        vf r;                                                        \
        for (int j = 0; j < OM_LANES; j++) r.v[j] = (expr);          \
        return r;                                                    \
    }
OM_LANEWISE(vf_add, a.v[j] + b.v[j])
OM_LANEWISE(vf_sub, a.v[j] - b.v[j])
OM_LANEWISE(vf_mul, a.v[j] * b.v[j])
OM_LANEWISE(vf_div, a.v[j] / b.v[j])
OM_LANEWISE(vf_max, a.v[j] > b.v[j] ? a.v[j] : b.v[j])

static inline vf vf_exp(vf a) {
    for (int j = 0; j < OM_LANES; j++) a.v[j] = om_exp_scalar(a.v[j]);
    return a;
}

#include "reduce_impl.h"

OM_PATH_PROBE(reduce, scalar)
