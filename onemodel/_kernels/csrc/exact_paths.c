/* The loops of the exact sum (exact.h), compiled once per instruction-set path (path.h) over
 * its simd/<path>.h (OMV_FN(name): the name with the path's suffix); SSE2 has none of its own
 * (exact.c's tables run the scalar loops there, which on x86-64 are SSE2 code already). Every
 * operation is exact or one IEEE rounding to nearest even named in exact.h, with contraction
 * off, so the compiler's vectorisation of a path changes nothing in the bits. Runs of
 * OM_EXACT_BLOCK elements are checked first (quantising: all finite and inside the clamp;
 * rounding: all sums below 2^60), and those that pass take a branch-free loop the compiler can
 * vectorise (rounding: a direct conversion for a power-of-two count, else the quotient in double
 * with the few elements it cannot decide redone exactly); the others the general one. */
#include "path.h"

#if !OM_PATH_IS(sse2)
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include "exact.h"
#include "isa.h"
#include OM_SIMD_HEADER

#if OM_PATH_IS(avx2)
#define EXACT_CONVERT_BY_BITS   /* no conversion of doubles to int64 (below) */
#elif OM_PATH_IS(avx512)
#define EXACT_ROUND_BY_INSTRUCTION   /* nearbyint: vrndscalepd (below) */
#endif

#define LIMB 56
#define MASK ((UINT64_C(1) << LIMB) - 1)

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif

static inline int bit_length(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return x ? 64 - __builtin_clzll(x) : 0;
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_ARM64))
    unsigned long i;
    return _BitScanReverse64(&i, x) ? (int)i + 1 : 0;
#else
    int b = 0;
    while (x) { b++; x >>= 1; }
    return b;
#endif
}

/* Leading zeros of x != 0. */
static inline int clz64(uint64_t x) { return 64 - bit_length(x); }

/* The high 64 bits of a * b and the low ones. */
static inline uint64_t mul_wide(uint64_t a, uint64_t b, uint64_t *low) {
#if defined(__SIZEOF_INT128__)
    unsigned __int128 p = (unsigned __int128)a * b;
    *low = (uint64_t)p;
    return (uint64_t)(p >> 64);
#else
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    *low = (mid << 32) | (p00 & 0xffffffffu);
    return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
#endif
}

static inline uint64_t bits_of(double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}

static inline double from_bits(uint64_t b) {
    double d;
    memcpy(&d, &b, 8);
    return d;
}

/* All ones when c, else zero: selects by masks, as branches would keep the loops scalar. */
static inline uint64_t mask_if(int c) { return (uint64_t)0 - (uint64_t)c; }

/* The int64 of an integer-valued double f, |f| < 2^51 (small_whole), and round_half_even(t),
 * 0 <= t < 2^57 (rounded_whole: below 2^52, t + 2^52 rounds t to an integer; above, t is one).
 * AVX2 has no conversion of doubles to int64 (a cast is a scalar instruction per element there,
 * the loops 3x slower), so the avx2 path takes them in bits: f + 1.5 * 2^52 holds f in its low
 * bits, t + 2^52 its rounding, and above 2^52 t's significand shifted up by its exponent less 52
 * (0 .. 4). AVX-512 rounds to an integer in one instruction (vrndscalepd), which GCC and Clang
 * emit for a vectorised nearbyint: the avx512 path takes it (a quarter faster shard sums); it
 * rounds in the current mode, nearest even, as the addition of 2^52 does. */
#ifdef EXACT_CONVERT_BY_BITS
static inline int64_t small_whole(double f) {
    return (int64_t)(bits_of(f + 0x1.8p52) - UINT64_C(0x4338000000000000));
}
static inline int64_t rounded_whole(double t) {
    const uint64_t b = bits_of(t), small = mask_if(t < 0x1p52);
    const uint64_t up = ((b & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52))
                        << (((b >> 52) - 1075) & 7);
    return (int64_t)(((bits_of(t + 0x1p52) - UINT64_C(0x4330000000000000)) & small) |
                     (up & ~small));
}
#elif defined(EXACT_ROUND_BY_INSTRUCTION) && (defined(__GNUC__) || defined(__clang__))
static inline int64_t small_whole(double f) { return (int64_t)f; }
static inline int64_t rounded_whole(double t) { return (int64_t)nearbyint(t); }
#else
static inline int64_t small_whole(double f) { return (int64_t)f; }
static inline int64_t rounded_whole(double t) {
    const uint64_t small = mask_if(t < 0x1p52);
    return (int64_t)from_bits((bits_of((t + 0x1p52) - 0x1p52) & small) | (bits_of(t) & ~small));
}
#endif

