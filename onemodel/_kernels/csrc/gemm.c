/* Single-precision matrix product: C = op(A) * op(B), batched, blocked and packed.
 *
 * What: for every batch index p, C[p] (m x n, row-major) = op(A[p]) (m x k) * op(B[p]) (k x n),
 * where op is the identity or a transpose read straight from the stored layout (packing reads
 * the transposed operand; no transpose is ever materialised). Batch strides are in elements;
 * a stride of 0 broadcasts that operand.
 *
 * Exact-mode contract (the same bits on every path and thread count): each output element is
 *     acc = +0.0f; for k = 0..K-1: acc = fma(A[i,k], B[k,j], acc); C[i,j] = acc
 * with one rounding per fused multiply-add: fmaf() on the scalar and SSE2 paths (SSE2 has no
 * FMA instruction), _mm256_fmadd_ps / _mm512_fmadd_ps on AVX2 / AVX-512, vfmaq_f32 on NEON.
 * No other association is ever used: vectors run across output columns, never along k.
 * K = 0 gives +0.0f.
 *
 * Blocking (Goto / BLIS): loops jc over NC columns, pc over KC = OM_GEMM_KC depths, ic over MC
 * rows; a KC x NC panel of op(B) and an MC x KC block of op(A) are packed into aligned scratch
 * (zero-padded to whole micro-tiles), then the path's micro-kernel updates MR x NR tiles.
 * The float32 accumulator is stored to C between K blocks and reloaded, so blocking along K
 * keeps the chain above exactly; KC is the same on every path anyway. Tiles cut by the edge of
 * C are computed in a local tile and copied (padding rows and columns are dropped).
 *
 * Threads: OpenMP over independent output blocks, never over K. The products of a batch and a
 * grid of sub-blocks of each C are the jobs; each thread packs into its own scratch (allocated
 * and freed here), so the split cannot change any bit. One exception to private packing: when
 * the threads split the columns of one product and op(A) packed whole fits in L2, they first
 * pack it together into one shared buffer (one barrier), instead of each packing all of it.
 * A caller that multiplies by the same op(B) many times (a recurrent weight, once per step)
 * packs it once (om_gemm_pack_b) and passes the panels in place of packing per call.
 *
 * bfloat16 products (both operands bf16, under autocast) follow VDPBF16PS, the AVX512_BF16
 * dot-product instruction, on every path: measured against the instruction on random,
 * overflowing, cancelling and tiny inputs, its lane is the chain above over k in order (the
 * word of depths k, k+1 holds bf16(k) in its high half, which it adds first), with a zero
 * appended to an odd depth, bf16 subnormals read as zero (the other paths' packing flushes
 * them), and every sum that is tiny after rounding (below FLT_MIN when rounded with an
 * unbounded exponent) replaced by a zero of its sign.
 * Where the CPU has the instruction, the avx512 path runs it on panels packed as such pairs
 * (rounded and paired in one pass from the operand). The other paths run their fma chain on a tile
 * when no sum can be that small, which holds when every product and the partial sum carried in are
 * multiples of 2^-126: the sums are then multiples of 2^-126 too. The products are when the
 * smallest exponents of the tile's rows of op(A) and columns of op(B) (at least 71 unless
 * packing's conversion met a smaller one; then a scan of the packed panel) add up to at least
 * 142; the carried sum is when the earlier K blocks ran the fma chain too, or when it is zero
 * or at least 2^-103. Otherwise the tile runs dot_step(), the instruction's rule in C.
 */
#include "gemm.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"

/* Per thread: an mr x KC micro-panel of A stays in L1 while the KC x NC panel of B (1 MB with
 * the AVX-512 tile) streams from L2; MC bounds the block of A packed at once. Measured on a
 * 2 MB-L2 core; every choice gives the same bits. */
enum { MC_TILES = 32, NC_TILES = 32 };
/* Below this many fused multiply-adds per thread, one thread is faster. */
#define GRAIN_FMAS (1 << 20)
/* Largest op(A), packed, that threads splitting the columns pack once and share. */
#define SHARED_A_BYTES (1 << 20)

static const om_gemm_ukernel *(*const ukernels[OM_ISA_COUNT])(void) =
    OM_ISA_TABLE(om_gemm_ukernel_f32);

void om_gemm_load(const void *x, int fmt, int64_t e, int64_t rows, int64_t n, int64_t stride,
                  float *dst, uint16_t *save) {
    if (fmt == OM_F32) {
        for (int64_t r = 0; r < rows; r++)
            memcpy(dst + r * n, (const float *)x + e + r * stride, (size_t)n * sizeof(float));
        return;
    }
    const int64_t size = fmt == OM_BF16 || fmt == OM_F16 ? 2 : 4;
    ukernels[om_isa]()->convert(rows, n, (const char *)x + e * size, stride, fmt, dst, n,
                                save ? save + e : NULL);
}

static int use_bf16_dot = -1;   /* -1: where it is faster (decided on first use) */

int om_gemm_set_bf16_dot(int on) {
    if (on && !om_bf16_dot_available()) return -1;
    use_bf16_dot = on ? 1 : 0;
    return 0;
}

int om_gemm_bf16_dot(void) {
    if (use_bf16_dot < 0) use_bf16_dot = om_bf16_dot_preferred();
    return use_bf16_dot;
}

/* The selected path's micro-kernel set with the dot-product kernel and its pair packing in
 * place of the fma kernel, when it has one and it is on (into *dot); 0 otherwise. */
static int bf16_dot_kernel(om_gemm_ukernel *dot) {
#if OM_BUILD_AVX512BF16
    if (om_isa == OM_ISA_AVX512 && om_gemm_bf16_dot()) {
        const om_gemm_ukernel *path = ukernels[om_isa](), *pairs = om_gemm_ukernel_bf16_avx512bf16();
        if (path->mr != pairs->mr || path->nr != pairs->nr) return 0;   /* packing differs */
        *dot = *path;
        dot->kernel = pairs->kernel;
        dot->convert_pairs = pairs->convert_pairs;
        dot->convert_run_pairs = pairs->convert_run_pairs;
        return 1;
    }
#endif
    (void)dot;
    return 0;
}

