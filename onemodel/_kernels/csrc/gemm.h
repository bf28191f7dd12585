/* Single-precision matrix product C = op(A) * op(B), batched (see gemm.c for the design note).
 *
 * The driver (gemm.c) blocks and packs; each instruction-set path contributes only a
 * micro-kernel that updates one MR x NR tile of C from packed panels:
 *   a: kc groups of MR values (column k of the MR rows of op(A)), 64-byte aligned;
 *   b: kc groups of NR values (row k of the NR columns of op(B)), 64-byte aligned;
 *   c: the tile, row stride ldc; accumulate = 0 starts every element from +0.0f, 1 continues
 *      from the value stored in c. Element (i, j) runs acc = fma(a[k*MR+i], b[k*NR+j], acc)
 *      for k = 0..kc-1 in that order, one rounding per fused multiply-add.
 * The bfloat16 dot-product kernel (gemm_avx512bf16.c) takes the same panels after
 * packing has written them as pairs of depths (gemm.c), kc even.
 */
#ifndef OM_GEMM_H
#define OM_GEMM_H

#include <stdint.h>

#include "isa.h"

#if defined(__GNUC__) || defined(__clang__)
#define OM_PREFETCH(p) __builtin_prefetch(p)
#else
#define OM_PREFETCH(p) ((void)(p))
#endif

/* Depth of one K block. The same on every path (docs/spec/engine.md section 4, rule 3), although
 * the float32 accumulator goes through C between blocks so the bits would not depend on it. */
#define OM_GEMM_KC 256

typedef void (*om_gemm_ukernel_fn)(int64_t kc, const float *a, const float *b, float *c,
                                   int64_t ldc, int accumulate);

/* Packing's transposing step: dst[k * width + i] = src[i * rs + k] for i < rows <= 16 and
 * k < depth (rows of the source are contiguous along k; nothing else in dst is written). */
typedef void (*om_gemm_transpose_fn)(int64_t depth, int rows, const float *src, int64_t rs,
                                     float *dst, int width);

/* How packing reads an operand. Panels always hold float32; a rounding format stores each
 * value rounded to bfloat16 / float16 (half.h), a 2-byte format widens stored bits. */
enum { OM_F32 = 0, OM_F32_TO_BF16 = 1, OM_F32_TO_F16 = 2, OM_BF16 = 3, OM_F16 = 4 };

/* Packing's converting step over `rows` runs of n values, run r from element r * stride of src
 * (elements of the format's size) into dst + r * dst_stride: dst[i] = src[i] as `fmt` reads
 * it, and for a rounding format with save != NULL also save[r * stride + i] = the 2-byte bits
 * of the rounded value. bfloat16 subnormals are read as zeros of their sign (in dst; save
 * keeps them). Returns whether a bfloat16 value in dst is tiny (has_tiny's test), else 0. */
typedef int (*om_gemm_convert_fn)(int64_t rows, int64_t n, const void *src, int64_t stride,
                                  int fmt, float *dst, int64_t dst_stride, uint16_t *save);
/* `rows` runs of n values of x (in format fmt), run r from element e + r * stride, into dst
 * back to back, by the selected path's convert; a rounding format's bits into save (x's
 * layout) unless save is NULL. */
void om_gemm_load(const void *x, int fmt, int64_t e, int64_t rows, int64_t n, int64_t stride,
                  float *dst, uint16_t *save);

/* The converting steps of the dot-product kernel (gemm_avx512bf16.c): bfloat16 words of pairs
 * of depths into panels `width` words wide, from rows across the depth (convert_pairs: the
 * n values of each depth, stride elements apart, across panels panel_stride words apart) or
 * from `rows` runs along the depth, stride elements apart (convert_run_pairs: the lanes of
 * one panel, those from rows to fill zeroed). */
typedef void (*om_gemm_convert_pairs_fn)(int64_t depth, int64_t n, const void *src,
                                         int64_t stride, int fmt, uint32_t *dst, int width,
                                         int64_t panel_stride, uint16_t *save);
typedef void (*om_gemm_convert_run_pairs_fn)(int64_t depth, int rows, const void *src,
                                             int64_t stride, int fmt, uint32_t *dst, int width,
                                             int fill, uint16_t *save);

