/* test_bf16.c — the half-precision conversions of util.h: vd_f32_to_bf16
 * (round to nearest, ties to even), vd_bf16_to_f32, their array forms and
 * vd_round_bf16_n, and vd_f16_to_f32 (IEEE binary16). Each conversion has a
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
 * every length 0..40 and offset 0..3, on random and special bit patterns;
 * vd_round_bf16_n is the store-and-reload; nothing past n is written. */
START_TEST(bf16_array_forms) {
    enum { N = 48, GUARD = 4 };
    uint32_t pat[N + 4];
    vd_rng r;
    vd_rng_seed(&r, 5, 1);
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0x7f800001u,
                                       0xff800000u, 0x80000000u, 0x00008000u, 0x7fa00000u};
    for (int i = 0; i < N + 4; i++)
        pat[i] = i % 3 == 0 ? special[(i / 3) % VD_ARRAY_LEN(special)] : vd_rng_u32(&r);
    for (int off = 0; off < 4; off++)
        for (int n = 0; n <= 40; n++) {
            float src[N + 4];
            uint16_t dst[N + GUARD];
            float back[N + GUARD], rounded[N + GUARD];
            memcpy(src, pat + off, sizeof(float) * (size_t)n);
            memset(dst, 0x5a, sizeof dst);
            vd_f32_to_bf16_n(src, dst, (size_t)n);
            for (int i = 0; i < n; i++)
                ck_assert_msg(dst[i] == vd_f32_to_bf16(src[i]), "n %d off %d [%d]: 0x%04x vs 0x%04x",
                              n, off, i, dst[i], vd_f32_to_bf16(src[i]));
            for (int i = n; i < N + GUARD; i++) ck_assert_uint_eq(dst[i], 0x5a5au);
            memset(back, 0x5a, sizeof back);
            vd_bf16_to_f32_n(dst, back, (size_t)n);
            for (int i = 0; i < n; i++) ck_assert_uint_eq(vdt_bits_of(back[i]), (uint32_t)dst[i] << 16);
            for (int i = n; i < N + GUARD; i++) ck_assert_uint_eq(vdt_bits_of(back[i]), 0x5a5a5a5au);
            memset(rounded, 0x5a, sizeof rounded);
            memcpy(rounded, src, sizeof(float) * (size_t)n);
            vd_round_bf16_n(rounded, (size_t)n);
            for (int i = 0; i < n; i++) ck_assert_uint_eq(vdt_bits_of(rounded[i]), vdt_bits_of(back[i]));
            for (int i = n; i < N + GUARD; i++) ck_assert_uint_eq(vdt_bits_of(rounded[i]), 0x5a5a5a5au);
        }
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

/* The channels-last conversions against the index formula, exactly, on
 * shapes that hit the blocked loops' edges (hw not a multiple of the block),
 * and C == 1 / HW == 1 (the same layouts). */
START_TEST(nhwc_conversions) {
    static const int shapes[][3] = {{2, 3, 35}, {3, 16, 130}, {1, 1, 70}, {4, 7, 1}, {2, 64, 64}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k][0], c = shapes[k][1], hw = shapes[k][2];
        size_t t = (size_t)n * (size_t)c * (size_t)hw;
        float *x = malloc(t * sizeof *x), *back = malloc(t * sizeof *back);
        uint16_t *h = malloc(t * sizeof *h);
        ck_assert(x && back && h);
        for (size_t i = 0; i < t; i++) x[i] = (float)((int)(i * 7919 % 2001) - 1000) / 37.0f;
        vd_nchw_f32_to_nhwc_bf16(x, h, n, c, hw);
        for (int i = 0; i < n; i++)
            for (int ch = 0; ch < c; ch++)
                for (int p = 0; p < hw; p++) {
                    size_t src = ((size_t)i * c + ch) * hw + p, dst = ((size_t)i * hw + p) * c + ch;
                    ck_assert_uint_eq(h[dst], vd_f32_to_bf16(x[src]));
                }
        vd_nhwc_bf16_to_nchw_f32(h, back, n, c, hw);
        for (size_t i = 0; i < t; i++)   /* back = the rounded value, at its NCHW place */
            ck_assert_uint_eq(vdt_bits_of(back[i]), (uint32_t)vd_f32_to_bf16(x[i]) << 16);
        free(x);
        free(back);
        free(h);
    }
}
END_TEST

VDT_MAIN("util-bf16", 0, bf16_round_to_nearest_even, bf16_array_forms, f16_to_f32_exhaustive,
         nhwc_conversions)
