/* The exact sum's loops on the neon path (exact_impl.h), named by its OMV_FN. */
#include "simd/neon.h"
#include "exact_impl.h"

OM_PATH_PROBE(exact, neon)
