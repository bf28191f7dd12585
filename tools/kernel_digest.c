/* Digest of every exact-mode kernel's output, per instruction-set path and thread count.
 *
 * Runs each kernel family of onemodel/_kernels/csrc (gemm, vmath forward and backward, reduce,
 * optimizer steps and clipping, convolution, pooling, batch norm, CTC, LSTM/GRU, SR4) on fixed
 * inputs from a SplitMix64 integer generator, and hashes the outputs (FNV-1a 64 over the
 * little-endian bytes). Every input is an exact dyadic fraction, so no input depends on how a
 * compiler rounds a conversion. In exact mode the digest is the same on every path, at every
 * thread count, on every architecture and with every compiler (docs/spec/engine.md section 4);
 * tools/check_aarch64.sh compares an aarch64 build under qemu with the x86-64 paths.
 *
 * NaN outputs are hashed as one canonical NaN: IEEE 754 leaves the sign and payload of a NaN
 * produced by an invalid operation to the hardware (x86-64 gives -NaN, aarch64 +NaN), and no
 * exact-mode result depends on them.
 *
 *   kernel_digest [path ...]    paths: scalar sse2 avx2 avx512 neon (default: all this CPU has)
 *
 * Prints one line per kernel for the first path at one thread, one digest per path and thread
 * count, and `digest <hex>`; exits 1 when two paths or thread counts differ (naming the kernel).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_norm.h"
#include "conv.h"
#include "ctc.h"
#include "dropout.h"
#include "exact.h"
#include "gemm.h"
#include "isa.h"
#include "optim.h"
#include "pool.h"
#include "reduce.h"
#include "rnn.h"
#include "splitmix64.h"
#include "sr4.h"
#include "vmath_kernels.h"

#define MAX_RECORDS 256

static const char *const ISA_NAMES[OM_ISA_COUNT] = {"scalar", "sse2", "avx2", "avx512", "neon"};
static const int THREADS[] = {1, 3};

/* ---- digests ------------------------------------------------------------------------------ */

typedef struct {
    int count;
    char names[MAX_RECORDS][40];
    uint64_t digests[MAX_RECORDS];
} run_t;

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return fnv(h, b, 8);
}

static void add(run_t *r, const char *name, uint64_t digest) {
    if (r->count == MAX_RECORDS) {
        fprintf(stderr, "kernel_digest: more than %d records\n", MAX_RECORDS);
        exit(2);
    }
    snprintf(r->names[r->count], sizeof r->names[0], "%s", name);
    r->digests[r->count++] = digest;
}

static void rec_f32(run_t *r, const char *name, const float *x, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        if (isnan(x[i])) bits = 0x7fc00000u;
        h = fnv_u64(h, bits);
    }
    add(r, name, h);
}

static void rec_i64(run_t *r, const char *name, const int64_t *x, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) h = fnv_u64(h, (uint64_t)x[i]);
    add(r, name, h);
}

static void rec_f64(run_t *r, const char *name, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    add(r, name, fnv_u64(0xcbf29ce484222325ULL, isnan(v) ? 0x7ff8000000000000ULL : bits));
}

static void rec_bytes(run_t *r, const char *name, const uint8_t *p, int64_t n) {
    add(r, name, fnv(0xcbf29ce484222325ULL, p, (size_t)n));
}

static uint64_t total(const run_t *r) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < r->count; i++) {
        h = fnv(h, (const uint8_t *)r->names[i], strlen(r->names[i]));
        h = fnv_u64(h, r->digests[i]);
    }
    return h;
}

/* ---- inputs ------------------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t next_u64(void) {
    return om_splitmix64_mix(rng_state += OM_SPLITMIX64_GAMMA);
}

/* Uniform in [-scale, scale) on a grid of scale * 2^-23; scale is a power of two, so every
 * value is exact. */
static float *uniform(int64_t n, float scale) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((int32_t)(next_u64() >> 40) - (1 << 23)) * (scale * 0x1p-23f);
    return x;
}

