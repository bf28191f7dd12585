/* vmath entry points: dispatch to the selected ISA path and split the array over threads.
 *
 * Elementwise, so threads take independent chunks of OM_VMATH_CHUNK elements (a multiple of
 * every vector width): every element gets the same function whatever the thread count or
 * path, and the bits never depend on either.
 *
 * The ulp sweep is a measurement, not a kernel: its reference is libm in double precision.
 */
#include "vmath_kernels.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "isa.h"
#include "vmath.h"

#define OM_VMATH_CHUNK 16384
/* Below about this many elements per thread, another thread costs more than it saves. */
#define OM_VMATH_GRAIN 32768

typedef void (*om_unary_fn)(const float *, float *, int64_t);
typedef void (*om_backward_fn)(const float *, const float *, float *, int64_t);

static const om_unary_fn unary_table[OM_VMATH_OPS][OM_ISA_COUNT] = {
    OM_ISA_TABLE(om_exp_f32), OM_ISA_TABLE(om_log_f32), OM_ISA_TABLE(om_tanh_f32),
    OM_ISA_TABLE(om_sigmoid_f32), OM_ISA_TABLE(om_erf_f32), OM_ISA_TABLE(om_softplus_f32),
    OM_ISA_TABLE(om_gelu_f32), OM_ISA_TABLE(om_gelu_tanh_f32), OM_ISA_TABLE(om_relu_f32),
    OM_ISA_TABLE(om_sin_f32), OM_ISA_TABLE(om_cos_f32), OM_ISA_TABLE(om_expm1_f32),
    OM_ISA_TABLE(om_log1p_f32)};
static const om_backward_fn backward_table[OM_VMATH_OPS][OM_ISA_COUNT] = {
    OM_ISA_TABLE(om_exp_backward_f32), OM_ISA_TABLE(om_log_backward_f32),
    OM_ISA_TABLE(om_tanh_backward_f32), OM_ISA_TABLE(om_sigmoid_backward_f32),
    OM_ISA_TABLE(om_erf_backward_f32), OM_ISA_TABLE(om_softplus_backward_f32),
    OM_ISA_TABLE(om_gelu_backward_f32), OM_ISA_TABLE(om_gelu_tanh_backward_f32),
    OM_ISA_TABLE(om_relu_backward_f32), OM_ISA_TABLE(om_sin_backward_f32),
    OM_ISA_TABLE(om_cos_backward_f32), OM_ISA_TABLE(om_expm1_backward_f32),
    OM_ISA_TABLE(om_log1p_backward_f32)};

int om_vmath_saves_output(int op) {
    return op == OM_VMATH_EXP || op == OM_VMATH_TANH || op == OM_VMATH_SIGMOID ||
           op == OM_VMATH_RELU || op == OM_VMATH_EXPM1;
}

/* A call's arguments: op's function on x into y, or (s set) its backward function on s and g
 * into y; the threads take contiguous shares of the chunks, each share in one call. */
typedef struct {
    int op;
    const float *x, *s, *g;
    float *y;
    int64_t n;
} vmath_job;

static void vmath_chunks(const void *ctx, int64_t begin, int64_t end) {
    const vmath_job *a = ctx;
    const int64_t i = begin * OM_VMATH_CHUNK;
    const int64_t len = (end * OM_VMATH_CHUNK < a->n ? end * OM_VMATH_CHUNK : a->n) - i;
    if (a->s)
        backward_table[a->op][om_isa](a->s + i, a->g + i, a->y + i, len);
    else
        unary_table[a->op][om_isa](a->x + i, a->y + i, len);
}

static void run_chunks(const vmath_job *a, int nthreads) {
    om_run_range(om_threads_for(a->n, OM_VMATH_GRAIN, nthreads),
                 (a->n + OM_VMATH_CHUNK - 1) / OM_VMATH_CHUNK, vmath_chunks, a);
}

void om_vmath_unary(int op, const float *x, float *y, int64_t n, int nthreads) {
    const vmath_job a = {.op = op, .x = x, .y = y, .n = n};
    run_chunks(&a, nthreads);
}

void om_vmath_backward(int op, const float *s, const float *g, float *out, int64_t n,
                       int nthreads) {
    const vmath_job a = {.op = op, .s = s, .g = g, .y = out, .n = n};
    run_chunks(&a, nthreads);
}

/* ---- the exhaustive accuracy sweep ----------------------------------------------------- */

/* Limits at +-inf where the double formula gives inf * 0. */
static double gelu_limit(double x) { return x > 0 ? x : -0.0; }

