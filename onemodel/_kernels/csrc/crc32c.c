/* CRC-32C: see crc32c.h.
 *
 * Inside, every path works on the raw register (no inversions): the CRC of the bytes with the
 * register as initial value. Byte order is little endian (x86-64, aarch64).
 *
 * Folding (after Gopal et al., "Fast CRC computation for generic polynomials using PCLMULQDQ",
 * Intel 2009, in the bit-reflected form): a 16-byte block read as two little-endian u64 is the
 * polynomial H * x^64 + L, the low u64 H holding the higher degrees. Moving a block D bytes
 * later multiplies it by x^(8D); a reflected carry-less product of 64-bit lanes carries an
 * extra factor x, so H and L are multiplied by x^(8D+63) and x^(8D-1) mod P (each under 32
 * bits, computed at init), which keeps the 128-bit value congruent modulo P. Folded down to one
 * block V, the register is V * x^32 mod P: the CRC32 instruction over V's 16 bytes from 0.
 */
#include "crc32c.h"
#include "isa.h"

#include <string.h>

#define POLY_REFLECTED 0x82F63B78u
#define POLY_NORMAL 0x1EDC6F41u

/* The instructions a function may use beyond the baseline (MSVC takes any intrinsic). */
#if defined(__GNUC__) || defined(__clang__)
#define OM_TARGET(x) __attribute__((target(x)))
#else
#define OM_TARGET(x)
#endif

static uint32_t table[8][256];
static int best = OM_CRC_TABLE;

static uint32_t crc_table(uint32_t c, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c;
        c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
            table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
            table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
    }
    for (; n; p++, n--) c = (c >> 8) ^ table[0][(c ^ *p) & 0xff];
    return c;
}

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

OM_TARGET("sse4.2")
static uint32_t crc_instruction(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
    }
    c = (uint32_t)c64;
    for (; n; p++, n--) c = _mm_crc32_u8(c, *p);
    return c;
}

/* (lo, hi) constants per fold distance: 256, 64, 48, 32 and 16 bytes. */
enum { FOLD_256, FOLD_64, FOLD_48, FOLD_32, FOLD_16, FOLDS };
static const int fold_bytes[FOLDS] = {256, 64, 48, 32, 16};
static uint64_t fold_k[FOLDS][2];

OM_TARGET("sse4.2,pclmul")
static __m128i fold16(__m128i v, int d, __m128i next) {
    const __m128i k = _mm_set_epi64x((long long)fold_k[d][1], (long long)fold_k[d][0]);
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(v, k, 0x00),
                                       _mm_clmulepi64_si128(v, k, 0x11)), next);
}

OM_TARGET("sse4.2,pclmul,avx512f,vpclmulqdq")
static __m512i fold64(__m512i v, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(v, k, 0x00),
                                     _mm512_clmulepi64_epi128(v, k, 0x11), next, 0x96);
}

OM_TARGET("sse4.2,pclmul,avx512f,vpclmulqdq")
static uint32_t crc_fold(uint32_t c, const uint8_t *p, size_t n) {
    if (n < 256) return crc_instruction(c, p, n);
    const __m512i k256 = _mm512_set_epi64(
        (long long)fold_k[FOLD_256][1], (long long)fold_k[FOLD_256][0],
        (long long)fold_k[FOLD_256][1], (long long)fold_k[FOLD_256][0],
        (long long)fold_k[FOLD_256][1], (long long)fold_k[FOLD_256][0],
        (long long)fold_k[FOLD_256][1], (long long)fold_k[FOLD_256][0]);
    const __m512i k64 = _mm512_set_epi64(
        (long long)fold_k[FOLD_64][1], (long long)fold_k[FOLD_64][0],
        (long long)fold_k[FOLD_64][1], (long long)fold_k[FOLD_64][0],
        (long long)fold_k[FOLD_64][1], (long long)fold_k[FOLD_64][0],
        (long long)fold_k[FOLD_64][1], (long long)fold_k[FOLD_64][0]);
    /* The register enters as the first 32 bits of the message. */
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0,
                                                                           (long long)c));
    __m512i x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128);
    __m512i x3 = _mm512_loadu_si512(p + 192);
    for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
        x0 = fold64(x0, k256, _mm512_loadu_si512(p));
        x1 = fold64(x1, k256, _mm512_loadu_si512(p + 64));
        x2 = fold64(x2, k256, _mm512_loadu_si512(p + 128));
        x3 = fold64(x3, k256, _mm512_loadu_si512(p + 192));
    }
    x3 = fold64(fold64(fold64(x0, k64, x1), k64, x2), k64, x3);
    for (; n >= 64; p += 64, n -= 64) x3 = fold64(x3, k64, _mm512_loadu_si512(p));
    __m128i v = _mm512_extracti32x4_epi32(x3, 3);
    v = fold16(_mm512_extracti32x4_epi32(x3, 0), FOLD_48, v);
    v = fold16(_mm512_extracti32x4_epi32(x3, 1), FOLD_32, v);
    v = fold16(_mm512_extracti32x4_epi32(x3, 2), FOLD_16, v);
    for (; n >= 16; p += 16, n -= 16) v = fold16(v, FOLD_16, _mm_loadu_si128((const void *)p));
    uint64_t c64 = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(v));
    c64 = _mm_crc32_u64(c64, (uint64_t)_mm_extract_epi64(v, 1));
    return crc_instruction((uint32_t)c64, p, n);
}

