/* Recurrent row kernels, scalar path: the reference (rnn_impl.h over plain floats). */
#include "vmath.h"
#include "simd/scalar.h"
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, scalar)
