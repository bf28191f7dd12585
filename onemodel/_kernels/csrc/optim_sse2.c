/* Optimizer kernels, sse2 path: optim_simd.h over simd/sse2.h (4 lanes of __m128). */
#include "optim.h"
#include "simd/sse2.h"
#include "optim_simd.h"

OM_PATH_PROBE(optim, sse2)
