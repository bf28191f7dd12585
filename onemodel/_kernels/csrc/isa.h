/* Instruction-set paths and the selected one.
 *
 * Every kernel family provides one function per path with the same signature and the suffix
 * of its path (_scalar, _sse2, _avx2, _avx512, _neon). The scalar one is the reference; the
 * others are translations of it that give the same bits in exact mode. om_isa is chosen once
 * at import (onemodel/_config.py) and only ever names a path this CPU has.
 */
#ifndef OM_ISA_H
#define OM_ISA_H

#include <stddef.h>
#include <stdint.h>

enum { OM_ISA_SCALAR = 0, OM_ISA_SSE2 = 1, OM_ISA_AVX2 = 2, OM_ISA_AVX512 = 3, OM_ISA_NEON = 4,
       OM_ISA_COUNT = 5 };

#ifndef OM_BUILD_SSE2
#define OM_BUILD_SSE2 0
#endif
#ifndef OM_BUILD_AVX2
#define OM_BUILD_AVX2 0
#endif
#ifndef OM_BUILD_AVX512
#define OM_BUILD_AVX512 0
#endif
#ifndef OM_BUILD_AVX512BF16
#define OM_BUILD_AVX512BF16 0
#endif
#ifndef OM_BUILD_NEON
#define OM_BUILD_NEON 0
#endif
#ifndef OM_HAVE_OPENMP
#define OM_HAVE_OPENMP 0
#endif

/* A pragma inside a macro and the alignment of a local array, in the spelling every compiler
 * takes: MSVC and clang-cl have __pragma and __declspec(align) in any C mode, while _Pragma
 * and _Alignas need a recent MSVC in /std:c11 mode. OpenMP is written as MSVC's C compiler
 * takes it (OpenMP 2.0): no atomic read/write, no collapse, and the index of an omp for loop
 * is a signed integer declared before the pragma (a declaration inside the for statement is
 * error C3015). */
#if defined(_MSC_VER)
#define OM_PRAGMA(x) __pragma(x)
#define OM_ALIGNED(n) __declspec(align(n))
#else
#define OM_PRAGMA(x) _Pragma(#x)
#define OM_ALIGNED(n) _Alignas(n)
#endif

/* A loop unroll hint; MSVC has no such pragma (and warns on unknown ones). */
#if defined(_MSC_VER) && !defined(__clang__)
#define OM_UNROLL(n)
#else
#define OM_UNROLL(n) OM_PRAGMA(GCC unroll n)
#endif

/* For a function whose callers pass a format as a constant, so that its choice folds away. */
#if defined(__GNUC__) || defined(__clang__)
#define OM_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define OM_ALWAYS_INLINE __forceinline
#else
#define OM_ALWAYS_INLINE inline
#endif

/* Before Visual Studio 2022 (MSVC 19.30), /fp:precise let the compiler contract a multiply and
 * an add into a fused multiply-add on x64, which would change exact-mode bits. */
#if defined(_MSC_VER) && !defined(__clang__) && _MSC_VER < 1930
#error "onemodel's kernels need MSVC 19.30 (Visual Studio 2022) or later"
#endif

extern int om_isa;
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
/* CPUID leaf, subleaf -> eax, ebx, ecx, edx (cpu.c). */
void om_cpuid(int leaf, int sub, unsigned r[4]);
#endif

/* 1 if the path was compiled into this build and the CPU (and OS) can run it. */
int om_isa_available(int isa);
/* 1 if this build has the AVX512_BF16 bfloat16 dot-product kernels and the CPU can run them
 * (they belong to the avx512 path: gemm.c uses them when that path is selected). */
int om_bf16_dot_available(void);
/* 1 if they are available and faster than widening here: not on CPUs with AMX-BF16, whose
 * VDPBF16PS loses to the FMA kernel (cpu.c). Both give the same bits. */
int om_bf16_dot_preferred(void);
/* Sets om_isa; returns 0, or -1 when the path is not available. */
int om_set_isa(int isa);
/* The selected path: the one every kernel family dispatches to. */
int om_active_isa(void);
/* Short name of the compiler that built the kernels, e.g. "gcc 12.2.0". */
const char *om_compiler(void);
/* 64-byte aligned scratch, for the packed panels the micro-kernels load with aligned loads
 * (aligned_alloc is not in every C library); NULL when out of memory. om_aligned_free(NULL)
 * does nothing. */
void *om_aligned_alloc(size_t bytes);
void om_aligned_free(void *p);
/* fn(ctx, rank, size) on `threads` threads (rank = 0..size-1), their results OR-ed: the one way
 * a kernel enters threads (om_run_range is built on it). One thread runs it without a parallel
 * region: entering one costs ~0.3 us even alone, and a region opened inside such an inactive
 * one is a nested team that libgomp builds anew (~135 us). */
