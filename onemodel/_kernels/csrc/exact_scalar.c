/* The exact sum's loops on the scalar path (exact_impl.h), named by its OMV_FN. */
#include "simd/scalar.h"
#include "exact_impl.h"

OM_PATH_PROBE(exact, scalar)
