/* The exact sum's loops on the scalar path (exact_impl.h). */
#define OM_EXACT_FN(name) name##_scalar
#include "exact_impl.h"

OM_PATH_PROBE(exact, scalar)
