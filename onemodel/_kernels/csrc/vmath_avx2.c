/* vmath array kernels, avx2 path (8 lanes): element functions from vmath_avx2.h, loops from
 * vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_avx2.h"
#include "vmath_kernels.h"
#include "simd/avx2.h"
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, avx2)
