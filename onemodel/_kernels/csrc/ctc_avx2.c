/* CTC row kernels, avx2 path: ctc_impl.h compiled with this path's flags, named by its OMV_FN. */
#include "vmath.h"
#include "simd/avx2.h"
#include "ctc_impl.h"

OM_PATH_PROBE(ctc, avx2)