/* One element of the quantisation, v finite and |v| <= 2^98: v = f * 2^56 + t with f =
 * floor(v / 2^56) and t in [0, 2^56] exactly (as the numpy reference split it), t rounded half
 * to even into r. |v / 2^56| < 2^43, so adding 1.5 * 2^52 rounds it to the nearest integer,
 * one less where that lies above it: the floor, exactly. */
static inline int64_t split(double v, int64_t *r) {
    const double x = v * 0x1p-56, nearest = (x + 0x1.8p52) - 0x1.8p52;
    const double f = nearest - from_bits(bits_of(1.0) & mask_if(nearest > x));
    *r = rounded_whole(v - f * 0x1p56);
    return small_whole(f);
}

/* Adds the element into the limbs, with the carry. */
static inline void add_one(double v, int64_t *hi, int64_t *lo) {
    int64_t r, f = split(v, &r);
    uint64_t s = (uint64_t)*lo + (uint64_t)r;   /* below 2^63 (exact.h) */
    *hi += f + (int64_t)(s >> LIMB);
    *lo = (int64_t)(s & MASK);
}

/* Writes the element as the limbs (what add_one gives on zero limbs, without reading them). */
static inline void set_one(double v, int64_t *hi, int64_t *lo) {
    int64_t r, f = split(v, &r);
    *hi = f + (int64_t)((uint64_t)r >> LIMB);
    *lo = r & (int64_t)MASK;
}

/* Writes the element as one packed integer (what set_one then pack_range give, for an integer
 * inside the packing range), without the hi limb. */
static inline int64_t packed_one(double v) {
    int64_t r, f = split(v, &r);
    return (int64_t)(((uint64_t)f << LIMB) + (uint64_t)r);
}

/* 0 when some |g[i]| * scale is non-finite or above limit; else 2 when every one is also below
 * `packable` (its integer then lies well inside the packing range), else 1. */
static inline int add_block_clean(const float *g, size_t n, double scale, double limit,
                                  double packable) {
    uint32_t top = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, g + i, 4);
        b &= 0x7fffffffu;
        top = b > top ? b : top;
    }
    float f;
    memcpy(&f, &top, 4);
    if (top >= 0x7f800000u) return 0;
    double v = (double)f * scale;
    return v - v == 0.0 && v <= limit ? 1 + (v < packable) : 0;
}

/* om_exact_pack's loop (exact.h): the integers outside [-2^bits, 2^bits) counted. */
static inline int64_t pack_range(int64_t *restrict hi, int64_t *restrict lo, size_t n,
                                 int bits) {
    const int64_t edge = (int64_t)1 << (bits - LIMB);
    int64_t wide = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t h = hi[i] + (lo[i] >> LIMB);
        uint64_t lw = (uint64_t)lo[i] & MASK;
        wide += (h < -edge) | (h >= edge);
        hi[i] = h;
        lo[i] = (int64_t)(((uint64_t)h << LIMB) + lw);  /* wraps when wide: hi recovers it */
    }
    return wide;
}

/* hi[0 .. n) from the packed integers lo, none wide. */
static void high_limbs(int64_t *restrict hi, const int64_t *restrict lo, size_t n) {
    for (size_t i = 0; i < n; i++) hi[i] = lo[i] >> LIMB;
}

