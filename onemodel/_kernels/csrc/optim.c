/* Optimizer and clipping entry points: dispatch and threads (design note in optim.h).
 *
 * Threads: the n elements are cut into chunks of OM_OPTIM_CHUNK elements (a fixed size, not a
 * function of the thread count) that the threads take in turn (dynamic schedule: a thread
 * delayed by another process does not hold the step back by a whole static share); each
 * element is updated alone, so any split gives the same bits. Small parameters run on the
 * calling thread.
 */
#include "optim.h"

#include <math.h>

enum { OM_OPTIM_CHUNK = 1 << 14 };
/* Below about this many elements per thread, starting threads costs more than it saves. */
#define OM_OPTIM_GRAIN (1 << 16)

typedef void (*sgd_fn)(float *, const float *, float *, int64_t, const om_sgd_hyper *);
typedef void (*adam_fn)(float *, const float *, float *, float *, float *, int64_t,
                        const om_adam_hyper *);
typedef void (*unary_fn)(float *, int64_t, float);

static const sgd_fn sgd_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_sgd_f32);
static const adam_fn adam_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_adam_f32);
static const unary_fn scale_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_scale_f32);
static const unary_fn clamp_table[OM_ISA_COUNT] = OM_ISA_TABLE(om_clamp_f32);

/* The loop over chunks; each caller names its thread count nt. */
#if OM_HAVE_OPENMP
#define PARALLEL_CHUNKS OM_PRAGMA(omp parallel for schedule(dynamic) num_threads(nt) if (nt > 1))
#else
#define PARALLEL_CHUNKS (void)nt;
#endif
#define CHUNKS(n) (((n) + OM_OPTIM_CHUNK - 1) / OM_OPTIM_CHUNK)
#define CHUNK_LEN(n, c) ((n) - (c) * OM_OPTIM_CHUNK < OM_OPTIM_CHUNK ? \
                         (n) - (c) * OM_OPTIM_CHUNK : OM_OPTIM_CHUNK)

void om_sgd_step_f32(float *p, const float *g, float *buf, int64_t n, const om_sgd_hyper *h,
                     int nthreads) {
    const sgd_fn f = sgd_table[om_isa];
    const int nt = om_threads_for(n, OM_OPTIM_GRAIN, nthreads);
    const int64_t chunks = CHUNKS(n);
    int64_t c;
    PARALLEL_CHUNKS
    for (c = 0; c < chunks; c++) {
        const int64_t o = c * OM_OPTIM_CHUNK;
        f(p + o, g + o, buf ? buf + o : NULL, CHUNK_LEN(n, c), h);
    }
}

void om_adam_step_f32(float *p, const float *g, float *m, float *v, float *vmax, int64_t n,
                      const om_adam_hyper *h, int nthreads) {
    const adam_fn f = adam_table[om_isa];
    const int nt = om_threads_for(n, OM_OPTIM_GRAIN, nthreads);
    const int64_t chunks = CHUNKS(n);
    int64_t c;
    PARALLEL_CHUNKS
    for (c = 0; c < chunks; c++) {
        const int64_t o = c * OM_OPTIM_CHUNK;
        f(p + o, g + o, m + o, v + o, vmax ? vmax + o : NULL, CHUNK_LEN(n, c), h);
    }
}

static void unary_inplace(const unary_fn f, float *g, int64_t n, float x, int nthreads) {
    const int nt = om_threads_for(n, OM_OPTIM_GRAIN, nthreads);
    const int64_t chunks = CHUNKS(n);
    int64_t c;
    PARALLEL_CHUNKS
    for (c = 0; c < chunks; c++)
        f(g + c * OM_OPTIM_CHUNK, CHUNK_LEN(n, c), x);
}

void om_scale_inplace_f32(float *g, int64_t n, float coef, int nthreads) {
    unary_inplace(scale_table[om_isa], g, n, coef, nthreads);
}

void om_clamp_inplace_f32(float *g, int64_t n, float c, int nthreads) {
    unary_inplace(clamp_table[om_isa], g, n, c, nthreads);
}

double om_sumsq_seq_f64(const float *g, int64_t n, double acc) {
    for (int64_t i = 0; i < n; i++) {
        const double x = (double)g[i];
        acc = acc + x * x;
    }
    return acc;
}

float om_absmax_f32(const float *g, int64_t n) {
    float m = 0.0f;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(g[i]);
        m = a > m ? a : m;
        nan |= a != a;
    }
    return nan ? NAN : m;
}

OM_PATH_DISPATCH(optim, OM_ISA_TABLE)