typedef struct {
    int mr, nr;                 /* tile shape; nr is a multiple of the vector width */
    om_gemm_ukernel_fn kernel;
    om_gemm_transpose_fn transpose;
    om_gemm_convert_fn convert;
    om_gemm_convert_pairs_fn convert_pairs;          /* NULL but for the dot kernel's */
    om_gemm_convert_run_pairs_fn convert_run_pairs;
    /* Whether a nonzero one of n floats is below 2^-56 in magnitude (the widening paths'). */
    int (*has_tiny)(const float *x, int64_t n);
    /* NULL, or the transposing step over `rows` <= 16 runs in any format (stride elements
     * apart), converting as convert does, in one pass; returns convert's. */
    int (*convert_transpose)(int64_t depth, int rows, const void *src, int64_t stride, int fmt,
                             float *dst, int width, uint16_t *save);
} om_gemm_ukernel;

/* The plain C transpose, for paths without a faster one (data movement only: no bits change). */
void om_gemm_transpose_f32(int64_t depth, int rows, const float *src, int64_t rs, float *dst,
                           int width);

const om_gemm_ukernel *om_gemm_ukernel_f32_scalar(void);
const om_gemm_ukernel *om_gemm_ukernel_f32_sse2(void);
const om_gemm_ukernel *om_gemm_ukernel_f32_avx2(void);
const om_gemm_ukernel *om_gemm_ukernel_f32_avx512(void);
const om_gemm_ukernel *om_gemm_ukernel_f32_neon(void);
/* VDPBF16PS (built when the compiler has AVX512_BF16): mr, nr, the kernel, which takes panels
 * of pairs and replaces the avx512 path's own, and the pair converters that pack them. */
const om_gemm_ukernel *om_gemm_ukernel_bf16_avx512bf16(void);

/* Whether bfloat16 products use the dot-product kernel when the avx512 path is selected: on by
 * default where om_bf16_dot_preferred(). om_gemm_set_bf16_dot(0) makes them widen as every
 * other path does (the same bits); asking for 1 without the instruction returns -1. */
int om_gemm_set_bf16_dot(int on);
int om_gemm_bf16_dot(void);

/* C[p] = op(A[p]) * op(B[p]) for p < batch. op(A) is m x k: a holds it row-major (m, k), or
 * (k, m) when trans_a. op(B) is k x n: b holds (k, n), or (n, k) when trans_b. c is (m, n)
 * row-major. Batch strides are in elements; 0 repeats the same operand for every product.
 * k == 0 writes zeros. c must not overlap a or b. Returns 0, or -1 when scratch memory could
 * not be allocated (c is then partly written). */
int om_gemm_f32(int64_t batch, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t a_batch_stride, int trans_a,
                 const float *b, int64_t b_batch_stride, int trans_b,
                 float *c, int nthreads);

/* One operand of om_gemm: its storage as for om_gemm_f32 (elements of 2 bytes for OM_BF16 and
 * OM_F16), how packing reads it, and, for a rounding format, where packing stores the rounded
 * operand's 2-byte bits (the layout of p, batch strides included), or NULL. */
typedef struct {
    const void *p;
    int64_t batch_stride;
    int trans, fmt;
    uint16_t *save;
} om_gemm_operand;

/* om_gemm_f32 over operands packing converts: the float32 product of the converted values,
 * bit for bit what om_gemm_f32 gives on them (each element of `save` is written once), except
 * for a bfloat16 product (both operands bf16), which follows the dot-product instruction
 * (gemm.c): an odd depth is padded with a zero, and a sum that is tiny after rounding becomes a
 * zero of its sign. With add, c = c + the product instead (one rounded addition per element,
 * the bits of adding the product made whole), for 1 <= k <= OM_GEMM_KC only (returns -2
 * otherwise: more K blocks carry partial sums through c). */
int om_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
            om_gemm_operand b, float *c, int add, int nthreads);

/* Products of at most OM_GEMM_SMALL_FMAS multiply-adds (float32 operands, no add into c, no
 * packed b) skip blocking, packing and the thread team: om_gemm_small_f32 runs the chain of
 * every element straight from the operands, as the scalar micro-kernel does (gemm_scalar.c):
 * the same bits, since fmaf is correctly rounded and carrying the sum through c between K
 * blocks changes none. */