/* An exponent sum from which every product of a bf16 value from op(A) with one from op(B) is
 * a multiple of 2^-126: bf16 (e, m) is m * 2^(e - 134) with m an integer. */
enum { NO_TINY_SUMS = 142 };

static int64_t round_up(int64_t v, int64_t q) { return (v + q - 1) / q * q; }
static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* An operand as a strided view: element (r, c) is at index r * rs + c * cs of p (elements of
 * 4 bytes, or 2 for the 2-byte formats), read as fmt says; save (NULL, or the rounded operand's
 * bits, at the same indices) is written by the packing that owns the block (block()). */
typedef struct {
    const void *p;
    int64_t rs, cs;
    int fmt;
    uint16_t *save;
} view;

static int is_2byte(int fmt) { return fmt == OM_BF16 || fmt == OM_F16; }
static int is_bf16(int fmt) { return fmt == OM_BF16 || fmt == OM_F32_TO_BF16; }

/* v moved on by `at` elements; save dropped unless keep_save. */
static view moved(view v, int64_t at, int keep_save) {
    view w = {(const char *)v.p + at * (is_2byte(v.fmt) ? 2 : 4), v.rs, v.cs, v.fmt,
              keep_save && v.save ? v.save + at : NULL};
    return w;
}

static view shifted(view v, int64_t r, int64_t c, int keep_save) {
    return moved(v, r * v.rs + c * v.cs, keep_save);
}

/* The view of an operand of om_gemm (op(X) of rows x cols). */
static view operand_view(om_gemm_operand x, int64_t rows, int64_t cols) {
    view v = {x.p, x.trans ? 1 : cols, x.trans ? rows : 1, x.fmt, x.save};
    return v;
}

typedef struct {
    const om_gemm_ukernel *u;
    int64_t m, n, k, mc, nc;
    float *abuf, *bbuf;
    const float *shared_a;  /* all of op(A) packed (K block by K block), or NULL */
    const float *packed_b;  /* all of op(B) packed (K block by K block), or NULL */
    int bf16;               /* a bfloat16 product: depths padded to even, the dot rule */
    int pairs;              /* its panels are pairs for the dot-product kernel u */
    const int *amin, *bmin; /* the widening paths' smallest exponent per micro-panel */
    const int *packed_bmin; /* packed_b's, per (K block, panel) */
    int add;                /* tiles are added into C (om_gemm's add) */
} ctx;

void om_gemm_transpose_f32(int64_t depth, int rows, const float *src, int64_t rs, float *dst,
                           int width) {
    for (int i = 0; i < rows; i++)
        for (int64_t k = 0; k < depth; k++) dst[k * width + i] = src[i * rs + k];
}

/* The packing copies are a tile's width or height (4 to 32 floats): an inline loop, where a
 * memcpy call per run costs more than the copy (a fifth of the time of a product
 * packing-bound); restrict spares it the compiler's check for overlap. */
static inline void copy_floats(float *restrict dst, const float *restrict src, int n) {
    for (int i = 0; i < n; i++) dst[i] = src[i];
}

/* Packing's row buffer: 16 runs of a K block (a transposing step's), or a stretch of a depth. */
enum { ROWBUF_FLOATS = 16 * OM_GEMM_KC };
/* Values of a depth converted at a time: enough to amortise a call, few enough to stay in L1. */
enum { STRETCH_FLOATS = 256 };

/* Packing where the values of each depth are contiguous in memory (op(B) stored row-major,
 * op(A) stored transposed): for k < kc, the n values at depth k (from element (k, 0) of v, or
 * (0, k) when along_cols) go to the panels `width` values wide and panel_stride floats apart,
 * at dst + k * width (the last panel's lanes past n are left alone). float32 is copied a
 * panel at a time, the depth 8 ahead fetched; another format is converted into rowbuf a
 * stretch of whole panels at a time (per panel's run of 6 to 32 values, converting cost
 * several times more) and then dealt out. Returns convert's. */
static int load_depths(const om_gemm_ukernel *u, view v, int along_cols, int64_t kc, int64_t n,
                       int width, float *dst, int64_t panel_stride, float *rowbuf) {
    const int64_t stretch = v.fmt == OM_F32 ? width : STRETCH_FLOATS / width * width;
    const int64_t step = along_cols ? v.cs : v.rs;   /* elements from one depth to the next */
    const int64_t bytes = step * (is_2byte(v.fmt) ? 2 : 4);
    int tiny = 0;
    for (int64_t j0 = 0; j0 < n; j0 += stretch) {
        const int64_t len = min64(stretch, n - j0);
        const view first = along_cols ? shifted(v, j0, 0, 1) : shifted(v, 0, j0, 1);
        float *panels = dst + j0 / width * panel_stride;
        for (int64_t k = 0; k < kc; k++, panels += width) {
            const char *at = (const char *)first.p + k * bytes;
            OM_PREFETCH(at + 8 * bytes);
            if (v.fmt == OM_F32) {   /* one panel's run */
                copy_floats(panels, (const float *)at, (int)len);
                continue;
            }
            tiny |= u->convert(1, len, at, 0, v.fmt, rowbuf, len,
                               first.save ? first.save + k * step : NULL);
            float *panel = panels;
            for (int64_t j = 0; j < len; j += width, panel += panel_stride)
                copy_floats(panel, rowbuf + j, len - j < width ? (int)(len - j) : width);
        }
    }
    return tiny;
}

/* The runs of a converting transpose are short (a K block), too short for the hardware to
 * prefetch each in time: every line of the `rows` runs from element (r + i * dr, c + i * dc) is
 * asked for first, so the misses overlap. */
