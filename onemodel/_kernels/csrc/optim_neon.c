/* Optimizer kernels, neon path: 4 lanes of float32x4_t (the shared translation is
 * optim_simd.h). NEON's FMAX/FMIN return NaN when either input is NaN, so MAX and MIN are a
 * compare and select, as x86 MAXPS/MINPS and the scalar reference. */
#include <arm_neon.h>

#include "optim.h"

typedef float32x4_t V;

static inline V max_select(V a, V b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
static inline V min_select(V a, V b) { return vbslq_f32(vcltq_f32(a, b), a, b); }

enum { W = 4 };
#define LOAD(x) vld1q_f32(x)
#define STORE(x, v) vst1q_f32(x, v)
#define SET1(x) vdupq_n_f32(x)
#define ADD(a, b) vaddq_f32(a, b)
#define SUB(a, b) vsubq_f32(a, b)
#define MUL(a, b) vmulq_f32(a, b)
#define DIV(a, b) vdivq_f32(a, b)
#define SQRT(a) vsqrtq_f32(a)
#define MAX(a, b) max_select(a, b)
#define MIN(a, b) min_select(a, b)
#define OM_NAME(f) f##_neon

#include "optim_simd.h"

OM_PATH_PROBE(optim, neon)
