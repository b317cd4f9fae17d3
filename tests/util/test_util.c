/* test_util.c — src/util against hand-computed values. */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "util/util.h"
#include "util/json.h"
#include "vdt.h"

START_TEST(parse_size_units) {
    uint64_t v;
    vd_err e = {0};
    ck_assert_int_eq(vd_parse_size("4096", &v, &e), 0); ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(vd_parse_size("512M", &v, &e), 0); ck_assert_uint_eq(v, 512ull << 20);
    ck_assert_int_eq(vd_parse_size("12G", &v, &e), 0); ck_assert_uint_eq(v, 12ull << 30);
    ck_assert_int_eq(vd_parse_size("12GiB", &v, &e), 0); ck_assert_uint_eq(v, 12ull << 30);
    ck_assert_int_eq(vd_parse_size("1.5k", &v, &e), 0); ck_assert_uint_eq(v, 1536);
    ck_assert_int_eq(vd_parse_size("2T", &v, &e), 0); ck_assert_uint_eq(v, 2ull << 40);
    const char *bad[] = {"", "G", "12Q", "-1G", "1e400", "12 G", "nan", "inf", "99999999T"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        ck_assert_msg(vd_parse_size(bad[i], &v, &e) == VD_EUSAGE, "'%s' accepted", bad[i]);
        ck_assert_uint_eq(v, 7);  /* untouched on error */
    }
}
END_TEST

START_TEST(checked_arithmetic) {
    uint64_t r = 5;
    ck_assert(vd_mul_u64(1ull << 32, 1ull << 31, &r)); ck_assert_uint_eq(r, 1ull << 63);
    r = 5;
    ck_assert(!vd_mul_u64(1ull << 32, 1ull << 32, &r)); ck_assert_uint_eq(r, 5);
    ck_assert(vd_add_u64(UINT64_MAX - 1, 1, &r)); ck_assert_uint_eq(r, UINT64_MAX);
    ck_assert(!vd_add_u64(UINT64_MAX, 1, &r)); ck_assert_uint_eq(r, UINT64_MAX);
}
END_TEST

START_TEST(suggestions) {
    const char *const c[] = {"conv", "pool", "relu", "batchnorm", "softmax_cross_entropy"};
    ck_assert_int_eq(vd_edit_distance("kitten", "sitting"), 3);
    ck_assert_str_eq(vd_suggest("convv", c, 5), "conv");
    ck_assert_str_eq(vd_suggest("batchnrom", c, 5), "batchnorm");
    ck_assert_ptr_null(vd_suggest("lstm", c, 5));   /* nothing plausibly close */
}
END_TEST

/* vd_json_write of v, as a malloc'd string. */
static char *json_text(const json_t *v) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    vd_err e = {0};
    ck_assert_msg(vd_json_write(f, v, &e) == 0, "%s", e.msg);
    fclose(f);
    return buf;
}