static void prefetch_runs(view v, int64_t r, int64_t c, int dr, int dc, int64_t depth,
                          int rows) {
    const int64_t bytes = depth * (is_2byte(v.fmt) ? 2 : 4);
    for (int i = 0; i < rows; i++)
        for (int64_t at = 0; at < bytes; at += 64)
            OM_PREFETCH((const char *)shifted(v, r + i * dr, c + i * dc, 0).p + at);
}

/* The transposing step over `rows` <= 16 runs of depth contiguous values, run i from element
 * (r + i * dr, c + i * dc); other formats are converted into `rowbuf` first (it stays in L1).
 * Returns convert's. */
static int transpose_runs(const om_gemm_ukernel *u, view v, int64_t r, int64_t c, int dr,
                          int dc, int64_t depth, int rows, float *rowbuf, float *dst, int width) {
    if (v.fmt == OM_F32) {
        u->transpose(depth, rows, shifted(v, r, c, 0).p, dr * v.rs + dc * v.cs, dst, width);
        return 0;
    }
    prefetch_runs(v, r, c, dr, dc, depth, rows);
    const view first = shifted(v, r, c, 1);
    if (u->convert_transpose)
        return u->convert_transpose(depth, rows, first.p, dr * v.rs + dc * v.cs, v.fmt, dst,
                                    width, first.save);
    const int tiny = u->convert(rows, depth, first.p, dr * v.rs + dc * v.cs, v.fmt, rowbuf,
                                depth, first.save);
    u->transpose(depth, rows, rowbuf, depth, dst, width);
    return tiny;
}

/* A lower bound of the exponent fields of the nonzero values of n floats (255 if none are):
 * 71 (that of 2^-56) when no nonzero value is smaller, which the path's has_tiny checks quickly
 * and is enough for most products (NO_TINY_SUMS is 2 * 71), else the smallest field. */
static int min_exponent(const om_gemm_ukernel *u, const float *x, int64_t n) {
    if (!u->has_tiny(x, n)) return 71;
    uint32_t lowest = 0xFFu;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t e = (om_f32_bits(x[i]) >> 23) & 0xFFu;
        const uint32_t seen = e ? e : 0xFFu;
        lowest = seen < lowest ? seen : lowest;
    }
    return (int)lowest;
}

/* The depth of a packed K block of kc depths: a bfloat16 product pads odd ones with zeros. */
static int64_t packed_depth(const ctx *x, int64_t kc) { return x->bf16 ? kc + (kc & 1) : kc; }

/* Finishes a packed micro-panel of a widening bfloat16 product: the padding depths (from kc
 * to depth) zeroed, and its smallest exponent stored in *emin (if not NULL) for the choice of
 * tile rule; `tiny`: whether packing's conversion saw a tiny value (then the panel is scanned;
 * 1 where unknown). */
static void finish_panel(const om_gemm_ukernel *u, int bf16, float *panel, int64_t kc,
                         int64_t depth, int width, int tiny, int *emin) {
    if (!bf16) return;
    for (int64_t k = kc; k < depth; k++)
        for (int j = 0; j < width; j++) panel[k * width + j] = 0.0f;
    if (emin) *emin = tiny ? min_exponent(u, panel, depth * width) : 71;
}

/* The dot-product kernel's panels: per pair of depths (k, k + 1), words of bf16(k) in the high
 * half and bf16(k + 1) in the low half (a zero past an odd kc), `width` words apart, written
 * straight from the operand, padding lanes zeroed, by the dot kernel's pair converters
 * (gemm_avx512bf16.c): lane i from element (r + i * dr, c + i * dc). */

/* Lanes that are runs along the depth (contiguous in memory; lanes <= fill <= 16), converted
 * and transposed into the panel in one step. */
static void pairs_from_runs(const ctx *x, view v, int64_t r, int64_t c, int dr, int dc,
                            int64_t kc, int lanes, int fill, float *dst, int width) {
    const view first = shifted(v, r, c, 1);
    x->u->convert_run_pairs(kc, lanes, first.p, dr * v.rs + dc * v.cs, v.fmt, (uint32_t *)dst,
                            width, fill, first.save);
}

/* Lanes contiguous in memory at each depth (the depth steps by (sr, sc)), across the panels of
 * the block (panel_stride floats apart) when lanes > width. */
static void pairs_from_rows(const ctx *x, view v, int64_t r, int64_t c, int sr, int sc,
                            int64_t kc, int64_t lanes, float *dst, int width,
                            int64_t panel_stride) {
    const view first = shifted(v, r, c, 1);
    x->u->convert_pairs(kc, lanes, first.p, sr * v.rs + sc * v.cs, v.fmt, (uint32_t *)dst,
                        width, panel_stride, first.save);
}

/* rows x kc block of op(A) -> micro-panels of mr rows, each packed_depth(kc) groups of mr
 * values; emin (NULL, or one per micro-panel) receives their smallest bf16 exponents. */
static void pack_a(const ctx *x, int64_t rows, int64_t kc, view a, float *dst, int *emin) {
    const om_gemm_ukernel *u = x->u;
    const int mr = u->mr;
    const int64_t depth = packed_depth(x, kc);
    OM_ALIGNED(64) float rowbuf[ROWBUF_FLOATS];
    /* op(A) = transpose: each depth holds the block's rows contiguously, read across panels */
    const int across = !x->pairs && a.cs != 1;
    const int tiny = across ? load_depths(u, a, 1, kc, rows, mr, dst, depth * mr, rowbuf) : 0;
    for (int64_t i0 = 0; i0 < rows; i0 += mr, dst += depth * mr) {
        int h = rows - i0 < mr ? (int)(rows - i0) : mr;
        if (x->pairs) {
            if (a.cs == 1)
                pairs_from_runs(x, a, i0, 0, 1, 0, kc, h, mr, dst, mr);
            else
                pairs_from_rows(x, a, i0, 0, 0, 1, kc, h, dst, mr, 0);
            continue;
        }
        /* rows of A contiguous along k: a transpose (mr <= 16) */
        const int panel_tiny = across ? tiny : transpose_runs(u, a, i0, 0, 1, 0, kc, h, rowbuf,
                                                              dst, mr);
        for (int64_t k = 0; k < kc && h < mr; k++)
            for (int i = h; i < mr; i++) dst[k * mr + i] = 0.0f;
        finish_panel(x->u, x->bf16, dst, kc, depth, mr, panel_tiny, emin ? emin + i0 / mr : NULL);
    }
}

