/* CTC row kernels, neon path: ctc_impl.h compiled with this path's flags. */
#define OM_CTC_FN(name) name##_neon
#include "ctc_impl.h"

OM_PATH_PROBE(ctc, neon)
