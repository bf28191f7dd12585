/* Convolution (im2col + packed products), max / average pooling and batch norm, float32, NCHW.
 *
 * Convolution, image by image. The column matrix of one image holds, for group g, a
 * (C/G·kh·kw) x (oh·ow) matrix: row (c, i, j) in that order, column (oy, ox) in that order, zero
 * where the tap falls in the padding. The products run on gemm.c's micro-kernels over operands
 * packed here (the weight once per call, the image's operands once per image), so each lands
 * in its final layout:
 *   forward   Y[n, g] (K/G x P)         = W[g] (K/G x C/G·kh·kw) · col[n, g]
 *   weight    dW[g] (K/G x C/G·kh·kw)   = sum over a chunk's images of dY[n, g] · col[n, g]^T
 *             (or its transpose, when a group has fewer taps than output channels)
 *   input     dcol[g] (C/G·kh·kw x P)   = W[g]^T · dY[n, g], then col2im into dx[n]
 * The weight gradient cuts the batch into chunks of nb images (nb from the shapes alone) whose
 * partial sums are added in chunk order. Scratch (column matrices, packed operands, partial
 * weight gradients) is allocated and freed here.
 *
 * Exact mode (engine.md section 4), association orders, fixed by the shapes alone:
 *   y[n,k,p]    = fma chain over (c, i, j) ascending from +0, then + b[k] (one add);
 *   dW[k,c,i,j] = ((D_0 + D_1) + D_2) + ...: D_t the fma chain from +0 over (n, p) ascending
 *                 within chunk t, the chunks added in order;
 *   dx[n,c,y,x] = float adds from +0 over the taps (i, j, oy, ox) ascending that read it, each
 *                 tap the fma chain over the output channels of the group ascending;
 *   db[k] and every per-channel sum of batch norm: double accumulators in 8 lanes; images in
 *                 ascending order, element e of an image's row of the channel going to lane
 *                 e mod 8; then the fixed tree (0+4, 1+5, 2+6, 3+7), (0+2, 1+3), 0+1, rounded
 *                 once to float.
 * Pooling: max over the window in row-major order, the first maximum kept (a NaN wins, as in
 * PyTorch); averages add the window row-major in float, then divide once. Backward passes of
 * pooling add into each input plane in output order. Batch norm's per-element arithmetic is
 * separate float multiplies and adds (no fused multiply-add outside the products). This file
 * has one path for every ISA: the micro-kernels are the only vectorised piece, exact on every
 * path.
 *
 * Threads take whole images (forward, input gradient) or whole chunks (weight gradient) when
 * there are at least as many as threads; otherwise the images or chunks run in order and
 * threads split the work inside each: rows of the column matrix, channel planes of the input
 * gradient, row panels of the products. Either way the arithmetic is the same. Elsewhere
 * threads split pooling planes and the channels of the bias gradient and of batch norm.
 */
#include "conv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "isa.h"

#if !OM_HAVE_OPENMP && defined(__GNUC__)
/* Thread counts feed only OpenMP pragmas, which a serial build ignores. */
#pragma GCC diagnostic ignored "-Wunused-variable"
#endif

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768
#define LANES 8

/* ---- fixed-order sums ------------------------------------------------------------------ */

static void lanes_add(double acc[LANES], const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (double)x[i + j];
    for (int j = 0; i + j < n; j++) acc[j] += (double)x[i + j];
}