size_t OMV_FN(om_exact_add)(const float *g, size_t n, double scale, double limit,
                            int64_t *hi, int64_t *lo, uint8_t *codes, int64_t *clamped,
                            int64_t *bad, int fresh, int pack_bits, int64_t *wide,
                            int *hi_skipped) {
    int64_t nclamped = 0, nbad = 0, nwide = 0;
    size_t i = 0, start = 0;
    /* Packing fresh limbs (a worker's only micro-batch) before any non-finite element, blocks
     * whose integers lie inside 2^(pack_bits - 1) are written packed directly, without their
     * hi limbs (half the memory traffic); the first other block writes the skipped ones' hi
     * limbs, and every later block writes its own. */
    const int direct = fresh && pack_bits && !codes;
    const double packable = direct ? (double)((int64_t)1 << (pack_bits - 1)) : 0.0;
    int skipping = direct;
    while (i < n) {
        size_t m = n - i < OM_EXACT_BLOCK ? n - i : OM_EXACT_BLOCK;
        const float *restrict gb = g + i;
        int64_t *restrict hb = hi + i;
        int64_t *restrict lb = lo + i;
        int clean = add_block_clean(gb, m, scale, limit, packable);
        if (clean == 2 && direct) {
            for (size_t j = 0; j < m; j++) lb[j] = packed_one((double)gb[j] * scale);
            if (!skipping) high_limbs(hb, lb, m);
            i += m;
            start = i;
            continue;
        }
        if (skipping) {
            high_limbs(hi, lo, i);
            skipping = 0;
        }
        if (clean) {
            if (fresh) {
                for (size_t j = 0; j < m; j++) set_one((double)gb[j] * scale, hb + j, lb + j);
            } else {
                for (size_t j = 0; j < m; j++) add_one((double)gb[j] * scale, hb + j, lb + j);
            }
            i += m;
        } else {
            for (size_t j = 0; j < m; j++, i++) {
                double v = (double)g[i] * scale;  /* exact: 24 bits times at most 29, 2^-G */
                if (!(v - v == 0.0)) {           /* inf or NaN */
                    if (!codes) goto stop;
                    codes[i] |= (uint8_t)(v != v ? 4 : v > 0 ? 1 : 2);
                    nbad++;
                    if (fresh) hi[i] = lo[i] = 0;
                    continue;
                }
                if (v > limit) { v = limit; nclamped++; }
                else if (v < -limit) { v = -limit; nclamped++; }
                if (fresh) set_one(v, hi + i, lo + i);
                else add_one(v, hi + i, lo + i);
            }
        }
        /* With pack_bits, each block is packed once added, while it is in cache. */
        if (pack_bits) nwide += pack_range(hb, lb, m, pack_bits);
        start = i;
    }
stop:
    if (pack_bits) nwide += pack_range(hi + start, lo + start, i - start, pack_bits);
    *hi_skipped = skipping;
    *clamped += nclamped;
    *bad += nbad;
    *wide += nwide;
    return i;
}

/* packed_one(v) for |v| <= 2^56, in fewer operations: there the split's f is 0 (v >= 0) or -1
 * (v < 0), so t is v, or fl(v + 2^56) rounded as the split rounds it, and the integer is t
 * rounded (half to even; t >= 2^52 is one already) less 2^56 for a negative v. */
static inline int64_t packed_near(double v) {
    const uint64_t negative = mask_if(v < 0);
    return rounded_whole(v + from_bits(bits_of(0x1p56) & negative))
           - (int64_t)((UINT64_C(1) << LIMB) & negative);
}

size_t OMV_FN(om_exact_add_packed)(const float *g, size_t n, double scale,
                                   int64_t *restrict lo, int fresh) {
    size_t i = 0;
    while (i < n) {
        const size_t m = n - i < OM_EXACT_BLOCK ? n - i : OM_EXACT_BLOCK;
        const float *restrict gb = g + i;
        int64_t *restrict lb = lo + i;
        if (add_block_clean(gb, m, scale, 0x1p55, 0x1p55) != 2) break;
        if (fresh) {
            for (size_t j = 0; j < m; j++) lb[j] = packed_near((double)gb[j] * scale);
        } else {
            for (size_t j = 0; j < m; j++) lb[j] += packed_near((double)gb[j] * scale);
        }
        i += m;
    }
    return i;
}

