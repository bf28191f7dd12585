/* Packing's converting step (gemm.h), one definition compiled into every path's file: the
 * integer code of half.h, which the compiler vectorises with the path's flags, F16C's float16
 * conversions where the path has them (the same bits: both round to nearest even and keep
 * NaNs quiet, whatever the floating-point environment), and AVX2's translation of half.h's
 * bfloat16 code 8 values at a time (packing's runs are 8 to 32 values, too short for the
 * compiler's vectorised loops, which then run scalar). The packed bfloat16 values are
 * what the dot-product instruction reads: a subnormal is a zero of its sign (gemm.c); the
 * saved bits are the rounding itself, as torch's. */
#ifndef OM_GEMM_CONVERT_H
#define OM_GEMM_CONVERT_H

#include "gemm.h"
#include "half.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* The ukernel's has_tiny (gemm.h) in integers on the bit patterns, which vectorise on every path:
 * |x| - 1 below 2^-56 - 1 holds for exactly the magnitudes in (0, 2^-56) (not NaN nor zero). */
static int has_tiny(const float *x, int64_t n) {
    uint32_t tiny = 0;
    for (int64_t i = 0; i < n; i++) tiny |= (om_f32_bits(x[i]) & 0x7FFFFFFFu) - 1u < 0x237FFFFFu;
    return tiny != 0;
}

/* bf16 bits with a subnormal made a zero of its sign. */
static inline uint16_t bf16_flushed(uint16_t h) {
    return (h & 0x7F80u) ? h : (uint16_t)(h & 0x8000u);
}

/* has_tiny's test on flushed bf16 bits: 0 < |x| < 2^-56. */
static inline int bf16_tiny(uint32_t h) { return (h & 0x7FFFu) - 1u < 0x237Fu; }

/* The bf16 bits packing gives x as `fmt` reads it (OM_F32_TO_BF16 rounds, OM_BF16 holds the
 * bits), a subnormal flushed; *save (if not NULL) receives the unflushed rounding. */
static inline uint32_t bf16_word(const void *src, int64_t i, int fmt, uint16_t *save) {
    if (fmt == OM_BF16) return bf16_flushed(((const uint16_t *)src)[i]);
    const uint16_t r = om_bf16_round(((const float *)src)[i]);
    if (save) save[i] = r;
    return bf16_flushed(r);
}

#if defined(__AVX2__)
/* The low halves of 8 32-bit lanes (each below 2^16) stored as 8 uint16. */
static inline void store_halves8(uint16_t *p, __m256i v) {
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

/* The AVX2 loops convert bfloat16 formats fast, for the common values only, and note what
 * they met: low, the least |x| - 1 (unsigned, so a zero is the largest), high, the greatest
 * |x| (bits). When a value was rare (bf16_rare: a NaN, which must stay a NaN, or
 * 0 < |x| < 2^-56, the magnitudes that the dot-product rule flushes or watches), the scalar
 * code converts the run again by every rule (bf16_word), and reports tiny values; the fast
 * conversion of the common ones gives no tiny value (they round to at least 2^-56). */
typedef struct {
    __m256i low, high;
} bf16_seen;

static inline bf16_seen bf16_seen_none(void) {
    return (bf16_seen){_mm256_set1_epi32(-1), _mm256_setzero_si256()};
}

static inline int bf16_rare(const bf16_seen *s) {
    const __m256i tiny = _mm256_cmpeq_epi32(_mm256_min_epu32(s->low, _mm256_set1_epi32(0x237FFFFE)),
                                            s->low);
    const __m256i nan = _mm256_cmpgt_epi32(s->high, _mm256_set1_epi32(0x7F800000));
    const __m256i rare = _mm256_or_si256(tiny, nan);
    return !_mm256_testz_si256(rare, rare);
}

/* 8 values as float bits u (a bfloat16 format's already in the high halves) noted in *s. */
static inline void bf16_note8(__m256i u, bf16_seen *s) {
    const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    s->low = _mm256_min_epu32(s->low, _mm256_sub_epi32(a, _mm256_set1_epi32(1)));
    s->high = _mm256_max_epi32(s->high, a);
}

/* om_bf16_round on 8 lanes of float bits u, the bits in the high halves (the float value),
 * right for the values bf16_rare does not call rare. */
static inline __m256i bf16_round8(__m256i u, bf16_seen *s) {
    bf16_note8(u, s);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    return _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd),
                            _mm256_set1_epi32((int)0xFFFF0000u));
}

/* 8 values from src + i as fmt reads them (OM_F32 too), save as convert's; a bfloat16 format
 * converted fast, noted in *s (bf16_seen). */
