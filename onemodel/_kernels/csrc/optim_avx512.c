/* Optimizer kernels, avx512 path: 16 lanes of __m512 (the shared translation is optim_simd.h). */
#include <immintrin.h>

#include "optim.h"

typedef __m512 V;
enum { W = 16 };
#define LOAD(x) _mm512_loadu_ps(x)
#define STORE(x, v) _mm512_storeu_ps(x, v)
#define SET1(x) _mm512_set1_ps(x)
#define ADD(a, b) _mm512_add_ps(a, b)
#define SUB(a, b) _mm512_sub_ps(a, b)
#define MUL(a, b) _mm512_mul_ps(a, b)
#define DIV(a, b) _mm512_div_ps(a, b)
#define SQRT(a) _mm512_sqrt_ps(a)
#define MAX(a, b) _mm512_max_ps(a, b)
#define MIN(a, b) _mm512_min_ps(a, b)
#define OM_NAME(f) f##_avx512

#include "optim_simd.h"

OM_PATH_PROBE(optim, avx512)
