/* SR4 kernels, scalar path: the reference every other path translates (design note in sr4.h).
 *
 * The step calls om_sr4_elem per element; materialisation and the pair sums of the ternary
 * product are plain loops. Integer arithmetic only, apart from the two float32 multiplies of
 * the step, the adds of the pair sums and the double sum of |g|.
 */
#include "sr4.h"

#include <math.h>
#include <string.h>

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
    for (int64_t i = 0; i < n; i++) w[i] = om_sr4_weight(om_sr4_nibble(q, i), theta);
}

void om_sr4_pairs_scalar(const uint8_t *codes, int64_t stride, int64_t nout, const float *T,
                         float *acc, int64_t rb) {
    for (int64_t j = 0; j < nout; j++) {
        float *aj = acc + j * rb;
        for (int p = 0; p < OM_SR4_PB; p++) {
            const float *row = T + codes[j * stride + p] * rb;
            for (int64_t r = 0; r < rb; r++) aj[r] += row[r];
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

/* xt[c * RB + r] is column `c0 + c` of the row block, zero past the rows and the columns of
 * x. Negation flips the sign bit; every sum is one float add. */
void om_sr4_table_scalar(const float *x, int64_t rows, int64_t k, int64_t c0, float *T,
                         int64_t rb) {
    float xt[2 * OM_SR4_PB * OM_SR4_RB];
    const int64_t cols = k - c0 < 2 * OM_SR4_PB ? k - c0 : 2 * OM_SR4_PB;
    memset(xt, 0, sizeof xt);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) xt[c * rb + r] = x[r * k + c0 + c];
    for (int p = 0; p < OM_SR4_PB; p++) {
        const float *a = xt + 2 * p * rb, *b = a + rb;
        float *t = T + p * 9 * rb;
        /* One loop per entry, so that the compiler vectorises each over the rows. */
        for (int64_t r = 0; r < rb; r++) t[r] = 0.0f + 0.0f;
        for (int64_t r = 0; r < rb; r++) t[rb + r] = 0.0f + b[r];
        for (int64_t r = 0; r < rb; r++) t[2 * rb + r] = 0.0f + -b[r];
        for (int64_t r = 0; r < rb; r++) t[3 * rb + r] = a[r] + 0.0f;
        for (int64_t r = 0; r < rb; r++) t[4 * rb + r] = a[r] + b[r];
        for (int64_t r = 0; r < rb; r++) t[5 * rb + r] = a[r] + -b[r];
        for (int64_t r = 0; r < rb; r++) t[6 * rb + r] = -a[r] + 0.0f;
        for (int64_t r = 0; r < rb; r++) t[7 * rb + r] = -a[r] + b[r];
        for (int64_t r = 0; r < rb; r++) t[8 * rb + r] = -a[r] + -b[r];
    }
}

void om_sr4_plan_bytes_scalar(const uint8_t *q, int64_t pairs, int32_t theta, uint8_t *codes) {
    uint8_t lo[16], hi[16], block[16];
    om_sr4_code_tables(theta, lo, hi, block);
    for (int64_t p = 0; p < pairs; p++)
        codes[p] = (uint8_t)(block[p % OM_SR4_PB] + lo[q[p] & 15] + hi[q[p] >> 4]);
}

OM_PATH_PROBE(sr4, scalar)
