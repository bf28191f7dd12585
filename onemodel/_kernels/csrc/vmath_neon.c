/* vmath array kernels, NEON path (4 lanes, AArch64): element functions from vmath_neon.h,
 * loops from vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_neon.h"
#include "vmath_kernels.h"

#define OML_LANES 4
#define OML_VEC float32x4_t
#define OML_LOAD(p) vld1q_f32(p)
#define OML_STORE(p, v) vst1q_f32(p, v)
#define OML_OP(name) om_##name##_ps_neon
#define OML_KERNEL(name) name##_neon
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, neon)