static void lanes_add_sqdev(double acc[LANES], const float *x, int64_t n, double mean) {
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
static void lanes_add_prod(double acc[LANES], const float *g, const float *x, int64_t n,
                           double mean) {
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (double)g[i + j] * ((double)x[i + j] - mean);
    for (int j = 0; i + j < n; j++) acc[j] += (double)g[i + j] * ((double)x[i + j] - mean);
}

static double lanes_total(const double acc[LANES]) {
    double a = acc[0] + acc[4], b = acc[1] + acc[5], c = acc[2] + acc[6], d = acc[3] + acc[7];
    return (a + c) + (b + d);
}

/* ---- convolution ----------------------------------------------------------------------- */

/* The taps of every output fall inside the input padded by (ph, pw) on each side, so the
 * column matrix is read from a zero-padded copy of the image without any range test, and the
 * input gradient is accumulated into a padded plane whose border is then dropped. */
static int64_t padded_h(const om_conv2d_shape *s) { return s->h + 2 * s->ph; }
static int64_t padded_w(const om_conv2d_shape *s) { return s->w + 2 * s->pw; }

/* The C planes of one image, zero-padded. */
static void pad_image(const om_conv2d_shape *s, const float *x, float *pad, int nthreads) {
    const int64_t hp = padded_h(s), wp = padded_w(s);
    const int nt = om_threads_for(s->c * hp * wp, GRAIN, nthreads);
    int64_t c;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (c = 0; c < s->c; c++) {
        float *d = pad + c * hp * wp;
        memset(d, 0, (size_t)(s->ph * wp) * sizeof(float));
        for (int64_t y = 0; y < s->h; y++) {
            float *row = d + (y + s->ph) * wp;
            memset(row, 0, (size_t)s->pw * sizeof(float));
            memcpy(row + s->pw, x + (c * s->h + y) * s->w, (size_t)s->w * sizeof(float));
            memset(row + s->pw + s->w, 0, (size_t)s->pw * sizeof(float));
        }
        memset(d + (s->ph + s->h) * wp, 0, (size_t)(s->ph * wp) * sizeof(float));
    }
}

/* A run of outputs that are consecutive both in one output row (so their taps are `sw` apart
 * in the padded plane) and in one panel of a column-matrix layout. */
typedef struct {
    int64_t dst, src, len;   /* offset in the row's panel, offset of the first tap, length */
} run;

/* Where each row of the column matrix reads: the runs of the outputs for panels of `width`
 * outputs (pack_cols layout at depth `depth`; width = P, depth = 1 is the plain row-major
 * matrix), dst relative to the row's start and src to the row's tap; base[r] is the offset of
 * row r's tap (c, i, j) for output (0, 0) in the padded image. */
typedef struct {
    run *runs;
    int64_t nruns, *base;
} col_plan;

static void free_plan(col_plan *p) {
    free(p->runs);
    free(p->base);
    p->runs = NULL;
    p->base = NULL;
}

/* 0, or -1 when out of memory. */
static int make_plan(const om_conv2d_shape *s, int64_t width, int64_t depth, col_plan *p) {
    const int64_t P = s->oh * s->ow, hp = padded_h(s), wp = padded_w(s);
    const int64_t taps = s->kh * s->kw, rows = s->c * taps;
    /* A run ends at the end of an output row or of a panel. */
    p->runs = (run *)malloc((size_t)(s->oh + P / width + 1) * sizeof(run));
    p->base = (int64_t *)malloc((size_t)(rows > 0 ? rows : 1) * sizeof(int64_t));
    p->nruns = 0;
    if (!p->runs || !p->base) {
        free_plan(p);
        return -1;
    }
    for (int64_t pos = 0; pos < P; p->nruns++) {
        const int64_t oy = pos / s->ow, ox = pos % s->ow, q = pos / width, j = pos % width;
        const int64_t len = s->ow - ox < width - j ? s->ow - ox : width - j;
        p->runs[p->nruns] = (run){q * depth * width + j, oy * s->sh * wp + ox * s->sw, len};
        pos += len;
    }
    for (int64_t r = 0; r < rows; r++)
        p->base[r] = r / taps * hp * wp + r / s->kw % s->kh * s->dh * wp + r % s->kw * s->dw;
    return 0;
}

/* Runs are short (an output row, often 8 to 32 values): blocks of 4 compile to plain vector
 * moves, where a simple loop would become a call to memcpy per run. */
static inline void copy_run(float *restrict d, const float *restrict src, int64_t len) {
    int64_t e = 0;
    for (; e + 4 <= len; e += 4) {
        const float v0 = src[e], v1 = src[e + 1], v2 = src[e + 2], v3 = src[e + 3];
        d[e] = v0;
        d[e + 1] = v1;
        d[e + 2] = v2;
        d[e + 3] = v3;
    }
    for (int l = 0; l < 3 && e + l < len; l++) d[e + l] = src[e + l];
}

static inline void add_run(float *restrict d, const float *restrict v, int64_t len) {
    int64_t e = 0;
    for (; e + 4 <= len; e += 4)
        for (int l = 0; l < 4; l++) d[e + l] += v[e + l];
    for (; e < len; e++) d[e] += v[e];
}

/* Rows [r0, r1) of one image's column matrix from its padded planes, row r written at
 * dst + (r - r0) * row_step along the runs. Runs outer, rows inner: the run is read once and
 * the rows of a panel are written in order. Threads split the rows. */
static void gather_rows(const om_conv2d_shape *s, const float *pad, const col_plan *p,
                        int64_t r0, int64_t r1, float *dst, int64_t row_step, int nthreads) {
    const int64_t sw = s->sw;
    const int nt = om_threads_for((r1 - r0) * s->oh * s->ow, GRAIN, nthreads);
    int th;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (th = 0; th < nt; th++) {
        const int64_t a = r0 + (r1 - r0) * th / nt, e = r0 + (r1 - r0) * (th + 1) / nt;
        for (int64_t t = 0; t < p->nruns; t++) {
            const run rn = p->runs[t];
            for (int64_t r = a; r < e; r++) {
                float *d = dst + (r - r0) * row_step + rn.dst;
                const float *src = pad + p->base[r] + rn.src;
                if (sw == 1) {
                    copy_run(d, src, rn.len);
                } else {
                    for (int64_t k = 0; k < rn.len; k++) d[k] = src[k * sw];
                }
            }
        }
    }
}

/* One image's dx from its column-matrix gradient dcol (rows, P), row-major (a plan of width
 * P): each padded plane starts at +0 and adds its taps' values in row order (c, i, j), each
 * tap along its runs (a pixel gets at most one value per tap); the border is then dropped. */
static void scatter_rows(const om_conv2d_shape *s, const float *dcol, const col_plan *p,
                         float *pad, float *x, int nthreads) {
    const int64_t hp = padded_h(s), wp = padded_w(s), taps = s->kh * s->kw, sw = s->sw;
    const int64_t P = s->oh * s->ow;
    const int nt = om_threads_for(s->c * taps * P, GRAIN, nthreads);
    int64_t c;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (c = 0; c < s->c; c++) {
        float *plane = pad + c * hp * wp;
        memset(plane, 0, (size_t)(hp * wp) * sizeof(float));
        for (int64_t r = c * taps; r < (c + 1) * taps; r++) {
            float *base = pad + p->base[r];
            const float *g = dcol + r * P;
            for (int64_t t = 0; t < p->nruns; t++) {
                const run rn = p->runs[t];
                if (sw == 1) {
                    add_run(base + rn.src, g + rn.dst, rn.len);
                } else {
                    for (int64_t k = 0; k < rn.len; k++) base[rn.src + k * sw] += g[rn.dst + k];
                }
            }
        }
        for (int64_t y = 0; y < s->h; y++)
            memcpy(x + (c * s->h + y) * s->w, plane + (y + s->ph) * wp + s->pw,
                   (size_t)s->w * sizeof(float));
    }
}

/* Outputs o in [*lo, *hi) of a dimension of `out` whose tap o * stride + off lies in [0, in). */
static void valid_range(int64_t in, int64_t out, int64_t stride, int64_t off, int64_t *lo,
                        int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int64_t h = in - off <= 0 ? 0 : (in - off - 1) / stride + 1;
    if (h > out) h = out;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* With unit strides and as many output as input columns (a "same" convolution), the taps of
 * consecutive output rows are consecutive in the input: a tap's whole valid block is one run
 * of memory, broken only by the few columns that fall in the padding (the gaps). */
static int flat_rows(const om_conv2d_shape *s) {
    return s->sh == 1 && s->sw == 1 && s->w == s->ow;
}

/* scatter_rows() for flat_rows() shapes, straight into x: each tap adds its whole valid block
 * as one run, its gaps (taps in the padding, whose gradient is dropped) zeroed in dcol first.
 * The sum starts at +0 and so never holds -0: adding +0 changes no bit, and every pixel gets
 * the same values in the same order as from scatter_rows(). */
static void scatter_flat(const om_conv2d_shape *s, float *dcol, float *x, int nthreads) {
    const int64_t taps = s->kh * s->kw, P = s->oh * s->ow;
    const int nt = om_threads_for(s->c * taps * P, GRAIN, nthreads);
    int64_t c;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (c = 0; c < s->c; c++) {
        float *plane = x + c * s->h * s->w;
        memset(plane, 0, (size_t)(s->h * s->w) * sizeof(float));
        for (int64_t tap = 0; tap < taps; tap++) {
            const int64_t offy = tap / s->kw * s->dh - s->ph, offx = tap % s->kw * s->dw - s->pw;
            int64_t y0, y1, x0, x1;
            valid_range(s->h, s->oh, 1, offy, &y0, &y1);
            valid_range(s->w, s->ow, 1, offx, &x0, &x1);
            if (y0 >= y1 || x0 >= x1) continue;
            float *g = dcol + (c * taps + tap) * P;
            for (int64_t oy = y0; oy + 1 < y1; oy++)
                for (int64_t ox = x1; ox < s->ow + x0; ox++) g[oy * s->ow + ox] = 0.0f;
            const int64_t start = y0 * s->ow + x0, len = (y1 - y0 - 1) * s->ow + (x1 - x0);
            add_run(plane + (offy * s->w + offx + start), g + start, len);
        }
    }
}

/* 64-byte aligned scratch (the micro-kernels load packed panels with aligned loads); NULL when
 * it could not be allocated. Freed with release(). */
static void *scratch_bytes(size_t bytes) {
    void *raw = malloc(bytes + 64 + sizeof(void *));
    if (!raw) return NULL;
    uintptr_t p = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)p)[-1] = raw;
    return (void *)p;
}

