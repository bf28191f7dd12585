/* vmath array kernels, avx512 path (16 lanes): element functions from vmath_avx512.h, loops from
 * vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_avx512.h"
#include "vmath_kernels.h"
#include "simd/avx512.h"
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, avx512)
