/* Reductions, softmax and layer norm: the AVX2 path, a 16-lane vector as two __m256.
 * Kernels in reduce_impl.h, design note in reduce.c. */
#include "vmath_avx2.h"
#include "simd/avx2.h"
#include "reduce_impl.h"

OM_PATH_PROBE(reduce, avx2)
