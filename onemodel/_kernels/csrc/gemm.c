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
 * packs it once (om_gemm_pack_b_f32) and passes the panels in place of packing per call.
 */
#include "gemm.h"

#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

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
} ctx;

void om_gemm_transpose_f32(int64_t depth, int rows, const float *src, int64_t rs, float *dst,
                           int width) {
    for (int i = 0; i < rows; i++)
        for (int64_t k = 0; k < depth; k++) dst[k * width + i] = src[i * rs + k];
}

/* The packing copies are a tile's width (8 to 32 floats): an inline loop, where a memcpy call
 * per row costs more than the copy (a fifth of the time of a product packing-bound). */
static inline void copy_floats(float *dst, const float *src, int n) {
    for (int i = 0; i < n; i++) dst[i] = src[i];
}

/* n values of v from element (r, c) on, contiguous in memory, into dst (converted). */
static void load(const om_gemm_ukernel *u, view v, int64_t r, int64_t c, int n, float *dst) {
    view at = shifted(v, r, c, 1);
    if (v.fmt == OM_F32)
        copy_floats(dst, at.p, n);
    else
        u->convert(n, at.p, v.fmt, dst, at.save);
}

/* The transposing step over `rows` <= 16 runs of depth contiguous values, run i from element
 * (r + i * dr, c + i * dc); other formats are converted into `rowbuf` first (it stays in L1). */
static void transpose_runs(const om_gemm_ukernel *u, view v, int64_t r, int64_t c, int dr,
                           int dc, int64_t depth, int rows, float *rowbuf, float *dst, int width) {
    if (v.fmt == OM_F32) {
        u->transpose(depth, rows, shifted(v, r, c, 0).p, dr * v.rs + dc * v.cs, dst, width);
        return;
    }
    for (int i = 0; i < rows; i++) {
        view run = shifted(v, r + i * dr, c + i * dc, 1);
        u->convert(depth, run.p, v.fmt, rowbuf + i * depth, run.save);
    }
    u->transpose(depth, rows, rowbuf, depth, dst, width);
}

/* rows x depth block of op(A) -> micro-panels of mr rows, each depth groups of mr values. */
static void pack_a(const om_gemm_ukernel *u, int64_t rows, int64_t depth, view a, float *dst) {
    const int mr = u->mr;
    OM_ALIGNED(64) float rowbuf[16 * OM_GEMM_KC];
    for (int64_t i0 = 0; i0 < rows; i0 += mr, dst += depth * mr) {
        int h = rows - i0 < mr ? (int)(rows - i0) : mr;
        if (a.cs == 1) {   /* rows of A contiguous along k: a transpose (mr <= 16) */
            transpose_runs(u, a, i0, 0, 1, 0, depth, h, rowbuf, dst, mr);
        } else {           /* op(A) = transpose: each k holds the mr values contiguously */
            for (int64_t k = 0; k < depth; k++) load(u, a, i0, k, h, dst + k * mr);
        }
        for (int64_t k = 0; k < depth && h < mr; k++)
            for (int i = h; i < mr; i++) dst[k * mr + i] = 0.0f;
    }
}

/* depth x cols panel of op(B) -> micro-panels of nr columns, each depth groups of nr values. */
static void pack_b(const om_gemm_ukernel *u, int64_t depth, int64_t cols, view b, float *dst) {
    const int nr = u->nr;
    const int64_t panels = (cols + nr - 1) / nr, last = cols - (panels - 1) * nr;
    if (b.cs == 1) {       /* rows of B contiguous: read each row once, in order */
        for (int64_t k = 0; k < depth; k++) {
            for (int64_t p = 0; p < panels; p++) {
                float *d = dst + p * depth * nr + k * nr;
                int w = p + 1 < panels ? nr : (int)last;
                load(u, b, k, p * nr, w, d);
                for (int j = w; j < nr; j++) d[j] = 0.0f;
            }
        }
        return;
    }
    /* op(B) = transpose: columns of op(B) are contiguous along k, transposed 16 at a time */
    OM_ALIGNED(64) float rowbuf[16 * OM_GEMM_KC];
    for (int64_t p = 0; p < panels; p++) {
        float *d = dst + p * depth * nr;
        int w = p + 1 < panels ? nr : (int)last;
        for (int j = 0; j < w; j += 16)
            transpose_runs(u, b, 0, p * nr + j, 0, 1, depth, w - j < 16 ? w - j : 16, rowbuf,
                           d + j, nr);
        for (int64_t k = 0; k < depth && w < nr; k++)
            for (int j = w; j < nr; j++) d[k * nr + j] = 0.0f;
    }
}

/* rows x cols block of C from packed A and B over depth: each A micro-panel (in L1) meets
 * the whole B panel (in L2) before the next. */