static float *zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* ±0, ±inf, NaN, denormals, the smallest normal, huge and ordinary magnitudes. */
static const float SPECIALS[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-149f, 0x1.6p-133f, -0x1.05p-128f,
    0x1p-126f, -0x1p-126f, 1e-30f, 3e38f, -3e38f, 0x1.fffffep127f, 1e10f, -1e10f, 88.7f, -88.7f,
    104.0f, -104.0f, 20.0f, -20.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, 3.0f, 1e-7f, -1e-7f};
#define N_SPECIALS ((int64_t)(sizeof SPECIALS / sizeof SPECIALS[0]))

/* ---- kernel families ---------------------------------------------------------------------- */

static void check_gemm(run_t *r, int nt) {
    static const int64_t shapes[][4] = {  /* batch, m, n, k */
        {1, 1, 1, 1}, {1, 5, 7, 3}, {1, 17, 33, 65}, {2, 64, 48, 600}, {1, 130, 100, 70},
        {3, 9, 21, 0}, {1, 7, 11, 257}, {1, 9, 13, 5}};  /* tile sizes +-1, K block + 1 */
    char name[40];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t batch = shapes[s][0], m = shapes[s][1], n = shapes[s][2], k = shapes[s][3];
        for (int t = 0; t < 4; t++) {
            float *a = uniform(batch * m * k, 1.0f), *b = uniform(batch * k * n, 1.0f);
            float *c = zeros(batch * m * n);
            om_gemm_f32(batch, m, n, k, a, m * k, t & 1, b, k * n, t >> 1, c, nt);
            snprintf(name, sizeof name, "gemm %lldx%lldx%lldx%lld t%d", (long long)batch,
                     (long long)m, (long long)n, (long long)k, t);
            rec_f32(r, name, c, batch * m * n);
            /* The bfloat16 product (the dot-product rule), on values scaled down to where its
             * flushes happen: 2^-60 times the uniform ones on both sides. */
            for (int64_t i = 0; i < batch * m * k; i++) a[i] *= 0x1p-60f;
            for (int64_t i = 0; i < batch * k * n; i++) b[i] *= (i % 3) ? 0x1p-60f : 1.0f;
            om_gemm_operand ha = {a, m * k, t & 1, OM_F32_TO_BF16, NULL};
            om_gemm_operand hb = {b, k * n, t >> 1, OM_F32_TO_BF16, NULL};
            om_gemm(batch, m, n, k, ha, hb, c, 0, nt);
            rec_f32(r, strcat(name, " bf16"), c, batch * m * n);
            free(a), free(b), free(c);
        }
    }
}

static const char *const VMATH_NAMES[OM_VMATH_OPS] = {
    "exp",  "log",  "tanh", "sigmoid", "erf",   "softplus", "gelu",
    "gelu_tanh", "relu", "sin", "cos", "expm1", "log1p"};

static void check_vmath(run_t *r, int nt) {
    const int64_t n = 4099;  /* specials, then values over the useful ranges of every op */
    float *x = uniform(n, 16.0f), *g = uniform(n, 1.0f), *y = zeros(n), *dx = zeros(n);
    float *wide = uniform(n, 128.0f);
    memcpy(x, SPECIALS, sizeof SPECIALS);
    for (int64_t i = N_SPECIALS; i < n; i += 3) x[i] = wide[i];
    char name[40];
    for (int op = 0; op < OM_VMATH_OPS; op++) {
        om_vmath_unary(op, x, y, n, nt);
        snprintf(name, sizeof name, "vmath %s", VMATH_NAMES[op]);
        rec_f32(r, name, y, n);
        om_vmath_backward(op, om_vmath_saves_output(op) ? y : x, g, dx, n, nt);
        snprintf(name, sizeof name, "vmath %s backward", VMATH_NAMES[op]);
        rec_f32(r, name, dx, n);
    }
    free(x), free(g), free(y), free(dx), free(wide);
}