/* kc x cols panel of op(B) -> micro-panels of nr columns, each packed_depth(kc) groups of nr
 * values; emin as for pack_a. */
static void pack_b(const ctx *x, int64_t kc, int64_t cols, view b, float *dst, int *emin) {
    const om_gemm_ukernel *u = x->u;
    const int nr = u->nr;
    const int64_t panels = (cols + nr - 1) / nr, last = cols - (panels - 1) * nr;
    const int64_t depth = packed_depth(x, kc);
    if (x->pairs && b.cs == 1) {  /* two rows of B at a time, in order */
        pairs_from_rows(x, b, 0, 0, 1, 0, kc, cols, dst, nr, depth * nr);
        return;
    }
    if (x->pairs) {
        for (int64_t p = 0; p < panels; p++) {
            const int w = p + 1 < panels ? nr : (int)last;
            for (int j = 0; j < nr; j += 16)  /* the transpose takes 16 lanes at most */
                pairs_from_runs(x, b, 0, p * nr + j, 0, 1, kc,
                                j < w ? (w - j < 16 ? w - j : 16) : 0, nr - j < 16 ? nr - j : 16,
                                dst + p * depth * nr + j, nr);
        }
        return;
    }
    int tiny = 0;          /* packing's conversions saw a tiny value (of any panel) */
    OM_ALIGNED(64) float rowbuf[ROWBUF_FLOATS];
    if (b.cs == 1) {       /* rows of B contiguous: read each row once, in order */
        float *end = dst + (panels - 1) * depth * nr;  /* the last panel, `last` wide */
        tiny = load_depths(u, b, 0, kc, cols, nr, dst, depth * nr, rowbuf);
        for (int64_t k = 0; k < kc && last < nr; k++)
            for (int64_t j = last; j < nr; j++) end[k * nr + j] = 0.0f;
    } else {
        /* op(B) = transpose: columns of op(B) are contiguous along k, transposed 16 at a time */
        for (int64_t p = 0; p < panels; p++) {
            float *d = dst + p * depth * nr;
            int w = p + 1 < panels ? nr : (int)last;
            for (int j = 0; j < w; j += 16)
                tiny |= transpose_runs(u, b, 0, p * nr + j, 0, 1, kc, w - j < 16 ? w - j : 16,
                                       rowbuf, d + j, nr);
            for (int64_t k = 0; k < kc && w < nr; k++)
                for (int j = w; j < nr; j++) d[k * nr + j] = 0.0f;
        }
    }
    for (int64_t p = 0; p < panels; p++)
        finish_panel(x->u, x->bf16, dst + p * depth * nr, kc, depth, nr, tiny,
                     emin ? emin + p : NULL);
}

/* One step of the dot-product instruction's lane: t + a * b rounded once, and a zero of its
 * sign when the result is tiny after rounding: when the exact value, rounded to 24 bits with an
 * unbounded exponent, is below FLT_MIN. That is the case for every subnormal fmaf result, and
 * for a result fmaf rounds up to FLT_MIN from an exact value below FLT_MIN - 2^-151 (the
 * instruction flushes those too). The exact value is then decided in double, where a * b of
 * two bf16 values is exact and TwoSum gives the rounding error of the sum. */
static float dot_step(float a, float b, float t) {
    const float r = fmaf(a, b, t), m = fabsf(r);
    if (!(m <= FLT_MIN) || m == 0.0f) return r;
    if (m < FLT_MIN) return copysignf(0.0f, r);
    const double tiny = (double)FLT_MIN - 0x1p-151;
    const double p = (double)a * (double)b, sum = p + (double)t, back = sum - p;
    const double err = (p - (sum - back)) + ((double)t - back);
    const int below = fabs(sum) < tiny || (fabs(sum) == tiny && err != 0.0 &&
                                             (err < 0.0) != (sum < 0.0));
    return below ? copysignf(0.0f, r) : r;
}

/* A tile by dot_step, in the micro-kernel's interface (gemm.h). */
static void dot_rule_tile(int mr, int nr, int64_t depth, const float *a, const float *b,
                          float *c, int64_t ldc, int accumulate) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float t = accumulate ? c[i * ldc + j] : 0.0f;
            for (int64_t k = 0; k < depth; k++) t = dot_step(a[k * mr + i], b[k * nr + j], t);
            c[i * ldc + j] = t;
        }
}

/* Whether a widening path's fma chain gives the dot rule's bits on a tile (see the design
 * note); the partial sums carried in (c, rows x cols) are looked at only if check_carry. */
static int no_tiny_sums(int amin, int bmin, const float *c, int64_t ldc, int rows, int cols,
                        int check_carry) {
    if (amin + bmin < NO_TINY_SUMS) return 0;
    for (int i = 0; i < rows && check_carry; i++)
        for (int j = 0; j < cols; j++) {
            const uint32_t e = (om_f32_bits(c[i * ldc + j]) >> 23) & 0xFFu;
            if (e < 24 && c[i * ldc + j] != 0.0f) return 0;
        }
    return 1;
}

static float *seg_at(const om_gemm_out *c, int64_t i, int64_t j) {
    return c->p + i * c->ld + j / c->seg * c->seg_stride + j % c->seg;
}

/* Rows [i0, i0 + h), columns [j0, j0 + w) of c into (in) or out of a tile of row stride nr,
 * piece by piece between segments. */
