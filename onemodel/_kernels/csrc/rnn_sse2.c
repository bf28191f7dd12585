/* Recurrent row kernels, sse2 path (4 lanes): rnn_impl.h over the vectors of vmath_sse2.h,
 * bit-identical to rnn_scalar.c. */
#include "vmath_sse2.h"

#define RNN_LANES 4
#define RNN_V __m128
#define RNN_LD(p) _mm_loadu_ps(p)
#define RNN_ST(p, v) _mm_storeu_ps(p, v)
#define RNN_SET1(c) _mm_set1_ps(c)
#define RNN_ADD(a, b) _mm_add_ps(a, b)
#define RNN_SUB(a, b) _mm_sub_ps(a, b)
#define RNN_MUL(a, b) _mm_mul_ps(a, b)
#define RNN_SIG(x) om_sigmoid_sse2(x)
#define RNN_TANH(x) om_tanh_sse2(x)
#define RNN_KERNEL(name) name##_sse2
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, sse2)
