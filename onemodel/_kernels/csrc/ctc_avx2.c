/* CTC row kernels, avx2 path: ctc_impl.h compiled with this path's flags. */
#define OM_CTC_FN(name) name##_avx2
#include "ctc_impl.h"

OM_PATH_PROBE(ctc, avx2)