static void check_reduce(run_t *r, int nt) {
    static const int64_t shapes[][3] = {  /* outer, n, inner */
        {3, 1000, 1}, {2, 77, 300}, {1, 70000, 1}, {4, 15, 17}, {5, 1, 1}};
    char name[48];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t o = shapes[s][0], n = shapes[s][1], in = shapes[s][2], size = o * n * in;
        float *x = uniform(size, 8.0f), *g = uniform(size, 1.0f), *y = zeros(size);
        float *dx = zeros(size), *sum = zeros(o * in);
        if (s < 2)  /* specials in the first row (n along the row) or across the first columns */
            memcpy(x, SPECIALS, sizeof SPECIALS);
        om_sum_axis_f32(x, sum, o, n, in, nt);
        snprintf(name, sizeof name, "sum %lldx%lldx%lld", (long long)o, (long long)n,
                 (long long)in);
        rec_f32(r, name, sum, o * in);
        for (int is_log = 0; is_log < 2; is_log++) {
            om_softmax_f32(x, y, o, n, in, is_log, nt);
            om_softmax_backward_f32(y, g, dx, o, n, in, is_log, nt);
            snprintf(name, sizeof name, "%s %lldx%lldx%lld", is_log ? "log_softmax" : "softmax",
                     (long long)o, (long long)n, (long long)in);
            rec_f32(r, name, y, size);
            strcat(name, " backward");
            rec_f32(r, name, dx, size);
        }
        free(x), free(g), free(y), free(dx), free(sum);
    }
    const int64_t rows = 7, n = 515;
    float *x = uniform(rows * n, 4.0f), *w = uniform(n, 2.0f), *b = uniform(n, 1.0f);
    float *g = uniform(rows * n, 1.0f), *y = zeros(rows * n), *dx = zeros(rows * n);
    float *mean = zeros(rows), *rstd = zeros(rows), *dw = zeros(n), *db = zeros(n);
    for (int affine = 0; affine < 2; affine++) {
        om_layer_norm_f32(x, affine ? w : NULL, affine ? b : NULL, 1e-5f, y, mean, rstd, rows, n,
                          nt);
        om_layer_norm_backward_f32(g, x, mean, rstd, affine ? w : NULL, dx, affine ? dw : NULL,
                                   affine ? db : NULL, rows, n, nt);
        rec_f32(r, affine ? "layer_norm affine" : "layer_norm", y, rows * n);
        rec_f32(r, affine ? "layer_norm affine mean" : "layer_norm mean", mean, rows);
        rec_f32(r, affine ? "layer_norm affine rstd" : "layer_norm rstd", rstd, rows);
        rec_f32(r, affine ? "layer_norm affine dx" : "layer_norm dx", dx, rows * n);
    }
    rec_f32(r, "layer_norm dw", dw, n);
    rec_f32(r, "layer_norm db", db, n);
    free(x), free(w), free(b), free(g), free(y), free(dx), free(mean), free(rstd), free(dw),
        free(db);
}

static void check_optim(run_t *r, int nt) {
    const int64_t n = 100003;  /* above one thread's chunk, odd: a tail on every path */
    float *p = uniform(n, 1.0f), *buf = zeros(n), *m = zeros(n), *v = zeros(n), *vmax = zeros(n);
    om_sgd_hyper sgd = {0.05f, 0.9f, 1.0f - 0.25f, 1e-4f, 1, 1};
    om_adam_hyper adam = {0.9f, 0.999f, 0.1f, 0.001f, 1e-8f, 0.01f, 0.03125f, 0.0f, 0.99990f, 1,
                          1};
    for (int step = 0; step < 3; step++) {
        float *g = uniform(n, 0.5f);
        if (step == 0) memcpy(g + n - N_SPECIALS, SPECIALS, sizeof SPECIALS);  /* vectors and tail */
        sgd.first = step == 0;
        sgd.nesterov = step != 1;
        om_sgd_step_f32(p, g, buf, n, &sgd, nt);
        adam.amsgrad = step != 2;
        adam.decoupled = step != 1;
        adam.weight_decay = step == 1 ? 0.01f : 0.0f;
        om_adam_step_f32(p, g, m, v, vmax, n, &adam, nt);
        free(g);
    }
    rec_f32(r, "sgd+adam p", p, n);
    rec_f32(r, "sgd buf", buf, n);
    rec_f32(r, "adam m", m, n);
    rec_f32(r, "adam v", v, n);
    rec_f32(r, "adam vmax", vmax, n);
    float *g = uniform(n, 4.0f);
    memcpy(g, SPECIALS, sizeof SPECIALS);
    rec_f64(r, "clip sumsq", om_sumsq_seq_f64(g, n, 0.5));
    rec_f32(r, "clip absmax", (float[]){om_absmax_f32(g + N_SPECIALS, n - N_SPECIALS)}, 1);
    om_clamp_inplace_f32(g, n, 1.5f, nt);
    rec_f32(r, "clip clamp", g, n);
    om_scale_inplace_f32(g, n, 0.3f, nt);
    rec_f32(r, "clip scale", g, n);
    free(p), free(buf), free(m), free(v), free(vmax), free(g);
}

