/* vmath array kernels, avx512 path (16 lanes): element functions from vmath_avx512.h, loops from
 * vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_avx512.h"
#include "vmath_kernels.h"

#define OML_LANES 16
#define OML_VEC __m512
#define OML_LOAD(p) _mm512_loadu_ps(p)
#define OML_STORE(p, v) _mm512_storeu_ps(p, v)
#define OML_OP(name) om_##name##_ps_avx512
#define OML_KERNEL(name) name##_avx512
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, avx512)
