/* The exact sum's loops on the avx512 path (exact_impl.h), named by its OMV_FN. */
#include "simd/avx512.h"
#define EXACT_ROUND_BY_INSTRUCTION   /* nearbyint: vrndscalepd (exact_impl.h) */
#include "exact_impl.h"

OM_PATH_PROBE(exact, avx512)
