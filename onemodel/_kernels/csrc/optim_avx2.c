/* Optimizer kernels, avx2 path: optim_simd.h over simd/avx2.h (8 lanes of __m256). */
#include "optim.h"
#include "simd/avx2.h"
#include "optim_simd.h"

OM_PATH_PROBE(optim, avx2)
