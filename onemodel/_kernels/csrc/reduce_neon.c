/* Reductions, softmax and layer norm: the NEON path, a 16-lane vector as four
 * float32x4_t. Kernels in reduce_impl.h, design note in reduce.c. */
#include "vmath_neon.h"
#include "simd/neon.h"
#include "reduce_impl.h"

OM_PATH_PROBE(reduce, neon)
