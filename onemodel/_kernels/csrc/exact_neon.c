/* The exact sum's loops on the neon path (exact_impl.h). */
#define OM_EXACT_FN(name) name##_neon
#include "exact_impl.h"

OM_PATH_PROBE(exact, neon)
