/* The fixed-order double sums of float32 runs (the bias gradient of conv.c, batch_norm.c):
 * LANES double accumulators, element e of a run going to lane e mod LANES, runs added in the
 * caller's order; then the fixed tree (0+4, 1+5, 2+6, 3+7), (0+2, 1+3), 0+1. */
#ifndef OM_LANE_SUMS_H
#define OM_LANE_SUMS_H

#include <stdint.h>

#define LANES 8

static inline void lanes_add(double acc[LANES], const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j];
    for (int j = 0; i + j < n; j++) acc[j] += (double)x[i + j];
}

static inline void lanes_add_sqdev(double acc[LANES], const float *x, int64_t n, double mean) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            double d = (double)x[i + j] - mean;
            acc[j] += d * d;
        }
    for (int j = 0; i + j < n; j++) {
        double d = (double)x[i + j] - mean;
        acc[j] += d * d;
    }
}

/* acc += g * (x - mean) */
static inline void lanes_add_prod(double acc[LANES], const float *g, const float *x, int64_t n,
                           double mean) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (double)g[i + j] * ((double)x[i + j] - mean);
    for (int j = 0; i + j < n; j++) acc[j] += (double)g[i + j] * ((double)x[i + j] - mean);
}

static inline double lanes_total(const double acc[LANES]) {
    double a = acc[0] + acc[4], b = acc[1] + acc[5], c = acc[2] + acc[6], d = acc[3] + acc[7];
    return (a + c) + (b + d);
}

#endif
