/* Dropout's draw (the rule in dropout.c), one body that every path compiles with its own flags
 * (path.h): keep[i] for mask elements [begin, end) of draw stream `stream`. The loop has no
 * dependence but the counter's add, so the compiler vectorises the 64-bit hash: AVX2 builds
 * its products from 32-bit ones, AVX-512DQ has VPMULLQ. Integer arithmetic: the same bytes on
 * every path. SSE2 and NEON have no draw of their own (dropout.c runs the scalar one there):
 * with two 64-bit lanes and no 64-bit lane multiply, the compiler keeps the hash scalar. */
#include "path.h"

#if !OM_PATH_IS(sse2) && !OM_PATH_IS(neon)
#include <stdint.h>

#include "dropout.h"
#include "splitmix64.h"

void OM_PATH_CAT(om_dropout_draw_, OM_PATH)(uint64_t stream, uint32_t threshold, int64_t begin,
                                            int64_t end, uint8_t *keep) {
    uint64_t z = stream + (uint64_t)begin * OM_SPLITMIX64_GAMMA;
    for (int64_t i = begin; i < end; i++) {
        z += OM_SPLITMIX64_GAMMA;
        keep[i] = (uint8_t)((om_splitmix64_mix(z) >> 40) >= threshold);
    }
}
#endif
