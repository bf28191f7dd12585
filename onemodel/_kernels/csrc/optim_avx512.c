/* Optimizer kernels, avx512 path: optim_simd.h over simd/avx512.h (16 lanes of __m512). */
#include "optim.h"
#include "simd/avx512.h"
#include "optim_simd.h"

OM_PATH_PROBE(optim, avx512)
