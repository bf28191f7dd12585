/* Optimizer kernels, avx2 path: 8 lanes of __m256 (the shared translation is optim_simd.h). */
#include <immintrin.h>

#include "optim.h"

typedef __m256 V;
enum { W = 8 };
#define LOAD(x) _mm256_loadu_ps(x)
#define STORE(x, v) _mm256_storeu_ps(x, v)
#define SET1(x) _mm256_set1_ps(x)
#define ADD(a, b) _mm256_add_ps(a, b)
#define SUB(a, b) _mm256_sub_ps(a, b)
#define MUL(a, b) _mm256_mul_ps(a, b)
#define DIV(a, b) _mm256_div_ps(a, b)
#define SQRT(a) _mm256_sqrt_ps(a)
#define MAX(a, b) _mm256_max_ps(a, b)
#define MIN(a, b) _mm256_min_ps(a, b)
#define OM_NAME(f) f##_avx2

#include "optim_simd.h"

OM_PATH_PROBE(optim, avx2)
