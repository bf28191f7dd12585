/* Partial vectors through a buffer, for the paths without masked loads and stores (scalar,
 * SSE2, NEON): only the first n <= OMV_LANES elements at p are read or written. Included once
 * by each of their vocabularies (no include guard). */
#include <string.h>

static inline OMV OMV_FN(om_load_part)(const float *p, int n, float fill) {
    float b[OMV_LANES];
    for (int j = 0; j < OMV_LANES; j++) b[j] = fill;
    memcpy(b, p, (size_t)n * sizeof(float));
    return OMV_LOAD(b);
}

static inline void OMV_FN(om_store_part)(float *p, int n, OMV v) {
    float b[OMV_LANES];
    OMV_STORE(b, v);
    memcpy(p, b, (size_t)n * sizeof(float));
}
