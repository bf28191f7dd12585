/* Reductions, softmax and layer norm: the AVX-512 path, a 16-lane vector as one __m512,
 * partial ones masked. Kernels in reduce_impl.h, design note in reduce.c. */
#include "vmath_avx512.h"
#include "simd/avx512.h"
#include "reduce_impl.h"

OM_PATH_PROBE(reduce, avx512)
