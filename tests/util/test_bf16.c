/* test_bf16.c — the half-precision conversions of util.h: vd_f32_to_bf16
 * (round to nearest, ties to even), vd_bf16_to_f32, their array forms and
 * vd_round_bf16_n, vd_f16_to_f32 and vd_f32_to_f16 (IEEE binary16), the
 * dtype-generic array and channels-last forms. Each conversion has a
 * test function of its own (bf16_*, f16_*): another branch may add tests of
 * the same functions, and separate functions merge without conflicts.
 *
 * References independent of util.c: hand-worked bit patterns; for bf16, the
 * two bf16 neighbours of a float (truncation and the next value up) with
 * the nearer picked in double arithmetic, ties by the even last bit; for
 * binary16, the definition (-1)^s 2^(e-15) (1 + m/1024) (subnormal: 2^-14
 * m/1024) evaluated with ldexp, exact in double and in float. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "util/util.h"
#include "vdt.h"


static bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

/* The reference rounding of a finite float to bf16 (see the header). */
static uint16_t ref_bf16(float f) {
    uint32_t u = vdt_bits_of(f);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);   /* away from zero */
    double x = f, a = vd_bf16_to_f32(lo);
    double b = (hi & 0x7fffu) == 0x7f80u ? ldexp(signbit(f) ? -1.0 : 1.0, 128)   /* past FLT_MAX */
                                         : (double)vd_bf16_to_f32(hi);
    double da = fabs(x - a), db = fabs(b - x);
    if (da < db) return lo;
    if (db < da) return hi;
    return (lo & 1u) ? hi : lo;                                    /* tie: the even one */
}

START_TEST(bf16_round_to_nearest_even) {
    static const struct { uint32_t in; uint16_t want; const char *what; } cases[] = {
        {0x3f800000u, 0x3f80u, "1 exactly"},
        {0xc0000000u, 0xc000u, "-2 exactly"},
        {0x3f808000u, 0x3f80u, "tie between 0x3f80 (even) and 0x3f81: down"},
        {0x3f818000u, 0x3f82u, "tie between 0x3f81 and 0x3f82 (even): up"},
        {0x3f807fffu, 0x3f80u, "just below a tie: down"},
        {0x3f808001u, 0x3f81u, "just above a tie: up"},
        {0xbf808000u, 0xbf80u, "negative tie to even: toward zero"},
        {0xbf818000u, 0xbf82u, "negative tie to even: away from zero"},
        {0x3fff8000u, 0x4000u, "tie carrying into the exponent (1.9921875.. -> 2)"},
        {0x00000000u, 0x0000u, "+0"},
        {0x80000000u, 0x8000u, "-0 keeps its sign"},
        {0x80000001u, 0x8000u, "the smallest negative subnormal rounds to -0"},
        {0x00008000u, 0x0000u, "subnormal tie to even 0"},
        {0x00018000u, 0x0002u, "subnormal tie to even 2"},
        {0x00010000u, 0x0001u, "the smallest bf16 subnormal exactly"},
        {0x7f800000u, 0x7f80u, "+inf"},
        {0xff800000u, 0xff80u, "-inf"},
        {0x7f7f0000u, 0x7f7fu, "the largest finite bf16 exactly"},
        {0x7f7f7fffu, 0x7f7fu, "below the tie above it: stays finite"},
        {0x7f7f8000u, 0x7f80u, "tie above the largest (odd) bf16: overflows to inf"},
        {0x7f7fffffu, 0x7f80u, "FLT_MAX: inf"},
        {0xff7fffffu, 0xff80u, "-FLT_MAX: -inf"},
        {0x7fc00000u, 0x7fc0u, "quiet NaN"},
        {0xffc00000u, 0xffc0u, "negative quiet NaN keeps its sign"},
        {0x7f800001u, 0x7fc0u, "NaN with only low payload bits: quiet NaN, not inf"},
        {0xff800001u, 0xffc0u, "negative low-payload NaN"},
        {0x7fa00000u, 0x7fe0u, "signalling NaN: quiet bit set, payload kept"},
        {0x7fffffffu, 0x7fffu, "all-ones NaN: no carry into the sign"},
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        uint16_t got = vd_f32_to_bf16(vdt_f32_of(cases[i].in));
        ck_assert_msg(got == cases[i].want, "%s: 0x%08x -> 0x%04x, want 0x%04x", cases[i].what,
                      cases[i].in, got, cases[i].want);
    }
    /* every bf16 value survives the round trip; a NaN stays a NaN */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = vd_bf16_to_f32((uint16_t)h);
        ck_assert_uint_eq(vdt_bits_of(f), h << 16);
        uint16_t back = vd_f32_to_bf16(f);
        if (bf16_is_nan((uint16_t)h)) ck_assert_msg(bf16_is_nan(back) && (back & 0x8000u) == (h & 0x8000u),
                                                  "NaN 0x%04x -> 0x%04x", h, back);
        else ck_assert_msg(back == h, "0x%04x -> 0x%04x", h, back);
    }
    /* the reference on every float whose low half is one of a few patterns
     * (ties, their neighbours, random) over all 65536 upper halves, finite */
    static const uint16_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0xc000,
                                    0x1234, 0xedcb};
    for (uint32_t h = 0; h < 0x10000u; h++)
        for (size_t k = 0; k < VD_ARRAY_LEN(lows); k++) {
            float f = vdt_f32_of(h << 16 | lows[k]);
            if (!isfinite(f)) continue;
            ck_assert_msg(vd_f32_to_bf16(f) == ref_bf16(f), "0x%08x: 0x%04x, reference 0x%04x",
                          vdt_bits_of(f), vd_f32_to_bf16(f), ref_bf16(f));
        }
}
END_TEST

