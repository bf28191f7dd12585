/* The exact sum's entry points: the selected path's loops (exact_impl.h). The SSE2 entry is
 * the scalar function (isa.h). */
#include "exact.h"
#include "isa.h"

#define EXACT_DECLARE(p)                                                                      \
    size_t om_exact_add_##p(const float *, size_t, double, double, int64_t *, int64_t *,       \
                            uint8_t *, int64_t *, int64_t *, int, int, int64_t *, int *);      \
    void om_exact_normalise_##p(int64_t *, int64_t *, size_t);                                 \
    int64_t om_exact_pack_##p(int64_t *, int64_t *, size_t, int);                              \
    void om_exact_round_##p(const int64_t *, const int64_t *, size_t, int, int64_t, uint64_t,  \
                            int, float *, uint32_t *);
EXACT_DECLARE(scalar)
EXACT_DECLARE(avx2)
EXACT_DECLARE(avx512)
EXACT_DECLARE(neon)


typedef size_t (*add_fn)(const float *, size_t, double, double, int64_t *, int64_t *,
                         uint8_t *, int64_t *, int64_t *, int, int, int64_t *, int *);
typedef void (*normalise_fn)(int64_t *, int64_t *, size_t);
typedef int64_t (*pack_fn)(int64_t *, int64_t *, size_t, int);
typedef void (*round_fn)(const int64_t *, const int64_t *, size_t, int, int64_t, uint64_t,
                         int, float *, uint32_t *);
static const add_fn add_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_exact_add);
static const normalise_fn normalise_table[OM_ISA_COUNT] =
    OM_ISA_TABLE_SCALAR_SSE2(om_exact_normalise);
static const pack_fn pack_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_exact_pack);
static const round_fn round_table[OM_ISA_COUNT] = OM_ISA_TABLE_SCALAR_SSE2(om_exact_round);

size_t om_exact_add(const float *g, size_t n, double scale, double limit, int64_t *hi,
                    int64_t *lo, uint8_t *codes, int64_t *clamped, int64_t *bad, int fresh,
                    int pack_bits, int64_t *wide, int *hi_skipped) {
    return add_table[om_isa](g, n, scale, limit, hi, lo, codes, clamped, bad, fresh,
                             pack_bits, wide, hi_skipped);
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

OM_PATH_DISPATCH(exact, OM_ISA_TABLE_SCALAR_SSE2)