void OMV_FN(om_exact_normalise)(int64_t *restrict hi, int64_t *restrict lo, size_t n) {
    for (size_t i = 0; i < n; i++) {
        hi[i] += lo[i] >> LIMB;
        lo[i] = (int64_t)((uint64_t)lo[i] & MASK);
    }
}

int64_t OMV_FN(om_exact_pack)(int64_t *restrict hi, int64_t *restrict lo, size_t n,
                              int bits) {
    return pack_range(hi, lo, n, bits);
}

/* 2^e as a double, e clamped to +-1000 (beyond, the float32 result is 0 or inf anyway). */
static inline double power_of_two(int64_t e) {
    e = e > 1000 ? 1000 : e < -1000 ? -1000 : e;
    return from_bits((uint64_t)(1023 + e) << 52);
}

/* float32 of z * 2^e, z a non-negative int64: z to float32 (nearest even), then scaled in
 * double (exact there) and rounded to float32 once more (which only float32's subnormal range
 * and overflow round). */
static inline float scaled(uint64_t z, int64_t e) {
    return (float)((double)(float)(int64_t)z * power_of_two(e));
}

/* The largest finite magnitude's bits among out[0 .. n), folded into top. */
static inline uint32_t top_bits(const float *out, size_t n, uint32_t top) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, out + i, 4);
        b &= 0x7fffffffu;
        b &= 0u - (uint32_t)(b < 0x7f800000u);  /* inf and NaN count as 0, by a mask: the
                                                  compiler vectorises the loop then */
        top = b > top ? b : top;
    }
    return top;
}

/* Element j of the integers: hi NULL means lo holds them whole. */
static inline int64_t element_high(const int64_t *hi, const int64_t *lo, size_t j) {
    return (hi ? hi[j] : 0) + (lo[j] >> LIMB);
}

/* The constants of a division by count (exact.h). */
typedef struct {
    int64_t count;
    uint64_t magic, small_below;
    int l, nbits, shift;
} divisor;

/* float32 of (h * 2^56 + lw) * 2^grid / count, lw in [0, 2^56): the exact reference, one
 * element at a time. */
static inline float round_element(int64_t h, uint64_t lw, int grid, const divisor *d) {
    uint64_t ax, sticky = 0;
    int neg, e = grid;
    if (h >= -16 && h < 16) {  /* |X| < 2^60: one int64 */
        uint64_t x = ((uint64_t)h << LIMB) + lw, sign = x >> 63;
        neg = (int)sign;
        ax = (x ^ (0 - sign)) + sign;  /* |X|, without a branch on the random sign */
    } else {  /* the magnitude mh * 2^56 + ml, mh >= 2^4: its top 61 bits, sticky */
        neg = h < 0;
        int borrow = neg && lw > 0;
        uint64_t mh = neg ? (uint64_t)0 - (uint64_t)h - (uint64_t)borrow : (uint64_t)h;
        uint64_t ml = borrow ? (UINT64_C(1) << LIMB) - lw : lw;
        int k = bit_length(mh) + LIMB - 61;
        if (k < 0) k = 0;
        if (k <= LIMB) {
            ax = (mh << (LIMB - k)) | (ml >> k);
            sticky = (ml & ((UINT64_C(1) << k) - 1)) != 0;
        } else {
            ax = mh >> (k - LIMB);
            sticky = ml != 0 || (mh & ((UINT64_C(1) << (k - LIMB)) - 1)) != 0;
        }
        e += k;
    }
    if (ax < d->small_below) {  /* at least 26 bits in the quotient */
        int s = 26 + d->nbits - bit_length(ax);
        if (s > 0) { ax <<= s; e -= s; }
    }
    uint64_t z;
    if (d->count == 1) {
        z = ax | sticky;
    } else {  /* ax < 2^61: q = floor(ax * magic / 2^(61 + l)) = floor(ax / count) */
        uint64_t low, high = mul_wide(ax, d->magic, &low);
        uint64_t q = d->shift >= 64 ? high >> (d->shift - 64)
                                    : (high << (64 - d->shift)) | (low >> d->shift);
        z = q | (ax - q * (uint64_t)d->count != 0) | sticky;
    }
    /* the sign flipped by a bit operation (the signs are random: no branch), in the double
     * that holds the float32 exactly */
    return (float)from_bits(bits_of(scaled(z, e)) ^ (uint64_t)neg << 63);
}

