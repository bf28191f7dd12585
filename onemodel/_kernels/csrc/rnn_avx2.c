/* Recurrent row kernels, avx2 path (8 lanes): rnn_impl.h over simd/avx2.h, each row's last
 * h % 8 units on the scalar cells, bit-identical to rnn_scalar.c. */
#include "vmath_avx2.h"
#include "simd/scalar.h"
#include "rnn_body.h"
#include "simd/undef.h"
#include "simd/avx2.h"
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, avx2)
