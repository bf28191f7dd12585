/* SplitMix64 (Steele, Lea and Flood 2014), the one C definition of its constants and output
 * function; onemodel/random.py is the Python one. Dropout's draw (dropout_paths.c) and SR4's
 * hash (sr4.h) use the output function; the vector paths of SR4 multiply by the same M1, M2.
 * Unsigned 64-bit wrapping arithmetic: the same bits on every path and compiler. */
#ifndef OM_SPLITMIX64_H
#define OM_SPLITMIX64_H

#include <stdint.h>

#define OM_SPLITMIX64_GAMMA 0x9E3779B97F4A7C15ULL  /* the golden-ratio increment */
#define OM_SPLITMIX64_M1 0xBF58476D1CE4E5B9ULL
#define OM_SPLITMIX64_M2 0x94D049BB133111EBULL

/* The output function alone (no increment of the state). */
static inline uint64_t om_splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * OM_SPLITMIX64_M1;
    z = (z ^ (z >> 27)) * OM_SPLITMIX64_M2;
    return z ^ (z >> 31);
}

#endif