/* The array forms (blocks of 8 plus a tail) give the scalar results, for
 * both 16-bit types, every length 0..40 and offset 0..3, on random and
 * special bit patterns; vd_round_h16_n is the store-and-reload; nothing
 * past n is written. The bf16-named forms are the VD_DT_BF16 ones. */
START_TEST(h16_array_forms) {
    enum { N = 48, GUARD = 4 };
    uint32_t pat[N + 4];
    vd_rng r;
    vd_rng_seed(&r, 5, 1);
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0x7f800001u,
                                       0xff800000u, 0x80000000u, 0x00008000u, 0x7fa00000u,
                                       0x477ff000u, 0x33000001u, 0x387fe000u, 0x3f801000u};
    for (int i = 0; i < N + 4; i++)
        pat[i] = i % 3 == 0 ? special[(i / 3) % VD_ARRAY_LEN(special)] : vd_rng_u32(&r);
    static const vd_dtype dts[] = {VD_DT_BF16, VD_DT_F16};
    for (size_t t = 0; t < VD_ARRAY_LEN(dts); t++)
        for (int off = 0; off < 4; off++)
            for (int n = 0; n <= 40; n++) {
                vd_dtype dt = dts[t];
                float src[N + 4];
                uint16_t dst[N + GUARD], dst2[N + GUARD];
                float back[N + GUARD], rounded[N + GUARD];
                memcpy(src, pat + off, sizeof(float) * (size_t)n);
                memset(dst, 0x5a, sizeof dst);
                vd_f32_to_h16_n(dt, src, dst, (size_t)n);
                for (int i = 0; i < n; i++)
                    ck_assert_msg(dst[i] == vd_f32_to_h16(dt, src[i]),
                                  "dt %d n %d off %d [%d]: 0x%04x vs 0x%04x", dt, n, off, i, dst[i],
                                  vd_f32_to_h16(dt, src[i]));
                for (int i = n; i < N + GUARD; i++) ck_assert_uint_eq(dst[i], 0x5a5au);
                if (dt == VD_DT_BF16) {
                    memset(dst2, 0x5a, sizeof dst2);
                    vd_f32_to_bf16_n(src, dst2, (size_t)n);
                    ck_assert(memcmp(dst, dst2, sizeof dst) == 0);
                }
                memset(back, 0x5a, sizeof back);
                vd_h16_to_f32_n(dt, dst, back, (size_t)n);
                for (int i = 0; i < n; i++)
                    ck_assert_uint_eq(vdt_bits_of(back[i]), vdt_bits_of(vd_h16_to_f32(dt, dst[i])));
                for (int i = n; i < N + GUARD; i++) ck_assert_uint_eq(vdt_bits_of(back[i]), 0x5a5a5a5au);
                memset(rounded, 0x5a, sizeof rounded);
                memcpy(rounded, src, sizeof(float) * (size_t)n);
                vd_round_h16_n(dt, rounded, (size_t)n);
                for (int i = 0; i < n; i++) ck_assert_uint_eq(vdt_bits_of(rounded[i]), vdt_bits_of(back[i]));
                for (int i = n; i < N + GUARD; i++) ck_assert_uint_eq(vdt_bits_of(rounded[i]), 0x5a5a5a5au);
            }
}
END_TEST