static float *scratch(int64_t count) {
    return (float *)scratch_bytes((size_t)(count > 0 ? count : 1) * sizeof(float));
}

static void release(void *p) {
    if (p) free(((void **)p)[-1]);
}

static int64_t round_up(int64_t v, int64_t q) { return (v + q - 1) / q * q; }

/* The micro-kernels of gemm.c, one per path (gemm.h). */
static const om_gemm_ukernel *(*const ukernels[OM_ISA_COUNT])(void) =
    OM_ISA_TABLE(om_gemm_ukernel_f32);

/* Below this many fused multiply-adds per thread, one thread is faster. */
#define GRAIN_FMAS (1 << 20)
/* Columns of b per block of product(): a KC x NC block of b (1 MB) stays in L2. */
#define NC 1024

/* Panels of `width` columns of the depth x cols matrix src (row stride rs): panel q holds, for
 * each k < depth in turn, src[k][q·width .. q·width + width), zero past the last column. */
static void pack_cols(int width, int64_t depth, int64_t cols, const float *src, int64_t rs,
                      float *dst) {
    for (int64_t j0 = 0; j0 < cols; j0 += width, dst += depth * width) {
        const int64_t w = cols - j0 < width ? cols - j0 : width;
        for (int64_t k = 0; k < depth; k++) {
            float *d = dst + k * width;
            memcpy(d, src + k * rs + j0, (size_t)w * sizeof(float));
            for (int64_t j = w; j < width; j++) d[j] = 0.0f;
        }
    }
}

