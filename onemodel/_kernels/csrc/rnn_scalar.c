/* Recurrent row kernels, scalar path: the reference (rnn_impl.h over plain floats). */
#define RNN_LANES 1
#define RNN_KERNEL(name) name##_scalar
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, scalar)