START_TEST(json_strings) {
    json_t *o = json_object();
    ck_assert_int_eq(json_object_set_new(o, "s", vd_json_text("a\"b\\c\nd\te\x01/\xc3\xa9")), 0);
    char *t = json_text(o);
    ck_assert_str_eq(t, "{\n  \"s\": \"a\\\"b\\\\c\\nd\\te\\u0001/\xc3\xa9\"\n}\n");
    free(t);
    json_decref(o);
    /* invalid UTF-8 (a name cut inside a character): the ASCII bytes survive */
    json_t *s = vd_json_text("ab\xc3");
    ck_assert_str_eq(json_string_value(s), "ab?");
    json_decref(s);
    ck_assert(vd_json_utf8("x\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
    static const char *const bad[] = { "\x80", "\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                       "\xe2\x82", "\xff" };
    for (size_t i = 0; i < VD_ARRAY_LEN(bad); i++)
        ck_assert_msg(!vd_json_utf8(bad[i]), "case %zu accepted", i);
}
END_TEST

/* The layout: top-level members one per line, the elements of a top-level
 * array one per line, everything deeper on one line. */
START_TEST(json_layout) {
    json_t *v = json_pack("{s:i, s:{s:b, s:n}, s:[{s:[i,i]}, s, f], s:[], s:{}}", "a", 1, "b", "x",
                          1, "y", "c", "d", 2, 3, "e", 0.5, "f", "g");
    ck_assert_ptr_nonnull(v);
    char *t = json_text(v);
    ck_assert_str_eq(t, "{\n  \"a\": 1,\n  \"b\": {\"x\": true, \"y\": null},\n  \"c\": [\n"
                        "    {\"d\": [2, 3]},\n    \"e\",\n    0.5\n  ],\n  \"f\": [],\n  \"g\": {}\n}\n");
    free(t);
    json_decref(v);
    json_t *e = json_object();
    t = json_text(e);
    ck_assert_str_eq(t, "{}\n");
    free(t);
    json_decref(e);
    /* integers: uint64 above INT64_MAX become the nearest real; non-finite reals null */
    json_t *a = json_pack("[o, o, o, o]", vd_json_uint(INT64_MAX), vd_json_uint(UINT64_MAX),
                          vd_json_real(NAN), vd_json_real(-INFINITY));
    t = json_text(a);
    ck_assert_str_eq(t, "[9223372036854775807, 1.8446744073709552e19, null, null]\n");
    free(t);
    json_decref(a);
}
END_TEST

/* Reals are written with enough digits to read back as the same double. */
START_TEST(json_reals_round_trip) {
    double vals[64] = { 0.1, 1.0 / 3.0, 1e-300, 5e-324, DBL_MAX, 9007199254740993.0, 1.0,
                        0.38144577503824619, 4.9153599143028258e-6, 123456789.125 };
    vd_rng r;
    vd_rng_seed(&r, 7, 1);
    for (int i = 10; i < 64; i++)     /* random bit patterns of finite doubles */
        do {
            uint64_t bits = ((uint64_t)vd_rng_u32(&r) << 32) | vd_rng_u32(&r);
            memcpy(&vals[i], &bits, sizeof bits);
        } while (!isfinite(vals[i]));
    json_t *obj = json_object(), *arr = json_array();
    ck_assert_int_eq(json_object_set_new(obj, "v", arr), 0);
    for (int i = 0; i < 64; i++) ck_assert_int_eq(json_array_append_new(arr, vd_json_real(vals[i])), 0);
    char *t = json_text(obj);
    json_decref(obj);
    char err[200];
    json_t *back = vd_json_parse(t, strlen(t), 0, err, sizeof err);
    ck_assert_msg(back, "%s", err);
    const json_t *ba = json_object_get(back, "v");
    ck_assert_uint_eq(json_array_size(ba), 64);
    for (size_t i = 0; i < 64; i++) {
        const json_t *x = json_array_get(ba, i);
        ck_assert_msg(json_is_real(x), "element %zu is not a real", i);   /* 1.0 stays a real */
        double d = json_real_value(x);
        ck_assert_msg(memcmp(&d, &vals[i], sizeof d) == 0, "%.17g read back as %.17g", vals[i], d);
    }
    json_decref(back);
    free(t);
}
END_TEST

START_TEST(json_parse_is_strict) {
    char err[200];
    const char *ok = " {\"a\" : [1, -2.5e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"], \"b\": {}} ";
    json_t *v = vd_json_parse(ok, strlen(ok), 0, err, sizeof err);
    ck_assert_msg(v, "%s", err);
    const json_t *a = json_object_get(v, "a");
    ck_assert_uint_eq(json_array_size(a), 6);
    ck_assert(json_real_value(json_array_get(a, 1)) == -2500.0);
    ck_assert_str_eq(json_string_value(json_array_get(a, 5)), "x\xc3\xa9\xf0\x9f\x98\x80\n");
    uint64_t u = 0;
    ck_assert(vd_json_u64(json_array_get(a, 0), &u) && u == 1);
    ck_assert(!vd_json_u64(json_array_get(a, 1), &u));
    json_decref(v);
    json_t *m = json_pack("[I, i, f]", (json_int_t)INT64_MAX, -1, 1.0);
    ck_assert(vd_json_u64(json_array_get(m, 0), &u) && u == (uint64_t)INT64_MAX);
    ck_assert(!vd_json_u64(json_array_get(m, 1), &u));   /* negative */
    ck_assert(!vd_json_u64(json_array_get(m, 2), &u));   /* a real, even if whole */
    json_decref(m);
    static const struct { const char *text; size_t n; const char *why; } bad[] = {
        { "{\"a\":1,\"b\":2,\"a\":3}", 0, "duplicate" }, { "", 0, NULL }, { "{", 0, NULL },
        { "{\"a\":}", 0, NULL }, { "[1,]", 0, NULL }, { "01", 0, NULL }, { "\"\x01\"", 0, NULL },
        { "{\"a\":1} x", 0, NULL }, { "\"\\ud800\"", 0, NULL }, { "[\"\\q\"]", 0, NULL },
        { "tru", 0, NULL }, { "1.", 0, NULL }, { "-", 0, NULL }, { "{1:2}", 0, NULL },
        { "[\"a\\u0000b\"]", 0, NULL }, { "[\"\xc3\"]", 0, NULL }, { "[1]\0[2]", 7, NULL },
        { "[99999999999999999999]", 0, NULL },
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(bad); i++) {
        size_t n = bad[i].n ? bad[i].n : strlen(bad[i].text);
        err[0] = 0;
        v = vd_json_parse(bad[i].text, n, 0, err, sizeof err);
        ck_assert_msg(!v, "accepted case %zu", i);
        ck_assert_msg(!strncmp(err, "offset ", 7), "case %zu: %s", i, err);
        if (bad[i].why) ck_assert_msg(strstr(err, bad[i].why), "case %zu: %s", i, err);
    }
}
END_TEST

START_TEST(atomic_write_replaces_and_leaves_no_temp) {
    char *dir = vdt_tmpdir("vd-util");
    char path[512];
    snprintf(path, sizeof path, "%s/file", dir);
    vd_err e = {0};
    ck_assert_int_eq(vd_write_file_atomic(path, "old", 3, &e), 0);
    ck_assert_int_eq(vd_write_file_atomic(path, "new!", 4, &e), 0);
    size_t n;
    char *got = vdt_slurp(path, &n);
    ck_assert_uint_eq(n, 4);
    ck_assert_mem_eq(got, "new!", 4);
    vd_free(got);
    int entries = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; (de = readdir(d));) entries += de->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(entries, 1);  /* no temporary left behind */
    /* a directory that does not exist: I/O error naming the path */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/missing/file", dir);
    ck_assert_int_eq(vd_write_file_atomic(bad, "x", 1, &e), VD_EIO);
    ck_assert_ptr_nonnull(strstr(e.msg, bad));
    vdt_rmrf(dir);
    vd_free(dir);
}
END_TEST

START_TEST(rng_is_pcg32) {
    /* PCG32 reference (pcg32_srandom(42, 54)): first outputs of O'Neill's demo */
    vd_rng r;
    vd_rng_seed(&r, 42, 54);
    const uint32_t want[] = {0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu};
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(vd_rng_u32(&r), want[i]);
    /* jumping ahead k draws lands where k draws do */
    for (uint64_t k = 0; k < 20000; k = 2 * k + 1) {
        vd_rng a, b;
        vd_rng_seed(&a, 42, 54);
        vd_rng_seed(&b, 42, 54);
        for (uint64_t i = 0; i < k; i++) (void)vd_rng_u32(&a);
        vd_rng_advance(&b, k);
        ck_assert_uint_eq(a.state, b.state);
        ck_assert_uint_eq(vd_rng_u32(&a), vd_rng_u32(&b));
    }
    /* the dropout hash is a pure function in [0, 1) */
    float u = vd_hash_uniform(1, 2, 3, 4);
    ck_assert(u >= 0.0f && u < 1.0f);
    ck_assert(u == vd_hash_uniform(1, 2, 3, 4));
    ck_assert(u != vd_hash_uniform(1, 2, 3, 5));
}
END_TEST

/* ---- 16-bit floats ---------------------------------------------------------- */


/* The magnitude of the bf16 pattern p (0 .. 0x7F80) with an unbounded
 * exponent: 0x7F80 is 2^128, the value just past the largest finite bf16
 * that an infinity stands for when rounding. */
static double bf16_mag(uint32_t p) {
    uint32_t ex = p >> 7, m = p & 0x7F;
    return ex ? ldexp(128.0 + m, (int)ex - 134) : ldexp(m, -133);
}

/* An independent round-to-nearest-even: of the two bf16 around |x| (the
 * truncation and the next one up), the nearer, measured in double (exact:
 * both are floats within a factor of two), the even one on a tie. Not for
 * NaN. */
static uint16_t ref_bf16(float x) {
    uint32_t u = vdt_bits_of(x), s = (u >> 16) & 0x8000u, m = u & 0x7FFFFFFFu;
    if (m == 0x7F800000u) return (uint16_t)(s | 0x7F80u);
    uint32_t lo = m >> 16;
    double v = fabs((double)x), dl = v - bf16_mag(lo), dh = bf16_mag(lo + 1) - v;
    uint32_t r = dl < dh ? lo : dh < dl ? lo + 1 : (lo & 1u) ? lo + 1 : lo;
    return (uint16_t)(s | r);
}

static bool bf16_is_qnan(uint16_t h) {
    return (h & 0x7F80u) == 0x7F80u && (h & 0x0040u);   /* exponent all ones, quiet bit */
}

START_TEST(bf16_rounds_to_nearest_even) {
    static const struct { uint32_t f; uint16_t want; } c[] = {
        { 0x3F800000u, 0x3F80 },   /* 1.0: exact */
        { 0xC0200000u, 0xC020 },   /* -2.5: exact */
        { 0x00000000u, 0x0000 }, { 0x80000000u, 0x8000 },       /* +-0 */
        { 0x3F808000u, 0x3F80 },   /* 1 + 2^-8: a tie, kept bit even: down */
        { 0x3F818000u, 0x3F82 },   /* a tie, kept bit odd: up to even */
        { 0xBF808000u, 0xBF80 }, { 0xBF818000u, 0xBF82 },       /* the same, negative */
        { 0x3F808001u, 0x3F81 },   /* just above the tie: up */
        { 0x3F817FFFu, 0x3F81 },   /* just below the tie: down */
        { 0x3F80FFFFu, 0x3F81 },   /* not truncation: up */
        { 0x3FFF8000u, 0x4000 },   /* a tie that carries into the exponent */
        { 0x7F800000u, 0x7F80 }, { 0xFF800000u, 0xFF80 },       /* infinities stay */
        { 0x7F7FFFFFu, 0x7F80 },   /* FLT_MAX rounds to inf */
        { 0xFF7FFFFFu, 0xFF80 },   /* -FLT_MAX to -inf */
        { 0x7F7F8000u, 0x7F80 },   /* the tie between the largest bf16 (odd) and 2^128: inf */
        { 0x7F7F7FFFu, 0x7F7F },   /* just below it: the largest bf16 */
        { 0x7F7F0000u, 0x7F7F },   /* the largest bf16 itself */
        { 0x00008000u, 0x0000 },   /* subnormal tie, even: down to 0 */
        { 0x00018000u, 0x0002 },   /* subnormal tie, odd: up */
        { 0x007FFFFFu, 0x0080 },   /* the largest subnormal rounds up to the smallest normal */
        { 0x80010000u, 0x8001 },   /* a bf16 subnormal: exact */
    };
    for (size_t i = 0; i < VD_ARRAY_LEN(c); i++) {
        uint16_t got = vd_f32_to_bf16(vdt_f32_of(c[i].f));
        ck_assert_msg(got == c[i].want, "0x%08x -> 0x%04x, expected 0x%04x", c[i].f, got,
                      c[i].want);
        ck_assert_msg(ref_bf16(vdt_f32_of(c[i].f)) == c[i].want, "the reference disagrees at 0x%08x",
                      c[i].f);
    }
    ck_assert(vdt_bits_of(vd_bf16_to_f32(vd_f32_to_bf16(FLT_MAX))) == 0x7F800000u);
    /* NaNs stay NaNs (quiet), also those whose top half alone would read as
     * an infinity (0x7F800001) or whose rounding would carry out (0xFFFFFFFF) */
    static const uint32_t nans[] = { 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                     0x7FBFFFFFu, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F80FFFFu };
    for (size_t i = 0; i < VD_ARRAY_LEN(nans); i++) {
        uint16_t got = vd_f32_to_bf16(vdt_f32_of(nans[i]));
        ck_assert_msg(bf16_is_qnan(got), "NaN 0x%08x -> 0x%04x", nans[i], got);
        ck_assert(isnan(vd_bf16_to_f32(got)));
    }
    ck_assert(bf16_is_qnan(vd_f32_to_bf16(NAN)));
    /* every non-NaN bit pattern of a sweep (a stride through all 2^32, odd so
     * that every low half shows up) against the reference */
    uint32_t u = 0;
    for (int i = 0; i < 200000; i++, u += 0x9E3779B1u) {
        float x = vdt_f32_of(u);
        if (isnan(x)) continue;
        uint16_t got = vd_f32_to_bf16(x), want = ref_bf16(x);
        ck_assert_msg(got == want, "0x%08x -> 0x%04x, the reference says 0x%04x", u, got, want);
    }
}
END_TEST

START_TEST(bf16_and_f16_to_f32_are_exact) {
    /* bf16: the bits shifted up; every non-NaN pattern rounds back to itself */
    ck_assert(vd_bf16_to_f32(0x3F80) == 1.0f);
    ck_assert(vd_bf16_to_f32(0xC020) == -2.5f);
    ck_assert(vd_bf16_to_f32(0x0001) == ldexpf(1.0f, -133));    /* smallest subnormal */
    ck_assert(vd_bf16_to_f32(0x7F7F) == ldexpf(255.0f, 120));   /* largest finite */
    ck_assert(isinf(vd_bf16_to_f32(0xFF80)) && vd_bf16_to_f32(0xFF80) < 0);
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float x = vd_bf16_to_f32((uint16_t)h);
        ck_assert_uint_eq(vdt_bits_of(x), h << 16);
        if (!isnan(x)) ck_assert_uint_eq(vd_f32_to_bf16(x), h);
    }
    /* f16: hand-picked values, then every pattern against the closed form
     * (-1)^s (1024 + m) 2^(e - 25) (normal), (-1)^s m 2^-24 (subnormal) */
    ck_assert(vd_f16_to_f32(0x3C00) == 1.0f);
    ck_assert(vd_f16_to_f32(0xC100) == -2.5f);
    ck_assert(vd_f16_to_f32(0x7BFF) == 65504.0f);                /* largest finite */
    ck_assert(vd_f16_to_f32(0x0001) == ldexpf(1.0f, -24));      /* smallest subnormal */
    ck_assert(vd_f16_to_f32(0x03FF) == ldexpf(1023.0f, -24));   /* largest subnormal */
    ck_assert(vd_f16_to_f32(0x0400) == ldexpf(1.0f, -14));      /* smallest normal */
    ck_assert(vd_f16_to_f32(0x3555) == 0.333251953125f);          /* 1365 * 2^-12 */
    ck_assert(isinf(vd_f16_to_f32(0x7C00)) && vd_f16_to_f32(0x7C00) > 0);
    ck_assert(isinf(vd_f16_to_f32(0xFC00)) && vd_f16_to_f32(0xFC00) < 0);
    ck_assert_uint_eq(vdt_bits_of(vd_f16_to_f32(0x8000)), 0x80000000u);   /* -0 */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint32_t s = h >> 15, ex = (h >> 10) & 0x1F, m = h & 0x3FF;
        float got = vd_f16_to_f32((uint16_t)h);
        if (ex == 0x1F) {            /* inf / NaN: sign and payload kept */
            ck_assert_uint_eq(vdt_bits_of(got), s << 31 | 0x7F800000u | m << 13);
            ck_assert(m ? isnan(got) : isinf(got));
            continue;
        }
        double v = ex ? ldexp(1024.0 + m, (int)ex - 25) : ldexp(m, -24);
        float want = (float)(s ? -v : v);     /* exact: at most 11 significant bits */
        ck_assert_msg(vdt_bits_of(got) == vdt_bits_of(want), "f16 0x%04x -> %a, expected %a", h,
                      (double)got, (double)want);
    }
}
END_TEST

VDT_MAIN("util", 0, parse_size_units, checked_arithmetic, suggestions, json_strings, json_layout,
         json_reals_round_trip, json_parse_is_strict,
         atomic_write_replaces_and_leaves_no_temp, rng_is_pcg32, bf16_rounds_to_nearest_even,
         bf16_and_f16_to_f32_are_exact)