/* Panels of `width` rows of the rows x depth matrix src (row stride rs): panel q holds, for
 * each k < depth in turn, column k of rows [q·width, q·width + width), zero past the last row.
 * The transposes run 16 rows at a time through the path's packing step. */
static void pack_rows(const om_gemm_ukernel *u, int width, int64_t depth, int64_t rows,
                      const float *src, int64_t rs, float *dst) {
    for (int64_t i0 = 0; i0 < rows; i0 += width, dst += depth * width) {
        const int h = rows - i0 < width ? (int)(rows - i0) : width;
        for (int i = 0; i < h; i += 16)
            u->transpose(depth, h - i < 16 ? h - i : 16, src + (i0 + i) * rs, rs, dst + i, width);
        for (int64_t k = 0; k < depth && h < width; k++)
            for (int i = h; i < width; i++) dst[k * width + i] = 0.0f;
    }
}

/* c (m x n, row stride ldc) = a · b, or c += a · b with accumulate, a packed by pack_rows in
 * panels of mr rows and b by pack_cols in panels of nr columns, both over depth d. Each element
 * is the micro-kernel's fma chain over k ascending, from +0 or continued from the stored value:
 * blocking the depth by OM_GEMM_KC (an A block stays in L1 while a block of B stays in L2)
 * changes no bit. Threads split the row panels of a. */
static void product(const om_gemm_ukernel *u, int64_t m, int64_t n, int64_t d, const float *a,
                    const float *b, float *c, int64_t ldc, int accumulate, int nthreads) {
    const int mr = u->mr, nr = u->nr;
    const int64_t panels = (m + mr - 1) / mr;
    if (d == 0) {
        for (int64_t i = 0; i < m && !accumulate; i++)
            memset(c + i * ldc, 0, (size_t)n * sizeof(float));
        return;
    }
    const int nt = om_threads_for(m * n * d, GRAIN_FMAS, nthreads);
    int t;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (t = 0; t < nt; t++) {
        OM_ALIGNED(64) float edge[16 * 64];   /* one tile, mr * nr <= 1024 */
        const int64_t q0 = panels * t / nt, q1 = panels * (t + 1) / nt;
        for (int64_t jb = 0; jb < n; jb += NC)
            for (int64_t k0 = 0; k0 < d; k0 += OM_GEMM_KC) {
                const int64_t kc = d - k0 < OM_GEMM_KC ? d - k0 : OM_GEMM_KC;
                const int64_t je = n - jb < NC ? n : jb + NC;
                const int acc = accumulate || k0 > 0;
                for (int64_t q = q0; q < q1; q++) {
                    const int64_t i0 = q * mr, h = m - i0 < mr ? m - i0 : mr;
                    const float *ap = a + i0 * d + k0 * mr;
                    for (int64_t j0 = jb; j0 < je; j0 += nr) {
                        const int64_t w = je - j0 < nr ? je - j0 : nr;
                        const float *bp = b + j0 * d + k0 * nr;
                        float *ct = c + i0 * ldc + j0;
                        if (h == mr && w == nr) {
                            u->kernel(kc, ap, bp, ct, ldc, acc);
                            continue;
                        }
                        const size_t row_bytes = (size_t)w * sizeof(float);
                        for (int64_t i = 0; i < h && acc; i++)
                            memcpy(edge + i * nr, ct + i * ldc, row_bytes);
                        u->kernel(kc, ap, bp, edge, nr, acc);
                        for (int64_t i = 0; i < h; i++)
                            memcpy(ct + i * ldc, edge + i * nr, row_bytes);
                    }
                }
            }
    }
}