static void tile_copy(const om_gemm_out *c, int64_t i0, int64_t h, int64_t j0, int64_t w,
                      float *tile, int nr, int in) {
    for (int64_t j = 0; j < w;) {
        const int64_t len = c->seg - (j0 + j) % c->seg < w - j ? c->seg - (j0 + j) % c->seg
                                                                 : w - j;
        float *p = seg_at(c, i0, j0 + j);
        for (int64_t i = 0; i < h; i++) {
            if (in)
                copy_floats(tile + i * nr + j, p + i * c->ld, (int)len);
            else
                copy_floats(p + i * c->ld, tile + i * nr + j, (int)len);
        }
        j += len;
    }
}

/* The tile of c at rows [i0, i0 + h), columns [j0, j0 + w) from micro-panels ap and bp over
 * depth: in place when whole and inside one segment, else through a local tile, which c->add
 * adds into c. A widening bfloat16 product (widen) runs the dot rule in C unless no sum can be
 * tiny (amin, bmin: the panels' smallest exponents; the partial sums carried in are looked at
 * if check_carry); returns whether it did. */
static int run_tile(const om_gemm_ukernel *u, int widen, int64_t depth, const float *ap,
                    int amin, const float *bp, int bmin, const om_gemm_out *c, int64_t i0,
                    int64_t h, int64_t j0, int64_t w, int accumulate, int check_carry) {
    const int mr = u->mr, nr = u->nr;
    OM_ALIGNED(64) float edge[16 * 64];   /* one tile, mr * nr <= 1024 */
    const int whole = !c->add && h == mr && w == nr && j0 % c->seg + nr <= c->seg;
    float *tile = whole ? seg_at(c, i0, j0) : edge;
    const int64_t ld = whole ? c->ld : nr;
    if (accumulate && !whole) tile_copy(c, i0, h, j0, w, edge, nr, 1);
    const int slow = widen && !no_tiny_sums(amin, bmin, tile, ld, (int)h, (int)w,
                                            accumulate && check_carry);
    if (slow)
        dot_rule_tile(mr, nr, depth, ap, bp, tile, ld, accumulate);
    else
        u->kernel(depth, ap, bp, tile, ld, accumulate);
    float *restrict out = c->p + i0 * c->ld + j0;   /* c->add: an unsegmented c (om_gemm) */
    for (int64_t i = 0; i < h && c->add; i++)
        for (int64_t j = 0; j < w; j++) out[i * c->ld + j] = out[i * c->ld + j] + edge[i * nr + j];
    if (!whole && !c->add) tile_copy(c, i0, h, j0, w, edge, nr, 0);
    return slow;
}

/* rows x cols block of C from packed A and B over depth: each A micro-panel (in L1) meets
 * the whole B panel (in L2) before the next. For a widening bfloat16 product, returns whether a
 * tile ran the dot rule in C; check_carry says whether an earlier one did (only then can a
 * partial sum carried into a tile be small enough to matter). */
static int macro_kernel(const ctx *x, int64_t rows, int64_t cols, int64_t depth, float *c,
                        int64_t ldc, int accumulate, int check_carry) {
    int slow = 0;
    const int mr = x->u->mr, nr = x->u->nr, widen = x->bf16 && !x->pairs;
    const om_gemm_out out = {c, ldc, INT64_MAX, 0, x->add};
    for (int64_t i0 = 0; i0 < rows; i0 += mr) {
        const int64_t h = rows - i0 < mr ? rows - i0 : mr;
        for (int64_t j0 = 0; j0 < cols; j0 += nr) {
            /* The next tile's C rows, which its first fma needs (prefetches never fault). */
            for (int64_t i = 0; i < h && accumulate; i++)
                for (int j = 0; j < nr; j += 16) OM_PREFETCH(c + (i0 + i) * ldc + j0 + nr + j);
            slow |= run_tile(x->u, widen, depth, x->abuf + i0 * depth,
                             widen ? x->amin[i0 / mr] : 0, x->bbuf + j0 * depth,
                             widen ? x->bmin[j0 / nr] : 0, &out, i0, h, j0,
                             cols - j0 < nr ? cols - j0 : nr, accumulate, check_carry);
        }
    }
    return slow;
}

/* The rows [m0, m1) x columns [n0, n1) of one product. The saved copy of each element of
 * op(A) is written by its first packing in the job of the first column block, and op(B)'s by
 * the job of the first row block (a and b come with save only for those jobs). */
static void block(const ctx *x, view a, view b, float *c, int64_t m0, int64_t m1, int64_t n0,
                  int64_t n1) {
    const int64_t ldc = x->n, a_panels = (x->m + x->u->mr - 1) / x->u->mr;
    int amin[MC_TILES], bmin[NC_TILES], slow = 0;
    for (int64_t jc = n0; jc < n1; jc += x->nc) {
        int64_t nc = n1 - jc < x->nc ? n1 - jc : x->nc;
        for (int64_t pc = 0; pc < x->k; pc += OM_GEMM_KC) {
            int64_t kc = x->k - pc < OM_GEMM_KC ? x->k - pc : OM_GEMM_KC;
            const int64_t depth = packed_depth(x, kc);
            view bv = shifted(b, pc, jc, 1);
            ctx xi = *x;
            xi.bmin = bmin;
            if (x->packed_b) { /* the K block at pc, then column jc: nr-column panels */
                const int64_t panels = (x->n + x->u->nr - 1) / x->u->nr;
                xi.bbuf = (float *)x->packed_b + pc * panels * x->u->nr + jc * depth;
                if (x->packed_bmin)
                    xi.bmin = x->packed_bmin + pc / OM_GEMM_KC * panels + jc / x->u->nr;
            } else {
                pack_b(x, kc, nc, bv, x->bbuf, bmin);
            }
            for (int64_t ic = m0; ic < m1; ic += x->mc) {
                int64_t mc = m1 - ic < x->mc ? m1 - ic : x->mc;
                view av = shifted(a, ic, pc, jc == n0);
                if (x->shared_a) { /* the K block at pc, then row ic: mr-row panels of depth */
                    xi.abuf = (float *)x->shared_a + pc * a_panels * x->u->mr + ic * depth;
                    xi.amin = x->amin + pc / OM_GEMM_KC * a_panels + ic / x->u->mr;
                } else {
                    pack_a(x, mc, kc, av, x->abuf, amin);
                    xi.amin = amin;
                }
                slow |= macro_kernel(&xi, mc, nc, depth, c + ic * ldc + jc, ldc, pc > 0, slow);
            }
        }
    }
}