static OM_ALWAYS_INLINE __m256 load8_as(const void *src, int64_t i, int fmt, uint16_t *save,
                                        bf16_seen *s) {
    switch (fmt) {
    case OM_F32_TO_BF16: {
        const __m256i r = bf16_round8(_mm256_loadu_si256((const __m256i *)((const float *)src + i)),
                                      s);
        if (save) store_halves8(save + i, _mm256_srli_epi32(r, 16));
        return _mm256_castsi256_ps(r);
    }
    case OM_BF16: {
        const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(
            _mm_loadu_si128((const __m128i *)((const uint16_t *)src + i))), 16);
        bf16_note8(u, s);
        return _mm256_castsi256_ps(u);
    }
    case OM_F32_TO_F16: {
        const __m128i r = _mm256_cvtps_ph(_mm256_loadu_ps((const float *)src + i),
                                          _MM_FROUND_TO_NEAREST_INT);
        if (save) _mm_storeu_si128((__m128i *)(save + i), r);
        return _mm256_cvtph_ps(r);
    }
    case OM_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + i)));
    default:
        return _mm256_loadu_ps((const float *)src + i);
    }
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* bf16_words8 on 16 values: the same integer steps, the choices by mask registers. */
static inline __m512i bf16_words16(const void *src, int64_t i, int fmt, uint16_t *save) {
    __m512i h;
    if (fmt == OM_BF16) {
        h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)src + i)));
    } else {
        const __m512i u = _mm512_loadu_si512((const float *)src + i);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(
            _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
        const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        const __m512i nearest = _mm512_srli_epi32(
            _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
        const __m512i quiet = _mm512_srli_epi32(_mm512_or_si512(u, _mm512_set1_epi32(0x400000)),
                                                16);
        h = _mm512_mask_blend_epi32(nan, nearest, quiet);
        if (save) _mm256_storeu_si256((__m256i *)(save + i), _mm512_cvtepi32_epi16(h));
    }
    const __mmask16 subnormal = _mm512_testn_epi32_mask(h, _mm512_set1_epi32(0x7F80));
    return _mm512_mask_and_epi32(h, subnormal, h, _mm512_set1_epi32(0x8000));
}
#endif

#if defined(__AVX2__)
/* convert_vectors's AVX2 loop from i, for a constant fmt; returns i itself when a bfloat16
 * value was rare (bf16_seen: the scalar code converts them all again). */
static OM_ALWAYS_INLINE int64_t convert8s(int64_t i, int64_t n, const void *src, int fmt,
                                          float *dst, uint16_t *save) {
    const int64_t start = i;
    bf16_seen s = bf16_seen_none();
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_as(src, i, fmt, save, &s));
    return bf16_rare(&s) ? start : i;
}
#endif

/* convert's vector loops over a prefix of whole vectors; returns its length, and sets *tiny if
 * a bf16 value converted is (bf16_tiny). */
static int64_t convert_vectors(int64_t n, const void *src, int fmt, float *dst, uint16_t *save,
                               int *tiny) {
    int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    __mmask16 tiny16 = 0;
    for (; i + 16 <= n && (fmt == OM_F32_TO_BF16 || fmt == OM_BF16); i += 16) {
        const __m512i h = bf16_words16(src, i, fmt, save);
        const __m512i magnitude = _mm512_and_si512(h, _mm512_set1_epi32(0x7FFF));
        tiny16 |= _mm512_mask_cmplt_epi32_mask(
            _mm512_cmpgt_epi32_mask(magnitude, _mm512_setzero_si512()), magnitude,
            _mm512_set1_epi32(0x2380));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(h, 16));
    }
    *tiny |= tiny16 != 0;
#endif
#if defined(__AVX2__)
    switch (fmt) {   /* a loop per format */
    case OM_F32_TO_BF16: return convert8s(i, n, src, OM_F32_TO_BF16, dst, save);
    case OM_BF16: return convert8s(i, n, src, OM_BF16, dst, save);
    case OM_F32_TO_F16: return convert8s(i, n, src, OM_F32_TO_F16, dst, save);
    case OM_F16: return convert8s(i, n, src, OM_F16, dst, save);
    }
#endif
    (void)n, (void)src, (void)fmt, (void)dst, (void)save, (void)tiny;
    return i;
}

