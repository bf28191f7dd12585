/* The exact sum's loops on the avx512 path (exact_impl.h). */
#define OM_EXACT_FN(name) name##_avx512
#include "exact_impl.h"

OM_PATH_PROBE(exact, avx512)