/* What packing one element costs, in multiply-adds of the micro-kernel (measured with the
 * AVX-512 tile at 2 threads): a copy is bound by memory; a transpose into mr-row panels (op(A)
 * stored row-major, op(B) stored transposed) runs on the shuffle port, about 8 times slower. */
enum { PACK_COPY = 16, PACK_TRANSPOSE = 128 };

/* Splits one product into gm x gn sub-blocks for t threads: the factorisation with the least
 * cost per thread, counting the tiles it computes (padding included) and the rows of op(A) and
 * columns of op(B) it packs (or reads packed); its rows of op(A) are packed again for every
 * panel of NC_TILES tiles of columns. Ties go to more row blocks. */
static void choose_grid(int64_t m, int64_t n, int mr, int nr, int64_t a_cost, int64_t b_cost,
                        int t, int *gm, int *gn) {
    int64_t best = -1;
    for (int f = t; f >= 1; f--) {
        if (t % f) continue;
        int64_t mb = round_up((m + f - 1) / f, mr);
        int64_t nb = round_up((n + t / f - 1) / (t / f), nr);
        int64_t a_packs = (nb + nr * NC_TILES - 1) / (nr * NC_TILES);
        int64_t cost = mb * nb + a_cost * mb * a_packs + b_cost * nb;
        if (best < 0 || cost < best) best = cost, *gm = f, *gn = t / f;
    }
}

/* One product split into jobs: what every thread needs. */
typedef struct {
    const om_gemm_ukernel *u;
    int64_t batch, m, n, k, a_batch_stride, b_batch_stride;
    view a, b;
    float *c;
    int gm, gn;
    int64_t bm, bn, mc, nc;        /* job block and cache block sizes */
    float *shared_a;               /* all of op(A) packed together, or NULL */
    int *shared_amin;              /* its smallest exponents, one per micro-panel */
    const float *packed_b;         /* all of op(B) packed by the caller, or NULL */
    const int *packed_bmin;        /* its smallest exponents, or NULL */
    int bf16;                      /* a bfloat16 product (ctx.bf16) */
    int dot;                       /* u's kernel is the dot-product one (ctx.pairs) */
    int add;                       /* ctx.add */
} plan;

/* Thread `rank` of `size`'s part: its scratch, its share of the shared packing, its share of
 * the jobs (contiguous runs). The shares are explicit, not omp for loops, because a caller's
 * thread may run a whole product without a team of its own inside an outer parallel region.
 * Returns nonzero if scratch could not be allocated. */
static int run_jobs(const void *product_plan, int rank, int size) {
    const plan *pl = product_plan;
    const om_gemm_ukernel *u = pl->u;
    const int64_t m = pl->m, n = pl->n, k = pl->k;
    const int64_t a_panels = (m + u->mr - 1) / u->mr, k_blocks = (k + OM_GEMM_KC - 1) / OM_GEMM_KC;
    const int64_t jobs = pl->batch * pl->gm * pl->gn;
    ctx x = {u, m, n, k, pl->mc, pl->nc, NULL, NULL, pl->shared_a, pl->packed_b, pl->bf16,
             pl->dot, pl->shared_amin, NULL, pl->packed_bmin, pl->add};
    const int64_t kc = packed_depth(&x, min64(k, OM_GEMM_KC));
    const size_t abytes = (size_t)(round_up(pl->mc, u->mr) * kc) * sizeof(float);
    const size_t bbytes = (size_t)(round_up(pl->nc, u->nr) * kc) * sizeof(float);
    if (!pl->shared_a) x.abuf = om_aligned_alloc(abytes);
    if (!pl->packed_b) x.bbuf = om_aligned_alloc(bbytes);
    int failed = 0;
    int64_t j;
    if (pl->shared_a) {    /* every (K block, mr-row panel) of op(A), as block() would pack it */
        const om_range panels = om_share(k_blocks * a_panels, rank, size);
        for (j = panels.begin; j < panels.end; j++) {
            int64_t pc = j / a_panels * OM_GEMM_KC, i0 = j % a_panels * u->mr;
            int64_t depth = min64(k - pc, OM_GEMM_KC), rows = min64(m - i0, u->mr);
            view panel = shifted(pl->a, i0, pc, 1);
            pack_a(&x, rows, depth, panel,
                   pl->shared_a + pc * a_panels * u->mr + i0 * packed_depth(&x, depth),
                   pl->shared_amin + j);
        }
#pragma omp barrier
    }
    const om_range share = om_share(jobs, rank, size);
    for (j = share.begin; j < share.end; j++) {
        const int gm = pl->gm, gn = pl->gn;
        int64_t p = j / (gm * gn), m0 = (j % (gm * gn)) / gn * pl->bm, n0 = j % gn * pl->bn;
        if ((!x.abuf && !pl->shared_a) || (!x.bbuf && !pl->packed_b)) {
            failed = 1;
            continue;
        }
        if (m0 >= m || n0 >= n) continue;
        view ap = moved(pl->a, p * pl->a_batch_stride, n0 == 0 && (p == 0 || pl->a_batch_stride));
        view bp = moved(pl->b, p * pl->b_batch_stride, m0 == 0 && (p == 0 || pl->b_batch_stride));
        block(&x, ap, bp, pl->c + p * m * n, m0, min64(m0 + pl->bm, m), n0,
              min64(n0 + pl->bn, n));
    }
    om_aligned_free(x.abuf);
    om_aligned_free(x.bbuf);
    return failed;
}

