/* The convolution's data movement, NEON path (aarch64, conv_impl.h): 4 lanes, keep masks
 * applied as a bitwise and (0 gives +0), the tap sums 16 pixels at a time in 4 accumulators;
 * tails run the scalar reference. */
#include <arm_neon.h>

#include "conv_impl.h"

static inline float32x4_t kept(const float *src, const int32_t *keep) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vld1q_f32(src)),
                                           vreinterpretq_u32_s32(vld1q_s32(keep))));
}

void om_conv_keep_f32_neon(float *d, const float *src, const int32_t *keep, int64_t len) {
    int64_t e = 0;
    for (; e + 4 <= len; e += 4) vst1q_f32(d + e, kept(src + e, keep + e));
    om_conv_keep_f32_scalar(d + e, src + e, keep + e, len - e);
}

void om_conv_tap_sums_f32_neon(const float *g, const int64_t *off, const int32_t *keep,
                               const int64_t *koff, int64_t taps, int64_t n, float *d) {
    int64_t f = 0;
    for (; f + 16 <= n; f += 16) {
        float32x4_t acc[4];
        for (int v = 0; v < 4; v++) acc[v] = vdupq_n_f32(0.0f);
        for (int64_t t = 0; t < taps; t++)
            for (int v = 0; v < 4; v++)
                acc[v] = vaddq_f32(acc[v],
                              kept(g + off[t] + f + 4 * v, keep + koff[t] + f + 4 * v));
        for (int v = 0; v < 4; v++) vst1q_f32(d + f + 4 * v, acc[v]);
    }
    for (; f + 4 <= n; f += 4) {
        float32x4_t acc = vdupq_n_f32(0.0f);
        for (int64_t t = 0; t < taps; t++)
            acc = vaddq_f32(acc, kept(g + off[t] + f, keep + koff[t] + f));
        vst1q_f32(d + f, acc);
    }
    om_conv_tap_sums_f32_scalar(g + f, off, keep + f, koff, taps, n - f, d + f);
}

OM_PATH_PROBE(conv, neon)
