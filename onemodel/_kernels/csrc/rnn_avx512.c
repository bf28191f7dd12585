/* Recurrent row kernels, avx512 path (16 lanes): rnn_impl.h over simd/avx512.h, each row's last
 * h % 16 units on the scalar cells, bit-identical to rnn_scalar.c. */
#include "vmath_avx512.h"
#include "simd/scalar.h"
#include "rnn_body.h"
#include "simd/undef.h"
#include "simd/avx512.h"
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, avx512)
