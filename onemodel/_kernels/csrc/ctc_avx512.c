/* CTC row kernels, avx512 path: ctc_impl.h compiled with this path's flags. */
#define OM_CTC_FN(name) name##_avx512
#include "ctc_impl.h"

OM_PATH_PROBE(ctc, avx512)
