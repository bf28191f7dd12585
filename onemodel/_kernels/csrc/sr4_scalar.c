/* SR4 kernels, scalar path: the reference every other path translates (design note in sr4.h).
 *
 * The step calls om_sr4_elem per element; materialisation and the pair sums of the ternary
 * product are plain loops. Integer arithmetic only, apart from the two float32 multiplies of
 * the step, the adds of the pair sums and the double sum of |g|.
 */
#include "sr4.h"

#include <math.h>

void om_sr4_step_scalar(uint8_t *q, const float *g, float *w, int64_t start, int64_t n,
                        const om_sr4_step_args *a) {
    const uint64_t idx0 = a->idx_base + (uint64_t)start;
    for (int64_t i = 0; i < n; i += 2) {
        const int32_t lo = om_sr4_elem(om_sr4_nibble(q, i), g[i], idx0 + (uint64_t)i, a,
                                       w ? w + i : NULL);
        int32_t hi = 0;  /* past an odd end the high nibble stays 0 */
        if (i + 1 < n)
            hi = om_sr4_elem(om_sr4_nibble(q, i + 1), g[i + 1], idx0 + (uint64_t)i + 1, a,
                             w ? w + i + 1 : NULL);
        q[i >> 1] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
    }
}

void om_sr4_materialize_scalar(const uint8_t *q, int64_t n, int32_t theta, float *w) {
    for (int64_t i = 0; i < n; i++) {
        const int32_t v = om_sr4_nibble(q, i);
        w[i] = v >= theta ? 1.0f : v <= -theta ? -1.0f : 0.0f;
    }
}

void om_sr4_pairs_scalar(const uint8_t *codes, int64_t stride, int64_t nout, const float *T,
                         float *acc) {
    for (int64_t j = 0; j < nout; j++) {
        float *aj = acc + j * OM_SR4_RB;
        for (int p = 0; p < OM_SR4_PB; p++) {
            const float *row = T + codes[j * stride + p] * OM_SR4_RB;
            for (int r = 0; r < OM_SR4_RB; r++) aj[r] += row[r];
        }
    }
}

/* 8 interleaved lanes: independent additions, then the lanes in order. */
double om_sr4_abs_sum_scalar(const float *g, int64_t n) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) lane[l] += (double)fabsf(g[i + l]);
    double sum = 0.0;
    for (int l = 0; l < 8; l++) sum += lane[l];
    for (; i < n; i++) sum += (double)fabsf(g[i]);
    return sum;
}
