/* Convolution (im2col + packed products), float32, NCHW (pooling: pool.c; batch norm:
 * batch_norm.c).
 *
 * Convolution. The column matrix of one image holds, for group g, a (C/G·kh·kw) x (oh·ow)
 * matrix: row (c, i, j) in that order, column (oy, ox) in that order, zero where the tap falls
 * in the padding. It is read from a copy of the images: zero-padded planes in general; for
 * "same" convolutions with unit strides (flat_rows()), the planes with zero margins, where a
 * row of the column matrix is one shifted run of its plane and a mask zeroes the taps that
 * fall in the padding columns. The products are gemm.c's products of panels (om_gemm_panels,
 * om_gemm_finish_panels) over operands packed here (the weight once per call, the images'
 * operands once per batch), into a segmented output, so each lands in its final layout:
 *   forward   Y[n, g] (K/G x P)         = W[g] (K/G x C/G·kh·kw) · col[n, g], one product over
 *             the columns (n, position) of a batch of images, col gathered one panel of
 *             columns at a time into L1 for every row panel of W, tiles scattered to each
 *             image;
 *   weight    dW[g] (K/G x C/G·kh·kw)   = sum over a chunk's images of dY[n, g] · col[n, g]^T
 *             (or its transpose, when a group has fewer taps than output channels); for
 *             flat_rows() shapes with 8 or more channels per group col is packed straight
 *             from the source, its rows in the order (tap, channel), put back in order
 *             (c, i, j) at the end;
 *   input     dcol[g] (C/G·kh·kw x P)   = W[g]^T · dY[n, g], over the columns of a batch as in
 *             the forward pass, then col2im into dx[n]: for flat_rows() shapes each pixel's
 *             taps summed in registers from dcol rows set apart by zero margins.
 * The weight gradient cuts the batch into chunks of nb images (nb from the shapes alone) whose
 * partial sums are added in chunk order. Scratch (column matrices, packed operands, partial
 * weight gradients) is allocated and freed here.
 *
 * Exact mode (docs/spec/engine.md section 4), association orders, fixed by the shapes alone:
 *   y[n,k,p]    = fma chain over (c, i, j) ascending from +0, then + b[k] (one add);
 *   dW[k,c,i,j] = ((D_0 + D_1) + D_2) + ...: D_t the fma chain from +0 over (n, p) ascending
 *                 within chunk t, the chunks added in order;
 *   dx[n,c,y,x] = float adds from +0 over the taps (i, j, oy, ox) ascending that read it, each
 *                 tap the fma chain over the output channels of the group ascending;
 *   db[k]       = the lane sum of lane_sums.h over the images in ascending order, rounded
 *                 once to float.
 * Under autocast the operands are rounded as they are packed (x as the images are loaded, w and
 * dY in their panels) and each fma chain is the float32 one of the rounded values; bfloat16
 * chains follow the dot-product instruction's rule as every bfloat16 product does (gemm.c: each
 * chain of depth d padded with a zero when d is odd, tiny sums flushed), and run the
 * instruction where the CPU has it.
 * Besides gemm.c's products, only the masked copies of the forward gather and the input
 * gradient's tap sums have one function per path (conv_impl.h: copies, bit masks and adds in
 * the stated order); the rest of this file is one path for every ISA, its compiler-vectorised
 * loops elementwise.
 *
 * Threads take whole batches (forward, input gradient) or whole chunks (weight gradient) when
 * there are at least as many as threads; otherwise they run in order and threads split the
 * work inside each: column panels of the forward product, rows of the column matrix, channel
 * planes of the input gradient, row panels of the other products. Either way the arithmetic
 * is the same. Threads split the channels of the bias gradient.
 */
#include "conv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_impl.h"
#include "gemm.h"
#include "isa.h"
#include "lane_sums.h"

/* Below this many elements per thread, one thread is faster. */
#define GRAIN 32768

/* ---- convolution ----------------------------------------------------------------------- */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t v, int64_t q) { return (v + q - 1) / q * q; }

/* Aligned scratch of count floats (om_aligned_alloc); NULL when it could not be allocated.
 * Freed with om_aligned_free(). */
static float *scratch(int64_t count) {
    return (float *)om_aligned_alloc((size_t)(count > 0 ? count : 1) * sizeof(float));
}

/* Scratch whose every float starts at +0 (margins and panel tails that are never written). */
static float *zeroed_scratch(int64_t count) {
    float *p = scratch(count);
    if (p) memset(p, 0, (size_t)(count > 0 ? count : 1) * sizeof(float));
    return p;
}

static int64_t padded_h(const om_conv2d_shape *s) { return s->h + 2 * s->ph; }
static int64_t padded_w(const om_conv2d_shape *s) { return s->w + 2 * s->pw; }

/* With unit strides and as many output as input columns (a "same" convolution, the common
 * case), the taps of consecutive output rows are consecutive in the input plane: tap t of
 * output q = oy·ow + ox reads plane element q + tap_shift(t), wherever that falls. */
static int flat_rows(const om_conv2d_shape *s) {
    return s->sh == 1 && s->sw == 1 && s->w == s->ow;
}

static int64_t tap_shift(const om_conv2d_shape *s, int64_t tap) {
    return (tap / s->kw * s->dh - s->ph) * s->w + tap % s->kw * s->dw - s->pw;
}

/* Zeros around each plane for flat_rows() shapes: the forward pass reads plane[q + shift]
 * for q < P and must find zeros outside [0, h·w); the input gradient reads dcol row
 * [f - shift] for f < h·w and must find zeros outside [0, P). */