/* Images per chunk of the weight gradient: at most CHUNK_FLOATS of column matrix and, when the
 * batch allows, at least MIN_CHUNKS chunks so that threads can take whole chunks. A function
 * of the shapes alone: the chunked weight-gradient sum is the same at every thread count. */
#define CHUNK_FLOATS (1 << 19)
#define MIN_CHUNKS 8
/* Threads take whole chunks only while the chunks' partial weight gradients, kept until they
 * are added in order, stay below this many floats. */
#define PARTS_FLOATS (1 << 22)

static int64_t chunk_images(const om_conv2d_shape *s) {
    const int64_t per_image = s->c * s->kh * s->kw * s->oh * s->ow;
    const int64_t most = (s->n + MIN_CHUNKS - 1) / MIN_CHUNKS;
    int64_t nb = per_image > 0 ? CHUNK_FLOATS / per_image : most;
    if (nb > most) nb = most;
    return nb < 1 ? 1 : nb;
}

/* Threads over whole jobs (images, or chunks of images; each job then runs on one thread) when
 * there are enough; otherwise the jobs run in order, each on every thread. Either way every
 * job does the same arithmetic, so the choice changes no bit. */
static int outer_threads(int64_t jobs, int nthreads) {
    return jobs >= nthreads ? nthreads : 1;
}

int om_conv2d_forward_f32(const om_conv2d_shape *s, const float *x, const float *w,
                          const float *b, float *y, int nthreads) {
    const om_gemm_ukernel *u = ukernels[om_isa]();
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, wpanel = round_up(kg, u->mr) * rg;
    if (s->n * s->k * P == 0) return 0;
    col_plan plan;
    float *wp = scratch(G * wpanel);
    int failed = make_plan(s, u->nr, rg, &plan) != 0 || !wp;
    for (int64_t g = 0; g < G && !failed; g++)
        pack_rows(u, u->mr, rg, kg, w + g * kg * rg, rg, wp + g * wpanel);
    const int outer = outer_threads(s->n, nthreads), inner = outer > 1 ? 1 : nthreads;
    const int setup_failed = failed;
    #pragma omp parallel num_threads(outer) if (outer > 1) reduction(|: failed)
    {
        float *pad = scratch(s->c * padded_h(s) * padded_w(s));
        float *cp = scratch(rg * round_up(P, u->nr));
        /* The runs never write the last panel's columns past P: zero once. */
        if (cp) memset(cp, 0, (size_t)(rg * round_up(P, u->nr)) * sizeof(float));
        int64_t img;
        #pragma omp for schedule(static)
        for (img = 0; img < s->n; img++) {
            if (setup_failed || failed || !pad || !cp) {
                failed = 1;
                continue;
            }
            float *yi = y + img * s->k * P;
            pad_image(s, x + img * s->c * s->h * s->w, pad, inner);
            for (int64_t g = 0; g < G; g++) {
                gather_rows(s, pad, &plan, g * rg, (g + 1) * rg, cp, u->nr, inner);
                product(u, kg, P, rg, wp + g * wpanel, cp, yi + g * kg * P, P, 0, inner);
            }
            for (int64_t k = 0; k < s->k && b; k++)
                for (int64_t t = 0; t < P; t++) yi[k * P + t] += b[k];
        }
        release(pad);
        release(cp);
    }
    release(wp);
    free_plan(&plan);
    return failed ? -1 : 0;
}

/* The weight gradient is computed as dW^T = col · dY^T, with the output channels along the
 * micro-kernel's vectorised columns, when a group has fewer taps than output channels (a first
 * layer: C·kh·kw = 9 or 27 makes poor vector rows), else as dW = dY · col^T, which lands in
 * gw's layout. fma is symmetric in its factors: both give the same chains, the same bits. */
static int taps_along_vectors(const om_conv2d_shape *s) {
    return s->c * s->kh * s->kw >= s->k;
}