static void check_conv(run_t *r, int nt) {
    static const om_conv2d_shape shapes[] = {
        /* n c h w k kh kw sh sw ph pw dh dw groups */
        {2, 4, 9, 11, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0},
        {3, 6, 10, 8, 4, 3, 2, 2, 1, 2, 0, 2, 1, 2, 0, 0},
        {1, 3, 28, 28, 8, 5, 5, 1, 1, 2, 2, 1, 1, 1, 0, 0}};
    char name[40];
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        om_conv2d_shape s = shapes[i];
        s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
        s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
        const int64_t nx = s.n * s.c * s.h * s.w, nw = s.k * (s.c / s.groups) * s.kh * s.kw;
        const int64_t ny = s.n * s.k * s.oh * s.ow;
        float *x = uniform(nx, 1.0f), *w = uniform(nw, 0.5f), *b = uniform(s.k, 0.5f);
        float *gy = uniform(ny, 1.0f), *y = zeros(ny), *gx = zeros(nx), *gw = zeros(nw);
        float *gb = zeros(s.k);
        om_conv2d_forward_f32(&s, x, w, i == 1 ? NULL : b, y, nt);
        om_conv2d_backward_f32(&s, x, w, gy, gx, gw, gb, nt);
        snprintf(name, sizeof name, "conv2d %zu", i);
        rec_f32(r, name, y, ny);
        strcat(name, " dx");
        rec_f32(r, name, gx, nx);
        snprintf(name, sizeof name, "conv2d %zu dw", i);
        rec_f32(r, name, gw, nw);
        snprintf(name, sizeof name, "conv2d %zu db", i);
        rec_f32(r, name, gb, s.k);
        free(x), free(w), free(b), free(gy), free(y), free(gx), free(gw), free(gb);
    }

    /* 3x3 windows, stride 2, padding 1 over 6 planes of 9 x 10; the average counts padding. */
    enum { PL = 6, H = 9, W = 10, OH = 5, OW = 5 };
    int64_t hs[OH], he[OH], ws[OW], we[OW], dh[OH], dw[OW];
    for (int i = 0; i < OH; i++) {
        hs[i] = i * 2 - 1 < 0 ? 0 : i * 2 - 1;
        he[i] = i * 2 + 2 > H ? H : i * 2 + 2;
        dh[i] = 3;
    }
    for (int j = 0; j < OW; j++) {
        ws[j] = j * 2 - 1 < 0 ? 0 : j * 2 - 1;
        we[j] = j * 2 + 2 > W ? W : j * 2 + 2;
        dw[j] = 3;
    }
    const om_pool_windows pw = {.planes = PL, .h = H, .w = W, .oh = OH, .ow = OW, .sh = 1,
                                .sw = 1, .hs = hs, .he = he, .ws = ws, .we = we};
    float *x = uniform(PL * H * W, 2.0f), *gy = uniform(PL * OH * OW, 1.0f);
    float *y = zeros(PL * OH * OW), *gx = zeros(PL * H * W);
    int64_t idx[PL * OH * OW];
    om_max_pool2d_f32(&pw, x, y, idx, nt);
    rec_f32(r, "max_pool2d", y, PL * OH * OW);
    rec_i64(r, "max_pool2d indices", idx, PL * OH * OW);
    om_max_pool2d_backward_f32(&pw, gy, idx, gx, nt);
    rec_f32(r, "max_pool2d dx", gx, PL * H * W);
    om_pool_windows dilated = pw;  /* taps 2 apart (max pooling's dilation) */
    dilated.sh = dilated.sw = 2;
    om_max_pool2d_f32(&dilated, x, y, idx, nt);
    rec_f32(r, "max_pool2d dilated", y, PL * OH * OW);
    om_avg_pool2d_f32(&pw, dh, dw, x, y, nt);
    rec_f32(r, "avg_pool2d", y, PL * OH * OW);
    memset(gx, 0, sizeof(float) * PL * H * W);
    om_avg_pool2d_backward_f32(&pw, dh, dw, gy, gx, nt);
    rec_f32(r, "avg_pool2d dx", gx, PL * H * W);
    free(x), free(gy), free(y), free(gx);

    /* Batch norm over (n, c, s) = (4, 5, 37). */
    const int64_t n = 4, c = 5, sp = 37, size = n * c * sp;
    float *bx = uniform(size, 4.0f), *bg = uniform(size, 1.0f), *w = uniform(c, 2.0f);
    float *b = uniform(c, 1.0f), *by = zeros(size), *bgx = zeros(size), *gw = zeros(c);
    float *gb = zeros(c), *mean = zeros(c), *var = zeros(c), *varu = zeros(c), *inv = zeros(c);
    om_batch_norm_stats_f32(bx, OM_F32, NULL, n, c, sp, 1e-5, mean, var, varu, inv, nt);
    rec_f32(r, "batch_norm mean", mean, c);
    rec_f32(r, "batch_norm var", var, c);
    rec_f32(r, "batch_norm var unbiased", varu, c);
    rec_f32(r, "batch_norm invstd", inv, c);
    om_batch_norm_apply_f32(bx, OM_F32, NULL, mean, inv, w, b, by, n, c, sp, nt);
    rec_f32(r, "batch_norm apply", by, size);
    for (int stats = 0; stats < 2; stats++) {
        om_batch_norm_backward_f32(bx, OM_F32, bg, mean, inv, w, bgx, gw, gb, n, c, sp, stats, nt);
        rec_f32(r, stats ? "batch_norm dx (batch stats)" : "batch_norm dx", bgx, size);
        rec_f32(r, stats ? "batch_norm dw (batch stats)" : "batch_norm dw", gw, c);
        rec_f32(r, stats ? "batch_norm db (batch stats)" : "batch_norm db", gb, c);
    }
    free(bx), free(bg), free(w), free(b), free(by), free(bgx), free(gw), free(gb), free(mean),
        free(var), free(varu), free(inv);
}