/* float32 of X / count * 2^grid from x = X rounded to double (cd = count, g2 = 2^grid):
 * r = x / cd * g2 is within 3 units of its last place of the exact quotient (X converted,
 * divided: two roundings; the scaling is exact), so it rounds to float32 as the quotient
 * would unless it lies within 4 units of a float32 midpoint, or is a nonzero below float32's
 * normal range: then *again is 1, and the caller redoes the element by round_element. */
static inline float quotient(double x, double cd, double g2, int *again) {
    const double r = x / cd * g2;
    const uint64_t b = bits_of(r);
    /* signed comparisons: they vectorise (AVX2 compares int64 only signed) */
    const int64_t below = (int64_t)(b & 0x1fffffffu) - 0x0ffffffc;  /* midpoint 0x10000000 */
    const int64_t mag = (int64_t)(b & ~(UINT64_C(1) << 63));
    *again = ((below >= 0) & (below <= 8)) | ((mag > 0) & (mag <= INT64_C(0x380fffffffffffff)));
    return (float)r;
}

void OMV_FN(om_exact_round)(const int64_t *hi, const int64_t *lo, size_t n, int grid,
                            int64_t count, uint64_t magic, int l, float *out,
                            uint32_t *top) {
    const divisor d = {count, magic, (uint64_t)count << 26, l,
                       bit_length((uint64_t)count), 61 + l};
    const int pow2 = (count & (count - 1)) == 0;  /* then count = 2^l */
    const double unit = power_of_two(grid - l), cd = (double)count, g2 = power_of_two(grid);
    uint32_t largest = 0;
    size_t i = 0;
    while (i < n) {
        size_t m = n - i < OM_EXACT_BLOCK ? n - i : OM_EXACT_BLOCK;
        const int64_t *restrict lb = lo + i;
        float *restrict ob = out + i;
        int fits = 1;
        for (size_t j = 0; j < m; j++) {
            int64_t h = element_high(hi ? hi + i : NULL, lb, j);
            fits &= h >= -16 && h < 16;
        }
        if (fits && pow2) {
            /* |X| < 2^60 in one int64 and count = 2^l: X converted to float32 rounds once,
             * and scaling by 2^(grid - l) in double is exact (a float32 subnormal rounds a
             * second time, as round_element does). */
            if (hi) {
                const int64_t *restrict hb = hi + i;
                for (size_t j = 0; j < m; j++) {
                    int64_t x = (int64_t)(((uint64_t)hb[j] << LIMB) + (uint64_t)lb[j]);
                    ob[j] = (float)((double)(float)x * unit);
                }
            } else {
                for (size_t j = 0; j < m; j++) ob[j] = (float)((double)(float)lb[j] * unit);
            }
        } else if (fits) {  /* the quotient in double; the few it cannot decide exactly */
            uint16_t redo[OM_EXACT_BLOCK];
            size_t nredo = 0;
            for (size_t j = 0; j < m; j++) {
                int64_t x = hi ? (int64_t)(((uint64_t)hi[i + j] << LIMB) + (uint64_t)lb[j])
                               : lb[j];
                int again;
                ob[j] = quotient((double)x, cd, g2, &again);
                redo[nredo] = (uint16_t)j;
                nredo += (size_t)again;
            }
            for (size_t k = 0; k < nredo; k++) {
                size_t j = redo[k];
                ob[j] = round_element(element_high(hi ? hi + i : NULL, lb, j),
                                      (uint64_t)lb[j] & MASK, grid, &d);
            }
        } else {
            for (size_t j = 0; j < m; j++)
                ob[j] = round_element(element_high(hi ? hi + i : NULL, lb, j),
                                      (uint64_t)lb[j] & MASK, grid, &d);
        }
        largest = top_bits(ob, m, largest);
        i += m;
    }
    *top = largest;
}