/* Rows of a panel-packed copy of `rows` rows, for panels of mr or of nr rows. */
static int64_t panel_rows(const om_gemm_ukernel *u, int64_t rows) {
    const int64_t a = round_up(rows, u->mr), b = round_up(rows, u->nr);
    return a > b ? a : b;
}

/* The weight gradient of the images [n0, n0 + m) into part, group by group dW (K/G,
 * C/G·kh·kw) or dW^T (taps_along_vectors()): one fma chain per element over (image, position)
 * ascending, from +0 for the first image and continued through part for the next. */
static void weight_part(const om_gemm_ukernel *u, const om_conv2d_shape *s, const float *x,
                        const float *gy, const col_plan *plan, int64_t n0, int64_t m,
                        float *part, float *pad, float *col, float *cp, float *gp,
                        int nthreads) {
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G;
    const int along = taps_along_vectors(s);
    for (int64_t img = n0; img < n0 + m; img++) {
        pad_image(s, x + img * s->c * s->h * s->w, pad, nthreads);
        gather_rows(s, pad, plan, 0, rows, col, P, nthreads);
        for (int64_t g = 0; g < G; g++) {
            const float *cg = col + g * rg * P, *gyg = gy + (img * s->k + g * kg) * P;
            pack_rows(u, along ? u->nr : u->mr, P, rg, cg, P, cp);
            pack_rows(u, along ? u->mr : u->nr, P, kg, gyg, P, gp);
            if (along)
                product(u, kg, rg, P, gp, cp, part + g * kg * rg, rg, img > n0, nthreads);
            else
                product(u, rg, kg, P, cp, gp, part + g * rg * kg, kg, img > n0, nthreads);
        }
    }
}

/* gw = the summed parts, transposed group by group from (G, C/G·kh·kw, K/G) unless already
 * in gw's layout. */
static void store_weight(const om_conv2d_shape *s, const float *sum, float *gw) {
    const int64_t G = s->groups, kg = s->k / G, rg = s->c * s->kh * s->kw / G;
    if (taps_along_vectors(s)) {
        memcpy(gw, sum, (size_t)(s->k * rg) * sizeof(float));
        return;
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t k = 0; k < kg; k++)
            for (int64_t r = 0; r < rg; r++) gw[(g * kg + k) * rg + r] = sum[(g * rg + r) * kg + k];
}

static void add_into(float *restrict sum, const float *restrict part, int64_t size) {
    for (int64_t e = 0; e < size; e++) sum[e] += part[e];
}

static int weight_gradient(const om_gemm_ukernel *u, const om_conv2d_shape *s, const float *x,
                           const float *gy, float *gw, int nthreads) {
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow, nb = chunk_images(s);
    const int64_t G = s->groups, kg = s->k / G, rg = rows / G;
    const int64_t wsize = s->k * rg, nchunks = (s->n + nb - 1) / nb;
    int outer = outer_threads(nchunks, nthreads);
    if (nchunks * wsize > PARTS_FLOATS) outer = 1;
    const int inner = outer > 1 ? 1 : nthreads;
    /* The chunks' partial sums go to parts[t] when threads take chunks (added in chunk order
     * afterwards), else chunk 0 to parts[0] and each later one to parts[1], added to parts[0]
     * as it finishes. The total goes to gw once. */
    col_plan plan;
    float *parts = scratch((outer > 1 ? nchunks : 2) * wsize);
    int failed = make_plan(s, P, 1, &plan) != 0 || !parts;
    const int setup_failed = failed;
    #pragma omp parallel num_threads(outer) if (outer > 1) reduction(|: failed)
    {
        float *pad = scratch(s->c * padded_h(s) * padded_w(s)), *col = scratch(rows * P);
        float *cp = scratch(panel_rows(u, rg) * P), *gp = scratch(panel_rows(u, kg) * P);
        int64_t t;
        #pragma omp for schedule(static)
        for (t = 0; t < nchunks; t++) {
            const int64_t n0 = t * nb, m = s->n - n0 < nb ? s->n - n0 : nb;
            if (setup_failed || failed || !pad || !col || !cp || !gp) {
                failed = 1;
                continue;
            }
            float *part = parts + (outer > 1 ? t : t > 0) * wsize;
            weight_part(u, s, x, gy, &plan, n0, m, part, pad, col, cp, gp, inner);
            if (outer == 1 && t > 0) add_into(parts, part, wsize);
        }
        release(pad);
        release(col);
        release(cp);
        release(gp);
    }
    for (int64_t t = 1; outer > 1 && !failed && t < nchunks; t++)
        add_into(parts, parts + t * wsize, wsize);
    if (!failed) store_weight(s, parts, gw);
    release(parts);
    free_plan(&plan);
    return failed ? -1 : 0;
}

