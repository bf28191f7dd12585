/* The exact sum's loops on the avx2 path (exact_impl.h). */
#define OM_EXACT_FN(name) name##_avx2
#include "exact_impl.h"

OM_PATH_PROBE(exact, avx2)
