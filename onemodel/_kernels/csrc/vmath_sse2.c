/* vmath array kernels, sse2 path (4 lanes): element functions from vmath_sse2.h, loops from
 * vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_sse2.h"
#include "vmath_kernels.h"

#define OML_LANES 4
#define OML_VEC __m128
#define OML_LOAD(p) _mm_loadu_ps(p)
#define OML_STORE(p, v) _mm_storeu_ps(p, v)
#define OML_OP(name) om_##name##_ps_sse2
#define OML_KERNEL(name) name##_sse2
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, sse2)
