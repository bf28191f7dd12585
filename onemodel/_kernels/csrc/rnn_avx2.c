/* Recurrent row kernels, avx2 path (8 lanes): rnn_impl.h over the vectors of vmath_avx2.h,
 * bit-identical to rnn_scalar.c. */
#include "vmath_avx2.h"

#define RNN_LANES 8
#define RNN_V __m256
#define RNN_LD(p) _mm256_loadu_ps(p)
#define RNN_ST(p, v) _mm256_storeu_ps(p, v)
#define RNN_SET1(c) _mm256_set1_ps(c)
#define RNN_ADD(a, b) _mm256_add_ps(a, b)
#define RNN_SUB(a, b) _mm256_sub_ps(a, b)
#define RNN_MUL(a, b) _mm256_mul_ps(a, b)
#define RNN_SIG(x) om_sigmoid_avx2(x)
#define RNN_TANH(x) om_tanh_avx2(x)
#define RNN_KERNEL(name) name##_avx2
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, avx2)
