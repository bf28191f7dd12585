/* Optimizer kernels, neon path: optim_simd.h over simd/neon.h (4 lanes of float32x4_t). */
#include "optim.h"
#include "simd/neon.h"
#include "optim_simd.h"

OM_PATH_PROBE(optim, neon)
