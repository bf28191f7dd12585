/* Recurrent row kernels, neon path (4 lanes): rnn_impl.h over simd/neon.h, each row's last
 * h % 4 units on the scalar cells, bit-identical to rnn_scalar.c. */
#include "vmath_neon.h"
#include "simd/scalar.h"
#include "rnn_body.h"
#include "simd/undef.h"
#include "simd/neon.h"
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, neon)