static int64_t flat_margin(const om_conv2d_shape *s) {
    const int64_t P = s->oh * s->ow, hw = s->h * s->w;
    int64_t m = 0;
    for (int64_t t = 0; t < s->kh * s->kw; t++) {
        const int64_t sh = tap_shift(s, t), need[4] = {sh, -sh, hw - P - sh, P - hw + sh};
        for (int e = 0; e < 4; e++) m = need[e] > m ? need[e] : m;
    }
    return m;
}

/* Where the column matrix is read from, for a batch of images. General shapes: each plane
 * zero-padded by (ph, pw), so every tap lies inside it and an output row's taps are a run of
 * ow values sw apart. flat_rows() shapes: the planes as they are, `margin` zeros before the
 * first and after each: a row of the column matrix is one run of its plane, the taps in the
 * padding rows land in the margins, and those in the padding columns (which land in a
 * neighbouring row) are masked to zero. */
typedef struct {
    int flat;
    int64_t margin, plane, image, size;   /* plane and image strides; floats for the batch */
} layout;

static layout source_layout(const om_conv2d_shape *s, int64_t nb) {
    layout l;
    l.flat = flat_rows(s);
    l.margin = l.flat ? flat_margin(s) : 0;
    l.plane = l.flat ? s->h * s->w + l.margin : padded_h(s) * padded_w(s);
    l.image = s->c * l.plane;
    l.size = l.margin + nb * l.image;
    return l;
}

/* n values of x from element e on into dst: copied, or under autocast rounded (their bits
 * into s->x_save) or widened from the bits x holds (conv.h). */
static void load_run(const om_conv2d_shape *s, const void *x, int64_t e, int64_t n, float *dst) {
    const int rounding = s->half == 1 ? OM_F32_TO_BF16 : OM_F32_TO_F16;
    om_gemm_load(x, !s->half ? OM_F32 : s->x_bits ? rounding + (OM_BF16 - OM_F32_TO_BF16)
                                                  : rounding, e, 1, n, 0, dst, s->x_save);
}

/* Masks of the taps' columns: keep[j·count + e] = -1 when tap column j of element e lies
 * inside, else 0 (in the padding). For the outputs q < P of the forward pass (dir = 1: the tap
 * reads input column q mod ow + j·dw - pw) or the pixels f < h·w of the input gradient
 * (dir = -1: pixel f gets output column f mod w - (j·dw - pw)). NULL when out of memory. */
static int32_t *column_masks(const om_conv2d_shape *s, int dir) {
    const int64_t count = dir > 0 ? s->oh * s->ow : s->h * s->w, period = dir > 0 ? s->ow : s->w;
    const int64_t limit = dir > 0 ? s->w : s->ow;
    int32_t *keep = (int32_t *)malloc((size_t)(s->kw * count > 0 ? s->kw * count : 1) *
                                      sizeof(int32_t));
    for (int64_t j = 0; keep && j < s->kw; j++)
        for (int64_t e = 0; e < count; e++) {
            const int64_t col = e % period + dir * (j * s->dw - s->pw);
            keep[j * count + e] = col >= 0 && col < limit ? -1 : 0;
        }
    return keep;
}

/* A run of outputs that are consecutive in one image, in one panel of a column-matrix layout
 * and (general shapes) in one output row, so that their taps are consecutive (sw apart). */
typedef struct {
    int64_t dst, src, pos, q, len;   /* offset in the row's panels, offset of the first tap
                                        from the row's base, position among the batch's
                                        outputs and in its image */
} run;

/* Where each row of the column matrix of a batch of images reads: the runs of the outputs
 * for panels of `width` outputs (pack_cols layout at depth `depth`; width = P, depth = 1 is
 * the plain row-major matrix of one image), in position order; base[r] is the offset of row
 * r's tap (c, i, j) for the first image's output (0, 0) in the source; keep the flat layout's
 * column masks. */
typedef struct {
    run *runs;
    int64_t nruns, *base;
    int32_t *keep;
} col_plan;

static void free_plan(col_plan *p) {
    free(p->runs);
    free(p->base);
    free(p->keep);
    p->runs = NULL;
    p->base = NULL;
    p->keep = NULL;
}

/* The arguments of the loops below over planes, rows or channels, for the threads' shares
 * (each loop's function names what it reads). */
typedef struct {
    const om_conv2d_shape *s;
    const layout *l;
    const col_plan *p;
    const void *x;
    const float *src;
    float *dst, *pad;
    const int64_t *off;
    const int32_t *keep;
    int64_t n0, r0, npos, ld;
} conv_job;

/* Planes [begin, end) of the images from n0 on of x into dst (layout l). */
static void load_planes(const void *ctx, int64_t begin, int64_t end) {
    const conv_job *a = ctx;
    const om_conv2d_shape *s = a->s;
    const int64_t hw = s->h * s->w, wp = padded_w(s);
    for (int64_t pl = begin; pl < end; pl++) {
        float *d = a->dst + a->l->margin + pl * a->l->plane;
        const int64_t xp = (a->n0 * s->c + pl) * hw;
        if (a->l->flat) {
            load_run(s, a->x, xp, hw, d);
            continue;
        }
        memset(d, 0, (size_t)(s->ph * wp) * sizeof(float));
        for (int64_t y = 0; y < s->h; y++) {
            float *row = d + (y + s->ph) * wp;
            memset(row, 0, (size_t)s->pw * sizeof(float));
            load_run(s, a->x, xp + y * s->w, s->w, row + s->pw);
            memset(row + s->pw + s->w, 0, (size_t)s->pw * sizeof(float));
        }
        memset(d + (s->ph + s->h) * wp, 0, (size_t)(s->ph * wp) * sizeof(float));
    }
}

/* Images [n0, n0 + m) of x into src (layout l, its margins zero since allocation). */
static void load_images(const om_conv2d_shape *s, const layout *l, const void *x, int64_t n0,
                        int64_t m, float *src, int nthreads) {
    const conv_job a = {.s = s, .l = l, .x = x, .dst = src, .n0 = n0};
    om_run_range(om_threads_for(m * s->c * l->plane, GRAIN, nthreads), m * s->c, load_planes,
                 &a);
}

