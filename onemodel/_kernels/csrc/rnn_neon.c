/* Recurrent row kernels, neon path (4 lanes): rnn_impl.h over the vectors of vmath_neon.h,
 * bit-identical to rnn_scalar.c (separate multiplies and adds, as the reference). */
#include "vmath_neon.h"

#define RNN_LANES 4
#define RNN_V float32x4_t
#define RNN_LD(p) vld1q_f32(p)
#define RNN_ST(p, v) vst1q_f32(p, v)
#define RNN_SET1(c) vdupq_n_f32(c)
#define RNN_ADD(a, b) vaddq_f32(a, b)
#define RNN_SUB(a, b) vsubq_f32(a, b)
#define RNN_MUL(a, b) vmulq_f32(a, b)
#define RNN_SIG(x) om_sigmoid_neon(x)
#define RNN_TANH(x) om_tanh_neon(x)
#define RNN_KERNEL(name) name##_neon
#include "rnn_impl.h"

OM_PATH_PROBE(rnn, neon)