static void macro_kernel(const ctx *x, int64_t rows, int64_t cols, int64_t depth, float *c,
                         int64_t ldc, int accumulate) {
    const int mr = x->u->mr, nr = x->u->nr;
    OM_ALIGNED(64) float edge[16 * 64];   /* one tile, mr * nr <= 1024 */
    for (int64_t i0 = 0; i0 < rows; i0 += mr) {
        const float *ap = x->abuf + i0 * depth;
        int64_t h = rows - i0 < mr ? rows - i0 : mr;
        for (int64_t j0 = 0; j0 < cols; j0 += nr) {
            const float *bp = x->bbuf + j0 * depth;
            int64_t w = cols - j0 < nr ? cols - j0 : nr;
            float *ct = c + i0 * ldc + j0;
            /* The next tile's C rows, which its first fma needs (prefetches never fault). */
            for (int64_t i = 0; i < h && accumulate; i++)
                for (int j = 0; j < nr; j += 16) PREFETCH(ct + i * ldc + nr + j);
            if (h == mr && w == nr) {
                x->u->kernel(depth, ap, bp, ct, ldc, accumulate);
                continue;
            }
            const size_t row_bytes = (size_t)w * sizeof(float);
            for (int64_t i = 0; i < h && accumulate; i++)
                memcpy(edge + i * nr, ct + i * ldc, row_bytes);
            x->u->kernel(depth, ap, bp, edge, nr, accumulate);
            for (int64_t i = 0; i < h; i++) memcpy(ct + i * ldc, edge + i * nr, row_bytes);
        }
    }
}

static int64_t round_up(int64_t v, int64_t q) { return (v + q - 1) / q * q; }
static int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }

/* The rows [m0, m1) x columns [n0, n1) of one product. The saved copy of each element of
 * op(A) is written by its first packing in the job of the first column block, and op(B)'s by
 * the job of the first row block (a and b come with save only for those jobs). */