/* 0, or -1 when out of memory. */
static int make_plan(const om_conv2d_shape *s, const layout *l, int64_t nb, int64_t width,
                     int64_t depth, col_plan *p) {
    const int64_t P = s->oh * s->ow, wp = padded_w(s), total = nb * P;
    const int64_t taps = s->kh * s->kw, rows = s->c * taps;
    /* A run ends at the end of an image, of a panel or (general shapes) of an output row. */
    p->runs = (run *)malloc((size_t)(nb * (s->oh + 1) + total / width + 1) * sizeof(run));
    p->base = (int64_t *)malloc((size_t)(rows > 0 ? rows : 1) * sizeof(int64_t));
    p->keep = l->flat ? column_masks(s, 1) : NULL;
    p->nruns = 0;
    if (!p->runs || !p->base || (l->flat && !p->keep)) {
        free_plan(p);
        return -1;
    }
    for (int64_t pos = 0; pos < total; p->nruns++) {
        const int64_t img = pos / P, q = pos % P, oy = q / s->ow, ox = q % s->ow;
        const int64_t panel = pos / width, j = pos % width;
        const int64_t len = min64(width - j, l->flat ? P - q : s->ow - ox);
        const int64_t src = img * l->image + (l->flat ? q : oy * s->sh * wp + ox * s->sw);
        p->runs[p->nruns] = (run){panel * depth * width + j, src, pos, q, len};
        pos += len;
    }
    for (int64_t r = 0; r < rows; r++) {
        const int64_t tap = r % taps;
        p->base[r] = l->margin + r / taps * l->plane +
                     (l->flat ? tap_shift(s, tap) : tap / s->kw * s->dh * wp + tap % s->kw * s->dw);
    }
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

/* Whether products follow the dot rule on float32 panels (gemm.c), which need the smallest
 * exponents of what they are packed from. */
static int widening(const om_gemm_rule *r) { return r->bf16 && !r->pairs; }

/* The per-path data movement (conv_impl.h). */
static const om_conv_keep_fn keep_fns[OM_ISA_COUNT] = OM_ISA_TABLE(om_conv_keep_f32);
static const om_conv_tap_sums_fn tap_sums_fns[OM_ISA_COUNT] = OM_ISA_TABLE(om_conv_tap_sums_f32);

/* Row r of the column matrix along run rn into d (the run's first output); j = r mod kw. */
static inline void gather_run(const om_conv2d_shape *s, const float *src, const col_plan *p,
                              const run *rn, int64_t r, int64_t j, float *d) {
    const float *sp = src + p->base[r] + rn->src;
    if (p->keep) {
        keep_fns[om_isa](d, sp, p->keep + j * s->oh * s->ow + rn->q, rn->len);
    } else if (s->sw == 1) {
        copy_run(d, sp, rn->len);
    } else {
        for (int64_t k = 0; k < rn->len; k++) d[k] = sp[k * s->sw];
    }
}

/* Rows [r0 + begin, r0 + end) for gather_rows(). */
static void gather_share(const void *ctx, int64_t begin, int64_t end) {
    const conv_job *a = ctx;
    const col_plan *p = a->p;
    for (int64_t r = a->r0 + begin; r < a->r0 + end; r++)
        for (int64_t t = 0; t < p->nruns && p->runs[t].pos < a->npos; t++)
            gather_run(a->s, a->src, p, &p->runs[t], r, r % a->s->kw,
                       a->dst + (r - a->r0) * a->ld + p->runs[t].dst);
}

/* Rows [r0, r1) of the column matrix of a batch's first npos outputs (a multiple of P), read
 * from src, row r written at dst + (r - r0) * row_step along the runs. Rows outer, runs inner:
 * a row reads its plane in order. Threads split the rows. */
static void gather_rows(const om_conv2d_shape *s, const float *src, const col_plan *p,
                        int64_t r0, int64_t r1, int64_t npos, float *dst, int64_t row_step,
                        int nthreads) {
    const conv_job a = {.s = s, .p = p, .src = src, .dst = dst, .r0 = r0, .npos = npos,
                        .ld = row_step};
    om_run_range(om_threads_for((r1 - r0) * npos, GRAIN, nthreads), r1 - r0, gather_share, &a);
}

static inline void add_run(float *restrict d, const float *restrict v, int64_t len) {
    int64_t e = 0;
    for (; e + 4 <= len; e += 4)
        for (int l = 0; l < 4; l++) d[e + l] += v[e + l];
    for (; e < len; e++) d[e] += v[e];
}

/* Channels [begin, end) of one image's dx (dst) from its column-matrix gradient dcol (src, rows
 * of P, row stride ld), general shapes (p: a plan of width P over one image): each padded plane
 * (in pad) starts at +0 and adds its taps' values in row order (c, i, j), each tap along its
 * runs (a pixel gets at most one value per tap); the border is then dropped. */
static void scatter_rows(const void *ctx, int64_t begin, int64_t end) {
    const conv_job *a = ctx;
    const om_conv2d_shape *s = a->s;
    const col_plan *p = a->p;
    const int64_t hp = padded_h(s), wp = padded_w(s), taps = s->kh * s->kw, sw = s->sw;
    for (int64_t c = begin; c < end; c++) {
        float *plane = a->pad + c * hp * wp;
        memset(plane, 0, (size_t)(hp * wp) * sizeof(float));
        for (int64_t r = c * taps; r < (c + 1) * taps; r++) {
            float *base = a->pad + p->base[r];
            const float *g = a->src + r * a->ld;
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
            memcpy(a->dst + (c * s->h + y) * s->w, plane + (y + s->ph) * wp + s->pw,
                   (size_t)s->w * sizeof(float));
    }
}

/* Where scatter_flat() reads: tap t of a plane at off[t] = t·ld - tap_shift(t) from the
 * plane's first dcol row (rows ld apart), its mask at keep + koff[t]; both in one block of
 * 2·taps (off, then koff), NULL when out of memory. */
static int64_t *tap_offsets(const om_conv2d_shape *s, int64_t ld) {
    const int64_t taps = s->kh * s->kw;
    int64_t *off = (int64_t *)malloc((size_t)(2 * taps) * sizeof(int64_t));
    for (int64_t t = 0; off && t < taps; t++) {
        off[t] = t * ld - tap_shift(s, t);
        off[taps + t] = t % s->kw * s->h * s->w;
    }
    return off;
}

/* scatter_rows() for flat_rows() shapes, straight into dst: pixel f of plane c is the sum from +0
 * over the taps t in order of dcol row (c, t) at f - tap_shift(t) (off: tap_offsets()), read
 * as +0 where the tap's column is in the padding (keep: column_masks(s, -1)) and found +0 in
 * dcol's margins where its row is. The sum never holds -0 (it starts at +0), so adding +0
 * changes no bit: every pixel gets the same values in the same order as from scatter_rows().
 * The sums run on the path's tap_sums (conv_impl.h), each pixel's in a register while the
 * taps pass. */
static void scatter_flat(const void *ctx, int64_t begin, int64_t end) {
    const conv_job *a = ctx;
    const int64_t taps = a->s->kh * a->s->kw, hw = a->s->h * a->s->w;
    for (int64_t c = begin; c < end; c++)
        tap_sums_fns[om_isa](a->src + c * taps * a->ld, a->off, a->keep, a->off + taps, taps, hw,
                             a->dst + c * hw);
}

/* Below this many fused multiply-adds per thread, one thread is faster. */
#define GRAIN_FMAS (1 << 20)

/* Panels packed at once by pack_cols(): rows of the source far apart, or panels of a small
 * depth, share cache sets, so a few panels are filled row by row. */
#define PACK_PANELS 8

/* Panels of `width` columns of the depth x cols matrix src (row stride rs, columns in segments
 * as in om_gemm_out), `stride` depths apart (om_gemm_packed_depth): panel q holds, for each
 * k < depth in turn, columns [q·width, q·width + width), zero past the last column. */
static void pack_cols(int width, int64_t depth, int64_t stride, int64_t cols, const float *src,
                      int64_t rs, int64_t seg, int64_t seg_stride, float *dst) {
    for (int64_t jb = 0; jb < cols; jb += PACK_PANELS * width) {
        /* Segment and offset of each panel's first column, found once for every row. */
        int64_t seg0[PACK_PANELS], off0[PACK_PANELS];
        const int np = (int)min64(PACK_PANELS, (cols - jb + width - 1) / width);
        for (int q = 0; q < np; q++) {
            seg0[q] = (jb + q * width) / seg;
            off0[q] = (jb + q * width) % seg;
        }
        for (int64_t k = 0; k < depth; k++)
            for (int q = 0; q < np; q++) {
                const int64_t j0 = jb + q * width, w = min64(cols - j0, width);
                float *d = dst + j0 / width * stride * width + k * width;
                for (int64_t j = 0, sg = seg0[q], off = off0[q]; j < w; sg++, off = 0) {
                    const int64_t len = min64(w - j, seg - off);
                    memcpy(d + j, src + k * rs + sg * seg_stride + off,
                           (size_t)len * sizeof(float));
                    j += len;
                }
                for (int64_t j = w; j < width; j++) d[j] = 0.0f;
            }
    }
}

/* Panels of `width` rows of the rows x depth matrix src (row stride rs), `stride` depths
 * apart: panel q holds, for each k < depth in turn, column k of rows [q·width, q·width +
 * width), zero past the last row. The transposes run 16 rows at a time through the path's
 * packing step. */
static void pack_rows(const om_gemm_ukernel *u, int width, int64_t depth, int64_t stride,
                      int64_t rows, const float *src, int64_t rs, float *dst) {
    for (int64_t i0 = 0; i0 < rows; i0 += width, dst += stride * width) {
        const int h = rows - i0 < width ? (int)(rows - i0) : width;
        for (int i = 0; i < h; i += 16)
            u->transpose(depth, h - i < 16 ? h - i : 16, src + (i0 + i) * rs, rs, dst + i, width);
        for (int64_t k = 0; k < depth && h < width; k++)
            for (int i = h; i < width; i++) dst[k * width + i] = 0.0f;
    }
}

/* Images per job of `per_image` floats: at most `floats` of them and, when the batch allows, at
 * least MIN_CHUNKS jobs so that threads can take whole jobs. A function of the shapes alone. */
#define MIN_CHUNKS 8
static int64_t images_per_job(const om_conv2d_shape *s, int64_t per_image, int64_t floats) {
    const int64_t most = (s->n + MIN_CHUNKS - 1) / MIN_CHUNKS;
    int64_t nb = per_image > 0 ? floats / per_image : most;
    if (nb > most) nb = most;
    return nb < 1 ? 1 : nb;
}

/* The weight gradient's chunks (partial sums added in chunk order, so the count fixes bits):
 * at most CHUNK_FLOATS of column matrix. */
#define CHUNK_FLOATS (1 << 19)
static int64_t chunk_images(const om_conv2d_shape *s) {
    return images_per_job(s, s->c * s->kh * s->kw * s->oh * s->ow, CHUNK_FLOATS);
}

/* The forward pass and the input gradient run their products over batches of images (columns
 * (image, position)) whose operands stay in L2 together: the input planes and the outputs
 * (the forward pass gathers its column matrix panel by panel), or the column matrix's gradient
 * and the output gradient's channels. Every element's chain is the same whatever the batch. */
#define BATCH_FLOATS (1 << 18)
static int64_t batch_images(const om_conv2d_shape *s, int forward) {
    const int64_t taps = forward ? 1 : s->kh * s->kw, P = s->oh * s->ow;
    return images_per_job(s, s->c * taps * (forward ? s->h * s->w : P) + s->k * P, BATCH_FLOATS);
}
/* Threads take whole chunks only while the chunks' partial weight gradients, kept until they
 * are added in order, stay below this many floats. */
#define PARTS_FLOATS (1 << 22)

/* Threads over whole jobs (batches or chunks of images; each job then runs on one thread) when
 * there are enough; otherwise the jobs run in order, each on every thread. Either way every
 * job does the same arithmetic, so the choice changes no bit. */
static int outer_threads(int64_t jobs, int nthreads) {
    return jobs >= nthreads ? nthreads : 1;
}

/* The forward product of group g over a batch's first npos outputs, column panel by column
 * panel: each panel of nr outputs of the column matrix (plan: runs for panels of nr) is
 * gathered into a buffer that stays in L1 and met at once by every row panel of the packed
 * weight wp (om_gemm_panels), so the column matrix never goes through L2. Threads split the
 * panels, each with its own buffer. forward_panels(): 0, or -1 when out of memory. */
typedef struct {
    const om_gemm_rule *r;
    const om_conv2d_shape *s;
    const col_plan *plan;
    const float *wp, *src;
    const int *wmin;
    const om_gemm_out *y;
    int64_t npos, r0;
    int srcmin;     /* a bound of the exponents in src, for every panel gathered from it */
} forward_job;

static int panels_share(const void *ctx, int rank, int size) {
    const forward_job *f = ctx;
    const om_conv2d_shape *s = f->s;
    const col_plan *plan = f->plan;
    const int nr = f->r->u.nr;
    const int64_t kg = s->k / s->groups, rg = s->c / s->groups * s->kh * s->kw;
    const int64_t npos = f->npos, r0 = f->r0, depth = om_gemm_packed_depth(f->r, rg);
    const om_range share = om_share((npos + nr - 1) / nr, rank, size);
    float *b = scratch(depth * nr);
    int64_t t = 0;
    if (!b) return 1;
    while (t < plan->nruns && plan->runs[t].pos < share.begin * nr) t++;
    for (int64_t pn = share.begin; pn < share.end; pn++) {
        const int64_t j0 = pn * nr, w = min64(npos - j0, nr);
        for (int64_t r = 0; r < rg && w < nr; r++)
            memset(b + r * nr + w, 0, (size_t)(nr - w) * sizeof(float));
        for (; t < plan->nruns && plan->runs[t].pos < j0 + w; t++)
            for (int64_t r = r0; r < r0 + rg; r++)
                gather_run(s, f->src, plan, &plan->runs[t], r, r % s->kw,
                           b + (r - r0) * nr + (plan->runs[t].pos - j0));
        int slow = 0;
        om_gemm_finish_panels(f->r, b, 1, rg, nr, NULL, 1);
        om_gemm_panels(f->r, kg, w, depth, f->wp, f->wmin, b, &f->srcmin, f->y, j0, 0, &slow, 1);
    }
    om_aligned_free(b);
    return 0;
}

static int forward_panels(const om_gemm_rule *r, const om_conv2d_shape *s, const float *src,
                          const col_plan *plan, int64_t g, int64_t npos, const float *wp,
                          const int *wmin, const om_gemm_out *y, int srcmin, int nthreads) {
    const int64_t rg = s->c / s->groups * s->kh * s->kw, kg = s->k / s->groups;
    const forward_job f = {r, s, plan, wp, src, wmin, y, npos, g * rg, srcmin};
    return om_run_team(om_threads_for(kg * npos * rg, GRAIN_FMAS, nthreads), panels_share, &f)
               ? -1 : 0;
}

/* The forward pass's batches of images, each with `inner` threads. */
typedef struct {
    const om_gemm_rule *r;
    const om_conv2d_shape *s;
    const layout *l;
    const col_plan *plan;
    const void *x;
    const float *wp, *b;
    const int *wmin;    /* the packed weight's smallest exponents, apanels per group */
    float *y;
    int64_t nb, batches, wpanel, apanels;
    int inner;
} forward_batches;

/* Thread `rank` of `size`'s batches (a contiguous run). */
static int forward_share(const void *ctx, int rank, int size) {
    const forward_batches *f = ctx;
    const om_conv2d_shape *s = f->s;
    const int64_t G = s->groups, P = s->oh * s->ow, kg = s->k / G;
    float *src = zeroed_scratch(f->l->size);
    int failed = !src;
    const om_range share = om_share(f->batches, rank, size);
    for (int64_t t = share.begin; t < share.end && !failed; t++) {
        const int64_t n0 = t * f->nb, m = min64(f->nb, s->n - n0);
        float *yb = f->y + n0 * s->k * P;
        load_images(s, f->l, f->x, n0, m, src, f->inner);
        const int srcmin = widening(f->r) ? om_gemm_min_exponent(f->r, src, f->l->size) : 0;
        for (int64_t g = 0; g < G && !failed; g++) {
            const om_gemm_out yg = {yb + g * kg * P, P, P, s->k * P};
            failed = forward_panels(f->r, s, src, f->plan, g, m * P, f->wp + g * f->wpanel,
                                    f->wmin + g * f->apanels, &yg, srcmin, f->inner);
        }
        for (int64_t k = 0; k < m * s->k && f->b; k++)
            for (int64_t e = 0; e < P; e++) yb[k * P + e] += f->b[k % s->k];
    }
    om_aligned_free(src);
    return failed;
}

int om_conv2d_forward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                          const float *b, float *y, int nthreads) {
    const om_gemm_rule r = om_gemm_rule_for(s->half);
    const om_gemm_ukernel *u = &r.u;
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, depth = om_gemm_packed_depth(&r, rg);
    const int64_t apanels = (kg + u->mr - 1) / u->mr, wpanel = apanels * u->mr * depth;
    if (s->n * s->k * P == 0) return 0;
    const int64_t nb = batch_images(s, 1), batches = (s->n + nb - 1) / nb;
    const layout l = source_layout(s, nb);
    col_plan plan;
    float *wp = scratch(G * wpanel);
    int *wmin = malloc((size_t)(G * apanels) * sizeof(int));
    int failed = make_plan(s, &l, nb, u->nr, rg, &plan) != 0 || !wp || !wmin;
    for (int64_t g = 0; g < G && !failed; g++) {
        pack_rows(u, u->mr, rg, depth, kg, w + g * kg * rg, rg, wp + g * wpanel);
        om_gemm_finish_panels(&r, wp + g * wpanel, apanels, rg, u->mr, wmin + g * apanels, 0);
    }
    const int outer = outer_threads(batches, nthreads);
    const forward_batches job = {&r, s, &l, &plan, x, wp, b, wmin, y, nb, batches, wpanel,
                                 apanels, outer > 1 ? 1 : nthreads};
    if (!failed) failed = om_run_team(outer, forward_share, &job);
    om_aligned_free(wp);
    free(wmin);
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

/* Whether the weight gradient packs its column matrices with pack_taps(): flat_rows() shapes
 * with enough channels per group that the transposes of up to 16 of them are not mostly
 * empty; otherwise rows are gathered in order (c, i, j) and the whole matrix transposed. */
static int by_tap(const om_conv2d_shape *s) {
    return flat_rows(s) && s->c / s->groups >= 8;
}

/* The packed column matrix of one image's group g for by_tap() shapes, its rows in the
 * order (tap, channel) (panels of `width` rows over the depth P, `stride` apart, as pack_rows()
 * lays them out): the rows of one tap for up to 16 consecutive channels are one plane apart in the
 * source, so the path's transposing step reads them there directly; the outputs whose tap
 * column is in the padding are then zeroed. */
static void pack_taps(const om_gemm_ukernel *u, const om_conv2d_shape *s, const layout *l,
                      const col_plan *plan, const float *src, int64_t g, int width,
                      int64_t stride, float *dst) {
    const int64_t P = s->oh * s->ow, cg = s->c / s->groups, taps = s->kh * s->kw;
    const int64_t rg = cg * taps;
    for (int64_t r = 0; r < rg;) {
        const int64_t t = r / cg, c = r % cg, j = r % width;
        const int rows = (int)min64(16, min64(cg - c, width - j));
        float *d = dst + r / width * stride * width + j;
        const int32_t *keep = plan->keep + t % s->kw * P;
        u->transpose(P, rows, src + l->margin + (g * cg + c) * l->plane + tap_shift(s, t),
                     l->plane, d, width);
        for (int64_t q = 0; q < P; q++)
            for (int i = 0; i < rows && !keep[q]; i++) d[q * width + i] = 0.0f;
        r += rows;
    }
    const int64_t h = rg % width, last = rg / width * stride * width;
    for (int64_t q = 0; q < P && h > 0; q++)
        for (int64_t i = h; i < width; i++) dst[last + q * width + i] = 0.0f;
}

/* The weight gradient of the images [n0, n0 + m) into part, group by group dW (K/G,
 * C/G·kh·kw) or dW^T (taps_along_vectors()), the taps in the order (tap, channel) for
 * by_tap() shapes: one fma chain per element over (image, position) ascending, from +0 for
 * the first image and continued through part for the next. */
static void weight_part(const om_gemm_rule *r, const om_conv2d_shape *s, const layout *l,
                        const void *x, const float *gy, const col_plan *plan, int64_t n0,
                        int64_t m, float *part, float *src, float *col, float *cp, float *gp,
                        int *cmin, int *gmin, int nthreads) {
    const om_gemm_ukernel *u = &r->u;
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, depth = om_gemm_packed_depth(r, P);
    const int along = taps_along_vectors(s), taps_first = by_tap(s);
    const int cw = along ? u->nr : u->mr, gw = along ? u->mr : u->nr;   /* panel widths */
    int slow = 0;   /* whether a tile ran the dot rule in C (om_gemm_panels), any group */
    for (int64_t img = n0; img < n0 + m; img++) {
        load_images(s, l, x, img, 1, src, nthreads);
        const int srcmin = widening(r) ? om_gemm_min_exponent(r, src, l->size) : 0;
        for (int64_t q = 0; q < (rg + cw - 1) / cw; q++) cmin[q] = srcmin;
        if (!taps_first) gather_rows(s, src, plan, 0, rows, P, col, P, nthreads);
        for (int64_t g = 0; g < G; g++) {
            const float *gyg = gy + (img * s->k + g * kg) * P;
            if (taps_first)
                pack_taps(u, s, l, plan, src, g, cw, depth, cp);
            else
                pack_rows(u, cw, P, depth, rg, col + g * rg * P, P, cp);
            pack_rows(u, gw, P, depth, kg, gyg, P, gp);
            om_gemm_finish_panels(r, cp, (rg + cw - 1) / cw, P, cw, NULL, 1);
            om_gemm_finish_panels(r, gp, (kg + gw - 1) / gw, P, gw, gmin, 0);
            if (along) {
                const om_gemm_out c = {part + g * kg * rg, rg, rg, 0};
                om_gemm_panels(r, kg, rg, depth, gp, gmin, cp, cmin, &c, 0, img > n0, &slow,
                               nthreads);
            } else {
                const om_gemm_out c = {part + g * rg * kg, kg, kg, 0};
                om_gemm_panels(r, rg, kg, depth, cp, cmin, gp, gmin, &c, 0, img > n0, &slow,
                               nthreads);
            }
        }
    }
}

/* gw = the summed parts: dW (or dW^T) group by group, its taps in weight_part()'s order. */
static void store_weight(const om_conv2d_shape *s, const float *sum, float *gw) {
    const int64_t G = s->groups, kg = s->k / G, cg = s->c / G, taps = s->kh * s->kw;
    const int64_t rg = cg * taps;
    const int along = taps_along_vectors(s), taps_first = by_tap(s);
    for (int64_t g = 0; g < G; g++)
        for (int64_t k = 0; k < kg; k++)
            for (int64_t r = 0; r < rg; r++) {
                const int64_t row = taps_first ? r % taps * cg + r / taps : r;   /* r = (c, tap) */
                gw[(g * kg + k) * rg + r] =
                    along ? sum[(g * kg + k) * rg + row] : sum[(g * rg + row) * kg + k];
            }
}

static void add_into(float *restrict sum, const float *restrict part, int64_t size) {
    for (int64_t e = 0; e < size; e++) sum[e] += part[e];
}

/* The weight gradient's chunks of images, each with `inner` threads: chunk t's partial sum goes
 * to parts[t] when threads take chunks (outer > 1, added in chunk order afterwards), else
 * chunk 0 to parts[0] and each later one to parts[1], added to parts[0] as it finishes. */
typedef struct {
    const om_gemm_rule *r;
    const om_conv2d_shape *s;
    const layout *l;
    const col_plan *plan;
    const void *x;
    const float *gy;
    float *parts;
    int64_t nb, nchunks, wsize;
    int outer, inner;
} weight_chunks;

/* Thread `rank` of `size`'s chunks (a contiguous run). */
static int weight_share(const void *ctx, int rank, int size) {
    const weight_chunks *c = ctx;
    const om_conv2d_shape *s = c->s;
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t rg = rows / s->groups, kg = s->k / s->groups;
    const int64_t depth = om_gemm_packed_depth(c->r, P);
    float *src = zeroed_scratch(c->l->size), *col = scratch(by_tap(s) ? 1 : rows * P);
    float *cp = scratch(panel_rows(&c->r->u, rg) * depth);
    float *gp = scratch(panel_rows(&c->r->u, kg) * depth);
    int *mins = malloc((size_t)(rg + kg) * sizeof(int));   /* cp's, then gp's (panels) */
    int failed = !src || !col || !cp || !gp || !mins;
    const om_range share = om_share(c->nchunks, rank, size);
    for (int64_t t = share.begin; t < share.end && !failed; t++) {
        const int64_t n0 = t * c->nb, m = min64(c->nb, s->n - n0);
        float *part = c->parts + (c->outer > 1 ? t : t > 0) * c->wsize;
        weight_part(c->r, s, c->l, c->x, c->gy, c->plan, n0, m, part, src, col, cp, gp, mins,
                    mins + rg, c->inner);
        if (c->outer == 1 && t > 0) add_into(c->parts, part, c->wsize);
    }
    om_aligned_free(src);
    om_aligned_free(col);
    om_aligned_free(cp);
    om_aligned_free(gp);
    free(mins);
    return failed;
}

static int weight_gradient(const om_gemm_rule *r, const om_conv2d_shape *s, const void *x,
                           const float *gy, float *gw, int nthreads) {
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t nb = chunk_images(s);
    const int64_t wsize = s->k * (rows / s->groups), nchunks = (s->n + nb - 1) / nb;
    int outer = outer_threads(nchunks, nthreads);
    if (nchunks * wsize > PARTS_FLOATS) outer = 1;
    const layout l = source_layout(s, 1);
    col_plan plan;
    float *parts = scratch((outer > 1 ? nchunks : 2) * wsize);
    int failed = make_plan(s, &l, 1, P, 1, &plan) != 0 || !parts;
    const weight_chunks job = {r, s, &l, &plan, x, gy, parts, nb, nchunks, wsize, outer,
                               outer > 1 ? 1 : nthreads};
    if (!failed) failed = om_run_team(outer, weight_share, &job);
    for (int64_t t = 1; outer > 1 && !failed && t < nchunks; t++)
        add_into(parts, parts + t * wsize, wsize);
    if (!failed) store_weight(s, parts, gw);  /* the total goes to gw once */
    om_aligned_free(parts);
    free_plan(&plan);
    return failed ? -1 : 0;
}

/* dx by batches of images: dcol[g] = W[g]^T · dY[g] over the batch's columns (each element the
 * fma chain over the group's output channels), then scattered image by image into dx. For
 * flat_rows() shapes dcol's rows are `margin` zeros apart (scatter_flat() reads them). */
typedef struct {
    const om_gemm_rule *r;
    const om_conv2d_shape *s;
    const layout *l;
    const col_plan *plan;            /* scatter_rows' plan (unused with flat rows) */
    const int64_t *off;              /* scatter_flat's offsets and masks (flat rows only) */
    const int32_t *keep;
    const float *wt, *gy;
    const int *wmin;                 /* wt's smallest exponents, apanels per group */
    float *gx;
    int64_t nb, batches, wpanel, apanels, ld, dsize;
    int inner;
} input_batches;

/* Thread `rank` of `size`'s batches of images (a contiguous run), each with `inner` threads. */
static int input_share(const void *ctx, int rank, int size) {
    const input_batches *c = ctx;
    const om_conv2d_shape *s = c->s;
    const layout *l = c->l;
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, hw = s->h * s->w, ld = c->ld;
    const int nr = c->r->u.nr;
    const int64_t depth = om_gemm_packed_depth(c->r, kg);
    float *pad = l->flat ? NULL : scratch(l->size), *dcol = zeroed_scratch(c->dsize);
    float *gp = scratch(depth * round_up(c->nb * P, nr));
    int *gmin = malloc((size_t)((c->nb * P + nr - 1) / nr) * sizeof(int));
    int failed = (!l->flat && !pad) || !dcol || !gp || !gmin;
    const om_range share = om_share(c->batches, rank, size);
    for (int64_t t = share.begin; t < share.end && !failed; t++) {
        const int64_t n0 = t * c->nb, m = min64(c->nb, s->n - n0);
        for (int64_t g = 0; g < G; g++) {
            const om_gemm_out dg = {dcol + l->margin + g * rg * ld, ld, P, rows * ld};
            int slow = 0;
            pack_cols(nr, kg, depth, m * P, c->gy + (n0 * s->k + g * kg) * P, P, P, s->k * P,
                      gp);
            om_gemm_finish_panels(c->r, gp, (m * P + nr - 1) / nr, kg, nr, gmin, 0);
            om_gemm_panels(c->r, rg, m * P, depth, c->wt + g * c->wpanel,
                           c->wmin + g * c->apanels, gp, gmin, &dg, 0, 0, &slow, c->inner);
        }
        for (int64_t i = 0; i < m; i++) {
            const conv_job a = {.s = s, .p = c->plan, .src = dcol + l->margin + i * rows * ld,
                                .dst = c->gx + (n0 + i) * s->c * hw, .pad = pad, .off = c->off,
                                .keep = c->keep, .ld = ld};
            om_run_range(om_threads_for(rows * (l->flat ? hw : P), GRAIN, c->inner), s->c,
                         l->flat ? scatter_flat : scatter_rows, &a);
        }
    }
    om_aligned_free(pad);
    om_aligned_free(dcol);
    om_aligned_free(gp);
    free(gmin);
    return failed;
}

static int input_gradient(const om_gemm_rule *r, const om_conv2d_shape *s, const float *w,
                          const float *gy, float *gx, int nthreads) {
    const om_gemm_ukernel *u = &r->u;
    const int64_t G = s->groups, rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    const int64_t kg = s->k / G, rg = rows / G, depth = om_gemm_packed_depth(r, kg);
    const int64_t apanels = (rg + u->mr - 1) / u->mr, wpanel = apanels * u->mr * depth;
    const int64_t nb = batch_images(s, 0), batches = (s->n + nb - 1) / nb;
    const layout l = source_layout(s, 1);
    const int64_t ld = P + l.margin, dsize = l.margin + nb * rows * ld;
    col_plan plan = {NULL, 0, NULL, NULL};
    int64_t *off = l.flat ? tap_offsets(s, ld) : NULL;
    int32_t *keep = l.flat ? column_masks(s, -1) : NULL;
    float *wt = scratch(G * wpanel);
    int *wmin = malloc((size_t)(G * apanels) * sizeof(int));
    int failed = !wt || !wmin ||
                 (l.flat ? !off || !keep : make_plan(s, &l, 1, P, 1, &plan) != 0);
    for (int64_t g = 0; g < G && !failed; g++) {
        pack_cols(u->mr, kg, depth, rg, w + g * kg * rg, rg, rg, 0, wt + g * wpanel);
        om_gemm_finish_panels(r, wt + g * wpanel, apanels, kg, u->mr, wmin + g * apanels, 0);
    }
    const int outer = outer_threads(batches, nthreads);
    const input_batches job = {r, s, &l, &plan, off, keep, wt, gy, wmin, gx, nb, batches, wpanel,
                               apanels, ld, dsize, outer > 1 ? 1 : nthreads};
    if (!failed) failed = om_run_team(outer, input_share, &job);
    om_aligned_free(wt);
    free(wmin);
    free(off);
    free(keep);
    free_plan(&plan);
    return failed ? -1 : 0;
}

/* The bias gradient of the output channels [begin, end). */
static void bias_channels(const void *ctx, int64_t begin, int64_t end) {
    const conv_job *a = ctx;
    const om_conv2d_shape *s = a->s;
    const int64_t P = s->oh * s->ow;
    for (int64_t k = begin; k < end; k++) {
        double acc[LANES] = {0};
        for (int64_t i = 0; i < s->n; i++) lanes_add(acc, a->src + (i * s->k + k) * P, P);
        a->dst[k] = (float)lanes_total(acc);
    }
}

int om_conv2d_backward_f32(const om_conv2d_shape *s, const void *x, const float *w,
                           const float *gy, float *gx, float *gw, float *gb, int nthreads) {
    const om_gemm_rule r = om_gemm_rule_for(s->half);
    const int64_t rows = s->c * s->kh * s->kw, P = s->oh * s->ow;
    if (gb) {
        const conv_job a = {.s = s, .src = gy, .dst = gb};
        om_run_range(om_threads_for(s->k * s->n * P, GRAIN, nthreads), s->k, bias_channels, &a);
    }
    if (s->n * P == 0) {
        if (gw) memset(gw, 0, (size_t)(s->k * (rows / s->groups)) * sizeof(float));
        if (gx) memset(gx, 0, (size_t)(s->n * s->c * s->h * s->w) * sizeof(float));
        return 0;
    }
    int status = 0;
    if (gw) status = weight_gradient(&r, s, x, gy, gw, nthreads);
    if (gx && status == 0) status = input_gradient(&r, s, w, gy, gx, nthreads);
    return status;
}

OM_PATH_PROBE(conv, scalar)  /* the scalar kernels: conv_impl.h's, inline */
OM_PATH_DISPATCH(conv, OM_ISA_TABLE)
