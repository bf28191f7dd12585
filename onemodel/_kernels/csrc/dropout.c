/* Dropout's mask and products, one pass over the data instead of numpy's ten.
 *
 * The draw (onemodel/functional/dropout.py): mask element i of stream s has
 * bits = mix(s + (i + 1)·G), G the golden-ratio increment and mix the output function of
 * SplitMix64 (splitmix64.h), all
 * unsigned 64-bit wrapping; it is kept when bits >> 40 >= threshold (u = (bits >> 40) / 2^24
 * against float32(p), compared as integers). A product multiplies by scale or by 0 (so -0, inf
 * and NaN come out as numpy's x * 0 gives them). Integer arithmetic and one float32 multiply
 * per element: the same bits on every path and thread count, the threads taking contiguous
 * shares of the mask elements. The draw is the one per-path kernel (dropout_paths.c): the
 * products are as fast at SSE2 as with wider vectors.
 */
#include "dropout.h"

#include "isa.h"

/* Mask elements drawn before their products run: the bytes stay in L1 between the two. */
#define BLOCK 1024
/* Below about this many elements per thread, another thread costs more than it saves. */
#define GRAIN 65536

typedef struct {
    uint64_t stream;
    uint32_t threshold;
    float scale;
    int64_t n, inner;
    const float *x;      /* forward: the input */
    const float *g;      /* backward: the gradient (keep is read, not drawn) */
    float *y;
    uint8_t *keep;       /* forward: the mask drawn */
    const uint8_t *mask; /* the mask the products read */
} dropout_job;

/* SSE2 and NEON run the scalar draw: with two 64-bit lanes and no 64-bit lane multiply, the
 * compiler keeps the hash scalar there. */
static const om_dropout_draw_fn draws[OM_ISA_COUNT] = {
    om_dropout_draw_scalar, om_dropout_draw_scalar, OM_ISA_ENTRY_AVX2(om_dropout_draw_avx2),
    OM_ISA_ENTRY_AVX512(om_dropout_draw_avx512), om_dropout_draw_scalar};

/* y = v * multiplier over mask elements [begin, end). */
static void products(const dropout_job *a, const float *v, int64_t begin, int64_t end) {
    const uint8_t *keep = a->mask;
    const float s = a->scale;
    if (a->inner == 1) {
        for (int64_t i = begin; i < end; i++) a->y[i] = v[i] * (keep[i] ? s : 0.0f);
    } else {
        for (int64_t i = begin; i < end; i++) {
            const float m = keep[i] ? s : 0.0f;
            const float *vi = v + i * a->inner;
            float *yi = a->y + i * a->inner;
            for (int64_t j = 0; j < a->inner; j++) yi[j] = vi[j] * m;
        }
    }
}

static void forward_share(const void *ctx, int64_t begin, int64_t end) {
    const dropout_job *a = ctx;
    for (int64_t b = begin; b < end; b += BLOCK) {
        const int64_t e = end - b < BLOCK ? end : b + BLOCK;
        draws[om_isa](a->stream, a->threshold, b, e, a->keep);
        products(a, a->x, b, e);
    }
}

static void backward_share(const void *ctx, int64_t begin, int64_t end) {
    const dropout_job *a = ctx;
    products(a, a->g, begin, end);
}

void om_dropout_forward(uint64_t stream, uint32_t threshold, float scale, int64_t n,
                        int64_t inner, const float *x, float *y, uint8_t *keep, int nthreads) {
    const dropout_job a = {stream, threshold, scale, n, inner, x, NULL, y, keep, keep};
    om_run_range(om_threads_for(n * inner, GRAIN, nthreads), n, forward_share, &a);
}

void om_dropout_backward(const uint8_t *keep, float scale, int64_t n, int64_t inner,
                         const float *g, float *out, int nthreads) {
    const dropout_job a = {0, 0, scale, n, inner, NULL, g, out, NULL, keep};
    om_run_range(om_threads_for(n * inner, GRAIN, nthreads), n, backward_share, &a);
}
