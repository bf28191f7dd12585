/* Reductions, softmax and layer norm: the scalar reference path, a 16-lane vector as 16 floats.
 * Kernels in reduce_impl.h, design note in reduce.c. */
#include "vmath.h"
#include "simd/scalar.h"
#include "reduce_impl.h"

OM_PATH_PROBE(reduce, scalar)
