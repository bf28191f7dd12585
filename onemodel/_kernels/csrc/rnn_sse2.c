/* Recurrent row kernels, sse2 path (4 lanes): rnn_impl.h over simd/sse2.h, each row's last
 * h % 4 units on the scalar cells, bit-identical to rnn_scalar.c. */
#include "vmath_sse2.h"
#include "simd/scalar.h"
#include "rnn_body.h"
#include "simd/undef.h"
#include "simd/sse2.h"
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, sse2)