static void block(const ctx *x, view a, view b, float *c, int64_t m0, int64_t m1, int64_t n0,
                  int64_t n1) {
    const int64_t ldc = x->n;
    for (int64_t jc = n0; jc < n1; jc += x->nc) {
        int64_t nc = n1 - jc < x->nc ? n1 - jc : x->nc;
        for (int64_t pc = 0; pc < x->k; pc += OM_GEMM_KC) {
            int64_t kc = x->k - pc < OM_GEMM_KC ? x->k - pc : OM_GEMM_KC;
            view bv = shifted(b, pc, jc, 1);
            ctx xi = *x;
            if (x->packed_b)   /* the K block at pc, then column jc: nr-column panels of kc */
                xi.bbuf = (float *)x->packed_b + pc * round_up(x->n, x->u->nr) + jc * kc;
            else
                pack_b(x->u, kc, nc, bv, x->bbuf);
            for (int64_t ic = m0; ic < m1; ic += x->mc) {
                int64_t mc = m1 - ic < x->mc ? m1 - ic : x->mc;
                view av = shifted(a, ic, pc, jc == n0);
                if (x->shared_a)   /* the K block at pc, then row ic: mr-row panels of kc */
                    xi.abuf = (float *)x->shared_a + pc * round_up(x->m, x->u->mr) + ic * kc;
                else
                    pack_a(x->u, mc, kc, av, x->abuf);
                macro_kernel(&xi, mc, nc, kc, c + ic * ldc + jc, ldc, pc > 0);
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
    const float *packed_b;         /* all of op(B) packed by the caller, or NULL */
} plan;

/* Thread `rank` of `size`'s part: its scratch, its share of the shared packing, its share of
 * the jobs (contiguous runs). The shares are explicit, not omp for loops, because a caller's
 * thread may run a whole product without a team of its own inside an outer parallel region.
 * Returns nonzero if scratch could not be allocated. */
static int run_jobs(const void *product_plan, int rank, int size) {
    const plan *pl = product_plan;
    const om_gemm_ukernel *u = pl->u;
    const int64_t m = pl->m, n = pl->n, k = pl->k, kc = min64(k, OM_GEMM_KC);
    const int64_t a_panels = (m + u->mr - 1) / u->mr, k_blocks = (k + OM_GEMM_KC - 1) / OM_GEMM_KC;
    const int64_t jobs = pl->batch * pl->gm * pl->gn;
    ctx x = {u, m, n, k, pl->mc, pl->nc, NULL, NULL, pl->shared_a, pl->packed_b};
    const size_t abytes = (size_t)(round_up(pl->mc, u->mr) * kc) * sizeof(float);
    const size_t bbytes = (size_t)(round_up(pl->nc, u->nr) * kc) * sizeof(float);
    if (!pl->shared_a) x.abuf = om_aligned_alloc(abytes);
    if (!pl->packed_b) x.bbuf = om_aligned_alloc(bbytes);
    int failed = 0;
    int64_t j;
    if (pl->shared_a) {    /* every (K block, mr-row panel) of op(A), as block() would pack it */
        const int64_t panels = k_blocks * a_panels;
        for (j = panels * rank / size; j < panels * (rank + 1) / size; j++) {
            int64_t pc = j / a_panels * OM_GEMM_KC, i0 = j % a_panels * u->mr;
            int64_t depth = min64(k - pc, OM_GEMM_KC), rows = min64(m - i0, u->mr);
            view panel = shifted(pl->a, i0, pc, 1);
            pack_a(u, rows, depth, panel, pl->shared_a + pc * a_panels * u->mr + i0 * depth);
        }
#pragma omp barrier
    }
    for (j = jobs * rank / size; j < jobs * (rank + 1) / size; j++) {
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

/* om_gemm, with op(B) already packed (packed_b, batch 1) or packed here. */
static int product(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
                   om_gemm_operand b, const float *packed_b, float *c, int nthreads) {
    if (batch <= 0 || m <= 0 || n <= 0) return 0;
    if (k == 0) {
        memset(c, 0, (size_t)(batch * m * n) * sizeof(float));
        return 0;
    }
    const om_gemm_ukernel *u = ukernels[om_isa]();
    plan pl = {u, batch, m, n, k, a.batch_stride, b.batch_stride, operand_view(a, m, k),
               operand_view(b, k, n), c, 1, 1, 0, 0, 0, 0, NULL, packed_b};

    /* Whole products per thread when the batch divides evenly, else sub-blocks of each. */
    int t = om_threads_for(batch * m * n * k, GRAIN_FMAS, nthreads);
    if (batch % t)
        choose_grid(m, n, u->mr, u->nr, a.trans ? PACK_COPY : PACK_TRANSPOSE,
                    b.trans && !packed_b ? PACK_TRANSPOSE : PACK_COPY, t, &pl.gm, &pl.gn);
    pl.bm = round_up((m + pl.gm - 1) / pl.gm, u->mr);
    pl.bn = round_up((n + pl.gn - 1) / pl.gn, u->nr);
    pl.mc = min64(u->mr * MC_TILES, pl.bm);
    pl.nc = min64(u->nr * NC_TILES, pl.bn);
    const size_t shared_bytes = (size_t)((m + u->mr - 1) / u->mr * u->mr * k) * sizeof(float);
    if (batch == 1 && pl.gm == 1 && pl.gn > 1 && shared_bytes <= SHARED_A_BYTES)
        pl.shared_a = om_aligned_alloc(shared_bytes);

    int failed = om_run_team(t, run_jobs, &pl);
    om_aligned_free(pl.shared_a);
    return failed ? -1 : 0;
}

int om_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t a_batch_stride, int trans_a,
                 const float *b, int64_t b_batch_stride, int trans_b,
                 float *c, int nthreads) {
    om_gemm_operand av = {a, a_batch_stride, trans_a, OM_F32, NULL};
    om_gemm_operand bv = {b, b_batch_stride, trans_b, OM_F32, NULL};
    return product(batch, m, n, k, av, bv, NULL, c, nthreads);
}

int om_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
            om_gemm_operand b, float *c, int nthreads) {
    return product(batch, m, n, k, a, b, NULL, c, nthreads);
}

int om_gemm_pack_b_f32(int64_t k, int64_t n, const float *b, int trans_b, om_gemm_packed *out) {
    const om_gemm_ukernel *u = ukernels[om_isa]();
    const int64_t npad = round_up(n, u->nr);
    out->k = k;
    out->n = n;
    out->isa = om_isa;
    out->b = b;
    out->trans_b = trans_b;
    out->panels = om_aligned_alloc((size_t)(npad * k > 0 ? npad * k : 1) * sizeof(float));
    if (!out->panels) return -1;
    const om_gemm_operand src = {b, 0, trans_b, OM_F32, NULL};
    const view bv = operand_view(src, k, n);
    for (int64_t pc = 0; pc < k && n > 0; pc += OM_GEMM_KC)
        pack_b(u, min64(k - pc, OM_GEMM_KC), n, shifted(bv, pc, 0, 0), out->panels + pc * npad);
    return 0;
}

void om_gemm_packed_free(om_gemm_packed *p) {
    om_aligned_free(p->panels);
    p->panels = NULL;
}

int om_gemm_packed_f32(int64_t m, const float *a, int trans_a, const om_gemm_packed *b, float *c,
                       int nthreads) {
    if (b->isa != om_isa) return -1;
    om_gemm_operand av = {a, 0, trans_a, OM_F32, NULL}, bv = {b->b, 0, b->trans_b, OM_F32, NULL};
    return product(1, m, b->n, b->k, av, bv, b->panels, c, nthreads);
}
