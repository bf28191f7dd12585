/* vmath array kernels, NEON path (4 lanes, AArch64): element functions from vmath_neon.h,
 * loops from vmath_loops.h. Bit-identical to vmath_scalar.c. */
#include "vmath_neon.h"
#include "vmath_kernels.h"
#include "simd/neon.h"
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, neon)
