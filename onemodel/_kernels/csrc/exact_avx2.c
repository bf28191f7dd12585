/* The exact sum's loops on the avx2 path (exact_impl.h), named by its OMV_FN. */
#include "simd/avx2.h"
#define EXACT_CONVERT_BY_BITS   /* no conversion of doubles to int64 (exact_impl.h) */
#include "exact_impl.h"

OM_PATH_PROBE(exact, avx2)