static void check_ctc(run_t *r, int nt) {
    enum { T = 12, B = 3, C = 6, MAXLEN = 5, WIDTH = 2 * MAXLEN + 3 };
    static const int64_t targets[] = {1, 2, 2, 3, 1, 4, 5, 4, 5};
    static const int64_t offsets[] = {0, 4, 5}, in_len[] = {12, 10, 12}, tg_len[] = {4, 1, 4};
    const om_ctc_shape s = {T, B, C, WIDTH, 0, targets, offsets, in_len, tg_len};
    float *logits = uniform(T * B * C, 4.0f), *lp = zeros(T * B * C);
    om_softmax_f32(logits, lp, T * B, C, 1, 1, nt);
    float *alpha = zeros(B * T * WIDTH), *beta = zeros(B * 3 * WIDTH), *skip = zeros(B * WIDTH);
    float *nll = zeros(B), *grad = zeros(T * B * C);
    int64_t lab[B * WIDTH];
    const float scale[B] = {1.0f, 0.5f, 0.25f};
    om_ctc_forward_f32(&s, lp, alpha, lab, skip, nll, nt);
    rec_f32(r, "ctc nll", nll, B);
    om_ctc_backward_f32(&s, lp, alpha, nll, scale, 1, beta, lab, skip, grad, nt);
    rec_f32(r, "ctc grad", grad, T * B * C);
    free(logits), free(lp), free(alpha), free(beta), free(skip), free(nll), free(grad);
}