/* The integer packed_one gives for |v| <= 2^62, as a double: below 2^52, v + 2^52 rounds v
 * (half to even, its unit there being 1); a negative v above -2^56 takes the split's rounding
 * fl(v + 2^56), whose difference with 2^56 is exact; elsewhere v is an integer already. */
static inline double quantised(double v) {
    const uint64_t negative = mask_if(v < 0), split = mask_if(v > -0x1p56),
                   small = mask_if(v < 0x1p52);
    const double c = from_bits((bits_of(0x1p56) & negative & split) |
                               (bits_of(0x1p52) & ~negative & small));
    return (v + c) - c;
}

/* True when x, of float32's normal range, lies on a midpoint between two float32 values. */
static inline int float32_midpoint(double x) {
    return (bits_of(x) & 0x1fffffffu) == 0x10000000u;
}

int OMV_FN(om_exact_sum_rounded)(const float *const *rows, size_t at, int nrows,
                                 const double *scale, double packable, size_t n, int grid,
                                 int64_t count, uint64_t magic, int l, float *restrict out,
                                 uint32_t *top) {
    for (int w = 0; w < nrows; w++)
        if (!add_block_clean(rows[w] + at, n, scale[w], packable, packable)) return 0;
    /* X = s + e exactly: each row's integer added to s by Knuth's two-sum, its error to e
     * (integers below 2^9 each: exact), then s + e by two-sum again, so s = fl(X). */
    double s[OM_EXACT_BLOCK], e[OM_EXACT_BLOCK];
    const float *restrict g0 = rows[0] + at;
    for (size_t i = 0; i < n; i++) {
        s[i] = quantised((double)g0[i] * scale[0]);
        e[i] = 0.0;
    }
    for (int w = 1; w < nrows; w++) {
        const float *restrict g = rows[w] + at;
        const double sw = scale[w];
        for (size_t i = 0; i < n; i++) {
            const double r = quantised((double)g[i] * sw), t = s[i] + r, z = t - s[i];
            e[i] += (s[i] - (t - z)) + (r - z);
            s[i] = t;
        }
    }
    if (nrows > 2) {
        for (size_t i = 0; i < n; i++) {
            const double t = s[i] + e[i], z = t - s[i];
            e[i] = (s[i] - (t - z)) + (e[i] - z);
            s[i] = t;
        }
    }
    /* Rounded as om_exact_round rounds the packed X: for count = 2^l, float32(X) is
     * float32(s) unless s is a float32 midpoint and e moves X off it; otherwise the quotient
     * from s. The elements these cannot decide take round_element. */
    const divisor d = {count, magic, (uint64_t)count << 26, l,
                       bit_length((uint64_t)count), 61 + l};
    const double unit = power_of_two(grid - l), cd = (double)count, g2 = power_of_two(grid);
    const int pow2 = (count & (count - 1)) == 0;
    uint64_t any = 0;  /* some element to redo: found by a loop that vectorises, then sought */
    if (pow2) {
        for (size_t i = 0; i < n; i++) {
            out[i] = (float)((double)(float)s[i] * unit);
            any |= mask_if((e[i] != 0.0) & float32_midpoint(s[i]));
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            int again;
            out[i] = quotient(s[i], cd, g2, &again);
            any |= mask_if(again);
        }
    }
    for (size_t i = 0; any && i < n; i++) {
        int again;
        if (pow2) again = (e[i] != 0.0) & float32_midpoint(s[i]);
        else quotient(s[i], cd, g2, &again);
        if (again) {
            const int64_t x = (int64_t)s[i] + (int64_t)e[i];
            out[i] = round_element(x >> LIMB, (uint64_t)x & MASK, grid, &d);
        }
    }
    *top = top_bits(out, n, 0);
    return 1;
}

OM_PATH_PROBE(exact, OM_PATH)
#endif
