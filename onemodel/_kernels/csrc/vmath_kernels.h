/* The vmath array kernels of every ISA path (vmath_paths.c) and the dispatching entry points
 * (vmath.c). Forward: y[i] = op(x[i]). Backward: out[i] = grad_in from the saved tensor s (x or
 * y, see om_vmath_saves_output) and the incoming gradient g. Arrays are float32, contiguous,
 * of n elements; out may alias an input. */
#ifndef OM_VMATH_KERNELS_H
#define OM_VMATH_KERNELS_H

#include <stdint.h>

enum { OM_VMATH_EXP, OM_VMATH_LOG, OM_VMATH_TANH, OM_VMATH_SIGMOID, OM_VMATH_ERF,
       OM_VMATH_SOFTPLUS, OM_VMATH_GELU, OM_VMATH_GELU_TANH, OM_VMATH_RELU, OM_VMATH_SIN,
       OM_VMATH_COS, OM_VMATH_EXPM1, OM_VMATH_LOG1P, OM_VMATH_OPS };

#define OM_VMATH_DECLARE_OP(op, isa)                                                       \
    void om_##op##_f32_##isa(const float *x, float *y, int64_t n);                         \
    void om_##op##_backward_f32_##isa(const float *s, const float *g, float *out, int64_t n);
#define OM_VMATH_DECLARE(isa)                                                               \
    OM_VMATH_DECLARE_OP(exp, isa) OM_VMATH_DECLARE_OP(log, isa)                             \
    OM_VMATH_DECLARE_OP(tanh, isa) OM_VMATH_DECLARE_OP(sigmoid, isa)                        \
    OM_VMATH_DECLARE_OP(erf, isa) OM_VMATH_DECLARE_OP(softplus, isa)                        \
    OM_VMATH_DECLARE_OP(gelu, isa) OM_VMATH_DECLARE_OP(gelu_tanh, isa)                     \
    OM_VMATH_DECLARE_OP(relu, isa) OM_VMATH_DECLARE_OP(sin, isa)                            \
    OM_VMATH_DECLARE_OP(cos, isa) OM_VMATH_DECLARE_OP(expm1, isa)                           \
    OM_VMATH_DECLARE_OP(log1p, isa)
OM_VMATH_DECLARE(scalar)
OM_VMATH_DECLARE(sse2)
OM_VMATH_DECLARE(avx2)
OM_VMATH_DECLARE(avx512)
OM_VMATH_DECLARE(neon)
#undef OM_VMATH_DECLARE
#undef OM_VMATH_DECLARE_OP

/* 1 if the backward of op takes the forward output y (exp, tanh, sigmoid, relu, expm1), 0 if
 * the input x. */
int om_vmath_saves_output(int op);
void om_vmath_unary(int op, const float *x, float *y, int64_t n, int nthreads);
void om_vmath_backward(int op, const float *s, const float *g, float *out, int64_t n,
                       int nthreads);
/* Over the float32 bit patterns [start, stop): the max error in ulp of the selected path's
 * forward kernel against a float64 libm reference and the first input reaching it, and how
 * many outputs differ in any bit from the scalar reference function. */
void om_vmath_ulp_sweep(int op, int64_t start, int64_t stop, int nthreads, double *max_ulp,
                        uint32_t *worst_bits, int64_t *mismatches);

#endif
