/* CPU feature detection and the selected instruction-set path.
 *
 * x86-64: CPUID leaves 1 and 7 (subleaf 1 for AVX512_BF16), plus XGETBV to confirm that the OS saves the AVX and AVX-512
 * register state (a CPU flag alone is not enough under some hypervisors and kernels).
 * aarch64: NEON (Advanced SIMD) is architectural, so it is always present.
 */
#include "isa.h"

#include <stdio.h>
#include <stdlib.h>

int om_isa = OM_ISA_SCALAR;

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define OM_X86 1
#if defined(_MSC_VER)
#include <intrin.h>
void om_cpuid(int leaf, int sub, unsigned r[4]) {
    int v[4];
    __cpuidex(v, leaf, sub);
    for (int i = 0; i < 4; i++) r[i] = (unsigned)v[i];
}
static unsigned long long xgetbv0(void) { return _xgetbv(0); }
#else
#include <cpuid.h>
void om_cpuid(int leaf, int sub, unsigned r[4]) {
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}
static unsigned long long xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

static int cpu_has(int isa) {
    unsigned r1[4], r7[4], r0[4];
    om_cpuid(0, 0, r0);
    om_cpuid(1, 0, r1);
    if (isa == OM_ISA_SSE2) return (r1[3] >> 26) & 1;
    int osxsave = (r1[2] >> 27) & 1, avx = (r1[2] >> 28) & 1, fma = (r1[2] >> 12) & 1;
    int f16c = (r1[2] >> 29) & 1;
    if (!osxsave || !avx || r0[0] < 7) return 0;
    unsigned long long xcr0 = xgetbv0();
    int ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xe6) == 0xe6;
    om_cpuid(7, 0, r7);
    int avx2 = (r7[1] >> 5) & 1;
    if (isa == OM_ISA_AVX2) return ymm_os && avx2 && fma && f16c;
    if (isa == OM_ISA_AVX512) {
        int f = (r7[1] >> 16) & 1, dq = (r7[1] >> 17) & 1, bw = (r7[1] >> 30) & 1;
        int vl = (r7[1] >> 31) & 1;
        return zmm_os && ymm_os && avx2 && fma && f16c && f && dq && bw && vl;
    }
    return 0;
}

static int cpu_has_avx512bf16(void) {
    unsigned r7[4], r71[4];
    if (!cpu_has(OM_ISA_AVX512)) return 0;
    om_cpuid(7, 0, r7);
    if (r7[0] < 1) return 0;   /* no subleaf 1 */
    om_cpuid(7, 1, r71);
    return (r71[0] >> 5) & 1;
}

/* AMX-BF16 (CPUID 7.0 EDX bit 22): on such a core (Sapphire Rapids) VDPBF16PS was measured
 * slower per product than the widening FMA kernel, so the dot kernel is not the default there. */
static int cpu_has_amx_bf16(void) {
    unsigned r7[4];
    om_cpuid(7, 0, r7);
    return (r7[3] >> 22) & 1;
}
#else
#define OM_X86 0
static int cpu_has_avx512bf16(void) { return 0; }
static int cpu_has_amx_bf16(void) { return 0; }
static int cpu_has(int isa) {
#if defined(__aarch64__) || defined(_M_ARM64)
    return isa == OM_ISA_NEON;
#else
    (void)isa;
    return 0;
#endif
}
#endif

int om_isa_available(int isa) {
    switch (isa) {
    case OM_ISA_SCALAR: return 1;
    case OM_ISA_SSE2: return OM_BUILD_SSE2 && cpu_has(isa);
    case OM_ISA_AVX2: return OM_BUILD_AVX2 && cpu_has(isa);
    case OM_ISA_AVX512: return OM_BUILD_AVX512 && cpu_has(isa);
    case OM_ISA_NEON: return OM_BUILD_NEON && cpu_has(isa);
    default: return 0;
    }
}

int om_bf16_dot_available(void) {
    return OM_BUILD_AVX512BF16 && om_isa_available(OM_ISA_AVX512) && cpu_has_avx512bf16();
}

int om_bf16_dot_preferred(void) { return om_bf16_dot_available() && !cpu_has_amx_bf16(); }

int om_set_isa(int isa) {
    if (!om_isa_available(isa)) return -1;
    om_isa = isa;
    return 0;
}

int om_active_isa(void) { return om_isa; }

const char *om_compiler(void) {
    static char name[64];
#if defined(__clang__)
    snprintf(name, sizeof name, "clang %d.%d.%d", __clang_major__, __clang_minor__,
             __clang_patchlevel__);
#elif defined(__GNUC__)
    snprintf(name, sizeof name, "gcc %d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#elif defined(_MSC_VER)
    snprintf(name, sizeof name, "msvc %d", _MSC_VER);
#else
    snprintf(name, sizeof name, "unknown");
#endif
    return name;
}

void *om_aligned_alloc(size_t bytes) {
    void *raw = malloc(bytes + 64 + sizeof(void *));
    if (!raw) return NULL;
    const uintptr_t p = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)p)[-1] = raw;
    return (void *)p;
}

void om_aligned_free(void *p) {
    if (p) free(((void **)p)[-1]);
}

int om_run_team(int threads, om_team_fn fn, const void *ctx) {
    if (threads <= 1) return fn(ctx, 0, 1);
    int failed = 0;
#pragma omp parallel num_threads(threads) reduction(|: failed)
    failed |= fn(ctx, om_team_rank(), om_team_size());
    return failed;
}

/* om_run_range's loop. */
typedef struct {
    om_range_fn fn;
    const void *ctx;
    int64_t n;
} range_loop;

static int range_share(const void *loop, int rank, int size) {
    const range_loop *l = loop;
    const om_range r = om_share(l->n, rank, size);
    l->fn(l->ctx, r.begin, r.end);
    return 0;
}

void om_run_range(int threads, int64_t n, om_range_fn fn, const void *ctx) {
    const range_loop l = {fn, ctx, n};
    om_run_team(n < threads ? (int)n : threads, range_share, &l);  /* a thread per item at most */
}