/* A bidirectional LSTM and GRU: the second direction runs reversed, with its own weights. */
static void check_rnn(run_t *r, int nt) {
    enum { T = 5, B = 3, H = 22, NDIR = 2 };  /* H: whole vectors and a tail on every path */
    static const int64_t lengths[B] = {5, 3, 1};
    for (int cell = OM_RNN_LSTM; cell <= OM_RNN_GRU; cell++) {
        const int64_t gh = (cell == OM_RNN_LSTM ? 4 : 3) * H;
        const int lstm = cell == OM_RNN_LSTM;
        om_rnn_forward_args fwd[NDIR];
        om_rnn_backward_args bwd[NDIR];
        for (int d = 0; d < NDIR; d++) {
            float *w_hh = uniform(gh * H, 0.25f), *h0 = uniform(B * H, 1.0f);
            float *c0 = lstm ? uniform(B * H, 1.0f) : NULL, *y = zeros(T * B * H);
            float *gates = zeros(T * B * gh), *cs = lstm ? zeros(T * B * H) : NULL;
            float *hn_lin = lstm ? NULL : zeros(T * B * H);
            fwd[d] = (om_rnn_forward_args){
                .reverse = d, .xw = uniform(T * B * gh, 2.0f), .w_hh = w_hh,
                .bias = uniform(gh, 0.5f), .h0 = h0, .c0 = c0, .y = y, .gates = gates, .cs = cs,
                .hn_lin = hn_lin, .h_n = zeros(B * H), .c_n = lstm ? zeros(B * H) : NULL};
            bwd[d] = (om_rnn_backward_args){
                .reverse = d, .w_hh = w_hh, .h0 = h0, .c0 = c0, .y = y, .gates = gates, .cs = cs,
                .hn_lin = hn_lin, .gy = uniform(T * B * H, 1.0f), .g_hn = uniform(B * H, 1.0f),
                .g_cn = lstm ? uniform(B * H, 1.0f) : NULL, .dgx = zeros(T * B * gh),
                .dgh = lstm ? NULL : zeros(T * B * gh), .dh0 = zeros(B * H),
                .dc0 = lstm ? zeros(B * H) : NULL};
        }
        om_rnn_forward_f32(cell, NDIR, T, B, H, lengths, fwd, 0, nt);
        om_rnn_backward_f32(cell, NDIR, T, B, H, lengths, bwd, 0, nt);
        char name[40];
        for (int d = 0; d < NDIR; d++) {
            const char *c = lstm ? "lstm" : "gru";
            const struct { const char *what; const float *x; int64_t n; } out[] = {
                {"y", fwd[d].y, T * B * H}, {"h_n", fwd[d].h_n, B * H},
                {"c_n", fwd[d].c_n, B * H}, {"hn_lin", fwd[d].hn_lin, T * B * H},
                {"dgx", bwd[d].dgx, T * B * gh}, {"dgh", bwd[d].dgh, T * B * gh},
                {"dh0", bwd[d].dh0, B * H}, {"dc0", bwd[d].dc0, B * H}};
            for (size_t k = 0; k < sizeof out / sizeof out[0]; k++) {
                if (!out[k].x) continue;  /* not a value of this cell */
                snprintf(name, sizeof name, "%s dir %d %s", c, d, out[k].what);
                rec_f32(r, name, out[k].x, out[k].n);
            }
            free((void *)fwd[d].xw), free((void *)fwd[d].w_hh), free((void *)fwd[d].bias);
            free((void *)fwd[d].h0), free((void *)fwd[d].c0), free(fwd[d].y), free(fwd[d].gates);
            free(fwd[d].cs), free(fwd[d].hn_lin), free(fwd[d].h_n), free(fwd[d].c_n);
            free((void *)bwd[d].gy), free((void *)bwd[d].g_hn), free((void *)bwd[d].g_cn);
            free(bwd[d].dgx), free(bwd[d].dgh), free(bwd[d].dh0), free(bwd[d].dc0);
        }
    }
}

