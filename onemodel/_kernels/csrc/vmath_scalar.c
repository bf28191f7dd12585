/* vmath array kernels, scalar path: the reference the SIMD paths must match bit for bit.
 * Element functions from vmath.h; loops from vmath_loops.h. */
#include "vmath.h"
#include "vmath_kernels.h"
#include "simd/scalar.h"
#include "vmath_loops.h"

OM_PATH_PROBE(vmath, scalar)