/* vd_h16_to_f32_n (branch-free) against vd_f16_to_f32 (the exhaustively
 * tested scalar) on every binary16 pattern, NaN payloads included. */
START_TEST(f16_array_to_f32_exhaustive) {
    uint16_t *h = malloc(0x10000u * sizeof *h);
    float *f = malloc(0x10000u * sizeof *f);
    ck_assert(h && f);
    for (uint32_t i = 0; i < 0x10000u; i++) h[i] = (uint16_t)i;
    vd_h16_to_f32_n(VD_DT_F16, h, f, 0x10000u);
    for (uint32_t i = 0; i < 0x10000u; i++)
        ck_assert_msg(vdt_bits_of(f[i]) == vdt_bits_of(vd_f16_to_f32((uint16_t)i)), "0x%04x", i);
    free(h);
    free(f);
}
END_TEST

/* vd_f32_to_f16 on hand-worked cases: ties to even at normal and subnormal
 * spacing, the overflow threshold 65520, underflow to zero below 2^-25, the
 * round up out of the subnormals, NaN to 0x7FFF (cvt.rn.f16.f32's
 * canonical NaN). */
START_TEST(f16_round_to_nearest_even) {
    static const struct { uint32_t in; uint16_t want; const char *what; } cases[] = {
        {0x3f800000u, 0x3c00u, "1 exactly"},
        {0xc0000000u, 0xc000u, "-2 exactly"},
        {0x3f801000u, 0x3c00u, "tie between 1 (even) and 1+2^-10: down"},
        {0x3f803000u, 0x3c02u, "tie between 0x3c01 and 0x3c02 (even): up"},
        {0x3f800fffu, 0x3c00u, "just below a tie: down"},
        {0x3f801001u, 0x3c01u, "just above a tie: up"},
        {0xbf801000u, 0xbc00u, "negative tie to even"},
        {0x3ffff000u, 0x4000u, "tie carrying into the exponent (-> 2)"},
        {0x477fe000u, 0x7bffu, "65504, the largest finite, exactly"},
        {0x477fefffu, 0x7bffu, "just below 65520: stays finite"},
        {0x477ff000u, 0x7c00u, "65520 (tie above the largest, odd): inf"},
        {0xc77ff000u, 0xfc00u, "-65520: -inf"},
        {0x7f7fffffu, 0x7c00u, "FLT_MAX: inf"},
        {0x7f800000u, 0x7c00u, "+inf"},
        {0xff800000u, 0xfc00u, "-inf"},
        {0x38800000u, 0x0400u, "2^-14, the smallest normal"},
        {0x387fc000u, 0x03ffu, "the largest subnormal exactly"},
        {0x387fe000u, 0x0400u, "tie above the largest subnormal (odd): the smallest normal"},
        {0x33800000u, 0x0001u, "2^-24, the smallest subnormal"},
        {0x33000000u, 0x0000u, "2^-25, tie between 0 (even) and 2^-24: 0"},
        {0x33000001u, 0x0001u, "just above 2^-25: 2^-24"},
        {0x33c00000u, 0x0002u, "1.5 * 2^-24: tie to even 2"},
        {0x34200000u, 0x0002u, "2.5 * 2^-24: tie to even 2"},
        {0xb3c00000u, 0x8002u, "negative subnormal tie"},
        {0x00000001u, 0x0000u, "a float subnormal: +0"},
        {0x80000001u, 0x8000u, "a negative float subnormal: -0"},
        {0x00000000u, 0x0000u, "+0"},
        {0x80000000u, 0x8000u, "-0 keeps its sign"},
        {0x7fc00000u, 0x7fffu, "quiet NaN: canonical"},
        {0xffc00000u, 0x7fffu, "negative NaN: canonical"},
        {0x7f800001u, 0x7fffu, "low-payload NaN: canonical, not inf"},
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(cases); i++) {
        uint16_t got = vd_f32_to_f16(vdt_f32_of(cases[i].in));
        ck_assert_msg(got == cases[i].want, "%s: 0x%08x -> 0x%04x, want 0x%04x", cases[i].what,
                      cases[i].in, got, cases[i].want);
    }
    /* every binary16 value survives the round trip (NaNs become 0x7FFF) */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint16_t back = vd_f32_to_f16(vd_f16_to_f32((uint16_t)h));
        bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
        ck_assert_msg(back == (nan ? 0x7fffu : h), "0x%04x -> 0x%04x", h, back);
    }
}
END_TEST