static void check_sr4(run_t *r, int nt) {
    /* More than one block of rows and of pairs; K odd, so pairs cross bytes of q. */
    enum { ROWS = 130, K = 41, M = 70, N = ROWS * K };
    uint8_t q[(N + 1) / 2];
    om_sr4_init(q, N, 42, 1000, 2);
    rec_bytes(r, "sr4 init", q, sizeof q);
    float *g = uniform(N, 0.125f), *w = zeros(N), *x = uniform(M * K, 2.0f);
    float *out = zeros(M * ROWS);
    const float abs_mean = om_sr4_abs_mean(g, N, nt);
    rec_f32(r, "sr4 abs_mean", &abs_mean, 1);
    for (uint32_t step = 0; step < 3; step++) {
        const uint64_t key = om_sr4_mix(om_sr4_mix(42 ^ OM_SR4_C0) ^ step);
        const om_sr4_step_args a = {0.25f / (abs_mean + 1e-12f), key,
                                    (OM_SR4_WEYL * step) & 255u, 1000, 7, 2};
        om_sr4_step(q, g, step == 1 ? w : NULL, N, &a, nt);
    }
    rec_bytes(r, "sr4 step", q, sizeof q);
    rec_f32(r, "sr4 step w", w, N);
    om_sr4_materialize(q, N, 3, w, nt);
    rec_f32(r, "sr4 materialize", w, N);
    uint8_t *codes = malloc((size_t)om_sr4_ternary_plan_size(ROWS, K));
    om_sr4_ternary_plan(q, ROWS, K, 2, codes, nt);
    rec_bytes(r, "sr4 ternary plan", codes, (size_t)om_sr4_ternary_plan_size(ROWS, K));
    om_sr4_ternary_matmul(M, ROWS, K, x, codes, out, nt);
    rec_f32(r, "sr4 ternary matmul", out, M * ROWS);
    om_sr4_ternary_matmul(9, ROWS, K, x, codes, out, nt);  /* blocks of 16 rows */
    rec_f32(r, "sr4 ternary matmul, 9 rows", out, 9 * ROWS);
    free(g), free(w), free(x), free(out), free(codes);
}

static void check_exact(run_t *r, int nt) {
    (void)nt;  /* the exact sum runs on one thread */
    /* Three rows of gradients with a wide range, some beyond one int64 a row, two non-finite;
     * summed in limbs (add, round) and as the single step's shard sum (sum_rows). */
    enum { N = 1500, ROWS = 3 };
    float *g = uniform(ROWS * N, 1.0f), *out = zeros(N);
    for (int64_t i = 0; i < ROWS * N; i++) g[i] = ldexpf(g[i], (int)(next_u64() % 60) - 40);
    g[7] = 0x1p40f;
    g[N + 9] = INFINITY;
    g[2 * N + 9] = -INFINITY;
    const double scale[ROWS] = {3 * 0x1p50, 4 * 0x1p50, 5 * 0x1p50}, limit = 0x1p98 - 0x1p45;
    int64_t *hi = calloc(N, sizeof(int64_t)), *lo = calloc(N, sizeof(int64_t));
    int64_t clamped = 0, bad = 0, wide = 0;
    int skipped = 0;
    uint8_t *codes = calloc(N, 1);
    for (int w = 0; w < ROWS; w++)
        om_exact_add(g + w * N, N, scale[w], limit, hi, lo, codes, &clamped, &bad, w == 0, 0,
                     &wide, &skipped);
    rec_i64(r, "exact add hi", hi, N);
    rec_i64(r, "exact add lo", lo, N);
    uint32_t top = 0;
    const uint64_t magic = 0x2492492492492493ULL;  /* ceil(2^(61 + 4) / 14) */
    om_exact_round(hi, lo, N, -50, 14, magic, 4, out, &top);
    rec_f32(r, "exact round", out, N);
    top = 0;
    const float *rows[ROWS];
    for (int w = 0; w < ROWS; w++) rows[w] = g + w * N;
    om_exact_sum_rows(rows, ROWS, scale, limit, N, -50, 14, magic, 4, out, &top, &clamped);
    rec_f32(r, "exact sum rows", out, N);
    rec_i64(r, "exact top", (const int64_t[]){top}, 1);
    free(g), free(out), free(hi), free(lo), free(codes);
}

