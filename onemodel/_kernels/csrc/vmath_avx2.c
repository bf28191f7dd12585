/* vmath array kernels, avx2 path (8 lanes): element functions from vmath_avx2.h, loops from
 * vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_avx2.h"
#include "vmath_kernels.h"

#define OML_LANES 8
#define OML_VEC __m256
#define OML_LOAD(p) _mm256_loadu_ps(p)
#define OML_STORE(p, v) _mm256_storeu_ps(p, v)
#define OML_OP(name) om_##name##_ps_avx2
#define OML_KERNEL(name) name##_avx2
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, avx2)