/* The reference: binary16 rounding done in double. For finite f, the two
 * binary16 neighbours are found by scanning the sorted non-negative
 * patterns (monotone in value) with a binary search, the nearer picked in
 * double arithmetic (exact: both neighbours and f are doubles), ties by the
 * even last bit; 2^16 stands in for the neighbour above 65504. */
static uint16_t ref_f16(float f) {
    double x = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000u : 0u;
    uint32_t lo = 0, hi = 0x7c00u;          /* value(lo) <= x < value(hi), 0x7c00 as 2^16 */
    if (x >= 65536.0) return sign | 0x7c00u;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if ((double)vd_f16_to_f32((uint16_t)mid) <= x) lo = mid; else hi = mid;
    }
    double a = vd_f16_to_f32((uint16_t)lo), b = hi == 0x7c00u ? 65536.0 : vd_f16_to_f32((uint16_t)hi);
    double da = x - a, db = b - x;
    uint32_t r = da < db ? lo : db < da ? hi : (lo & 1u) ? hi : lo;
    return (uint16_t)(sign | r);
}

/* vd_f32_to_f16 against two independent references on a stratified sample
 * of the floats: every binary16 value's float, the midpoints to its upper
 * neighbour and one float ulp either side of them, and every 4099th float
 * bit pattern (about a million, all exponents and signs). The references:
 * ref_f16 above, and the compiler's _Float16 conversion (GCC on x86-64:
 * F16C or libgcc's soft float, round to nearest even) where it exists. NaN
 * inputs are the hand-picked cases' business. */
static void check_f16(uint32_t u) {
    float f = vdt_f32_of(u);
    if (isnan(f)) return;
    uint16_t got = vd_f32_to_f16(f), want = isinf(f) ? (uint16_t)(u >> 16 & 0x8000u) | 0x7c00u
                                                      : ref_f16(f);
    ck_assert_msg(got == want, "0x%08x: 0x%04x, reference 0x%04x", u, got, want);
#ifdef __FLT16_MAX__
    _Float16 c = (_Float16)f;
    uint16_t cb;
    memcpy(&cb, &c, 2);
    ck_assert_msg(got == cb, "0x%08x: 0x%04x, _Float16 0x%04x", u, got, cb);
#endif
}

