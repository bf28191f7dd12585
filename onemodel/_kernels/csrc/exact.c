/* The exact sum's entry points: the selected path's loops (exact_paths.c). The SSE2 entry is
 * the scalar function (isa.h). */
#include "exact.h"

#include <string.h>

#include "isa.h"

#define EXACT_DECLARE(p)                                                                      \
    size_t om_exact_add_##p(const float *, size_t, double, double, int64_t *, int64_t *,       \
                            uint8_t *, int64_t *, int64_t *, int, int, int64_t *, int *);      \
    size_t om_exact_add_packed_##p(const float *, size_t, double, int64_t *, int);             \
    void om_exact_normalise_##p(int64_t *, int64_t *, size_t);                                 \
    int64_t om_exact_pack_##p(int64_t *, int64_t *, size_t, int);                              \
    void om_exact_round_##p(const int64_t *, const int64_t *, size_t, int, int64_t, uint64_t,  \
                            int, float *, uint32_t *);                                         \
    int om_exact_sum_rounded_##p(const float *const *, size_t, int, const double *, double,    \
                                 size_t, int, int64_t, uint64_t, int, float *, uint32_t *);
EXACT_DECLARE(scalar)
EXACT_DECLARE(avx2)
EXACT_DECLARE(avx512)
EXACT_DECLARE(neon)

typedef size_t (*add_fn)(const float *, size_t, double, double, int64_t *, int64_t *,
                         uint8_t *, int64_t *, int64_t *, int, int, int64_t *, int *);
typedef size_t (*add_packed_fn)(const float *, size_t, double, int64_t *, int);
typedef void (*normalise_fn)(int64_t *, int64_t *, size_t);
typedef int64_t (*pack_fn)(int64_t *, int64_t *, size_t, int);
typedef void (*round_fn)(const int64_t *, const int64_t *, size_t, int, int64_t, uint64_t,
                         int, float *, uint32_t *);
static const add_fn add_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_exact_add);
static const add_packed_fn add_packed_table[OM_ISA_COUNT] =
    OM_ISA_TABLE_SCALAR_SSE2(om_exact_add_packed);
static const normalise_fn normalise_table[OM_ISA_COUNT] =
    OM_ISA_TABLE_SCALAR_SSE2(om_exact_normalise);
static const pack_fn pack_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_exact_pack);
static const round_fn round_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_exact_round);
/* out[i] = the rounded sum over the rows w of the integers of rows[w][at + i] * scale[w] (as
 * om_exact_add quantises them), i < n <= OM_EXACT_BLOCK, and *top their largest finite bits,
 * returning 1, when every such |value| is at most `packable` (2^62 / 2^ceil(log2 nrows), so the
 * sum fits in an int64); 0 otherwise, nothing written. */
typedef int (*sum_rounded_fn)(const float *const *, size_t, int, const double *, double,
                              size_t, int, int64_t, uint64_t, int, float *, uint32_t *);
static const sum_rounded_fn sum_rounded_table[OM_ISA_COUNT] =
    OM_ISA_TABLE_SCALAR_SSE2(om_exact_sum_rounded);

size_t om_exact_add(const float *g, size_t n, double scale, double limit, int64_t *hi,
                    int64_t *lo, uint8_t *codes, int64_t *clamped, int64_t *bad, int fresh,
                    int pack_bits, int64_t *wide, int *hi_skipped) {
    return add_table[om_isa](g, n, scale, limit, hi, lo, codes, clamped, bad, fresh,
                             pack_bits, wide, hi_skipped);
}

size_t om_exact_add_packed(const float *g, size_t n, double scale, int64_t *lo, int fresh) {
    return add_packed_table[om_isa](g, n, scale, lo, fresh);
}

void om_exact_normalise(int64_t *hi, int64_t *lo, size_t n) {
    normalise_table[om_isa](hi, lo, n);
}

int64_t om_exact_pack(int64_t *hi, int64_t *lo, size_t n, int bits) {
    return pack_table[om_isa](hi, lo, n, bits);
}

void om_exact_round(const int64_t *hi, const int64_t *lo, size_t n, int grid, int64_t count,
                    uint64_t magic, int l, float *out, uint32_t *top) {
    round_table[om_isa](hi, lo, n, grid, count, magic, l, out, top);
}

/* The codes of a block applied to its results; returns their largest finite bits. */
static uint32_t apply_codes(const uint8_t *codes, float *out, size_t n) {
    const uint32_t pos_inf = 0x7f800000u, neg_inf = 0xff800000u, nan = 0x7fc00000u;
    uint32_t top = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t c = codes[i];
        if (c) memcpy(out + i, c == 1 ? &pos_inf : c == 2 ? &neg_inf : &nan, 4);
        uint32_t b;
        memcpy(&b, out + i, 4);
        b &= 0x7fffffffu;
        if (b < 0x7f800000u && b > top) top = b;
    }
    return top;
}

void om_exact_sum_rows(const float *const *rows, int nrows, const double *scale,
                       double limit, size_t n, int grid, int64_t count, uint64_t magic, int l,
                       float *out, uint32_t *top, int64_t *clamped) {
    int64_t hi[OM_EXACT_BLOCK], lo[OM_EXACT_BLOCK];
    uint8_t codes[OM_EXACT_BLOCK];
    int log2_rows = 0;   /* ceil(log2 nrows): each row's integers inside 2^(62 - it) fit */
    while (((int64_t)1 << log2_rows) < nrows) log2_rows++;
    const double packable = (double)((int64_t)1 << (62 - log2_rows));
    for (size_t i = 0; i < n; i += OM_EXACT_BLOCK) {
        const size_t len = n - i < OM_EXACT_BLOCK ? n - i : OM_EXACT_BLOCK;
        uint32_t t = 0;
        if (!sum_rounded_table[om_isa](rows, i, nrows, scale, packable, len, grid, count, magic,
                                       l, out + i, &t)) {
            int64_t bad = 0, wide = 0;
            int skipped = 0;
            memset(codes, 0, len);
            for (int w = 0; w < nrows; w++)
                add_table[om_isa](rows[w] + i, len, scale[w], limit, hi, lo,
                                  codes, clamped, &bad, w == 0, 0, &wide, &skipped);
            round_table[om_isa](hi, lo, len, grid, count, magic, l, out + i, &t);
            if (bad) t = apply_codes(codes, out + i, len);
        }
        if (t > *top) *top = t;
    }
}

OM_PATH_DISPATCH(exact, OM_ISA_TABLE_SCALAR_SSE2)
