/* The path a per-path source is being compiled for.
 *
 * A family whose kernels are one body for every instruction-set path keeps that body in one
 * source, <family>_paths.c, which setup.py compiles once per path of the target architecture
 * (scalar, then sse2, avx2, avx512 on x86-64, neon on aarch64) with -DOM_PATH=<path> (MSVC:
 * /DOM_PATH=<path>) and that path's instruction-set flags, each object in a build folder of its
 * own. The source includes this file, then the path's vector vocabulary (OM_SIMD_HEADER,
 * simd/<path>.h) and its vmath element functions (OM_VMATH_HEADER: vmath.h on the scalar path,
 * vmath_<path>.h on the others), and states its path with OM_PATH_PROBE(family, OM_PATH).
 * A family that has no code of its own on some path leaves the rest of its source out with
 * #if OM_PATH_IS(<path>) (the object is then empty).
 */
#ifndef OM_PATH_H
#define OM_PATH_H

#ifndef OM_PATH
#error "a *_paths.c source is compiled with -DOM_PATH=<path> (scalar, sse2, avx2, avx512, neon)"
#endif

/* Two levels, so that the argument is expanded (OM_PATH to its path) before # or ##. */
#define OM_PATH_STR_(x) #x
#define OM_PATH_STR(x) OM_PATH_STR_(x)
#define OM_PATH_CAT_(a, b) a##b
#define OM_PATH_CAT(a, b) OM_PATH_CAT_(a, b)

/* The path's number, for #if (isa.h's OM_ISA_* are enum constants, which #if reads as 0). */
#define OM_PATH_NUM_scalar 1
#define OM_PATH_NUM_sse2 2
#define OM_PATH_NUM_avx2 3
#define OM_PATH_NUM_avx512 4
#define OM_PATH_NUM_neon 5
#define OM_PATH_NUM OM_PATH_CAT(OM_PATH_NUM_, OM_PATH)
#define OM_PATH_IS(path) (OM_PATH_NUM == OM_PATH_NUM_##path)
#if !OM_PATH_NUM
#error "OM_PATH names no path (scalar, sse2, avx2, avx512, neon)"
#endif

#define OM_SIMD_HEADER OM_PATH_STR(simd/OM_PATH.h)
#if OM_PATH_IS(scalar)
#define OM_VMATH_HEADER "vmath.h"
#else
#define OM_VMATH_HEADER OM_PATH_STR(OM_PATH_CAT(vmath_, OM_PATH).h)
#endif

#endif
