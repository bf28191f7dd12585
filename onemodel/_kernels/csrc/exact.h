/* The exact gradient sum of onemodel/distributed.py: quantising float32 arrays into two int64
 * limbs (hi * 2^56 + lo) and rounding the integer sums back to float32, one pass each.
 *
 * Every operation is exact (integer arithmetic, and double operations whose results are
 * representable: a float32 times a small integer times a power of two, splitting a double at
 * 2^56) except the two roundings the module notes name, each one IEEE operation rounding to
 * nearest even. No fused multiply-add, no libm: every path (exact_paths.c compiled with its
 * instruction set's flags, selected by om_isa) gives the same bits by construction.
 */
#ifndef OM_EXACT_H
#define OM_EXACT_H

#include <stddef.h>
#include <stdint.h>

/* Elements per block of the passes: a block's limbs, codes or sums stay in L1. */
#define OM_EXACT_BLOCK 512

/* Adds round_half_even(g[i] * scale) for i < n into (hi[i], lo[i]), clamping |g * scale| to
 * `limit` (counted in *clamped), leaving lo in [0, 2^56) with the carry in hi; with `fresh`
 * the limbs are written as if they were zero (not read); with pack_bits (56 .. 63; 0: no) the
 * elements done are then packed as om_exact_pack does, those outside counted in *wide. A
 * non-finite g[i] * scale adds nothing, is counted in *bad and ORs its code into codes[i] (+inf
 * 1, -inf 2, NaN 4). With codes NULL the pass stops before the first non-finite element.
 * Returns the number of elements done (n unless it stopped). lo must hold at most 2^63 - 2^56
 * on entry. *hi_skipped is set to 1 when the hi limbs were left unwritten (fresh and packing
 * with codes NULL, every integer done inside 2^(pack_bits - 1): lo >> 56 gives them), else 0. */
size_t om_exact_add(const float *g, size_t n, double scale, double limit, int64_t *hi,
                    int64_t *lo, uint8_t *codes, int64_t *clamped, int64_t *bad, int fresh,
                    int pack_bits, int64_t *wide, int *hi_skipped);

/* The packed integers' pass of om_exact_add, fused with their addition: lo[i] +=
 * round_half_even(g[i] * scale) (with `fresh`, lo[i] = it), a block of elements at a time,
 * while a block's |g * scale| are finite and below 2^55; returns the elements done (n, or the
 * start of the first block that is not). The caller keeps the sums inside int64 (at most 127
 * such adds of integers inside 2^56). */
size_t om_exact_add_packed(const float *g, size_t n, double scale, int64_t *lo, int fresh);

/* Carries lo into hi: lo back in [0, 2^56). */
void om_exact_normalise(int64_t *hi, int64_t *lo, size_t n);

/* Normalises the limbs (as om_exact_normalise) and writes each integer whole into lo, wrapping
 * modulo 2^64 (hi keeps the high limb, so a sum of packed integers and the sum of the hi limbs
 * give the sum of the lo limbs back). Returns how many integers lie outside [-2^bits, 2^bits),
 * 56 <= bits <= 63: a sum of W packed integers is exact when none does for bits = 63 -
 * ceil(log2 W). */
int64_t om_exact_pack(int64_t *hi, int64_t *lo, size_t n, int bits);

/* out[i] = float32 of (hi[i] * 2^56 + lo[i]) * 2^grid / count, or of lo[i] * 2^grid / count
 * when hi is NULL (packed integers), rounded once (the quotient kept to at least 26 bits with
 * its remainder jammed into the last bit, or for a power-of-two count the integer converted
 * directly; a second rounding only in float32's subnormal range). *top receives the largest
 * bits of a finite |out[i]| (0 if none). count in [1, 2^35); magic = ceil(2^(61 + l) / count),
 * l = bit length of count - 1 rounded up (ceil(log2 count)), so that floor(x * magic /
 * 2^(61 + l)) = floor(x / count) for every x < 2^61 (Granlund and Montgomery 1994, 4.2). */
void om_exact_round(const int64_t *hi, const int64_t *lo, size_t n, int grid, int64_t count,
                    uint64_t magic, int l, float *out, uint32_t *top);

/* The exact sum of `nrows` rows of n float32 each (row w at rows[w], scale[w] its weight times
 * 2^-grid, scale 0 for a worker without that gradient), rounded: out[i] is what adding
 * each row in turn by om_exact_add into fresh limbs (clamped counted in *clamped) and
 * om_exact_round would give, and non-finite elements then made +inf (code 1), -inf (2) or NaN
 * (4, or +inf and -inf) as the distributed module's result does. Blocks whose integers all
 * fit in an int64 are summed in double, exactly (a two-sum's rounded sum and its error), the
 * others in limbs; either lives in one block on the stack, so memory is read once and
 * written once. *top is folded the largest bits of a finite
 * |out[i]|. nrows in [1, 127]. */
void om_exact_sum_rows(const float *const *rows, int nrows, const double *scale,
                       double limit, size_t n, int grid, int64_t count, uint64_t magic, int l,
                       float *out, uint32_t *top, int64_t *clamped);

#endif