/* om_gemm, with op(B) already packed (packed, batch 1) or packed here. */
static int product(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
                   om_gemm_operand b, const om_gemm_packed *packed, float *c, int add,
                   int nthreads) {
    if (add && (k < 1 || k > OM_GEMM_KC)) return -2;
    if (batch <= 0 || m <= 0 || n <= 0) return 0;
    if (k == 0) {
        memset(c, 0, (size_t)(batch * m * n) * sizeof(float));
        return 0;
    }
    if (!packed && !add && a.fmt == OM_F32 && b.fmt == OM_F32
        && batch * m * n * k <= OM_GEMM_SMALL_FMAS) {
        om_gemm_small_f32(batch, m, n, k, a, b, c);
        return 0;
    }
    const int bf16 = is_bf16(a.fmt) && is_bf16(b.fmt);
    om_gemm_ukernel dot_set;
    const int dot = bf16 && bf16_dot_kernel(&dot_set);
    const om_gemm_ukernel *u = dot ? &dot_set : ukernels[om_isa]();
    plan pl = {u, batch, m, n, k, a.batch_stride, b.batch_stride, operand_view(a, m, k),
               operand_view(b, k, n), c, 1, 1, 0, 0, 0, 0, NULL, NULL,
               packed ? packed->panels : NULL, packed ? packed->bmin : NULL, bf16, dot, add};

    /* Whole products per thread when the batch divides evenly, else sub-blocks of each. */
    int t = om_threads_for(batch * m * n * k, GRAIN_FMAS, nthreads);
    if (batch % t)
        choose_grid(m, n, u->mr, u->nr, a.trans ? PACK_COPY : PACK_TRANSPOSE,
                    b.trans && !packed ? PACK_TRANSPOSE : PACK_COPY, t, &pl.gm, &pl.gn);
    pl.bm = round_up((m + pl.gm - 1) / pl.gm, u->mr);
    pl.bn = round_up((n + pl.gn - 1) / pl.gn, u->nr);
    pl.mc = min64(u->mr * MC_TILES, pl.bm);
    pl.nc = min64(u->nr * NC_TILES, pl.bn);
    const int64_t a_panels = (m + u->mr - 1) / u->mr, k_blocks = (k + OM_GEMM_KC - 1) / OM_GEMM_KC;
    const size_t shared_bytes = (size_t)(a_panels * u->mr * (k + (bf16 & k))) * sizeof(float);
    if (batch == 1 && pl.gm == 1 && pl.gn > 1 && shared_bytes <= SHARED_A_BYTES) {
        pl.shared_a = om_aligned_alloc(shared_bytes);
        pl.shared_amin = malloc((size_t)(a_panels * k_blocks) * sizeof(int));
        if (!pl.shared_amin) {
            om_aligned_free(pl.shared_a);
            pl.shared_a = NULL;
        }
    }

    int failed = om_run_team(t, run_jobs, &pl);
    om_aligned_free(pl.shared_a);
    free(pl.shared_amin);
    return failed ? -1 : 0;
}

int om_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t a_batch_stride, int trans_a,
                 const float *b, int64_t b_batch_stride, int trans_b,
                 float *c, int nthreads) {
    om_gemm_operand av = {a, a_batch_stride, trans_a, OM_F32, NULL};
    om_gemm_operand bv = {b, b_batch_stride, trans_b, OM_F32, NULL};
    return product(batch, m, n, k, av, bv, NULL, c, 0, nthreads);
}

int om_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
            om_gemm_operand b, float *c, int add, int nthreads) {
    return product(batch, m, n, k, a, b, NULL, c, add, nthreads);
}

int om_gemm_pack_b(int64_t k, int64_t n, om_gemm_operand b, om_gemm_packed *out) {
    om_gemm_ukernel dot_set;
    const int bf16 = is_bf16(b.fmt), dot = bf16 && bf16_dot_kernel(&dot_set);
    const om_gemm_ukernel *u = dot ? &dot_set : ukernels[om_isa]();
    const int64_t panels = (n + u->nr - 1) / u->nr, k_blocks = (k + OM_GEMM_KC - 1) / OM_GEMM_KC;
    /* Only the last K block can be padded (OM_GEMM_KC is even). */
    const int64_t floats = panels * u->nr * (k + (bf16 & k));
    const om_gemm_packed packed = {k, n, om_isa, b.trans, b.fmt, dot, b.p, NULL, NULL};
    *out = packed;
    out->panels = om_aligned_alloc((size_t)(floats > 0 ? floats : 1) * sizeof(float));
    if (bf16 && !dot)
        out->bmin = malloc((size_t)(panels * k_blocks > 0 ? panels * k_blocks : 1) * sizeof(int));
    if (!out->panels || (bf16 && !dot && !out->bmin)) {
        om_gemm_packed_free(out);
        return -1;
    }
    b.save = NULL;
    const view bv = operand_view(b, k, n);
    const ctx x = {u, 0, n, k, 0, 0, NULL, NULL, NULL, NULL, bf16, dot, NULL, NULL, NULL};
    for (int64_t pc = 0; pc < k && n > 0; pc += OM_GEMM_KC)
        pack_b(&x, min64(k - pc, OM_GEMM_KC), n, shifted(bv, pc, 0, 0),
               out->panels + pc * panels * u->nr,
               out->bmin ? out->bmin + pc / OM_GEMM_KC * panels : NULL);
    return 0;
}

void om_gemm_packed_free(om_gemm_packed *p) {
    om_aligned_free(p->panels);
    free(p->bmin);
    p->panels = NULL;
    p->bmin = NULL;
}

