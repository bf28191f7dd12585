/* CTC row kernels, sse2 path: ctc_impl.h compiled with this path's flags. */
#define OM_CTC_FN(name) name##_sse2
#include "ctc_impl.h"

OM_PATH_PROBE(ctc, sse2)