static double ref_exp(double x) { return exp(x); }
static double ref_log(double x) { return log(x); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_sigmoid(double x) {
    return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
}
static double ref_erf(double x) { return erf(x); }
static double ref_softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }
static double ref_gelu(double x) {
    return isinf(x) ? gelu_limit(x) : 0.5 * x * erfc(-x * 0.70710678118654752440);
}
static double ref_gelu_tanh(double x) {
    if (isinf(x)) return gelu_limit(x);
    double v = 2.0 * 0.79788456080286535588 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-v));
}
static double ref_relu(double x) { return x < 0 ? 0.0 : x; }
static double ref_sin(double x) { return sin(x); }
static double ref_cos(double x) { return cos(x); }
static double ref_expm1(double x) { return expm1(x); }
static double ref_log1p(double x) { return log1p(x); }
static double (*const ref_table[OM_VMATH_OPS])(double) = {
    ref_exp, ref_log, ref_tanh, ref_sigmoid, ref_erf, ref_softplus, ref_gelu, ref_gelu_tanh,
    ref_relu, ref_sin, ref_cos, ref_expm1, ref_log1p};
static float (*const scalar_table[OM_VMATH_OPS])(float) = {
    om_exp_scalar, om_log_scalar, om_tanh_scalar, om_sigmoid_scalar, om_erf_scalar,
    om_softplus_scalar, om_gelu_scalar, om_gelu_tanh_scalar, om_relu_scalar, om_sin_scalar,
    om_cos_scalar, om_expm1_scalar, om_log1p_scalar};

/* |y - ref| in units of the float32 ulp at ref; inf counts as 2^128, NaN against a number as
 * 1e9, and a result equal to ref rounded to float32 as 0. */
static double ulp_error(float y, double ref) {
    if (isnan(ref) || isnan(y)) return isnan(ref) && isnan(y) ? 0.0 : 1e9;
    if ((double)y == (double)(float)ref) return 0.0;
    double a = fabs(ref) > FLT_MAX ? FLT_MAX : fabs(ref);
    int e;
    frexp(a, &e);
    double ulp = ldexp(1.0, (e < -125 ? -125 : e) - 24);
    double yv = isinf(y) ? copysign(ldexp(1.0, 128), y) : (double)y;
    return fabs(yv - ref) / ulp;
}

#define OM_SWEEP_BLOCK 4096

/* The sweep's range and its result, into which each thread merges its own. */
typedef struct {
    int op;
    int64_t start, stop;
    double *max_ulp;
    uint32_t *worst_bits;
    int64_t *mismatches;
} sweep_job;

/* Blocks rank, rank + size, ...: the cost varies along the range of inputs. */
static int sweep_blocks(const void *ctx, int rank, int size) {
    const sweep_job *a = ctx;
    om_unary_fn f = unary_table[a->op][om_isa];
    double (*ref)(double) = ref_table[a->op];
    float (*scalar)(float) = scalar_table[a->op];
    const int64_t start = a->start, stop = a->stop;
    int64_t blocks = stop > start ? (stop - start + OM_SWEEP_BLOCK - 1) / OM_SWEEP_BLOCK : 0;
    float x[OM_SWEEP_BLOCK], y[OM_SWEEP_BLOCK];
    double local = 0.0;
    uint32_t local_bits = (uint32_t)start;
    int64_t local_diff = 0;
    for (int64_t b = rank; b < blocks; b += size) {
        int64_t lo = start + b * OM_SWEEP_BLOCK;
        int64_t len = stop - lo < OM_SWEEP_BLOCK ? stop - lo : OM_SWEEP_BLOCK;
        for (int64_t i = 0; i < len; i++) x[i] = om_u2f((uint32_t)(lo + i));
        f(x, y, len);
        for (int64_t i = 0; i < len; i++) {
            float s = scalar(x[i]);
            local_diff += memcmp(&s, &y[i], sizeof s) != 0;
            double e = ulp_error(y[i], ref((double)x[i]));
            uint32_t bits = (uint32_t)(lo + i);
            /* ties go to the lowest input, so the answer does not depend on threads */
            if (e > local || (e == local && bits < local_bits && e > 0.0)) {
                local = e;
                local_bits = bits;
            }
        }
    }
#pragma omp critical
    {
        if (local > *a->max_ulp || (local == *a->max_ulp && local_bits < *a->worst_bits)) {
            *a->max_ulp = local;
            *a->worst_bits = local_bits;
        }
        *a->mismatches += local_diff;
    }
    return 0;
}

void om_vmath_ulp_sweep(int op, int64_t start, int64_t stop, int nthreads, double *max_ulp,
                        uint32_t *worst_bits, int64_t *mismatches) {
    const sweep_job a = {op, start, stop, max_ulp, worst_bits, mismatches};
    *max_ulp = 0.0;
    *worst_bits = (uint32_t)start;
    *mismatches = 0;
    om_run_team(om_threads_for(stop - start, OM_VMATH_GRAIN, nthreads), sweep_blocks, &a);
}

OM_PATH_DISPATCH(vmath, OM_ISA_TABLE)