#if defined(__AVX2__)
/* Lanes [0, n) of 8 set. */
static inline __m256i first_lanes(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The first n < 8 lanes of v stored at p, in pieces of 4, 2 and 1 (a masked store is slow on
 * some CPUs: microcoded on AMD's). */
static inline void store_first(float *p, int64_t n, __m256 v) {
    __m128 q = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(p, q);
        q = _mm256_extractf128_ps(v, 1);
        p += 4;
    }
    if (n & 2) {
        _mm_storel_pi((__m64 *)p, q);
        q = _mm_movehl_ps(q, q);
        p += 2;
    }
    if (n & 1) _mm_store_ss(p, q);
}

/* The low halves of the first n < 8 32-bit lanes of v (each below 2^16) stored at p. */
static inline void store_first_halves(uint16_t *p, int64_t n, __m256i v) {
    uint16_t h[8];
    store_halves8(h, v);
    for (int i = 0; i < 8; i++)  /* a fixed count the compiler unrolls, not a memcpy call */
        if (i < n) p[i] = h[i];
}

/* convert's values for a run of 0 < n < 8 (all of a run of AVX2's 6-row panels): the vector
 * code's bits on the lanes a masked load fills, zeros after; all 8 stored when `room` says
 * dst has room for them. Returns 0, for the scalar code to convert the run, when it holds an
 * odd n of a 2-byte format (which loads whole 32-bit pairs) or a rare bfloat16 value. */
static inline int convert_short(int64_t n, const void *src, int fmt, float *dst,
                                uint16_t *save, int room) {
    __m256 v;
    bf16_seen s = bf16_seen_none();
    if (fmt == OM_BF16 || fmt == OM_F16) {
        if (n & 1) return 0;
        const __m128i pairs = _mm_maskload_epi32((const int *)src,
                                                 _mm256_castsi256_si128(first_lanes(n / 2)));
        if (fmt == OM_F16) {
            v = _mm256_cvtph_ps(pairs);
        } else {
            const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(pairs), 16);
            bf16_note8(u, &s);
            v = _mm256_castsi256_ps(u);
        }
    } else {
        const __m256 x = _mm256_maskload_ps((const float *)src, first_lanes(n));
        if (fmt == OM_F32_TO_BF16) {
            const __m256i r = bf16_round8(_mm256_castps_si256(x), &s);
            if (save) store_first_halves(save, n, _mm256_srli_epi32(r, 16));
            v = _mm256_castsi256_ps(r);
        } else {
            const __m128i r = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
            if (save) store_first_halves(save, n, _mm256_cvtepu16_epi32(r));
            v = _mm256_cvtph_ps(r);
        }
    }
    if (bf16_rare(&s)) return 0;
    if (room)
        _mm256_storeu_ps(dst, v);
    else
        store_first(dst, n, v);
    return 1;
}
#endif

/* One run of convert: dst[i] = src[i] as fmt reads it for i < n, save as convert's; `room`:
 * dst[n .. n + 7] may be written too (the next run overwrites them). Returns convert's. */
static inline int convert_run(int64_t n, const void *src, int fmt, float *dst, uint16_t *save,
                              int room) {
    int tiny = 0;
    if (fmt == OM_F32) {
        for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i];
        return 0;
    }
    int64_t i = convert_vectors(n, src, fmt, dst, save, &tiny);
#if defined(__AVX2__)
    const int64_t size = fmt == OM_BF16 || fmt == OM_F16 ? 2 : 4;
    if (i < n && n - i < 8 && convert_short(n - i, (const char *)src + i * size, fmt, dst + i,
                                            save ? save + i : NULL, room))
        return tiny;
#endif
    for (; i < n; i++) {
        if (fmt == OM_F32_TO_BF16 || fmt == OM_BF16) {
            const uint32_t h = bf16_word(src, i, fmt, save);
            tiny |= bf16_tiny(h);
            dst[i] = om_bf16_widen((uint16_t)h);
        } else if (fmt == OM_F16) {
            dst[i] = om_f16_widen(((const uint16_t *)src)[i]);
        } else {
            const uint16_t r = om_f16_round(((const float *)src)[i]);
            dst[i] = om_f16_widen(r);
            if (save) save[i] = r;
        }
    }
    return tiny;
}

/* Packing's converting step (gemm.h): the runs in one call, each run's source fetched a few
 * runs ahead (runs a stride apart are too short for the hardware to prefetch in time). Runs
 * stored back to back (a tile's height of op(A) per depth) end in a whole vector but the
 * last: the next run overwrites what lies past the end of one. */
static int convert(int64_t rows, int64_t n, const void *src, int64_t stride, int fmt,
                   float *dst, int64_t dst_stride, uint16_t *save) {
    const int64_t size = fmt == OM_BF16 || fmt == OM_F16 ? 2 : 4;
    const char *run = src;
    int tiny = 0;
    for (int64_t r = 0; r < rows; r++, run += stride * size) {
        OM_PREFETCH(run + 8 * stride * size);
        tiny |= convert_run(n, run, fmt, dst + r * dst_stride, save ? save + r * stride : NULL,
                            dst_stride == n && r + 1 < rows);
    }
    return tiny;
}

#endif
