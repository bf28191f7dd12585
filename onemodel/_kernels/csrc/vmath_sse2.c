/* vmath array kernels, sse2 path (4 lanes): element functions from vmath_sse2.h, loops from
 * vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_sse2.h"
#include "vmath_kernels.h"
#include "simd/sse2.h"
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, sse2)
