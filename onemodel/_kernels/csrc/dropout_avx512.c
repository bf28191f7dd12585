/* Dropout's draw on the AVX-512 path: dropout_draw.h compiled for AVX-512 (DQ: VPMULLQ
 * multiplies the hash's 64-bit lanes). */
#include "dropout_draw.h"

void om_dropout_draw_avx512(uint64_t stream, uint32_t threshold, int64_t begin, int64_t end,
                            uint8_t *keep) {
    om_dropout_draw(stream, threshold, begin, end, keep);
}
