/* Dropout's draw on the AVX2 path: dropout_draw.h compiled for AVX2, which builds the hash's
 * 64-bit products from 32-bit ones. */
#include "dropout_draw.h"

void om_dropout_draw_avx2(uint64_t stream, uint32_t threshold, int64_t begin, int64_t end,
                          uint8_t *keep) {
    om_dropout_draw(stream, threshold, begin, end, keep);
}
