/* Recurrent row kernels, avx512 path (16 lanes): rnn_impl.h over the vectors of vmath_avx512.h,
 * bit-identical to rnn_scalar.c. */
#include "vmath_avx512.h"

#define RNN_LANES 16
#define RNN_V __m512
#define RNN_LD(p) _mm512_loadu_ps(p)
#define RNN_ST(p, v) _mm512_storeu_ps(p, v)
#define RNN_SET1(c) _mm512_set1_ps(c)
#define RNN_ADD(a, b) _mm512_add_ps(a, b)
#define RNN_SUB(a, b) _mm512_sub_ps(a, b)
#define RNN_MUL(a, b) _mm512_mul_ps(a, b)
#define RNN_SIG(x) om_sigmoid_avx512(x)
#define RNN_TANH(x) om_tanh_avx512(x)
#define RNN_KERNEL(name) name##_avx512
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, avx512)
