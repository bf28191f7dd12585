/* Optimizer kernels, sse2 path: 4 lanes of __m128 (the shared translation is optim_simd.h). */
#include <emmintrin.h>

#include "optim.h"

typedef __m128 V;
enum { W = 4 };
#define LOAD(x) _mm_loadu_ps(x)
#define STORE(x, v) _mm_storeu_ps(x, v)
#define SET1(x) _mm_set1_ps(x)
#define ADD(a, b) _mm_add_ps(a, b)
#define SUB(a, b) _mm_sub_ps(a, b)
#define MUL(a, b) _mm_mul_ps(a, b)
#define DIV(a, b) _mm_div_ps(a, b)
#define SQRT(a) _mm_sqrt_ps(a)
#define MAX(a, b) _mm_max_ps(a, b)
#define MIN(a, b) _mm_min_ps(a, b)
#define OM_NAME(f) f##_sse2

#include "optim_simd.h"

OM_PATH_PROBE(optim, sse2)
