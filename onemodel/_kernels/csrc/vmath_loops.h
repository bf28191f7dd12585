/* The array kernels of vmath, written once for every ISA path.
 *
 * Not a standalone header: vmath_<isa>.c defines OML_LANES, OML_VEC (the vector type),
 * OML_LOAD(p) / OML_STORE(p, v) (unaligned), OML_OP(name) (the element function of vmath.h or
 * of the ISA's vmath header) and OML_KERNEL(name) (the kernel name with its ISA suffix), then
 * includes this file. Each forward kernel is a straight loop over n elements, two vectors at a
 * time so that their dependency chains overlap; the last n % OML_LANES go through a zero-padded
 * vector so they get the same function as the rest. Inputs and output may be the same array
 * (in place): each vector is loaded before it is stored.
 */
#include <stdint.h>
#include <string.h>

#include "isa.h"

#define OML_UNARY(op)                                                                   \
    void OML_KERNEL(om_##op##_f32)(const float *x, float *y, int64_t n) {               \
        int64_t i = 0;                                                                  \
        for (; i + 2 * OML_LANES <= n; i += 2 * OML_LANES) {                            \
            OML_VEC a = OML_LOAD(x + i), b = OML_LOAD(x + i + OML_LANES);                \
            OML_STORE(y + i, OML_OP(op)(a));                                            \
            OML_STORE(y + i + OML_LANES, OML_OP(op)(b));                                \
        }                                                                               \
        for (; i + OML_LANES <= n; i += OML_LANES)                                      \
            OML_STORE(y + i, OML_OP(op)(OML_LOAD(x + i)));                              \
        if (i < n) {                                                                    \
            float bx[OML_LANES] = {0}, by[OML_LANES];                                   \
            memcpy(bx, x + i, (size_t)(n - i) * sizeof(float));                         \
            OML_STORE(by, OML_OP(op)(OML_LOAD(bx)));                                    \
            memcpy(y + i, by, (size_t)(n - i) * sizeof(float));                         \
        }                                                                               \
    }

#define OML_BACKWARD(op)                                                                \
    void OML_KERNEL(om_##op##_backward_f32)(const float *s, const float *g, float *out,  \
                                            int64_t n) {                                \
        int64_t i = 0;                                                                  \
        for (; i + OML_LANES <= n; i += OML_LANES)                                      \
            OML_STORE(out + i, OML_OP(op##_grad)(OML_LOAD(s + i), OML_LOAD(g + i)));    \
        if (i < n) {                                                                    \
            float bs[OML_LANES] = {0}, bg[OML_LANES] = {0}, bo[OML_LANES];              \
            memcpy(bs, s + i, (size_t)(n - i) * sizeof(float));                         \
            memcpy(bg, g + i, (size_t)(n - i) * sizeof(float));                         \
            OML_STORE(bo, OML_OP(op##_grad)(OML_LOAD(bs), OML_LOAD(bg)));               \
            memcpy(out + i, bo, (size_t)(n - i) * sizeof(float));                       \
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
#undef OML_BOTH
#undef OML_UNARY
#undef OML_BACKWARD
