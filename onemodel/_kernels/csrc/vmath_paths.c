/* The array kernels of vmath, written once for every ISA path and compiled once per path
 * (path.h) over its element functions (vmath.h on the scalar path, the reference the others
 * match bit for bit; vmath_<path>.h on the others) and its simd/<path>.h; the element
 * functions are OMV_FN(om_<op>) and OMV_FN(om_<op>_grad). Each forward
 * kernel is a straight loop over n elements, two vectors at a time so that their dependency
 * chains overlap; the last n % OMV_LANES go through a zero-padded partial vector so they get
 * the same function as the rest. Inputs and output may be the same array (in place): each
 * vector is loaded before it is stored.
 */
#include "path.h"

#include <stdint.h>

#include "isa.h"
#include OM_VMATH_HEADER
#include "vmath_kernels.h"
#include OM_SIMD_HEADER

#define OML_UNARY(op)                                                                   \
    void OMV_FN(om_##op##_f32)(const float *x, float *y, int64_t n) {                   \
        int64_t i = 0;                                                                  \
        for (; i + 2 * OMV_LANES <= n; i += 2 * OMV_LANES) {                            \
            OMV a = OMV_LOAD(x + i), b = OMV_LOAD(x + i + OMV_LANES);                   \
            OMV_STORE(y + i, OMV_FN(om_##op)(a));                                       \
            OMV_STORE(y + i + OMV_LANES, OMV_FN(om_##op)(b));                           \
        }                                                                               \
        for (; i + OMV_LANES <= n; i += OMV_LANES)                                      \
            OMV_STORE(y + i, OMV_FN(om_##op)(OMV_LOAD(x + i)));                         \
        if (i < n) {                                                                    \
            int r = (int)(n - i);                                                       \
            OMV_STORE_PART(y + i, r, OMV_FN(om_##op)(OMV_LOAD_PART(x + i, r, 0.0f)));   \
        }                                                                               \
    }

#define OML_BACKWARD(op)                                                                \
    void OMV_FN(om_##op##_backward_f32)(const float *s, const float *g, float *out,      \
                                        int64_t n) {                                    \
        int64_t i = 0;                                                                  \
        for (; i + OMV_LANES <= n; i += OMV_LANES)                                      \
            OMV_STORE(out + i, OMV_FN(om_##op##_grad)(OMV_LOAD(s + i), OMV_LOAD(g + i))); \
        if (i < n) {                                                                    \
            int r = (int)(n - i);                                                       \
            OMV_STORE_PART(out + i, r, OMV_FN(om_##op##_grad)(OMV_LOAD_PART(s + i, r, 0.0f), \
                                                              OMV_LOAD_PART(g + i, r, 0.0f))); \
        }                                                                               \
    }

#define OML_BOTH(op) OML_UNARY(op) OML_BACKWARD(op)
OML_BOTH(exp)
OML_BOTH(log)
OML_BOTH(tanh)
OML_BOTH(sigmoid)
OML_BOTH(erf)
OML_BOTH(softplus)
OML_BOTH(gelu)
OML_BOTH(gelu_tanh)
OML_BOTH(relu)
OML_BOTH(sin)
OML_BOTH(cos)
OML_BOTH(expm1)
OML_BOTH(log1p)
#undef OML_BOTH
#undef OML_UNARY
#undef OML_BACKWARD

OM_PATH_PROBE(vmath, OM_PATH)