/* x^e mod P, as the high half of a reflected 64-bit lane. */
static uint64_t lane_of_xpow(int e) {
    uint32_t r = 1, reflected = 0;
    for (; e > 0; e--) r = (r << 1) ^ ((r >> 31) ? POLY_NORMAL : 0);
    for (int d = 0; d < 32; d++) reflected |= ((r >> d) & 1u) << (31 - d);
    return (uint64_t)reflected << 32;
}

static void pick_path(void) {
    unsigned r1[4], r7[4] = {0, 0, 0, 0};
    om_cpuid(1, 0, r1);
    if (!((r1[2] >> 20) & 1)) return; /* SSE4.2 */
    best = OM_CRC_INSTRUCTION;
    om_cpuid(7, 0, r7);
    const int pclmul = (r1[2] >> 1) & 1, vpclmulqdq = (r7[2] >> 10) & 1;
    if (pclmul && vpclmulqdq && om_isa_available(OM_ISA_AVX512)) best = OM_CRC_FOLD;
    for (int d = 0; d < FOLDS; d++) {
        fold_k[d][0] = lane_of_xpow(8 * fold_bytes[d] + 63);
        fold_k[d][1] = lane_of_xpow(8 * fold_bytes[d] - 1);
    }
}

#elif defined(__aarch64__) || defined(_M_ARM64)
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#include <windows.h>
#else
#include <arm_acle.h>
#endif
#if defined(__linux__)
#include <sys/auxv.h>
#endif

#if defined(__clang__)
OM_TARGET("crc")
#elif defined(__GNUC__)
OM_TARGET("+crc")
#endif
static uint32_t crc_instruction(uint32_t c, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __crc32cd(c, w);
    }
    for (; n; p++, n--) c = __crc32cb(c, *p);
    return c;
}

static void pick_path(void) {
#if defined(__APPLE__)
    best = OM_CRC_INSTRUCTION; /* every Apple arm64 CPU has the CRC extension */
#elif defined(_MSC_VER) && !defined(__clang__)
    if (IsProcessorFeaturePresent(PF_ARM_V8_CRC32_INSTRUCTIONS_AVAILABLE))
        best = OM_CRC_INSTRUCTION;
#elif defined(__linux__)
    if (getauxval(AT_HWCAP) & (1ul << 7)) best = OM_CRC_INSTRUCTION; /* HWCAP_CRC32 */
#endif
}

#else
static void pick_path(void) {}
#endif

void om_crc32c_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ ((c & 1) ? POLY_REFLECTED : 0);
        table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    pick_path();
}

int om_crc32c_available(int path) {
    return path >= 0 && path <= best; /* each path's CPUs have the ones below it */
}

uint32_t om_crc32c_path(int path, uint32_t crc, const void *p, size_t n) {
    const uint8_t *bytes = (const uint8_t *)p;
    switch (path) {
#if defined(__x86_64__) || defined(_M_X64)
    case OM_CRC_FOLD: return ~crc_fold(~crc, bytes, n);
#endif
#if defined(__x86_64__) || defined(_M_X64) || defined(__aarch64__) || defined(_M_ARM64)
    case OM_CRC_INSTRUCTION: return ~crc_instruction(~crc, bytes, n);
#endif
    default: return ~crc_table(~crc, bytes, n);
    }
}

uint32_t om_crc32c(uint32_t crc, const void *p, size_t n) {
    return om_crc32c_path(best, crc, p, n);
}