/* dx image by image: dcol[g] = W[g]^T · dY[g] (each element the fma chain over the group's
 * output channels), then scattered into the image's planes. */
static int input_gradient(const om_gemm_ukernel *u, const om_conv2d_shape *s, const float *w,
                          const float *gy, float *gx, int nthreads) {
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, wpanel = round_up(rg, u->mr) * kg;
    col_plan plan;
    float *wt = scratch(G * wpanel);
    int failed = make_plan(s, P, 1, &plan) != 0 || !wt;
    for (int64_t g = 0; g < G && !failed; g++)
        pack_cols(u->mr, kg, rg, w + g * kg * rg, rg, wt + g * wpanel);
    const int outer = outer_threads(s->n, nthreads), inner = outer > 1 ? 1 : nthreads;
    const int setup_failed = failed;
    #pragma omp parallel num_threads(outer) if (outer > 1) reduction(|: failed)
    {
        float *pad = scratch(s->c * padded_h(s) * padded_w(s)), *dcol = scratch(rows * P);
        float *gp = scratch(kg * round_up(P, u->nr));
        int64_t img;
        #pragma omp for schedule(static)
        for (img = 0; img < s->n; img++) {
            if (setup_failed || failed || !pad || !dcol || !gp) {
                failed = 1;
                continue;
            }
            for (int64_t g = 0; g < G; g++) {
                pack_cols(u->nr, kg, P, gy + (img * s->k + g * kg) * P, P, gp);
                product(u, rg, P, kg, wt + g * wpanel, gp, dcol + g * rg * P, P, 0, inner);
            }
            if (flat_rows(s))
                scatter_flat(s, dcol, gx + img * s->c * s->h * s->w, inner);
            else
                scatter_rows(s, dcol, &plan, pad, gx + img * s->c * s->h * s->w, inner);
        }
        release(pad);
        release(dcol);
        release(gp);
    }
    release(wt);
    free_plan(&plan);
    return failed ? -1 : 0;
}

int om_conv2d_backward_f32(const om_conv2d_shape *s, const float *x, const float *w,
                           const float *gy, float *gx, float *gw, float *gb, int nthreads) {
    const om_gemm_ukernel *u = ukernels[om_isa]();
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    if (gb) {
        const int nt = om_threads_for(s->k * s->n * P, GRAIN, nthreads);
        int64_t k;
        #pragma omp parallel for schedule(static) num_threads(nt)
        for (k = 0; k < s->k; k++) {
            double acc[LANES] = {0};
            for (int64_t i = 0; i < s->n; i++) lanes_add(acc, gy + (i * s->k + k) * P, P);
            gb[k] = (float)lanes_total(acc);
        }
    }
    if (s->n * P == 0) {
        if (gw) memset(gw, 0, (size_t)(s->k * (rows / s->groups)) * sizeof(float));
        if (gx) memset(gx, 0, (size_t)(s->n * s->c * s->h * s->w) * sizeof(float));
        return 0;
    }
    int status = gw ? weight_gradient(u, s, x, gy, gw, nthreads) : 0;
    if (gx && status == 0) status = input_gradient(u, s, w, gy, gx, nthreads);
    return status;
}

/* ---- pooling --------------------------------------------------------------------------- */

void om_max_pool2d_f32(const om_pool_windows *p, const float *x, float *y, int64_t *idx,
                       int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * out * 4, GRAIN, nthreads);
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
        const float *plane = x + pl * in;
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                int64_t best_at = p->hs[i] * p->w + p->ws[j];
                float best = -INFINITY;
                for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c++) {
                        const float v = plane[r * p->w + c];
                        if (v > best || isnan(v)) {
                            best = v;
                            best_at = r * p->w + c;
                        }
                    }
                y[pl * out + i * p->ow + j] = best;
                idx[pl * out + i * p->ow + j] = best_at;
            }
    }
}

void om_max_pool2d_backward_f32(const om_pool_windows *p, const float *gy, const int64_t *idx,
                                float *gx, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * (in + out), GRAIN, nthreads);
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
        float *plane = gx + pl * in;
        memset(plane, 0, (size_t)in * sizeof(float));
        for (int64_t o = 0; o < out; o++) plane[idx[pl * out + o]] += gy[pl * out + o];
    }
}

void om_avg_pool2d_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                       const float *x, float *y, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * out * 4, GRAIN, nthreads);
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
        const float *plane = x + pl * in;
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                float sum = 0.0f;
                for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c++) sum += plane[r * p->w + c];
                y[pl * out + i * p->ow + j] = sum / (float)(dh[i] * dw[j]);
            }
    }
}