int om_gemm_packed_product(int64_t m, om_gemm_operand a, const om_gemm_packed *b, float *c,
                           int nthreads) {
    om_gemm_ukernel dot_set;
    const int bf16 = is_bf16(b->fmt);
    const int pairs = bf16 && bf16_dot_kernel(&dot_set);
    if (b->isa != om_isa || is_bf16(a.fmt) != bf16 || b->pairs != pairs) return -1;
    a.batch_stride = 0;
    const om_gemm_operand bv = {b->b, 0, b->trans_b, b->fmt, NULL};
    return product(1, m, b->n, b->k, a, bv, b, c, 0, nthreads);
}

/* ---- Products of panels a caller packs (gemm.h) ----------------------------------------- */

om_gemm_rule om_gemm_rule_for(int half) {
    om_gemm_rule r = {*ukernels[om_isa](), half == 1 ? OM_F32_TO_BF16 : half == 2 ? OM_F32_TO_F16
                                                                                 : OM_F32,
                      half == 1, 0};
    r.pairs = r.bf16 && bf16_dot_kernel(&r.u);
    return r;
}

int64_t om_gemm_packed_depth(const om_gemm_rule *r, int64_t depth) {
    return r->bf16 ? depth + (depth & 1) : depth;
}

/* Where depth k (even for a bfloat16 product) of a packed panel starts, in floats. */
static int64_t depth_at(const om_gemm_rule *r, int64_t k, int width) {
    return (r->pairs ? k / 2 : k) * width;
}

void om_gemm_finish_panels(const om_gemm_rule *r, float *panels, int64_t count, int64_t depth,
                           int width, int *emin, int rounded) {
    const int64_t d = om_gemm_packed_depth(r, depth);
    for (int64_t q = 0; q < count && r->fmt != OM_F32; q++) {
        float *panel = panels + q * d * width;
        const int tiny = rounded || r->pairs
                             || r->u.convert(1, depth * width, panel, 0, r->fmt, panel, 0, NULL);
        finish_panel(&r->u, r->bf16, panel, depth, d, width, tiny,
                     r->pairs || !emin ? NULL : emin + q);
        /* Rounded and paired in place: pair p is written over rows below 2p, read already
         * (row 0 by vectors read before they are written). */
        if (r->pairs)
            r->u.convert_pairs(d, width, panel, width, OM_F32_TO_BF16, (uint32_t *)panel, width,
                               0, NULL);
    }
}

int om_gemm_min_exponent(const om_gemm_rule *r, const float *x, int64_t n) {
    return min_exponent(&r->u, x, n);
}

/* Depth of one block of om_gemm_panels() at most, and floats of b per block: a depth x nr panel
 * of b stays in L1 while the depth x nc block of b (1 MB) stays in L2. Both from the shapes
 * alone, the same on every path. */
#define DEPTH_MAX 512
#define B_BLOCK_FLOATS (1 << 18)

typedef struct {
    const om_gemm_rule *r;
    int64_t m, n, d, c0;
    const float *a, *b;
    const int *amin, *bmin;
    const om_gemm_out *c;
    int accumulate, carry;
    int *slow;
} panels_job;

/* Block kb of `blocks` over depth d starts here (even for a bfloat16 product: pairs). */
static int64_t block_start(const om_gemm_rule *r, int64_t d, int64_t kb, int64_t blocks) {
    const int64_t k = d * kb / blocks;
    return r->bf16 ? k & ~(int64_t)1 : k;
}

/* Row panels [q0, q1) of om_gemm_panels(): each micro-panel of b (in L1) meets them in turn
 * (streamed from L2: a is the smaller operand there). A tile's partial sums carried in need a
 * look only once a tile before it ran the dot rule in C (in this share, or before the call). */
static void panels_share(const void *ctx, int64_t q0, int64_t q1) {
    const panels_job *p = ctx;
    const om_gemm_ukernel *u = &p->r->u;
    const int mr = u->mr, nr = u->nr, widen = p->r->bf16 && !p->r->pairs;
    const int64_t m = p->m, n = p->n, d = p->d;
    int slow = p->carry;
    const int64_t blocks = d > DEPTH_MAX ? (d - 1) / DEPTH_MAX + 1 : 1;
    const int64_t nc = B_BLOCK_FLOATS / (d > 0 ? (d + blocks - 1) / blocks : 1) / nr * nr;
    for (int64_t jb = 0; jb < n; jb += nc)
        for (int64_t kb = 0; kb < blocks; kb++) {
            const int64_t k0 = block_start(p->r, d, kb, blocks);
            const int64_t kc = block_start(p->r, d, kb + 1, blocks) - k0, je = min64(n, jb + nc);
            const int acc = p->accumulate || kb > 0;
            for (int64_t j0 = jb; j0 < je; j0 += nr) {
                const float *bp = p->b + j0 * d + depth_at(p->r, k0, nr);
                for (int64_t q = q0; q < q1; q++)
                    slow |= run_tile(u, widen, kc,
                                     p->a + q * mr * d + depth_at(p->r, k0, mr),
                                     widen ? p->amin[q] : 0, bp, widen ? p->bmin[j0 / nr] : 0,
                                     p->c, q * mr, min64(m - q * mr, mr), p->c0 + j0,
                                     min64(je - j0, nr), acc, slow);
            }
        }
    if (slow && !p->carry) {
#pragma omp critical
        *p->slow = 1;
    }
}

void om_gemm_panels(const om_gemm_rule *r, int64_t m, int64_t n, int64_t d, const float *a,
                    const int *amin, const float *b, const int *bmin, const om_gemm_out *c,
                    int64_t c0, int accumulate, int *slow, int nthreads) {
    if (m <= 0 || n <= 0) return;
    const panels_job p = {r, m, n, d, c0, a, b, amin, bmin, c, accumulate,
                          accumulate && *slow, slow};
    om_run_range(om_threads_for(m * n * d, GRAIN_FMAS, nthreads), (m + r->u.mr - 1) / r->u.mr,
                 panels_share, &p);
}

OM_PATH_DISPATCH(gemm, OM_ISA_TABLE)