typedef int (*om_team_fn)(const void *ctx, int rank, int size);
int om_run_team(int threads, om_team_fn fn, const void *ctx);
/* Rank `rank` of `size`'s share of n items: [begin, end), the shares contiguous in rank order. */
typedef struct { int64_t begin, end; } om_range;
static inline om_range om_share(int64_t n, int rank, int size) {
    const om_range r = {n * rank / size, n * (rank + 1) / size};
    return r;
}
/* fn(ctx, begin, end) on up to `threads` threads (om_run_team), each over its share of the
 * items [0, n) of a loop whose iterations are independent. */
typedef void (*om_range_fn)(const void *ctx, int64_t begin, int64_t end);
void om_run_range(int threads, int64_t n, om_range_fn fn, const void *ctx);

/* A dispatch table of one function per path; paths that were not built are NULL and never
 * selected because om_isa_available() refuses them. A family without an SSE2 translation
 * (the exact sum, sr4: they need 64-bit lane multiplies) runs its scalar function there,
 * which on x86-64 is SSE2 code already. */
#define OM_ISA_TABLE(name) {                        \
        name##_scalar,                              \
        OM_ISA_ENTRY_SSE2(name##_sse2),             \
        OM_ISA_ENTRY_AVX2(name##_avx2),             \
        OM_ISA_ENTRY_AVX512(name##_avx512),         \
        OM_ISA_ENTRY_NEON(name##_neon) }
#define OM_ISA_TABLE_SCALAR_SSE2(name) {            \
        name##_scalar,                              \
        OM_ISA_ENTRY_SSE2(name##_scalar),           \
        OM_ISA_ENTRY_AVX2(name##_avx2),             \
        OM_ISA_ENTRY_AVX512(name##_avx512),         \
        OM_ISA_ENTRY_NEON(name##_neon) }

/* For tests, which path a family's kernels run: each of the family's per-path objects states
 * its path with OM_PATH_PROBE(family, path) (path may be a macro, such as a *_paths.c source's
 * OM_PATH: it is expanded before the names are pasted), and the family's dispatch file defines
 * om_<family>_path(), which calls the selected path's probe through a table built as the
 * family's kernel tables are (OM_PATH_DISPATCH(family, OM_ISA_TABLE) or ..._SCALAR_SSE2). */
enum { OM_ISA_ID_scalar = OM_ISA_SCALAR, OM_ISA_ID_sse2 = OM_ISA_SSE2,
       OM_ISA_ID_avx2 = OM_ISA_AVX2, OM_ISA_ID_avx512 = OM_ISA_AVX512,
       OM_ISA_ID_neon = OM_ISA_NEON };
#define OM_PATH_PROBE(family, path) OM_PATH_PROBE_(family, path)
#define OM_PATH_PROBE_(family, path) \
    int om_##family##_path_##path(void) { return OM_ISA_ID_##path; }
#define OM_PATH_DISPATCH(family, table)                                                       \
    int om_##family##_path_scalar(void), om_##family##_path_sse2(void),                      \
        om_##family##_path_avx2(void), om_##family##_path_avx512(void),                      \
        om_##family##_path_neon(void);                                                       \
    int om_##family##_path(void) {                                                           \
        static int (*const paths[OM_ISA_COUNT])(void) = table(om_##family##_path);          \
        return paths[om_isa]();                                                              \
    }
int om_conv_path(void), om_ctc_path(void), om_exact_path(void), om_gemm_path(void),
    om_optim_path(void), om_reduce_path(void), om_rnn_path(void), om_sr4_path(void),
    om_vmath_path(void);

#if OM_BUILD_SSE2
#define OM_ISA_ENTRY_SSE2(f) f
#else
#define OM_ISA_ENTRY_SSE2(f) NULL
#endif
#if OM_BUILD_AVX2
#define OM_ISA_ENTRY_AVX2(f) f
#else
#define OM_ISA_ENTRY_AVX2(f) NULL
#endif
#if OM_BUILD_AVX512
#define OM_ISA_ENTRY_AVX512(f) f
#else
#define OM_ISA_ENTRY_AVX512(f) NULL
#endif
#if OM_BUILD_NEON
#define OM_ISA_ENTRY_NEON(f) f
#else
#define OM_ISA_ENTRY_NEON(f) NULL
#endif

/* The calling thread's index in its team and the team's size (0 and 1 outside a parallel
 * region, or without OpenMP). */
#if OM_HAVE_OPENMP
#include <omp.h>
static inline int om_team_rank(void) { return omp_get_thread_num(); }
static inline int om_team_size(void) { return omp_get_num_threads(); }
#else
static inline int om_team_rank(void) { return 0; }
static inline int om_team_size(void) { return 1; }
#endif

/* Threads to use for `work` units of roughly equal cost: one below `grain` units per thread,
 * never more than requested. Only a speed decision: every kernel gives the same bits at any
 * thread count. */
static inline int om_threads_for(int64_t work, int64_t grain, int requested) {
    int64_t t = grain > 0 ? work / grain : requested;
    if (t < 1) t = 1;
    return t < requested ? (int)t : requested;
}

#endif
