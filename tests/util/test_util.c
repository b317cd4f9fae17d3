/* test_util.c — src/util against hand-computed values. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "util/util.h"
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

START_TEST(json_strings) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    vd_json_str(f, "a\"b\\c\nd\te");
    fclose(f);
    ck_assert_str_eq(buf, "\"a\\\"b\\\\c\\nd\\u0009e\"");
    free(buf);
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
    free(got);
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
    free(dir);
}
END_TEST

START_TEST(rng_is_pcg32) {
    /* PCG32 reference (pcg32_srandom(42, 54)): first outputs of O'Neill's demo */
    vd_rng r;
    vd_rng_seed(&r, 42, 54);
    const uint32_t want[] = {0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu};
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(vd_rng_u32(&r), want[i]);
    /* the dropout hash is a pure function in [0, 1) */
    float u = vd_hash_uniform(1, 2, 3, 4);
    ck_assert(u >= 0.0f && u < 1.0f);
    ck_assert(u == vd_hash_uniform(1, 2, 3, 4));
    ck_assert(u != vd_hash_uniform(1, 2, 3, 5));
}
END_TEST

VDT_MAIN("util", 0, parse_size_units, checked_arithmetic, suggestions, json_strings,
         atomic_write_replaces_and_leaves_no_temp, rng_is_pcg32)