START_TEST(f16_round_vs_references) {
    for (uint32_t h = 0; h < 0x7c00u; h++) {
        uint32_t u = vdt_bits_of(vd_f16_to_f32((uint16_t)h));
        float mid = (float)(((double)vd_f16_to_f32((uint16_t)h) +
                             (h == 0x7bffu ? 65536.0 : (double)vd_f16_to_f32((uint16_t)(h + 1)))) / 2);
        uint32_t m = vdt_bits_of(mid);   /* exact: a binary16 midpoint has 12 significant bits */
        const uint32_t probes[] = {u, m, m - 1, m + 1};
        for (size_t k = 0; k < VD_ARRAY_LEN(probes); k++) {
            check_f16(probes[k]);
            check_f16(probes[k] | 0x80000000u);
        }
    }
    for (uint64_t u = 0; u < 0x100000000ull; u += 4099) check_f16((uint32_t)u);
}
END_TEST

/* Every binary16 bit pattern against the definition. */
START_TEST(f16_to_f32_exhaustive) {
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float got = vd_f16_to_f32((uint16_t)h);
        uint32_t s = h >> 15, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
        if (e == 0x1f) {
            if (m == 0) ck_assert_msg(isinf(got) && (signbit(got) != 0) == (s != 0), "0x%04x", h);
            else ck_assert_msg(isnan(got) && (signbit(got) != 0) == (s != 0) &&
                               ((vdt_bits_of(got) >> 13) & 0x3ffu) == m, "0x%04x: payload", h);
            continue;
        }
        double v = e ? ldexp(1.0 + m / 1024.0, (int)e - 15) : ldexp(m / 1024.0, -14);
        if (s) v = -v;
        ck_assert_msg(got == (float)v && (signbit(got) != 0) == (s != 0), "0x%04x: %a, want %a", h,
                      (double)got, v);
    }
    /* hand-worked: 1, -2, the largest, the smallest normal and subnormal, -0 */
    ck_assert(vd_f16_to_f32(0x3c00u) == 1.0f);
    ck_assert(vd_f16_to_f32(0xc000u) == -2.0f);
    ck_assert(vd_f16_to_f32(0x7bffu) == 65504.0f);
    ck_assert(vd_f16_to_f32(0x0400u) == ldexpf(1.0f, -14));
    ck_assert(vd_f16_to_f32(0x0001u) == ldexpf(1.0f, -24));
    ck_assert_uint_eq(vdt_bits_of(vd_f16_to_f32(0x8000u)), 0x80000000u);
}
END_TEST

/* The channels-last conversions of both 16-bit types against the index
 * formula, exactly, on shapes that hit the blocked loops' edges (hw not a
 * multiple of the block), and C == 1 / HW == 1 (the same layouts); the
 * bf16-named forms give the VD_DT_BF16 bytes. */
START_TEST(nhwc_conversions) {
    static const int shapes[][3] = {{2, 3, 35}, {3, 16, 130}, {1, 1, 70}, {4, 7, 1}, {2, 64, 64}};
    static const vd_dtype dts[] = {VD_DT_BF16, VD_DT_F16};
    for (size_t t = 0; t < VD_ARRAY_LEN(dts); t++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            vd_dtype dt = dts[t];
            int n = shapes[k][0], c = shapes[k][1], hw = shapes[k][2];
            size_t tn = (size_t)n * (size_t)c * (size_t)hw;
            float *x = malloc(tn * sizeof *x), *back = malloc(tn * sizeof *back);
            uint16_t *h = malloc(tn * sizeof *h), *h2 = malloc(tn * sizeof *h2);
            ck_assert(x && back && h && h2);
            for (size_t i = 0; i < tn; i++) x[i] = (float)((int)(i * 7919 % 2001) - 1000) / 37.0f;
            vd_nchw_f32_to_nhwc_h16(dt, x, h, n, c, hw);
            for (int i = 0; i < n; i++)
                for (int ch = 0; ch < c; ch++)
                    for (int p = 0; p < hw; p++) {
                        size_t src = ((size_t)i * c + ch) * hw + p, dst = ((size_t)i * hw + p) * c + ch;
                        ck_assert_uint_eq(h[dst], vd_f32_to_h16(dt, x[src]));
                    }
            vd_nhwc_h16_to_nchw_f32(dt, h, back, n, c, hw);
            for (size_t i = 0; i < tn; i++)   /* back = the rounded value, at its NCHW place */
                ck_assert_uint_eq(vdt_bits_of(back[i]),
                                  vdt_bits_of(vd_h16_to_f32(dt, vd_f32_to_h16(dt, x[i]))));
            if (dt == VD_DT_BF16) {
                vd_nchw_f32_to_nhwc_bf16(x, h2, n, c, hw);
                ck_assert(memcmp(h, h2, tn * sizeof *h) == 0);
                float *back2 = malloc(tn * sizeof *back2);
                ck_assert(back2);
                vd_nhwc_bf16_to_nchw_f32(h2, back2, n, c, hw);
                ck_assert(memcmp(back, back2, tn * sizeof *back) == 0);
                free(back2);
            }
            free(x);
            free(back);
            free(h);
            free(h2);
        }
}
END_TEST

