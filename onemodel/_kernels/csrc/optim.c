/* Optimizer and clipping entry points: dispatch and threads (design note in optim.h).
 *
 * Threads: the n elements are cut into chunks of OM_OPTIM_CHUNK elements (a fixed size, not a
 * function of the thread count), each thread a contiguous share of them; each element is
 * updated alone, so any split gives the same bits. Small parameters run on the calling thread.
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

/* A call's arguments, for the threads' shares of its chunks: an SGD step (sgd set), an Adam
 * step (adam set), or unary on p in place. */
typedef struct {
    float *p, *buf, *m, *v, *vmax;
    const float *g;
    const om_sgd_hyper *sgd;
    const om_adam_hyper *adam;
    unary_fn unary;
    float x;
    int64_t n;
} optim_job;

static void optim_chunks(const void *ctx, int64_t begin, int64_t end) {
    const optim_job *a = ctx;
    for (int64_t c = begin; c < end; c++) {
        const int64_t o = c * OM_OPTIM_CHUNK;
        const int64_t len = a->n - o < OM_OPTIM_CHUNK ? a->n - o : OM_OPTIM_CHUNK;
        if (a->sgd)
            sgd_table[om_isa](a->p + o, a->g + o, a->buf ? a->buf + o : NULL, len, a->sgd);
        else if (a->adam)
            adam_table[om_isa](a->p + o, a->g + o, a->m + o, a->v + o,
                               a->vmax ? a->vmax + o : NULL, len, a->adam);
        else
            a->unary(a->p + o, len, a->x);
    }
}

static void run_chunks(const optim_job *a, int nthreads) {
    om_run_range(om_threads_for(a->n, OM_OPTIM_GRAIN, nthreads),
                 (a->n + OM_OPTIM_CHUNK - 1) / OM_OPTIM_CHUNK, optim_chunks, a);
}

void om_sgd_step_f32(float *p, const float *g, float *buf, int64_t n, const om_sgd_hyper *h,
                     int nthreads) {
    const optim_job a = {.p = p, .g = g, .buf = buf, .sgd = h, .n = n};
    run_chunks(&a, nthreads);
}

void om_adam_step_f32(float *p, const float *g, float *m, float *v, float *vmax, int64_t n,
                      const om_adam_hyper *h, int nthreads) {
    const optim_job a = {.p = p, .g = g, .m = m, .v = v, .vmax = vmax, .adam = h, .n = n};
    run_chunks(&a, nthreads);
}

void om_scale_inplace_f32(float *g, int64_t n, float coef, int nthreads) {
    const optim_job a = {.p = g, .unary = scale_table[om_isa], .x = coef, .n = n};
    run_chunks(&a, nthreads);
}

void om_clamp_inplace_f32(float *g, int64_t n, float c, int nthreads) {
    const optim_job a = {.p = g, .unary = clamp_table[om_isa], .x = c, .n = n};
    run_chunks(&a, nthreads);
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
