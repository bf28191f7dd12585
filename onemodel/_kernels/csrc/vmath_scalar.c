/* vmath array kernels, scalar path: the reference the SIMD paths must match bit for bit.
 * Element functions from vmath.h; loops from vmath_loops.h. */
#include "vmath.h"
#include "vmath_kernels.h"

#define OML_LANES 1
#define OML_VEC float
#define OML_LOAD(p) (*(p))
#define OML_STORE(p, v) (*(p) = (v))
#define OML_OP(name) om_##name##f
#define OML_KERNEL(name) name##_scalar
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, scalar)