/* The float channels-last conversions (math tf32's maps): the index formula
 * exactly, a round trip NCHW -> NHWC -> NCHW bit-identical (values with
 * every bit pattern class: NaN payloads, -0, subnormals, infinities), on the
 * same edge shapes; the 16-bit dt forms are the functions above. */
START_TEST(nhwc_conversions_f32) {
    static const int shapes[][3] = {{2, 3, 35}, {3, 16, 130}, {1, 1, 70}, {4, 7, 1}, {2, 64, 64}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], c = shapes[k][1], hw = shapes[k][2];
        size_t tn = (size_t)n * (size_t)c * (size_t)hw;
        uint32_t *x = malloc(tn * 4), *t = malloc(tn * 4), *back = malloc(tn * 4);
        uint16_t *h = malloc(tn * 2), *h2 = malloc(tn * 2);
        ck_assert(x && t && back && h && h2);
        for (size_t i = 0; i < tn; i++) x[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i << 7);
        x[0] = 0x7fc01234u;   /* a NaN with a payload */
        x[tn - 1] = 0x80000000u;
        vd_nchw_f32_to_nhwc(VD_DT_F32, (const float *)x, t, n, c, hw);
        for (int i = 0; i < n; i++)
            for (int ch = 0; ch < c; ch++)
                for (int p = 0; p < hw; p++) {
                    size_t src = ((size_t)i * c + ch) * hw + p, dst = ((size_t)i * hw + p) * c + ch;
                    ck_assert_uint_eq(t[dst], x[src]);
                }
        vd_nhwc_to_nchw_f32(VD_DT_F32, t, (float *)back, n, c, hw);
        ck_assert(memcmp(back, x, tn * 4) == 0);
        /* the 16-bit dt: the bf16 functions' bytes */
        for (size_t i = 0; i < tn; i++) x[i] &= 0xbfffffffu;   /* finite: no NaN to compare */
        vd_nchw_f32_to_nhwc(VD_DT_BF16, (const float *)x, h, n, c, hw);
        vd_nchw_f32_to_nhwc_bf16((const float *)x, h2, n, c, hw);
        ck_assert(memcmp(h, h2, tn * 2) == 0);
        vd_nhwc_to_nchw_f32(VD_DT_BF16, h, (float *)back, n, c, hw);
        vd_nhwc_bf16_to_nchw_f32(h2, (float *)t, n, c, hw);
        ck_assert(memcmp(back, t, tn * 4) == 0);
        free(x);
        free(t);
        free(back);
        free(h);
        free(h2);
    }
}
END_TEST

VDT_MAIN("util-bf16", 0, bf16_round_to_nearest_even, h16_array_forms, f16_to_f32_exhaustive,
         f16_array_to_f32_exhaustive, f16_round_to_nearest_even, f16_round_vs_references,
         nhwc_conversions, nhwc_conversions_f32)