static void check_dropout(run_t *r, int nt) {
    enum { N = 70001, INNER = 3 };
    float *x = uniform(N * INNER, 4.0f), *y = zeros(N * INNER);
    uint8_t *keep = malloc(N);
    om_dropout_forward(0x123456789ABCDEFULL, 5033165, 1.25f, N, INNER, x, y, keep, nt);
    rec_bytes(r, "dropout keep", keep, N);
    rec_f32(r, "dropout forward", y, N * INNER);
    om_dropout_backward(keep, 1.25f, N, INNER, x, y, nt);
    rec_f32(r, "dropout backward", y, N * INNER);
    free(x), free(y), free(keep);
}

static void run_all(run_t *r, int nt) {
    rng_state = 20240229;  /* every run sees the same inputs */
    r->count = 0;
    check_gemm(r, nt);
    check_vmath(r, nt);
    check_reduce(r, nt);
    check_optim(r, nt);
    check_conv(r, nt);
    check_ctc(r, nt);
    check_rnn(r, nt);
    check_sr4(r, nt);
    check_exact(r, nt);
    check_dropout(r, nt);
}

int main(int argc, char **argv) {
    int isas[OM_ISA_COUNT], n_isas = 0;
    for (int i = 1; i < argc; i++) {
        int found = -1;
        for (int k = 0; k < OM_ISA_COUNT; k++)
            if (strcmp(argv[i], ISA_NAMES[k]) == 0) found = k;
        if (found < 0 || !om_isa_available(found)) {
            fprintf(stderr, "kernel_digest: path %s is not available in this build on this CPU\n",
                    argv[i]);
            return 2;
        }
        isas[n_isas++] = found;
    }
    for (int k = 0; k < OM_ISA_COUNT && argc == 1; k++)
        if (om_isa_available(k)) isas[n_isas++] = k;

    static run_t reference, run;
    int first = 1, mismatches = 0;
    printf("kernel_digest: %s, OpenMP %s\n", om_compiler(), OM_HAVE_OPENMP ? "on" : "off");
    for (int i = 0; i < n_isas; i++) {
        om_set_isa(isas[i]);
        for (size_t t = 0; t < sizeof THREADS / sizeof THREADS[0]; t++) {
            run_all(&run, THREADS[t]);
            if (first) {
                reference = run;
                for (int k = 0; k < run.count; k++)
                    printf("  %-32s %016llx\n", run.names[k], (unsigned long long)run.digests[k]);
                first = 0;
            }
            printf("%-7s %d thread%s  %016llx\n", ISA_NAMES[isas[i]], THREADS[t],
                   THREADS[t] > 1 ? "s" : " ", (unsigned long long)total(&run));
            for (int k = 0; k < run.count; k++) {
                if (run.digests[k] != reference.digests[k]) {
                    printf("  MISMATCH %s: %s at %d threads differs from %s at 1 thread\n",
                           run.names[k], ISA_NAMES[isas[i]], THREADS[t], ISA_NAMES[isas[0]]);
                    mismatches++;
                }
            }
        }
    }
    printf("digest %016llx\n", (unsigned long long)total(&reference));
    return mismatches ? 1 : 0;
}