#define OM_GEMM_SMALL_FMAS 512
void om_gemm_small_f32(int64_t batch, int64_t m, int64_t n, int64_t k, om_gemm_operand a,
                       om_gemm_operand b, float *c);

/* op(B) packed once for many products with it, on the path (and with the bf16 kernel choice)
 * in force when packing. */
typedef struct {
    int64_t k, n;
    int isa, trans_b, fmt, pairs;
    const void *b;      /* the source, which must stay unchanged while the packing is used */
    float *panels;
    int *bmin;          /* a widening bfloat16 product's smallest exponent per panel, or NULL */
} om_gemm_packed;

/* Packs op(B) (k x n, stored and converted as om_gemm's operand b; its save is not written).
 * Returns 0, or -1 when out of memory. */
int om_gemm_pack_b(int64_t k, int64_t n, om_gemm_operand b, om_gemm_packed *out);
void om_gemm_packed_free(om_gemm_packed *p);
/* C (m x n) = op(A) * the packed op(B): om_gemm's result, bit for bit (batch 1). Returns -1
 * when scratch memory could not be allocated, when the packing was made on another path or
 * kernel choice, or when one operand is bfloat16 and the other is not. */
int om_gemm_packed_product(int64_t m, om_gemm_operand a, const om_gemm_packed *b, float *c,
                           int nthreads);

/* ---- Products of panels a caller packs itself (the convolution's, conv.c) ---------------- */

/* How such a product runs: the selected path's micro-kernel set (the dot kernel's, whose
 * panels are pairs, for a bfloat16 product where it is on) and whether it is a bfloat16
 * product, which follows the dot-product instruction's rule (gemm.c) on every path. */
typedef struct {
    om_gemm_ukernel u;
    int fmt;            /* OM_F32, or the format packing rounds to (OM_F32_TO_BF16, _F16) */
    int bf16, pairs;
} om_gemm_rule;

/* The rule for operands rounded to bfloat16 (half = 1), float16 (2), or float32 (0). */
om_gemm_rule om_gemm_rule_for(int half);

/* A panel of `width` lanes over `depth` depths, packed, is om_gemm_packed_depth(depth) * width
 * floats: a bfloat16 product pads an odd depth with a zero. */
int64_t om_gemm_packed_depth(const om_gemm_rule *r, int64_t depth);

/* Finishes `count` panels (one after the other) that the caller packed from float32 values
 * (already rounded to r's format if `rounded`): their values rounded, and for a bfloat16
 * product the padding depth zeroed, then made pairs in place for the dot kernel, or else
 * emin[q] = panel q's smallest exponent (the tile rule of the widening paths) unless emin is
 * NULL. Nothing for a float32 product. */
void om_gemm_finish_panels(const om_gemm_rule *r, float *panels, int64_t count, int64_t depth,
                           int width, int *emin, int rounded);
/* A lower bound of the exponents of the nonzero values among n floats, as emin holds them: of
 * the values a caller then packs (a bound for every panel packed from them). */
int om_gemm_min_exponent(const om_gemm_rule *r, const float *x, int64_t n);

/* A matrix whose columns come in segments of `seg` (the images of a batch): element (i, j) at
 * p[i * ld + (j / seg) * seg_stride + j mod seg]; add (one segment only): finished tiles are
 * added into it. */
typedef struct {
    float *p;
    int64_t ld, seg, seg_stride;
    int add;
} om_gemm_out;

/* Columns [c0, c0 + n) of c (m rows) = a * b, or += with accumulate: a in panels of mr rows, b
 * in panels of nr columns, both over the packed depth d and finished, emin theirs (NULL but
 * for a widening bfloat16 product). Each element is the kernel's chain over the depths in
 * order, from +0 or from the stored value: blocking the depth changes no bit. *slow says
 * whether a widening bfloat16 product ran the dot rule in C on a tile of the sums carried in
 * (0 before the first product into c), and becomes 1 if one does here. Threads split the row
 * panels of a. */
void om_gemm_panels(const om_gemm_rule *r, int64_t m, int64_t n, int64_t d, const float *a,
                    const int *amin, const float *b, const int *bmin, const om_gemm_out *c,
                    int64_t c0, int accumulate, int *slow, int nthreads);

#endif
