/* Reductions, softmax and layer norm: the SSE2 path, a 16-lane vector as four __m128.
 * Kernels in reduce_impl.h, design note in reduce.c. */
#include "vmath_sse2.h"
#include "simd/sse2.h"
#include "reduce_impl.h"

OM_PATH_PROBE(reduce, sse2)
