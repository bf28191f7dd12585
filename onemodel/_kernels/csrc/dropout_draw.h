/* Dropout's draw (the rule in dropout.c), one definition that every path compiles with its own
 * flags: keep[i] for mask elements [begin, end) of draw stream `stream`. The loop has no
 * dependence but the counter's add, so the compiler vectorises the 64-bit hash: AVX2 builds
 * its products from 32-bit ones, AVX-512DQ has VPMULLQ. Integer arithmetic: the same bytes on
 * every path. */
#ifndef OM_DROPOUT_DRAW_H
#define OM_DROPOUT_DRAW_H

#include <stdint.h>

#define OM_DROPOUT_GOLDEN 0x9E3779B97F4A7C15ULL

static inline uint64_t om_dropout_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static inline void om_dropout_draw(uint64_t stream, uint32_t threshold, int64_t begin,
                                   int64_t end, uint8_t *keep) {
    uint64_t z = stream + (uint64_t)begin * OM_DROPOUT_GOLDEN;
    for (int64_t i = begin; i < end; i++) {
        z += OM_DROPOUT_GOLDEN;
        keep[i] = (uint8_t)((om_dropout_mix(z) >> 40) >= threshold);
    }
}

/* One path's draw (dropout_<path>.c; the scalar one in dropout.c). */
typedef void (*om_dropout_draw_fn)(uint64_t stream, uint32_t threshold, int64_t begin,
                                   int64_t end, uint8_t *keep);
void om_dropout_draw_scalar(uint64_t, uint32_t, int64_t, int64_t, uint8_t *);
void om_dropout_draw_avx2(uint64_t, uint32_t, int64_t, int64_t, uint8_t *);
void om_dropout_draw_avx512(uint64_t, uint32_t, int64_t, int64_t, uint8_t *);

#endif