void om_avg_pool2d_backward_f32(const om_pool_windows *p, const int64_t *dh, const int64_t *dw,
                                const float *gy, float *gx, int nthreads) {
    const int64_t in = p->h * p->w, out = p->oh * p->ow;
    const int nt = om_threads_for(p->planes * (in + out * 4), GRAIN, nthreads);
    int64_t pl;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (pl = 0; pl < p->planes; pl++) {
        float *plane = gx + pl * in;
        memset(plane, 0, (size_t)in * sizeof(float));
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++) {
                const float g = gy[pl * out + i * p->ow + j] / (float)(dh[i] * dw[j]);
                for (int64_t r = p->hs[i]; r < p->he[i]; r++)
                    for (int64_t c = p->ws[j]; c < p->we[j]; c++) plane[r * p->w + c] += g;
            }
    }
}

/* ---- batch norm ------------------------------------------------------------------------ */

void om_batch_norm_stats_f32(const float *x, int64_t n, int64_t c, int64_t s, double eps,
                             float *mean, float *var, float *var_unbiased, float *invstd,
                             int nthreads) {
    const double count = (double)(n * s);
    const int nt = om_threads_for(n * c * s * 2, GRAIN, nthreads);
    int64_t ch;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (ch = 0; ch < c; ch++) {
        double acc[LANES] = {0};
        for (int64_t i = 0; i < n; i++) lanes_add(acc, x + (i * c + ch) * s, s);
        const double m = lanes_total(acc) / count;
        double dev[LANES] = {0};
        for (int64_t i = 0; i < n; i++) lanes_add_sqdev(dev, x + (i * c + ch) * s, s, m);
        const double ss = lanes_total(dev), v = ss / count;
        mean[ch] = (float)m;
        var[ch] = (float)v;
        var_unbiased[ch] = count > 1.0 ? (float)(ss / (count - 1.0)) : INFINITY;
        invstd[ch] = (float)(1.0 / sqrt(v + eps));
    }
}

void om_batch_norm_apply_f32(const float *x, const float *mean, const float *invstd,
                             const float *w, const float *b, float *y, int64_t n, int64_t c,
                             int64_t s, int nthreads) {
    const int nt = om_threads_for(n * c * s, GRAIN, nthreads);
    int64_t row;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (row = 0; row < n * c; row++) {
        const int64_t ch = row % c;
        const float m = mean[ch], scale = invstd[ch] * w[ch], shift = b[ch];
        const float *src = x + row * s;
        float *dst = y + row * s;
        for (int64_t t = 0; t < s; t++) dst[t] = (src[t] - m) * scale + shift;
    }
}

void om_batch_norm_backward_f32(const float *x, const float *gy, const float *mean,
                                const float *invstd, const float *w, float *gx, float *gw,
                                float *gb, int64_t n, int64_t c, int64_t s, int batch_stats,
                                int nthreads) {
    const double count = (double)(n * s);
    const int nt = om_threads_for(n * c * s * 2, GRAIN, nthreads);
    int64_t ch;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (ch = 0; ch < c; ch++) {
        const double m = (double)mean[ch], is = (double)invstd[ch];
        double sg[LANES] = {0}, sgx[LANES] = {0};
        for (int64_t i = 0; i < n; i++) {
            lanes_add(sg, gy + (i * c + ch) * s, s);
            lanes_add_prod(sgx, gy + (i * c + ch) * s, x + (i * c + ch) * s, s, m);
        }
        const double sum_g = lanes_total(sg), sum_gx = lanes_total(sgx);
        if (gb) gb[ch] = (float)sum_g;
        if (gw) gw[ch] = (float)(sum_gx * is);
        if (!gx) continue;
        /* PyTorch's formula: dx = (g - mean(g) - (x - mean) * invstd^2 * mean(g (x - mean)))
         * * invstd * w; without batch statistics only the last factor remains. */
        const float fm = mean[ch], scale = invstd[ch] * w[ch];
        const float mg = batch_stats ? (float)(sum_g / count) : 0.0f;
        const float k = batch_stats ? (float)(sum_gx / count * is * is) : 0.0f;
        for (int64_t i = 0; i < n; i++) {
            const float *g = gy + (i * c + ch) * s, *xs = x + (i * c + ch) * s;
            float *d = gx + (i * c + ch) * s;
            if (batch_stats) {
                for (int64_t t = 0; t < s; t++) d[t] = ((g[t] - mg) - (xs[t] - fm) * k) * scale;
            } else {
                for (int64_t t = 0; t < s; t++) d[t] = g[t] * scale;
            }
        }
    }
}
